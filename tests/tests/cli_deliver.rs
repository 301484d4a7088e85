//! Delivery through the `sf` binary to a real remote on this machine (a bare repository
//! reached over file://): a Verified Candidate's commit M lands on the team's branch exactly
//! (parent the upstream commit, the verified tree, the proposal's message and author), once;
//! a second invoke pushes nothing; a remote that moved starts nothing; a refusing hook is
//! refused, never confirmed; a Candidate that is not Verified is never prepared.

mod deliver_support;
mod land_support;

use std::path::{Path, PathBuf};

use deliver_support::{Delivery, invoke_args};
use land_support::{SUM_FIXED, SUM_NOT_FIXED, Work, git, team_project, write};

/// The team's repository: a bare clone of [`team_project`] in `dir`; its name there.
fn team(dir: &Path) -> String {
    let work = team_project(dir);
    let bare = dir.join("team.git");
    let output = std::process::Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&work)
        .arg(&bare)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    "team.git".into()
}

/// A delivery to `team.git` in the working directory, over file://.
fn new_delivery() -> Delivery {
    let work = Work::from_git_upstream(team, "main");
    let remote = work.dir.join("team.git");
    Delivery::at(work, remote)
}

#[test]
fn a_verified_candidate_lands_on_the_team_branch_as_the_sealed_commit_once() {
    let delivery = new_delivery();
    let upstream = delivery.remote_ref("refs/heads/main").unwrap();
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, intent) = delivery.prepare(&candidate, 1, &[]);
    let commit = intent["payload"]["commit"].as_str().unwrap().to_owned();
    assert_eq!(intent["payload"]["base"], upstream.as_str());
    assert_eq!(intent["payload"]["ref"], "refs/heads/main");

    let (observed, exit) = delivery.invoke(&prepared);
    assert_eq!(observed["invocation"], "confirmed", "{observed}");
    assert_eq!(observed["dispatched"], true);
    assert_eq!(exit, 0);
    assert_eq!(delivery.remote_ref("refs/heads/main").unwrap(), commit);
    // M itself: its parent is the upstream commit and its tree the one sealed (the owned
    // repository's M, byte for byte).
    let owned = delivery.work.dir.join("repo.git");
    assert_eq!(
        git(&delivery.remote, &["cat-file", "commit", &commit]),
        git(&owned, &["cat-file", "commit", &commit])
    );
    assert_eq!(
        git(&delivery.remote, &["rev-parse", &format!("{commit}^")]),
        upstream
    );
    // The marker names the Candidate and the Verdict.
    let marker = intent["payload"]["marker"].as_str().unwrap();
    let tag = git(&delivery.remote, &["cat-file", "tag", marker]);
    assert!(
        tag.contains(&format!("Sf-Candidate-Digest: {candidate}")),
        "{tag}"
    );
    assert!(
        tag.contains(&format!(
            "Sf-Verdict: {}",
            intent["payload"]["verdict"].as_str().unwrap()
        )),
        "{tag}"
    );

    // A second invoke pushes nothing; inspect says confirmed.
    let (again, exit) = delivery.invoke(&prepared);
    assert_eq!(again["invocation"], "confirmed", "{again}");
    assert_eq!(again["dispatched"], false);
    assert_eq!(exit, 0);
    let inspected = delivery.inspect(&prepared);
    assert_eq!(inspected["invocation"], "confirmed");
    assert_eq!(inspected["postcondition"], "desired-state-observed");

    // A fresh clone of the remote shows the proposal's message and author.
    let clone = delivery.work.dir.join("fresh");
    let output = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(&delivery.remote)
        .arg(&clone)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let log = git(
        &clone.join(".git"),
        &["log", "-1", "--format=%an <%ae> %at%n%s%n%b"],
    );
    assert!(
        log.starts_with(
            "Ada Fixer <ada@example.org> 1700000000\nCount the first number too\nsum.sh skipped it."
        ),
        "{log}"
    );
    assert_eq!(
        std::fs::read_to_string(clone.join("sum.sh")).unwrap(),
        SUM_FIXED
    );

    // The branch reset to U and the same intent invoked again: nothing is pushed.
    git(
        &delivery.remote,
        &["update-ref", "refs/heads/main", &upstream],
    );
    let (after_reset, _) = delivery.invoke(&prepared);
    assert_eq!(after_reset["dispatched"], false, "{after_reset}");
    assert_eq!(delivery.remote_ref("refs/heads/main").unwrap(), upstream);
}

#[test]
fn a_remote_that_moved_starts_nothing_and_a_failed_candidate_is_never_prepared() {
    let delivery = new_delivery();
    let failed = delivery.collected("no-fix", SUM_NOT_FIXED);
    let refused = delivery.work.sf(&[
        "deliver",
        "prepare",
        "--identity",
        "identity.json",
        "--candidate",
        &failed,
        "--slice",
        "slice",
        "--action",
        "deliver-sum",
        "--occurrence",
        "1",
        "--owner",
        "owner-1",
        "--generation",
        "1",
    ]);
    assert_eq!(refused.error_code(), "not-verified");

    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, _) = delivery.prepare(&candidate, 2, &[]);
    // Someone else pushes to main between prepare and invoke.
    let upstream = delivery.remote_ref("refs/heads/main").unwrap();
    let tree = git(
        &delivery.remote,
        &["rev-parse", &format!("{upstream}^{{tree}}")],
    );
    let other = git(
        &delivery.remote,
        &["commit-tree", &tree, "-p", &upstream, "-m", "someone else"],
    );
    git(&delivery.remote, &["update-ref", "refs/heads/main", &other]);
    let (observed, exit) = delivery.invoke(&prepared);
    assert_eq!(observed["invocation"], "not-dispatched", "{observed}");
    assert_eq!(observed["read"]["target"], other.as_str());
    assert!(
        observed["problem"].as_str().unwrap().contains("stale base"),
        "{observed}"
    );
    assert_eq!(exit, 7);
    assert_eq!(delivery.remote_ref("refs/heads/main").unwrap(), other);
    assert_eq!(
        delivery.remote_ref(observed_marker(&prepared).as_str()),
        None
    );
}

fn observed_marker(prepared: &Path) -> String {
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(prepared).unwrap()).unwrap();
    record["payload"]["marker"].as_str().unwrap().to_owned()
}

#[test]
fn a_refusing_remote_is_refused_and_a_side_branch_is_created_once() {
    let delivery = new_delivery();
    let hook = delivery.remote.join("hooks/pre-receive");
    write(
        &hook,
        "#!/bin/sh\necho 'protected branch: no direct pushes' >&2\nexit 1\n",
    );
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let upstream = delivery.remote_ref("refs/heads/main").unwrap();
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, _) = delivery.prepare(&candidate, 1, &[]);
    let (observed, exit) = delivery.invoke(&prepared);
    assert_eq!(observed["invocation"], "refused", "{observed}");
    assert_eq!(exit, 8);
    assert!(
        observed["problem"]
            .as_str()
            .unwrap()
            .contains("pre-receive hook declined"),
        "{observed}"
    );
    assert_eq!(delivery.remote_ref("refs/heads/main").unwrap(), upstream);
    assert_eq!(delivery.inspect(&prepared)["invocation"], "refused");

    // The side branch: created, never moved; the upstream branch untouched.
    std::fs::remove_file(&hook).unwrap();
    let (side, intent) = delivery.prepare(&candidate, 2, &["--side-branch"]);
    let name = format!("refs/heads/sf/{}", candidate.trim_start_matches("sha256:"));
    assert_eq!(intent["payload"]["ref"], name.as_str());
    let (observed, _) = delivery.invoke(&side);
    assert_eq!(observed["invocation"], "confirmed", "{observed}");
    assert_eq!(
        delivery.remote_ref(&name).unwrap(),
        intent["payload"]["commit"].as_str().unwrap()
    );
    assert_eq!(delivery.remote_ref("refs/heads/main").unwrap(), upstream);
}

#[test]
fn land_deliver_integrates_then_delivers_and_import_from_upstream_takes_the_new_tip() {
    let delivery = new_delivery();
    let upstream = delivery.remote_ref("refs/heads/main").unwrap();
    let candidate = delivery.collected("fix", SUM_FIXED);
    let landed = delivery.work.land(&candidate, "slice", &["--deliver"]);
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated", "{result}");
    let observed = &result["delivery"]["observation"];
    assert_eq!(observed["invocation"], "confirmed", "{result}");
    let commit = observed["commit"].as_str().unwrap();
    assert_eq!(delivery.work.target(), commit);
    assert_eq!(delivery.remote_ref("refs/heads/main").unwrap(), commit);
    // A replay of the landing delivers nothing again.
    let again = delivery.work.land(&candidate, "slice", &["--deliver"]);
    assert_eq!(
        again.result()["delivery"]["observation"]["dispatched"],
        false
    );
    assert_eq!(
        again.result()["delivery"]["observation"]["invocation"],
        "confirmed"
    );

    // The team builds on M; the next import fetches that tip as the next base, with the same
    // upstream recorded, and the target follows it forward.
    let tree = git(
        &delivery.remote,
        &["rev-parse", &format!("{commit}^{{tree}}")],
    );
    let next = git(
        &delivery.remote,
        &[
            "commit-tree",
            &tree,
            "-p",
            commit,
            "-m",
            "the team's next commit",
        ],
    );
    git(&delivery.remote, &["update-ref", "refs/heads/main", &next]);
    let imported = delivery.work.sf(&[
        "repo",
        "import",
        "--identity",
        "identity.json",
        "--from-upstream",
        "--advance",
    ]);
    let imported = imported.result();
    assert_eq!(imported["record"]["commit"], next.as_str(), "{imported}");
    assert_eq!(imported["record"]["rev"], "refs/heads/main");
    assert_eq!(
        imported["record"]["source"],
        delivery.remote.to_str().unwrap()
    );
    assert_eq!(imported["upstream"]["branch"], "main");
    assert_eq!(delivery.work.target(), next);
    assert_ne!(upstream, next);
}

/// Installs a post-receive hook on the remote that appends one line per push that updated a
/// ref; returns the log's path.
fn count_pushes(remote: &Path) -> PathBuf {
    let log = remote.join("pushes.log");
    let hook = remote.join("hooks/post-receive");
    write(
        &hook,
        &format!(
            "#!/bin/sh\ncat >/dev/null\necho push >> '{}'\n",
            log.display()
        ),
    );
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    log
}

fn pushes(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

#[test]
fn eight_concurrent_invokes_of_one_intent_push_exactly_once() {
    let delivery = new_delivery();
    let log = count_pushes(&delivery.remote);
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, intent) = delivery.prepare(&candidate, 1, &[]);
    let children: Vec<_> = (0..8)
        .map(|_| {
            delivery
                .work
                .command(&invoke_args(&prepared))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut dispatched = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        let envelope: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("not an envelope: {output:?}"));
        if envelope["ok"] == true && envelope["result"]["dispatched"] == true {
            dispatched += 1;
        }
    }
    assert_eq!(dispatched, 1);
    assert_eq!(pushes(&log), 1);
    assert_eq!(
        delivery.remote_ref("refs/heads/main").unwrap(),
        intent["payload"]["commit"].as_str().unwrap()
    );
    assert_eq!(delivery.inspect(&prepared)["invocation"], "confirmed");
}

#[test]
fn a_deliverer_killed_at_each_fault_point_leaves_a_truthful_inspection_and_no_second_push() {
    for (point, expected, pushed) in [
        ("delivery-claimed", "unknown", false),
        ("delivery-submitted", "unknown", false),
        ("delivery-acknowledged", "confirmed", true),
    ] {
        let delivery = new_delivery();
        let log = count_pushes(&delivery.remote);
        let upstream = delivery.remote_ref("refs/heads/main").unwrap();
        let candidate = delivery.collected("fix", SUM_FIXED);
        let (prepared, intent) = delivery.prepare(&candidate, 1, &[]);
        let status = delivery
            .work
            .faulty(point, &invoke_args(&prepared))
            .output()
            .unwrap()
            .status;
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9),
            "{point}"
        );
        let inspected = delivery.inspect(&prepared);
        assert_eq!(inspected["invocation"], expected, "{point}: {inspected}");
        let commit = intent["payload"]["commit"].as_str().unwrap();
        let on_remote = delivery.remote_ref("refs/heads/main").unwrap();
        assert_eq!(on_remote == commit, pushed, "{point}");
        assert_eq!(on_remote == upstream, !pushed, "{point}");
        // Invoked again, nothing more is pushed: the claim stays.
        let (again, _) = delivery.invoke(&prepared);
        assert_eq!(again["dispatched"], false, "{point}: {again}");
        assert_eq!(again["invocation"], expected, "{point}: {again}");
        assert_eq!(pushes(&log), usize::from(pushed), "{point}");
    }
}

/// A pre-receive hook that says it started, then waits until `release` exists (at most a
/// minute), then accepts.
fn hold_pushes(remote: &Path) -> (PathBuf, PathBuf) {
    let started = remote.join("hook-started");
    let release = remote.join("hook-release");
    let hook = remote.join("hooks/pre-receive");
    write(
        &hook,
        &format!(
            "#!/bin/sh\ncat >/dev/null\ntouch '{}'\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\nexit 0\n",
            started.display(),
            release.display()
        ),
    );
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (started, release)
}

fn wait_for(path: &Path) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < until,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Waits (at most 5 s) until the remote's branch names `commit`, then says whether the
/// remote holds the intent's marker: whether the push landed.
fn settle(delivery: &Delivery, marker: &str, commit: &str) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        if delivery.remote_ref("refs/heads/main").as_deref() == Some(commit) {
            return delivery.remote_ref(marker).is_some();
        }
        if std::time::Instant::now() > until {
            return delivery.remote_ref(marker).is_some();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn a_remote_that_stops_answering_mid_push_is_unknown_and_a_later_inspect_reads_the_truth() {
    let delivery = new_delivery();
    let log = count_pushes(&delivery.remote);
    let (started, release) = hold_pushes(&delivery.remote);
    write(
        &delivery.work.dir.join("sf.toml"),
        "[delivery]\npush_timeout_seconds = 2\n",
    );
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, intent) = delivery.prepare(&candidate, 1, &[]);
    let output = delivery
        .work
        .command(&[&["--config", "sf.toml"][..], &invoke_args(&prepared)].concat())
        .output()
        .unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let observed = &envelope["result"];
    assert!(started.exists(), "the push reached the server");
    assert_eq!(observed["invocation"], "unknown", "{observed}");
    assert_eq!(observed["dispatched"], true);
    assert!(
        observed["problem"].as_str().unwrap().contains("timed out"),
        "{observed}"
    );
    assert_eq!(output.status.code(), Some(6));
    // The server goes on once the hook is released; whatever it did, inspect says it.
    std::fs::write(&release, "").unwrap();
    let commit = intent["payload"]["commit"].as_str().unwrap();
    let marker = intent["payload"]["marker"].as_str().unwrap();
    let landed = settle(&delivery, marker, commit);
    let inspected = delivery.inspect(&prepared);
    let expected = if landed { "confirmed" } else { "unknown" };
    assert_eq!(inspected["invocation"], expected, "{inspected}");
    assert!(pushes(&log) <= 1);
}

#[test]
fn a_deliverer_killed_while_its_push_is_in_flight_never_pushes_twice() {
    let delivery = new_delivery();
    let log = count_pushes(&delivery.remote);
    let (started, release) = hold_pushes(&delivery.remote);
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, intent) = delivery.prepare(&candidate, 1, &[]);
    let mut child = delivery
        .work
        .command(&invoke_args(&prepared))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(&started);
    child.kill().unwrap();
    child.wait().unwrap();
    // Killed mid-push, before it could read anything back: a claim, no receipt.
    let inspected = delivery.inspect(&prepared);
    assert_eq!(inspected["receipt"], serde_json::Value::Null, "{inspected}");
    std::fs::write(&release, "").unwrap();
    let commit = intent["payload"]["commit"].as_str().unwrap();
    let marker = intent["payload"]["marker"].as_str().unwrap();
    let landed = settle(&delivery, marker, commit);
    let (again, _) = delivery.invoke(&prepared);
    assert_eq!(again["dispatched"], false, "{again}");
    let expected = if landed { "confirmed" } else { "unknown" };
    assert_eq!(again["invocation"], expected, "{again}");
    assert_eq!(delivery.inspect(&prepared)["invocation"], expected);
    assert!(pushes(&log) <= 1);
}

#[test]
fn records_are_write_once_and_verified_when_read() {
    let delivery = new_delivery();
    let owned = delivery.work.dir.join("repo.git");
    // The upstream: the same again is a replay, another is a conflict, a password is refused
    // before anything is written.
    let url = delivery.remote.to_str().unwrap();
    let same = delivery.work.sf(&[
        "repo",
        "upstream",
        "--identity",
        "identity.json",
        "--url",
        url,
        "--branch",
        "main",
    ]);
    assert_eq!(same.result()["url"], url);
    let other = delivery.work.sf(&[
        "repo",
        "upstream",
        "--identity",
        "identity.json",
        "--url",
        "git://127.0.0.1/other.git",
        "--branch",
        "main",
    ]);
    assert_eq!(other.error_code(), "conflict");
    let before = delivery.work.hash("slice");
    for url in [
        "https://ada:secret@example.org/team.git",
        "ext::sh -c id",
        "-oProxyCommand=id",
    ] {
        let flag = format!("--url={url}");
        let refused = delivery.work.sf(&[
            "repo",
            "upstream",
            "--identity",
            "identity.json",
            &flag,
            "--branch",
            "main",
        ]);
        assert_eq!(refused.error_code(), "invalid-input", "{url}");
        assert!(
            !refused.error_message().contains("secret"),
            "{}",
            refused.error_message()
        );
    }
    assert_eq!(delivery.work.hash("slice"), before);

    // One intent per occurrence: another Candidate for it is a conflict.
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, _) = delivery.prepare(&candidate, 1, &[]);
    let conflict = delivery.work.sf(&[
        "deliver",
        "prepare",
        "--identity",
        "identity.json",
        "--candidate",
        &candidate,
        "--slice",
        "slice",
        "--action",
        "deliver-sum",
        "--occurrence",
        "1",
        "--owner",
        "owner-2",
        "--generation",
        "1",
    ]);
    assert_eq!(conflict.error_code(), "conflict");

    // A receipt that does not answer the claim is corrupt, never taken as confirmed.
    let (observed, _) = delivery.invoke(&prepared);
    assert_eq!(observed["invocation"], "confirmed");
    let receipt = git(
        &owned,
        &["for-each-ref", "--format=%(refname)", "refs/sf/deliveries/"],
    )
    .lines()
    .find(|name| name.ends_with("/receipt"))
    .unwrap()
    .to_owned();
    let initial = delivery.work.initial();
    git(&owned, &["update-ref", &receipt, &initial]);
    let corrupt = delivery.work.sf(&[
        "deliver",
        "inspect",
        "--identity",
        "identity.json",
        "--prepared",
        prepared.to_str().unwrap(),
    ]);
    assert_eq!(corrupt.error_code(), "corrupt");
}

#[test]
fn an_ssh_upstream_goes_through_the_configured_ssh_command_with_the_agent_socket_only() {
    let (_tmp, dir) = sf_tests::private_dir();
    let bare = dir.join("team.git");
    let output = std::process::Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(team_project(&dir))
        .arg(&bare)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let url = format!("ssh://git@git.example.invalid{}", bare.display());
    let source = bare.to_str().unwrap().to_owned();
    let work = Work::from_git_upstream_at(move |_| source, "main", Some(&url));
    let delivery = Delivery::at(work, bare.clone());
    // A stand-in for ssh: runs the remote command here, and notes the agent socket it got and
    // whether any other variable of the caller reached it.
    let seen = delivery.work.dir.join("ssh-seen");
    let ssh = delivery.work.dir.join("fake-ssh");
    write(
        &ssh,
        &format!(
            "#!/bin/sh\necho \"sock=$SSH_AUTH_SOCK other=$SF_TEST_SECRET\" >> '{}'\nfor last; do :; done\nexec sh -c \"$last\"\n",
            seen.display()
        ),
    );
    std::fs::set_permissions(&ssh, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let candidate = delivery.collected("fix", SUM_FIXED);
    let (prepared, intent) = delivery.prepare(&candidate, 1, &[]);

    // Without an SSH command, Git's SSH is off: the remote cannot be read, nothing is claimed.
    let (observed, exit) = delivery.invoke(&prepared);
    assert_eq!(observed["invocation"], "not-dispatched", "{observed}");
    assert_eq!(exit, 7);
    assert!(!seen.exists());

    write(
        &delivery.work.dir.join("sf.toml"),
        &format!("[delivery]\nssh_command = \"{}\"\n", ssh.display()),
    );
    let output = delivery
        .work
        .command(&[&["--config", "sf.toml"][..], &invoke_args(&prepared)].concat())
        .env("SSH_AUTH_SOCK", "/run/agent.sock")
        .env("SF_TEST_SECRET", "leaked")
        .output()
        .unwrap();
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(envelope["result"]["invocation"], "confirmed", "{envelope}");
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/main"]),
        intent["payload"]["commit"].as_str().unwrap()
    );
    let seen = std::fs::read_to_string(&seen).unwrap();
    assert!(seen.lines().count() >= 2, "{seen}");
    assert!(
        seen.lines()
            .all(|line| line == "sock=/run/agent.sock other="),
        "{seen}"
    );
}
