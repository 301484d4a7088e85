//! Shared by the tests that check sf-patch against real Git: running git with no user or
//! system configuration, reading trees and blobs (one long-lived `git cat-file --batch`), a
//! [`BaseFiles`] over a commit's tree, and the comparison of sf-patch's changes with the tree
//! Git holds after the commit.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use sf_patch::{After, BaseEntry, BaseFiles, Changed, Mode};

/// Git's empty tree, the "parent" of a root commit.
pub const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A git command in `dir`, isolated from the machine's configuration.
pub fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
        .args(["-c", "core.quotepath=on", "-c", "init.defaultBranch=main"]);
    cmd
}

/// Runs git and returns its standard output; panics when it fails.
pub fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = git_command(dir).args(args).output().expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Runs git and returns its output as a string.
pub fn git_str(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(git(dir, args)).expect("UTF-8 output")
}

/// A bare clone of a fixture bundle in a fresh temporary directory.
pub fn clone_bundle(name: &str) -> (tempfile::TempDir, PathBuf) {
    let bundle = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/repos")
        .join(name);
    let bundle = if bundle.exists() {
        bundle
    } else {
        PathBuf::from("/work/shared/fixtures/repos").join(name)
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let repo = tmp.path().join("repo.git");
    let bundle = bundle.to_str().expect("UTF-8 path").to_string();
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            &bundle,
            repo.to_str().expect("UTF-8 path"),
        ],
    );
    (tmp, repo)
}

/// One long-lived `git cat-file --batch`.
pub struct CatFile {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl CatFile {
    pub fn new(repo: &Path) -> CatFile {
        let mut child = git_command(repo)
            .args(["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn cat-file");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        CatFile {
            child,
            stdin,
            stdout,
        }
    }

    /// The content of the object `oid`.
    pub fn read(&mut self, oid: &str) -> Vec<u8> {
        writeln!(self.stdin, "{oid}").expect("write to cat-file");
        self.stdin.flush().expect("flush");
        let mut header = String::new();
        self.stdout.read_line(&mut header).expect("read header");
        let size: usize = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("cat-file: {header}"));
        let mut content = vec![0; size + 1];
        self.stdout.read_exact(&mut content).expect("read object");
        content.pop();
        content
    }
}

impl Drop for CatFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tree's entries by path: mode and blob id.
pub type Tree = BTreeMap<String, (Mode, String)>;

/// The entries of a tree (`git ls-tree -r`).
pub fn tree(repo: &Path, treeish: &str) -> Tree {
    let out = git(repo, &["ls-tree", "-r", "-z", "--full-tree", treeish]);
    let mut tree = Tree::new();
    for record in out.split(|&c| c == 0).filter(|r| !r.is_empty()) {
        let record = String::from_utf8(record.to_vec()).expect("UTF-8 path");
        let (meta, path) = record.split_once('\t').expect("ls-tree record");
        let mut meta = meta.split(' ');
        let mode = match meta.next() {
            Some("100644") => Mode::Regular,
            Some("100755") => Mode::Executable,
            Some("120000") => Mode::Symlink,
            other => panic!("unexpected mode {other:?} at {path}"),
        };
        let oid = meta.nth(1).expect("oid").to_string();
        tree.insert(path.to_string(), (mode, oid));
    }
    tree
}

/// A base that reads a tree through cat-file.
pub struct TreeBase<'a> {
    pub tree: &'a Tree,
    pub cat: &'a mut CatFile,
}

impl BaseFiles for TreeBase<'_> {
    fn read(&mut self, path: &str) -> Result<Option<BaseEntry>, String> {
        Ok(self.tree.get(path).map(|(mode, oid)| BaseEntry {
            content: self.cat.read(oid),
            mode: *mode,
        }))
    }
}

/// Checks sf-patch's changes against the trees before and after: each change is what `after`
/// holds, and every path whose entry differs between the trees is among the changes.
pub fn check_changes(
    what: &str,
    changes: &[Changed],
    before: &Tree,
    after: &Tree,
    cat: &mut CatFile,
) {
    for change in changes {
        match (&change.after, after.get(&change.path)) {
            (After::Absent, None) => {}
            (After::Entry(entry), Some((mode, oid))) => {
                assert_eq!(entry.mode, *mode, "{what}: mode of {}", change.path);
                assert!(
                    entry.content == cat.read(oid),
                    "{what}: content of {}",
                    change.path
                );
            }
            (got, want) => panic!(
                "{what}: {}: got {got:?}, the commit has {want:?}",
                change.path
            ),
        }
    }
    let changed: BTreeSet<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    let paths: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for path in paths {
        if before.get(path) != after.get(path) {
            assert!(
                changed.contains(path.as_str()),
                "{what}: {path} not covered"
            );
        }
    }
}

/// A base held in memory: path → entry.
#[derive(Default, Clone)]
pub struct MapBase(pub BTreeMap<String, BaseEntry>);

impl MapBase {
    pub fn with(mut self, path: &str, content: &[u8], mode: Mode) -> MapBase {
        let entry = BaseEntry {
            content: content.to_vec(),
            mode,
        };
        self.0.insert(path.to_string(), entry);
        self
    }

    pub fn file(self, path: &str, content: &str) -> MapBase {
        self.with(path, content.as_bytes(), Mode::Regular)
    }
}

impl BaseFiles for MapBase {
    fn read(&mut self, path: &str) -> Result<Option<BaseEntry>, String> {
        Ok(self.0.get(path).cloned())
    }
}

/// `git hash-object` of `content`, abbreviated to `len` digits (as an `index` line has it).
pub fn blob_id(content: &[u8], len: usize) -> String {
    use sha1::Digest;
    let mut hash = sha1::Sha1::new();
    hash.update(format!("blob {}\0", content.len()).as_bytes());
    hash.update(content);
    let full: String = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    full[..len].to_string()
}

/// Git's base85 lines for `data` deflated, as a binary hunk carries them.
pub fn base85_lines(data: &[u8]) -> String {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(data).expect("deflate");
    let deflated = z.finish().expect("deflate");
    base85_raw(&deflated)
}

/// Git's base85 lines for `bytes` as they are.
pub fn base85_raw(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] =
        b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";
    let mut out = String::new();
    for chunk in bytes.chunks(52) {
        let len = chunk.len();
        out.push(if len <= 26 {
            (b'A' + len as u8 - 1) as char
        } else {
            (b'a' + len as u8 - 27) as char
        });
        for group in chunk.chunks(4) {
            let mut word = [0u8; 4];
            word[..group.len()].copy_from_slice(group);
            let mut v = u32::from_be_bytes(word);
            let mut digits = [0u8; 5];
            for d in digits.iter_mut().rev() {
                *d = ALPHABET[(v % 85) as usize];
                v /= 85;
            }
            out.push_str(std::str::from_utf8(&digits).expect("ASCII"));
        }
        out.push('\n');
    }
    out
}
