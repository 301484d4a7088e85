//! Reading objects of a foreign Git repository, read-only: the Git side of `sf repo create
//! --from-git` and `sf repo import`. Exactly two commands run, each with a fixed argument
//! list: `rev-parse --verify --end-of-options <REV>^{commit}` and `cat-file --batch` (object
//! ids on stdin), through the hardened runner ([`crate::process`]). Every object read is
//! re-hashed against its id and its kind checked, so a replace ref, an alternate or a tampered
//! object file cannot substitute other bytes, and a missing object (a partial clone: lazy
//! fetch is off) is named, never fetched.
//!
//! Before Git runs, the repository must pass sf's own ownership and shape rules
//! ([`crate::foreign`]), because naming the Git directory explicitly switches Git's own
//! `safe.directory` check off and Git would read whatever an alternates file names.
//!
//! Which objects to read and what they may hold is the caller's rule, not this module's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sf_contracts::git_object::{ObjectId, ObjectKind, object_id};

use crate::foreign::{ForeignRepositoryError, check_repository};
use crate::process::{Ending, GitRun, pin_git, run_git};

/// The longest revision accepted.
const MAX_REV_BYTES: usize = 256;

/// Framing bytes of one `cat-file --batch` answer besides its body (header and newline).
pub const BATCH_FRAMING: u64 = 128;

/// Why a foreign repository's objects cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForeignReadError {
    /// The pinned Git binary is missing or fails its checks, or could not be started.
    #[error("{0}")]
    Unavailable(String),
    /// REPO is not a directory holding a Git repository.
    #[error("{0}")]
    NotARepository(String),
    /// REV is malformed or names no commit in the repository.
    #[error("{0}")]
    BadRevision(String),
    /// An object the read needs is not in the repository (a partial clone, say).
    #[error("{0}")]
    Missing(String),
    /// The objects asked for are larger than the caller's budget.
    #[error("{0}")]
    TooLarge(String),
    /// Git failed, timed out or answered outside its documented form.
    #[error("{0}")]
    Git(String),
    /// REPO breaks a rule of what sf reads ([`crate::foreign`]); the code names the rule.
    #[error("--from-git: {0}")]
    Refused(ForeignRepositoryError),
}

impl ForeignReadError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::NotARepository(_) => "not-a-repository",
            Self::BadRevision(_) => "bad-revision",
            Self::Missing(_) => "missing-object",
            Self::TooLarge(_) => "too-large",
            Self::Git(_) => "git-failed",
            Self::Refused(error) => error.code(),
        }
    }
}

/// A checked foreign repository, ready to resolve revisions and read objects.
pub struct ForeignReader {
    runner: Runner,
}

/// The pinned Git, its empty HOME and the Git directory every command runs against.
struct Runner {
    git: PathBuf,
    home: tempfile::TempDir,
    git_dir: PathBuf,
    repo: PathBuf,
    deadline: Instant,
}

/// What an output overflow means for one command.
#[derive(Clone, Copy)]
enum Overflow {
    /// A failure of Git (its answer is longer than any well-formed one).
    Failure,
    /// The objects are larger than the caller's budget ([`ForeignReadError::TooLarge`]).
    Budget,
}

impl ForeignReader {
    /// Checks the repository at `repo` (a work tree with a `.git`, or a bare repository) and
    /// pins Git. Nothing this reader runs runs past `deadline`.
    pub fn open(repo: &Path, deadline: Instant) -> Result<Self, ForeignReadError> {
        let git_dir = git_dir_of(repo)?;
        let git = pin_git(None).map_err(ForeignReadError::Unavailable)?;
        let home = tempfile::Builder::new()
            .prefix("sf-git-home-")
            .tempdir()
            .map_err(|error| {
                ForeignReadError::Unavailable(format!(
                    "cannot create an empty HOME for git: {error}"
                ))
            })?;
        Ok(Self {
            runner: Runner {
                git: git.path,
                home,
                git_dir,
                repo: repo.to_path_buf(),
                deadline,
            },
        })
    }

    /// The commit `rev` names (`rev-parse --verify --end-of-options <REV>^{commit}`).
    pub fn resolve_commit(&self, rev: &str) -> Result<ObjectId, ForeignReadError> {
        check_rev(rev)?;
        self.runner.resolve_commit(rev)
    }

    /// The object the ref `name` names, of any kind, or `None` when there is no such ref
    /// (`rev-parse --verify --quiet --end-of-options <name>`): what reads a record kept
    /// under a ref of its own, such as a commit's attestation.
    pub fn resolve_ref(&self, name: &str) -> Result<Option<ObjectId>, ForeignReadError> {
        check_rev(name)?;
        let run = self.runner.run(
            &["rev-parse", "--verify", "--quiet", "--end-of-options", name],
            Vec::new(),
            4096,
            Overflow::Failure,
        )?;
        if !run.succeeded() {
            return Ok(None);
        }
        let text = std::str::from_utf8(&run.stdout).unwrap_or_default();
        text.strip_suffix('\n')
            .and_then(ObjectId::parse_hex)
            .map(Some)
            .ok_or_else(|| {
                ForeignReadError::Git(format!(
                    "git rev-parse answered {text:?} for {name}, not one 40-hex object id"
                ))
            })
    }

    /// `cat-file --batch` for `wanted`, each answer checked against its id (re-hashed) and
    /// `kind`; the bodies in `wanted`'s order. `budget` bounds the bodies read, in bytes.
    pub fn read(
        &self,
        wanted: &[ObjectId],
        kind: ObjectKind,
        budget: u64,
    ) -> Result<Vec<Vec<u8>>, ForeignReadError> {
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
        let cap = budget.saturating_add(BATCH_FRAMING * ids.len() as u64);
        let run = self
            .runner
            .run(&["cat-file", "--batch"], stdin, cap, Overflow::Budget)?;
        if !run.succeeded() {
            return Err(ForeignReadError::Git(format!(
                "git cat-file --batch {}",
                run.describe_ending()
            )));
        }
        let mut bodies: BTreeMap<ObjectId, Vec<u8>> = BTreeMap::new();
        let mut rest = &run.stdout[..];
        for id in &ids {
            let (body, after) = parse_answer(id, kind, rest)?;
            bodies.insert(*id, body);
            rest = after;
        }
        if !rest.is_empty() {
            return Err(ForeignReadError::Git(
                "git cat-file --batch wrote bytes after the last answer".into(),
            ));
        }
        if bodies.values().map(|body| body.len() as u64).sum::<u64>() > budget {
            return Err(ForeignReadError::TooLarge(format!(
                "{} {}s hold more than {budget} bytes",
                ids.len(),
                kind.as_str()
            )));
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
    ) -> Result<GitRun, ForeignReadError> {
        let args: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
        let describe = format!("git {}", args.join(" "));
        if Instant::now() >= self.deadline {
            return Err(ForeignReadError::Git(format!(
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
            ForeignReadError::Unavailable(format!(
                "{}: could not start {describe}: {error}",
                self.git.display()
            ))
        })?;
        match run.ending {
            Ending::OutputOverflow if matches!(overflow, Overflow::Budget) => {
                Err(ForeignReadError::TooLarge(format!(
                    "{describe}: the objects asked for are larger than {cap} bytes"
                )))
            }
            Ending::TimedOut | Ending::OutputOverflow | Ending::OutputUnreadable => Err(
                ForeignReadError::Git(format!("{describe} {}", run.describe_ending())),
            ),
            Ending::Exited(_) => Ok(run),
        }
    }

    /// `rev-parse --verify --end-of-options <REV>^{commit}`: the commit id.
    fn resolve_commit(&self, rev: &str) -> Result<ObjectId, ForeignReadError> {
        let spec = format!("{rev}^{{commit}}");
        let run = self.run(
            &["rev-parse", "--verify", "--end-of-options", &spec],
            Vec::new(),
            4096,
            Overflow::Failure,
        )?;
        if !run.succeeded() {
            let stderr = run.stderr();
            if stderr.contains("not a git repository") || stderr.contains("dubious ownership") {
                return Err(ForeignReadError::NotARepository(format!(
                    "--from-git {}: is not a Git repository sf can read: {stderr}",
                    self.repo.display()
                )));
            }
            return Err(ForeignReadError::BadRevision(format!(
                "--rev {rev}: names no commit in {} ({})",
                self.repo.display(),
                run.describe_ending()
            )));
        }
        let text = std::str::from_utf8(&run.stdout).unwrap_or_default();
        text.strip_suffix('\n')
            .and_then(ObjectId::parse_hex)
            .ok_or_else(|| {
                ForeignReadError::Git(format!(
                    "git rev-parse answered {text:?}, not one 40-hex commit id (a SHA-256 \
                     repository is not supported)"
                ))
            })
    }
}

/// A revision: non-empty, bounded, printable, not an option.
fn check_rev(rev: &str) -> Result<(), ForeignReadError> {
    if rev.is_empty()
        || rev.len() > MAX_REV_BYTES
        || rev.starts_with('-')
        || rev.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(ForeignReadError::BadRevision(format!(
            "--rev {rev:?}: a revision is a branch, tag or commit name of at most \
             {MAX_REV_BYTES} bytes, not starting with - and without spaces or control characters"
        )));
    }
    Ok(())
}

/// The Git directory of `repo`, once it passes [`check_repository`]: `repo/.git` when it
/// exists (a work tree), `repo` otherwise (a bare repository). Git is never left to discover
/// it.
fn git_dir_of(repo: &Path) -> Result<PathBuf, ForeignReadError> {
    match check_repository(repo) {
        Ok(checked) => Ok(checked.git_dir),
        Err(ForeignRepositoryError::NotARepository { path, detail }) => {
            let at = if path == repo {
                String::new()
            } else {
                format!(" ({})", path.display())
            };
            Err(ForeignReadError::NotARepository(format!(
                "--from-git {}{at}: {detail}",
                repo.display(),
            )))
        }
        Err(refused) => Err(ForeignReadError::Refused(refused)),
    }
}

/// One `cat-file --batch` answer for `id`, which must be an object of `kind` hashing to
/// `id`.
fn parse_answer<'a>(
    id: &ObjectId,
    kind: ObjectKind,
    input: &'a [u8],
) -> Result<(Vec<u8>, &'a [u8]), ForeignReadError> {
    let bad =
        |why: &str| ForeignReadError::Git(format!("git cat-file --batch answer for {id}: {why}"));
    let newline = input[..input.len().min(128)]
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| bad("no header line"))?;
    let header = std::str::from_utf8(&input[..newline]).map_err(|_| bad("header is not text"))?;
    let after = &input[newline + 1..];
    if header == format!("{id} missing") {
        return Err(ForeignReadError::Missing(format!(
            "object {id} is not in the repository (a partial or shallow clone? sf never \
             fetches)"
        )));
    }
    let expected = format!("{id} {} ", kind.as_str());
    let size = header
        .strip_prefix(&expected)
        .filter(|size| {
            !size.is_empty()
                && size.bytes().all(|b| b.is_ascii_digit())
                && (size.len() == 1 || !size.starts_with('0'))
        })
        .and_then(|size| size.parse::<usize>().ok())
        .ok_or_else(|| {
            bad(&format!(
                "header {header:?} is not `<id> {} <size>`",
                kind.as_str()
            ))
        })?;
    if after.len() <= size || after[size] != b'\n' {
        return Err(bad("body is not its declared size followed by a newline"));
    }
    let body = &after[..size];
    if object_id(kind, body) != *id {
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
        let (body, rest) = parse_answer(&id, ObjectKind::Blob, good.as_bytes()).unwrap();
        assert_eq!(body, b"hi\n");
        assert!(rest.is_empty());
        for bad in [
            format!("{id} blob 3\nho\n\n"),
            format!("{id} tree 3\nhi\n\n"),
            format!("{id} blob 03\nhi\n\n"),
            format!("{id} blob 3\nhi\n"),
        ] {
            assert_eq!(
                parse_answer(&id, ObjectKind::Blob, bad.as_bytes())
                    .unwrap_err()
                    .code(),
                "git-failed",
                "{bad:?}"
            );
        }
        let missing = format!("{id} missing\n");
        assert_eq!(
            parse_answer(&id, ObjectKind::Blob, missing.as_bytes())
                .unwrap_err()
                .code(),
            "missing-object"
        );
    }
}
