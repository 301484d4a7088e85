//! The team's Git remote, reached through the pinned git binary's own transports
//! ([`GitRemote`], the [`Remote`] delivery pushes through).
//!
//! Each call runs in a scratch bare repository of its own, in a private temporary directory
//! removed when the call ends: a push writes the objects it sends there (one pack through
//! `unpack-objects`, the base listed in `shallow` so Git never looks for its parents), makes
//! the marker tag with `mktag` (which must give the id sf computed), and runs one
//! `git push --porcelain --atomic` with an explicit `--force-with-lease=<ref>:<expected>` per
//! ref. Git runs hardened as everywhere in sf ([`sf_git::process`]: no hooks, no user or
//! system configuration, no prompts, an empty HOME, bounded time and output); only the one
//! protocol the URL names is allowed, and a credential helper, when configured, is scoped to
//! that URL. What a remote says is hostile: every line kept is cut and made printable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sf_git::process::{Ending, GitCall, GitRun, pin_git};

use crate::contracts::RefName;
use crate::git_object::ObjectId;
use crate::repository::{Push, PushOutcome, Remote, RemoteError, Transport, check_url};

/// How long reading a remote's refs may take by default.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a push may take by default.
pub const DEFAULT_PUSH_TIMEOUT: Duration = Duration::from_secs(300);
/// The most output kept from `ls-remote` (only the lines asked for are printed).
const LS_REMOTE_CAP: u64 = 64 * 1024;
/// The most output kept from a push (its porcelain status, a few lines).
const PUSH_CAP: u64 = 64 * 1024;
/// The most characters of a remote's words kept in a reason.
const REASON_CHARS: usize = 1024;
/// The address space of a Git process reading a remote's refs: an endless advertisement makes
/// the client grow without end (hundreds of MiB a second).
const READ_ADDRESS_SPACE: u64 = 1 << 30;
/// The address space of a Git process that pushes or fetches (it maps packs).
const TRANSFER_ADDRESS_SPACE: u64 = 8 << 30;

/// The team's remote through the pinned git binary.
#[derive(Clone, Debug)]
pub struct GitRemote {
    git: PathBuf,
    read_timeout: Duration,
    push_timeout: Duration,
    credential_helper: Option<String>,
    ssh_command: Option<String>,
}

impl GitRemote {
    /// Pins Git (`configured`, or the first of sf-git's default paths) with the default
    /// timeouts and no credential helper. The error names the binary and the rule it breaks.
    pub fn new(configured: Option<&Path>) -> Result<Self, String> {
        let git = pin_git(configured)?;
        Ok(Self {
            git: git.path,
            read_timeout: DEFAULT_READ_TIMEOUT,
            push_timeout: DEFAULT_PUSH_TIMEOUT,
            credential_helper: None,
            ssh_command: None,
        })
    }

    /// The same with other bounds: reading refs, and one push.
    pub fn with_timeouts(mut self, read: Duration, push: Duration) -> Self {
        self.read_timeout = read;
        self.push_timeout = push;
        self
    }

    /// The same with a credential helper (as Git's `credential.helper` takes it), used for
    /// the delivery's URL only. Its secrets stay with it: sf never reads or records them.
    pub fn with_credential_helper(mut self, helper: Option<String>) -> Self {
        self.credential_helper = helper;
        self
    }

    /// The same with an SSH command for `ssh://` URLs (as Git's `core.sshCommand` takes it:
    /// the user's key and known-hosts file), run with the caller's `SSH_AUTH_SOCK` so that
    /// their agent can answer. Without one, Git's SSH is off and an `ssh://` push fails.
    pub fn with_ssh_command(mut self, command: Option<String>) -> Self {
        self.ssh_command = command;
        self
    }

    /// The variables a call to `url` adds: the SSH agent's socket, for an SSH command.
    fn environment(&self, url: &str) -> Vec<(String, String)> {
        match (
            check_url(url),
            &self.ssh_command,
            std::env::var("SSH_AUTH_SOCK"),
        ) {
            (Ok(Transport::Ssh), Some(_), Ok(socket)) => vec![("SSH_AUTH_SOCK".into(), socket)],
            _ => Vec::new(),
        }
    }

    /// The `-c` settings a call to `url` adds: its one protocol, and its credential helper
    /// or SSH command.
    fn settings(&self, url: &str) -> Result<Vec<String>, String> {
        let transport = check_url(url).map_err(str::to_owned)?;
        let mut args = vec![
            "-c".to_owned(),
            format!("protocol.{}.allow=always", transport.name()),
            // A redirect could send the push, or the helper's credentials, elsewhere.
            "-c".to_owned(),
            "http.followRedirects=false".to_owned(),
        ];
        if let Some(helper) = &self.credential_helper {
            args.extend(["-c".to_owned(), format!("credential.{url}.helper={helper}")]);
        }
        if let (Transport::Ssh, Some(command)) = (transport, &self.ssh_command) {
            args.extend(["-c".to_owned(), format!("core.sshCommand={command}")]);
        }
        Ok(args)
    }

    fn run(
        &self,
        scratch: &Scratch,
        args: Vec<String>,
        stdin: Vec<u8>,
        cap: u64,
        address_space: u64,
    ) -> Result<GitRun, String> {
        GitCall {
            git: &self.git,
            home: &scratch.home,
            git_dir: &scratch.repo,
            args: &args,
            address_space: Some(address_space),
            extra_env: &scratch.env,
        }
        .run(stdin, cap, scratch.deadline)
        .map_err(|error| format!("git could not be started: {error}"))
    }

    /// Writes what the push sends into the scratch repository: the objects, the boundary and
    /// the marker tag (whose id must be the one sf computed).
    fn stage(&self, scratch: &Scratch, push: &Push<'_>) -> Result<(), String> {
        let objects: Vec<_> = push.objects.iter().collect();
        let pack = sf_git::pack::encode(&objects).map_err(|error| error.to_string())?;
        let unpacked = self.run(
            scratch,
            vec!["unpack-objects".into(), "-q".into()],
            pack,
            1024,
            TRANSFER_ADDRESS_SPACE,
        )?;
        if !unpacked.succeeded() {
            return Err(format!(
                "writing the objects to push: git unpack-objects {}",
                unpacked.describe_ending()
            ));
        }
        let shallow: String = push.boundary.iter().map(|id| format!("{id}\n")).collect();
        std::fs::write(scratch.repo.join("shallow"), shallow)
            .map_err(|error| format!("writing the push's history boundary: {error}"))?;
        let (tag, id) = push.tag;
        let made = self.run(
            scratch,
            vec!["mktag".into()],
            tag.to_vec(),
            1024,
            READ_ADDRESS_SPACE,
        )?;
        let printed = String::from_utf8_lossy(&made.stdout);
        if !made.succeeded() || printed.trim() != id.to_hex() {
            return Err(format!(
                "git mktag gave {:?} for the marker tag, not {id}: {}",
                printed.trim(),
                made.describe_ending()
            ));
        }
        Ok(())
    }
}

/// The tip of an upstream branch, fetched into a scratch repository that lives as long as
/// this value: read it with [`crate::git_source::GitSource`] like any local repository.
#[derive(Debug)]
pub struct FetchedUpstream {
    scratch: Scratch,
    /// The commit the branch named when fetched.
    pub commit: ObjectId,
}

impl FetchedUpstream {
    /// The scratch repository holding the fetched history.
    pub fn path(&self) -> &Path {
        &self.scratch.repo
    }
}

impl GitRemote {
    /// Fetches `branch` of the remote at `url` (its history, no tags, every object checked by
    /// Git's fsck) into the same ref of a scratch repository, bounded by the push timeout.
    pub fn fetch(&self, url: &str, branch: &RefName) -> Result<FetchedUpstream, RemoteError> {
        let failed = |reason: String| RemoteError {
            reason: printable(&reason),
        };
        // Fetched to the same name, so that the revision an import records is the branch.
        let fetched = branch.as_str();
        let FetchedRefs { scratch } = self.fetch_refs(url, &[format!("+{branch}:{fetched}")])?;
        let resolved = self
            .run(
                &scratch,
                ["rev-parse", "--verify", "--end-of-options", fetched]
                    .map(str::to_owned)
                    .to_vec(),
                Vec::new(),
                1024,
                READ_ADDRESS_SPACE,
            )
            .map_err(failed)?;
        let commit = std::str::from_utf8(&resolved.stdout)
            .ok()
            .and_then(|text| ObjectId::parse_hex(text.trim()))
            .filter(|_| resolved.succeeded())
            .ok_or_else(|| failed(format!("the fetched {branch} cannot be read back")))?;
        Ok(FetchedUpstream { scratch, commit })
    }
}

/// Refs fetched from a remote into a scratch repository that lives as long as this value:
/// read it with [`crate::git_source`] like any local repository.
#[derive(Debug)]
pub struct FetchedRefs {
    scratch: Scratch,
}

impl FetchedRefs {
    /// The scratch repository holding what was fetched.
    pub fn path(&self) -> &Path {
        &self.scratch.repo
    }
}

impl GitRemote {
    /// Fetches `refspecs` of the remote at `url` (each `+SRC:DST`, globs allowed; every
    /// object checked by Git's fsck, no tags followed) into a scratch repository, bounded by
    /// the push timeout. A glob that matches nothing fetches nothing, and is no error.
    pub fn fetch_refs(&self, url: &str, refspecs: &[String]) -> Result<FetchedRefs, RemoteError> {
        let failed = |reason: String| RemoteError {
            reason: printable(&reason),
        };
        let deadline = Instant::now() + self.push_timeout;
        let scratch = Scratch::new(self, url, deadline).map_err(failed)?;
        let mut args = self.settings(url).map_err(failed)?;
        args.extend(
            [
                "-c",
                "fetch.fsckObjects=true",
                "fetch",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-recurse-submodules",
                "--quiet",
                "--",
                url,
            ]
            .map(str::to_owned),
        );
        args.extend(refspecs.iter().cloned());
        let run = self
            .run(&scratch, args, Vec::new(), 1024, TRANSFER_ADDRESS_SPACE)
            .map_err(failed)?;
        if !run.succeeded() {
            return Err(failed(format!("git fetch {}", run.describe_ending())));
        }
        Ok(FetchedRefs { scratch })
    }
}

impl Remote for GitRemote {
    fn read_refs(
        &self,
        url: &str,
        names: &[&RefName],
    ) -> Result<BTreeMap<String, ObjectId>, RemoteError> {
        let failed = |reason: String| RemoteError {
            reason: printable(&reason),
        };
        let deadline = Instant::now() + self.read_timeout;
        let scratch = Scratch::new(self, url, deadline).map_err(failed)?;
        let mut args = self.settings(url).map_err(failed)?;
        args.extend(["ls-remote".to_owned(), "--".to_owned(), url.to_owned()]);
        args.extend(names.iter().map(|name| name.as_str().to_owned()));
        let run = self
            .run(
                &scratch,
                args,
                Vec::new(),
                LS_REMOTE_CAP,
                READ_ADDRESS_SPACE,
            )
            .map_err(failed)?;
        if !run.succeeded() {
            return Err(failed(format!("git ls-remote {}", run.describe_ending())));
        }
        let text = std::str::from_utf8(&run.stdout)
            .map_err(|_| failed("git ls-remote printed bytes that are not UTF-8".into()))?;
        let mut values = BTreeMap::new();
        for line in text.lines() {
            let (id, name) = line
                .split_once('\t')
                .and_then(|(id, name)| Some((ObjectId::parse_hex(id)?, name)))
                .ok_or_else(|| failed(format!("git ls-remote printed {line:?}")))?;
            // ls-remote matches patterns by their tail; only exact names are answers.
            if names.iter().any(|asked| asked.as_str() == name)
                && values.insert(name.to_owned(), id).is_some()
            {
                return Err(failed(format!("the remote advertised {name} twice")));
            }
        }
        Ok(values)
    }

    fn push(&self, url: &str, push: &Push<'_>) -> PushOutcome {
        let deadline = Instant::now() + self.push_timeout;
        let not_started = |reason: String| PushOutcome::NotStarted {
            reason: printable(&reason),
        };
        let scratch = match Scratch::new(self, url, deadline) {
            Ok(scratch) => scratch,
            Err(reason) => return not_started(reason),
        };
        if let Err(reason) = self.stage(&scratch, push) {
            return not_started(reason);
        }
        let mut args = match self.settings(url) {
            Ok(args) => args,
            Err(reason) => return not_started(reason),
        };
        args.extend(["push", "--porcelain", "--atomic", "--no-verify"].map(str::to_owned));
        for update in push.updates {
            let expected = update.expected.map(|id| id.to_hex()).unwrap_or_default();
            args.push(format!("--force-with-lease={}:{expected}", update.name));
        }
        args.extend(["--".to_owned(), url.to_owned()]);
        for update in push.updates {
            args.push(format!("{}:{}", update.new, update.name));
        }
        let run = match self.run(&scratch, args, Vec::new(), PUSH_CAP, TRANSFER_ADDRESS_SPACE) {
            Ok(run) => run,
            Err(reason) => return not_started(reason),
        };
        classify(&run, push)
    }
}

/// What a push's porcelain status and ending say. Only a status line for every ref decides:
/// all done and exit 0 is applied; a rejection Git reports for certain (`rejected`, `remote
/// rejected`, a stale lease) is refused; `remote failure`, a missing line, a timeout or a
/// kill is unknown.
fn classify(run: &GitRun, push: &Push<'_>) -> PushOutcome {
    let stdout = String::from_utf8_lossy(&run.stdout);
    let mut statuses = Vec::new();
    for update in push.updates {
        let line = stdout.lines().find(|line| {
            line.split('\t')
                .nth(1)
                .and_then(|refspec| refspec.rsplit_once(':'))
                .is_some_and(|(_, to)| to == update.name.as_str())
        });
        match line {
            Some(line) => statuses.push(line),
            None => {
                return PushOutcome::Unknown {
                    reason: printable(&format!(
                        "git push gave no status for {}: it {}",
                        update.name,
                        run.describe_ending()
                    )),
                };
            }
        }
    }
    let done = statuses
        .iter()
        .all(|line| matches!(line.as_bytes().first(), Some(b' ' | b'+' | b'*' | b'=')));
    if done && matches!(&run.ending, Ending::Exited(status) if status.success()) {
        return PushOutcome::Applied;
    }
    let summaries: Vec<&str> = statuses
        .iter()
        .filter_map(|line| line.split('\t').nth(2))
        .collect();
    let certain = statuses.iter().all(|line| line.starts_with('!'))
        && summaries.iter().all(|summary| {
            summary.starts_with("[rejected]") || summary.starts_with("[remote rejected]")
        });
    let reason = printable(&format!(
        "{}; git push {}",
        summaries.join("; "),
        run.describe_ending()
    ));
    if certain {
        PushOutcome::Refused { reason }
    } else {
        PushOutcome::Unknown { reason }
    }
}

/// A remote's words as a reason: control characters replaced, at most [`REASON_CHARS`].
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c == '\n' {
                ' '
            } else if c.is_control() {
                '?'
            } else {
                c
            }
        })
        .take(REASON_CHARS)
        .collect()
}

/// A private temporary directory holding an empty HOME and a scratch bare repository, and
/// what every Git process of one call shares: its deadline, and the variables it adds.
#[derive(Debug)]
struct Scratch {
    _dir: tempfile::TempDir,
    home: PathBuf,
    repo: PathBuf,
    deadline: Instant,
    env: Vec<(String, String)>,
}

impl Scratch {
    /// A scratch directory for a call to `url` by `remote`, ending by `deadline`.
    fn new(remote: &GitRemote, url: &str, deadline: Instant) -> Result<Self, String> {
        let dir = tempfile::Builder::new()
            .prefix("sf-deliver-")
            .tempdir()
            .map_err(|error| format!("cannot create a scratch directory: {error}"))?;
        let home = dir.path().join("home");
        let repo = dir.path().join("repo.git");
        for path in [&home, &repo] {
            std::fs::create_dir(path)
                .map_err(|error| format!("cannot create {}: {error}", path.display()))?;
        }
        let mut scratch = Self {
            _dir: dir,
            home,
            repo,
            deadline,
            env: Vec::new(),
        };
        let init = remote.run(
            &scratch,
            ["init", "--bare", "-q", "--template="]
                .map(str::to_owned)
                .to_vec(),
            Vec::new(),
            1024,
            READ_ADDRESS_SPACE,
        )?;
        if !init.succeeded() {
            return Err(format!(
                "git init of a scratch repository {}",
                init.describe_ending()
            ));
        }
        scratch.env = remote.environment(url);
        Ok(scratch)
    }
}
