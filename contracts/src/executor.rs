//! The Executor contract: run one untrusted program under a confinement the answer can prove.
//!
//! An Executor is configured with one runtime (an executable and the host files it may read)
//! and one confinement profile. It describes both as digests, and it runs one program: a file
//! snapshot, an entry file (of the program or of the harness) and arguments, or a command
//! ([`crate::command`]: an argv, a working directory, variables, a dependency environment, a
//! results file), one input snapshot, one harness snapshot, a timeout and output limits.
//!
//! Inside a run, the program's files are at [`PROGRAM_DIR`] (the working directory), the
//! input's at [`INPUT_DIR`] and the harness's at [`HARNESS_DIR`], all read-only. The harness
//! is trusted test material from the Slice: an entry there runs code the Candidate cannot
//! change.
//!
//! `run` returns `Err` only when it started nothing: invalid input, a cancellation seen before
//! the start, or a confinement mechanism that is unavailable (it fails closed, never falling
//! back to less confinement). Once the program may have started, the outcome is a
//! [`RunAnswer`], whose [`RunStatus`] says how it ended and whose [`RunIdentities`] say what
//! was actually enforced: the program, input, harness, runtime, profile and bounds digests
//! and the enforcement facts ([`Enforcement`]). A judge pins these digests; an answer whose identities differ from
//! the pinned ones proves nothing about the pinned run.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::canonical::{self, Digest, Value};
use crate::command::{CapturedResults, RunCommand};
use crate::limit_hit::LimitHit;
use crate::snapshot::{MAX_SNAPSHOT_BYTES, MAX_SNAPSHOT_FILES, SnapshotFile};
use crate::tree_digest::{self, Directory, Node};
use crate::tree_path::EntryMode;

use crate::error_fields::contract_error;

/// The protocol string of the bounds digest's canonical document.
pub const BOUNDS_PROTOCOL: &str = "sf-run-bounds/1";

/// The longest timeout a request may ask for (one hour).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// The largest stdout or stderr limit a request may ask for (64 MiB each).
pub const MAX_OUTPUT_LIMIT: u64 = 64 * 1024 * 1024;

/// The most arguments a request may pass.
pub const MAX_ARGS: usize = 256;

/// The most bytes all arguments may hold together.
pub const MAX_ARG_BYTES: usize = 64 * 1024;

/// Where a run's program files appear inside the run, read-only; also its working directory.
pub const PROGRAM_DIR: &str = "/sf/program";
/// Where a run's input files appear inside the run, read-only.
pub const INPUT_DIR: &str = "/sf/input";
/// Where a run's harness files appear inside the run, read-only.
pub const HARNESS_DIR: &str = "/sf/harness";

/// Which snapshot of a run holds its entry file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryPlace {
    /// The program (the tree under test).
    Program,
    /// The harness (trusted test material).
    Harness,
}

impl EntryPlace {
    /// The stable kebab-case name of the place.
    pub fn code(self) -> &'static str {
        match self {
            Self::Program => "program",
            Self::Harness => "harness",
        }
    }

    /// The place named `code`.
    pub fn from_code(code: &str) -> Option<Self> {
        match code {
            "program" => Some(Self::Program),
            "harness" => Some(Self::Harness),
            _ => None,
        }
    }

    /// The directory the place's files appear in inside a run.
    pub fn dir(self) -> &'static str {
        match self {
            Self::Program => PROGRAM_DIR,
            Self::Harness => HARNESS_DIR,
        }
    }
}

/// The file a runtime is given first: a path relative to its place.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunEntry {
    /// Which snapshot holds the file.
    pub place: EntryPlace,
    /// The file's path within that snapshot, in the repository's path grammar.
    pub path: String,
}

impl RunEntry {
    /// An entry file of the program.
    pub fn program(path: impl Into<String>) -> Self {
        Self {
            place: EntryPlace::Program,
            path: path.into(),
        }
    }

    /// An entry file of the harness.
    pub fn harness(path: impl Into<String>) -> Self {
        Self {
            place: EntryPlace::Harness,
            path: path.into(),
        }
    }

    /// The entry's absolute path inside a run (`/sf/program/main.sh`).
    pub fn inside(&self) -> String {
        format!("{}/{}", self.place.dir(), self.path)
    }
}

impl From<&str> for RunEntry {
    fn from(path: &str) -> Self {
        Self::program(path)
    }
}

impl From<String> for RunEntry {
    fn from(path: String) -> Self {
        Self::program(path)
    }
}

impl fmt::Display for RunEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.place.code(), self.path)
    }
}

/// A cancellation flag shared between a caller and a running [`Executor::run`]. Cheap to
/// clone; every clone sees the same flag. Cancelling is final.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels every clone of this token.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether the token was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CancelToken")
            .field(&self.is_cancelled())
            .finish()
    }
}

/// The time and output bounds of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RunBounds {
    /// Wall-clock time from the start of the launch to the end of the run, measured on a
    /// monotonic clock. At least one millisecond and at most [`MAX_TIMEOUT`].
    pub timeout: Duration,
    /// The most stdout bytes kept; one byte more ends the run with
    /// [`RunStatus::OutputLimit`]. At most [`MAX_OUTPUT_LIMIT`].
    pub stdout_limit: u64,
    /// The same for stderr.
    pub stderr_limit: u64,
}

impl RunBounds {
    /// Bounds with the same limit for stdout and stderr.
    pub fn new(timeout: Duration, output_limit: u64) -> Self {
        Self {
            timeout,
            stdout_limit: output_limit,
            stderr_limit: output_limit,
        }
    }

    /// The timeout in whole milliseconds, as digested.
    pub fn timeout_ms(&self) -> u64 {
        u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX)
    }

    /// Checks the bounds against the contract's limits.
    pub fn check(&self) -> Result<(), ExecutorError> {
        let refuse = |input: &str, rule: &'static str| {
            Err(ExecutorError::InvalidInput {
                input: input.to_owned(),
                rule,
            })
        };
        if self.timeout < Duration::from_millis(1) || self.timeout > MAX_TIMEOUT {
            return refuse(
                &format!("timeout {:?}", self.timeout),
                "a timeout is at least 1 ms and at most one hour",
            );
        }
        if !self.timeout.subsec_nanos().is_multiple_of(1_000_000) {
            return refuse(
                &format!("timeout {:?}", self.timeout),
                "a timeout is a whole number of milliseconds",
            );
        }
        if self.stdout_limit > MAX_OUTPUT_LIMIT || self.stderr_limit > MAX_OUTPUT_LIMIT {
            return refuse(
                &format!(
                    "output limits {} and {}",
                    self.stdout_limit, self.stderr_limit
                ),
                "an output limit is at most 64 MiB",
            );
        }
        Ok(())
    }

    /// The `sha256:` digest of the canonical document
    /// `{"protocol":"sf-run-bounds/1","stderrLimitBytes":…,"stdoutLimitBytes":…,"timeoutMs":…}`.
    /// Every Executor digests bounds this way, so a judge can compute the expected digest.
    pub fn digest(&self) -> Digest {
        let document = canonical::object([
            ("protocol", Value::from(BOUNDS_PROTOCOL)),
            ("timeoutMs", Value::Integer(clamp(self.timeout_ms()))),
            ("stdoutLimitBytes", Value::Integer(clamp(self.stdout_limit))),
            ("stderrLimitBytes", Value::Integer(clamp(self.stderr_limit))),
        ]);
        canonical::digest(&document).expect("a small document of safe integers always encodes")
    }
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value)
        .unwrap_or(canonical::MAX_SAFE_INTEGER)
        .min(canonical::MAX_SAFE_INTEGER)
}

/// A program given by reference instead of by value: a base tree the Executor's host keeps
/// (a store's read-only copy, verified by the store against its digest), with a layer of
/// entries laid over it (a Candidate's changes, a Slice's overlay). What runs is the base with
/// the layer: the Executor computes its `sf-tree/1` digest ([`crate::tree_digest`]) from the
/// base's directories on the layer's paths, and that digest is the program's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramTree {
    /// The `sf-tree/1` digest of the base tree.
    pub base: Digest,
    /// The directory on the Executor's host that holds the base tree: absolute. The
    /// Executor binds what is there (read-only); the store that gave it answers for its
    /// content, as a dependency environment's store does.
    pub dir: PathBuf,
    /// The device and inode of `dir` when the store verified it: a directory that is not
    /// that one any more (the tree replaced since) is never run (`unavailable`, mechanism
    /// `program-tree`).
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
    /// The base's directories, by path (`""` the root): at least every directory on a path
    /// of the layer, and those of the entry file and of a command's working directory.
    pub directories: BTreeMap<String, Directory>,
    /// The entries laid over the base (a file, an executable or a link, replacing whatever
    /// the base holds at that path), at most [`MAX_SNAPSHOT_FILES`] and
    /// [`MAX_SNAPSHOT_BYTES`] together with the deletions.
    pub layer: Vec<SnapshotFile>,
    /// The base's leaves the layer removes.
    pub deleted: Vec<String>,
}

/// The program's tree as [`ProgramTree::check`] finds it: its digest and the directories
/// it reads an entry or a working directory from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedTree {
    /// The `sf-tree/1` digest of the program's tree.
    pub digest: Digest,
    /// The program's directories known from the request: the changed ones, and the base's
    /// others.
    directories: BTreeMap<String, Directory>,
}

impl CheckedTree {
    /// The node at `path` of the program's tree, when its directory is known.
    fn node(&self, path: &str) -> Option<&Node> {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        self.directories.get(dir).and_then(|dir| dir.get(name))
    }

    /// Whether `path` is a file (or a link) of the program.
    pub fn holds_file(&self, path: &str) -> bool {
        matches!(
            self.node(path),
            Some(Node::File { .. } | Node::Symlink { .. })
        )
    }

    /// Whether `dir` is a directory of the program.
    pub fn holds_directory(&self, dir: &str) -> bool {
        dir.is_empty() || matches!(self.node(dir), Some(Node::Directory { .. }))
    }
}

impl ProgramTree {
    /// Checks the reference and computes the program's digest: an absolute directory, a base
    /// whose given root directory has the base's digest, a layer of valid distinct paths
    /// within the snapshot bounds, and the directories the layer's paths lie in.
    pub fn check(&self) -> Result<CheckedTree, ExecutorError> {
        let refuse =
            |input: String, rule: &'static str| ExecutorError::InvalidInput { input, rule };
        if !self.dir.is_absolute() {
            return Err(refuse(
                format!("program tree {}", self.dir.display()),
                "a program tree's directory is absolute",
            ));
        }
        if self.directories.get("").map(|root| root.digest().hash) != Some(self.base.clone()) {
            return Err(refuse(
                format!("program tree {}", self.base),
                "the base's root directory given has the base's digest",
            ));
        }
        // Every other directory given is named, with its own digest, by its parent (given
        // too): so the whole set is the base's, by the root's digest alone.
        for (path, directory) in &self.directories {
            let Some((parent, name)) =
                (!path.is_empty()).then(|| path.rsplit_once('/').unwrap_or(("", path)))
            else {
                continue;
            };
            let named = self.directories.get(parent).and_then(|dir| dir.get(name));
            if !matches!(named, Some(Node::Directory { digest, .. }) if *digest == directory.digest())
            {
                return Err(refuse(
                    format!("program tree directory {path:?}"),
                    "each directory given is the one its parent names",
                ));
            }
        }
        let entries = self.layer.len() + self.deleted.len();
        let bytes: u64 = self
            .layer
            .iter()
            .map(|file| file.content.len() as u64)
            .sum();
        if entries > MAX_SNAPSHOT_FILES || bytes > MAX_SNAPSHOT_BYTES {
            return Err(refuse(
                format!("program tree layer of {entries} entries, {bytes} bytes"),
                "a layer holds at most 4096 entries and 16 MiB",
            ));
        }
        let mut changes = Vec::with_capacity(entries);
        let mut seen = std::collections::BTreeSet::new();
        for (path, mode) in self
            .layer
            .iter()
            .map(|file| (file.path.as_str(), Some(file.mode)))
            .chain(self.deleted.iter().map(|path| (path.as_str(), None)))
        {
            crate::tree_path::check_path(path, mode).map_err(|_| {
                refuse(
                    format!("program tree layer path {path:?}"),
                    "a layer path is in the tree grammar",
                )
            })?;
            if !seen.insert(path) {
                return Err(refuse(
                    format!("program tree layer path {path:?}"),
                    "a layer names each path once",
                ));
            }
        }
        for file in &self.layer {
            let node = match file.mode {
                EntryMode::Symlink => Node::Symlink {
                    target: String::from_utf8(file.content.clone()).map_err(|_| {
                        refuse(
                            format!("program tree link {:?}", file.path),
                            "a link's target is UTF-8",
                        )
                    })?,
                },
                mode => Node::file(mode == EntryMode::Executable, &file.content),
            };
            changes.push((file.path.clone(), Some(node)));
        }
        changes.extend(self.deleted.iter().map(|path| (path.clone(), None)));
        let applied = tree_digest::apply(&self.directories, &changes).map_err(|error| {
            refuse(
                format!("program tree: {error}"),
                "the base's directories on the layer's paths are given",
            )
        })?;
        let mut directories = self.directories.clone();
        for dir in tree_digest::touched(changes.iter().map(|(path, _)| path.as_str())) {
            directories.remove(&dir);
        }
        directories.extend(applied.directories);
        Ok(CheckedTree {
            digest: applied.root.hash,
            directories,
        })
    }
}

/// One program to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRequest {
    /// The program's files, placed read-only at a fixed path. A valid snapshot; empty when
    /// the program is given by reference (`program_tree`).
    pub program: Vec<SnapshotFile>,
    /// The program by reference: a base tree on the Executor's host with a layer laid over
    /// it, instead of `program`.
    pub program_tree: Option<ProgramTree>,
    /// The file the runtime is given first: a file of `program` or of `harness`.
    pub entry: RunEntry,
    /// The arguments after the entry: at most [`MAX_ARGS`] and [`MAX_ARG_BYTES`] together,
    /// none holding a NUL.
    pub args: Vec<String>,
    /// The input files, placed read-only at another fixed path. A valid snapshot.
    pub input: Vec<SnapshotFile>,
    /// The harness files, placed read-only at a third fixed path. A valid snapshot (empty
    /// when the run has no harness).
    pub harness: Vec<SnapshotFile>,
    /// The time and output bounds.
    pub bounds: RunBounds,
    /// The command to run instead of the runtime with `entry` and `args`: with one, `args`
    /// is empty and `entry` is not run (see [`crate::command`]).
    pub command: Option<RunCommand>,
    /// What the run is for, in the caller's words (a collection names the check), for the
    /// Executor's logs only: it enters no identity and no digest, and the program never sees
    /// it. At most [`MAX_LABEL_CHARS`] characters, none a control character.
    pub label: Option<String>,
}

/// The most characters of a [`RunRequest::label`].
pub const MAX_LABEL_CHARS: usize = 256;

/// The snapshot digests of a request's program, input and harness.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestDigests {
    /// `snapshot_digest` of the program.
    pub program: Digest,
    /// `snapshot_digest` of the input.
    pub input: Digest,
    /// `snapshot_digest` of the harness (of the empty snapshot when the run has none).
    pub harness: Digest,
}

impl RunRequest {
    /// Checks every rule an Executor checks before it starts anything, and returns the
    /// program's, the input's and the harness's digests.
    pub fn check(&self) -> Result<RequestDigests, ExecutorError> {
        if let Some(label) = &self.label
            && (label.chars().count() > MAX_LABEL_CHARS || label.chars().any(char::is_control))
        {
            return Err(ExecutorError::InvalidInput {
                input: "label".into(),
                rule: "a run's label is at most 256 characters, none a control character",
            });
        }
        let digest = |files: &[SnapshotFile], what: &str, rule: &'static str| {
            crate::snapshot::snapshot_digest(files).map_err(|error| ExecutorError::InvalidInput {
                input: format!("{what}: {error}"),
                rule,
            })
        };
        let tree = match &self.program_tree {
            None => None,
            Some(_) if !self.program.is_empty() => {
                return Err(ExecutorError::InvalidInput {
                    input: "program".into(),
                    rule: "a program given by reference has no files by value",
                });
            }
            Some(tree) => Some(tree.check()?),
        };
        let program = match &tree {
            Some(tree) => tree.digest.clone(),
            None => digest(&self.program, "program", "the program is a valid snapshot")?,
        };
        let input = digest(&self.input, "input", "the input is a valid snapshot")?;
        let harness = digest(&self.harness, "harness", "the harness is a valid snapshot")?;
        let holds_entry = match (self.entry.place, &tree) {
            (EntryPlace::Program, Some(tree)) => tree.holds_file(&self.entry.path),
            (EntryPlace::Program, None) => self.program.iter().any(|f| f.path == self.entry.path),
            (EntryPlace::Harness, _) => self.harness.iter().any(|f| f.path == self.entry.path),
        };
        if self.command.is_none() && !holds_entry {
            return Err(ExecutorError::InvalidInput {
                input: format!("entry {:?}", self.entry.path),
                rule: match self.entry.place {
                    EntryPlace::Program => "the entry is a file of the program",
                    EntryPlace::Harness => "the entry is a file of the harness",
                },
            });
        }
        if let Some(command) = &self.command {
            command.check()?;
            if !self.args.is_empty() {
                return Err(ExecutorError::InvalidInput {
                    input: "arguments".to_owned(),
                    rule: "a run with a command passes its arguments in the command's argv",
                });
            }
            let (dir, below) = crate::command::cwd_place(&command.cwd).unwrap_or(("", ""));
            let files = match dir {
                PROGRAM_DIR => Some(&self.program),
                INPUT_DIR => Some(&self.input),
                HARNESS_DIR => Some(&self.harness),
                _ => None,
            };
            let holds = match (&tree, dir) {
                (Some(tree), PROGRAM_DIR) => tree.holds_directory(below),
                _ => files.is_none_or(|files| crate::snapshot::holds_directory(files, below)),
            };
            if !below.is_empty() && !holds {
                return Err(ExecutorError::InvalidInput {
                    input: format!("cwd {:?}", command.cwd),
                    rule: "the working directory is a directory of its snapshot",
                });
            }
        }
        if self.args.len() > MAX_ARGS {
            return Err(ExecutorError::InvalidInput {
                input: format!("{} arguments", self.args.len()),
                rule: "a run takes at most 256 arguments",
            });
        }
        if self.args.iter().map(String::len).sum::<usize>() > MAX_ARG_BYTES {
            return Err(ExecutorError::InvalidInput {
                input: "arguments".to_owned(),
                rule: "the arguments hold at most 64 KiB together",
            });
        }
        if let Some(arg) = self.args.iter().find(|arg| arg.contains('\0')) {
            return Err(ExecutorError::InvalidInput {
                input: format!("argument {arg:?}"),
                rule: "an argument holds a NUL",
            });
        }
        self.bounds.check()?;
        Ok(RequestDigests {
            program,
            input,
            harness,
        })
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// The program exited on its own; [`RunAnswer::exit_code`] holds the code.
    Exited,
    /// The program was ended by a signal it did not ask the Executor for (a crash, an rlimit,
    /// its own kill); [`RunAnswer::signal`] holds the number.
    Signalled,
    /// The timeout passed; every process of the run was killed.
    TimedOut,
    /// stdout or stderr went past its limit; every process of the run was killed and exactly
    /// the limit's bytes were kept.
    OutputLimit,
    /// The caller cancelled, or the Executor lost control of the run (see
    /// [`RunAnswer::problems`]); every process of the run was killed.
    Aborted,
}

impl RunStatus {
    /// The stable kebab-case name of the status.
    pub fn code(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::Signalled => "signalled",
            Self::TimedOut => "timed-out",
            Self::OutputLimit => "output-limit",
            Self::Aborted => "aborted",
        }
    }
}

/// The most facts one [`Enforcement`] holds.
pub const MAX_ENFORCEMENT_FACTS: usize = 64;

/// The rule a mechanism name and a status follow, in words.
pub const ENFORCEMENT_WORD_RULE: &str =
    "is 1 to 64 characters of a-z, 0-9, '.' and '-', starting with a letter or digit";

/// Whether `word` is a mechanism name or a status: `^[a-z0-9][a-z0-9.-]{0,63}$`.
pub fn is_enforcement_word(word: &str) -> bool {
    let bytes = word.as_bytes();
    (1..=64).contains(&bytes.len())
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'))
}

/// What an Executor enforced on a run, as facts in its own words: each a confinement
/// mechanism (`landlock`, `seccomp`, `host-identity`, a macOS sandbox profile…) and its status
/// (`fully-enforced`, `reserved-id`, …), at most one status per mechanism.
///
/// The contract names no mechanism. An Executor's profile states the facts every run under it
/// reports ([`ProfileDescription::enforces`]); a Slice pins them when it is frozen, and a run
/// is attributable only when it reports each pinned fact exactly ([`Enforcement::unmet`]).
/// Facts beyond the pinned ones are recorded, never required.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Enforcement {
    facts: BTreeMap<String, String>,
}

/// Facts write themselves as an object of mechanism → status.
impl serde::Serialize for Enforcement {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(&self.facts)
    }
}

/// Facts read themselves from an object of mechanism → status, each fact checked as
/// [`Enforcement::insert`] checks it.
impl<'de> serde::Deserialize<'de> for Enforcement {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Facts;
        impl<'de> serde::de::Visitor<'de> for Facts {
            type Value = Enforcement;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of mechanism: status")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Enforcement, A::Error> {
                let mut enforcement = Enforcement::new();
                while let Some((mechanism, status)) = map.next_entry::<String, String>()? {
                    enforcement
                        .insert(mechanism, status)
                        .map_err(serde::de::Error::custom)?;
                }
                Ok(enforcement)
            }
        }
        deserializer.deserialize_map(Facts)
    }
}

impl Enforcement {
    /// No facts.
    pub fn new() -> Self {
        Self::default()
    }

    /// The facts of `pairs`, checked: every word in [`ENFORCEMENT_WORD_RULE`], no mechanism
    /// twice, at most [`MAX_ENFORCEMENT_FACTS`].
    pub fn from_facts<M, S>(pairs: impl IntoIterator<Item = (M, S)>) -> Result<Self, String>
    where
        M: Into<String>,
        S: Into<String>,
    {
        let mut enforcement = Self::new();
        for (mechanism, status) in pairs {
            enforcement.insert(mechanism, status)?;
        }
        Ok(enforcement)
    }

    /// Adds the fact that `mechanism` had `status`; refused (with the rule broken) when a word
    /// breaks [`ENFORCEMENT_WORD_RULE`], the mechanism already has a status, or the facts are
    /// full.
    pub fn insert(
        &mut self,
        mechanism: impl Into<String>,
        status: impl Into<String>,
    ) -> Result<(), String> {
        let (mechanism, status) = (mechanism.into(), status.into());
        for word in [&mechanism, &status] {
            if !is_enforcement_word(word) {
                return Err(format!("{word:?} {ENFORCEMENT_WORD_RULE}"));
            }
        }
        if self.facts.contains_key(&mechanism) {
            return Err(format!("mechanism {mechanism} is stated twice"));
        }
        if self.facts.len() >= MAX_ENFORCEMENT_FACTS {
            return Err(format!(
                "at most {MAX_ENFORCEMENT_FACTS} enforcement facts are stated"
            ));
        }
        self.facts.insert(mechanism, status);
        Ok(())
    }

    /// The status stated for `mechanism`.
    pub fn status(&self, mechanism: &str) -> Option<&str> {
        self.facts.get(mechanism).map(String::as_str)
    }

    /// Every fact, by mechanism name.
    pub fn facts(&self) -> impl Iterator<Item = (&str, &str)> {
        self.facts
            .iter()
            .map(|(mechanism, status)| (mechanism.as_str(), status.as_str()))
    }

    /// Whether no fact is stated.
    pub fn is_empty(&self) -> bool {
        self.facts.is_empty()
    }

    /// The facts as a canonical JSON object of mechanism → status.
    pub fn to_value(&self) -> Value {
        Value::Object(
            self.facts
                .iter()
                .map(|(mechanism, status)| (mechanism.clone(), Value::String(status.clone())))
                .collect(),
        )
    }

    /// The facts of a JSON object of mechanism → status, checked as [`Enforcement::insert`]
    /// checks them; `Err` names the rule broken.
    pub fn from_value(value: &Value) -> Result<Self, String> {
        let Value::Object(members) = value else {
            return Err(format!(
                "is an object of mechanism: status, not {}",
                value.type_name()
            ));
        };
        let mut enforcement = Self::new();
        for (mechanism, status) in members {
            let Value::String(status) = status else {
                return Err(format!("{mechanism}: the status is a string"));
            };
            enforcement.insert(mechanism.clone(), status.clone())?;
        }
        Ok(enforcement)
    }

    /// The facts of `required` these facts do not state exactly, each in words
    /// (`landlock was partially-enforced, not fully-enforced`); empty when every one holds.
    pub fn unmet(&self, required: &Enforcement) -> Vec<String> {
        required
            .facts()
            .filter_map(|(mechanism, status)| match self.status(mechanism) {
                Some(stated) if stated == status => None,
                Some(stated) => Some(format!("{mechanism} was {stated}, not {status}")),
                None => Some(format!("{mechanism} was not stated (pinned: {status})")),
            })
            .collect()
    }
}

/// The identities of one run: what ran, under what, within what.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunIdentities {
    /// `snapshot_digest` of the program.
    pub program: Digest,
    /// `snapshot_digest` of the input.
    pub input: Digest,
    /// `snapshot_digest` of the harness (of the empty snapshot when the run had none).
    pub harness: Digest,
    /// The runtime digest ([`RuntimeDescription::digest`]) in force for the run.
    pub runtime: Digest,
    /// The profile digest ([`ProfileDescription::digest`]) in force for the run.
    pub profile: Digest,
    /// [`RunBounds::digest`] of the bounds in force (the effective ones).
    pub bounds: Digest,
    /// The enforcement facts the Executor stated for the run, in its own words.
    pub enforcement: Enforcement,
    /// [`RunCommand::digest`] of the command that ran, for a run with one.
    pub command: Option<Digest>,
}

/// Whether every process of a run had ended when the answer was given.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NamespaceDisposition {
    /// The run's process namespace was torn down: no process of the run is left.
    Reaped,
    /// The Executor could not confirm it; the reason says why.
    Unconfirmed {
        /// Why the end of every process could not be confirmed.
        reason: String,
    },
}

/// Resource use of a run's processes, as the kernel accounted it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RunTimes {
    /// Monotonic wall-clock time from the start of the launch to the end of the run.
    pub wall: Duration,
    /// User CPU time of every process of the run that was reaped.
    pub user: Duration,
    /// System CPU time of the same processes.
    pub system: Duration,
    /// The largest resident set of any one of them, in KiB.
    pub max_rss_kib: u64,
    /// The most memory the run used at once, all its processes and what they held (tmpfs,
    /// shared memory) together, in bytes, where the Executor measured it (a control group's
    /// peak).
    pub memory_peak_bytes: Option<u64>,
}

/// The outcome of a run that started.
#[derive(Clone, PartialEq, Eq)]
pub struct RunAnswer {
    /// How the run ended.
    pub status: RunStatus,
    /// The exit code when `status` is [`RunStatus::Exited`].
    pub exit_code: Option<i32>,
    /// The signal number when `status` is [`RunStatus::Signalled`].
    pub signal: Option<i32>,
    /// The stdout bytes kept: at most the stdout limit.
    pub stdout: Vec<u8>,
    /// The stderr bytes kept: at most the stderr limit.
    pub stderr: Vec<u8>,
    /// The time and memory the run's processes used.
    pub times: RunTimes,
    /// The bounds in force (the request's, possibly capped by the Executor).
    pub bounds: RunBounds,
    /// What ran, under which runtime, profile and bounds, with which enforcement: what a
    /// judge compares with the pinned identities.
    pub identities: RunIdentities,
    /// Whether every process of the run was known to have ended when the answer was given.
    pub namespace: NamespaceDisposition,
    /// What went wrong in the Executor itself after the start, if anything; empty normally.
    pub problems: Vec<String>,
    /// The Executor's own limits the run hit, as far as it could see them: at most one per
    /// limit, in [`Limit`](crate::Limit) order ([`check_limits_hit`](crate::check_limits_hit)).
    /// A run that hit one failed for the Executor's reason, whatever the program did.
    pub limits_hit: Vec<LimitHit>,
    /// The results file, for a run whose command asked for one (`None` otherwise).
    pub results: Option<CapturedResults>,
    /// Where a remote Executor's run was executed (the Action and the worker); `None` for a
    /// local run.
    pub remote: Option<crate::RemoteRun>,
}

impl fmt::Debug for RunAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunAnswer")
            .field("status", &self.status)
            .field("exit_code", &self.exit_code)
            .field("signal", &self.signal)
            .field("stdout", &String::from_utf8_lossy(&self.stdout))
            .field("stderr", &String::from_utf8_lossy(&self.stderr))
            .field("times", &self.times)
            .field("bounds", &self.bounds)
            .field("identities", &self.identities)
            .field("namespace", &self.namespace)
            .field("problems", &self.problems)
            .field("limits_hit", &self.limits_hit)
            .field("remote", &self.remote)
            .finish()
    }
}

impl RunAnswer {
    /// The answer for a run that may have started but whose outcome the Executor lost (a
    /// plugin that failed during the run, a remote cluster that gave no answer): status
    /// aborted, no output, the request's program, input and harness digests (what was sent),
    /// and for the runtime, the profile and the bounds the [`unknown_identity`] digests,
    /// which match no real description, so that no judge pinning identities takes it as
    /// evidence. No enforcement fact is stated; `namespace` says why the end of its processes
    /// is not confirmed, `problems` what went wrong.
    pub fn lost(
        request: &RunRequest,
        digests: RequestDigests,
        wall: Duration,
        unconfirmed: String,
        problems: Vec<String>,
    ) -> Self {
        let RequestDigests {
            program,
            input,
            harness,
        } = digests;
        Self {
            results: None,
            status: RunStatus::Aborted,
            exit_code: None,
            signal: None,
            stdout: Vec::new(),
            stderr: Vec::new(),
            times: RunTimes {
                wall,
                ..RunTimes::default()
            },
            bounds: request.bounds,
            identities: RunIdentities {
                command: None,
                program,
                input,
                harness,
                runtime: unknown_identity("runtime"),
                profile: unknown_identity("profile"),
                bounds: unknown_identity("bounds"),
                enforcement: Enforcement::new(),
            },
            namespace: NamespaceDisposition::Unconfirmed {
                reason: unconfirmed,
            },
            problems,
            limits_hit: Vec::new(),
            remote: None,
        }
    }
}

/// The protocol string of the digests that stand for an identity nobody can vouch for.
pub const UNKNOWN_IDENTITY_PROTOCOL: &str = "sf-executor-identity-unknown/1";

/// The digest standing for identity `what` (`runtime`, `profile`, `bounds`) of a run whose
/// outcome was lost: the digest of `sf-executor-identity-unknown/1\n<what>`, which is no
/// runtime's, profile's or bounds' digest (theirs are digests of other documents).
pub fn unknown_identity(what: &str) -> Digest {
    Digest::of(format!("{UNKNOWN_IDENTITY_PROTOCOL}\n{what}").as_bytes())
}

/// How a readable path may be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReadableKind {
    /// The file itself.
    File,
    /// The directory and everything below it.
    Subtree,
}

/// One host path the profile lets a program read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReadablePath {
    /// The absolute path as configured.
    pub path: PathBuf,
    /// Whether the path alone or everything below it is readable.
    pub kind: ReadableKind,
}

/// The runtime of an Executor: its executable and every host path a program may read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeDescription {
    /// The executable as configured (absolute; it may be a symbolic link).
    pub executable: PathBuf,
    /// Every host path a program can read under this runtime and profile, sorted: the
    /// runtime's configured paths and the profile's fixed ones (devices such as /dev/null).
    pub readable: Vec<ReadablePath>,
    /// The `sha256:` digest over the executable's bytes and the readable list.
    pub digest: Digest,
}

/// The confinement profile of an Executor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileDescription {
    /// The recipe as canonical JSON: everything the Executor enforces besides the runtime.
    /// When it is an object with an `enforces` member, that member is an object of the
    /// enforcement facts (mechanism → status) every run under the profile reports
    /// ([`ProfileDescription::enforces`]).
    pub recipe: Vec<u8>,
    /// The `sha256:` digest of `recipe`.
    pub digest: Digest,
}

impl ProfileDescription {
    /// The enforcement facts every run under this profile reports: the recipe's `enforces`
    /// object, or none when the recipe has no such member. `Err` when the recipe is not
    /// canonical JSON or `enforces` is not an object of facts.
    pub fn enforces(&self) -> Result<Enforcement, ExecutorError> {
        let invalid = |rule: &'static str| ExecutorError::InvalidInput {
            input: "profile recipe".into(),
            rule,
        };
        let recipe = canonical::parse_canonical(&self.recipe)
            .map_err(|_| invalid("the profile recipe is canonical JSON"))?;
        let Value::Object(members) = recipe else {
            return Ok(Enforcement::new());
        };
        match members.get("enforces") {
            None => Ok(Enforcement::new()),
            Some(enforces) => Enforcement::from_value(enforces).map_err(|_| {
                invalid(
                    "the profile recipe's enforces member is an object of mechanism: status, \
                     each a word of a-z, 0-9, '.' and '-'",
                )
            }),
        }
    }
}

/// Whether an Executor's runs may overlap (a collection's `--jobs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Overlap {
    /// Runs may overlap: the Executor bounds them together, or its operator allowed it.
    Allowed,
    /// Runs must not overlap: nothing would bound them together. `reason` says why, and how
    /// an operator allows it.
    OneAtATime {
        /// Why, and what to do.
        reason: String,
    },
}

/// Runs one program at a time under a fixed runtime and confinement profile.
pub trait Executor: Send + Sync {
    /// Describes the runtime as it is now (re-reading the executable, so a changed runtime
    /// gives a changed digest). `Err` when it cannot be read.
    fn describe_runtime(&self) -> Result<RuntimeDescription, ExecutorError>;

    /// Describes the confinement profile.
    fn profile(&self) -> Result<ProfileDescription, ExecutorError>;

    /// Whether runs may overlap, asked before a collection runs several at once. By default
    /// they may: an Executor that cannot bound overlapping runs together says so.
    fn overlap(&self) -> Overlap {
        Overlap::Allowed
    }

    /// Runs `request`. `Err` only when nothing started: invalid input, `cancel` already
    /// cancelled, or a confinement mechanism unavailable. Once the program may have started,
    /// the outcome is an answer, and `cancel` ends the run with [`RunStatus::Aborted`].
    fn run(&self, request: &RunRequest, cancel: &CancelToken) -> Result<RunAnswer, ExecutorError>;
}

contract_error! {
    /// Why an Executor started nothing.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum ExecutorError {
        /// A request or configuration value breaks a rule.
        #[error("invalid input: {input}: {rule}")]
        "invalid-input" InvalidInput {
            /// The value at fault, named and shown (`timeout 0ns`, `entry "main.sh"`).
            input: String,
            /// The rule it breaks.
            rule: &'static str,
        },
        /// A confinement mechanism (or the runtime, or the Executor's own helper) is unavailable;
        /// nothing ran, and nothing runs with less confinement instead.
        #[error("{mechanism} unavailable: {reason}")]
        "unavailable" Unavailable {
            /// What is unavailable: a mechanism (`landlock`), the runtime or the helper.
            mechanism: String,
            /// Why it is unavailable.
            reason: String,
        },
        /// The cancel token was cancelled before anything started.
        #[error("cancelled before the run started")]
        "aborted" Aborted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> SnapshotFile {
        SnapshotFile::regular(path, content.as_bytes().to_vec())
    }

    fn request() -> RunRequest {
        RunRequest {
            label: None,
            program_tree: None,
            command: None,
            program: vec![file("main.sh", "echo hi")],
            entry: "main.sh".into(),
            args: vec![],
            input: vec![],
            harness: vec![],
            bounds: RunBounds::new(Duration::from_secs(1), 1024),
        }
    }

    #[test]
    fn bounds_digest_covers_each_field() {
        let base = RunBounds::new(Duration::from_millis(200), 65536);
        let mut other = base;
        other.timeout = Duration::from_millis(201);
        assert_ne!(base.digest(), other.digest());
        let mut other = base;
        other.stderr_limit += 1;
        assert_ne!(base.digest(), other.digest());
        assert_eq!(
            base.digest(),
            RunBounds::new(Duration::from_millis(200), 65536).digest()
        );
    }

    #[test]
    fn request_rules() {
        assert!(request().check().is_ok());
        // A label is the caller's words for logs: bounded, no control character, and it
        // changes no digest.
        let mut labelled = request();
        labelled.label = Some("check bug-fixed".into());
        assert_eq!(labelled.check().unwrap(), request().check().unwrap());
        for bad in ["a\nb".to_owned(), "x".repeat(MAX_LABEL_CHARS + 1)] {
            labelled.label = Some(bad);
            assert_eq!(labelled.check().unwrap_err().code(), "invalid-input");
        }
        let mut bad = request();
        bad.entry = "other.sh".into();
        assert_eq!(bad.check().unwrap_err().code(), "invalid-input");
        let mut bad = request();
        bad.entry = RunEntry::harness("main.sh");
        assert_eq!(bad.check().unwrap_err().code(), "invalid-input");
        let mut good = request();
        good.harness = vec![file("run.sh", "sh /sf/program/main.sh")];
        good.entry = RunEntry::harness("run.sh");
        let digests = good.check().unwrap();
        assert_ne!(digests.harness, request().check().unwrap().harness);
        let mut bad = request();
        bad.args = vec!["a\0b".into()];
        assert_eq!(bad.check().unwrap_err().code(), "invalid-input");
        let mut bad = request();
        bad.bounds.timeout = Duration::ZERO;
        assert_eq!(bad.check().unwrap_err().code(), "invalid-input");
        let mut bad = request();
        bad.bounds.stdout_limit = MAX_OUTPUT_LIMIT + 1;
        assert_eq!(bad.check().unwrap_err().code(), "invalid-input");
        let mut bad = request();
        bad.program.push(file("../x", ""));
        assert_eq!(bad.check().unwrap_err().code(), "invalid-input");
    }

    #[test]
    fn enforcement_facts_are_words_stated_once_and_compared_exactly() {
        let mut facts = Enforcement::new();
        facts.insert("landlock", "fully-enforced").unwrap();
        facts.insert("landlock-abi", "6").unwrap();
        assert!(facts.insert("landlock", "not-enforced").is_err());
        for bad in ["", "Landlock", "-x", "a b", "a_b", &"a".repeat(65)] {
            assert!(facts.clone().insert(bad, "x").is_err(), "{bad:?}");
            assert!(facts.clone().insert("m", bad).is_err(), "{bad:?}");
        }
        let required = Enforcement::from_facts([("landlock", "fully-enforced")]).unwrap();
        assert!(facts.unmet(&required).is_empty());
        let partial = Enforcement::from_facts([("landlock", "partially-enforced")]).unwrap();
        assert_eq!(
            partial.unmet(&required),
            vec!["landlock was partially-enforced, not fully-enforced".to_owned()]
        );
        assert_eq!(Enforcement::new().unmet(&required).len(), 1);
        assert!(required.unmet(&Enforcement::new()).is_empty());
        assert_eq!(Enforcement::from_value(&facts.to_value()).unwrap(), facts);
        let mut full = Enforcement::new();
        for n in 0..MAX_ENFORCEMENT_FACTS {
            full.insert(format!("m{n}"), "x").unwrap();
        }
        assert!(full.insert("one-more", "x").is_err());
    }

    #[test]
    fn a_profile_states_its_enforcement_in_its_recipe() {
        let profile = |recipe: &str| ProfileDescription {
            recipe: recipe.as_bytes().to_vec(),
            digest: Digest::of(recipe.as_bytes()),
        };
        assert_eq!(
            profile(r#"{"enforces":{"landlock":"fully-enforced"},"x":1}"#)
                .enforces()
                .unwrap(),
            Enforcement::from_facts([("landlock", "fully-enforced")]).unwrap()
        );
        assert!(profile(r#"{"x":1}"#).enforces().unwrap().is_empty());
        assert!(profile("[]").enforces().unwrap().is_empty());
        for bad in [
            r#"{"enforces":[]}"#,
            r#"{"enforces":{"A":"b"}}"#,
            r#"{"b":1, "a":2}"#,
        ] {
            assert_eq!(
                profile(bad).enforces().unwrap_err().code(),
                "invalid-input",
                "{bad}"
            );
        }
    }

    #[test]
    fn cancel_token_is_shared() {
        let token = CancelToken::new();
        let clone = token.clone();
        assert!(!clone.is_cancelled());
        token.cancel();
        assert!(clone.is_cancelled());
    }
}
