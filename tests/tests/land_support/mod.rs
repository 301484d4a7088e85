//! Shared set-up of the tests of the guarded path through the `sf` binary: a private working
//! directory with an owned repository of the demo's sample project (`sum.sh`, which skips the
//! first number) and a frozen Slice of the demo's (a harness running the Slice's own test,
//! laid over both trees; the expected sums as digests only), on the real git binary, the
//! real sandbox and a real SQLite file.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use sf_host::canonical::Digest;
use sf_tests::plugins::{Envelope, built, sf};

pub const SUM_BUGGY: &str = include_str!("../../../cli/src/demo/sample/project/sum.sh");
pub const SUM_FIXED: &str = include_str!("../../../cli/src/demo/sample/fix/sum.sh");
pub const SUM_NOT_FIXED: &str = include_str!("../../../cli/src/demo/sample/no-fix/sum.sh");
/// A `sum.sh` that never ends: its runs time out, so its Verdict is Inconclusive.
pub const SUM_LOOPS: &str = "while :; do :; done\n";

/// The demo's Slice, as authored.
pub const SLICE: &[(&str, &str)] = &[
    (
        "slice.json",
        include_str!("../../../cli/src/demo/sample/slice/slice.json"),
    ),
    (
        "acceptance.json",
        include_str!("../../../cli/src/demo/sample/slice/acceptance.json"),
    ),
    (
        "inputs/numbers/numbers.txt",
        include_str!("../../../cli/src/demo/sample/slice/inputs/numbers/numbers.txt"),
    ),
    (
        "inputs/empty/numbers.txt",
        include_str!("../../../cli/src/demo/sample/slice/inputs/empty/numbers.txt"),
    ),
    (
        "harness/run-test.sh",
        include_str!("../../../cli/src/demo/sample/slice/harness/run-test.sh"),
    ),
    (
        "overlay/tests/numbers.sh",
        include_str!("../../../cli/src/demo/sample/slice/overlay/tests/numbers.sh"),
    ),
];

/// The recipe of the tests' Slices: a short timeout, so that a looping Candidate is
/// Inconclusive quickly.
pub const RECIPE: &str = r#"{"timeoutMs":3000,"outputLimit":65536}"#;

/// The flags that name `candidate` under `slice/` in a work's repository.
pub fn on(candidate: &str) -> [&str; 6] {
    [
        "--identity",
        "identity.json",
        "--candidate",
        candidate,
        "--slice",
        "slice",
    ]
}

/// A working directory with a repository and a frozen Slice.
pub struct Work {
    _tmp: tempfile::TempDir,
    pub dir: PathBuf,
    /// Variables every `sf` command of this work gets (an `SF_CONFIG` naming an environment
    /// store the sandbox's user can read, say).
    env: Vec<(String, PathBuf)>,
}

/// The bytes of `path` at `rev` of the Git repository `repo` (a bare one or a `.git`),
/// exactly (no trimming).
pub fn show(repo: &Path, rev: &str, path: &str) -> String {
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(["show", &format!("{rev}:{path}")])
        .output()
        .unwrap();
    assert!(output.status.success(), "git show {rev}:{path}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// A directory every user can search (the sandbox's user reads the environment store when the
/// tests run as root), holding the test's own environment store `environments/` and the
/// `sf.toml` that names it (unset, the store as root is the machine's
/// /var/lib/sf/environments, which every test would share), `home/`, the `HOME` of every sf
/// command of a test that uses environments, and what the test builds its environments from;
/// removed when dropped.
pub struct Public(tempfile::TempDir);

impl Public {
    pub fn new() -> Self {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::Builder::new()
            .prefix("sf-test-environments-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        let public = Self(dir);
        write(
            &public.config(),
            &format!(
                "[environments]\nstore = \"{}\"\ntrees = \"{}\"\n",
                public.store().display(),
                public.path().join("trees").display()
            ),
        );
        public
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// The test's environment store.
    pub fn store(&self) -> PathBuf {
        self.path().join("environments")
    }

    /// The `sf.toml` naming [`Public::store`] as `[environments] store`.
    pub fn config(&self) -> PathBuf {
        self.path().join("sf.toml")
    }

    /// The `sf` command, not yet run, with this directory's `HOME` and `sf.toml`
    /// (`SF_CONFIG`).
    pub fn sf(&self) -> Command {
        let mut command = sf();
        command
            .env("HOME", self.home())
            .env("SF_CONFIG", self.config());
        command
    }

    /// The stored tree of the environment `digest`.
    pub fn stored_tree(&self, digest: &str) -> PathBuf {
        self.store()
            .join("objects")
            .join(digest.trim_start_matches("sha256:"))
            .join("tree")
    }
}

/// Writes `text` at `path`, creating its directories.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// The packages pytest and psf/requests' test modules need, pinned.
pub const PYTEST_PACKAGES: &[&str] = &[
    "pytest==9.2.0",
    "urllib3==2.8.0",
    "idna==3.20",
    "charset-normalizer==3.5.3",
    "certifi==2026.10.19.post1",
];

/// A Python venv with [`PYTEST_PACKAGES`] from the package registry, built with the runtime's
/// interpreter once for every test binary and run (under the tests' target directory, named
/// by a digest of the packages) and read-only afterwards: a build takes tens of seconds, and
/// `sf env add` copies it into each test's own store. Built under a lock, so two test
/// binaries never build it at once, and at the path it is used from (a venv's scripts name
/// their own path), published by a marker file written last.
pub fn pytest_venv() -> PathBuf {
    let name = Digest::of(PYTEST_PACKAGES.join("\n").as_bytes());
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("venvs");
    std::fs::create_dir_all(&dir).unwrap();
    let venv = dir.join(format!("pytest-{}", &name.hex()[..16]));
    let built = dir.join(format!("pytest-{}.built", &name.hex()[..16]));
    let lock = std::fs::File::create(dir.join(".lock")).unwrap();
    lock.lock().unwrap();
    if !built.exists() {
        if venv.exists() {
            std::fs::remove_dir_all(&venv).unwrap();
        }
        let status = Command::new("/usr/bin/python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .unwrap();
        assert!(status.success(), "python3 -m venv: {status}");
        let output = Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(PYTEST_PACKAGES)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "pip install from the package registry: {output:?}"
        );
        std::fs::write(&built, "").unwrap();
    }
    venv
}

impl Work {
    /// A repository of the sample project and the demo's Slice, frozen in `slice/`, and an
    /// open gate in `gate.json`.
    pub fn new() -> Self {
        let work = Self::unfrozen();
        work.author_slice("slice", &[]);
        work.freeze("slice").result();
        work
    }

    /// The repository only.
    pub fn unfrozen() -> Self {
        Self::created(|dir| {
            write(&dir.join("project/sum.sh"), SUM_BUGGY);
            vec!["--from".into(), "project".into()]
        })
    }

    /// A repository whose first base is commit `rev` of the Git repository `source` that
    /// `prepare` makes in the working directory (its path relative to it).
    pub fn from_git(prepare: impl FnOnce(&Path) -> String, rev: &str) -> Self {
        Self::created(|dir| {
            let source = prepare(dir);
            vec!["--from-git".into(), source, format!("--rev={rev}")]
        })
    }

    /// [`Work::from_git`] with the base's upstream recorded: the Git repository `prepare`
    /// makes and its branch `branch` (the base is that branch's tip).
    pub fn from_git_upstream(prepare: impl FnOnce(&Path) -> String, branch: &str) -> Self {
        Self::from_git_upstream_at(prepare, branch, None)
    }

    /// [`Work::from_git_upstream`] with the upstream at `url` rather than the repository
    /// read.
    pub fn from_git_upstream_at(
        prepare: impl FnOnce(&Path) -> String,
        branch: &str,
        url: Option<&str>,
    ) -> Self {
        Self::created(|dir| {
            let source = prepare(dir);
            let mut args = vec![
                "--from-git".into(),
                source,
                format!("--rev={branch}"),
                format!("--upstream-branch={branch}"),
            ];
            if let Some(url) = url {
                args.push(format!("--upstream={url}"));
            }
            args
        })
    }

    /// `sf repo create` with the source arguments `source` gives.
    fn created(source: impl FnOnce(&Path) -> Vec<String>) -> Self {
        let (tmp, dir) = sf_tests::private_dir();
        write(&dir.join("gate.json"), "{\"proceed\": true}\n");
        let from = source(&dir);
        let work = Self {
            _tmp: tmp,
            dir,
            env: Vec::new(),
        };
        let mut args = vec![
            "repo",
            "create",
            "--path",
            "repo.git",
            "--product",
            "sum",
            "--target",
            "refs/heads/main",
            "--identity-out",
            "identity.json",
        ];
        args.extend(from.iter().map(String::as_str));
        work.sf(&args).result();
        work
    }

    /// Writes the demo's Slice into `name`, with `changes` (relative path, text) written
    /// over it (an empty text removes the file).
    pub fn author_slice(&self, name: &str, changes: &[(&str, &str)]) -> PathBuf {
        let slice = self.dir.join(name);
        for (path, text) in SLICE {
            write(&slice.join(path), text);
        }
        write(&slice.join("recipe.json"), RECIPE);
        for (path, text) in changes {
            if text.is_empty() {
                std::fs::remove_file(slice.join(path)).unwrap();
                // And the directories it leaves empty.
                let mut parent = slice.join(path);
                while parent.pop() && parent != slice {
                    if std::fs::remove_dir(&parent).is_err() {
                        break;
                    }
                }
            } else {
                write(&slice.join(path), text);
            }
        }
        slice
    }

    /// `sf slice freeze --dir <name>`.
    pub fn freeze(&self, name: &str) -> Envelope {
        self.sf(&[
            "slice",
            "freeze",
            "--dir",
            name,
            "--identity",
            "identity.json",
        ])
    }

    /// `sf --config CONFIG slice freeze --dir <name>`: a Slice frozen for the backends
    /// `CONFIG` (a file of the working directory) names, its executor among them.
    pub fn freeze_configured(&self, name: &str, config: &str) -> Envelope {
        self.sf(&[
            "--config",
            config,
            "slice",
            "freeze",
            "--dir",
            name,
            "--identity",
            "identity.json",
        ])
    }

    /// `sf --json ARGS` in the working directory.
    pub fn sf(&self, args: &[&str]) -> Envelope {
        Envelope::parse(self.command(args).output().unwrap())
    }

    /// `sf --json ARGS` of a command that decides (land, judge --exit-code).
    pub fn sf_decided(&self, args: &[&str]) -> Envelope {
        Envelope::parse_decided(self.command(args).output().unwrap())
    }

    /// This work, with `public`'s `HOME` and `sf.toml` (`SF_CONFIG`, so its environment
    /// store) for every `sf` command.
    pub fn with_public(self, public: &Public) -> Self {
        self.with_env("HOME", &public.home())
            .with_env("SF_CONFIG", &public.config())
    }

    /// This work, with `name=value` in the environment of every `sf` command.
    pub fn with_env(mut self, name: &str, value: &Path) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The `sf --json ARGS` command, not yet run.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = sf();
        command
            .current_dir(&self.dir)
            .envs(self.env.iter().map(|(name, value)| (name, value)))
            .arg("--json")
            .args(args);
        command
    }

    /// `sf seal` under `slice` of a proposal `name` of `edits` (a JSON array).
    pub fn seal_edits(&self, slice: &str, name: &str, edits: serde_json::Value) -> Envelope {
        let proposal = self.proposal(name, serde_json::json!({ "edits": edits }));
        self.seal_file(slice, &proposal)
    }

    /// `sf seal` under `slice` of the proposal file `proposal`.
    pub fn seal_file(&self, slice: &str, proposal: &Path) -> Envelope {
        self.sf(&[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            slice,
            "--proposal",
            proposal.to_str().unwrap(),
        ])
    }

    /// `sf seal` under `slice` of a proposal writing `text` over `path`, whose bytes are
    /// `prior` now; the Candidate's digest.
    pub fn seal_text(
        &self,
        slice: &str,
        path: &str,
        prior: &str,
        name: &str,
        text: &str,
    ) -> String {
        let edits = serde_json::json!([{
            "path": path, "prior": Digest::of(prior.as_bytes()).to_string(), "text": text,
        }]);
        self.seal_edits(slice, name, edits).result()["digest"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `sf COMMAND` of `candidate` under `slice`.
    fn on_candidate(&self, command: &str, candidate: &str, slice: &str) -> Envelope {
        self.sf(&[
            command,
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            slice,
        ])
    }

    /// `sf collect` of `candidate` under `slice`.
    pub fn collect(&self, candidate: &str, slice: &str) -> Envelope {
        self.on_candidate("collect", candidate, slice)
    }

    /// `sf collect` and then `sf judge` of `candidate` under `slice`; the Verdict's JSON.
    pub fn collect_and_judge(&self, candidate: &str, slice: &str) -> serde_json::Value {
        self.collect(candidate, slice).result();
        self.on_candidate("judge", candidate, slice).result()["verdict"].clone()
    }

    /// The `sf ARGS` command (its text output), not yet run.
    pub fn text_command(&self, args: &[&str]) -> Command {
        let mut command = sf();
        command.current_dir(&self.dir).args(args);
        command
    }

    /// The test build of `sf` that kills itself at `point` (`SF_TEST_KILL_AT`).
    pub fn faulty(&self, point: &str, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_sf-faulty"));
        command
            .current_dir(&self.dir)
            .env("SF_PLUGIN_PATH", built().sf.parent().unwrap())
            .env("SF_TEST_KILL_AT", point)
            .arg("--json")
            .args(args);
        command
    }

    /// Writes a proposal replacing `sum.sh` with `sum`.
    pub fn sum_proposal(&self, name: &str, sum: &str) -> PathBuf {
        self.proposal(
            name,
            serde_json::json!({"edits": [{
                "path": "sum.sh",
                "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
                "text": sum,
            }]}),
        )
    }

    /// Writes a proposal.
    pub fn proposal(&self, name: &str, proposal: serde_json::Value) -> PathBuf {
        let path = self.dir.join("proposals").join(format!("{name}.json"));
        write(&path, &proposal.to_string());
        path
    }

    /// `sf seal --slice <slice>` of a proposal replacing `sum.sh` with `sum`; its digest.
    pub fn seal(&self, slice: &str, sum: &str) -> String {
        let proposal = self.sum_proposal(&Digest::of(sum.as_bytes()).hex()[..12], sum);
        let sealed = self.seal_file(slice, &proposal);
        sealed.result()["digest"].as_str().unwrap().to_owned()
    }

    /// `sf land` of `candidate` under `slice` behind `gate.json`, with `extra` flags.
    pub fn land(&self, candidate: &str, slice: &str, extra: &[&str]) -> Envelope {
        let mut args = vec![
            "land",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            slice,
            "--gate",
            "gate.json",
        ];
        args.extend_from_slice(extra);
        self.sf_decided(&args)
    }

    /// Seals the fix and collects it (once: later calls reuse it), and prepares occurrence
    /// `occurrence` of action `action` from its Verified Verdict; the prepared record's path.
    pub fn verified_intent(&self, action: &str, occurrence: u64) -> PathBuf {
        let marker = self.dir.join("verified-candidate");
        let candidate = match std::fs::read_to_string(&marker) {
            Ok(candidate) => candidate,
            Err(_) => {
                let candidate = self.seal("slice", SUM_FIXED);
                self.sf(&[
                    "collect",
                    "--identity",
                    "identity.json",
                    "--candidate",
                    &candidate,
                    "--slice",
                    "slice",
                ])
                .result();
                std::fs::write(&marker, &candidate).unwrap();
                candidate
            }
        };
        self.prepare(&candidate, action, occurrence)
    }

    /// Prepares occurrence `occurrence` of action `action` for `candidate` from its Verified
    /// Verdict under `slice/`; the prepared record's path.
    pub fn prepare(&self, candidate: &str, action: &str, occurrence: u64) -> PathBuf {
        let prepared = self
            .dir
            .join(format!("prepared-{action}-{occurrence}.json"));
        self.sf(&[
            "integrate",
            "prepare",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
            "--action",
            action,
            "--occurrence",
            &occurrence.to_string(),
            "--owner",
            "owner-1",
            "--generation",
            "1",
            "--prepared-out",
            prepared.to_str().unwrap(),
        ])
        .result();
        prepared
    }

    /// What the target ref names now.
    pub fn target(&self) -> String {
        git(
            &self.dir.join("repo.git"),
            &["rev-parse", "refs/heads/main"],
        )
    }

    /// The initial commit.
    pub fn initial(&self) -> String {
        let identity: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.dir.join("identity.json")).unwrap())
                .unwrap();
        identity["initial"].as_str().unwrap().to_owned()
    }

    /// How many integrations of the repository hold a dispatch claim.
    pub fn dispatches(&self) -> usize {
        let refs = git(
            &self.dir.join("repo.git"),
            &[
                "for-each-ref",
                "--format=%(refname)",
                "refs/sf/integrations/",
            ],
        );
        refs.lines()
            .filter(|name| name.ends_with("/dispatch"))
            .count()
    }

    /// A hash of the repository and the Slice directory `slice`: equal hashes mean nothing
    /// was written to either.
    pub fn hash(&self, slice: &str) -> (String, String) {
        (
            sf_tests::tree_hash(&self.dir.join("repo.git")),
            sf_tests::tree_hash(&self.dir.join(slice)),
        )
    }
}

/// The team's project as a work tree `team-work` in `dir`, on `main`: a first commit with a
/// README, a second adding the buggy `sum.sh`. Returns its path.
pub fn team_project(dir: &Path) -> PathBuf {
    let work = dir.join("team-work");
    std::fs::create_dir_all(&work).unwrap();
    let run = |args: &[&str]| team_git(&work, args);
    run(&["init", "-q", "-b", "main"]);
    write(&work.join("README"), "the team's project\n");
    run(&["add", "."]);
    run(&["commit", "-q", "-m", "start"]);
    write(&work.join("sum.sh"), SUM_BUGGY);
    run(&["add", "."]);
    run(&["commit", "-q", "-m", "sum"]);
    work
}

/// Runs the real git in the work tree `work` as the team (its name and address set), and
/// asserts it succeeded.
pub fn team_git(work: &Path, args: &[&str]) {
    let output = Command::new("git")
        .current_dir(work)
        .args(["-c", "user.name=Team", "-c", "user.email=team@example.org"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
}

/// Reads `repo` with the real git (a test's view, not sf's).
pub fn git(repo: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}
