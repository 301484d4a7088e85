//! `sf serve` collects the proposals behind the head speculatively, through the binary against
//! the team's remote on `git daemon`: each is sealed on the one ahead of it and collected at
//! once; a failure resets those behind it (they are sealed again without it); a commit the
//! team pushes while the queue collects is taken in before the head lands. Every landing is
//! still `sf land`'s guarded path, and every commit is delivered once.

mod land_support;
mod serve_support;

use std::time::{Duration, Instant};

use land_support::git;
use serve_support::{Server, TOKENS, Team, note_proposal, wait_final};

/// How long each check sleeps before it reads the notes: long enough for the proposals
/// behind to be sealed on top of the one collecting.
const PAUSE: u32 = 2;

/// Queues a note `name` (rejected by the check when `good` is false); answers its id.
fn post(server: &Server, name: &str, good: bool) -> String {
    let line = if good {
        format!("a note by {name}\n")
    } else {
        format!("REJECT {name}\n")
    };
    let (status, answer) = server.json(
        "POST",
        "/v1/repositories/te/proposals",
        Some(TOKENS[0].1),
        &note_proposal(&format!("{name}.txt"), &line),
    );
    assert_eq!(status, 202, "{answer}");
    answer["id"].as_str().unwrap().to_owned()
}

/// The bases `entry` was sealed on, sorted (the order they were sealed in is a race).
fn sealed_on(entry: &serde_json::Value) -> Vec<&str> {
    sorted(
        entry["sealings"]
            .as_array()
            .unwrap_or_else(|| panic!("no sealings: {entry}"))
            .iter()
            .map(|sealing| sealing["base"].as_str().unwrap())
            .collect(),
    )
}

/// `bases`, sorted.
fn sorted(mut bases: Vec<&str>) -> Vec<&str> {
    bases.sort();
    bases
}

fn field<'a>(entry: &'a serde_json::Value, name: &str) -> &'a str {
    entry[name]
        .as_str()
        .unwrap_or_else(|| panic!("no {name}: {entry}"))
}

/// A, B and C in one queue, B rejected by its check: B was sealed on A and collected while A
/// was, C was sealed on B and on A (the alternative, in case B fails); B's collection failed,
/// so C landed as sealed on A (Zuul's rule); A and C are delivered, C's commit has A's as
/// parent, B is failed and never pushed. With `jobs = 5` every sealing is collected at once.
#[test]
fn a_failure_in_the_middle_resets_the_one_behind_it_onto_the_one_ahead() {
    let team = Team::checking_for(PAUSE);
    let upstream = team.main();
    let config = team.config_with(0o600, "127.0.0.1:0", true, "jobs = 5");
    let server = Server::start(&team.work, &config);
    let ids = [
        post(&server, "a", true),
        post(&server, "b", false),
        post(&server, "c", true),
    ];
    let done = wait_final(&server, &ids, Duration::from_secs(300));
    let [a, b, c] = [&done[0], &done[1], &done[2]];
    assert_eq!(a["state"], "delivered", "{a}");
    assert_eq!(b["state"], "failed", "{b}");
    assert_eq!(b["verdict"]["outcome"], "failed", "{b}");
    assert!(b["reasons"].to_string().contains("no-reject"), "{b}");
    assert_eq!(c["state"], "delivered", "{c}");

    // B stood on A's Candidate before A landed, C on B's, and C on A's as its alternative.
    assert_eq!(field(b, "base"), field(a, "commit"), "{b}");
    assert_eq!(sealed_on(a), [upstream.as_str()], "{a}");
    assert_eq!(
        sealed_on(b),
        sorted(vec![field(a, "commit"), &upstream]),
        "{b}"
    );
    assert_eq!(
        sealed_on(c),
        sorted(vec![field(b, "commit"), field(a, "commit")]),
        "{c}"
    );
    assert_eq!(field(c, "base"), field(a, "commit"), "{c}");

    let remote = team.remote.path();
    assert_eq!(team.main(), field(c, "commit"));
    assert_eq!(
        git(remote, &["rev-parse", &format!("{}^", field(c, "commit"))]),
        field(a, "commit")
    );
    assert_eq!(
        git(remote, &["rev-parse", &format!("{}^", field(a, "commit"))]),
        upstream
    );
    let pushed = git(remote, &["rev-list", "--all"]);
    assert!(!pushed.contains(field(b, "commit")), "B was never pushed");
    assert_eq!(team.remote.push_count(), 2, "A and C, once each");
}

/// The head fails: B stands on the target (its alternative, or a sealing made then), C on B's
/// sealing there; both are delivered in order on the team's branch. With `jobs = 3` there is
/// no room for alternatives while A, B and C are collected.
#[test]
fn a_failed_head_resets_everything_behind_it_onto_the_target() {
    let team = Team::checking_for(PAUSE);
    let upstream = team.main();
    let config = team.config_with(0o600, "127.0.0.1:0", true, "jobs = 3");
    let server = Server::start(&team.work, &config);
    let ids = [
        post(&server, "a", false),
        post(&server, "b", true),
        post(&server, "c", true),
    ];
    let done = wait_final(&server, &ids, Duration::from_secs(300));
    let [a, b, c] = [&done[0], &done[1], &done[2]];
    assert_eq!(a["state"], "failed", "{a}");
    assert_eq!(b["state"], "delivered", "{b}");
    assert_eq!(c["state"], "delivered", "{c}");
    // B was sealed on A (whose rejected note failed it there) and on the target.
    assert_eq!(
        sealed_on(b),
        sorted(vec![field(a, "commit"), &upstream]),
        "{b}"
    );
    assert_eq!(field(b, "base"), upstream);
    assert_eq!(field(c, "base"), field(b, "commit"));
    let remote = team.remote.path();
    assert_eq!(team.main(), field(c, "commit"));
    assert_eq!(
        git(remote, &["rev-parse", &format!("{}^", field(b, "commit"))]),
        upstream
    );
    assert_eq!(team.remote.push_count(), 2);
}

/// The team pushes a commit of its own while the head is being collected: before the head
/// lands, the upstream's tip is imported, the head is sealed again on the team's commit and
/// collected again, and it is delivered on top of it (not refused, not left undelivered).
#[test]
fn a_team_push_during_a_collection_is_taken_in_before_the_head_lands() {
    let team = Team::checking_for(PAUSE);
    let config = team.config_with(0o600, "127.0.0.1:0", true, "jobs = 2");
    let server = Server::start(&team.work, &config);
    let id = post(&server, "a", true);
    let started = Instant::now();
    while server.proposal(&id)["state"] != "collecting" {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never collecting"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let remote = team.remote.path();
    let tip = team.main();
    let tree = git(remote, &["rev-parse", &format!("{tip}^{{tree}}")]);
    let ours = git(
        remote,
        &[
            "commit-tree",
            &tree,
            "-p",
            &tip,
            "-m",
            "the team's own commit",
        ],
    );
    git(remote, &["update-ref", "refs/heads/main", &ours]);

    let done = wait_final(&server, std::slice::from_ref(&id), Duration::from_secs(300));
    let a = &done[0];
    assert_eq!(a["state"], "delivered", "{a}");
    assert_eq!(a["generation"], 2, "sealed again on the team's commit: {a}");
    assert_eq!(sealed_on(a), sorted(vec![&tip, &ours]), "{a}");
    assert_eq!(field(a, "base"), ours);
    assert_eq!(team.main(), field(a, "commit"));
    assert_eq!(
        git(remote, &["rev-parse", &format!("{}^", field(a, "commit"))]),
        ours
    );
}

/// The sandbox's launcher is killed under the first collection's run (a fault of the machine,
/// not of the Candidate: the run is aborted and its processes not confirmed ended): the
/// proposal is collected once more, and lands on the second collection.
#[test]
fn a_run_the_sandbox_lost_is_collected_once_more_and_lands() {
    let team = Team::checking_for(3);
    let config = team.config_with(0o600, "127.0.0.1:0", true, "jobs = 2");
    let server = Server::start(&team.work, &config);
    let id = post(&server, "a", true);
    let started = Instant::now();
    let launcher = loop {
        let tree = serve_support::descendants(server.pid());
        // The check is running once its `sleep` is: its launcher is the one to kill.
        if tree.iter().any(|(_, name)| name == "sleep") {
            let (pid, _) = tree
                .iter()
                .find(|(_, name)| name.starts_with("sf-sandbox-lau"))
                .unwrap_or_else(|| panic!("no launcher in {tree:?}"));
            break *pid;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "never ran");
        std::thread::sleep(Duration::from_millis(20));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(launcher as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();

    let done = wait_final(&server, std::slice::from_ref(&id), Duration::from_secs(300));
    let a = &done[0];
    assert_eq!(a["state"], "delivered", "{a}");
    let collection = &a["collection"];
    assert_eq!(collection["retried"], true, "{a}");
    assert_eq!(collection["first"]["outcome"], "inconclusive", "{a}");
    assert_eq!(collection["outcome"], "verified", "{a}");
    assert_eq!(collection["attempt"], 2, "{a}");
    assert_eq!(team.main(), field(a, "commit"));
    assert_eq!(team.remote.push_count(), 1);
}

/// A check that outlives its recipe's timeout is the Candidate's doing: Inconclusive at once,
/// never collected again.
#[test]
fn a_run_that_timed_out_is_not_collected_again() {
    let team = Team::checking_with_timeout(30, 1000);
    let config = team.config_with(0o600, "127.0.0.1:0", true, "jobs = 2");
    let server = Server::start(&team.work, &config);
    let id = post(&server, "a", true);
    let done = wait_final(&server, std::slice::from_ref(&id), Duration::from_secs(300));
    let a = &done[0];
    assert_eq!(a["state"], "inconclusive", "{a}");
    assert_eq!(a["collection"]["outcome"], "inconclusive", "{a}");
    assert!(a["collection"].get("retried").is_none(), "{a}");
    assert_eq!(a["collection"]["attempt"], 1, "{a}");
    assert_eq!(team.remote.push_count(), 0);
}
