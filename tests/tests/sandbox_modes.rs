//! Snapshot modes inside the sandbox: an executable entry is a file with its execute bits, a
//! symbolic link is a link (its target read back with `readlink`) that resolves inside its
//! snapshot, and the snapshot mounts keep every confinement rule (read-only, noexec). A
//! snapshot whose link leaves it, or with an entry beneath a link, is refused before anything
//! starts, naming the path and the rule.

mod sandbox_support;

use std::time::Duration;

use sandbox_support::*;
use sf_host::contracts::{
    CancelToken, Executor as _, ExecutorError, RunBounds, RunRequest, RunStatus,
};
use sf_host::snapshot::{SnapshotFile, snapshot_digest};

/// The probe request, with executables and links in the program, the input and the harness.
fn moded_request(probes: &[&str]) -> RunRequest {
    let mut program = probe_program();
    program.extend([
        SnapshotFile::executable("bin/tool", b"#!/bin/sh\necho tool\n".to_vec()),
        SnapshotFile::symlink("lib/entry-link", b"../entry.txt".to_vec()),
        SnapshotFile::symlink("tools", b"bin".to_vec()),
        SnapshotFile::symlink("lib/chain", b"../tools/tool".to_vec()),
    ]);
    let mut input = probe_input();
    input.push(SnapshotFile::symlink("data-link", b"data.txt".to_vec()));
    let mut harness = probe_harness();
    harness.push(SnapshotFile::executable(
        "tests/run",
        b"#!/bin/sh\n".to_vec(),
    ));
    RunRequest {
        label: None,
        program_tree: None,
        command: None,
        program,
        entry: "entry.txt".into(),
        args: probes.iter().map(|probe| probe.to_string()).collect(),
        input,
        harness,
        bounds: RunBounds::new(Duration::from_secs(20), 1 << 20),
    }
}

#[test]
fn executables_keep_their_bits_and_links_are_links_inside_the_snapshot() {
    // Each probe and the start of its verdict (`ok <kind> <mode>` for lstat).
    let expected = [
        ("lstat=/sf/program/entry.txt", "ok file 444"),
        ("lstat=/sf/program/bin/tool", "ok file 555"),
        ("lstat=/sf/program/lib/entry-link", "ok symlink 777"),
        ("readlink=/sf/program/lib/entry-link", "ok ../entry.txt"),
        (
            "read=/sf/program/lib/entry-link",
            "ok 16 bytes: sf probe program",
        ),
        ("lstat=/sf/program/tools", "ok symlink 777"),
        ("list=/sf/program/tools", "ok tool"),
        ("readlink=/sf/program/lib/chain", "ok ../tools/tool"),
        ("show=/sf/program/lib/chain", "ok #!/bin/sh|echo tool|"),
        ("lstat=/sf/input/data-link", "ok symlink 777"),
        ("readlink=/sf/input/data-link", "ok data.txt"),
        ("read=/sf/input/data-link", "ok 11 bytes: probe input"),
        ("lstat=/sf/harness/tests/run", "ok file 555"),
        ("lstat=/sf/harness/tests/check.txt", "ok file 444"),
        // The snapshots stay read-only, links included.
        ("create=/sf/program/bin/new", "denied "),
        (
            "symlink=/sf/program/entry.txt:/sf/program/lib/new-link",
            "denied ",
        ),
        // Whether a snapshot's executable may run is not decided by its mode: the mounts
        // stay noexec. Last, since a successful exec would replace the probe.
        ("exec=/sf/program/bin/tool:tool", "denied EACCES"),
    ];
    let probes: Vec<&str> = expected.iter().map(|(probe, _)| *probe).collect();
    let request = moded_request(&probes);
    let answer = probe_executor()
        .run(&request, &CancelToken::new())
        .unwrap_or_else(|error| panic!("the run starts: {error}"));
    assert_eq!(answer.status, RunStatus::Exited, "{answer:?}");
    assert_eq!(
        answer.identities.program,
        snapshot_digest(&request.program).unwrap()
    );
    for (probe, start) in expected {
        let verdict = verdict(&answer, probe);
        assert!(verdict.starts_with(start), "{probe}: {verdict}");
    }
}

/// The regular-file run of the same bytes, as the control: the modes are what changed.
#[test]
fn the_same_bytes_as_regular_files_are_regular_files() {
    let mut request = moded_request(&["lstat=/sf/program/bin/tool", "lstat=/sf/program/tools"]);
    for file in request
        .program
        .iter_mut()
        .chain(&mut request.input)
        .chain(&mut request.harness)
    {
        *file = SnapshotFile::regular(file.path.clone(), file.content.clone());
    }
    let answer = probe_executor()
        .run(&request, &CancelToken::new())
        .unwrap_or_else(|error| panic!("the run starts: {error}"));
    assert_eq!(
        allowed(&answer, "lstat=/sf/program/bin/tool"),
        "ok file 444"
    );
    assert_eq!(allowed(&answer, "lstat=/sf/program/tools"), "ok file 444");
}

/// One refused snapshot: the entries added to one snapshot of the request, and the path and
/// rule the refusal must name.
struct Spoilt {
    what: &'static str,
    snapshot: fn(&mut RunRequest) -> &mut Vec<SnapshotFile>,
    entries: Vec<SnapshotFile>,
    path: &'static str,
    rule: &'static str,
}

#[test]
fn escaping_links_and_entries_beneath_links_are_refused_before_anything_starts() {
    let link = |path: &str, target: &str| SnapshotFile::symlink(path, target.as_bytes().to_vec());
    let cases = [
        Spoilt {
            what: "a link out of the program",
            snapshot: |request| &mut request.program,
            entries: vec![link("lib/up", "../../etc/passwd")],
            path: "\"lib/up\"",
            rule: "link-escapes",
        },
        Spoilt {
            what: "a link out of the input, and one through it",
            snapshot: |request| &mut request.input,
            entries: vec![link("parent", ".."), link("sneaky", "parent/x")],
            path: "\"parent\"",
            rule: "link-escapes",
        },
        Spoilt {
            what: "a file beneath a link",
            snapshot: |request| &mut request.harness,
            entries: vec![
                link("tests/dir", ".."),
                SnapshotFile::regular("tests/dir/planted", b"x".to_vec()),
            ],
            path: "\"tests/dir/planted\"",
            rule: "file-directory-clash",
        },
        Spoilt {
            what: "an absolute link",
            snapshot: |request| &mut request.program,
            entries: vec![link("root", "/")],
            path: "\"root\"",
            rule: "absolute-link",
        },
    ];
    let executor = probe_executor();
    for case in cases {
        let mut request = moded_request(&["lstat=/sf/program/entry.txt"]);
        (case.snapshot)(&mut request).extend(case.entries);
        let what = case.what;
        match executor.run(&request, &CancelToken::new()) {
            Err(ExecutorError::InvalidInput { input, rule }) => {
                assert!(input.contains(case.path), "{what}: {input}");
                assert!(input.contains(case.rule), "{what}: {input}");
                assert!(rule.contains("valid snapshot"), "{what}: {rule}");
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    // Control: the same executor runs the unspoilt request, as its first run: a refused
    // request never got as far as a launcher (the first run to do so starts its launcher
    // without the fork server, every later one starts the fork server).
    let answer = executor
        .run(
            &moded_request(&["lstat=/sf/program/entry.txt"]),
            &CancelToken::new(),
        )
        .unwrap();
    assert_eq!(
        allowed(&answer, "lstat=/sf/program/entry.txt"),
        "ok file 444"
    );
    assert_eq!(
        executor.fork_server_pid(),
        None,
        "the control was the first run"
    );
}
