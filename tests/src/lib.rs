//! sf-tests: shared helpers for the cross-crate tests: private directories, repositories over
//! the real git binary, frozen inputs and proposals, and a whole-tree hash to prove that a
//! refused operation wrote nothing.

#![forbid(unsafe_code)]

pub mod faulty;
pub mod linked;
pub mod plugins;

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sf_host::canonical::Digest;
use sf_host::contracts::ObjectStoreFactory;
use sf_host::repository::{
    CreateRepository, FileEdit, FrozenInputs, InitialBase, Proposal, Repository,
    RepositoryIdentity, RepositoryOptions, RepositorySettings, Slice, SourceFile,
    create_repository, open_repository,
};

pub use sf_test_support::private_dir;

/// Where sf keeps the environment store as root when `[environments] store` is not set.
pub const DEFAULT_ENVIRONMENT_STORE_AS_ROOT: &str = "/var/lib/sf/environments";

/// The lock, held until the file is dropped, of the tests that run `sf env` with no store
/// configured, which as root reaches the machine's [`DEFAULT_ENVIRONMENT_STORE_AS_ROOT`]:
/// one of them creates it and removes it again, and a list meanwhile in another test binary
/// could find it half made (its root without `objects/`), which is not an environment store.
pub fn default_environment_store_lock() -> std::fs::File {
    let lock =
        std::fs::File::create(std::env::temp_dir().join("sf-tests-default-environment-store.lock"))
            .expect("the default environment store's lock file");
    lock.lock().expect("locking the default environment store");
    lock
}

/// The git-cli store factory with its default (pinned, root-owned) git binary.
pub fn git_factory() -> Arc<dyn ObjectStoreFactory> {
    Arc::new(
        sf_git_cli::GitCliFactory::new(sf_git_cli::GitCliConfig::default())
            .expect("git-cli factory"),
    )
}

/// Source texts from `(path, text)` pairs.
pub fn texts(files: &[(&str, &str)]) -> Vec<SourceFile> {
    files
        .iter()
        .map(|(path, text)| SourceFile::text(*path, *text))
        .collect()
}

/// A repository over a store factory, in a private directory that lives as long as it does.
pub struct TestRepo {
    pub dir: tempfile::TempDir,
    pub parent: PathBuf,
    pub path: PathBuf,
    pub factory: Arc<dyn ObjectStoreFactory>,
    pub identity: RepositoryIdentity,
    pub repo: Repository,
}

impl TestRepo {
    /// Creates `repo` under a fresh private directory, with `files` on `refs/heads/main`.
    pub fn create(
        factory: Arc<dyn ObjectStoreFactory>,
        product: &str,
        files: &[(&str, &str)],
    ) -> Self {
        Self::create_with(
            factory,
            product,
            InitialBase::Files(texts(files)),
            RepositorySettings::default(),
        )
    }

    /// Creates a repository whose first base is `base`, recording `settings`.
    pub fn create_with(
        factory: Arc<dyn ObjectStoreFactory>,
        product: &str,
        base: InitialBase,
        settings: RepositorySettings,
    ) -> Self {
        let (dir, parent) = private_dir();
        let path = parent.join("repo");
        let identity = create_repository(
            factory.as_ref(),
            &CreateRepository {
                path: path.to_str().expect("UTF-8 path").into(),
                product_id: product.into(),
                target_ref: "refs/heads/main".into(),
                base,
                settings,
            },
            &RepositoryOptions::default(),
        )
        .expect("create repository");
        let repo = open_repository(factory.as_ref(), &identity, RepositoryOptions::default())
            .expect("open repository");
        Self {
            dir,
            parent,
            path,
            factory,
            identity,
            repo,
        }
    }

    /// Creates a repository over the real git binary.
    pub fn git(files: &[(&str, &str)]) -> Self {
        Self::create(git_factory(), "product-1", files)
    }

    /// Opens another handle on the same repository.
    pub fn reopen(&self) -> Repository {
        open_repository(
            self.factory.as_ref(),
            &self.identity,
            RepositoryOptions::default(),
        )
        .expect("reopen")
    }

    /// The whole on-disk tree's hash.
    pub fn tree_hash(&self) -> String {
        tree_hash(&self.path)
    }
}

/// Frozen inputs on `base` with `scope` and fixed placeholder digests (a Slice digest among
/// them), protecting nothing.
pub fn frozen(base: sf_host::git_object::ObjectId, scope: &[&str]) -> FrozenInputs {
    FrozenInputs {
        forbidden: Vec::new(),
        closed_paths: Default::default(),
        base,
        slice: Slice {
            id: "slice-1".into(),
            revision: 1,
        },
        scope: scope.iter().map(|path| (*path).to_owned()).collect(),
        acceptance: Digest::of(b"acceptance"),
        recipe: Digest::of(b"recipe"),
        environment: Digest::of(b"environment"),
        binding: Some(sf_host::repository::SliceBinding {
            digest: Digest::of(b"slice"),
            protected: Vec::new(),
        }),
        bounds: sf_host::repository::ProposalBounds::DEFAULT,
    }
}

/// Frozen inputs as JSON, for a child process to read back ([`frozen_from_json`]).
pub fn frozen_to_json(frozen: &FrozenInputs) -> serde_json::Value {
    let binding = frozen.binding.as_ref().expect("sealable frozen inputs");
    serde_json::json!({
        "base": frozen.base.to_hex(),
        "slice": {"id": frozen.slice.id, "revision": frozen.slice.revision},
        "scope": frozen.scope,
        "acceptance": frozen.acceptance.to_string(),
        "recipe": frozen.recipe.to_string(),
        "environment": frozen.environment.to_string(),
        "sliceDigest": binding.digest.to_string(),
        "protected": binding.protected,
        "bounds": {"edits": frozen.bounds.edits, "bytes": frozen.bounds.bytes},
    })
}

/// The frozen inputs [`frozen_to_json`] wrote.
pub fn frozen_from_json(bytes: &[u8]) -> Result<FrozenInputs, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let text = |pointer: &str| {
        value
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| format!("{pointer} is not a string"))
    };
    let digest = |pointer: &str| {
        text(pointer).and_then(|t| Digest::parse(t).ok_or_else(|| format!("{pointer}: digest")))
    };
    let strings = |key: &str| -> Vec<String> {
        value[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|item| item.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(FrozenInputs {
        forbidden: Vec::new(),
        closed_paths: Default::default(),
        base: sf_host::git_object::ObjectId::parse_hex(text("/base")?).ok_or("base: object id")?,
        slice: Slice {
            id: text("/slice/id")?.to_owned(),
            revision: value["slice"]["revision"].as_u64().ok_or("revision")?,
        },
        scope: strings("scope"),
        acceptance: digest("/acceptance")?,
        recipe: digest("/recipe")?,
        environment: digest("/environment")?,
        binding: Some(sf_host::repository::SliceBinding {
            digest: digest("/sliceDigest")?,
            protected: strings("protected"),
        }),
        bounds: sf_host::repository::ProposalBounds {
            edits: value["bounds"]["edits"].as_u64().ok_or("bounds.edits")?,
            bytes: value["bounds"]["bytes"].as_u64().ok_or("bounds.bytes")?,
        },
    })
}

/// An edit replacing `prior_text` (or creating, when `None`) with `text` (or deleting).
pub fn edit(path: &str, prior_text: Option<&str>, text: Option<&str>) -> FileEdit {
    FileEdit::text(
        path,
        prior_text.map(|prior| Digest::of(prior.as_bytes())),
        text.map(str::to_owned),
    )
}

/// A proposal of `edits`.
pub fn proposal(edits: Vec<FileEdit>) -> Proposal {
    Proposal::new(edits)
}

/// A hash of everything under `root` (not following links): each entry's relative path,
/// type, permission bits, owner, link count, size, and content or link target. Two equal
/// hashes mean nothing was written, created, removed, re-permissioned or relinked.
pub fn tree_hash(root: &Path) -> String {
    use sha2::{Digest as _, Sha256};
    let mut hasher = Sha256::new();
    let mut stack = vec![root.to_path_buf()];
    let mut entries = Vec::new();
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).expect("lstat");
        let relative = path
            .strip_prefix(root)
            .expect("under root")
            .to_string_lossy()
            .into_owned();
        let kind = meta.file_type();
        let mut line = format!(
            "{relative}\0{:o}\0{}\0{}\0{}\0",
            meta.mode(),
            meta.uid(),
            meta.nlink(),
            meta.len()
        );
        if kind.is_dir() {
            for child in std::fs::read_dir(&path).expect("read_dir") {
                stack.push(child.expect("dir entry").path());
            }
        } else if kind.is_symlink() {
            line.push_str(
                &std::fs::read_link(&path)
                    .expect("readlink")
                    .to_string_lossy(),
            );
        } else if kind.is_file() {
            line.push_str(&hex::encode(Sha256::digest(
                std::fs::read(&path).expect("read"),
            )));
        }
        entries.push(line);
    }
    entries.sort();
    for entry in entries {
        hasher.update(entry.as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

/// An integration payload for `sealed` in `identity`'s repository, for action `action`
/// occurrence `occurrence`.
pub fn payload(
    identity: &RepositoryIdentity,
    sealed: &sf_host::repository::SealedCandidate,
    action: &str,
    occurrence: u64,
) -> sf_host::repository::IntegrationPayload {
    use sf_host::repository::{Action, IntegrationPayload, Owner};
    IntegrationPayload {
        action: Action {
            id: action.into(),
            occurrence,
        },
        product: identity.product_id.clone(),
        slice: sealed.manifest.slice.clone(),
        repository: identity.clone(),
        target_ref: identity.target_ref.clone(),
        base: sealed.manifest.base_commit,
        commit: sealed.manifest.commit,
        candidate: sealed.digest.clone(),
        proof: Digest::of(b"proof"),
        owner: Owner {
            id: "owner-1".into(),
            generation: 1,
        },
    }
}

/// A proof that admits exactly `prepared`, assumed without evidence (the feature `testing` of
/// sf-collector, which only this crate enables): for the tests of the integration's own
/// failure semantics, which move a target without a collection. Every other path to a proof
/// is the judge's.
pub fn assumed(
    prepared: &sf_host::repository::PreparedIntegration,
) -> sf_collector::judging::Verified {
    let payload = &prepared.payload;
    sf_collector::judging::Verified::assumed(sf_collector::judging::Admits {
        candidate: payload.candidate.clone(),
        base: payload.base,
        commit: payload.commit,
        slice: payload.slice.clone(),
        proof: payload.proof.clone(),
    })
}

/// Writes `value`'s canonical JSON to `path`.
pub fn write_json(path: &Path, value: &sf_host::canonical::Value) {
    std::fs::write(
        path,
        sf_host::canonical::encode(value).expect("canonical JSON"),
    )
    .expect("write JSON");
}

/// Writes what a `sf-test-child seal` needs into `work`: `identity.json`, `frozen.json` and
/// `proposal.json`. Write once, before any child that reads them starts.
pub fn write_seal_inputs(
    work: &Path,
    identity: &RepositoryIdentity,
    inputs: &FrozenInputs,
    edits: &Proposal,
) {
    std::fs::write(work.join("identity.json"), identity.to_canonical_bytes())
        .expect("write identity");
    std::fs::write(work.join("frozen.json"), frozen_to_json(inputs).to_string())
        .expect("write frozen inputs");
    write_json(&work.join("proposal.json"), &edits.to_value());
}

/// A `sf-test-child seal` command over the inputs [`write_seal_inputs`] wrote into `work`.
/// `child` is the test child binary (`env!("CARGO_BIN_EXE_sf-test-child")` in a test).
pub fn seal_command(child: &str, work: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(child);
    command
        .arg("seal")
        .args(["identity.json", "frozen.json", "proposal.json"].map(|file| work.join(file)));
    command
}

/// Plain git (the test's own tool, never sf's) in `dir`, isolated from the machine's
/// configuration, with fixed identities and dates so that commits are reproducible; `input`
/// on stdin. Panics, with git's stderr, unless it succeeds; returns stdout.
pub fn plain_git(dir: &std::path::Path, args: &[&str], input: &[u8]) -> Vec<u8> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args([
            "-c",
            "init.defaultBranch=main",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_DATE", "1700000000 +0100")
        .env("GIT_COMMITTER_DATE", "1700000000 +0100")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running git");
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input).expect("writing to git");
    }
    let output = child.wait_with_output().expect("waiting for git");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// How many objects the repository at `root` holds, loose and packed (`git count-objects`).
pub fn stored_objects(root: &Path) -> usize {
    let git_dir = root.to_str().expect("a UTF-8 path");
    let out = plain_git(root, &["--git-dir", git_dir, "count-objects", "-v"], b"");
    String::from_utf8(out)
        .expect("text")
        .lines()
        .filter_map(|line| {
            let (field, value) = line.split_once(": ")?;
            matches!(field, "count" | "in-pack").then(|| value.parse::<usize>().ok())?
        })
        .sum()
}

/// Turns every pack of the repository at `root` into loose objects, so that a test can
/// tamper with one object's file: each pack is moved out of the object database, unpacked
/// back into it, and removed.
pub fn loosen_objects(root: &Path) {
    let packs = root.join("objects/pack");
    let aside = root.with_extension("packs-aside");
    std::fs::create_dir_all(&aside).unwrap();
    for entry in std::fs::read_dir(&packs).unwrap() {
        let path = entry.unwrap().path();
        std::fs::rename(&path, aside.join(path.file_name().unwrap())).unwrap();
    }
    let git_dir = root.to_str().expect("a UTF-8 path");
    for entry in std::fs::read_dir(&aside).unwrap() {
        let path = entry.unwrap().path();
        if path
            .extension()
            .is_some_and(|extension| extension == "pack")
        {
            let pack = std::fs::read(&path).unwrap();
            plain_git(root, &["--git-dir", git_dir, "unpack-objects", "-q"], &pack);
        }
    }
    std::fs::remove_dir_all(&aside).unwrap();
}

/// A bundle of the shared fixtures (`requests.bundle`, `typing_extensions.bundle`): where
/// `SF_FIXTURE_REPOS` names, else beside the checkout (`../shared/fixtures/repos`), else the
/// machine's `/work/shared/fixtures/repos`. A missing fixture fails the test: it never skips.
pub fn fixture_bundle(name: &str) -> PathBuf {
    let candidates: Vec<PathBuf> = std::env::var_os("SF_FIXTURE_REPOS")
        .map(PathBuf::from)
        .into_iter()
        .chain([
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/repos"),
            PathBuf::from("/work/shared/fixtures/repos"),
        ])
        .collect();
    candidates
        .iter()
        .map(|dir| dir.join(name))
        .find(|bundle| bundle.is_file())
        .unwrap_or_else(|| {
            panic!(
                "the fixture {name} is missing from {candidates:?}: the real-repository tests \
                 need the shared fixtures (or SF_FIXTURE_REPOS)"
            )
        })
}

/// A bare clone of the fixture bundle `name` at `dir/<name without .bundle>`, and the commits
/// of its `main` on the first-parent line, newest first.
pub fn clone_fixture(dir: &Path, name: &str) -> (PathBuf, Vec<String>) {
    let clone = dir.join(name.trim_end_matches(".bundle"));
    plain_git(
        dir,
        &[
            "clone",
            "-q",
            "--bare",
            fixture_bundle(name).to_str().expect("UTF-8 fixture path"),
            clone.to_str().expect("UTF-8 clone path"),
        ],
        &[],
    );
    let listing = plain_git(&clone, &["rev-list", "--first-parent", "main"], &[]);
    let commits = String::from_utf8(listing)
        .expect("rev-list prints hex")
        .lines()
        .map(str::to_owned)
        .collect();
    (clone, commits)
}

/// The leaves of the tree `git archive` writes for `rev` of `repo`, extracted by `tar` into
/// `scratch` and read back from disk: each path's mode (executable when the owner may
/// execute it) and bytes, or a link's target. An independent view of a commit's tree to
/// compare sf's with.
pub fn archived_leaves(
    repo: &Path,
    rev: &str,
    scratch: &Path,
) -> std::collections::BTreeMap<String, (sf_host::contracts::tree_path::EntryMode, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt as _;
    use std::process::{Command, Stdio};

    use sf_host::contracts::tree_path::EntryMode;

    fn walk(
        dir: &Path,
        prefix: &str,
        leaves: &mut std::collections::BTreeMap<String, (EntryMode, Vec<u8>)>,
    ) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let path = format!("{prefix}{name}");
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(entry.path()).unwrap();
                leaves.insert(
                    path,
                    (
                        EntryMode::Symlink,
                        target.into_os_string().into_encoded_bytes(),
                    ),
                );
            } else if meta.is_dir() {
                walk(&entry.path(), &format!("{path}/"), leaves);
            } else {
                let mode = if meta.permissions().mode() & 0o100 != 0 {
                    EntryMode::Executable
                } else {
                    EntryMode::Regular
                };
                leaves.insert(path, (mode, std::fs::read(entry.path()).unwrap()));
            }
        }
    }

    let out = scratch.join(format!("archive-{rev}"));
    std::fs::create_dir_all(&out).unwrap();
    let tar = plain_git(repo, &["archive", "--format=tar", rev], &[]);
    let mut child = Command::new("tar")
        .args(["-x", "-f", "-", "-C"])
        .arg(&out)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &tar).unwrap();
    assert!(
        child.wait().unwrap().success(),
        "tar extracts git archive of {rev}"
    );
    let mut leaves = std::collections::BTreeMap::new();
    walk(&out, "", &mut leaves);
    leaves
}
