//! Delivery to real Git servers on loopback that the tests start and stop: `git daemon
//! --enable=receive-pack` (git://) and `git http-backend` behind a small HTTP server, each with
//! a post-push counter on the server; a server that accepts the update and then drops the
//! connection; and hostile servers (silent, malformed, overlong or oversized advertisements,
//! endless output) against which every Git process sf runs ends within its bound with a
//! typed answer, claiming nothing.

mod deliver_support;
mod land_support;

use std::time::{Duration, Instant};

use deliver_support::{Delivery, invoke_args};
use land_support::{SUM_FIXED, Work, git, team_project, write};
use sf_host::contracts::{EncodedObject, RefName};
use sf_host::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};
use sf_host::git_remote::GitRemote;
use sf_host::repository::{LeasedUpdate, Push, PushOutcome, Remote};
use sf_test_support::git_servers::{
    BareRemote, GitDaemon, HostileServer, Hostility, HttpGit, Protocol, run_bounded,
};

/// A server over the team's repository, by transport.
enum Server {
    Daemon(GitDaemon),
    Http(HttpGit),
}

impl Server {
    fn url(&self, remote: &BareRemote) -> String {
        match self {
            Self::Daemon(daemon) => daemon.url(remote.name()),
            Self::Http(http) => http.url(remote.name()),
        }
    }
}

/// The team's repository as a bare remote, a server of `kind` over it, and a delivery whose
/// base's upstream is the server's URL.
fn served(kind: &str) -> (BareRemote, Server, Delivery) {
    let (_tmp, dir) = sf_tests::private_dir();
    let remote = BareRemote::from_repository(&team_project(&dir));
    let server = match kind {
        "git" => Server::Daemon(GitDaemon::start(remote.root())),
        "http" => Server::Http(HttpGit::start(remote.root())),
        other => panic!("no server kind {other}"),
    };
    let url = server.url(&remote);
    let path = remote.path().to_owned();
    let source = path.to_str().unwrap().to_owned();
    let work = Work::from_git_upstream_at(move |_| source, "main", Some(&url));
    let delivery = Delivery::at(work, path);
    (remote, server, delivery)
}

#[test]
fn a_verified_candidate_is_delivered_once_over_git_daemon_and_smart_http() {
    for kind in ["git", "http"] {
        let (remote, server, delivery) = served(kind);
        remote.count_pushes();
        let upstream = remote.read_ref("refs/heads/main").unwrap();
        let candidate = delivery.collected("fix", SUM_FIXED);
        let (prepared, intent) = delivery.prepare(&candidate, 1, &[]);
        assert_eq!(intent["payload"]["remote"], server.url(&remote).as_str());
        let commit = intent["payload"]["commit"].as_str().unwrap().to_owned();
        let (observed, exit) = delivery.invoke(&prepared);
        assert_eq!(observed["invocation"], "confirmed", "{kind}: {observed}");
        assert_eq!(exit, 0, "{kind}");
        assert_eq!(
            remote.read_ref("refs/heads/main").unwrap(),
            commit,
            "{kind}"
        );
        assert_eq!(remote.push_count(), 1, "{kind}");
        assert_eq!(
            remote.git(&["rev-parse", &format!("{commit}^")]).trim(),
            upstream
        );
        // Again: nothing pushed; inspect reads the server and says confirmed.
        let (again, _) = delivery.invoke(&prepared);
        assert_eq!(again["dispatched"], false, "{kind}: {again}");
        assert_eq!(remote.push_count(), 1, "{kind}");
        assert_eq!(delivery.inspect(&prepared)["invocation"], "confirmed");
        // A fresh clone over the same transport shows the proposal's message and author.
        let clone = delivery.work.dir.join(format!("clone-{kind}"));
        let output = std::process::Command::new("git")
            .args(["clone", "-q", &server.url(&remote)])
            .arg(&clone)
            .output()
            .unwrap();
        assert!(output.status.success(), "{kind}: {output:?}");
        let log = git(&clone.join(".git"), &["log", "-1", "--format=%an %s"]);
        assert_eq!(log, "Ada Fixer Count the first number too", "{kind}");
    }
}

#[test]
fn a_server_that_accepts_and_then_drops_the_connection_is_confirmed_by_reading_it_back() {
    for kind in ["git", "http"] {
        let (remote, _server, delivery) = served(kind);
        remote.count_pushes();
        remote.accept_then_drop();
        let candidate = delivery.collected("fix", SUM_FIXED);
        let (prepared, intent) = delivery.prepare(&candidate, 1, &[]);
        let commit = intent["payload"]["commit"].as_str().unwrap();
        let (observed, _) = delivery.invoke(&prepared);
        // The push's own answer is an error without a status line; the marker read back
        // shows it landed.
        assert_eq!(observed["invocation"], "confirmed", "{kind}: {observed}");
        assert!(
            observed["problem"]
                .as_str()
                .unwrap()
                .contains("not a success"),
            "{kind}: {observed}"
        );
        assert_eq!(remote.read_ref("refs/heads/main").unwrap(), commit);
        assert_eq!(remote.push_count(), 1, "{kind}");
        assert_eq!(delivery.inspect(&prepared)["invocation"], "confirmed");
    }
}

#[test]
fn a_refusing_server_is_refused_and_a_moved_one_starts_nothing_over_http() {
    let (remote, _server, delivery) = served("http");
    remote.refuse_pushes("branch main is protected");
    let upstream = remote.read_ref("refs/heads/main").unwrap();
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, _) = delivery.prepare(&candidate, 1, &[]);
    let (observed, exit) = delivery.invoke(&prepared);
    assert_eq!(observed["invocation"], "refused", "{observed}");
    assert_eq!(exit, 8);
    assert_eq!(remote.read_ref("refs/heads/main").unwrap(), upstream);
    assert_eq!(delivery.inspect(&prepared)["invocation"], "refused");

    // Another occurrence after the team moved main: nothing is claimed or pushed.
    let tree = remote.git(&["rev-parse", &format!("{upstream}^{{tree}}")]);
    let other = remote.git(&["commit-tree", tree.trim(), "-p", &upstream, "-m", "moved"]);
    remote.set_ref("refs/heads/main", other.trim());
    let (second, _) = delivery.prepare(&candidate, 2, &[]);
    let (observed, exit) = delivery.invoke(&second);
    assert_eq!(observed["invocation"], "not-dispatched", "{observed}");
    assert_eq!(observed["dispatched"], false);
    assert_eq!(exit, 7);
}

/// The hostile servers, each in both protocols.
fn hostile_servers() -> Vec<(String, HostileServer)> {
    let mut servers = Vec::new();
    for protocol in [Protocol::Git, Protocol::Http] {
        for hostility in [
            Hostility::Silent,
            Hostility::Malformed,
            Hostility::OverlongPktLine,
            Hostility::OversizedAdvertisement { refs: 200_000 },
            Hostility::EndlessAdvertisement,
            Hostility::EndlessPushProgress,
        ] {
            servers.push((
                format!("{hostility:?} over {protocol:?}"),
                HostileServer::start(hostility, protocol),
            ));
        }
    }
    servers
}

/// Objects for a push: a base commit U and a commit M on it, each with a one-file tree.
fn push_objects() -> (Vec<EncodedObject>, ObjectId, ObjectId) {
    let commit = |text: &str, parents: Vec<ObjectId>, objects: &mut Vec<EncodedObject>| {
        let blob = EncodedObject::new(ObjectKind::Blob, text.as_bytes().to_vec());
        let tree = EncodedObject::new(
            ObjectKind::Tree,
            git_object::encode_tree(&[TreeEntry {
                mode: EntryMode::File,
                name: "file".into(),
                id: blob.id,
            }]),
        );
        let commit = EncodedObject::new(
            ObjectKind::Commit,
            git_object::encode_commit(&Commit {
                tree: tree.id,
                parents,
                author: "A <a@example.org> 0 +0000".into(),
                committer: "A <a@example.org> 0 +0000".into(),
                message: format!("{text}\n"),
            }),
        );
        let id = commit.id;
        objects.extend([blob, tree, commit]);
        id
    };
    let mut objects = Vec::new();
    let base = commit("base", Vec::new(), &mut objects);
    let candidate = commit("candidate", vec![base], &mut objects);
    (objects, base, candidate)
}

#[test]
fn every_git_process_against_a_hostile_server_ends_within_its_bound_with_a_typed_answer() {
    let bound = Duration::from_secs(2);
    let remote = GitRemote::new(None).unwrap().with_timeouts(bound, bound);
    let (objects, base, candidate) = push_objects();
    let tag = format!(
        "object {candidate}\ntype commit\ntag sf/delivered/x\ntagger sf <sf@localhost.invalid> 0 +0000\n\nmarker\n"
    )
    .into_bytes();
    let tag_id = sf_host::repository::marker_tag_id(&tag);
    let main = RefName::parse("refs/heads/main").unwrap();
    let marker = RefName::parse("refs/sf/delivered/x").unwrap();
    for (name, server) in hostile_servers() {
        let url = server.url("remote");
        let started = Instant::now();
        let read = remote.read_refs(&url, &[&main, &marker]);
        let read_took = started.elapsed();
        let started = Instant::now();
        let pushed = remote.push(
            &url,
            &Push {
                objects: &objects,
                boundary: &[],
                tag: (&tag, tag_id),
                updates: &[
                    LeasedUpdate {
                        name: marker.clone(),
                        expected: None,
                        new: tag_id,
                    },
                    LeasedUpdate {
                        name: main.clone(),
                        expected: Some(base),
                        new: candidate,
                    },
                ],
            },
        );
        let push_took = started.elapsed();
        assert!(
            server.connections() > 0,
            "{name}: the client never connected"
        );
        // Ended by the bound (and its drain grace), never by the test: a few seconds at most.
        let ceiling = bound + Duration::from_secs(10);
        assert!(read_took < ceiling, "{name}: reading took {read_took:?}");
        assert!(push_took < ceiling, "{name}: the push took {push_took:?}");
        // What a hostile server answers is never an advertisement of main or the marker, and
        // a push it takes is never applied: unknown when it may have, refused when it says so.
        match read {
            Ok(values) => assert!(
                values.is_empty() || values.keys().all(|key| key == main.as_str()),
                "{name}: {values:?}"
            ),
            Err(error) => assert!(!error.reason.is_empty(), "{name}"),
        }
        assert!(
            !matches!(pushed, PushOutcome::Applied),
            "{name}: {pushed:?}"
        );
        if let PushOutcome::Unknown { reason } | PushOutcome::Refused { reason } = &pushed {
            assert!(
                reason.chars().all(|c| !c.is_control()),
                "{name}: a reason with control characters: {reason:?}"
            );
        }
    }
}

#[test]
fn sf_deliver_against_an_endless_advertisement_claims_nothing_and_ends_in_time() {
    let hostile = HostileServer::start(Hostility::EndlessAdvertisement, Protocol::Git);
    let url = hostile.url("remote");
    let (_tmp, dir) = sf_tests::private_dir();
    let source = team_project(&dir).to_str().unwrap().to_owned();
    let work = Work::from_git_upstream_at(move |_| source, "main", Some(&url));
    let remote_path = dir.join("unused");
    let delivery = Delivery::at(work, remote_path);
    write(
        &delivery.work.dir.join("sf.toml"),
        "[delivery]\nread_timeout_seconds = 2\npush_timeout_seconds = 2\n",
    );
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, _) = delivery.prepare(&candidate, 1, &[]);
    let mut command = delivery
        .work
        .command(&[&["--config", "sf.toml"][..], &invoke_args(&prepared)].concat());
    command.stdin(std::process::Stdio::null());
    let ran = run_bounded(command, Duration::from_secs(60));
    assert!(!ran.killed, "sf deliver invoke did not end by itself");
    let envelope: serde_json::Value = serde_json::from_slice(&ran.stdout).unwrap();
    let observed = &envelope["result"];
    assert_eq!(observed["invocation"], "not-dispatched", "{envelope}");
    assert_eq!(observed["read"], serde_json::Value::Null);
    assert!(
        observed["problem"]
            .as_str()
            .unwrap()
            .contains("could not be read"),
        "{observed}"
    );
    assert_eq!(ran.code(), Some(7));
    // Nothing was claimed: the owned repository holds no dispatch.
    let refs = git(
        &delivery.work.dir.join("repo.git"),
        &["for-each-ref", "--format=%(refname)", "refs/sf/deliveries/"],
    );
    assert!(!refs.contains("/dispatch"), "{refs}");
}
