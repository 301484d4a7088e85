//! `sf export` never writes through a symbolic link: a link planted at `--out`, in the path to
//! it, or inside the staging directory while the files are being written (by a second thread
//! that watches for the staging directory) is refused with the path named, nothing is written
//! outside, and nothing is left behind.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use sf_host::canonical::Digest;
use sf_tests::plugins::{Envelope, run_json, sf};
use sf_tests::{private_dir, tree_hash};

/// Files of the source's `src/` directory: enough that writing them (each synced) leaves a
/// second thread time to plant a link before the last one.
const FILES: usize = 150;

/// A repository with a sealed Candidate, and a directory outside that nothing may reach.
struct Exported {
    _dir: tempfile::TempDir,
    root: PathBuf,
    digest: String,
    outside: PathBuf,
}

fn last_file() -> String {
    format!("f{:03}.txt", FILES - 1)
}

impl Exported {
    fn new() -> Self {
        let (dir, root) = private_dir();
        let source = root.join("source/src");
        std::fs::create_dir_all(&source).unwrap();
        for n in 0..FILES {
            std::fs::write(source.join(format!("f{n:03}.txt")), format!("{n}\n")).unwrap();
        }
        std::fs::write(root.join("source/README.md"), "# x\n").unwrap();
        let created = run_json(
            sf().args(["repo", "create", "--json", "--product", "demo"])
                .args(["--target", "refs/heads/main", "--path"])
                .arg(root.join("repo"))
                .arg("--from")
                .arg(root.join("source"))
                .arg("--identity-out")
                .arg(root.join("identity.json")),
        );
        let sha = |text: &str| Digest::of(text.as_bytes()).to_string();
        let write = |name: &str, value: Value| {
            std::fs::write(root.join(name), serde_json::to_vec(&value).unwrap()).unwrap();
            root.join(name)
        };
        created.result();
        let frozen =
            sf_tests::plugins::freeze_minimal_slice(&root, &root.join("identity.json"), &["src"]);
        let proposal = write(
            "proposal.json",
            json!({"edits": [{"path": "src/f000.txt", "prior": sha("0\n"), "text": "zero\n"}]}),
        );
        let sealed = run_json(
            sf().args(["seal", "--json", "--identity"])
                .arg(root.join("identity.json"))
                .arg("--slice")
                .arg(&frozen)
                .arg("--proposal")
                .arg(&proposal),
        );
        let digest = sealed.result()["digest"].as_str().unwrap().to_owned();
        let outside = root.join("outside");
        std::fs::create_dir(&outside).unwrap();
        Self {
            _dir: dir,
            root,
            digest,
            outside,
        }
    }

    fn export(&self, out: &Path) -> Envelope {
        run_json(
            sf().args(["export", "--json", "--identity"])
                .arg(self.root.join("identity.json"))
                .args(["--candidate", &self.digest, "--out"])
                .arg(out),
        )
    }

    /// Asserts that `outside` holds exactly what it held, and that no staging directory is
    /// left in the root.
    fn assert_nothing_outside(&self, before: &str) {
        assert_eq!(
            tree_hash(&self.outside),
            before,
            "something was written outside"
        );
        for entry in std::fs::read_dir(&self.root).unwrap() {
            let name = entry.unwrap().file_name();
            assert!(
                !name.to_string_lossy().contains("sf-export"),
                "a staging directory was left behind: {name:?}"
            );
        }
    }
}

#[test]
fn a_link_at_out_or_in_its_path_is_refused() {
    let work = Exported::new();
    let before = tree_hash(&work.outside);
    // A link to an empty directory outside, a dangling link, and a link in the path.
    std::os::unix::fs::symlink(&work.outside, work.root.join("to-dir")).unwrap();
    std::os::unix::fs::symlink(work.outside.join("new"), work.root.join("dangling")).unwrap();
    for (out, named) in [
        (work.root.join("to-dir"), work.root.join("to-dir")),
        (work.root.join("dangling"), work.root.join("dangling")),
        (work.root.join("to-dir/out"), work.root.join("to-dir")),
    ] {
        let refused = work.export(&out);
        assert_eq!(refused.error_code(), "symlink", "{}", refused.json);
        assert!(
            refused.error_message().contains(named.to_str().unwrap()),
            "{}",
            refused.json
        );
        work.assert_nothing_outside(&before);
        assert!(!work.outside.join("new").exists());
    }
    // Control: a real directory path exports.
    let out = work.root.join("out");
    work.export(&out).result();
    assert_eq!(
        std::fs::read(out.join("src").join(last_file())).unwrap(),
        format!("{}\n", FILES - 1).as_bytes()
    );
}

/// Watches `root` for the staging directory of an export and plants a link to
/// `outside/planted` at `src/<last file>` in it, as soon as `src/` exists. Sets `planted`
/// when the link was made.
fn plant(root: PathBuf, outside: PathBuf, stop: Arc<AtomicBool>, planted: Arc<AtomicBool>) {
    let target = outside.join("planted");
    while !stop.load(Ordering::Relaxed) {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_name().to_string_lossy().contains("sf-export") {
                continue;
            }
            let link = entry.path().join("src").join(last_file());
            while !stop.load(Ordering::Relaxed) {
                match std::os::unix::fs::symlink(&target, &link) {
                    Ok(()) => {
                        planted.store(true, Ordering::Relaxed);
                        return;
                    }
                    // src/ is not there yet: keep trying.
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    // The file was written first, or the staging directory is gone.
                    Err(_) => return,
                }
            }
        }
    }
}

#[test]
fn a_link_planted_inside_the_staging_directory_is_refused() {
    let work = Exported::new();
    let before = tree_hash(&work.outside);
    let mut hits = 0;
    for n in 0..5 {
        let stop = Arc::new(AtomicBool::new(false));
        let planted = Arc::new(AtomicBool::new(false));
        let planter = {
            let (root, outside) = (work.root.clone(), work.outside.clone());
            let (stop, planted) = (stop.clone(), planted.clone());
            std::thread::spawn(move || plant(root, outside, stop, planted))
        };
        let out = work.root.join(format!("out{n}"));
        let outcome = work.export(&out);
        stop.store(true, Ordering::Relaxed);
        planter.join().unwrap();
        if planted.load(Ordering::Relaxed) {
            hits += 1;
            assert_eq!(outcome.error_code(), "symlink", "{}", outcome.json);
            let named = format!("src/{}", last_file());
            assert!(outcome.error_message().contains(&named), "{}", outcome.json);
            assert!(!out.exists(), "a failed export left {}", out.display());
        } else {
            outcome.result();
            assert_eq!(
                std::fs::read(out.join("src").join(last_file())).unwrap(),
                format!("{}\n", FILES - 1).as_bytes()
            );
        }
        work.assert_nothing_outside(&before);
        assert!(!work.outside.join("planted").exists());
    }
    eprintln!("the planter won {hits} of 5 races");
    assert!(hits > 0, "the planter never won a race in 5 exports");
}
