//! Reading the text files of a foreign Git repository's tree, as the source of a new owned
//! repository (`sf repo create --from-git REPO --rev REV`).
//!
//! The host never links a store backend, so this is a small reader of its own, read-only and
//! on the same hardened surface as the git-cli plugin ([`crate::git_process`]): the pinned
//! Git binary, the shared `-c` settings, a cleared environment whose HOME is an empty private
//! directory, and bounds on time and output. Exactly three commands run, each with a fixed
//! argument list: `rev-parse --verify --end-of-options <REV>^{tree}`, `ls-tree -r -z -l
//! --full-tree <tree>` and `cat-file --batch` (object ids on stdin). Every blob read is
//! re-hashed against its id, so a replace ref, an alternate or a tampered object file cannot
//! substitute other bytes.
//!
//! Before Git runs, the repository must pass sf's own ownership and shape rules
//! ([`crate::foreign_repository`]: owned by the caller or root and writable by no one else,
//! with the directories above it; no `.git` link or gitfile, no alternates, no commondir),
//! because naming the Git directory explicitly switches Git's own `safe.directory` check off
//! and Git would read whatever an alternates file names.
//!
//! Whatever the source subset cannot hold is refused with the list of every path at fault
//! and the rule each breaks: a mode other than `100644` (an executable `100755` file too: sf
//! stores `100644` only, and silently dropping the bit would change the program), a symbolic
//! link, a submodule, a path outside the grammar, a file that is not UTF-8 text, holds a NUL,
//! is a Git LFS pointer or is over the limits. Nothing is skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::foreign_repository::{ForeignRepositoryError, check_repository};
use crate::git_object::{ObjectId, ObjectKind, object_id};
use crate::git_process::{Ending, GitRun, pin_git, run_git};
use crate::repository::{REPOSITORY_LIMITS, SourceText, source};
use crate::source_path;

/// How long the whole read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// The longest revision accepted.
const MAX_REV_BYTES: usize = 256;

/// The `ls-tree` output read at most: far more than a source of 1024 files of 255-byte paths
/// needs, so that an oversized tree is named as such rather than cut.
const LS_TREE_CAP: u64 = 4 * 1024 * 1024;

/// Framing bytes of one `cat-file --batch` answer besides its body (header and newline).
const BATCH_FRAMING: u64 = 128;

/// One path the source subset cannot hold, with the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub path: String,
    pub code: &'static str,
    pub rule: String,
}

/// Why a repository's tree cannot be read as a source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitSourceError {
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
    /// The tree holds paths the source subset cannot hold; every one is listed.
    #[error("{}", describe_faults(.0))]
    Unsupported(Vec<Fault>),
    /// REPO breaks a rule of what sf reads (owner, mode, a link, a gitfile, alternates,
    /// commondir: [`crate::foreign_repository`]); the code names the rule.
    #[error("--from-git: {0}")]
    Refused(ForeignRepositoryError),
}

impl GitSourceError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::NotARepository(_) => "not-a-repository",
            Self::BadRevision(_) => "bad-revision",
            Self::Git(_) => "git-failed",
            Self::Unsupported(_) => "unsupported-source",
            Self::Refused(error) => error.code(),
        }
    }
}

fn describe_faults(faults: &[Fault]) -> String {
    let mut text = format!(
        "{} path(s) cannot be held by an sf source (UTF-8 text files of mode 100644 only):",
        faults.len()
    );
    for fault in faults {
        text.push_str(&format!(
            "\n  {}: {} ({})",
            fault.path, fault.rule, fault.code
        ));
    }
    text
}

/// One `ls-tree` entry.
struct Entry {
    mode: String,
    kind: String,
    id: String,
    size: String,
    path: Vec<u8>,
}

/// Reads the files of the tree of `rev` in the repository at `repo` (a work tree with a
/// `.git`, or a bare repository), sorted by path.
pub fn read_git_source(repo: &Path, rev: &str) -> Result<Vec<SourceText>, GitSourceError> {
    let deadline = Instant::now() + READ_TIMEOUT;
    check_rev(rev)?;
    let git_dir = git_dir_of(repo)?;
    let git = pin_git(None).map_err(GitSourceError::Unavailable)?;
    let home = tempfile::Builder::new()
        .prefix("sf-git-home-")
        .tempdir()
        .map_err(|error| {
            GitSourceError::Unavailable(format!("cannot create an empty HOME for git: {error}"))
        })?;
    let reader = Reader {
        git: git.path,
        home: home.path().to_owned(),
        git_dir,
        deadline,
    };

    let tree = reader.resolve_tree(repo, rev)?;
    let entries = reader.list_tree(&tree)?;
    let mut faults = Vec::new();
    let mut wanted: Vec<(String, ObjectId)> = Vec::new();
    let mut total: u64 = 0;
    for entry in &entries {
        let path = String::from_utf8_lossy(&entry.path).into_owned();
        let mut fault = |code: &'static str, rule: &str| {
            faults.push(Fault {
                path: path.clone(),
                code,
                rule: rule.to_owned(),
            })
        };
        match (entry.mode.as_str(), entry.kind.as_str()) {
            ("100644", "blob") => {}
            ("100755", "blob") => {
                fault(
                    "executable",
                    "is executable (mode 100755); sf stores mode 100644 only",
                );
                continue;
            }
            ("120000", _) => {
                fault(
                    "symlink",
                    "is a symbolic link; sf stores regular files only",
                );
                continue;
            }
            ("160000", _) => {
                fault(
                    "submodule",
                    "is a submodule (gitlink); sf stores the files of one tree only",
                );
                continue;
            }
            (mode, kind) => {
                fault(
                    "unsupported-mode",
                    &format!("is a {kind} of mode {mode}; sf stores files of mode 100644 only"),
                );
                continue;
            }
        }
        let Ok(text_path) = std::str::from_utf8(&entry.path) else {
            fault("bad-path", source_path::PathRule::Grammar.describe());
            continue;
        };
        if let Err(rule) = source_path::check_path(text_path) {
            fault(rule.code(), rule.describe());
            continue;
        }
        let size: u64 = entry.size.parse().map_err(|_| {
            GitSourceError::Git(format!(
                "git ls-tree: the size of {path} is not a number: {}",
                entry.size
            ))
        })?;
        if size > REPOSITORY_LIMITS.max_file_bytes as u64 {
            fault(
                "file-too-large",
                &format!(
                    "is {size} bytes; a file holds at most {} bytes",
                    REPOSITORY_LIMITS.max_file_bytes
                ),
            );
            continue;
        }
        let id = ObjectId::parse_hex(&entry.id).ok_or_else(|| {
            GitSourceError::Git(format!(
                "git ls-tree: the id of {path} is not 40 hex digits"
            ))
        })?;
        total += size;
        wanted.push((text_path.to_owned(), id));
    }
    // The set rules (case collisions and the like) on the paths that passed alone.
    if let Err((path, rule)) = source_path::check_path_set(wanted.iter().map(|(p, _)| p.as_str())) {
        faults.push(Fault {
            path,
            code: rule.code(),
            rule: rule.describe().to_owned(),
        });
    }
    if entries.len() > REPOSITORY_LIMITS.max_files {
        faults.push(Fault {
            path: "(the whole tree)".into(),
            code: "too-many-files",
            rule: format!(
                "holds {} entries; a source holds at most {} files",
                entries.len(),
                REPOSITORY_LIMITS.max_files
            ),
        });
    }
    if total > REPOSITORY_LIMITS.max_source_bytes as u64 {
        faults.push(Fault {
            path: "(the whole tree)".into(),
            code: "source-too-large",
            rule: format!(
                "its files hold {total} bytes; a source holds at most {} bytes",
                REPOSITORY_LIMITS.max_source_bytes
            ),
        });
        // Nothing more is read past the limit.
        return Err(GitSourceError::Unsupported(faults));
    }

    let bodies = reader.read_blobs(&wanted, total)?;
    let mut files = Vec::with_capacity(wanted.len());
    for ((path, _), body) in wanted.into_iter().zip(bodies) {
        let text = match String::from_utf8(body) {
            Ok(text) => text,
            Err(_) => {
                faults.push(Fault {
                    path,
                    code: "invalid-utf8",
                    rule: "is not UTF-8 text (a binary file?); sf stores UTF-8 text files only"
                        .into(),
                });
                continue;
            }
        };
        if let Err((reason, rule)) = source::check_text(&text) {
            faults.push(Fault {
                path,
                code: reason.code(),
                rule: rule.into(),
            });
            continue;
        }
        files.push(SourceText { path, text });
    }
    if !faults.is_empty() {
        faults.sort_by(|a, b| a.path.cmp(&b.path));
        return Err(GitSourceError::Unsupported(faults));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// A revision: non-empty, bounded, printable, not an option.
fn check_rev(rev: &str) -> Result<(), GitSourceError> {
    if rev.is_empty()
        || rev.len() > MAX_REV_BYTES
        || rev.starts_with('-')
        || rev.chars().any(|c| c.is_control() || c.is_whitespace())
    {
        return Err(GitSourceError::BadRevision(format!(
            "--rev {rev:?}: a revision is a branch, tag or commit name of at most \
             {MAX_REV_BYTES} bytes, not starting with - and without spaces or control characters"
        )));
    }
    Ok(())
}

/// The Git directory of `repo`, once it passes [`check_repository`]: `repo/.git` when it
/// exists (a work tree), `repo` otherwise (a bare repository). Git is never left to discover
/// it.
fn git_dir_of(repo: &Path) -> Result<PathBuf, GitSourceError> {
    match check_repository(repo) {
        Ok(checked) => Ok(checked.git_dir),
        Err(ForeignRepositoryError::NotARepository { path, detail }) => {
            Err(GitSourceError::NotARepository(format!(
                "--from-git {}: {}: {detail}",
                repo.display(),
                path.display()
            )))
        }
        Err(refused) => Err(GitSourceError::Refused(refused)),
    }
}

struct Reader {
    git: PathBuf,
    home: PathBuf,
    git_dir: PathBuf,
    deadline: Instant,
}

impl Reader {
    fn run(&self, args: &[&str], stdin: Vec<u8>, cap: u64) -> Result<GitRun, GitSourceError> {
        let args: Vec<String> = args.iter().map(|&arg| arg.to_owned()).collect();
        let describe = format!("git {}", args.join(" "));
        if Instant::now() >= self.deadline {
            return Err(GitSourceError::Git(format!(
                "{describe}: the deadline passed before it started"
            )));
        }
        let run = run_git(
            &self.git,
            &self.home,
            &self.git_dir,
            &args,
            stdin,
            cap,
            self.deadline,
        )
        .map_err(|error| {
            GitSourceError::Unavailable(format!(
                "{}: could not start {describe}: {error}",
                self.git.display()
            ))
        })?;
        match run.ending {
            Ending::TimedOut | Ending::OutputOverflow | Ending::OutputUnreadable => Err(
                GitSourceError::Git(format!("{describe} {}", run.describe_ending())),
            ),
            Ending::Exited(_) => Ok(run),
        }
    }

    /// `rev-parse --verify --end-of-options <REV>^{tree}`: the tree id.
    fn resolve_tree(&self, repo: &Path, rev: &str) -> Result<ObjectId, GitSourceError> {
        let spec = format!("{rev}^{{tree}}");
        let run = self.run(
            &["rev-parse", "--verify", "--end-of-options", &spec],
            Vec::new(),
            4096,
        )?;
        if !run.succeeded() {
            let stderr = run.stderr();
            if stderr.contains("not a git repository") || stderr.contains("dubious ownership") {
                return Err(GitSourceError::NotARepository(format!(
                    "--from-git {}: is not a Git repository sf can read: {stderr}",
                    repo.display()
                )));
            }
            return Err(GitSourceError::BadRevision(format!(
                "--rev {rev}: names no commit or tree in {} ({})",
                repo.display(),
                run.describe_ending()
            )));
        }
        let text = std::str::from_utf8(&run.stdout).unwrap_or_default();
        text.strip_suffix('\n')
            .and_then(ObjectId::parse_hex)
            .ok_or_else(|| {
                GitSourceError::Git(format!(
                    "git rev-parse answered {text:?}, not one 40-hex tree id (a SHA-256 \
                     repository is not supported)"
                ))
            })
    }

    /// `ls-tree -r -z -l --full-tree <tree>`: every non-tree entry, in Git's order.
    fn list_tree(&self, tree: &ObjectId) -> Result<Vec<Entry>, GitSourceError> {
        let hex = tree.to_hex();
        let run = self
            .run(
                &["ls-tree", "-r", "-z", "-l", "--full-tree", &hex],
                Vec::new(),
                LS_TREE_CAP,
            )
            .map_err(|error| match error {
                GitSourceError::Git(text) if text.contains("output cap") => {
                    GitSourceError::Unsupported(vec![Fault {
                        path: "(the whole tree)".into(),
                        code: "too-many-files",
                        rule: format!(
                            "lists more than {LS_TREE_CAP} bytes of entries; a source holds at \
                         most {} files",
                            REPOSITORY_LIMITS.max_files
                        ),
                    }])
                }
                other => other,
            })?;
        if !run.succeeded() {
            return Err(GitSourceError::Git(format!(
                "git ls-tree {hex} {}",
                run.describe_ending()
            )));
        }
        let malformed =
            |why: &str| GitSourceError::Git(format!("git ls-tree {hex}: malformed output: {why}"));
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
            entries.push(Entry {
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
    /// (re-hashed) and kind. `total` is the sum of the sizes `ls-tree` declared.
    fn read_blobs(
        &self,
        wanted: &[(String, ObjectId)],
        total: u64,
    ) -> Result<Vec<Vec<u8>>, GitSourceError> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let unique: BTreeMap<ObjectId, ()> = wanted.iter().map(|(_, id)| (*id, ())).collect();
        let ids: Vec<ObjectId> = unique.into_keys().collect();
        let mut stdin = Vec::with_capacity(ids.len() * 41);
        for id in &ids {
            stdin.extend_from_slice(id.to_hex().as_bytes());
            stdin.push(b'\n');
        }
        let cap = total + BATCH_FRAMING * ids.len() as u64;
        let run = self.run(&["cat-file", "--batch"], stdin, cap)?;
        if !run.succeeded() {
            return Err(GitSourceError::Git(format!(
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
            return Err(GitSourceError::Git(
                "git cat-file --batch wrote bytes after the last answer".into(),
            ));
        }
        Ok(wanted.iter().map(|(_, id)| bodies[id].clone()).collect())
    }
}

/// One `cat-file --batch` answer for `id`, which must be a blob hashing to `id`.
fn parse_blob<'a>(id: &ObjectId, input: &'a [u8]) -> Result<(Vec<u8>, &'a [u8]), GitSourceError> {
    let bad =
        |why: &str| GitSourceError::Git(format!("git cat-file --batch answer for {id}: {why}"));
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
