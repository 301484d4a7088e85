//! Reading the tree of one revision of a foreign Git repository, read-only: the Git side of
//! `sf repo create --from-git`. Exactly three commands run, each with a fixed argument list:
//! `rev-parse --verify --end-of-options <REV>^{tree}`, `ls-tree -r -z -l --full-tree <tree>`
//! and `cat-file --batch` (object ids on stdin), through the hardened runner
//! ([`crate::process`]). Every blob read is re-hashed against its id, so a replace ref, an
//! alternate or a tampered object file cannot substitute other bytes.
//!
//! Before Git runs, the repository must pass sf's own ownership and shape rules
//! ([`crate::foreign`]), because naming the Git directory explicitly switches Git's own
//! `safe.directory` check off and Git would read whatever an alternates file names.
//!
//! What the entries may be (modes, paths, sizes) is the caller's rule, not this module's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sf_contracts::git_object::{ObjectId, ObjectKind, object_id};

use crate::foreign::{ForeignRepositoryError, check_repository};
use crate::process::{Ending, GitRun, pin_git, run_git};

/// The longest revision accepted.
const MAX_REV_BYTES: usize = 256;

/// The `ls-tree` output read at most: far more than a source of 1024 files of 255-byte paths
/// needs, so that an oversized tree is named as such rather than cut.
pub const LS_TREE_CAP: u64 = 4 * 1024 * 1024;

/// Framing bytes of one `cat-file --batch` answer besides its body (header and newline).
const BATCH_FRAMING: u64 = 128;

/// Why a revision's tree cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TreeReadError {
    /// The pinned Git binary is missing or fails its checks, or could not be started.
    #[error("{0}")]
    Unavailable(String),
    /// REPO is not a directory holding a Git repository.
    #[error("{0}")]
    NotARepository(String),
    /// REV is malformed or names no tree in the repository.
    #[error("{0}")]
    BadRevision(String),
    /// Git failed, timed out or answered outside its documented form.
    #[error("{0}")]
    Git(String),
    /// The tree's listing is longer than [`LS_TREE_CAP`] bytes.
    #[error("the tree lists more than {LS_TREE_CAP} bytes of entries")]
    ListingTooLarge,
    /// REPO breaks a rule of what sf reads ([`crate::foreign`]); the code names the rule.
    #[error("--from-git: {0}")]
    Refused(ForeignRepositoryError),
}

impl TreeReadError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::NotARepository(_) => "not-a-repository",
            Self::BadRevision(_) => "bad-revision",
            Self::Git(_) => "git-failed",
            Self::ListingTooLarge => "too-many-files",
            Self::Refused(error) => error.code(),
        }
    }
}

/// One `ls-tree` entry, as Git printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeEntry {
    /// The mode, as Git printed it (`100644`, `100755`, `120000`, `160000`, …).
    pub mode: String,
    /// The object type (`blob`, `commit` for a submodule, …).
    pub kind: String,
    /// The object id in hex, not yet checked.
    pub id: String,
    /// The size in bytes, not yet parsed (`-` for a submodule).
    pub size: String,
    /// The path in the tree, as bytes (Git does not promise UTF-8).
    pub path: Vec<u8>,
}

/// A checked repository with a resolved tree, ready to list and read.
pub struct TreeReader {
    runner: Runner,
    tree: ObjectId,
}

/// The pinned Git, its empty HOME and the Git directory every command runs against.
struct Runner {
    git: PathBuf,
    home: tempfile::TempDir,
    git_dir: PathBuf,
    deadline: Instant,
}

/// What an output overflow means for one command.
#[derive(Clone, Copy)]
enum Overflow {
    /// A failure of Git (its answer is longer than any well-formed one).
    Failure,
    /// The tree is too large ([`TreeReadError::ListingTooLarge`]).
    Listing,
}

impl TreeReader {
    /// Checks `rev` and the repository at `repo` (a work tree with a `.git`, or a bare
    /// repository), pins Git, and resolves `rev` to its tree. Nothing runs past `deadline`.
    pub fn open(repo: &Path, rev: &str, deadline: Instant) -> Result<Self, TreeReadError> {
        check_rev(rev)?;
        let git_dir = git_dir_of(repo)?;
        let git = pin_git(None).map_err(TreeReadError::Unavailable)?;
        let home = tempfile::Builder::new()
            .prefix("sf-git-home-")
            .tempdir()
            .map_err(|error| {
                TreeReadError::Unavailable(format!("cannot create an empty HOME for git: {error}"))
            })?;
        let runner = Runner {
            git: git.path,
            home,
            git_dir,
            deadline,
        };
        let tree = runner.resolve_tree(repo, rev)?;
        Ok(Self { runner, tree })
    }

    /// The tree `rev` names.
    pub fn tree(&self) -> &ObjectId {
        &self.tree
    }

    /// `ls-tree -r -z -l --full-tree <tree>`: every non-tree entry, in Git's order.
    pub fn list(&self) -> Result<Vec<TreeEntry>, TreeReadError> {
        let hex = self.tree.to_hex();
        let run = self.runner.run(
            &["ls-tree", "-r", "-z", "-l", "--full-tree", &hex],
            Vec::new(),
            LS_TREE_CAP,
            Overflow::Listing,
        )?;
        if !run.succeeded() {
            return Err(TreeReadError::Git(format!(
                "git ls-tree {hex} {}",
                run.describe_ending()
            )));
        }
        let malformed =
            |why: &str| TreeReadError::Git(format!("git ls-tree {hex}: malformed output: {why}"));
        let mut entries = Vec::new();
        let mut records = run.stdout.split(|&b| b == 0).collect::<Vec<_>>();
        if records.pop() != Some(&[][..]) {
            return Err(malformed("the last entry is not NUL-terminated"));
        }
        for record in records {
            let tab = record
                .iter()
                .position(|&b| b == b'\t')
                .ok_or_else(|| malformed("an entry has no tab"))?;
            let head = std::str::from_utf8(&record[..tab])
                .map_err(|_| malformed("an entry's header is not text"))?;
            let fields: Vec<&str> = head.split(' ').filter(|f| !f.is_empty()).collect();
            let [mode, kind, id, size] = fields[..] else {
                return Err(malformed("an entry is not `<mode> <type> <id> <size>`"));
            };
            entries.push(TreeEntry {
                mode: mode.to_owned(),
                kind: kind.to_owned(),
                id: id.to_owned(),
                size: size.to_owned(),
                path: record[tab + 1..].to_vec(),
            });
        }
        Ok(entries)
    }

    /// `cat-file --batch` for every blob of `wanted`, each answer checked against its id
    /// (re-hashed) and kind; the bodies in `wanted`'s order. `total` is the sum of the sizes
    /// `ls-tree` declared, which bounds what is read.
    pub fn read_blobs(
        &self,
        wanted: &[ObjectId],
        total: u64,
    ) -> Result<Vec<Vec<u8>>, TreeReadError> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let unique: BTreeMap<ObjectId, ()> = wanted.iter().map(|id| (*id, ())).collect();
        let ids: Vec<ObjectId> = unique.into_keys().collect();
        let mut stdin = Vec::with_capacity(ids.len() * 41);
        for id in &ids {
            stdin.extend_from_slice(id.to_hex().as_bytes());
            stdin.push(b'\n');
        }
        let cap = total + BATCH_FRAMING * ids.len() as u64;
        let run = self
            .runner
            .run(&["cat-file", "--batch"], stdin, cap, Overflow::Failure)?;
        if !run.succeeded() {
            return Err(TreeReadError::Git(format!(
                "git cat-file --batch {}",
                run.describe_ending()
            )));
        }
        let mut bodies: BTreeMap<ObjectId, Vec<u8>> = BTreeMap::new();
        let mut rest = &run.stdout[..];
        for id in &ids {
            let (body, after) = parse_blob(id, rest)?;
            bodies.insert(*id, body);
            rest = after;
        }
        if !rest.is_empty() {
            return Err(TreeReadError::Git(
                "git cat-file --batch wrote bytes after the last answer".into(),
            ));
        }
        Ok(wanted.iter().map(|id| bodies[id].clone()).collect())
    }
}

impl Runner {
    fn run(
        &self,
        args: &[&str],
        stdin: Vec<u8>,
        cap: u64,
        overflow: Overflow,
    ) -> Result<GitRun, TreeReadError> {
        let args: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
        let describe = format!("git {}", args.join(" "));
        if Instant::now() >= self.deadline {
            return Err(TreeReadError::Git(format!(
                "{describe}: the deadline passed before it started"
            )));
        }
        let run = run_git(
            &self.git,
            self.home.path(),
            &self.git_dir,
            &args,
            stdin,
            cap,
            self.deadline,
        )
        .map_err(|error| {
            TreeReadError::Unavailable(format!(
                "{}: could not start {describe}: {error}",
                self.git.display()
            ))
        })?;
        match run.ending {
            Ending::OutputOverflow if matches!(overflow, Overflow::Listing) => {
                Err(TreeReadError::ListingTooLarge)
            }
            Ending::TimedOut | Ending::OutputOverflow | Ending::OutputUnreadable => Err(
                TreeReadError::Git(format!("{describe} {}", run.describe_ending())),
            ),
            Ending::Exited(_) => Ok(run),
        }
    }

    /// `rev-parse --verify --end-of-options <REV>^{tree}`: the tree id.
    fn resolve_tree(&self, repo: &Path, rev: &str) -> Result<ObjectId, TreeReadError> {
        let spec = format!("{rev}^{{tree}}");
        let run = self.run(
            &["rev-parse", "--verify", "--end-of-options", &spec],
            Vec::new(),
            4096,
            Overflow::Failure,
        )?;
        if !run.succeeded() {
            let stderr = run.stderr();
            if stderr.contains("not a git repository") || stderr.contains("dubious ownership") {
                return Err(TreeReadError::NotARepository(format!(
                    "--from-git {}: is not a Git repository sf can read: {stderr}",
                    repo.display()
                )));
            }
            return Err(TreeReadError::BadRevision(format!(
                "--rev {rev}: names no commit or tree in {} ({})",
                repo.display(),
                run.describe_ending()
            )));
        }
        let text = std::str::from_utf8(&run.stdout).unwrap_or_default();
        text.strip_suffix('\n')
            .and_then(ObjectId::parse_hex)
            .ok_or_else(|| {
                TreeReadError::Git(format!(
                    "git rev-parse answered {text:?}, not one 40-hex tree id (a SHA-256 \
                     repository is not supported)"
                ))
            })
    }
}

/// A revision: non-empty, bounded, printable, not an option.
fn check_rev(rev: &str) -> Result<(), TreeReadError> {
    if rev.is_empty()
        || rev.len() > MAX_REV_BYTES
        || rev.starts_with('-')
        || rev.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(TreeReadError::BadRevision(format!(
            "--rev {rev:?}: a revision is a branch, tag or commit name of at most \
             {MAX_REV_BYTES} bytes, not starting with - and without spaces or control characters"
        )));
    }
    Ok(())
}

/// The Git directory of `repo`, once it passes [`check_repository`]: `repo/.git` when it
/// exists (a work tree), `repo` otherwise (a bare repository). Git is never left to discover
/// it.
fn git_dir_of(repo: &Path) -> Result<PathBuf, TreeReadError> {
    match check_repository(repo) {
        Ok(checked) => Ok(checked.git_dir),
        Err(ForeignRepositoryError::NotARepository { path, detail }) => {
            Err(TreeReadError::NotARepository(format!(
                "--from-git {}: {}: {detail}",
                repo.display(),
                path.display()
            )))
        }
        Err(refused) => Err(TreeReadError::Refused(refused)),
    }
}

/// One `cat-file --batch` answer for `id`, which must be a blob hashing to `id`.
fn parse_blob<'a>(id: &ObjectId, input: &'a [u8]) -> Result<(Vec<u8>, &'a [u8]), TreeReadError> {
    let bad =
        |why: &str| TreeReadError::Git(format!("git cat-file --batch answer for {id}: {why}"));
    let newline = input[..input.len().min(128)]
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| bad("no header line"))?;
    let header = std::str::from_utf8(&input[..newline]).map_err(|_| bad("header is not text"))?;
    let after = &input[newline + 1..];
    let expected = format!("{} blob ", id.to_hex());
    let size = header
        .strip_prefix(&expected)
        .filter(|size| {
            !size.is_empty()
                && size.bytes().all(|b| b.is_ascii_digit())
                && (size.len() == 1 || !size.starts_with('0'))
        })
        .and_then(|size| size.parse::<usize>().ok())
        .ok_or_else(|| bad(&format!("header {header:?} is not `<id> blob <size>`")))?;
    if after.len() <= size || after[size] != b'\n' {
        return Err(bad("body is not its declared size followed by a newline"));
    }
    let body = &after[..size];
    if object_id(ObjectKind::Blob, body) != *id {
        return Err(bad("the bytes do not hash to the requested id"));
    }
    Ok((body.to_vec(), &after[size + 1..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_are_checked_before_git_runs() {
        for bad in ["", "-n", "--all", "a b", "a\nb", &"x".repeat(300)] {
            assert_eq!(
                check_rev(bad).unwrap_err().code(),
                "bad-revision",
                "{bad:?}"
            );
        }
        for good in ["main", "HEAD~1", "v1.0", "0123abcd", "refs/heads/x"] {
            assert!(check_rev(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn batch_answers_are_rehashed() {
        let id = object_id(ObjectKind::Blob, b"hi\n");
        let good = format!("{id} blob 3\nhi\n\n");
        let (body, rest) = parse_blob(&id, good.as_bytes()).unwrap();
        assert_eq!(body, b"hi\n");
        assert!(rest.is_empty());
        for bad in [
            format!("{id} blob 3\nho\n\n"),
            format!("{id} tree 3\nhi\n\n"),
            format!("{id} blob 03\nhi\n\n"),
            format!("{id} blob 3\nhi\n"),
            format!("{id} missing\n"),
        ] {
            assert_eq!(
                parse_blob(&id, bad.as_bytes()).unwrap_err().code(),
                "git-failed",
                "{bad:?}"
            );
        }
    }
}
