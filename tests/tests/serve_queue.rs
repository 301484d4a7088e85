//! `sf serve` lands many agents' proposals through the binary, against the team's remote on
//! `git daemon`: 8 proposals from 3 concurrent clients (6 good, 2 that the Slice's check
//! rejects), each creating a note of its own, half in sf's proposal format and half as Git
//! diffs. The server is SIGKILLed while the queue is busy and started again on the same
//! state: every proposal still ends in a final state, the 6 are delivered exactly once each
//! in one linear history on the remote, and the 2 are failed and never pushed.

mod land_support;
mod serve_support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use land_support::git;
use serve_support::{Server, TOKENS, Team, is_final, note_diff, note_proposal, wait_final};

/// What one client sends: the note's name, and whether its check passes.
const SENT: [[(&str, bool); 3]; 3] = [
    [("a1", true), ("a2", false), ("a3", true)],
    [("b1", true), ("b2", true), ("b3", false)],
    [("c1", true), ("c2", true), ("", true)],
];

#[test]
fn eight_proposals_from_three_clients_land_once_each_in_one_linear_history_across_a_kill() {
    let team = Team::new();
    let upstream = team.main();
    let config = team.config(0o600, "127.0.0.1:0");
    let server = Server::start(&team.work, &config);
    let address = server.address;

    // Three clients at once, each queueing its proposals one after another.
    let clients: Vec<_> = SENT
        .iter()
        .zip(TOKENS)
        .map(|(sent, (_, token))| {
            let sent: Vec<(String, bool)> = sent
                .iter()
                .filter(|(name, _)| !name.is_empty())
                .map(|(name, good)| (name.to_string(), *good))
                .collect();
            std::thread::spawn(move || {
                sent.into_iter()
                    .enumerate()
                    .map(|(at, (name, good))| {
                        let line = if good {
                            format!("a note by {name}")
                        } else {
                            format!("REJECT {name}")
                        };
                        let body = if at % 2 == 0 {
                            note_proposal(&format!("{name}.txt"), &format!("{line}\n"))
                        } else {
                            note_diff(&format!("{name}.txt"), &line)
                        };
                        let (status, answer) = serve_support::request(
                            address,
                            "POST",
                            "/v1/repositories/te/proposals",
                            Some(token),
                            body.to_string().as_bytes(),
                        );
                        let answer: serde_json::Value = serde_json::from_slice(&answer).unwrap();
                        assert_eq!(status, 202, "{answer}");
                        assert_eq!(answer["state"], "queued");
                        (answer["id"].as_str().unwrap().to_owned(), name, good)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let sent: Vec<(String, String, bool)> = clients
        .into_iter()
        .flat_map(|client| client.join().unwrap())
        .collect();
    assert_eq!(sent.len(), 8);
    let ids: Vec<String> = sent.iter().map(|(id, _, _)| id.clone()).collect();
    assert_eq!(
        ids.iter().collect::<BTreeSet<_>>().len(),
        8,
        "ids are distinct"
    );

    // Killed while the queue is busy: some proposals final, some not.
    let started = Instant::now();
    loop {
        let states: Vec<serde_json::Value> = ids
            .iter()
            .map(|id| server.proposal(id)["state"].clone())
            .collect();
        let done = states.iter().filter(|state| is_final(state)).count();
        let landing = states
            .iter()
            .any(|state| state == "collecting" || state == "landing");
        // Best in the middle of a landing; in any case before the queue is through.
        if (done >= 2 && landing) || done >= 5 {
            assert!(done < 8, "the queue was done before the kill: {states:?}");
            eprintln!("killing sf serve with {done} of 8 final: {states:?}");
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "{states:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
    server.kill();
    let pushed_before = team.remote.push_count();

    // Started again on the same state: it resumes each proposal where it was.
    let server = Server::start(&team.work, &config);
    let entries = wait_final(&server, &ids, Duration::from_secs(600));
    let mut commits = Vec::new();
    for ((id, name, good), entry) in sent.iter().zip(&entries) {
        assert_eq!(entry["id"], id.as_str());
        if *good {
            assert_eq!(entry["state"], "delivered", "{name}: {entry}");
            assert_eq!(entry["verdict"]["outcome"], "verified", "{entry}");
            commits.push((name.clone(), entry["commit"].as_str().unwrap().to_owned()));
        } else {
            assert_eq!(entry["state"], "failed", "{name}: {entry}");
            assert_eq!(entry["verdict"]["outcome"], "failed", "{entry}");
            let reasons = entry["reasons"].to_string();
            assert!(reasons.contains("no-reject"), "{entry}");
        }
    }

    // The remote: one linear history from the upstream through the 6 delivered commits,
    // each adding its own note once; no rejected note in any ref; one push per delivery.
    let remote = team.remote.path();
    let tip = team.main();
    let history: Vec<String> = git(
        remote,
        &["rev-list", "--first-parent", &format!("{upstream}..{tip}")],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    assert_eq!(history.len(), 6, "{history:?}");
    assert_eq!(
        git(
            remote,
            &["rev-list", "--merges", &format!("{upstream}..{tip}")]
        ),
        "",
        "no merges"
    );
    let delivered: BTreeSet<&str> = commits.iter().map(|(_, commit)| commit.as_str()).collect();
    assert_eq!(
        history.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        delivered,
        "the history is exactly the delivered commits"
    );
    for (name, commit) in &commits {
        let adding = git(
            remote,
            &[
                "log",
                "--format=%H",
                &tip,
                "--",
                &format!("notes/{name}.txt"),
            ],
        );
        assert_eq!(
            adding, *commit,
            "notes/{name}.txt was added once, by its own commit"
        );
        let text = git(remote, &["show", &format!("{tip}:notes/{name}.txt")]);
        assert_eq!(text, format!("a note by {name}"));
    }
    for (_, name, good) in &sent {
        if !good {
            let found = git(
                remote,
                &[
                    "log",
                    "--all",
                    "--format=%H",
                    "--",
                    &format!("notes/{name}.txt"),
                ],
            );
            assert_eq!(found, "", "the rejected {name} was never pushed");
        }
    }
    assert_eq!(
        team.remote.push_count(),
        6,
        "{pushed_before} pushes before the kill"
    );

    let metrics = server.metrics();
    for line in [
        "sf_serve_proposals{state=\"delivered\"} 6",
        "sf_serve_proposals{state=\"failed\"} 2",
        "sf_serve_queue_depth 0",
        "sf_serve_verdicts_total{outcome=\"verified\"} 6",
        "sf_serve_verdicts_total{outcome=\"failed\"} 2",
        "sf_serve_deliveries_total 6",
    ] {
        assert!(
            metrics.lines().any(|got| got == line),
            "{line} in {metrics}"
        );
    }
}

/// The server killed at each fault point of a landing in turn (the collection ended, the
/// Verdict reached, the target moved, the push made), and started again after each: the
/// proposal it was landing is resumed where it was, delivered once, and the one queued
/// behind it lands on top of it.
#[test]
fn a_server_killed_at_each_step_of_a_landing_resumes_it_and_delivers_it_once() {
    let team = Team::new();
    let upstream = team.main();
    let config = team.config(0o600, "127.0.0.1:0");
    let points = [
        "land-collected",
        "land-judged",
        "integration-acknowledged",
        "delivery-acknowledged",
    ];
    let server = Server::start_faulty(&team.work, &config, points[0]);
    let mut ids = Vec::new();
    for name in ["first", "second"] {
        let (status, answer) = server.json(
            "POST",
            "/v1/repositories/te/proposals",
            Some(TOKENS[2].1),
            &note_proposal(&format!("{name}.txt"), &format!("a note by {name}\n")),
        );
        assert_eq!(status, 202, "{answer}");
        ids.push(answer["id"].as_str().unwrap().to_owned());
    }
    server.wait_killed(Duration::from_secs(120));
    for point in &points[1..] {
        let server = Server::start_faulty(&team.work, &config, point);
        server.wait_killed(Duration::from_secs(120));
        let pushes = team.remote.push_count();
        assert!(pushes <= 1, "{pushes} pushes after a kill at {point}");
    }
    assert_eq!(team.remote.push_count(), 1, "the push before the last kill");

    let server = Server::start(&team.work, &config);
    let entries = wait_final(&server, &ids, Duration::from_secs(300));
    for entry in &entries {
        assert_eq!(entry["state"], "delivered", "{entry}");
    }
    let first = entries[0]["commit"].as_str().unwrap();
    let second = entries[1]["commit"].as_str().unwrap();
    assert_eq!(team.main(), second);
    let remote = team.remote.path();
    assert_eq!(git(remote, &["rev-parse", &format!("{second}^")]), first);
    assert_eq!(git(remote, &["rev-parse", &format!("{first}^")]), upstream);
    assert_eq!(team.remote.push_count(), 2, "each delivered exactly once");
}

/// The team pushes its own commit on top of a delivered one while the queue is idle: the
/// next proposal is sealed on the team's commit (the upstream's tip imported first) and
/// delivered on top of it.
#[test]
fn a_proposal_after_a_team_push_lands_on_the_team_commit() {
    let team = Team::new();
    let config = team.config(0o600, "127.0.0.1:0");
    let server = Server::start(&team.work, &config);
    let post = |name: &str| {
        let (status, answer) = server.json(
            "POST",
            "/v1/repositories/te/proposals",
            Some(TOKENS[0].1),
            &note_proposal(&format!("{name}.txt"), &format!("a note by {name}\n")),
        );
        assert_eq!(status, 202, "{answer}");
        answer["id"].as_str().unwrap().to_owned()
    };
    let first = post("first");
    let done = wait_final(
        &server,
        std::slice::from_ref(&first),
        Duration::from_secs(300),
    );
    assert_eq!(done[0]["state"], "delivered", "{}", done[0]);
    let delivered = done[0]["commit"].as_str().unwrap().to_owned();

    let remote = team.remote.path();
    let tree = git(remote, &["rev-parse", &format!("{delivered}^{{tree}}")]);
    let ours = git(
        remote,
        &[
            "commit-tree",
            &tree,
            "-p",
            &delivered,
            "-m",
            "the team's own commit",
        ],
    );
    git(remote, &["update-ref", "refs/heads/main", &ours]);

    let second = post("second");
    let done = wait_final(
        &server,
        std::slice::from_ref(&second),
        Duration::from_secs(300),
    );
    assert_eq!(done[0]["state"], "delivered", "{}", done[0]);
    let landed = done[0]["commit"].as_str().unwrap();
    assert_eq!(git(remote, &["rev-parse", &format!("{landed}^")]), ours);
    assert_eq!(team.main(), landed);
    assert_eq!(team.work.target(), landed);
}

/// Queues two proposals on a server that kills itself at `point`, starts it again, and
/// answers both proposals once final.
fn killed_at(team: &Team, point: &str) -> Vec<serde_json::Value> {
    let config = team.config(0o600, "127.0.0.1:0");
    let server = Server::start_faulty(&team.work, &config, point);
    let ids: Vec<String> = ["first", "second"]
        .iter()
        .map(|name| {
            let (status, answer) = server.json(
                "POST",
                "/v1/repositories/te/proposals",
                Some(TOKENS[1].1),
                &note_proposal(&format!("{name}.txt"), &format!("a note by {name}\n")),
            );
            assert_eq!(status, 202, "{answer}");
            answer["id"].as_str().unwrap().to_owned()
        })
        .collect();
    server.wait_killed(Duration::from_secs(120));
    let server = Server::start(&team.work, &config);
    wait_final(&server, &ids, Duration::from_secs(300))
}

/// Killed after the integration's claim and before the target moved: the move is unknown,
/// so the proposal ends inconclusive and is never moved again; the target did not move, so
/// the next proposal lands and is delivered.
#[test]
fn a_kill_after_the_integration_claim_leaves_it_unknown_and_the_queue_goes_on() {
    let team = Team::new();
    let entries = killed_at(&team, "integration-claimed");
    assert_eq!(entries[0]["state"], "inconclusive", "{}", entries[0]);
    assert!(
        entries[0]["reasons"].to_string().contains("unknown"),
        "{}",
        entries[0]
    );
    assert_eq!(entries[1]["state"], "delivered", "{}", entries[1]);
    assert_eq!(team.main(), entries[1]["commit"].as_str().unwrap());
    assert_eq!(team.remote.push_count(), 1);
    let found = git(
        team.remote.path(),
        &["log", "--all", "--format=%H", "--", "notes/first.txt"],
    );
    assert_eq!(found, "", "the unknown one was never pushed");
}

/// Killed after the delivery's claim and before the push: the delivery is unknown and never
/// retried (the proposal ends failed, nothing pushed); the owned target is the Candidate the
/// upstream does not have, so the next proposal is refused at its import, as docs/serve.md
/// says, until an operator decides.
#[test]
fn a_kill_after_the_delivery_claim_pushes_nothing_and_refuses_what_follows() {
    let team = Team::new();
    let upstream = team.main();
    let entries = killed_at(&team, "delivery-claimed");
    assert_eq!(entries[0]["state"], "failed", "{}", entries[0]);
    assert!(
        entries[0]["reasons"]
            .to_string()
            .contains("delivery unknown"),
        "{}",
        entries[0]
    );
    assert_eq!(team.work.target(), entries[0]["commit"].as_str().unwrap());
    assert_eq!(entries[1]["state"], "refused", "{}", entries[1]);
    assert_eq!(entries[1]["error"]["code"], "conflict", "{}", entries[1]);
    assert_eq!(team.main(), upstream);
    assert_eq!(team.remote.push_count(), 0);
}
