//! Spawning Git: the one place a Git process starts, with a fixed surface and hard bounds.
//!
//! Only five subcommands run, each with a fixed argument list, under `-c` settings that switch
//! off hooks, fsmonitor, reflogs, gc, maintenance, replace refs, transports and credential
//! helpers, in a cleared environment whose HOME is an empty private directory. Input is written from a thread, stdout and stderr are drained by threads
//! with byte caps, and a wall-clock deadline kills (SIGKILL) and reaps the process. The
//! runner knows nothing of ownership: callers check it before and after [`GitRunner::run`].
//! The settings, environment and bounds are [`sf_git::process`]'s, shared with the
//! host's read-only source reader; the subcommands are this store's own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use sf_contracts::git_object::ObjectId;
use sf_contracts::{ObjectStoreError, RefName};

use crate::reader::BatchReader;
pub(crate) use sf_git::process::{Ending, GitRun};
use sf_git::process::{GitCall, run_git};

/// The `for-each-ref` format: name, symbolic target and object, NUL-separated because none of
/// them can hold a NUL.
pub(crate) const REF_FORMAT: &str = "--format=%(refname)%00%(symref)%00%(objectname)";

/// The only Git invocations this store makes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Subcommand<'a> {
    /// `index-pack --strict --stdin`, reading a pack on stdin and keeping it as one pack.
    IndexPack,
    /// `cat-file --batch-command --buffer`, reading `contents <id>` commands and a `flush`
    /// on stdin.
    CatFileBatch,
    /// `update-ref --no-deref <name> <new> <old>`; `old` zero means "must be absent".
    UpdateRef {
        name: &'a RefName,
        new: &'a ObjectId,
        old: &'a ObjectId,
    },
    /// `for-each-ref --format=... <pattern>`; the pattern is a validated ref name or prefix.
    ForEachRef { pattern: &'a str },
    /// `repack --geometric=2 -d -n --no-write-bitmap-index -q`: the roll-up of small packs
    /// ([`crate::rollup`]); `-n` because `update-server-info` would write files the layout
    /// does not allow.
    Repack,
}

impl Subcommand<'_> {
    fn args(&self) -> Vec<String> {
        match self {
            Self::IndexPack => vec!["index-pack".into(), "--strict".into(), "--stdin".into()],
            Self::CatFileBatch => vec![
                "cat-file".into(),
                "--batch-command".into(),
                "--buffer".into(),
            ],
            Self::UpdateRef { name, new, old } => vec![
                "update-ref".into(),
                "--no-deref".into(),
                name.as_str().into(),
                new.to_hex(),
                old.to_hex(),
            ],
            Self::ForEachRef { pattern } => {
                vec!["for-each-ref".into(), REF_FORMAT.into(), (*pattern).into()]
            }
            Self::Repack => [
                "repack",
                "--geometric=2",
                "-d",
                "-n",
                "--no-write-bitmap-index",
                "-q",
            ]
            .map(String::from)
            .to_vec(),
        }
    }

    /// How the command is named in errors and reasons.
    pub(crate) fn describe(&self) -> String {
        format!("git {}", self.args().join(" "))
    }
}

/// Runs the pinned Git binary with a private empty HOME.
#[derive(Debug, Clone)]
pub(crate) struct GitRunner {
    git: PathBuf,
    home: Arc<tempfile::TempDir>,
}

impl GitRunner {
    pub(crate) fn new(git: PathBuf, home: Arc<tempfile::TempDir>) -> Self {
        Self { git, home }
    }

    /// Runs `subcommand` in `root` with `stdin` as input, at most `stdout_cap` bytes of output
    /// and `deadline`. `Err` only when the process could not be started at all.
    pub(crate) fn run(
        &self,
        root: &Path,
        subcommand: &Subcommand<'_>,
        stdin: Vec<u8>,
        stdout_cap: u64,
        deadline: Instant,
    ) -> Result<GitRun, ObjectStoreError> {
        run_git(
            &self.git,
            self.home.path(),
            root,
            &subcommand.args(),
            stdin,
            stdout_cap,
            deadline,
        )
        .map_err(|error| ObjectStoreError::Unavailable {
            reason: format!(
                "{}: could not start {}: {error}",
                self.git.display(),
                subcommand.describe()
            ),
        })
    }

    /// Starts a long-lived `cat-file --batch-command --buffer` in `root`, with the same settings, environment
    /// and HOME as every other command.
    pub(crate) fn batch_reader(&self, root: &Path) -> Result<BatchReader, ObjectStoreError> {
        let subcommand = Subcommand::CatFileBatch;
        let args = subcommand.args();
        let call = GitCall {
            git: &self.git,
            home: self.home.path(),
            git_dir: root,
            args: &args,
            address_space: None,
            extra_env: &[],
        };
        BatchReader::spawn(call.command()).map_err(|error| ObjectStoreError::Unavailable {
            reason: format!(
                "{}: could not start {}: {error}",
                self.git.display(),
                subcommand.describe()
            ),
        })
    }
}
