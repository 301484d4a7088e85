//! End to end through the `sf` binary, with git-cli loaded as a plugin from the directory of
//! `sf` (the embedded default configuration): `repo create`, `snapshot`, `seal` and `export` on
//! a fresh directory, every `--json` envelope parsed; a bad proposal is refused with its reason
//! and leaves the repository byte-identical.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sf_host::canonical::Digest;
use sf_host::repository::{RepositoryOptions, open_repository, parse_repository_identity};
use sf_tests::plugins::{Envelope, run_json, sf};
use sf_tests::{git_factory, private_dir, tree_hash};

struct Workspace {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Workspace {
    fn new() -> Self {
        let (dir, root) = private_dir();
        let source = root.join("source");
        std::fs::create_dir_all(source.join("src/nested")).unwrap();
        std::fs::write(source.join("README.md"), "# demo\n").unwrap();
        std::fs::write(source.join("src/a.txt"), "alpha\n").unwrap();
        std::fs::write(source.join("src/nested/b.txt"), "beta \u{e9}\r\n").unwrap();
        Self { _dir: dir, root }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    fn write_json(&self, name: &str, value: &Value) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, serde_json::to_vec(value).unwrap()).unwrap();
        path
    }

    fn create(&self) -> Envelope {
        run_json(
            sf().args(["repo", "create", "--json", "--product", "demo"])
                .args(["--target", "refs/heads/main", "--path"])
                .arg(self.path("repo"))
                .arg("--from")
                .arg(self.path("source"))
                .arg("--identity-out")
                .arg(self.path("identity.json")),
        )
    }

    fn seal(&self, slice: &Path, proposal: &Path) -> Envelope {
        run_json(
            sf().args(["seal", "--json", "--identity"])
                .arg(self.path("identity.json"))
                .arg("--slice")
                .arg(slice)
                .arg("--proposal")
                .arg(proposal),
        )
    }

    /// A frozen Slice with scope `src`.
    fn freeze(&self) -> PathBuf {
        sf_tests::plugins::freeze_minimal_slice(&self.root, &self.path("identity.json"), &["src"])
    }
}

fn sha256(text: &str) -> String {
    Digest::of(text.as_bytes()).to_string()
}

#[test]
fn create_seal_and_export_through_the_binary() {
    let work = Workspace::new();
    let created = work.create();
    let identity = created.result();
    assert_eq!(identity["productId"], "demo");
    assert_eq!(identity["targetRef"], "refs/heads/main");
    assert_eq!(identity["protocol"], "sf-repository/2");
    assert_eq!(identity["settings"]["maxFiles"], 100_000);
    assert_eq!(identity["settings"]["allowCaseCollisions"], false);
    assert_eq!(
        Path::new(identity["path"].as_str().unwrap()),
        work.path("repo")
    );
    // The identity file holds the same record, canonically.
    let file = std::fs::read(work.path("identity.json")).unwrap();
    let parsed = parse_repository_identity(&file).unwrap();
    assert_eq!(&serde_json::from_slice::<Value>(&file).unwrap(), identity);

    // The snapshot gives the priors.
    let snapshot = run_json(
        sf().args(["snapshot", "--json", "--identity"])
            .arg(work.path("identity.json")),
    );
    let listed = snapshot.result();
    assert_eq!(listed["commit"], identity["initial"]);
    let files: Vec<(&str, &str, u64)> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| {
            (
                file["path"].as_str().unwrap(),
                file["sha256"].as_str().unwrap(),
                file["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            ("README.md", sha256("# demo\n").as_str(), 7),
            ("src/a.txt", sha256("alpha\n").as_str(), 6),
            ("src/nested/b.txt", sha256("beta \u{e9}\r\n").as_str(), 9),
        ]
    );

    let frozen = work.freeze();
    let proposal = work.write_json(
        "proposal.json",
        &json!({"edits": [
            {"path": "src/a.txt", "prior": sha256("alpha\n"), "text": "ALPHA\n"},
            {"path": "src/nested/b.txt", "prior": sha256("beta \u{e9}\r\n"), "text": null},
            {"path": "src/c.txt", "prior": null, "text": "gamma\n\ttab\n"},
        ]}),
    );
    let sealed = work.seal(&frozen, &proposal);
    let result = sealed.result().clone();
    for field in ["digest", "commit", "tree", "treeDigest"] {
        assert!(
            result[field].is_string(),
            "seal result lacks {field}: {result}"
        );
    }
    let digest = result["digest"].as_str().unwrap().to_owned();

    // The binary's Candidate is the one the library exports over the same repository.
    let repository = open_repository(
        git_factory().as_ref(),
        &parsed,
        RepositoryOptions::default(),
    )
    .unwrap();
    let exported = repository
        .export_candidate(&Digest::parse(&digest).unwrap())
        .unwrap();
    assert_eq!(result["commit"], exported.manifest.commit.to_hex());
    assert_eq!(result["tree"], exported.manifest.tree.to_hex());
    assert_eq!(
        result["treeDigest"],
        exported.content_digest().unwrap().to_string()
    );

    // Sealing the same inputs again replays the Candidate and writes nothing.
    let before = tree_hash(&work.path("repo"));
    assert_eq!(
        work.seal(&frozen, &proposal).result()["digest"],
        digest.as_str()
    );
    assert_eq!(tree_hash(&work.path("repo")), before);

    // Export writes the files exactly into a fresh directory.
    let out = work.path("out");
    let export = run_json(
        sf().args(["export", "--json", "--identity"])
            .arg(work.path("identity.json"))
            .args(["--candidate", &digest, "--out"])
            .arg(&out),
    );
    assert_eq!(export.result()["digest"], digest.as_str());
    assert_eq!(export.result()["treeDigest"], result["treeDigest"]);
    let mut written = Vec::new();
    for entry in walk(&out) {
        let relative = entry
            .strip_prefix(&out)
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        written.push((relative, std::fs::read(&entry).unwrap()));
    }
    written.sort();
    assert_eq!(
        written,
        [
            ("README.md".to_owned(), b"# demo\n".to_vec()),
            ("src/a.txt".to_owned(), b"ALPHA\n".to_vec()),
            ("src/c.txt".to_owned(), b"gamma\n\ttab\n".to_vec()),
        ]
    );

    // Exporting again into the now non-empty directory is refused, and changes nothing.
    let out_before = tree_hash(&out);
    let again = run_json(
        sf().args(["export", "--json", "--identity"])
            .arg(work.path("identity.json"))
            .args(["--candidate", &digest, "--out"])
            .arg(&out),
    );
    assert_eq!(again.error_code(), "exists");
    assert!(again.error_message().contains("--out"));
    assert_eq!(tree_hash(&out), out_before);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn a_bad_proposal_is_refused_with_its_reason_and_writes_nothing() {
    let work = Workspace::new();
    let created = work.create();
    created.result();
    let frozen = work.freeze();
    let before = tree_hash(&work.path("repo"));
    for (proposal, reason) in [
        (
            json!({"edits": [{"path": "src/a.txt", "prior": sha256("not the text"), "text": "x"}]}),
            "wrong-prior",
        ),
        (
            json!({"edits": [{"path": "README.md", "prior": sha256("# demo\n"), "text": "x"}]}),
            "outside-scope",
        ),
        (
            json!({"edits": [{"path": "src/a.txt", "prior": null, "text": "x"}], "passed": true}),
            "unknown-field",
        ),
        (
            json!({"edits": [{"path": "src/../etc", "prior": null, "text": "x"}]}),
            "dot-segment",
        ),
    ] {
        let file = work.write_json("bad-proposal.json", &proposal);
        let refused = work.seal(&frozen, &file);
        assert_eq!(refused.error_code(), "rejected", "{reason}");
        assert_eq!(refused.code, Some(1));
        let message = refused.error_message();
        assert!(message.contains(reason), "{reason}: {message}");
        assert!(message.contains("--proposal"), "{message}");
        assert_eq!(
            tree_hash(&work.path("repo")),
            before,
            "{reason} wrote something"
        );
    }

    // The same refusal without --json: readable text on stderr, nothing on stdout.
    let output = sf()
        .args(["seal", "--identity"])
        .arg(work.path("identity.json"))
        .arg("--slice")
        .arg(&frozen)
        .arg("--proposal")
        .arg(work.path("bad-proposal.json"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("sf: error (rejected)"), "{stderr}");
    assert_eq!(tree_hash(&work.path("repo")), before);
}
