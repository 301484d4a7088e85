//! `sf serve` refuses what it must through the binary, and queues nothing when it does: a
//! request without a valid bearer token gets 401; a bad request gets its 4xx with sf's error
//! envelope; a configuration that would listen beyond loopback without TLS, or a tokens file
//! others can read, stops the server before it listens. The pages answer: the queue as HTML
//! without a script, the metrics as Prometheus text, and a proposal's state and report.

mod land_support;
mod serve_support;

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use serde_json::json;
use serve_support::{Server, TOKENS, Team, note_proposal, wait_final};
use sf_test_support::browser::chromium;

/// The sum of every `sf_serve_proposals` sample of the metrics.
fn proposals_queued(server: &Server) -> u64 {
    server
        .metrics()
        .lines()
        .filter(|line| line.starts_with("sf_serve_proposals{"))
        .map(|line| line.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

/// Asserts that `body` is sf's error envelope with `code`.
fn assert_envelope(body: &serde_json::Value, code: &str) {
    assert_eq!(body["schemaVersion"], 1, "{body}");
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

#[test]
fn no_valid_token_is_401_and_bad_requests_are_4xx_envelopes_and_nothing_is_queued() {
    let team = Team::new();
    let config = team.config(0o600, "127.0.0.1:0");
    let server = Server::start(&team.work, &config);
    let path = "/v1/repositories/te/proposals";
    let good = note_proposal("a.txt", "a\n");

    // No token, a wrong one, another scheme: 401, a Bearer challenge, nothing queued.
    for token in [None, Some("x".repeat(32)), Some(TOKENS[0].1.to_uppercase())] {
        let (status, body) = server.json("POST", path, token.as_deref(), &good);
        assert_eq!(status, 401, "{body}");
        assert_envelope(&body, "unauthorized");
    }
    let (status, _) = server.json(
        "GET",
        "/v1/proposals/00000000000000000000000000000000",
        None,
        &serde_json::Value::Null,
    );
    assert_eq!(status, 401);
    assert_eq!(proposals_queued(&server), 0);

    // Bad requests, with a valid token.
    let token = Some(TOKENS[1].1);
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (path, b"not json".to_vec(), 400, "invalid-input"),
        (path, b"[1]".to_vec(), 400, "invalid-input"),
        (
            path,
            serde_json::json!({"slice": "nope", "diff": "x"})
                .to_string()
                .into_bytes(),
            400,
            "invalid-input",
        ),
        (
            path,
            serde_json::json!({"slice": "notes"})
                .to_string()
                .into_bytes(),
            400,
            "invalid-input",
        ),
        (
            path,
            serde_json::json!({"slice": "notes", "diff": "x", "proposal": good["proposal"]})
                .to_string()
                .into_bytes(),
            400,
            "invalid-input",
        ),
        (
            path,
            serde_json::json!({"slice": "notes", "proposal": {"edits": "none"}})
                .to_string()
                .into_bytes(),
            400,
            "invalid-input",
        ),
        (
            path,
            serde_json::json!({"slice": "notes", "diff": "x", "lane": 2})
                .to_string()
                .into_bytes(),
            400,
            "invalid-input",
        ),
        (
            "/v1/repositories/other/proposals",
            good.to_string().into_bytes(),
            404,
            "not-found",
        ),
        (path, vec![b' '; 40 * 1024 * 1024], 413, "too-large"),
    ];
    for (at, body, status, code) in cases {
        let (got, answer) = server.request("POST", at, token, &body);
        let answer: serde_json::Value = serde_json::from_slice(&answer)
            .unwrap_or_else(|_| panic!("{at}: {got}: {}", String::from_utf8_lossy(&answer)));
        assert_eq!(got, status, "{answer}");
        assert_envelope(&answer, code);
    }
    let (status, body) = server.json(
        "GET",
        "/v1/proposals/unknown",
        token,
        &serde_json::Value::Null,
    );
    assert_eq!(status, 404);
    assert_envelope(&body, "not-found");
    let (status, body) = server.json("GET", "/v2/anything", token, &serde_json::Value::Null);
    assert_eq!(status, 404);
    assert_envelope(&body, "not-found");
    assert_eq!(proposals_queued(&server), 0);
    assert_eq!(team.remote.push_count(), 0);

    // One good proposal: 202 queued, then delivered; its state, report and the pages.
    let (status, accepted) = server.json("POST", path, token, &good);
    assert_eq!(status, 202, "{accepted}");
    assert_eq!(accepted["state"], "queued");
    let id = accepted["id"].as_str().unwrap().to_owned();
    let done = wait_final(&server, std::slice::from_ref(&id), Duration::from_secs(300));
    let entry = &done[0];
    assert_eq!(entry["state"], "delivered", "{entry}");
    assert_eq!(entry["verdict"]["outcome"], "verified", "{entry}");
    assert_eq!(entry["client"], TOKENS[1].0);
    assert_eq!(entry["commit"].as_str().unwrap(), team.main(), "{entry}");
    assert_eq!(team.remote.push_count(), 1);

    let (status, page) = server.request("GET", "/", None, b"");
    assert_eq!(status, 200);
    let page = String::from_utf8(page).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.contains(&id) && page.contains("delivered"), "{page}");
    assert!(!page.contains("<script"), "{page}");

    let (status, report) = server.request("GET", &format!("/v1/proposals/{id}/report"), token, b"");
    let report = String::from_utf8(report).unwrap();
    assert_eq!(status, 200, "{report}");
    assert!(report.contains("<html"), "{report}");
    assert!(
        report.contains(entry["candidate"].as_str().unwrap()),
        "the report names the Candidate"
    );
    let (status, _) = server.request("GET", &format!("/v1/proposals/{id}/report"), None, b"");
    assert_eq!(status, 401);

    let metrics = server.metrics();
    for line in [
        "sf_serve_proposals{state=\"delivered\"} 1",
        "sf_serve_queue_depth 0",
        "sf_serve_verdicts_total{outcome=\"verified\"} 1",
        "sf_serve_deliveries_total 1",
    ] {
        assert!(
            metrics.lines().any(|got| got == line),
            "{line} in {metrics}"
        );
    }
    // Prometheus's own parser reads the metrics: each family of its type, with its samples.
    let families = sf_test_support::prometheus::parse(&metrics);
    let sample = |family: &str, name: &str, labels: serde_json::Value| {
        let found = &families[family];
        found["samples"]
            .as_array()
            .unwrap_or_else(|| panic!("no family {family}: {families}"))
            .iter()
            .find(|sample| sample[0] == name && sample[1] == labels)
            .map(|sample| (found["type"].clone(), sample[2].as_f64()))
            .unwrap_or_else(|| panic!("no {name} {labels} in {families}"))
    };
    let delivered = json!({"state": "delivered"});
    assert_eq!(
        sample("sf_serve_proposals", "sf_serve_proposals", delivered),
        (json!("gauge"), Some(1.0))
    );
    assert_eq!(
        sample("sf_serve_queue_depth", "sf_serve_queue_depth", json!({})),
        (json!("gauge"), Some(0.0))
    );
    let verified = json!({"outcome": "verified"});
    assert_eq!(
        sample("sf_serve_verdicts", "sf_serve_verdicts_total", verified),
        (json!("counter"), Some(1.0))
    );
    assert_eq!(
        sample(
            "sf_serve_deliveries",
            "sf_serve_deliveries_total",
            json!({})
        ),
        (json!("counter"), Some(1.0))
    );
    assert_eq!(
        sample(
            "sf_serve_lane_depth",
            "sf_serve_lane_depth",
            json!({"lane": "te"})
        ),
        (json!("gauge"), Some(0.0))
    );
    // One proposal ended: the histogram counts it once, in every bucket from its time up.
    let ended = |name: &str, labels| sample("sf_serve_time_in_queue_seconds", name, labels);
    assert_eq!(
        ended("sf_serve_time_in_queue_seconds_count", json!({})),
        (json!("histogram"), Some(1.0))
    );
    assert_eq!(
        ended(
            "sf_serve_time_in_queue_seconds_bucket",
            json!({"le": "+Inf"})
        ),
        (json!("histogram"), Some(1.0))
    );
    assert_eq!(
        ended(
            "sf_serve_time_in_queue_seconds_bucket",
            json!({"le": "3600"})
        ),
        (json!("histogram"), Some(1.0))
    );

    // A real browser renders the queue page (served over HTTP) and the report: the proposal,
    // its state and its Candidate are in the rendered DOM, and no script element is.
    let dom = chromium(&format!("http://{}/", server.address), &["--dump-dom"]);
    assert!(dom.contains(&id) && dom.contains("delivered"), "{dom}");
    assert!(!dom.contains("<script"), "{dom}");
    let (_pages, pages) = sf_tests::private_dir();
    let file = pages.join("report.html");
    std::fs::write(&file, &report).unwrap();
    let dom = chromium(&format!("file://{}", file.display()), &["--dump-dom"]);
    assert!(dom.contains(entry["candidate"].as_str().unwrap()), "{dom}");
    assert!(dom.contains("verified"), "{dom}");
}

#[test]
fn a_public_listen_a_readable_tokens_file_or_a_shared_state_stop_it_before_it_listens() {
    let team = Team::new();
    for (mode, listen, named) in [
        (0o600, "0.0.0.0:0", "loopback"),
        (0o644, "127.0.0.1:0", "chmod 600"),
    ] {
        let config = team.config(mode, listen);
        let output = sf_tests::plugins::sf()
            .current_dir(&team.work.dir)
            .arg("--config")
            .arg(&config)
            .arg("serve")
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(named), "{stderr}");
        assert!(output.stdout.is_empty(), "it never listened: {output:?}");
    }
    assert!(!team.work.dir.join("state").exists(), "no state was made");

    // A state directory others may write: whoever writes the queue lands what they like.
    let config = team.config(0o600, "127.0.0.1:0");
    let state = team.work.dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let output = sf_tests::plugins::sf()
        .arg("--config")
        .arg(&config)
        .arg("serve")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("chmod 700"),
        "{output:?}"
    );
    assert_eq!(
        std::fs::read_dir(&state).unwrap().count(),
        0,
        "no queue was made"
    );
}

/// A client with `[serve] in_flight` proposals not yet final is answered 429 (sf's envelope,
/// nothing queued) until one of them ends; another client is served meanwhile.
#[test]
fn a_client_at_its_in_flight_limit_is_answered_429_until_one_ends() {
    let team = Team::checking_for(2);
    let config = team.config(0o600, "127.0.0.1:0");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replacen("[serve]\n", "[serve]\nin_flight = 1\n", 1),
    )
    .unwrap();
    let server = Server::start(&team.work, &config);
    let path = "/v1/repositories/te/proposals";
    let (status, first) = server.json(
        "POST",
        path,
        Some(TOKENS[0].1),
        &note_proposal("a.txt", "a\n"),
    );
    assert_eq!(status, 202, "{first}");
    let (status, body) = server.json(
        "POST",
        path,
        Some(TOKENS[0].1),
        &note_proposal("b.txt", "b\n"),
    );
    assert_eq!(status, 429, "{body}");
    assert_envelope(&body, "too-many");
    assert!(body.to_string().contains("in_flight"), "{body}");
    assert_eq!(
        proposals_queued(&server),
        1,
        "nothing queued for the refused one"
    );
    let (status, other) = server.json(
        "POST",
        path,
        Some(TOKENS[1].1),
        &note_proposal("c.txt", "c\n"),
    );
    assert_eq!(status, 202, "another client is served: {other}");

    let id = first["id"].as_str().unwrap().to_owned();
    let done = wait_final(&server, &[id], Duration::from_secs(300));
    assert_eq!(done[0]["state"], "delivered", "{}", done[0]);
    let (status, again) = server.json(
        "POST",
        path,
        Some(TOKENS[0].1),
        &note_proposal("b.txt", "b\n"),
    );
    assert_eq!(status, 202, "once the first ended: {again}");
}

#[test]
fn proposals_the_seal_refuses_end_refused_and_without_delivery_they_land_one_on_another() {
    let team = Team::new();
    let upstream = team.main();
    let config = team.config_delivering(0o600, "127.0.0.1:0", false);
    let server = Server::start(&team.work, &config);
    let token = Some(TOKENS[0].1);
    let path = "/v1/repositories/te/proposals";
    let outside = serde_json::json!({
        "slice": "notes",
        "proposal": {"edits": [{"path": "README", "prior": null, "text": "mine\n"}]},
    });
    let stale = serde_json::json!({
        "slice": "notes",
        "diff": "diff --git a/notes/x.txt b/notes/x.txt\n--- a/notes/x.txt\n+++ b/notes/x.txt\n\
                 @@ -1 +1 @@\n-old\n+new\n",
    });
    let mut ids = Vec::new();
    for body in [
        note_proposal("one.txt", "one\n"),
        outside,
        stale,
        serve_support::note_diff("two.txt", "two"),
    ] {
        let (status, answer) = server.json("POST", path, token, &body);
        assert_eq!(status, 202, "{answer}");
        ids.push(answer["id"].as_str().unwrap().to_owned());
    }
    let entries = wait_final(&server, &ids, Duration::from_secs(300));
    assert_eq!(entries[0]["state"], "landed", "{}", entries[0]);
    for (refused, code, field) in [
        (&entries[1], "rejected", "the request's proposal: "),
        (&entries[2], "diff-refused", "the request's diff: "),
    ] {
        assert_eq!(refused["state"], "refused", "{refused}");
        assert!(refused["candidate"].is_null(), "{refused}");
        assert_eq!(refused["error"]["code"], code, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(field)),
            "{refused}"
        );
    }
    assert_eq!(entries[3]["state"], "landed", "{}", entries[3]);
    // Without delivery: the owned target moved, one Candidate on the other; the remote did
    // not.
    let first = entries[0]["commit"].as_str().unwrap();
    let second = entries[3]["commit"].as_str().unwrap();
    assert_eq!(team.work.target(), second);
    let owned = team.work.dir.join("repo.git");
    assert_eq!(
        land_support::git(&owned, &["rev-parse", &format!("{second}^")]),
        first
    );
    assert_eq!(team.main(), upstream);
    assert_eq!(team.remote.push_count(), 0);
    let metrics = server.metrics();
    assert!(
        metrics
            .lines()
            .any(|line| line == "sf_serve_deliveries_total 0"),
        "{metrics}"
    );
}

#[test]
fn sf_serve_is_a_usage_error_without_a_config_or_with_json() {
    for args in [
        &["serve"][..],
        &["--json", "--config", "x.toml", "serve"][..],
    ] {
        let output = sf_tests::plugins::sf().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(text.contains("usage"), "{args:?}: {text}");
    }
}

/// A client that starts a request and never finishes its head is dropped (within the
/// server's 30 seconds and some slack), and others are served meanwhile.
#[test]
fn a_request_head_that_never_ends_is_dropped_and_others_are_served() {
    use std::io::{Read as _, Write as _};
    let team = Team::new();
    let config = team.config(0o600, "127.0.0.1:0");
    let server = Server::start(&team.work, &config);
    let mut idle: Vec<std::net::TcpStream> = (0..20)
        .map(|_| std::net::TcpStream::connect(server.address).unwrap())
        .collect();
    for stream in &mut idle {
        stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    }
    let (status, _) = server.request("GET", "/metrics", None, b"");
    assert_eq!(status, 200, "served while 20 heads are unfinished");
    let started = std::time::Instant::now();
    let stream = &mut idle[0];
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = Vec::new();
    // Closed by the server: the read ends (with or without a 408 first) well before ours.
    let _ = stream.read_to_end(&mut answer);
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(50), "held for {waited:?}");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}
