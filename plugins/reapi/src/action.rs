//! A run as a REAPI Action, and back: the one module that says how a [`RunRequest`] travels to
//! a worker, used by the Executor to encode it and by the worker to decode and check it.
//!
//! The Action's input root holds the run's three snapshots as trees ([`crate::tree`]), an
//! empty scratch directory and the request itself without its files:
//!
//! ```text
//! program/   the program snapshot      (/sf/program inside the run)
//! input/     the input snapshot        (/sf/input)
//! harness/   the harness snapshot      (/sf/harness; empty when the run has none)
//! scratch/   empty                     (/sf/scratch: where the run may write)
//! sf-run     the request without its files, as the plugin ABI's run_v7 message (with the
//!            run's label, which the worker's log lines name)
//! ```
//!
//! The Command states what the worker's sandbox runs: `arguments` the argv (a command's, or
//! the runtime's executable, the entry and its arguments), `environment_variables` a
//! command's whole environment (an entry run's is the worker profile's own, which the profile
//! digest covers, so none is listed), `working_directory` the run's working directory within
//! the root (`program` for an entry run), and `output_paths` the command's results file,
//! relative to the working directory. The Action requires the worker's runtime and confinement
//! profile through its platform (`OSFamily=linux`, `sf-profile`, `sf-runtime`), carries the
//! run's timeout, `do_not_cache` (a result sf did not see run is never evidence, and REAPI
//! forbids merging such an Action with another in flight) and a fresh salt, so that no other
//! run's Action, cached or in flight, ever has its digest.
//!
//! A worker checks everything it is given against what it would have made of the same request
//! ([`check_action`], [`root_entries`], [`check_command`]): a root holding anything else, a Command other than the request's, a
//! platform naming another runtime or profile, or an Action that may be cached is refused.
//!
//! A program given by reference ([`sf_contracts::ProgramTree`]) travels as its base: `program/`
//! is the base's tree, read and checked by [`crate::base::read`], and `sf-run` carries the
//! reference itself with its layer and deletions, which the worker lays over the base as a
//! local sandbox does (the worker's own directory standing for the host's).

use prost::Message as _;
use sf_contracts::canonical::Digest as SfDigest;
use sf_contracts::command::SCRATCH_DIR;
use sf_contracts::snapshot::SnapshotFile;
use sf_contracts::{EntryPlace, RunRequest, RuntimeDescription};
use sf_plugin_abi::executor_protocol::{self as wire, RunWire};

use crate::digest;
use crate::proto::execution::{
    Action, Command, Digest, Directory, DirectoryNode, FileNode, Platform, command, platform,
};
use crate::proto::protobuf::Duration;
use crate::tree::{self, Blobs};

/// The directory of the input root holding the program.
pub const PROGRAM: &str = "program";
/// The directory holding the input.
pub const INPUT: &str = "input";
/// The directory holding the harness.
pub const HARNESS: &str = "harness";
/// The empty directory standing for the run's scratch space.
pub const SCRATCH: &str = "scratch";
/// The file holding the request without its files.
pub const RUN_FILE: &str = "sf-run";

/// The platform property naming the worker's runtime digest.
pub const RUNTIME_PROPERTY: &str = "sf-runtime";
/// The platform property naming the worker's confinement profile digest.
pub const PROFILE_PROPERTY: &str = "sf-profile";
/// The platform property every REAPI scheduler knows, and its value for sf's workers.
pub const OS_FAMILY: (&str, &str) = ("OSFamily", "linux");

/// The bytes of an Action's salt: the run's nonce, fresh for every run, so that no two runs
/// share an Action digest (or a start marker, [`crate::start_marker`]).
pub const SALT_BYTES: usize = 16;

/// The most bytes the request without its snapshots may hold: its argv and variables (64 KiB
/// each at most), and for a program by reference its layer (a snapshot's bytes at most) and
/// the base's directories on the layer's paths.
pub const MAX_RUN_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// What a run is sent to: the runtime and confinement profile its worker must have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The worker's runtime.
    pub runtime: RuntimeDescription,
    /// The digest of the worker's confinement profile.
    pub profile: SfDigest,
}

/// A run encoded as an Action.
#[derive(Clone, Debug)]
pub struct Encoded {
    /// The Action.
    pub action: Action,
    /// Its digest: what Execute names.
    pub digest: Digest,
    /// Every blob the Action needs in the CAS, the Action's own encoding included.
    pub blobs: Blobs,
}

/// The request `request` without its snapshots: the `sf-run` message. A program by
/// reference keeps its reference (base digest, directories, layer and deletions).
fn run_message(request: &RunRequest) -> Result<Vec<u8>, String> {
    let bare = RunRequest {
        label: request.label.clone(),
        command: request.command.clone(),
        program: Vec::new(),
        entry: request.entry.clone(),
        args: request.args.clone(),
        input: Vec::new(),
        harness: Vec::new(),
        bounds: request.bounds,
        program_tree: request.program_tree.clone(),
    };
    let message = wire::encode_run(0, &bare, RunWire::V7)
        .ok_or_else(|| "the request does not fit the run_v7 message".to_owned())?;
    if message.len() as u64 > MAX_RUN_FILE_BYTES {
        return Err(format!(
            "the request without its snapshots is larger than {MAX_RUN_FILE_BYTES} bytes"
        ));
    }
    Ok(message)
}

/// Encodes `request` (checked by the caller) for a worker of `target`, with `salt` (fresh for
/// every run); `program` is the program's files: the request's own, or for a program by
/// reference its base as [`crate::base::read`] found it. `Err` names what of the request
/// REAPI cannot carry.
pub fn encode(
    request: &RunRequest,
    program: &[SnapshotFile],
    target: &Target,
    salt: Vec<u8>,
) -> Result<Encoded, String> {
    if request
        .command
        .as_ref()
        .is_some_and(|command| command.environment.is_some())
    {
        return Err(
            "a dependency environment is a directory of this host; it cannot be sent to a \
             worker"
                .to_owned(),
        );
    }
    let mut blobs = Blobs::default();
    let mut directories = Vec::new();
    for (name, files) in [
        (HARNESS, request.harness.as_slice()),
        (INPUT, request.input.as_slice()),
        (PROGRAM, program),
        (SCRATCH, &[]),
    ] {
        directories.push(DirectoryNode {
            name: name.to_owned(),
            digest: Some(tree::add_snapshot(files, &mut blobs)?),
        });
    }
    let run = blobs.add(run_message(request)?);
    let root = blobs.add_message(&Directory {
        files: vec![FileNode {
            name: RUN_FILE.to_owned(),
            digest: Some(run),
            is_executable: false,
            node_properties: None,
        }],
        directories,
        symlinks: Vec::new(),
        node_properties: None,
    });
    let executable = executable_text(&target.runtime)?;
    let command = blobs.add_message(&command_for(request, &executable));
    let action = Action {
        command_digest: Some(command),
        input_root_digest: Some(root),
        timeout: Some(timeout(request)),
        do_not_cache: true,
        salt,
        platform: Some(platform(target)),
    };
    let digest = blobs.add_message(&action);
    Ok(Encoded {
        action,
        digest,
        blobs,
    })
}

fn executable_text(runtime: &RuntimeDescription) -> Result<String, String> {
    runtime
        .executable
        .to_str()
        .map(str::to_owned)
        .ok_or_else(|| "the worker's runtime executable is not UTF-8".to_owned())
}

fn timeout(request: &RunRequest) -> Duration {
    let timeout = request.bounds.timeout;
    Duration {
        seconds: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(timeout.subsec_nanos()).unwrap_or(0),
    }
}

/// The platform a worker of `target` serves.
pub fn platform(target: &Target) -> Platform {
    let mut properties = vec![
        (OS_FAMILY.0, OS_FAMILY.1.to_owned()),
        (PROFILE_PROPERTY, target.profile.to_string()),
        (RUNTIME_PROPERTY, target.runtime.digest.to_string()),
    ];
    properties.sort();
    Platform {
        properties: properties
            .into_iter()
            .map(|(name, value)| platform::Property {
                name: name.to_owned(),
                value,
            })
            .collect(),
    }
}

/// The Command of `request` under a runtime whose executable is `executable`.
pub fn command_for(request: &RunRequest, executable: &str) -> Command {
    let (arguments, environment, cwd) = match &request.command {
        Some(command) => (
            command.argv.clone(),
            command
                .full_env()
                .into_iter()
                .map(|(name, value)| command::EnvironmentVariable { name, value })
                .collect(),
            command.cwd.clone(),
        ),
        None => {
            let mut argv = vec![executable.to_owned(), request.entry.inside()];
            argv.extend(request.args.iter().cloned());
            (argv, Vec::new(), EntryPlace::Program.dir().to_owned())
        }
    };
    let working_directory = within_root(&cwd);
    let output_paths = request
        .command
        .as_ref()
        .and_then(|command| command.results.as_ref())
        .map(|results| {
            vec![relative_to(
                &working_directory,
                &format!("{SCRATCH}/{}", results.path),
            )]
        })
        .unwrap_or_default();
    #[allow(deprecated)]
    Command {
        arguments,
        environment_variables: environment,
        output_files: Vec::new(),
        output_directories: Vec::new(),
        output_paths,
        platform: None,
        working_directory,
        output_node_properties: Vec::new(),
        output_directory_format: 0,
    }
}

/// A directory inside a run (`/sf/program/src`) as the input root's path (`program/src`).
fn within_root(cwd: &str) -> String {
    let below_sf = cwd.strip_prefix("/sf/").unwrap_or(cwd);
    if cwd == SCRATCH_DIR {
        return SCRATCH.to_owned();
    }
    below_sf.to_owned()
}

/// `path` (relative to the root) relative to `directory` (relative to the root).
fn relative_to(directory: &str, path: &str) -> String {
    let up = directory.split('/').filter(|s| !s.is_empty()).count();
    let mut relative = "../".repeat(up);
    relative.push_str(path);
    relative
}

/// The parts of an Action a worker fetches first: the Command and the root directory.
pub struct Parts {
    /// The Command's digest.
    pub command: Digest,
    /// The input root's digest.
    pub root: Digest,
}

/// Checks the Action a worker of `target` was leased, before it fetches anything else.
pub fn check_action(action: &Action, target: &Target) -> Result<Parts, String> {
    if !action.do_not_cache {
        return Err("the Action may be cached; sf's runs never are".to_owned());
    }
    if action.salt.len() != SALT_BYTES {
        return Err(format!(
            "the Action's salt holds {} bytes, not the {SALT_BYTES} of a run's nonce",
            action.salt.len()
        ));
    }
    if action.platform.as_ref() != Some(&platform(target)) {
        return Err(format!(
            "the Action requires another platform than this worker's (runtime {}, profile {}): {:?}",
            target.runtime.digest, target.profile, action.platform
        ));
    }
    let command = action
        .command_digest
        .clone()
        .filter(digest::is_valid)
        .ok_or("the Action names no Command")?;
    let root = action
        .input_root_digest
        .clone()
        .filter(digest::is_valid)
        .ok_or("the Action names no input root")?;
    Ok(Parts { command, root })
}

/// The digests of the root's entries: the run file and the three snapshot trees. `Err` when
/// the root holds anything but what [`encode`] puts there, or its scratch is not empty.
pub fn root_entries(root: &Directory) -> Result<(Digest, [Digest; 3]), String> {
    let refuse = || {
        format!(
            "the input root holds other than {PROGRAM}/, {INPUT}/, {HARNESS}/, {SCRATCH}/ and \
             {RUN_FILE}"
        )
    };
    let [run] = root.files.as_slice() else {
        return Err(refuse());
    };
    if run.name != RUN_FILE || run.is_executable || !root.symlinks.is_empty() {
        return Err(refuse());
    }
    let run = run.digest.clone().ok_or_else(refuse)?;
    if digest::size(&run) > MAX_RUN_FILE_BYTES {
        return Err(format!(
            "{RUN_FILE} is larger than {MAX_RUN_FILE_BYTES} bytes"
        ));
    }
    let named = |name: &str| {
        root.directories
            .iter()
            .find(|node| node.name == name)
            .and_then(|node| node.digest.clone())
            .ok_or_else(refuse)
    };
    if root.directories.len() != 4 {
        return Err(refuse());
    }
    let scratch_digest = named(SCRATCH)?;
    if scratch_digest != digest::of(&Directory::default().encode_to_vec()) {
        return Err(format!("{SCRATCH}/ is not empty"));
    }
    Ok((run, [named(PROGRAM)?, named(INPUT)?, named(HARNESS)?]))
}

/// The request of the `sf-run` message `bytes`, without its files yet.
pub fn decode_run(bytes: &[u8]) -> Result<RunRequest, String> {
    match wire::Request::decode(wire::method::RUN_V7, bytes) {
        Ok(Some(wire::Request::Run { request, .. })) => Ok(request),
        Ok(_) => Err(format!("{RUN_FILE} is not a run")),
        Err(error) => Err(format!("{RUN_FILE}: {error}")),
    }
}

/// Checks that `command` and `action` are exactly what [`encode`] makes of `request` for a
/// worker of `target` (the request's snapshots do not enter the Command).
pub fn check_command(
    request: &RunRequest,
    command: &Command,
    action: &Action,
    target: &Target,
) -> Result<(), String> {
    let executable = executable_text(&target.runtime)?;
    if *command != command_for(request, &executable) {
        return Err("the Command is not the one of the request in the input root".to_owned());
    }
    if action.timeout != Some(timeout(request)) {
        return Err("the Action's timeout is not the request's".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;
    use std::time::Duration;

    use sf_contracts::command::{ResultsRequest, RunCommand};
    use sf_contracts::snapshot::SnapshotFile;
    use sf_contracts::{RunBounds, RunEntry};

    use super::*;

    fn target() -> Target {
        Target {
            runtime: RuntimeDescription {
                executable: PathBuf::from("/bin/sh"),
                readable: Vec::new(),
                digest: SfDigest::of(b"runtime"),
            },
            profile: SfDigest::of(b"profile"),
        }
    }

    fn request() -> RunRequest {
        RunRequest {
            label: None,
            command: None,
            program: vec![SnapshotFile::regular("main.sh", b"echo hi".to_vec())],
            entry: RunEntry::program("main.sh"),
            args: vec!["a".into()],
            input: vec![SnapshotFile::regular("data/in.txt", b"in".to_vec())],
            harness: Vec::new(),
            bounds: RunBounds::new(Duration::from_millis(1500), 1024),
            program_tree: None,
        }
    }

    fn command_request() -> RunRequest {
        let mut request = request();
        request.command = Some(RunCommand {
            argv: vec!["sh".into(), "-c".into(), "true".into()],
            cwd: "/sf/program".into(),
            env: BTreeMap::from([("X".into(), "1".into())]),
            environment: None,
            results: Some(ResultsRequest {
                path: "out/results.xml".into(),
                max_bytes: 100,
            }),
            resources: Default::default(),
            scratch_executable: true,
            network: None,
            output: None,
        });
        request.args.clear();
        request
    }

    /// What a worker reads back from `encoded`'s blobs.
    fn receive(encoded: &Encoded, target: &Target) -> Result<RunRequest, String> {
        let parts = check_action(&encoded.action, target)?;
        let root = Directory::decode(encoded.blobs.get(&parts.root).unwrap()).unwrap();
        let (run, trees) = root_entries(&root)?;
        let mut request = decode_run(encoded.blobs.get(&run).unwrap())?;
        let mut snapshots = Vec::new();
        for tree_root in trees {
            let mut walk = tree::Walk::new(tree_root.clone());
            while !walk.missing().is_empty() {
                for digest in walk.missing().to_vec() {
                    walk.add(&digest, encoded.blobs.get(&digest).unwrap())?;
                }
                walk.next_round();
            }
            snapshots.push(tree::snapshot(&walk.entries(&tree_root)?, &encoded.blobs)?);
        }
        let [program, input, harness]: [Vec<SnapshotFile>; 3] = snapshots.try_into().unwrap();
        (request.program, request.input, request.harness) = (program, input, harness);
        let command = Command::decode(encoded.blobs.get(&parts.command).unwrap()).unwrap();
        check_command(&request, &command, &encoded.action, target)?;
        Ok(request)
    }

    #[test]
    fn a_request_travels_whole() {
        for request in [request(), command_request()] {
            let encoded =
                encode(&request, &request.program, &target(), vec![7; SALT_BYTES]).unwrap();
            assert_eq!(receive(&encoded, &target()).unwrap(), request);
            assert!(encoded.action.do_not_cache);
            assert_eq!(encoded.digest, digest::of(&encoded.action.encode_to_vec()));
        }
    }

    /// A program by reference travels as its base, whose REAPI digest is its `sf-tree/1`
    /// digest, with the reference (layer and deletions) in the run message.
    #[test]
    fn a_program_by_reference_travels_as_its_base() {
        let base = vec![
            SnapshotFile::regular("main.sh", b"echo base".to_vec()),
            SnapshotFile::executable("bin/tool", b"#!/bin/sh".to_vec()),
            SnapshotFile::symlink("bin/link", b"tool".to_vec()),
        ];
        let built = sf_contracts::tree_digest::build(
            base.iter().map(|f| (f.path.as_str(), crate::base::node(f))),
        )
        .unwrap();
        let mut request = request();
        request.program = Vec::new();
        request.program_tree = Some(sf_contracts::ProgramTree {
            base: built.root.hash.clone(),
            dir: PathBuf::from("/var/lib/sf/trees/some-base"),
            dev: 1,
            ino: 2,
            directories: built.directories,
            layer: vec![SnapshotFile::regular("main.sh", b"echo layer".to_vec())],
            deleted: vec!["bin/link".into()],
        });
        let encoded = encode(&request, &base, &target(), vec![3; SALT_BYTES]).unwrap();
        let parts = check_action(&encoded.action, &target()).unwrap();
        let root = Directory::decode(encoded.blobs.get(&parts.root).unwrap()).unwrap();
        let (run, [program, _, _]) = root_entries(&root).unwrap();
        assert_eq!(
            program.hash,
            built.root.hash.hex(),
            "one Merkle tree, two names"
        );
        let received = receive(&encoded, &target()).unwrap();
        assert_eq!(received.program, base, "the worker receives the base");
        // Totals (counts, not part of any digest) do not travel; everything named does.
        let (sent, got) = (
            request.program_tree.unwrap(),
            received.program_tree.unwrap(),
        );
        assert_eq!(
            (
                &got.base,
                &got.dir,
                got.dev,
                got.ino,
                &got.layer,
                &got.deleted
            ),
            (
                &sent.base,
                &sent.dir,
                sent.dev,
                sent.ino,
                &sent.layer,
                &sent.deleted
            )
        );
        let digests = |tree: &sf_contracts::ProgramTree| {
            tree.directories
                .iter()
                .map(|(path, dir)| (path.clone(), dir.digest()))
                .collect::<Vec<_>>()
        };
        assert_eq!(digests(&got), digests(&sent));
        let bare = decode_run(encoded.blobs.get(&run).unwrap()).unwrap();
        assert!(bare.program.is_empty() && bare.program_tree.is_some());
    }

    #[test]
    fn the_command_says_what_runs() {
        let command = command_for(&request(), "/bin/sh");
        assert_eq!(command.arguments, ["/bin/sh", "/sf/program/main.sh", "a"]);
        assert_eq!(command.working_directory, "program");
        let command = command_for(&command_request(), "/bin/sh");
        assert_eq!(command.arguments, ["sh", "-c", "true"]);
        assert_eq!(command.output_paths, ["../scratch/out/results.xml"]);
        let names: Vec<&str> = command
            .environment_variables
            .iter()
            .map(|variable| variable.name.as_str())
            .collect();
        assert_eq!(names, ["HOME", "LANG", "PATH", "TMPDIR", "TZ", "X"]);
    }

    #[test]
    fn salts_make_every_run_another_action() {
        let salted = |salt: u8| {
            encode(
                &request(),
                &request().program,
                &target(),
                vec![salt; SALT_BYTES],
            )
            .unwrap()
        };
        let (first, second) = (salted(1), salted(2));
        assert_ne!(first.digest, second.digest);
        assert_eq!(
            first.action.input_root_digest, second.action.input_root_digest,
            "the same request has the same input root"
        );
    }

    #[test]
    fn a_worker_refuses_what_is_not_its_own() {
        let encoded = encode(
            &request(),
            &request().program,
            &target(),
            vec![1; SALT_BYTES],
        )
        .unwrap();
        let mut other = target();
        other.profile = SfDigest::of(b"another profile");
        assert!(
            receive(&encoded, &other)
                .unwrap_err()
                .contains("another platform")
        );
        let mut cached = encoded.clone();
        cached.action.do_not_cache = false;
        assert!(receive(&cached, &target()).is_err());
        let mut unsalted = encoded.clone();
        unsalted.action.salt.clear();
        assert!(receive(&unsalted, &target()).unwrap_err().contains("salt"));
        let mut lying = encoded.clone();
        let mut command = command_for(&request(), "/bin/sh");
        command.arguments.push("extra".into());
        lying.action.command_digest = Some(lying.blobs.add_message(&command));
        assert!(receive(&lying, &target()).unwrap_err().contains("Command"));
        let mut late = encoded;
        late.action.timeout = Some(Duration::from_secs(60).into_proto());
        assert!(receive(&late, &target()).unwrap_err().contains("timeout"));
    }

    trait IntoProto {
        fn into_proto(self) -> crate::proto::protobuf::Duration;
    }

    impl IntoProto for Duration {
        fn into_proto(self) -> crate::proto::protobuf::Duration {
            crate::proto::protobuf::Duration {
                seconds: self.as_secs() as i64,
                nanos: 0,
            }
        }
    }
}
