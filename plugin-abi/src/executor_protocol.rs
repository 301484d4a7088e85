//! The `executor` contract on the wire: one request and one answer shape per method of
//! [`Executor`](crate::contracts::Executor), a `cancel` method for cancellation across the
//! boundary, and the error encoding that keeps every [`ExecutorError`] code and field.
//!
//! Both sides use this module: the host encodes requests and decodes answers, the sdk decodes
//! requests and encodes answers. Bulk bytes (program and input file contents, stdout, stderr,
//! the profile recipe, runtime paths) travel as raw sections; digests as `sha256:` text;
//! durations as `{secs, nanos}` so that every `Duration` survives exactly.
//!
//! | method | request header | answer header |
//! |---|---|---|
//! | `describe_runtime` | `{}` | `{executable, readable: [{path, kind}], digest}` |
//! | `profile` | `{}` | `{recipe, digest}` |
//! | `overlap` (ABI 1.15) | `{}` | `{oneAtATime: null \| reason}` |
//! | `run` | `{runId, program: [{path, content}], entry, args, input: [{path, content}], bounds}` | the answer (below) |
//! | `run_v2` | `{runId, program, entry: {place, path}, args, input, harness, bounds}` | the answer, with `identities.harness` |
//! | `run_v3` | as `run_v2` | the answer of `run_v2`, with `identities.enforcement` an object of facts |
//! | `run_v4` | as `run_v2`, each file `{path, mode, content}` | the answer of `run_v3` |
//! | `run_v5` | as `run_v4` | the answer of `run_v4`, with `limitsHit` |
//! | `run_v6` | as `run_v4`, with an optional `command` | the answer of `run_v5`, with `identities.command` and `results` for a command |
//! | `run_v7` | as `run_v6` | the answer of `run_v6`, with `remote` for a remote run |
//! | `cancel` | `{runId}` | `{}` |
//!
//! `executable`, `readable[].path`, `recipe` and every `content` are section indexes; `kind`
//! is `file` or `subtree`. `bounds` is `{timeout, stdoutLimit, stderrLimit}`. The answer of
//! `run` is `{status, exitCode, signal, stdout, stderr, times: {wall, user, system,
//! maxRssKib}, bounds, identities: {program, input, runtime, profile, bounds, enforcement:
//! {landlockAbi, landlock}}, namespace, problems}` with `stdout` and `stderr` section indexes,
//! `namespace` `{"disposition":"reaped"}` or `{"disposition":"unconfirmed","reason":…}`.
//!
//! The answer of `run_v2` may also state `times.memoryPeakBytes` and
//! `identities.enforcement.{hostIdentity, memory}`: a plugin that leaves them out states
//! nothing (`not-stated`, no peak). They are never sent in a `run` answer, whose shape is
//! fixed (an sf of ABI 1.1 refuses fields it does not know); its facts read as not stated.
//!
//! `run_v2` (ABI 1.2) adds the harness: `entry.place` is `program` or `harness`, `harness` the
//! harness files like `program` and `input`, and its answer's identities name the `harness`
//! digest. `run` (ABI 1.0) stays as it was: its entry is a file of the program and it has no
//! harness, so the identity of the harness it ran with is the empty snapshot's
//! ([`RunWire::V1`]).
//!
//! `run_v3` (ABI 1.3) takes the request of `run_v2`; its answer's `identities.enforcement` is
//! the Executor's facts, `{mechanism: status, …}` (each a word of `a-z`, `0-9`, `.` and `-`),
//! instead of the fixed Landlock fields of the older answers. Those fields map to the facts
//! of four mechanisms (`landlock`, `landlock-abi`, `host-identity`, `memory`: sf-contracts'
//! `legacy_enforcement`), both when a host reads an older answer and when a plugin answers an
//! older host.
//!
//! `run_v4` (ABI 1.4) takes the request of `run_v2` with each snapshot entry's mode:
//! `{path, mode, content}`, `mode` written as Git writes it (`100644` a regular file, `100755`
//! an executable, `120000` a symbolic link, whose `content` is its target); its answer is
//! `run_v3`'s. The older requests carry regular files only: a request holding an executable or
//! a link cannot travel in them ([`RunWire::lacks`]), and the host refuses it before anything
//! is sent rather than send the bytes without their modes.
//!
//! `run_v5` (ABI 1.5) takes the request of `run_v4`; its answer adds `limitsHit`, the
//! Executor's own limits the run hit: `[{limit, value, detail}, …]`, each `limit` one word of
//! sf-contracts' `Limit` (`processes`, `memory`, `file-size`, `cpu-time`, `open-files`,
//! `scratch`, `scratch-files`, `collection-memory`: a word an older host does not know makes
//! the answer malformed, so the run is lost, never judged), at most once and in that order, `value` the limit in force (at
//! most 2^53 − 1) and `detail` how the Executor knows (1 to 256 characters, no control
//! character). The older answers have no such field (it is refused in them): a run answered
//! in one reads as having stated no limit hit, and a plugin answering an older host writes
//! each limit its run hit as a problem instead (`problems`, which every shape carries and
//! which makes the run unattributable to a collector of any version), so that no hit is lost.
//!
//! `run_v6` (ABI 1.6) takes the request of `run_v4` with an optional `command`: `{argv, cwd,
//! env: {name: value}, environment: {digest, tree, at} | null, results: {path, maxBytes} |
//! null, resources: {memoryBytes?, processes?, cpuSeconds?, scratchBytes?, scratchFiles?},
//! scratchExecutable?: true}` (`tree` a section index: a host path's bytes). Its answer is `run_v5`'s; for a run
//! with a command, `identities.command` is the command's digest and `results` is
//! `{"state":"absent"}`, `{"state":"written","content":N}` (a section) or
//! `{"state":"refused","reason":…}` when the command asked for a results file, absent when it
//! did not; a run without a command has neither. A request with a command cannot travel in
//! an older shape ([`RunFeature::Command`]): the host refuses it before anything is sent.
//!
//! From ABI 1.7 the command may hold `scratchExecutable: true` (absent otherwise): the run
//! may execute what it writes to its scratch space. A plugin of minor 6 does not know the
//! field (its header refuses unknown fields), so the host never sends a request that asks for
//! it to one ([`RunFeature::ExecutableScratch`]): it refuses the request before anything is
//! sent.
//!
//! From ABI 1.8 the command's `environment.at` may be `/`: the environment is the run's whole
//! root, in place of the runtime's files. A plugin of minor 7 would read it as an environment
//! bound over every runtime path, so the host never sends such a request to one
//! ([`RunFeature::RootEnvironment`]).
//!
//! From ABI 1.12 the command may hold `network: {proxy}` (`proxy` a section: the host path of
//! the caller's proxy socket) and `output: {at, dir}` (`dir` a section: the host directory's
//! bytes), absent otherwise: an environment build. A plugin of an older minor does not know
//! the fields, so the host never sends such a request to one ([`RunFeature::BuildAccess`]).
//!
//! From ABI 1.11 the `run_v6` request may hold `programTree` instead of program files: the
//! program by reference, `{base, dir, dev, ino, directories: [{path, entries: [{name, kind, digest?,
//! size?, target?}]}], layer: [{path, mode, content}], deleted: [path]}` (`dir` a section: the
//! host directory's bytes; `kind` `file`, `executable`, `symlink` or `directory`; a
//! directory's `digest` and `size` are its `sf-tree/1` digest, a file's its bytes'). A plugin
//! of an older minor does not know the field, so the host never sends such a request to one
//! ([`RunFeature::ProgramTree`]): it refuses the request before anything is sent.
//!
//! `run_v7` (ABI 1.15) takes the request of `run_v6`; its answer may hold `remote: {action,
//! worker}`, where a remote Executor's run was executed: `action` the REAPI digest of the
//! Action it travelled as (`HASH/SIZE`), `worker` the name of the worker that ran it, or null
//! for a run the cluster lost (sf-contracts' `RemoteRun`, checked as it is read). A local run
//! leaves it out. The older answers have no such field (it is refused in them), and a plugin
//! answering an older host leaves it out.
//!
//! A host calls `run_v7` on a plugin of minor 15 or later, `run_v6` on minor 6 to 14, `run_v5` on minor 5, `run_v4` on minor 4, `run_v3` on
//! minor 3, `run_v2` on minor 2, and `run` on an older one, each for the requests its shape
//! carries.
//!
//! # Cancellation
//!
//! The host names each run with a `runId` (unique per instance for the life of the process).
//! While `run` is in flight, another thread of the host may call `cancel` with that id on the
//! same instance: the plugin cancels the run's token, and the run ends as `aborted`. A
//! `cancel` that arrives before its run registered is remembered (a bounded set), so the run
//! then starts nothing and answers the error `aborted`; one that arrives after its run ended
//! is remembered too and never matched again.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::contracts::canonical::Digest;
use crate::contracts::command::{
    CapturedResults, ResultsRequest, RunCommand, RunEnvironment, RunNetwork, RunOutput,
    RunResources,
};
use crate::contracts::executor::ProgramTree;
use crate::contracts::legacy_enforcement::LegacyEnforcement;
use crate::contracts::remote_run::RemoteRun;
use crate::contracts::snapshot::{SnapshotFile, is_regular_only};
use crate::contracts::tree_digest::{Directory, DirectoryDigest, Node, Totals};
use crate::contracts::tree_path::EntryMode;
use crate::contracts::{
    Enforcement, EntryPlace, ExecutorError, LimitHit, NamespaceDisposition, ProfileDescription,
    ReadableKind, ReadablePath, RunAnswer, RunBounds, RunEntry, RunIdentities, RunRequest,
    RunStatus, RunTimes, RuntimeDescription,
};
use crate::message::{self, MessageBuilder, MessageError, Sections};
use crate::protocol::{self, Empty};

protocol::wire_contract! {
    /// The `executor` contract, as the host and the sdk name it.
    ExecutorContract: "executor", ExecutorError
}

/// The ABI minor from which a run's program may be given by reference (`run_v6`'s
/// `programTree`): a host never sends one to an older plugin.
pub const PROGRAM_TREE_SINCE_MINOR: u32 = 11;

/// The ABI minor that added a command's network to its caller's proxy and its output
/// directory (`run_v6`'s `network` and `output`).
pub const BUILD_ACCESS_SINCE_MINOR: u32 = 12;

/// The ABI minor that added `run_v7`, whose answer may name where a remote run was executed
/// (`remote`): a host calls it only on a plugin of this minor or later.
pub const REMOTE_RUN_SINCE_MINOR: u32 = 15;

/// The ABI minor that added `overlap`: a host asks it only of a plugin of this minor or
/// later (an older plugin's runs overlap, as they always did).
pub const OVERLAP_SINCE_MINOR: u32 = 15;

/// The method names, as sent in `call`.
pub mod method {
    /// [`Executor::describe_runtime`](crate::contracts::Executor::describe_runtime).
    pub const DESCRIBE_RUNTIME: &str = "describe_runtime";
    /// [`Executor::profile`](crate::contracts::Executor::profile).
    pub const PROFILE: &str = "profile";
    /// [`Executor::overlap`](crate::contracts::Executor::overlap) (ABI 1.15).
    pub const OVERLAP: &str = "overlap";
    /// [`Executor::run`](crate::contracts::Executor::run) without a harness (ABI 1.0).
    pub const RUN: &str = "run";
    /// `run` with the harness (ABI 1.2).
    pub const RUN_V2: &str = "run_v2";
    /// `run_v2` whose answer states enforcement as facts (ABI 1.3).
    pub const RUN_V3: &str = "run_v3";
    /// `run_v3` whose request carries each snapshot entry's mode (ABI 1.4).
    pub const RUN_V4: &str = "run_v4";
    /// `run_v4` whose answer states the limits the run hit (ABI 1.5).
    pub const RUN_V5: &str = "run_v5";
    /// `run_v5` whose request may carry a command and whose answer its results (ABI 1.6).
    pub const RUN_V6: &str = "run_v6";
    /// `run_v6` whose answer may name where a remote run was executed (ABI 1.15).
    pub const RUN_V7: &str = "run_v7";
    /// Cancels a run in flight by its id.
    pub const CANCEL: &str = "cancel";
}

/// Which message shapes a run travels in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunWire {
    /// `run`: no harness, the entry a file of the program.
    V1,
    /// `run_v2`: the harness, and an entry in the program or the harness.
    V2,
    /// `run_v3`: the request of `run_v2`; the answer states enforcement as facts.
    V3,
    /// `run_v4`: the request of `run_v2` with each entry's mode; the answer of `run_v3`.
    V4,
    /// `run_v5`: the request of `run_v4`; the answer of `run_v4` with the limits hit.
    V5,
    /// `run_v6`: the request of `run_v4` with a command; the answer of `run_v5` with the
    /// command's identity and results.
    V6,
    /// `run_v7`: the request of `run_v6`; the answer of `run_v6` with where a remote run was
    /// executed.
    V7,
}

/// What a request holds that an older message shape cannot carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunFeature {
    /// A harness, or an entry in it (ABI 1.2, `run_v2`).
    Harness,
    /// A snapshot entry that is not a regular file: an executable or a symbolic link (ABI
    /// 1.4, `run_v4`).
    Modes,
    /// A command instead of an entry (ABI 1.6, `run_v6`).
    Command,
    /// A command whose scratch may be executed (ABI 1.7, `run_v6`'s `scratchExecutable`).
    ExecutableScratch,
    /// A command whose environment is the run's whole root (ABI 1.8, `run_v6`'s
    /// `environment.at` of `/`).
    RootEnvironment,
    /// A program given by reference (ABI 1.11, `run_v6`'s `programTree`).
    ProgramTree,
    /// A command with network to its caller's proxy or an output directory: an environment
    /// build (ABI 1.12, `run_v6`'s `network` and `output`).
    BuildAccess,
}

impl RunFeature {
    /// The mechanism an Executor names when it cannot run a request for want of this feature
    /// (`ExecutorError::Unavailable`).
    pub fn mechanism(self) -> &'static str {
        match self {
            Self::Harness => "harness",
            Self::Modes => "snapshot-modes",
            Self::Command => "command",
            Self::ExecutableScratch => "executable-scratch",
            Self::RootEnvironment => "root-environment",
            Self::ProgramTree => "program-tree",
            Self::BuildAccess => "build-access",
        }
    }

    /// The ABI minor that added the feature.
    pub fn since_minor(self) -> u32 {
        match self {
            Self::Harness => 2,
            Self::Modes => 4,
            Self::Command => 6,
            Self::ExecutableScratch => 7,
            Self::RootEnvironment => 8,
            Self::ProgramTree => PROGRAM_TREE_SINCE_MINOR,
            Self::BuildAccess => BUILD_ACCESS_SINCE_MINOR,
        }
    }

    /// What an older shape lacks, in words: "whose run …".
    pub fn lacking(self) -> &'static str {
        match self {
            Self::Harness => "whose run has no harness",
            Self::Modes => "whose run carries regular files only (no executable or symbolic link)",
            Self::Command => "whose run runs the runtime with an entry file (no command)",
            Self::ExecutableScratch => "whose run's scratch space is never executable",
            Self::RootEnvironment => "whose run's environment is never its whole root",
            Self::ProgramTree => "whose run takes its program's files by value",
            Self::BuildAccess => "whose run has no network and no output directory",
        }
    }

    /// What `request` asks of a plugin of ABI minor `minor` that it cannot give, beyond what
    /// the message shape `wire` carries ([`RunWire::lacks`]).
    pub fn lacking_for(minor: u32, wire: RunWire, request: &RunRequest) -> Option<Self> {
        wire.lacks(request).or_else(|| {
            if request.program_tree.is_some() && minor < PROGRAM_TREE_SINCE_MINOR {
                return Some(Self::ProgramTree);
            }
            let command = request.command.as_ref()?;
            let root = command
                .environment
                .as_ref()
                .is_some_and(|environment| environment.is_root());
            let build = command.network.is_some() || command.output.is_some();
            [
                (command.scratch_executable, Self::ExecutableScratch),
                (root, Self::RootEnvironment),
                (build, Self::BuildAccess),
            ]
            .into_iter()
            .find(|(asked, feature)| *asked && minor < feature.since_minor())
            .map(|(_, feature)| feature)
        })
    }
}

impl RunWire {
    /// The method a run of this shape is called with.
    pub fn method(self) -> &'static str {
        match self {
            Self::V1 => method::RUN,
            Self::V2 => method::RUN_V2,
            Self::V3 => method::RUN_V3,
            Self::V4 => method::RUN_V4,
            Self::V5 => method::RUN_V5,
            Self::V6 => method::RUN_V6,
            Self::V7 => method::RUN_V7,
        }
    }

    /// What `request` holds that this shape cannot carry, if anything (the harness is
    /// reported before the modes).
    pub fn lacks(self, request: &RunRequest) -> Option<RunFeature> {
        let harnessed = !request.harness.is_empty() || request.entry.place != EntryPlace::Program;
        if self == Self::V1 && harnessed {
            return Some(RunFeature::Harness);
        }
        let moded = [&request.program, &request.input, &request.harness]
            .iter()
            .any(|files| !is_regular_only(files));
        if !self.carries_modes() && moded {
            return Some(RunFeature::Modes);
        }
        if !self.carries_commands() && request.command.is_some() {
            return Some(RunFeature::Command);
        }
        if !self.carries_commands() && request.program_tree.is_some() {
            return Some(RunFeature::ProgramTree);
        }
        None
    }

    /// Whether `request` can travel in this shape.
    pub fn carries(self, request: &RunRequest) -> bool {
        self.lacks(request).is_none()
    }

    /// Whether the request of this shape carries each entry's mode.
    fn carries_modes(self) -> bool {
        matches!(self, Self::V4 | Self::V5 | Self::V6 | Self::V7)
    }

    /// Whether the answer of this shape states the limits the run hit.
    pub fn states_limits(self) -> bool {
        matches!(self, Self::V5 | Self::V6 | Self::V7)
    }

    /// Whether the request of this shape may carry a command (and its answer the command's
    /// identity and results).
    pub fn carries_commands(self) -> bool {
        matches!(self, Self::V6 | Self::V7)
    }

    /// Whether the answer of this shape may name where a remote run was executed.
    pub fn states_remote(self) -> bool {
        self == Self::V7
    }
}

/// A request, as the plugin side decodes it.
// One request is decoded per call and moved once; boxing the run would only add an
// allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `describe_runtime`.
    DescribeRuntime,
    /// `profile`.
    Profile,
    /// `overlap`.
    Overlap,
    /// `run`, `run_v2`, `run_v3`, `run_v4`, `run_v5` or `run_v6`.
    Run {
        /// The host's name for the run, for `cancel`.
        run_id: u64,
        /// What to run.
        request: RunRequest,
        /// The shape it came in, and its answer must go back in.
        wire: RunWire,
    },
    /// `cancel`.
    Cancel {
        /// The run to cancel.
        run_id: u64,
    },
}

impl Request {
    /// Decodes the request of `method`. `Ok(None)`: the method is not one of this contract's.
    pub fn decode(method: &str, bytes: &[u8]) -> Result<Option<Self>, MessageError> {
        let request = match method {
            method::DESCRIBE_RUNTIME => {
                Empty::decode(bytes)?;
                Self::DescribeRuntime
            }
            method::PROFILE => {
                Empty::decode(bytes)?;
                Self::Profile
            }
            method::OVERLAP => {
                Empty::decode(bytes)?;
                Self::Overlap
            }
            method::RUN => {
                let (header, mut sections) = message::decode::<RunHeader>(bytes)?;
                let program = decode_files(&header.program, "program", &mut sections)?;
                let input = decode_files(&header.input, "input", &mut sections)?;
                sections.finish()?;
                Self::Run {
                    run_id: header.run_id,
                    request: RunRequest {
                        label: None,
                        program_tree: None,
                        command: None,
                        program,
                        entry: RunEntry::program(header.entry),
                        args: header.args,
                        input,
                        harness: Vec::new(),
                        bounds: header.bounds.decode("bounds")?,
                    },
                    wire: RunWire::V1,
                }
            }
            method::RUN_V2 | method::RUN_V3 => {
                let (header, sections) = message::decode::<RunHeaderV2<FileHeader>>(bytes)?;
                let wire = if method == method::RUN_V2 {
                    RunWire::V2
                } else {
                    RunWire::V3
                };
                Self::decode_run(header, sections, wire)?
            }
            method::RUN_V4 | method::RUN_V5 | method::RUN_V6 | method::RUN_V7 => {
                let (header, sections) = message::decode::<RunHeaderV2<ModedFileHeader>>(bytes)?;
                let wire = match method {
                    method::RUN_V4 => RunWire::V4,
                    method::RUN_V5 => RunWire::V5,
                    method::RUN_V6 => RunWire::V6,
                    _ => RunWire::V7,
                };
                Self::decode_run(header, sections, wire)?
            }
            method::CANCEL => {
                let header = message::decode_header::<CancelHeader>(bytes)?;
                Self::Cancel {
                    run_id: header.run_id,
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(request))
    }

    /// A run of one of the shapes that carry a harness.
    fn decode_run<F: WireFile>(
        header: RunHeaderV2<F>,
        mut sections: Sections<'_>,
        wire: RunWire,
    ) -> Result<Self, MessageError> {
        let program = decode_files(&header.program, "program", &mut sections)?;
        let input = decode_files(&header.input, "input", &mut sections)?;
        let harness = decode_files(&header.harness, "harness", &mut sections)?;
        let command = match (header.command, wire.carries_commands()) {
            (None, _) => None,
            (Some(command), true) => Some(command.decode(&mut sections)?),
            (Some(_), false) => {
                return Err(MessageError::field(
                    "command",
                    format!("is not a field of a {} request", wire.method()),
                ));
            }
        };
        let program_tree = match (header.program_tree, wire.carries_commands()) {
            (None, _) => None,
            (Some(tree), true) => Some(tree.decode(&mut sections)?),
            (Some(_), false) => {
                return Err(MessageError::field(
                    "programTree",
                    format!("is not a field of a {} request", wire.method()),
                ));
            }
        };
        if header.label.is_some() && !wire.states_remote() {
            return Err(MessageError::field(
                "label",
                format!("is not a field of a {} request", wire.method()),
            ));
        }
        sections.finish()?;
        let place = EntryPlace::from_code(&header.entry.place)
            .ok_or_else(|| MessageError::field("entry.place", "must be program or harness"))?;
        Ok(Self::Run {
            run_id: header.run_id,
            request: RunRequest {
                label: header.label,
                program_tree,
                command,
                program,
                entry: RunEntry {
                    place,
                    path: header.entry.path,
                },
                args: header.args,
                input,
                harness,
                bounds: header.bounds.decode("bounds")?,
            },
            wire,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Requests: encoding (host side)

/// `describe_runtime` and `profile` take no arguments.
pub fn encode_no_arguments() -> Vec<u8> {
    Empty::encode()
}

/// The request of a run in the shape of `wire`; `None` when `wire` cannot carry it (see
/// [`RunWire::lacks`]).
pub fn encode_run(run_id: u64, request: &RunRequest, wire: RunWire) -> Option<Vec<u8>> {
    if !wire.carries(request) {
        return None;
    }
    let mut builder = MessageBuilder::new();
    Some(match wire {
        RunWire::V1 => {
            let program = encode_files(&request.program, &mut builder);
            let input = encode_files(&request.input, &mut builder);
            builder.encode(&RunHeader {
                run_id,
                program,
                entry: request.entry.path.clone(),
                args: request.args.clone(),
                input,
                bounds: BoundsHeader::encode(&request.bounds),
            })
        }
        RunWire::V2 | RunWire::V3 => {
            let header = run_header_v2::<FileHeader>(run_id, request, &mut builder);
            builder.encode(&header)
        }
        RunWire::V4 | RunWire::V5 | RunWire::V6 | RunWire::V7 => {
            let mut header = run_header_v2::<ModedFileHeader>(run_id, request, &mut builder);
            // Only run_v7 knows the label; older shapes leave it out (it changes nothing that
            // runs).
            if wire.states_remote() {
                header.label = request.label.clone();
            }
            builder.encode(&header)
        }
    })
}

fn run_header_v2<'a, F: WireFile>(
    run_id: u64,
    request: &'a RunRequest,
    builder: &mut MessageBuilder<'a>,
) -> RunHeaderV2<F> {
    RunHeaderV2 {
        run_id,
        program: encode_files(&request.program, builder),
        entry: EntryHeader {
            place: request.entry.place.code().to_owned(),
            path: request.entry.path.clone(),
        },
        args: request.args.clone(),
        input: encode_files(&request.input, builder),
        harness: encode_files(&request.harness, builder),
        bounds: BoundsHeader::encode(&request.bounds),
        command: request
            .command
            .as_ref()
            .map(|command| CommandHeader::encode(command, builder)),
        program_tree: request
            .program_tree
            .as_ref()
            .map(|tree| ProgramTreeHeader::encode(tree, builder)),
        label: None,
    }
}

/// `cancel`.
pub fn encode_cancel(run_id: u64) -> Vec<u8> {
    message::encode_header(&CancelHeader { run_id })
}

// ---------------------------------------------------------------------------------------------
// Answers

/// The answer of `describe_runtime`.
pub fn encode_runtime(runtime: &RuntimeDescription) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let executable = builder.section(runtime.executable.as_os_str().as_bytes());
    let readable = runtime
        .readable
        .iter()
        .map(|path| ReadableHeader {
            path: builder.section(path.path.as_os_str().as_bytes()),
            kind: match path.kind {
                ReadableKind::File => "file",
                ReadableKind::Subtree => "subtree",
            }
            .to_owned(),
        })
        .collect();
    builder.encode(&RuntimeAnswer {
        executable,
        readable,
        digest: runtime.digest.to_string(),
    })
}

/// Decodes the answer of `describe_runtime`.
pub fn decode_runtime(bytes: &[u8]) -> Result<RuntimeDescription, MessageError> {
    let (answer, mut sections) = message::decode::<RuntimeAnswer>(bytes)?;
    let executable = path(sections.take(answer.executable)?);
    let mut readable = Vec::with_capacity(answer.readable.len());
    for (at, entry) in answer.readable.iter().enumerate() {
        readable.push(ReadablePath {
            path: path(sections.take(entry.path)?),
            kind: match entry.kind.as_str() {
                "file" => ReadableKind::File,
                "subtree" => ReadableKind::Subtree,
                _ => {
                    return Err(MessageError::field(
                        format!("readable[{at}].kind"),
                        "must be file or subtree",
                    ));
                }
            },
        });
    }
    sections.finish()?;
    Ok(RuntimeDescription {
        executable,
        readable,
        digest: parse_digest(&answer.digest, "digest")?,
    })
}

/// The answer of `profile`.
pub fn encode_profile(profile: &ProfileDescription) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let recipe = builder.section(&profile.recipe);
    builder.encode(&ProfileAnswer {
        recipe,
        digest: profile.digest.to_string(),
    })
}

/// Decodes the answer of `profile`.
pub fn decode_profile(bytes: &[u8]) -> Result<ProfileDescription, MessageError> {
    let (answer, mut sections) = message::decode::<ProfileAnswer>(bytes)?;
    let recipe = sections.take(answer.recipe)?.to_vec();
    sections.finish()?;
    Ok(ProfileDescription {
        recipe,
        digest: parse_digest(&answer.digest, "digest")?,
    })
}

/// The answer of a run in the shape of `wire`. The `run` and `run_v2` shapes carry
/// enforcement in their fixed fields ([`LegacyEnforcement::from_facts`]); the shapes before
/// `run_v5` carry each limit the run hit as a problem.
pub fn encode_answer(answer: &RunAnswer, wire: RunWire) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let stdout = builder.section(&answer.stdout);
    let stderr = builder.section(&answer.stderr);
    let ids = &answer.identities;
    let legacy = LegacyEnforcement::from_facts(&ids.enforcement);
    let peak = answer.times.memory_peak_bytes;
    match wire {
        RunWire::V1 => {
            let enforcement = EnforcementHeader {
                host_identity: None,
                memory: None,
                ..EnforcementHeader::from(legacy)
            };
            let identities = identities_header(ids, None, enforcement);
            encode_answer_with(answer, wire, (stdout, stderr), identities, builder, None)
        }
        RunWire::V2 => {
            let harness = Some(ids.harness.to_string());
            let identities = identities_header(ids, harness, EnforcementHeader::from(legacy));
            encode_answer_with(answer, wire, (stdout, stderr), identities, builder, peak)
        }
        RunWire::V3 | RunWire::V4 | RunWire::V5 | RunWire::V6 | RunWire::V7 => {
            let facts: BTreeMap<String, String> = ids
                .enforcement
                .facts()
                .map(|(mechanism, status)| (mechanism.to_owned(), status.to_owned()))
                .collect();
            let mut identities = identities_header(ids, Some(ids.harness.to_string()), facts);
            if wire.carries_commands() {
                identities.command = ids.command.as_ref().map(ToString::to_string);
            }
            encode_answer_with(answer, wire, (stdout, stderr), identities, builder, peak)
        }
    }
}

fn identities_header<E>(
    ids: &RunIdentities,
    harness: Option<String>,
    enforcement: E,
) -> IdentitiesHeader<E> {
    IdentitiesHeader {
        command: None,
        program: ids.program.to_string(),
        input: ids.input.to_string(),
        harness,
        runtime: ids.runtime.to_string(),
        profile: ids.profile.to_string(),
        bounds: ids.bounds.to_string(),
        enforcement,
    }
}

fn encode_answer_with<'a, I: Serialize>(
    answer: &'a RunAnswer,
    wire: RunWire,
    (stdout, stderr): (usize, usize),
    identities: I,
    mut builder: MessageBuilder<'a>,
    memory_peak_bytes: Option<u64>,
) -> Vec<u8> {
    // An older host reads no command: a request with one cannot have reached it, and no
    // results go back to it.
    let results = if wire.carries_commands() {
        answer
            .results
            .as_ref()
            .map(|results| ResultsHeader::encode(results, &mut builder))
    } else {
        None
    };
    let (problems, limits_hit) = if wire.states_limits() {
        (answer.problems.clone(), Some(answer.limits_hit.clone()))
    } else {
        // An older host reads no limits; as problems, the hits still make the run
        // unattributable there.
        let mut problems = answer.problems.clone();
        problems.extend(answer.limits_hit.iter().map(ToString::to_string));
        (problems, None)
    };
    builder.encode(&AnswerHeader {
        status: answer.status.code().to_owned(),
        exit_code: answer.exit_code,
        signal: answer.signal,
        stdout,
        stderr,
        times: TimesHeader {
            wall: DurationHeader::encode(answer.times.wall),
            user: DurationHeader::encode(answer.times.user),
            system: DurationHeader::encode(answer.times.system),
            max_rss_kib: answer.times.max_rss_kib,
            memory_peak_bytes,
        },
        bounds: BoundsHeader::encode(&answer.bounds),
        identities,
        namespace: match &answer.namespace {
            NamespaceDisposition::Reaped => NamespaceHeader::Reaped {},
            NamespaceDisposition::Unconfirmed { reason } => NamespaceHeader::Unconfirmed {
                reason: reason.clone(),
            },
        },
        problems,
        limits_hit,
        results,
        // An older host reads no such field: where the run was executed stays unsaid there.
        remote: answer.remote.clone().filter(|_| wire.states_remote()),
    })
}

/// Decodes the answer of a run in the shape of `wire`. A `run` answer names no harness: the
/// run had none, so its harness identity is the empty snapshot's.
pub fn decode_answer(bytes: &[u8], wire: RunWire) -> Result<RunAnswer, MessageError> {
    match wire {
        RunWire::V1 => {
            let (answer, sections) =
                message::decode::<AnswerHeader<IdentitiesHeader<EnforcementHeader>>>(bytes)?;
            if answer.identities.harness.is_some() {
                return Err(MessageError::field(
                    "identities.harness",
                    "is not a field of a run answer",
                ));
            }
            let harness = crate::contracts::snapshot::snapshot_digest(&[])
                .map_err(|error| MessageError::field("identities.harness", error.to_string()))?;
            let enforcement = legacy_facts(answer.identities.enforcement.clone())?;
            decode_answer_with(answer, sections, (wire, harness), enforcement)
        }
        RunWire::V2 => {
            let (answer, sections) =
                message::decode::<AnswerHeader<IdentitiesHeader<EnforcementHeader>>>(bytes)?;
            let harness = required_harness(&answer.identities.harness)?;
            let enforcement = legacy_facts(answer.identities.enforcement.clone())?;
            decode_answer_with(answer, sections, (wire, harness), enforcement)
        }
        RunWire::V3 | RunWire::V4 | RunWire::V5 | RunWire::V6 | RunWire::V7 => {
            let (answer, sections) =
                message::decode::<AnswerHeader<IdentitiesHeader<BTreeMap<String, String>>>>(bytes)?;
            let harness = required_harness(&answer.identities.harness)?;
            let enforcement = Enforcement::from_facts(answer.identities.enforcement.clone())
                .map_err(|rule| MessageError::field("identities.enforcement", rule))?;
            decode_answer_with(answer, sections, (wire, harness), enforcement)
        }
    }
}

fn required_harness(harness: &Option<String>) -> Result<Digest, MessageError> {
    match harness {
        Some(harness) => parse_digest(harness, "identities.harness"),
        None => Err(MessageError::field("identities.harness", "is missing")),
    }
}

fn legacy_facts(header: EnforcementHeader) -> Result<Enforcement, MessageError> {
    LegacyEnforcement {
        landlock_abi: header.landlock_abi,
        landlock: header.landlock,
        host_identity: header.host_identity,
        memory: header.memory,
    }
    .to_facts()
    .map_err(|(field, rule)| MessageError::field(format!("identities.enforcement.{field}"), rule))
}

fn decode_answer_with<E>(
    answer: AnswerHeader<IdentitiesHeader<E>>,
    mut sections: Sections<'_>,
    (wire, harness): (RunWire, Digest),
    enforcement: Enforcement,
) -> Result<RunAnswer, MessageError> {
    let limits_hit = match (wire.states_limits(), answer.limits_hit) {
        (true, Some(hits)) => hits,
        (true, None) => return Err(MessageError::field("limitsHit", "is missing")),
        (false, None) => Vec::new(),
        (false, Some(_)) => {
            return Err(MessageError::field(
                "limitsHit",
                format!("is not a field of a {} answer", wire.method()),
            ));
        }
    };
    let stdout = sections.take(answer.stdout)?.to_vec();
    let stderr = sections.take(answer.stderr)?.to_vec();
    if !wire.carries_commands() && (answer.results.is_some() || answer.identities.command.is_some())
    {
        return Err(MessageError::field(
            "results",
            format!(
                "neither results nor identities.command is a field of a {} answer",
                wire.method()
            ),
        ));
    }
    let results = match answer.results {
        Some(results) => Some(results.decode(&mut sections)?),
        None => None,
    };
    sections.finish()?;
    let remote = match (answer.remote, wire.states_remote()) {
        (None, _) => None,
        (Some(remote), true) => {
            remote
                .check()
                .map_err(|rule| MessageError::field("remote", rule))?;
            Some(remote)
        }
        (Some(_), false) => {
            return Err(MessageError::field(
                "remote",
                format!("is not a field of a {} answer", wire.method()),
            ));
        }
    };
    let identities = answer.identities;
    let command = match &identities.command {
        Some(command) => Some(parse_digest(command, "identities.command")?),
        None => None,
    };
    Ok(RunAnswer {
        results,
        status: parse_status(&answer.status)?,
        exit_code: answer.exit_code,
        signal: answer.signal,
        stdout,
        stderr,
        times: RunTimes {
            wall: answer.times.wall.decode("times.wall")?,
            user: answer.times.user.decode("times.user")?,
            system: answer.times.system.decode("times.system")?,
            max_rss_kib: answer.times.max_rss_kib,
            memory_peak_bytes: answer.times.memory_peak_bytes,
        },
        bounds: answer.bounds.decode("bounds")?,
        identities: RunIdentities {
            command,
            program: parse_digest(&identities.program, "identities.program")?,
            input: parse_digest(&identities.input, "identities.input")?,
            harness,
            runtime: parse_digest(&identities.runtime, "identities.runtime")?,
            profile: parse_digest(&identities.profile, "identities.profile")?,
            bounds: parse_digest(&identities.bounds, "identities.bounds")?,
            enforcement,
        },
        namespace: match answer.namespace {
            NamespaceHeader::Reaped {} => NamespaceDisposition::Reaped,
            NamespaceHeader::Unconfirmed { reason } => NamespaceDisposition::Unconfirmed { reason },
        },
        problems: answer.problems,
        limits_hit,
        remote,
    })
}

/// The answer of `cancel`.
pub fn encode_cancelled() -> Vec<u8> {
    Empty::encode()
}

/// Decodes the answer of `cancel`.
pub fn decode_cancelled(bytes: &[u8]) -> Result<(), MessageError> {
    Empty::decode(bytes)
}

/// The answer of `overlap`.
pub fn encode_overlap(overlap: &crate::contracts::Overlap) -> Vec<u8> {
    use crate::contracts::Overlap;
    message::encode_header(&OverlapAnswer {
        one_at_a_time: match overlap {
            Overlap::Allowed => None,
            Overlap::OneAtATime { reason } => Some(reason.clone()),
        },
    })
}

/// Decodes the answer of `overlap`.
pub fn decode_overlap(bytes: &[u8]) -> Result<crate::contracts::Overlap, MessageError> {
    use crate::contracts::Overlap;
    let answer: OverlapAnswer = message::decode_header(bytes)?;
    Ok(match answer.one_at_a_time {
        None => Overlap::Allowed,
        Some(reason) => Overlap::OneAtATime { reason },
    })
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OverlapAnswer {
    one_at_a_time: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Header shapes

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RunHeader {
    run_id: u64,
    program: Vec<FileHeader>,
    entry: String,
    args: Vec<String>,
    input: Vec<FileHeader>,
    bounds: BoundsHeader,
}

/// The request of `run_v2` and `run_v3` (`F` = [`FileHeader`]) and of `run_v4`
/// ([`ModedFileHeader`]).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RunHeaderV2<F> {
    run_id: u64,
    program: Vec<F>,
    entry: EntryHeader,
    args: Vec<String>,
    input: Vec<F>,
    harness: Vec<F>,
    bounds: BoundsHeader,
    /// Present in `run_v6` requests only, for a run with a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<CommandHeader>,
    /// Present in `run_v6` requests only (ABI 1.11), for a program given by reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    program_tree: Option<ProgramTreeHeader>,
    /// Present in `run_v7` requests only (ABI 1.15): what the run is for, for logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    label: Option<String>,
}

/// A program given by reference (`run_v6`, ABI 1.11).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgramTreeHeader {
    base: String,
    /// A section: the host directory's bytes.
    dir: usize,
    dev: u64,
    ino: u64,
    directories: Vec<DirectoryHeader>,
    layer: Vec<ModedFileHeader>,
    deleted: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectoryHeader {
    path: String,
    entries: Vec<NodeHeader>,
}

/// One entry of a directory: a file's or a directory's digest and size, a link's target.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeHeader {
    name: String,
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target: Option<String>,
}

impl ProgramTreeHeader {
    fn encode<'a>(tree: &'a ProgramTree, builder: &mut MessageBuilder<'a>) -> Self {
        Self {
            base: tree.base.to_string(),
            dir: builder.section(tree.dir.as_os_str().as_bytes()),
            dev: tree.dev,
            ino: tree.ino,
            directories: tree
                .directories
                .iter()
                .map(|(path, directory)| DirectoryHeader {
                    path: path.clone(),
                    entries: directory.entries().map(NodeHeader::encode).collect(),
                })
                .collect(),
            layer: encode_files(&tree.layer, builder),
            deleted: tree.deleted.clone(),
        }
    }

    fn decode(self, sections: &mut Sections<'_>) -> Result<ProgramTree, MessageError> {
        let mut directories = BTreeMap::new();
        for (at, header) in self.directories.into_iter().enumerate() {
            let mut directory = Directory::new();
            for (n, node) in header.entries.into_iter().enumerate() {
                let what = format!("programTree.directories[{at}].entries[{n}]");
                let (name, node) = node.decode(&what)?;
                if directory.insert(name, node).is_some() {
                    return Err(MessageError::field(what, "names an entry twice"));
                }
            }
            if directories.insert(header.path, directory).is_some() {
                return Err(MessageError::field(
                    format!("programTree.directories[{at}].path"),
                    "names a directory twice",
                ));
            }
        }
        Ok(ProgramTree {
            base: parse_digest(&self.base, "programTree.base")?,
            dir: path(sections.take(self.dir)?),
            dev: self.dev,
            ino: self.ino,
            directories,
            layer: decode_files(&self.layer, "programTree.layer", sections)?,
            deleted: self.deleted,
        })
    }
}

impl NodeHeader {
    fn encode((name, node): (&str, &Node)) -> Self {
        let (kind, digest, size, target) = match node {
            Node::File {
                executable,
                digest,
                size,
            } => (
                if *executable { "executable" } else { "file" },
                Some(digest.to_string()),
                Some(*size),
                None,
            ),
            Node::Symlink { target } => ("symlink", None, None, Some(target.clone())),
            Node::Directory { digest, .. } => (
                "directory",
                Some(digest.hash.to_string()),
                Some(digest.size),
                None,
            ),
        };
        Self {
            name: name.to_owned(),
            kind: kind.to_owned(),
            digest,
            size,
            target,
        }
    }

    fn decode(self, what: &str) -> Result<(String, Node), MessageError> {
        let digest = |digest: &Option<String>| match digest {
            Some(digest) => parse_digest(digest, &format!("{what}.digest")),
            None => Err(MessageError::field(format!("{what}.digest"), "is missing")),
        };
        let size = self
            .size
            .ok_or_else(|| MessageError::field(format!("{what}.size"), "is missing"));
        let node = match (self.kind.as_str(), &self.target) {
            ("file" | "executable", None) => Node::File {
                executable: self.kind == "executable",
                digest: digest(&self.digest)?,
                size: size?,
            },
            ("directory", None) => Node::Directory {
                digest: DirectoryDigest {
                    hash: digest(&self.digest)?,
                    size: size?,
                },
                // Totals are not part of a digest, and a run needs none.
                totals: Totals::default(),
            },
            ("symlink", Some(target)) if self.digest.is_none() && self.size.is_none() => {
                Node::Symlink {
                    target: target.clone(),
                }
            }
            _ => {
                return Err(MessageError::field(
                    what,
                    "is a file, executable or directory with a digest and size, or a symlink \
                     with a target",
                ));
            }
        };
        if self.name.is_empty() || self.name.contains(['/', '\0']) {
            return Err(MessageError::field(
                format!("{what}.name"),
                "is one path segment",
            ));
        }
        Ok((self.name, node))
    }
}

/// A run's command (`run_v6`).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CommandHeader {
    argv: Vec<String>,
    cwd: String,
    env: BTreeMap<String, String>,
    environment: Option<EnvironmentHeader>,
    results: Option<ResultsRequestHeader>,
    resources: RunResources,
    /// ABI 1.7; absent when false, so that a request without it is what minor 6 reads.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    scratch_executable: bool,
    /// ABI 1.12; absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    network: Option<NetworkHeader>,
    /// ABI 1.12; absent when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<OutputHeader>,
}

/// A command's network (`run_v6`, ABI 1.12).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkHeader {
    /// A section: the proxy socket's host path.
    proxy: usize,
}

/// A command's output directory (`run_v6`, ABI 1.12).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutputHeader {
    at: String,
    /// A section: the host directory's bytes.
    dir: usize,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EnvironmentHeader {
    digest: String,
    /// A section: the host directory's bytes.
    tree: usize,
    at: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ResultsRequestHeader {
    path: String,
    max_bytes: u64,
}

impl CommandHeader {
    fn encode<'a>(command: &'a RunCommand, builder: &mut MessageBuilder<'a>) -> Self {
        Self {
            argv: command.argv.clone(),
            cwd: command.cwd.clone(),
            env: command.env.clone(),
            environment: command
                .environment
                .as_ref()
                .map(|environment| EnvironmentHeader {
                    digest: environment.digest.to_string(),
                    tree: builder.section(environment.tree.as_os_str().as_bytes()),
                    at: environment.at.clone(),
                }),
            results: command
                .results
                .as_ref()
                .map(|results| ResultsRequestHeader {
                    path: results.path.clone(),
                    max_bytes: results.max_bytes,
                }),
            resources: command.resources,
            scratch_executable: command.scratch_executable,
            network: command.network.as_ref().map(|network| NetworkHeader {
                proxy: builder.section(network.proxy.as_os_str().as_bytes()),
            }),
            output: command.output.as_ref().map(|output| OutputHeader {
                at: output.at.clone(),
                dir: builder.section(output.dir.as_os_str().as_bytes()),
            }),
        }
    }

    fn decode(self, sections: &mut Sections<'_>) -> Result<RunCommand, MessageError> {
        let environment = match self.environment {
            Some(environment) => Some(RunEnvironment {
                digest: parse_digest(&environment.digest, "command.environment.digest")?,
                tree: path(sections.take(environment.tree)?),
                at: environment.at,
            }),
            None => None,
        };
        Ok(RunCommand {
            argv: self.argv,
            cwd: self.cwd,
            env: self.env,
            environment,
            results: self.results.map(|results| ResultsRequest {
                path: results.path,
                max_bytes: results.max_bytes,
            }),
            resources: self.resources,
            scratch_executable: self.scratch_executable,
            network: match self.network {
                Some(network) => Some(RunNetwork {
                    proxy: path(sections.take(network.proxy)?),
                }),
                None => None,
            },
            output: match self.output {
                Some(output) => Some(RunOutput {
                    at: output.at,
                    dir: path(sections.take(output.dir)?),
                }),
                None => None,
            },
        })
    }
}

/// What became of a run's results file (`run_v6` answers).
#[derive(Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase", deny_unknown_fields)]
enum ResultsHeader {
    Absent {},
    Written { content: usize },
    Refused { reason: String },
}

impl ResultsHeader {
    fn encode<'a>(results: &'a CapturedResults, builder: &mut MessageBuilder<'a>) -> Self {
        match results {
            CapturedResults::Absent => Self::Absent {},
            CapturedResults::Written(bytes) => Self::Written {
                content: builder.section(bytes),
            },
            CapturedResults::Refused(reason) => Self::Refused {
                reason: reason.clone(),
            },
        }
    }

    fn decode(self, sections: &mut Sections<'_>) -> Result<CapturedResults, MessageError> {
        Ok(match self {
            Self::Absent {} => CapturedResults::Absent,
            Self::Written { content } => CapturedResults::Written(sections.take(content)?.to_vec()),
            Self::Refused { reason } => CapturedResults::Refused(reason),
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryHeader {
    place: String,
    path: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CancelHeader {
    run_id: u64,
}

/// A file of the requests before `run_v4`: a regular file, always.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHeader {
    path: String,
    content: usize,
}

/// A snapshot entry of `run_v4`: its mode as Git writes it.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModedFileHeader {
    path: String,
    mode: String,
    content: usize,
}

/// One snapshot entry's header in the shape of one request.
trait WireFile: Sized {
    /// The header of `file` whose content is section `content`. Only called for a request
    /// the shape carries ([`RunWire::lacks`]), so a shape without modes sees regular files.
    fn encode(file: &SnapshotFile, content: usize) -> Self;
    /// The path, the mode and the content's section; `what` names the entry in errors.
    fn decode(&self, what: &str) -> Result<(&str, EntryMode, usize), MessageError>;
}

impl WireFile for FileHeader {
    fn encode(file: &SnapshotFile, content: usize) -> Self {
        Self {
            path: file.path.clone(),
            content,
        }
    }

    fn decode(&self, _: &str) -> Result<(&str, EntryMode, usize), MessageError> {
        Ok((&self.path, EntryMode::Regular, self.content))
    }
}

impl WireFile for ModedFileHeader {
    fn encode(file: &SnapshotFile, content: usize) -> Self {
        Self {
            path: file.path.clone(),
            mode: file.mode.octal().to_owned(),
            content,
        }
    }

    fn decode(&self, what: &str) -> Result<(&str, EntryMode, usize), MessageError> {
        let mode = EntryMode::from_octal(self.mode.as_bytes()).ok_or_else(|| {
            MessageError::field(format!("{what}.mode"), "must be 100644, 100755 or 120000")
        })?;
        Ok((&self.path, mode, self.content))
    }
}

fn encode_files<'a, F: WireFile>(
    files: &'a [SnapshotFile],
    builder: &mut MessageBuilder<'a>,
) -> Vec<F> {
    files
        .iter()
        .map(|file| F::encode(file, builder.section(&file.content)))
        .collect()
}

fn decode_files<F: WireFile>(
    files: &[F],
    what: &str,
    sections: &mut Sections<'_>,
) -> Result<Vec<SnapshotFile>, MessageError> {
    files
        .iter()
        .enumerate()
        .map(|(at, file)| {
            let (path, mode, content) = file.decode(&format!("{what}[{at}]"))?;
            Ok(SnapshotFile::new(
                path,
                mode,
                sections.take(content)?.to_vec(),
            ))
        })
        .collect()
}

/// A `Duration`, exactly: whole seconds and the nanoseconds below one second.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct DurationHeader {
    secs: u64,
    nanos: u32,
}

impl DurationHeader {
    fn encode(duration: Duration) -> Self {
        Self {
            secs: duration.as_secs(),
            nanos: duration.subsec_nanos(),
        }
    }

    fn decode(&self, field: &str) -> Result<Duration, MessageError> {
        if self.nanos >= 1_000_000_000 {
            return Err(MessageError::field(
                format!("{field}.nanos"),
                "must be below one second",
            ));
        }
        Ok(Duration::new(self.secs, self.nanos))
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct BoundsHeader {
    timeout: DurationHeader,
    stdout_limit: u64,
    stderr_limit: u64,
}

impl BoundsHeader {
    fn encode(bounds: &RunBounds) -> Self {
        Self {
            timeout: DurationHeader::encode(bounds.timeout),
            stdout_limit: bounds.stdout_limit,
            stderr_limit: bounds.stderr_limit,
        }
    }

    fn decode(&self, field: &str) -> Result<RunBounds, MessageError> {
        Ok(RunBounds {
            timeout: self.timeout.decode(&format!("{field}.timeout"))?,
            stdout_limit: self.stdout_limit,
            stderr_limit: self.stderr_limit,
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadableHeader {
    path: usize,
    kind: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuntimeAnswer {
    executable: usize,
    readable: Vec<ReadableHeader>,
    digest: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileAnswer {
    recipe: usize,
    digest: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TimesHeader {
    wall: DurationHeader,
    user: DurationHeader,
    system: DurationHeader,
    max_rss_kib: u64,
    /// Absent from plugins that do not measure it (and from every `run` answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory_peak_bytes: Option<u64>,
}

/// Enforcement in the fixed fields of the `run` and `run_v2` answers.
#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct EnforcementHeader {
    landlock_abi: u32,
    landlock: String,
    /// Absent (not stated) from plugins that do not say, and from every `run` answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    host_identity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory: Option<String>,
}

impl From<LegacyEnforcement> for EnforcementHeader {
    fn from(legacy: LegacyEnforcement) -> Self {
        Self {
            landlock_abi: legacy.landlock_abi,
            landlock: legacy.landlock,
            host_identity: legacy.host_identity,
            memory: legacy.memory,
        }
    }
}

/// A run's identities; `harness` is absent from (and refused in) `run` answers and required
/// in the others. `E` is the enforcement: [`EnforcementHeader`] for `run` and `run_v2`,
/// facts (mechanism → status) for `run_v3`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentitiesHeader<E> {
    program: String,
    input: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    harness: Option<String>,
    runtime: String,
    profile: String,
    bounds: String,
    enforcement: E,
    /// Present in `run_v6` answers only, for a run with a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "disposition", rename_all = "lowercase", deny_unknown_fields)]
enum NamespaceHeader {
    Reaped {},
    Unconfirmed { reason: String },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct AnswerHeader<I> {
    status: String,
    exit_code: Option<i32>,
    signal: Option<i32>,
    stdout: usize,
    stderr: usize,
    times: TimesHeader,
    bounds: BoundsHeader,
    identities: I,
    namespace: NamespaceHeader,
    problems: Vec<String>,
    /// Present in `run_v5` answers only.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "limits_hit"
    )]
    limits_hit: Option<Vec<LimitHit>>,
    /// Present in `run_v6` answers only, for a run whose command asked for a results file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    results: Option<ResultsHeader>,
    /// Present in `run_v7` answers only, for a remote run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    remote: Option<RemoteRun>,
}

/// A stated list of limits hit, checked ([`crate::contracts::check_limits_hit`]).
fn limits_hit<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<LimitHit>>, D::Error> {
    crate::contracts::limit_hit::deserialize_limits_hit(deserializer).map(Some)
}

fn path(bytes: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(bytes))
}

fn parse_digest(text: &str, field: &str) -> Result<Digest, MessageError> {
    Digest::parse(text).ok_or_else(|| {
        MessageError::field(field, "must be sha256: and 64 lowercase hex characters")
    })
}

fn parse_status(text: &str) -> Result<RunStatus, MessageError> {
    [
        RunStatus::Exited,
        RunStatus::Signalled,
        RunStatus::TimedOut,
        RunStatus::OutputLimit,
        RunStatus::Aborted,
    ]
    .into_iter()
    .find(|status| status.code() == text)
    .ok_or_else(|| {
        MessageError::field(
            "status",
            "must be exited, signalled, timed-out, output-limit or aborted",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::Limit;
    use serde_json::Value;

    fn file(path: &str, content: &[u8]) -> SnapshotFile {
        SnapshotFile::regular(path, content.to_vec())
    }

    fn request() -> RunRequest {
        RunRequest {
            label: None,
            program_tree: None,
            command: None,
            program: vec![file("main.sh", b"echo \xff\x00"), file("lib/a.sh", b"")],
            entry: "main.sh".into(),
            args: vec!["one".into(), String::new(), "th ree\u{e9}".into()],
            input: vec![file("data/in.bin", &[0, 1, 2, 255])],
            harness: Vec::new(),
            bounds: RunBounds {
                timeout: Duration::new(3, 1),
                stdout_limit: u64::MAX,
                stderr_limit: 0,
            },
        }
    }

    fn answer() -> RunAnswer {
        RunAnswer {
            remote: None,
            results: None,
            status: RunStatus::Signalled,
            exit_code: None,
            signal: Some(9),
            stdout: b"\xff\xfeout".to_vec(),
            stderr: Vec::new(),
            times: RunTimes {
                wall: Duration::new(u64::MAX, 999_999_999),
                user: Duration::from_nanos(1),
                system: Duration::ZERO,
                max_rss_kib: u64::MAX,
                memory_peak_bytes: Some(u64::MAX),
            },
            bounds: request().bounds,
            identities: RunIdentities {
                command: None,
                program: Digest::of(b"p"),
                input: Digest::of(b"i"),
                harness: crate::contracts::snapshot::snapshot_digest(&[]).unwrap(),
                runtime: Digest::of(b"r"),
                profile: Digest::of(b"f"),
                bounds: Digest::of(b"b"),
                enforcement: facts(&[
                    ("landlock-abi", "7"),
                    ("landlock", "partially-enforced"),
                    ("host-identity", "reserved-id"),
                    ("memory", "cgroup-v2"),
                ]),
            },
            namespace: NamespaceDisposition::Unconfirmed {
                reason: "lost".into(),
            },
            problems: vec!["one".into(), "two".into()],
            limits_hit: Vec::new(),
        }
    }

    /// [`answer`] with two limits hit.
    fn answer_with_hits() -> RunAnswer {
        RunAnswer {
            results: None,
            limits_hit: vec![
                LimitHit::new(Limit::Processes, 1024, "pids.events max 3").unwrap(),
                LimitHit::new(Limit::Memory, 2 << 30, "memory.oom_control oom_kill 1").unwrap(),
            ],
            ..answer()
        }
    }

    fn facts(pairs: &[(&str, &str)]) -> Enforcement {
        Enforcement::from_facts(pairs.iter().copied()).unwrap()
    }

    fn with_harness() -> RunRequest {
        let mut request = request();
        request.harness = vec![
            file("run.sh", b"sh /sf/program/main.sh"),
            file("t/a", b"\0"),
        ];
        request.entry = RunEntry::harness("run.sh");
        request
    }

    /// [`with_harness`] with an executable and links in every snapshot.
    fn with_modes() -> RunRequest {
        let mut request = with_harness();
        request.program[0].mode = EntryMode::Executable;
        request
            .program
            .push(SnapshotFile::symlink("lib/main", b"../main.sh".to_vec()));
        request
            .input
            .push(SnapshotFile::symlink("data/link", b"in.bin".to_vec()));
        request.harness[0].mode = EntryMode::Executable;
        request
    }

    #[test]
    fn requests_round_trip() {
        for (request, wire) in [
            (request(), RunWire::V1),
            (request(), RunWire::V2),
            (with_harness(), RunWire::V2),
            (with_harness(), RunWire::V3),
            (with_harness(), RunWire::V4),
            (with_modes(), RunWire::V4),
            (with_modes(), RunWire::V5),
        ] {
            let decoded = Request::decode(
                wire.method(),
                &encode_run(u64::MAX, &request, wire).unwrap(),
            )
            .unwrap()
            .unwrap();
            assert_eq!(
                decoded,
                Request::Run {
                    run_id: u64::MAX,
                    request,
                    wire
                }
            );
        }
        // `run` cannot carry a harness or an entry in it, and only `run_v4` carries modes.
        assert_eq!(encode_run(1, &with_harness(), RunWire::V1), None);
        assert_eq!(RunWire::V1.lacks(&with_modes()), Some(RunFeature::Harness));
        for wire in [RunWire::V2, RunWire::V3] {
            assert_eq!(wire.lacks(&with_modes()), Some(RunFeature::Modes));
            assert_eq!(encode_run(1, &with_modes(), wire), None);
        }
        let mut moded_without_harness = with_modes();
        moded_without_harness.harness.clear();
        moded_without_harness.entry = RunEntry::program("main.sh");
        assert_eq!(
            RunWire::V1.lacks(&moded_without_harness),
            Some(RunFeature::Modes)
        );
        let mut harness_entry_only = with_harness();
        harness_entry_only.harness.clear();
        assert_eq!(encode_run(1, &harness_entry_only, RunWire::V1), None);
        let encoded = encode_run(1, &with_harness(), RunWire::V2).unwrap();
        let mut header: Value =
            serde_json::from_slice(message::split(&encoded).unwrap().header).unwrap();
        let reframe = |header: &Value| {
            let request = with_harness();
            let mut builder = MessageBuilder::new();
            for file in request.program.iter().chain(&request.input) {
                builder.section(&file.content);
            }
            for file in &request.harness {
                builder.section(&file.content);
            }
            builder.encode(header)
        };
        assert!(Request::decode(method::RUN_V2, &reframe(&header)).is_ok());
        header["entry"]["place"] = "input".into();
        assert!(
            Request::decode(method::RUN_V2, &reframe(&header)).is_err(),
            "an unknown place is refused"
        );
        assert_eq!(
            Request::decode(method::CANCEL, &encode_cancel(7))
                .unwrap()
                .unwrap(),
            Request::Cancel { run_id: 7 }
        );
        assert_eq!(
            Request::decode(method::DESCRIBE_RUNTIME, &encode_no_arguments())
                .unwrap()
                .unwrap(),
            Request::DescribeRuntime
        );
        assert_eq!(
            Request::decode(method::PROFILE, &encode_no_arguments())
                .unwrap()
                .unwrap(),
            Request::Profile
        );
        assert_eq!(Request::decode("frobnicate", b"").unwrap(), None);
        // A `run_v4` entry's mode is one of Git's three; a `run_v2` entry has none.
        let moded = encode_run(1, &with_modes(), RunWire::V4).unwrap();
        let split = message::split(&moded).unwrap();
        let mut header: Value = serde_json::from_slice(split.header).unwrap();
        assert_eq!(header["program"][0]["mode"], "100755");
        assert_eq!(header["program"][1]["mode"], "100644");
        assert_eq!(header["program"][2]["mode"], "120000");
        assert_eq!(header["input"][0]["mode"], "100644");
        let reframe = |header: &Value| {
            let request = with_modes();
            let mut builder = MessageBuilder::new();
            for file in request
                .program
                .iter()
                .chain(&request.input)
                .chain(&request.harness)
            {
                builder.section(&file.content);
            }
            builder.encode(header)
        };
        assert!(Request::decode(method::RUN_V4, &reframe(&header)).is_ok());
        assert!(
            Request::decode(method::RUN_V2, &reframe(&header)).is_err(),
            "a mode is not a field of run_v2"
        );
        for bad in ["100664", "40000", "160000", "755", ""] {
            header["input"][1]["mode"] = bad.into();
            let error = Request::decode(method::RUN_V4, &reframe(&header)).unwrap_err();
            assert!(error.to_string().contains("input[1].mode"), "{error}");
        }
        header["input"][1].as_object_mut().unwrap().remove("mode");
        assert!(
            Request::decode(method::RUN_V4, &reframe(&header)).is_err(),
            "run_v4 requires every mode"
        );
        assert!(Request::decode(method::RUN, &encode_cancel(1)).is_err());
        assert!(Request::decode(method::PROFILE, &encode_cancel(1)).is_err());
    }

    /// An answer that states no host identity, memory bound or peak decodes with them not
    /// stated; a `run_v2` answer keeps stated ones; a `run` answer never carries them.
    #[test]
    fn facts_added_later_are_optional_on_the_wire() {
        let landlock_only = facts(&[("landlock-abi", "7"), ("landlock", "partially-enforced")]);
        let mut unstated = answer();
        unstated.identities.enforcement = landlock_only.clone();
        unstated.times.memory_peak_bytes = None;
        for wire in [RunWire::V1, RunWire::V2] {
            let bytes = encode_answer(&unstated, wire);
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains("hostIdentity") && !text.contains("memoryPeakBytes"),
                "{text}"
            );
            assert_eq!(decode_answer(&bytes, wire).unwrap(), unstated);
        }
        let stated = encode_answer(&answer(), RunWire::V2);
        let text = String::from_utf8_lossy(&stated);
        assert!(text.contains("\"hostIdentity\":\"reserved-id\""), "{text}");
        assert!(text.contains("\"memory\":\"cgroup-v2\""), "{text}");
        let old = encode_answer(&answer(), RunWire::V1);
        let text = String::from_utf8_lossy(&old);
        assert!(
            !text.contains("hostIdentity") && !text.contains("memoryPeakBytes"),
            "a run answer keeps the shape an older sf reads: {text}"
        );
        let mut read_back = answer();
        read_back.identities.enforcement = landlock_only;
        read_back.times.memory_peak_bytes = None;
        assert_eq!(decode_answer(&old, RunWire::V1).unwrap(), read_back);
    }

    /// `run_v3` carries the Executor's facts as they are, in any words; the older shapes carry
    /// the four mechanisms of their fixed fields, and read another executor's facts as
    /// nothing enforced.
    #[test]
    fn run_v3_answers_carry_any_facts() {
        let mut other = answer();
        other.identities.enforcement =
            facts(&[("macos-sandbox", "enforced"), ("seatbelt-profile", "sf.v1")]);
        let bytes = encode_answer(&other, RunWire::V3);
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains(
                r#""enforcement":{"macos-sandbox":"enforced","seatbelt-profile":"sf.v1"}"#
            ),
            "{text}"
        );
        assert_eq!(decode_answer(&bytes, RunWire::V3).unwrap(), other);
        assert_eq!(
            decode_answer(&encode_answer(&answer(), RunWire::V3), RunWire::V3).unwrap(),
            answer()
        );
        let old = decode_answer(&encode_answer(&other, RunWire::V2), RunWire::V2).unwrap();
        assert_eq!(
            old.identities.enforcement,
            facts(&[("landlock-abi", "0"), ("landlock", "not-enforced")])
        );
        assert!(
            decode_answer(&bytes, RunWire::V2).is_err(),
            "a v3 answer is not a v2 answer"
        );
        // Facts outside the word grammar are refused.
        let mut header: Value =
            serde_json::from_slice(message::split(&bytes).unwrap().header).unwrap();
        header["identities"]["enforcement"]["Bad Word"] = "x".into();
        let mut builder = MessageBuilder::new();
        builder.section(&other.stdout);
        builder.section(&other.stderr);
        assert!(decode_answer(&builder.encode(&header), RunWire::V3).is_err());
    }

    /// `run_v6` carries a command (its environment's host directory as a section) and its
    /// answer the command's identity and results; no older shape carries either, and a host
    /// never sends a command in one.
    #[test]
    fn run_v6_carries_commands_and_their_results() {
        use crate::contracts::command::{
            CapturedResults, ResultsRequest, RunCommand, RunEnvironment,
        };
        let mut with = request();
        with.command = Some(RunCommand {
            argv: vec!["python3".into(), "-m".into(), "pytest".into()],
            cwd: "/sf/program".into(),
            env: [("A".to_owned(), "1".to_owned())].into(),
            environment: Some(RunEnvironment {
                digest: Digest::of(b"env"),
                tree: "/var/lib/sf/\u{e9}nv".into(),
                at: "/opt/venv".into(),
            }),
            results: Some(ResultsRequest {
                path: "results.xml".into(),
                max_bytes: 1000,
            }),
            resources: crate::contracts::command::RunResources {
                memory_bytes: Some(1 << 30),
                processes: None,
                cpu_seconds: Some(60),
                scratch_bytes: Some(1 << 26),
                scratch_files: None,
            },
            scratch_executable: true,
            network: None,
            output: None,
        });
        let bytes = encode_run(7, &with, RunWire::V6).unwrap();
        match Request::decode(method::RUN_V6, &bytes).unwrap() {
            Some(Request::Run { request, wire, .. }) => {
                assert_eq!(request, with);
                assert_eq!(wire, RunWire::V6);
            }
            other => panic!("{other:?}"),
        }
        for wire in [
            RunWire::V1,
            RunWire::V2,
            RunWire::V3,
            RunWire::V4,
            RunWire::V5,
        ] {
            assert_eq!(wire.lacks(&with), Some(RunFeature::Command), "{wire:?}");
            assert!(encode_run(7, &with, wire).is_none());
        }
        assert!(
            Request::decode(method::RUN_V5, &bytes).is_err(),
            "command is not a field of run_v5"
        );
        // An executable scratch is asked of a plugin of minor 7 or later only; without it the
        // command is what minor 6 reads.
        assert_eq!(
            RunFeature::lacking_for(6, RunWire::V6, &with),
            Some(RunFeature::ExecutableScratch)
        );
        assert_eq!(RunFeature::lacking_for(7, RunWire::V6, &with), None);
        let mut plain = with.clone();
        if let Some(command) = plain.command.as_mut() {
            command.scratch_executable = false;
        }
        assert_eq!(RunFeature::lacking_for(6, RunWire::V6, &plain), None);
        // A root environment is asked of a plugin of minor 8 or later only.
        let mut root = plain.clone();
        if let Some(environment) = root
            .command
            .as_mut()
            .and_then(|command| command.environment.as_mut())
        {
            environment.at = "/".into();
        }
        assert_eq!(
            RunFeature::lacking_for(7, RunWire::V6, &root),
            Some(RunFeature::RootEnvironment)
        );
        assert_eq!(RunFeature::lacking_for(8, RunWire::V6, &root), None);
        assert_eq!(RunFeature::lacking_for(7, RunWire::V6, &plain), None);
        let plain_bytes = encode_run(7, &plain, RunWire::V6).unwrap();
        assert!(
            !String::from_utf8_lossy(&plain_bytes).contains("scratchExecutable"),
            "a command that does not ask for it does not carry the field"
        );
        let mut ran = answer();
        ran.identities.command = Some(Digest::of(b"command"));
        for results in [
            CapturedResults::Absent,
            CapturedResults::Written(b"<testsuites/>".to_vec()),
            CapturedResults::Refused("a directory".into()),
        ] {
            ran.results = Some(results);
            let bytes = encode_answer(&ran, RunWire::V6);
            assert_eq!(decode_answer(&bytes, RunWire::V6).unwrap(), ran);
            assert!(decode_answer(&bytes, RunWire::V5).is_err());
            let old = decode_answer(&encode_answer(&ran, RunWire::V5), RunWire::V5).unwrap();
            assert_eq!((old.results, old.identities.command), (None, None));
        }
        assert_eq!(
            decode_answer(&encode_answer(&answer(), RunWire::V6), RunWire::V6).unwrap(),
            answer()
        );
    }

    /// A build's network and output directory travel in `run_v6` (their host paths as
    /// sections), only to a plugin of minor 12 or later; a command without them carries
    /// neither field.
    #[test]
    fn build_access_travels_only_to_a_plugin_that_reads_it() {
        use crate::contracts::command::{RunCommand, RunNetwork, RunOutput};
        let mut with = request();
        let command = RunCommand {
            argv: vec!["pip".into(), "install".into()],
            cwd: "/sf/program".into(),
            env: BTreeMap::new(),
            environment: None,
            results: None,
            resources: Default::default(),
            scratch_executable: false,
            network: Some(RunNetwork {
                proxy: "/run/sf/pr\u{f6}xy.sock".into(),
            }),
            output: Some(RunOutput {
                at: "/opt/sf/env".into(),
                dir: "/var/lib/sf/builds/1/out".into(),
            }),
        };
        with.command = Some(command.clone());
        let bytes = encode_run(12, &with, RunWire::V6).unwrap();
        match Request::decode(method::RUN_V6, &bytes).unwrap() {
            Some(Request::Run { request, .. }) => assert_eq!(request, with),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            RunFeature::lacking_for(BUILD_ACCESS_SINCE_MINOR - 1, RunWire::V6, &with),
            Some(RunFeature::BuildAccess)
        );
        assert_eq!(
            RunFeature::lacking_for(BUILD_ACCESS_SINCE_MINOR, RunWire::V6, &with),
            None
        );
        let mut output_only = with.clone();
        output_only.command.as_mut().unwrap().network = None;
        assert_eq!(
            RunFeature::lacking_for(11, RunWire::V6, &output_only),
            Some(RunFeature::BuildAccess)
        );
        let mut plain = with.clone();
        plain.command = Some(RunCommand {
            network: None,
            output: None,
            ..command
        });
        assert_eq!(RunFeature::lacking_for(11, RunWire::V6, &plain), None);
        let text =
            String::from_utf8_lossy(&encode_run(11, &plain, RunWire::V6).unwrap()).into_owned();
        assert!(
            !text.contains("network") && !text.contains("output"),
            "{text}"
        );
    }

    /// A program by reference travels in `run_v6` whole (its directories' digests, the layer
    /// with its modes, the deletions), is asked of a plugin of minor 11 or later only, and
    /// never travels in an older shape.
    #[test]
    fn a_program_tree_travels_only_to_a_plugin_that_reads_it() {
        use crate::contracts::tree_digest::build;
        let base = build(vec![
            ("main.sh", Node::file(false, b"echo base\n")),
            ("lib/old.txt", Node::file(true, b"old")),
            (
                "lib/link",
                Node::Symlink {
                    target: "old.txt".into(),
                },
            ),
        ])
        .unwrap();
        let mut with = request();
        with.program = Vec::new();
        with.program_tree = Some(ProgramTree {
            base: base.root.hash.clone(),
            dir: PathBuf::from("/var/lib/sf/trees/base"),
            dev: 7,
            ino: 42,
            directories: base.directories.clone(),
            layer: vec![
                SnapshotFile::executable("main.sh", b"echo layer\n".to_vec()),
                SnapshotFile::symlink("lib/new", b"link".to_vec()),
            ],
            deleted: vec!["lib/old.txt".into()],
        });
        with.program_tree
            .as_ref()
            .unwrap()
            .check()
            .expect("a valid reference");
        let bytes = encode_run(9, &with, RunWire::V6).unwrap();
        let decoded = match Request::decode(method::RUN_V6, &bytes).unwrap() {
            Some(Request::Run { request, .. }) => request,
            other => panic!("{other:?}"),
        };
        // Totals are not part of a digest and do not travel; everything else does.
        let tree = decoded.program_tree.as_ref().unwrap();
        assert_eq!(
            tree.check().unwrap(),
            with.program_tree.as_ref().unwrap().check().unwrap()
        );
        assert_eq!(
            (&tree.layer, &tree.deleted, &tree.dir, tree.dev, tree.ino),
            {
                let sent = with.program_tree.as_ref().unwrap();
                (&sent.layer, &sent.deleted, &sent.dir, sent.dev, sent.ino)
            }
        );
        assert_eq!(
            RunFeature::lacking_for(PROGRAM_TREE_SINCE_MINOR - 1, RunWire::V6, &with),
            Some(RunFeature::ProgramTree)
        );
        assert_eq!(
            RunFeature::lacking_for(PROGRAM_TREE_SINCE_MINOR, RunWire::V6, &with),
            None
        );
        for wire in [RunWire::V4, RunWire::V5] {
            assert!(encode_run(9, &with, wire).is_none(), "{wire:?}");
        }
        assert!(
            !String::from_utf8_lossy(&encode_run(9, &request(), RunWire::V6).unwrap())
                .contains("programTree"),
            "a request by value does not carry the field"
        );
    }

    /// `run_v5` carries the limits a run hit, checked; an older shape carries each as a
    /// problem (so an older host still finds the run unattributable) and refuses the field.
    #[test]
    fn run_v5_answers_carry_the_limits_hit() {
        let hit = answer_with_hits();
        let bytes = encode_answer(&hit, RunWire::V5);
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains(
                r#""limitsHit":[{"detail":"pids.events max 3","limit":"processes","value":1024},"#
            ),
            "{text}"
        );
        assert_eq!(decode_answer(&bytes, RunWire::V5).unwrap(), hit);
        let none = encode_answer(&answer(), RunWire::V5);
        assert!(String::from_utf8_lossy(&none).contains(r#""limitsHit":[]"#));
        assert_eq!(decode_answer(&none, RunWire::V5).unwrap(), answer());
        for wire in [RunWire::V1, RunWire::V2, RunWire::V3, RunWire::V4] {
            let old = encode_answer(&hit, wire);
            assert!(
                !String::from_utf8_lossy(&old).contains("limitsHit"),
                "{wire:?}"
            );
            let read = decode_answer(&old, wire).unwrap();
            assert!(read.limits_hit.is_empty());
            assert_eq!(
                read.problems,
                [
                    "one",
                    "two",
                    "the run hit the sandbox's process limit (1024): pids.events max 3",
                    "the run hit the sandbox's memory limit (2048 MiB): memory.oom_control \
                     oom_kill 1",
                ]
            );
        }
        assert!(
            decode_answer(&bytes, RunWire::V4).is_err(),
            "limitsHit is not a field of run_v4"
        );
        assert!(
            decode_answer(&encode_answer(&hit, RunWire::V4), RunWire::V5).is_err(),
            "run_v5 requires limitsHit"
        );
        let mut header: Value =
            serde_json::from_slice(message::split(&bytes).unwrap().header).unwrap();
        let reframe = |header: &Value| {
            let mut builder = MessageBuilder::new();
            builder.section(&hit.stdout);
            builder.section(&hit.stderr);
            builder.encode(header)
        };
        assert!(decode_answer(&reframe(&header), RunWire::V5).is_ok());
        let hits = header["limitsHit"].clone();
        for bad in [
            serde_json::json!([hits[1], hits[0]]),
            serde_json::json!([hits[0], hits[0]]),
            serde_json::json!([{"detail": "x", "limit": "disk", "value": 1}]),
            serde_json::json!([{"detail": "a\nb", "limit": "memory", "value": 1}]),
            serde_json::json!([{"detail": "x", "limit": "memory", "value": 1u64 << 53}]),
            serde_json::json!({}),
        ] {
            header["limitsHit"] = bad.clone();
            assert!(
                decode_answer(&reframe(&header), RunWire::V5).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn answers_round_trip() {
        let answer = answer();
        assert_eq!(
            decode_answer(&encode_answer(&answer, RunWire::V2), RunWire::V2).unwrap(),
            answer
        );
        let mut harnessed = answer.clone();
        harnessed.identities.harness = Digest::of(b"h");
        assert_eq!(
            decode_answer(&encode_answer(&harnessed, RunWire::V2), RunWire::V2).unwrap(),
            harnessed
        );
        assert!(
            decode_answer(&encode_answer(&harnessed, RunWire::V2), RunWire::V1).is_err(),
            "a v2 answer is not a v1 answer"
        );
        for status in [
            RunStatus::Exited,
            RunStatus::TimedOut,
            RunStatus::OutputLimit,
            RunStatus::Aborted,
        ] {
            let mut other = answer.clone();
            other.status = status;
            other.exit_code = Some(-1);
            other.namespace = NamespaceDisposition::Reaped;
            other.identities.enforcement =
                facts(&[("landlock-abi", "6"), ("landlock", "fully-enforced")]);
            assert_eq!(
                decode_answer(&encode_answer(&other, RunWire::V2), RunWire::V2).unwrap(),
                other
            );
        }
        let runtime = RuntimeDescription {
            executable: path(b"/usr/bin/\xffodd"),
            readable: vec![
                ReadablePath {
                    path: "/dev/null".into(),
                    kind: ReadableKind::File,
                },
                ReadablePath {
                    path: "/usr/lib".into(),
                    kind: ReadableKind::Subtree,
                },
            ],
            digest: Digest::of(b"runtime"),
        };
        assert_eq!(decode_runtime(&encode_runtime(&runtime)).unwrap(), runtime);
        let profile = ProfileDescription {
            recipe: b"{\"a\":1}\x00".to_vec(),
            digest: Digest::of(b"recipe"),
        };
        assert_eq!(decode_profile(&encode_profile(&profile)).unwrap(), profile);
        decode_cancelled(&encode_cancelled()).unwrap();
        assert!(decode_answer(&encode_profile(&profile), RunWire::V2).is_err());
    }

    #[test]
    fn errors_round_trip() {
        for error in [
            ExecutorError::InvalidInput {
                input: "entry \"x\"".into(),
                rule: "the entry is a file of the program",
            },
            ExecutorError::Unavailable {
                mechanism: "landlock".into(),
                reason: "ABI 3".into(),
            },
            ExecutorError::Aborted,
        ] {
            assert_eq!(
                decode_error(&encode_error(&error)).unwrap(),
                DecodedError::Known(error)
            );
        }
        let unknown = message::encode_header(&serde_json::json!({
            "code": "frozen", "message": "a newer code", "extra": 1
        }));
        assert_eq!(
            decode_error(&unknown).unwrap(),
            DecodedError::Unknown {
                code: "frozen".into(),
                message: "a newer code".into()
            }
        );
        let missing = message::encode_header(&serde_json::json!({
            "code": "unavailable", "message": "m", "reason": "r"
        }));
        assert!(decode_error(&missing).is_err());
        let extra = message::encode_header(&serde_json::json!({
            "code": "aborted", "message": "m", "more": "x"
        }));
        assert!(decode_error(&extra).is_err());
    }

    #[test]
    fn malformed_values_are_refused() {
        let mut header: Value = serde_json::from_slice(
            message::split(&encode_answer(&answer(), RunWire::V2))
                .unwrap()
                .header,
        )
        .unwrap();
        let reframe = |header: &Value| {
            let mut builder = MessageBuilder::new();
            builder.section(b"out");
            builder.section(b"err");
            builder.encode(header)
        };
        for (pointer, value) in [
            ("/status", Value::from("finished")),
            ("/times/wall/nanos", Value::from(1_000_000_000u64)),
            ("/identities/program", Value::from("sha256:00")),
            ("/identities/harness", Value::from("sha256:00")),
            ("/identities/enforcement/landlock", Value::from("maybe")),
            ("/exitCode", Value::from(1u64 << 40)),
            ("/namespace", serde_json::json!({"disposition": "lost"})),
        ] {
            let saved = header.pointer(pointer).unwrap().clone();
            *header.pointer_mut(pointer).unwrap() = value;
            assert!(
                decode_answer(&reframe(&header), RunWire::V2).is_err(),
                "{pointer}"
            );
            *header.pointer_mut(pointer).unwrap() = saved;
        }
        assert!(decode_answer(&reframe(&header), RunWire::V2).is_ok());
    }

    #[test]
    fn decoders_never_panic_on_garbage() {
        let seeds = [
            encode_run(1, &request(), RunWire::V1).unwrap(),
            encode_run(1, &with_harness(), RunWire::V2).unwrap(),
            encode_run(1, &with_modes(), RunWire::V4).unwrap(),
            encode_answer(&answer(), RunWire::V1),
            encode_answer(&answer(), RunWire::V2),
            encode_answer(&answer_with_hits(), RunWire::V5),
            encode_error(&ExecutorError::Aborted),
            encode_cancel(3),
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..4000 {
            let mut bytes = seeds[round % seeds.len()].clone();
            match next() % 3 {
                0 if !bytes.is_empty() => {
                    let at = next() as usize % bytes.len();
                    bytes[at] ^= next() as u8 | 1;
                }
                1 => bytes.truncate(next() as usize % (bytes.len() + 1)),
                _ => bytes.extend((0..next() % 16).map(|_| next() as u8)),
            }
            for method in [
                method::RUN,
                method::RUN_V2,
                method::RUN_V4,
                method::RUN_V5,
                method::CANCEL,
                method::PROFILE,
                method::DESCRIBE_RUNTIME,
            ] {
                let _ = Request::decode(method, &bytes);
            }
            let _ = decode_answer(&bytes, RunWire::V1);
            let _ = decode_answer(&bytes, RunWire::V2);
            let _ = decode_answer(&bytes, RunWire::V5);
            let _ = decode_runtime(&bytes);
            let _ = decode_profile(&bytes);
            let _ = decode_error(&bytes);
        }
    }

    /// `run_v7`'s answer names where a remote run was executed; the older answers neither
    /// carry nor accept it, and a malformed one is refused.
    #[test]
    fn overlap_round_trips() {
        use crate::contracts::Overlap;
        assert_eq!(
            Request::decode(method::OVERLAP, &encode_no_arguments()).unwrap(),
            Some(Request::Overlap)
        );
        for overlap in [
            Overlap::Allowed,
            Overlap::OneAtATime {
                reason: "no group".into(),
            },
        ] {
            assert_eq!(decode_overlap(&encode_overlap(&overlap)).unwrap(), overlap);
        }
        assert!(decode_overlap(br#"{"oneAtATime":1}"#).is_err());
    }

    #[test]
    fn a_runs_label_travels_in_run_v7_only() {
        let labelled = RunRequest {
            label: Some("check bug-fixed".into()),
            ..request()
        };
        let bytes = encode_run(3, &labelled, RunWire::V7).unwrap();
        match Request::decode(method::RUN_V7, &bytes) {
            Ok(Some(Request::Run { request, .. })) => {
                assert_eq!(request.label.as_deref(), Some("check bug-fixed"));
            }
            other => panic!("{other:?}"),
        }
        // An older shape leaves it out, and refuses one that holds it.
        let bytes = encode_run(3, &labelled, RunWire::V6).unwrap();
        match Request::decode(method::RUN_V6, &bytes) {
            Ok(Some(Request::Run { request, .. })) => assert_eq!(request.label, None),
            other => panic!("{other:?}"),
        }
        let v7 = encode_run(3, &labelled, RunWire::V7).unwrap();
        let error = Request::decode(method::RUN_V6, &v7).unwrap_err();
        assert!(error.to_string().contains("label"), "{error}");
    }

    #[test]
    fn a_remote_run_travels_in_run_v7_only() {
        let mut remote = answer();
        remote.remote = Some(RemoteRun {
            action: format!("{}/140", "a".repeat(64)),
            worker: Some("worker-0".into()),
        });
        let bytes = encode_answer(&remote, RunWire::V7);
        assert_eq!(decode_answer(&bytes, RunWire::V7).unwrap(), remote);
        assert!(
            decode_answer(&bytes, RunWire::V6).is_err(),
            "not a run_v6 field"
        );
        let older = decode_answer(&encode_answer(&remote, RunWire::V6), RunWire::V6).unwrap();
        assert_eq!(older.remote, None, "an older host is told nothing of it");
        assert_eq!(
            decode_answer(&encode_answer(&answer(), RunWire::V7), RunWire::V7).unwrap(),
            answer(),
            "a local run names none"
        );
        let mut malformed = remote.clone();
        malformed.remote = Some(RemoteRun {
            action: "not a digest".into(),
            worker: None,
        });
        let error =
            decode_answer(&encode_answer(&malformed, RunWire::V7), RunWire::V7).unwrap_err();
        assert!(error.to_string().contains("remote"), "{error}");
        match Request::decode(
            method::RUN_V7,
            &encode_run(3, &request(), RunWire::V7).unwrap(),
        ) {
            Ok(Some(Request::Run { wire, .. })) => assert_eq!(wire, RunWire::V7),
            other => panic!("{other:?}"),
        }
    }
}
