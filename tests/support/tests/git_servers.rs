//! The loopback Git servers of `sf_test_support::git_servers` against the real Git client
//! (every installed client binary): pushes with leases and atomicity through file://,
//! git:// and HTTP, each fault a remote can be given, each hostile server, a push from a
//! shallow repository, and that every server is gone once its guard is.

use std::io::Write as _;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use sf_test_support::git_servers::{
    BareRemote, Bounded, GitDaemon, HostileServer, Hostility, HttpGit, Protocol, REMOTE_NAME,
    client_gits, fixture_bundle, git_command, git_in, run_bounded, server_git,
};

/// The deadline of a run expected to finish (far above what it takes).
const FINISHES: Duration = Duration::from_secs(120);

/// How long a run expected to hang is given before it is killed.
const HANGS: Duration = Duration::from_secs(3);

/// `main` of the typing_extensions fixture.
const FIXTURE_MAIN: &str = "43174610ec0c407ce05ad750077c4e62b9192b2b";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    File,
    Daemon,
    Http,
}

const TRANSPORTS: [Transport; 3] = [Transport::File, Transport::Daemon, Transport::Http];

/// A remote and the server (if any) in front of it; the server is dropped first.
struct Served {
    _daemon: Option<GitDaemon>,
    _http: Option<HttpGit>,
    url: String,
    remote: BareRemote,
}

fn serve(remote: BareRemote, transport: Transport) -> Served {
    let (daemon, http, url) = match transport {
        Transport::File => (None, None, remote.file_url()),
        Transport::Daemon => {
            let daemon = GitDaemon::start(remote.root());
            let url = daemon.url(REMOTE_NAME);
            (Some(daemon), None, url)
        }
        Transport::Http => {
            let http = HttpGit::start(remote.root());
            let url = http.url(REMOTE_NAME);
            (None, Some(http), url)
        }
    };
    Served {
        _daemon: daemon,
        _http: http,
        url,
        remote,
    }
}

fn fixture_remote() -> BareRemote {
    BareRemote::from_bundle(&fixture_bundle("typing_extensions.bundle"))
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// A working clone of `remote` (through file://) at `<scratch>/work`.
fn work_clone(scratch: &Path, remote: &BareRemote) -> PathBuf {
    let work = scratch.join("work");
    git_in(
        scratch,
        &["clone", "-q", &remote.file_url(), path_str(&work)],
    );
    work
}

/// A new empty commit on the work tree's HEAD; its id.
fn commit(work: &Path, message: &str) -> String {
    git_in(work, &["commit", "-q", "--allow-empty", "-m", message]);
    git_in(work, &["rev-parse", "HEAD"])
}

/// `git <args>` by the client `git` in `dir`, bounded by `deadline`.
fn run(git: &Path, dir: &Path, args: &[&str], deadline: Duration) -> Bounded {
    let mut command = git_command(git);
    command.current_dir(dir).args(args);
    run_bounded(command, deadline)
}

/// The porcelain status lines of a push: (flag, refspec, summary).
fn statuses(out: &Bounded) -> Vec<(String, String, String)> {
    out.stdout_text()
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, '\t');
            Some((
                fields.next()?.to_owned(),
                fields.next()?.to_owned(),
                fields.next()?.to_owned(),
            ))
        })
        .collect()
}

fn describe(label: &str, out: &Bounded) -> String {
    format!(
        "{label}: exit {:?}, killed {}, after {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.killed,
        out.elapsed,
        out.stdout_text(),
        out.stderr_text()
    )
}

fn short(oid: &str) -> &str {
    &oid[..7]
}

#[test]
fn every_transport_lists_clones_and_pushes() {
    for git in client_gits() {
        for transport in TRANSPORTS {
            let served = serve(fixture_remote(), transport);
            let label = format!("{} over {transport:?}", git.display());
            let scratch = tempfile::tempdir().expect("scratch");

            let listed = run(&git, scratch.path(), &["ls-remote", &served.url], FINISHES);
            assert_eq!(listed.code(), Some(0), "{}", describe(&label, &listed));
            assert!(
                listed
                    .stdout_text()
                    .lines()
                    .any(|line| line == format!("{FIXTURE_MAIN}\trefs/heads/main")),
                "{}",
                describe(&label, &listed)
            );

            let work = scratch.path().join("clone");
            let cloned = run(
                &git,
                scratch.path(),
                &["clone", "-q", &served.url, path_str(&work)],
                FINISHES,
            );
            assert_eq!(cloned.code(), Some(0), "{}", describe(&label, &cloned));
            assert_eq!(git_in(&work, &["rev-parse", "HEAD"]), FIXTURE_MAIN);

            let new = commit(&work, "pushed");
            let pushed = run(
                &git,
                &work,
                &["push", "--porcelain", &served.url, "HEAD:refs/heads/main"],
                FINISHES,
            );
            assert_eq!(pushed.code(), Some(0), "{}", describe(&label, &pushed));
            assert_eq!(
                statuses(&pushed),
                [(
                    " ".to_owned(),
                    "HEAD:refs/heads/main".to_owned(),
                    format!("{}..{}", short(FIXTURE_MAIN), short(&new))
                )],
                "{}",
                describe(&label, &pushed)
            );
            assert_eq!(served.remote.read_ref("refs/heads/main"), Some(new));
        }
    }
}

/// The push delivery makes: `<new>` to `main` under a lease on `main`, and to the
/// create-only marker `marker` (empty lease), atomically.
fn lease_push(
    git: &Path,
    work: &Path,
    url: &str,
    expect: &str,
    new: &str,
    marker: &str,
) -> Bounded {
    run(
        git,
        work,
        &[
            "push",
            "--porcelain",
            "--atomic",
            &format!("--force-with-lease=refs/heads/main:{expect}"),
            &format!("--force-with-lease={marker}:"),
            url,
            &format!("{new}:refs/heads/main"),
            &format!("{new}:{marker}"),
        ],
        FINISHES,
    )
}

#[test]
fn leases_and_atomic_pushes_work_through_every_transport() {
    for git in client_gits() {
        for transport in TRANSPORTS {
            let served = serve(fixture_remote(), transport);
            let remote = &served.remote;
            let label = format!("{} over {transport:?}", git.display());
            let scratch = tempfile::tempdir().expect("scratch");
            let work = work_clone(scratch.path(), remote);
            let first = commit(&work, "first");

            // Fresh lease, absent marker: both refs move.
            let out = lease_push(&git, &work, &served.url, FIXTURE_MAIN, &first, "refs/sf/x");
            assert_eq!(out.code(), Some(0), "{}", describe(&label, &out));
            assert_eq!(
                statuses(&out),
                [
                    (
                        " ".to_owned(),
                        format!("{first}:refs/heads/main"),
                        format!("{}..{}", short(FIXTURE_MAIN), short(&first))
                    ),
                    (
                        "*".to_owned(),
                        format!("{first}:refs/sf/x"),
                        "[new reference]".to_owned()
                    ),
                ],
                "{}",
                describe(&label, &out)
            );
            assert_eq!(remote.read_ref("refs/heads/main").as_deref(), Some(&*first));
            assert_eq!(remote.read_ref("refs/sf/x").as_deref(), Some(&*first));

            // Stale lease on main (someone moved it), absent marker: neither moves.
            let theirs = remote.git(&["commit-tree", "main^{tree}", "-p", "main", "-m", "theirs"]);
            remote.set_ref("refs/heads/main", &theirs);
            let second = commit(&work, "second");
            let out = lease_push(&git, &work, &served.url, &first, &second, "refs/sf/y");
            assert_eq!(out.code(), Some(1), "{}", describe(&label, &out));
            assert_eq!(
                statuses(&out),
                [
                    (
                        "!".to_owned(),
                        format!("{second}:refs/heads/main"),
                        "[rejected] (stale info)".to_owned()
                    ),
                    (
                        "!".to_owned(),
                        format!("{second}:refs/sf/y"),
                        "[rejected] (atomic push failed)".to_owned()
                    ),
                ],
                "{}",
                describe(&label, &out)
            );
            assert_eq!(remote.read_ref("refs/heads/main"), Some(theirs.clone()));
            assert_eq!(remote.read_ref("refs/sf/y"), None);

            // Fresh lease, marker already there: neither moves.
            let out = lease_push(&git, &work, &served.url, &theirs, &second, "refs/sf/x");
            assert_eq!(out.code(), Some(1), "{}", describe(&label, &out));
            let found = statuses(&out);
            assert!(
                found.contains(&(
                    "!".to_owned(),
                    format!("{second}:refs/sf/x"),
                    "[rejected] (stale info)".to_owned()
                )) && found.contains(&(
                    "!".to_owned(),
                    format!("{second}:refs/heads/main"),
                    "[rejected] (atomic push failed)".to_owned()
                )),
                "{}",
                describe(&label, &out)
            );
            assert_eq!(remote.read_ref("refs/heads/main"), Some(theirs));
            assert_eq!(remote.read_ref("refs/sf/x"), Some(first));
        }
    }
}

#[test]
fn count_pushes_counts_each_push_that_updates_once() {
    let git = &client_gits()[0];
    for transport in TRANSPORTS {
        let served = serve(fixture_remote(), transport);
        let remote = &served.remote;
        let label = format!("{transport:?}");
        remote.count_pushes();
        let scratch = tempfile::tempdir().expect("scratch");
        let work = work_clone(scratch.path(), remote);
        assert_eq!(remote.push_count(), 0);

        // One atomic push of two refs: one push.
        let first = commit(&work, "first");
        let out = lease_push(git, &work, &served.url, FIXTURE_MAIN, &first, "refs/sf/x");
        assert_eq!(out.code(), Some(0), "{}", describe(&label, &out));
        assert_eq!(remote.push_count(), 1, "{label}");

        // The same again: up to date, nothing updated, not counted.
        let out = run(
            git,
            &work,
            &[
                "push",
                "--porcelain",
                &served.url,
                &format!("{first}:refs/heads/main"),
            ],
            FINISHES,
        );
        assert_eq!(out.code(), Some(0), "{}", describe(&label, &out));
        assert_eq!(statuses(&out)[0].0, "=", "{}", describe(&label, &out));
        assert_eq!(remote.push_count(), 1, "{label}");

        // A stale lease: rejected by the client, not counted.
        let second = commit(&work, "second");
        let out = lease_push(git, &work, &served.url, FIXTURE_MAIN, &second, "refs/sf/y");
        assert_eq!(out.code(), Some(1), "{}", describe(&label, &out));
        assert_eq!(remote.push_count(), 1, "{label}");

        // A non-atomic push of two refs (a transaction each): still one push.
        let out = run(
            git,
            &work,
            &[
                "push",
                "--porcelain",
                &served.url,
                &format!("{second}:refs/heads/main"),
                &format!("{second}:refs/sf/z"),
            ],
            FINISHES,
        );
        assert_eq!(out.code(), Some(0), "{}", describe(&label, &out));
        assert_eq!(remote.push_count(), 2, "{label}");

        // A ref set by the test itself is no push.
        remote.set_ref("refs/sf/w", &first);
        assert_eq!(remote.push_count(), 2, "{label}");
    }
}

#[test]
fn refuse_pushes_is_a_remote_rejection() {
    for git in client_gits() {
        for transport in TRANSPORTS {
            let served = serve(fixture_remote(), transport);
            let remote = &served.remote;
            let label = format!("{} over {transport:?}", git.display());
            remote.count_pushes();
            remote.refuse_pushes("sf-test: pushes are closed");
            let scratch = tempfile::tempdir().expect("scratch");
            let work = work_clone(scratch.path(), remote);
            let new = commit(&work, "refused");
            let out = lease_push(&git, &work, &served.url, FIXTURE_MAIN, &new, "refs/sf/x");
            assert_eq!(out.code(), Some(1), "{}", describe(&label, &out));
            assert_eq!(
                statuses(&out),
                [
                    (
                        "!".to_owned(),
                        format!("{new}:refs/heads/main"),
                        "[remote rejected] (pre-receive hook declined)".to_owned()
                    ),
                    (
                        "!".to_owned(),
                        format!("{new}:refs/sf/x"),
                        "[remote rejected] (pre-receive hook declined)".to_owned()
                    ),
                ],
                "{}",
                describe(&label, &out)
            );
            assert!(
                out.stdout_text().ends_with("Done\n"),
                "{}",
                describe(&label, &out)
            );
            assert!(
                out.stderr_text()
                    .contains("remote: sf-test: pushes are closed"),
                "{}",
                describe(&label, &out)
            );
            assert_eq!(
                remote.read_ref("refs/heads/main").as_deref(),
                Some(FIXTURE_MAIN)
            );
            assert_eq!(remote.read_ref("refs/sf/x"), None);
            assert_eq!(remote.push_count(), 0, "{label}");
        }
    }
}

#[test]
fn accept_then_drop_moves_the_refs_and_reports_failure() {
    for git in client_gits() {
        for transport in TRANSPORTS {
            let served = serve(fixture_remote(), transport);
            let remote = &served.remote;
            let label = format!("{} over {transport:?}", git.display());
            remote.count_pushes();
            remote.accept_then_drop();
            let scratch = tempfile::tempdir().expect("scratch");
            let work = work_clone(scratch.path(), remote);
            let new = commit(&work, "dropped");
            let out = lease_push(&git, &work, &served.url, FIXTURE_MAIN, &new, "refs/sf/x");
            assert!(!out.killed, "{}", describe(&label, &out));
            let expected_code = if transport == Transport::Http { 1 } else { 128 };
            assert_eq!(
                out.code(),
                Some(expected_code),
                "{}",
                describe(&label, &out)
            );
            // No status at all: neither `ok` nor a rejection is reported.
            assert_eq!(statuses(&out), [], "{}", describe(&label, &out));
            let expected_stdout = if transport == Transport::Http {
                "Done\n"
            } else {
                ""
            };
            assert_eq!(
                out.stdout_text(),
                expected_stdout,
                "{}",
                describe(&label, &out)
            );
            let stderr = out.stderr_text();
            assert!(
                stderr.contains("send-pack: unexpected disconnect while reading sideband packet")
                    && stderr.contains("fatal: the remote end hung up unexpectedly"),
                "{}",
                describe(&label, &out)
            );
            if transport == Transport::Http {
                assert!(
                    stderr.contains(
                        "error: RPC failed; curl 18 transfer closed with outstanding read data remaining"
                    ),
                    "{}",
                    describe(&label, &out)
                );
            }
            // Yet the server committed both.
            assert_eq!(
                remote.read_ref("refs/heads/main").as_deref(),
                Some(&*new),
                "{label}"
            );
            assert_eq!(
                remote.read_ref("refs/sf/x").as_deref(),
                Some(&*new),
                "{label}"
            );
            assert_eq!(remote.push_count(), 1, "{label}");

            // Non-atomic: a transaction per ref, and the kill comes after the first.
            let second = commit(&work, "dropped too");
            let out = run(
                &git,
                &work,
                &[
                    "push",
                    "--porcelain",
                    &served.url,
                    &format!("{second}:refs/heads/main"),
                    &format!("{second}:refs/sf/z"),
                ],
                FINISHES,
            );
            assert_eq!(statuses(&out), [], "{}", describe(&label, &out));
            assert_eq!(remote.read_ref("refs/heads/main"), Some(second), "{label}");
            assert_eq!(remote.read_ref("refs/sf/z"), None, "{label}");
            assert_eq!(remote.push_count(), 2, "{label}");
        }
    }
}

/// Polls `condition` (a state of other processes, which nothing announces) every 10 ms
/// until it holds; fails after a minute.
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let started = std::time::Instant::now();
    while !condition() {
        assert!(started.elapsed() < Duration::from_secs(60), "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether some process runs `sleep <seconds>`.
fn sleeping(seconds: u64) -> bool {
    let wanted = format!("sleep\0{seconds}\0").into_bytes();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .any(|entry| std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| c == wanted))
}

#[test]
fn hang_pushes_hangs_until_the_client_is_killed_and_dies_with_its_guards() {
    // A duration of its own per case, to find that case's hook among the processes.
    let mut seconds = 7_301;
    for git in client_gits() {
        for transport in TRANSPORTS {
            seconds += 1;
            let served = serve(fixture_remote(), transport);
            let label = format!("{} over {transport:?}", git.display());
            served.remote.hang_pushes(Duration::from_secs(seconds));
            let scratch = tempfile::tempdir().expect("scratch");
            let work = work_clone(scratch.path(), &served.remote);
            let new = commit(&work, "hung");
            let mut command = git_command(&git);
            command.current_dir(&work).args([
                "push",
                "--porcelain",
                "--atomic",
                &format!("--force-with-lease=refs/heads/main:{FIXTURE_MAIN}"),
                &served.url,
                &format!("{new}:refs/heads/main"),
            ]);
            let out = run_bounded(command, HANGS);
            assert!(out.killed, "{}", describe(&label, &out));
            assert_eq!(out.stdout_text(), "", "{}", describe(&label, &out));
            assert_eq!(
                served.remote.read_ref("refs/heads/main").as_deref(),
                Some(FIXTURE_MAIN),
                "{label}"
            );
            if transport != Transport::File {
                // Killing the client left the server's hook sleeping.
                assert!(sleeping(seconds), "{label}: the hook is not sleeping");
            }
            drop(served);
            // SIGKILL is sent, not yet acted on, when the guards return.
            eventually(&format!("{label}: the hook is gone"), || !sleeping(seconds));
        }
    }
}

#[test]
fn a_remote_guard_kills_a_hook_it_left_hanging() {
    // A hang started by a client the test does not kill (a file:// push in a thread of its
    // own): only the remote's guard can end it.
    let seconds = 7_401;
    let remote = fixture_remote();
    remote.hang_pushes(Duration::from_secs(seconds));
    let scratch = tempfile::tempdir().expect("scratch");
    let work = work_clone(scratch.path(), &remote);
    let new = commit(&work, "hung");
    let git = client_gits()[0].clone();
    let url = remote.file_url();
    let pusher = std::thread::spawn(move || {
        let mut command = git_command(&git);
        command.current_dir(&work).args([
            "push",
            "--porcelain",
            &url,
            &format!("{new}:refs/heads/main"),
        ]);
        run_bounded(command, FINISHES)
    });
    // Readiness: the hook is asleep once its `sleep` runs.
    eventually("the hook sleeps", || sleeping(seconds));
    drop(remote);
    // The push ends by itself (its hook was killed, so the push is refused), long before
    // the deadline; its repository is gone by then, so only the failure is certain.
    let out = pusher.join().expect("the pusher does not panic");
    assert!(!out.killed, "{}", describe("push", &out));
    assert!(!out.status.success(), "{}", describe("push", &out));
    eventually("the hook is gone", || !sleeping(seconds));
}

/// Runs `ls-remote` and a push of a new ref by every client against `hostility` on both
/// protocols, and hands each outcome to `check`.
fn against_hostile(hostility: Hostility, check: impl Fn(&str, Protocol, &Bounded, &Bounded)) {
    let scratch = tempfile::tempdir().expect("scratch");
    let work = scratch.path().join("work");
    git_in(
        scratch.path(),
        &["init", "-q", "--initial-branch=main", path_str(&work)],
    );
    commit(&work, "to push");
    for git in client_gits() {
        for protocol in [Protocol::Git, Protocol::Http] {
            let server = HostileServer::start(hostility, protocol);
            let url = server.url("x");
            let deadline = match hostility {
                Hostility::Malformed | Hostility::OversizedAdvertisement { .. } => FINISHES,
                _ => HANGS,
            };
            let listed = run(&git, &work, &["ls-remote", &url], deadline);
            let pushed = run(
                &git,
                &work,
                &[
                    "push",
                    "--porcelain",
                    "--atomic",
                    &url,
                    "HEAD:refs/heads/new",
                ],
                match hostility {
                    Hostility::Malformed => FINISHES,
                    _ => HANGS,
                },
            );
            assert!(
                server.connections() >= 2,
                "the client never reached the server"
            );
            let label = format!("{} over {protocol:?} against {hostility:?}", git.display());
            check(&label, protocol, &listed, &pushed);
        }
    }
}

#[test]
fn a_silent_server_hangs_the_client() {
    against_hostile(Hostility::Silent, |label, _, listed, pushed| {
        for out in [listed, pushed] {
            assert!(out.killed, "{}", describe(label, out));
            assert_eq!(out.stdout_text(), "", "{}", describe(label, out));
            assert_eq!(out.stderr_text(), "", "{}", describe(label, out));
        }
    });
}

#[test]
fn curls_low_speed_limit_bounds_a_silent_http_server() {
    let server = HostileServer::silent(Protocol::Http);
    let url = server.url("x");
    let scratch = tempfile::tempdir().expect("scratch");
    for git in client_gits() {
        let out = run(
            &git,
            scratch.path(),
            &[
                "-c",
                "http.lowSpeedLimit=1",
                "-c",
                "http.lowSpeedTime=1",
                "ls-remote",
                &url,
            ],
            FINISHES,
        );
        let label = format!("{} with a low-speed limit", git.display());
        assert_eq!(out.code(), Some(128), "{}", describe(&label, &out));
        assert_eq!(
            out.stderr_text(),
            format!(
                "fatal: unable to access '{url}/': Operation too slow. Less than 1 bytes/sec \
                 transferred the last 1 seconds\n"
            ),
            "{}",
            describe(&label, &out)
        );
    }
}

#[test]
fn a_malformed_advertisement_fails_the_client_at_once() {
    against_hostile(Hostility::Malformed, |label, _, listed, pushed| {
        for out in [listed, pushed] {
            assert!(!out.killed, "{}", describe(label, out));
            assert_eq!(out.code(), Some(128), "{}", describe(label, out));
            assert_eq!(
                out.stderr_text(),
                "fatal: protocol error: bad line length character: this\n",
                "{}",
                describe(label, out)
            );
        }
    });
}

#[test]
fn an_overlong_pkt_line_fails_git_protocol_and_hangs_http() {
    against_hostile(
        Hostility::OverlongPktLine,
        |label, protocol, listed, pushed| {
            for out in [listed, pushed] {
                match protocol {
                    Protocol::Git => {
                        assert_eq!(out.code(), Some(128), "{}", describe(label, out));
                        assert_eq!(
                            out.stderr_text(),
                            "fatal: protocol error: bad line length 65531\n",
                            "{}",
                            describe(label, out)
                        );
                    }
                    // The HTTP client reads the whole advertisement before parsing a line of
                    // it: an endless body is endless memory.
                    Protocol::Http => {
                        assert!(out.killed, "{}", describe(label, out));
                        assert!(
                            out.peak_rss_kib.unwrap_or(0) > 32 * 1024,
                            "{label}: the client kept {:?} KiB",
                            out.peak_rss_kib
                        );
                    }
                }
            }
        },
    );
}

#[test]
fn an_oversized_advertisement_is_taken_whole() {
    const REFS: u64 = 200_000;
    against_hostile(
        Hostility::OversizedAdvertisement { refs: REFS },
        |label, _, listed, pushed| {
            assert_eq!(listed.code(), Some(0), "{}", describe(label, listed));
            let text = listed.stdout_text();
            assert_eq!(text.lines().count() as u64, REFS + 1, "{label}");
            assert!(
                text.contains(&format!("\trefs/heads/sf-{:010}\n", REFS - 1)),
                "{label}"
            );
            // The push takes it all, sends its pack, and waits for a report never sent.
            assert!(pushed.killed, "{}", describe(label, pushed));
            assert_eq!(pushed.stdout_text(), "", "{}", describe(label, pushed));
        },
    );
}

#[test]
fn an_endless_advertisement_hangs_the_client_and_grows_it() {
    against_hostile(
        Hostility::EndlessAdvertisement,
        |label, _, listed, pushed| {
            for out in [listed, pushed] {
                assert!(out.killed, "{}", describe(label, out));
                assert_eq!(out.stdout_text(), "", "{}", describe(label, out));
                assert_eq!(out.stderr_text(), "", "{}", describe(label, out));
                assert!(
                    out.peak_rss_kib.unwrap_or(0) > 32 * 1024,
                    "{label}: the client kept only {:?} KiB",
                    out.peak_rss_kib
                );
            }
        },
    );
}

#[test]
fn endless_push_progress_hangs_a_push_that_writes_without_end() {
    against_hostile(
        Hostility::EndlessPushProgress,
        |label, _, listed, pushed| {
            assert_eq!(listed.code(), Some(0), "{}", describe(label, listed));
            assert!(pushed.killed, "{}", describe(label, pushed));
            assert_eq!(pushed.stdout_text(), "", "{label}");
            let stderr = pushed.stderr_text();
            assert!(
                stderr.starts_with("remote: sf-test: still working 0"),
                "{label}: {}",
                &stderr[..stderr.len().min(300)]
            );
            assert!(
                stderr.len() > 1024 * 1024,
                "{label}: only {} bytes",
                stderr.len()
            );
        },
    );
}

/// Which of U's objects the shallow repository holds besides U's commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ShallowBase {
    /// U's whole tree closure.
    WholeTree,
    /// U's trees at the paths M changes (the root and `src`), no blob.
    ChangedTrees,
    /// Nothing: only M's new objects and U's commit.
    CommitOnly,
}

/// The server's Git with `args` in `dir`, `input` on its stdin; its stdout. Panics if it
/// fails.
fn git_with_input(dir: &Path, args: &[&str], input: &[u8]) -> Vec<u8> {
    let mut child = git_command(server_git())
        .current_dir(dir)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawning git");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&input));
    let out = child.wait_with_output().expect("git's output");
    writer.join().expect("the writer").expect("writing to git");
    assert!(out.status.success(), "git {args:?} failed");
    out.stdout
}

/// A bare repository holding commit U (`main` of `remote`, listed in `shallow`), the U
/// objects `base` says, and a new commit M (parent U) whose new objects are a changed
/// `src/typing_extensions.py`, a new `src` tree and a new root tree. Returns M.
fn shallow_repository(dir: &Path, remote: &BareRemote, base: ShallowBase) -> String {
    git_in(
        dir.parent().expect("a parent"),
        &[
            "init",
            "-q",
            "--bare",
            "--initial-branch=main",
            path_str(dir),
        ],
    );
    let upstream = remote.read_ref("refs/heads/main").expect("main");
    let copy = |objects: &[String]| {
        if !objects.is_empty() {
            let list = objects.join("\n") + "\n";
            let pack = git_with_input(
                remote.path(),
                &["pack-objects", "-q", "--stdout"],
                list.as_bytes(),
            );
            git_with_input(dir, &["unpack-objects", "-q"], &pack);
        }
    };
    let mut objects = vec![upstream.clone()];
    match base {
        ShallowBase::WholeTree => {
            objects.push(remote.git(&["rev-parse", &format!("{upstream}^{{tree}}")]));
            objects.extend(
                remote
                    .git(&["ls-tree", "-r", "-t", "--format=%(objectname)", &upstream])
                    .lines()
                    .map(str::to_owned),
            );
        }
        ShallowBase::ChangedTrees => {
            objects.push(remote.git(&["rev-parse", &format!("{upstream}^{{tree}}")]));
            objects.push(remote.git(&["rev-parse", &format!("{upstream}:src")]));
        }
        ShallowBase::CommitOnly => {}
    }
    copy(&objects);
    std::fs::write(dir.join("shallow"), format!("{upstream}\n")).expect("writing shallow");

    let mktree = |listing: String| {
        let out = git_with_input(dir, &["mktree", "--missing"], listing.as_bytes());
        String::from_utf8(out).expect("hex").trim().to_owned()
    };
    let blob_path = dir.join("new-blob");
    std::fs::write(&blob_path, "changed by sf\n").expect("writing a blob");
    let blob = git_in(dir, &["hash-object", "-w", path_str(&blob_path)]);
    std::fs::remove_file(&blob_path).expect("removing the blob's file");
    let replace = |listing: String, name: &str, kind: &str, oid: &str| {
        listing
            .lines()
            .map(|line| {
                let (meta, entry) = line.split_once('\t').expect("mode type oid\\tname");
                if entry == name {
                    let mode = meta.split(' ').next().expect("mode");
                    format!("{mode} {kind} {oid}\t{entry}\n")
                } else {
                    format!("{line}\n")
                }
            })
            .collect::<String>()
    };
    let src = mktree(replace(
        remote.git(&["ls-tree", &format!("{upstream}:src")]),
        "typing_extensions.py",
        "blob",
        &blob,
    ));
    let root = mktree(replace(
        remote.git(&["ls-tree", &upstream]),
        "src",
        "tree",
        &src,
    ));
    git_in(dir, &["commit-tree", &root, "-p", &upstream, "-m", "M"])
}

#[test]
fn a_shallow_repository_pushes_with_the_trees_it_changes_but_not_with_the_commit_alone() {
    for git in client_gits() {
        for transport in TRANSPORTS {
            for base in [
                ShallowBase::WholeTree,
                ShallowBase::ChangedTrees,
                ShallowBase::CommitOnly,
            ] {
                let served = serve(fixture_remote(), transport);
                let label = format!("{} over {transport:?} from {base:?}", git.display());
                let scratch = tempfile::tempdir().expect("scratch");
                let shallow = scratch.path().join("shallow.git");
                let new = shallow_repository(&shallow, &served.remote, base);
                let out = run(
                    &git,
                    &shallow,
                    &[
                        "push",
                        "--porcelain",
                        "--atomic",
                        &format!("--force-with-lease=refs/heads/main:{FIXTURE_MAIN}"),
                        &served.url,
                        &format!("{new}:refs/heads/main"),
                    ],
                    FINISHES,
                );
                if base == ShallowBase::CommitOnly {
                    // pack-objects walks M's root tree; with no U tree to say which of
                    // its entries the remote has, it reads the first one it lacks (the
                    // unchanged `.github`) and dies.
                    let missing = served
                        .remote
                        .git(&["rev-parse", &format!("{FIXTURE_MAIN}:.github")]);
                    assert_eq!(out.code(), Some(1), "{}", describe(&label, &out));
                    assert!(
                        out.stderr_text()
                            .contains(&format!("fatal: bad tree object {missing}")),
                        "{}",
                        describe(&label, &out)
                    );
                    // Over HTTP the request is cut off, so no status comes back.
                    let expected = match transport {
                        Transport::Http => vec![],
                        _ => vec![(
                            "!".to_owned(),
                            format!("{new}:refs/heads/main"),
                            "[remote rejected] (unpacker error)".to_owned(),
                        )],
                    };
                    assert_eq!(statuses(&out), expected, "{}", describe(&label, &out));
                    assert_eq!(
                        served.remote.read_ref("refs/heads/main").as_deref(),
                        Some(FIXTURE_MAIN)
                    );
                } else {
                    assert_eq!(out.code(), Some(0), "{}", describe(&label, &out));
                    assert_eq!(served.remote.read_ref("refs/heads/main"), Some(new.clone()));
                    // The remote is whole: every object of M's history is there.
                    served
                        .remote
                        .git(&["fsck", "--connectivity-only", "--no-dangling"]);
                    assert_eq!(
                        served.remote.git(&[
                            "cat-file",
                            "-p",
                            &format!("{new}:src/typing_extensions.py")
                        ]),
                        "changed by sf"
                    );
                }
            }
        }
    }
}

#[test]
fn http_takes_chunked_pushes_and_gzipped_fetches() {
    let git = &client_gits()[0];
    let source = BareRemote::from_bundle(&fixture_bundle("requests.bundle"));
    let target = BareRemote::empty();
    let http = HttpGit::start(target.root());
    // The whole history is far over http.postBuffer (1 MiB): the body comes chunked.
    let out = run(
        git,
        source.path(),
        &[
            "push",
            "--porcelain",
            &http.url(REMOTE_NAME),
            "main:refs/heads/main",
        ],
        FINISHES,
    );
    assert_eq!(out.code(), Some(0), "{}", describe("push", &out));
    assert_eq!(
        target.read_ref("refs/heads/main"),
        source.read_ref("refs/heads/main")
    );
    let requests = http.requests();
    assert!(
        requests.iter().any(|r| r.method == "POST"
            && r.chunked
            && r.body_len > 10 * 1024 * 1024
            && r.status == 200),
        "{requests:#?}"
    );
    target.git(&["fsck", "--connectivity-only", "--no-dangling"]);

    // A fetch into a clone that has diverged: its haves fill requests past 1 KiB, which Git
    // sends gzipped.
    let scratch = tempfile::tempdir().expect("scratch");
    let work = scratch.path().join("work");
    git_in(
        scratch.path(),
        &[
            "clone",
            "-q",
            "--no-local",
            &target.file_url(),
            path_str(&work),
        ],
    );
    git_in(&work, &["reset", "-q", "--hard", "HEAD~300"]);
    for n in 0..60 {
        git_in(
            &work,
            &["commit", "-q", "--allow-empty", "-m", &format!("local {n}")],
        );
    }
    git_in(&work, &["remote", "remove", "origin"]);
    let tip = target.git(&[
        "commit-tree",
        "main^{tree}",
        "-p",
        "main",
        "-m",
        "server only",
    ]);
    target.set_ref("refs/heads/main", &tip);
    let out = run(
        git,
        &work,
        &["fetch", &http.url(REMOTE_NAME), "main:refs/remotes/x/main"],
        FINISHES,
    );
    assert_eq!(out.code(), Some(0), "{}", describe("fetch", &out));
    assert_eq!(git_in(&work, &["rev-parse", "refs/remotes/x/main"]), tip);
    let requests = http.requests();
    assert!(
        requests.iter().any(|r| r.method == "POST"
            && r.content_encoding.as_deref() == Some("gzip")
            && r.status == 200),
        "{requests:#?}"
    );
}

#[test]
fn remotes_are_made_from_nothing_a_bundle_or_a_repository() {
    let empty = BareRemote::empty();
    assert_eq!(empty.refs(), []);
    assert_eq!(empty.read_ref("refs/heads/main"), None);
    assert_eq!(empty.read_ref("HEAD"), None);
    assert!(empty.file_url().starts_with("file:///"));
    assert!(empty.path().starts_with(empty.root()));
    assert_eq!(
        empty.path().file_name().and_then(|n| n.to_str()),
        Some("remote.git")
    );

    let bundled = fixture_remote();
    assert_eq!(
        bundled.read_ref("refs/heads/main").as_deref(),
        Some(FIXTURE_MAIN)
    );
    assert_eq!(bundled.read_ref("HEAD").as_deref(), Some(FIXTURE_MAIN));
    // A name that is no ref's full name is no ref, even where rev-parse would guess one.
    assert_eq!(bundled.read_ref("main"), None);
    assert_eq!(bundled.read_ref("refs/heads"), None);
    assert_eq!(bundled.git(&["remote"]), "");

    let parent = bundled.git(&["rev-parse", "main~1"]);
    bundled.set_ref("refs/sf/marker", &parent);
    assert_eq!(bundled.read_ref("refs/sf/marker"), Some(parent.clone()));
    let mirrored = BareRemote::from_repository(bundled.path());
    assert_eq!(mirrored.refs(), bundled.refs());
    mirrored.delete_ref("refs/sf/marker");
    assert_eq!(mirrored.read_ref("refs/sf/marker"), None);
    assert_eq!(bundled.read_ref("refs/sf/marker"), Some(parent));

    let root = bundled.root().to_path_buf();
    drop((empty, bundled, mirrored));
    assert!(!root.exists(), "the remote's directory outlived its guard");
}

#[test]
fn install_hook_installs_an_executable_hook() {
    let served = serve(fixture_remote(), Transport::Daemon);
    let marker = served.remote.root().join("ran");
    served.remote.install_hook(
        "post-receive",
        &format!("#!/bin/sh\ncat > '{}'\n", marker.display()),
    );
    let scratch = tempfile::tempdir().expect("scratch");
    let work = work_clone(scratch.path(), &served.remote);
    let new = commit(&work, "hooked");
    let out = run(
        &client_gits()[0],
        &work,
        &["push", &served.url, "HEAD:refs/heads/main"],
        FINISHES,
    );
    assert_eq!(out.code(), Some(0), "{}", describe("push", &out));
    assert_eq!(
        std::fs::read_to_string(&marker).expect("the hook ran"),
        format!("{FIXTURE_MAIN} {new} refs/heads/main\n")
    );
}

/// Connecting to `port` on loopback is refused.
fn refused(port: u16) -> bool {
    TcpStream::connect(("127.0.0.1", port))
        .is_err_and(|error| error.kind() == std::io::ErrorKind::ConnectionRefused)
}

/// Drops `value` on a thread of its own and fails if that takes longer than a minute.
fn drops_promptly<T: Send + 'static>(label: &str, value: T) {
    let (done, dropped) = mpsc::channel();
    std::thread::spawn(move || {
        drop(value);
        let _ = done.send(());
    });
    assert!(
        dropped.recv_timeout(Duration::from_secs(60)).is_ok(),
        "{label}: dropping the guard hung"
    );
}

#[test]
fn every_server_stops_when_its_guard_drops_even_with_clients_connected() {
    let remote = fixture_remote();

    let daemon = GitDaemon::start(remote.root());
    let port = daemon.port();
    let second = GitDaemon::start(remote.root());
    assert_ne!(second.port(), port);
    assert!(daemon.log().contains("Ready to rumble"));
    // A client mid-request: a daemon child is serving it.
    let mut idle = TcpStream::connect(("127.0.0.1", port)).expect("connecting to the daemon");
    idle.write_all(b"00").expect("half a pkt-line");
    drops_promptly("git daemon", daemon);
    assert!(refused(port), "the daemon still listens");
    drop(second);

    let http = HttpGit::start(remote.root());
    let port = http.port();
    let listed = run(
        &client_gits()[0],
        remote.root(),
        &["ls-remote", &http.url(REMOTE_NAME)],
        FINISHES,
    );
    assert_eq!(listed.code(), Some(0), "{}", describe("ls-remote", &listed));
    let mut idle = TcpStream::connect(("127.0.0.1", port)).expect("connecting to http");
    idle.write_all(b"GET /remote.git/info/refs HTTP/1.1\r\nHost: x\r\n")
        .expect("half a head");
    drops_promptly("http", http);
    assert!(refused(port), "the HTTP server still listens");

    for hostility in [Hostility::Silent, Hostility::EndlessAdvertisement] {
        for protocol in [Protocol::Git, Protocol::Http] {
            let server = HostileServer::start(hostility, protocol);
            let port = server.port();
            let mut idle = TcpStream::connect(("127.0.0.1", port)).expect("connecting");
            let opening: &[u8] = match protocol {
                Protocol::Git => b"0014git-upload-pack /",
                Protocol::Http => b"GET /x.git/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
            };
            idle.write_all(opening).expect("an opening");
            drops_promptly("hostile", server);
            assert!(refused(port), "the hostile server still listens");
        }
    }
}
