//! Delivery through the `sf` binary to a real remote on this machine (a bare repository
//! reached over file://): a Verified Candidate's commit M lands on the team's branch exactly
//! (parent the upstream commit, the verified tree, the proposal's message and author), once;
//! a second invoke pushes nothing; a remote that moved starts nothing; a refusing hook is
//! refused, never confirmed; a Candidate that is not Verified is never prepared.

mod land_support;

use std::path::{Path, PathBuf};

use land_support::{SUM_BUGGY, SUM_FIXED, SUM_NOT_FIXED, Work, git, write};
use sf_host::canonical::Digest;

/// The team's repository: a bare repository whose `main` has two commits, the second holding
/// the buggy `sum.sh`. Returns its name in `dir`.
fn team(dir: &Path) -> String {
    let work = dir.join("team-work");
    std::fs::create_dir_all(&work).unwrap();
    let run = |args: &[&str]| {
        let output = std::process::Command::new("git")
            .current_dir(&work)
            .args(["-c", "user.name=Team", "-c", "user.email=team@example.org"])
            .args(args)
            .output()
            .unwrap();
        assert!(output.status.success(), "git {args:?}: {output:?}");
    };
    run(&["init", "-q", "-b", "main"]);
    write(&work.join("README"), "the team's project\n");
    run(&["add", "."]);
    run(&["commit", "-q", "-m", "start"]);
    write(&work.join("sum.sh"), SUM_BUGGY);
    run(&["add", "."]);
    run(&["commit", "-q", "-m", "sum"]);
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

struct Delivery {
    work: Work,
    remote: PathBuf,
}

impl Delivery {
    fn new() -> Self {
        let work = Work::from_git_upstream(team, "main");
        work.author_slice("slice", &[]);
        work.freeze("slice").result();
        let remote = work.dir.join("team.git");
        Self { work, remote }
    }

    fn remote_ref(&self, name: &str) -> Option<String> {
        let output = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&self.remote)
            .args(["rev-parse", "--verify", "-q", name])
            .output()
            .unwrap();
        output
            .status
            .success()
            .then(|| String::from_utf8(output.stdout).unwrap().trim().to_owned())
    }

    /// Seals `sum` with a message and an author of its own, collects it; the digest.
    fn collected(&self, name: &str, sum: &str) -> String {
        let proposal = self.work.proposal(
            name,
            serde_json::json!({
                "message": {"title": "Count the first number too", "body": "sum.sh skipped it."},
                "author": {"name": "Ada Fixer", "email": "ada@example.org",
                           "time": 1_700_000_000u64, "offset": "+0100"},
                "edits": [{"path": "sum.sh",
                           "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
                           "text": sum}],
            }),
        );
        let candidate = self.work.sf(&[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--proposal",
            proposal.to_str().unwrap(),
        ]);
        let candidate = candidate.result()["digest"].as_str().unwrap().to_owned();
        self.work
            .sf(&[
                "collect",
                "--identity",
                "identity.json",
                "--candidate",
                &candidate,
                "--slice",
                "slice",
            ])
            .result();
        candidate
    }

    fn prepare(
        &self,
        candidate: &str,
        occurrence: u64,
        extra: &[&str],
    ) -> (PathBuf, serde_json::Value) {
        let prepared = self.work.dir.join(format!("delivery-{occurrence}.json"));
        let mut args = vec![
            "deliver",
            "prepare",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
            "--action",
            "deliver-sum",
            "--occurrence",
        ];
        let occurrence = occurrence.to_string();
        args.push(&occurrence);
        args.extend([
            "--owner",
            "owner-1",
            "--generation",
            "1",
            "--prepared-out",
            prepared.to_str().unwrap(),
        ]);
        args.extend_from_slice(extra);
        let value = self.work.sf(&args).result().clone();
        (prepared, value)
    }

    fn invoke(&self, prepared: &Path) -> (serde_json::Value, i32) {
        let output = self
            .work
            .command(&[
                "deliver",
                "invoke",
                "--identity",
                "identity.json",
                "--prepared",
                prepared.to_str().unwrap(),
                "--slice",
                "slice",
                "--gate",
                "gate.json",
            ])
            .output()
            .unwrap();
        let envelope: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("not an envelope: {output:?}"));
        assert_eq!(envelope["ok"], true, "{envelope}");
        (envelope["result"].clone(), output.status.code().unwrap())
    }

    fn inspect(&self, prepared: &Path) -> serde_json::Value {
        self.work
            .sf(&[
                "deliver",
                "inspect",
                "--identity",
                "identity.json",
                "--prepared",
                prepared.to_str().unwrap(),
            ])
            .result()
            .clone()
    }
}

#[test]
fn a_verified_candidate_lands_on_the_team_branch_as_the_sealed_commit_once() {
    let delivery = Delivery::new();
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
    let delivery = Delivery::new();
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
    let delivery = Delivery::new();
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
