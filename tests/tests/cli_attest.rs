//! Evidence that travels with the commit, through the `sf` binary and a `git daemon` on
//! loopback: with `[attest] key` configured, `sf land --deliver` pushes the landed commit and
//! its signed attestation in one atomic push; from a fresh clone of the remote (or the
//! remote's URL) and only the public key, `sf verify` says Verified, and refuses, each with
//! its own exit status, another key, a commit without an attestation, a changed byte, an
//! attestation moved to another commit's ref, and a malformed envelope. A Failed Candidate is
//! never attested; a push the remote refuses leaves neither the branch nor the attestation;
//! a re-delivery never writes a second attestation; and an independent DSSE implementation
//! (Python's securesystemslib) accepts sf's envelope and refuses a changed one.

mod deliver_support;
mod land_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use deliver_support::{Delivery, invoke_args};
use land_support::{SUM_FIXED, SUM_NOT_FIXED, Work, git, team_project, write};
use sf_test_support::attest::verify_with_securesystemslib;
use sf_test_support::git_servers::{BareRemote, GitDaemon};
use sf_tests::plugins::{Envelope, sf};

/// The team's repository served by `git daemon`, and a delivery to it whose working
/// directory's `sf.toml` attests landings with a fresh Ed25519 key.
struct Attesting {
    remote: BareRemote,
    daemon: GitDaemon,
    delivery: Delivery,
    /// The signing key's public half, as `ssh-keygen -y` prints it.
    public: String,
    /// An `allowed_signers` file trusting the signing key.
    trusted: PathBuf,
    /// An `authorized_keys` file trusting only another key.
    other: PathBuf,
}

impl Attesting {
    fn new() -> Self {
        let (_tmp, dir) = sf_tests::private_dir();
        let remote = BareRemote::from_repository(&team_project(&dir));
        let daemon = GitDaemon::start(remote.root());
        let url = daemon.url(remote.name());
        let path = remote.path().to_owned();
        let source = path.to_str().unwrap().to_owned();
        let work = Work::from_git_upstream_at(move |_| source, "main", Some(&url));
        let delivery = Delivery::at(work, path);
        let dir = delivery.work.dir.clone();
        let key = keygen(&dir, "attest_ed25519", "sf-landing");
        let other_key = keygen(&dir, "other_ed25519", "someone-else");
        let public = public_of(&key);
        let trusted = dir.join("allowed_signers");
        write(&trusted, &format!("release@team.example {public}\n"));
        let other = dir.join("authorized_keys");
        write(
            &other,
            &format!("# not the signer\n{} someone-else\n", public_of(&other_key)),
        );
        write(
            &dir.join("sf.toml"),
            &format!("[attest]\nkey = {:?}\n", key.to_str().unwrap()),
        );
        Self {
            remote,
            daemon,
            delivery,
            public,
            trusted,
            other,
        }
    }

    fn url(&self) -> String {
        self.daemon.url(self.remote.name())
    }

    /// `sf land --deliver` of `sum`, sealed and collected; the result.
    fn land(&self, name: &str, sum: &str) -> Envelope {
        let candidate = self.delivery.collected(name, sum);
        self.delivery.work.land(&candidate, "slice", &["--deliver"])
    }
}

/// `ssh-keygen -t ed25519` without a passphrase at `dir/name`; the private key's path.
fn keygen(dir: &Path, name: &str, comment: &str) -> PathBuf {
    let path = dir.join(name);
    let output = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", comment, "-f"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    path
}

/// The public key of the private key at `key` (`ssh-keygen -y`), without a comment.
fn public_of(key: &Path) -> String {
    let output = Command::new("ssh-keygen")
        .arg("-y")
        .arg("-f")
        .arg(key)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let line = String::from_utf8(output.stdout).unwrap();
    line.split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `sf --json verify` run from `cwd` with no configuration and an empty HOME: only the
/// repository and the trusted keys.
fn verify(cwd: &Path, repo: &str, commit: &str, trusted: &Path) -> Envelope {
    verify_with(cwd, repo, commit, trusted, &[])
}

/// [`verify`] with `extra` arguments.
fn verify_with(cwd: &Path, repo: &str, commit: &str, trusted: &Path, extra: &[&str]) -> Envelope {
    let home = cwd.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let output = sf()
        .current_dir(cwd)
        .env("HOME", &home)
        .env_remove("SF_CONFIG")
        .args(["--json", "verify", "--repo", repo, "--commit", commit])
        .arg("--trusted-keys")
        .arg(trusted)
        .args(extra)
        .output()
        .unwrap();
    Envelope::parse(output)
}

/// The refusal `envelope` carries: its code and exit status.
fn refusal(envelope: &Envelope) -> (String, i32) {
    assert_eq!(envelope.json["ok"], false, "{}", envelope.json);
    (
        envelope.json["error"]["code"].as_str().unwrap().to_owned(),
        envelope.code.unwrap(),
    )
}

/// A fresh clone of `url` in `dir` that fetched the attestations too; its path.
fn clone_with_attestations(url: &str, dir: &Path) -> PathBuf {
    let clone = dir.join("fresh-clone");
    let output = Command::new("git")
        .args(["clone", "-q", url])
        .arg(&clone)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    git(
        &clone.join(".git"),
        &[
            "fetch",
            "-q",
            "origin",
            "+refs/sf/attestations/*:refs/sf/attestations/*",
        ],
    );
    clone
}

#[test]
fn a_delivered_attestation_verifies_anywhere_with_only_the_public_key_and_nothing_else_does() {
    let attesting = Attesting::new();
    let upstream = attesting.remote.read_ref("refs/heads/main").unwrap();
    let landed = attesting.land("fix", SUM_FIXED);
    let result = landed.result();
    assert_eq!(result["outcome"], "integrated", "{result}");
    assert_eq!(
        result["delivery"]["observation"]["invocation"], "confirmed",
        "{result}"
    );
    let commit = result["delivery"]["observation"]["commit"]
        .as_str()
        .unwrap()
        .to_owned();
    let name = format!("refs/sf/attestations/{commit}");
    assert_eq!(result["attestation"]["ref"], name.as_str(), "{result}");
    assert_eq!(result["attestation"]["created"], true);
    let blob = result["attestation"]["blob"].as_str().unwrap().to_owned();
    // The remote has both: the branch at M, and M's attestation, the blob sf kept.
    assert_eq!(
        attesting.remote.read_ref("refs/heads/main").unwrap(),
        commit
    );
    assert_eq!(attesting.remote.read_ref(&name).unwrap(), blob);
    let owned = attesting.delivery.work.dir.join("repo.git");
    assert_eq!(git(&owned, &["rev-parse", &name]), blob);
    // `sf show` names the attestation kept for the Candidate's commit.
    let candidate = result["candidate"].as_str().unwrap();
    let shown = attesting
        .delivery
        .work
        .sf(&["show", "--identity", "identity.json", candidate]);
    assert_eq!(
        shown.result()["attestation"],
        serde_json::json!({"ref": name, "blob": blob}),
        "{}",
        shown.json
    );

    // From a fresh clone and only the public key, somewhere else: Verified.
    let (_away, away) = sf_tests::private_dir();
    let clone = clone_with_attestations(&attesting.url(), &away);
    let clone_dir = clone.to_str().unwrap();
    let verified = verify(&away, clone_dir, &commit, &attesting.trusted);
    let shown = verified.result();
    assert_eq!(shown["verified"], true, "{shown}");
    assert_eq!(shown["commit"], commit.as_str());
    assert_eq!(shown["verdict"]["outcome"], "verified");
    assert_eq!(shown["slice"]["id"], "sum-fix", "{shown}");
    assert_eq!(shown["signer"]["name"], "release@team.example");
    assert_eq!(shown["signer"]["key"], attesting.public.as_str());
    assert!(
        shown["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|check| check["met"] == true && check["kind"] == "process"),
        "{shown}"
    );
    // The branch name resolves too, and so does the remote's URL (fetched, not cloned).
    assert_eq!(
        verify(&away, clone_dir, "main", &attesting.trusted).result()["commit"],
        commit.as_str()
    );
    assert_eq!(
        verify(&away, &attesting.url(), &commit, &attesting.trusted).result()["verified"],
        true
    );
    // The text a person reads names the Slice, the Verdict, the checks and the signer.
    let text = sf()
        .current_dir(&away)
        .env("HOME", away.join("home"))
        .env_remove("SF_CONFIG")
        .args(["verify", "--repo", clone_dir, "--commit", &commit])
        .arg("--trusted-keys")
        .arg(&attesting.trusted)
        .output()
        .unwrap();
    assert!(text.status.success(), "{text:?}");
    let text = String::from_utf8(text.stdout).unwrap();
    for word in [
        "Verified",
        "sum-fix",
        "signed by release@team.example",
        "check ",
    ] {
        assert!(text.contains(word), "{word}: {text}");
    }

    // Another key: untrusted (13).
    assert_eq!(
        refusal(&verify(&away, clone_dir, &commit, &attesting.other)),
        ("untrusted-key".into(), 13)
    );
    // A commit without an attestation (the upstream base): none (11).
    assert_eq!(
        refusal(&verify(&away, clone_dir, &upstream, &attesting.trusted)),
        ("no-attestation".into(), 11)
    );
    // A plain clone that did not fetch the attestations has none either, and says how to.
    let plain = away.join("plain-clone");
    let output = Command::new("git")
        .args(["clone", "-q", &attesting.url()])
        .arg(&plain)
        .output()
        .unwrap();
    assert!(output.status.success());
    let none = verify(&away, plain.to_str().unwrap(), &commit, &attesting.trusted);
    assert_eq!(refusal(&none), ("no-attestation".into(), 11));
    assert!(
        none.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("refs/sf/attestations/*"),
        "{}",
        none.json
    );

    let git_dir = clone.join(".git");
    let envelope = git(&git_dir, &["cat-file", "blob", &name]);
    let replace = |bytes: &str| {
        let id = hash_object(&git_dir, bytes.as_bytes());
        git(&git_dir, &["update-ref", &name, &id]);
    };
    // One changed byte of the signed payload: the signature no longer verifies (12).
    let mut parsed: serde_json::Value = serde_json::from_str(&envelope).unwrap();
    let payload = STANDARD
        .decode(parsed["payload"].as_str().unwrap())
        .unwrap();
    let mut changed = payload.clone();
    let at = String::from_utf8(payload.clone())
        .unwrap()
        .find("\"product\":\"sum\"")
        .unwrap()
        + "\"product\":\"".len();
    changed[at] = b't';
    parsed["payload"] = STANDARD.encode(&changed).into();
    replace(&parsed.to_string());
    assert_eq!(
        refusal(&verify(&away, clone_dir, &commit, &attesting.trusted)),
        ("bad-signature".into(), 12)
    );
    // A changed byte that breaks the envelope's JSON: malformed (15).
    replace(&envelope.replacen('{', "[", 1));
    assert_eq!(
        refusal(&verify(&away, clone_dir, &commit, &attesting.trusted)),
        ("malformed-envelope".into(), 15)
    );
    // The attestation moved to another commit's ref: about another commit (14).
    replace(&envelope);
    assert_eq!(
        verify(&away, clone_dir, &commit, &attesting.trusted).result()["verified"],
        true
    );
    let moved = hash_object(&git_dir, envelope.as_bytes());
    git(
        &git_dir,
        &[
            "update-ref",
            &format!("refs/sf/attestations/{upstream}"),
            &moved,
        ],
    );
    assert_eq!(
        refusal(&verify(&away, clone_dir, &upstream, &attesting.trusted)),
        ("another-commit".into(), 14)
    );
    // A ref that names something other than a blob is no attestation either.
    git(&git_dir, &["update-ref", &name, &commit]);
    assert_eq!(
        refusal(&verify(&away, clone_dir, &commit, &attesting.trusted)),
        ("malformed-envelope".into(), 15)
    );

    // The independent verifier accepts sf's envelope as it was delivered, and refuses the
    // one with a changed byte.
    let delivered = attesting.remote.git(&["cat-file", "blob", &name]);
    let independent = verify_with_securesystemslib(delivered.as_bytes(), &attesting.public);
    assert!(independent.verified, "{independent:?}");
    let pae = String::from_utf8(independent.stdout).unwrap();
    assert!(
        pae.starts_with("DSSEv1 28 application/vnd.in-toto+json "),
        "{pae}"
    );
    assert!(
        pae.contains(&format!("\"gitCommit\":\"{commit}\"")),
        "{pae}"
    );
    assert!(pae.contains("\"predicateType\":\"sf-landing/1\""), "{pae}");
    let refused = verify_with_securesystemslib(parsed.to_string().as_bytes(), &attesting.public);
    assert!(!refused.verified, "{refused:?}");
}

/// `git hash-object -w --stdin` of `bytes` in `git_dir`; the blob's id.
fn hash_object(git_dir: &Path, bytes: &[u8]) -> String {
    use std::io::Write as _;
    let mut child = Command::new("git")
        .arg("--git-dir")
        .arg(git_dir)
        .args(["hash-object", "-w", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[test]
fn a_failed_candidate_is_never_attested_and_a_redelivery_writes_no_second_attestation() {
    let attesting = Attesting::new();
    let owned = attesting.delivery.work.dir.join("repo.git");
    let attestations = |repo: &Path| git(repo, &["for-each-ref", "refs/sf/attestations/"]);

    let failed = attesting.land("no-fix", SUM_NOT_FIXED);
    assert_eq!(failed.result()["outcome"], "failed", "{}", failed.json);
    assert!(failed.result()["attestation"].is_null(), "{}", failed.json);
    assert_eq!(attestations(&owned), "");
    assert_eq!(attestations(attesting.remote.path()), "");

    let landed = attesting.land("fix", SUM_FIXED);
    let blob = landed.result()["attestation"]["blob"]
        .as_str()
        .unwrap()
        .to_owned();
    let kept = attestations(&owned);
    assert_eq!(kept.lines().count(), 1, "{kept}");
    // The same landing again: the attestation kept is the one there, nothing is replaced.
    let again = attesting.delivery.work.land(
        landed.result()["candidate"].as_str().unwrap(),
        "slice",
        &["--deliver"],
    );
    assert_eq!(
        again.result()["attestation"]["created"],
        false,
        "{}",
        again.json
    );
    assert_eq!(again.result()["attestation"]["blob"], blob.as_str());
    // A second delivery of the same commit (another occurrence, to a side branch) pushes
    // the branch and no second attestation: the remote's stays the one it has.
    let candidate = landed.result()["candidate"].as_str().unwrap().to_owned();
    let (prepared, intent) = attesting
        .delivery
        .prepare(&candidate, 2, &["--side-branch"]);
    let (observed, exit) = attesting.delivery.invoke(&prepared);
    assert_eq!(observed["invocation"], "confirmed", "{observed}");
    assert_eq!(exit, 0);
    assert_eq!(
        attesting
            .remote
            .read_ref(intent["payload"]["ref"].as_str().unwrap())
            .unwrap(),
        intent["payload"]["commit"].as_str().unwrap()
    );
    assert_eq!(attestations(attesting.remote.path()), kept);
    assert_eq!(attestations(&owned), kept);
}

#[test]
fn a_push_that_fails_leaves_neither_the_branch_nor_the_attestation() {
    let attesting = Attesting::new();
    let upstream = attesting.remote.read_ref("refs/heads/main").unwrap();
    // The server refuses the branch's update alone; the attestation's would be accepted,
    // but the push is atomic.
    attesting.remote.install_hook(
        "update",
        "#!/bin/sh\ncase \"$1\" in refs/heads/*) echo 'branch protected' >&2; exit 1;; esac\nexit 0\n",
    );
    let candidate = attesting.delivery.collected("fix", SUM_FIXED);
    // Exit 8 (refused) is outside what `Envelope::parse_decided` admits: read it here.
    let output = attesting
        .delivery
        .work
        .command(&[
            "land",
            "--identity",
            "identity.json",
            "--candidate",
            &candidate,
            "--slice",
            "slice",
            "--gate",
            "gate.json",
            "--deliver",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(8), "{output:?}");
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let result = &envelope["result"];
    assert_eq!(result["outcome"], "integrated", "{result}");
    assert_eq!(
        result["delivery"]["observation"]["invocation"], "refused",
        "{result}"
    );
    let commit = result["attestation"]["commit"].as_str().unwrap().to_owned();
    let name = format!("refs/sf/attestations/{commit}");
    assert_eq!(
        attesting.remote.read_ref("refs/heads/main").unwrap(),
        upstream
    );
    assert_eq!(attesting.remote.read_ref(&name), None);
    // The integration-only landing kept it in the owned repository.
    let owned = attesting.delivery.work.dir.join("repo.git");
    assert_eq!(
        git(&owned, &["rev-parse", &name]),
        result["attestation"]["blob"].as_str().unwrap()
    );

    // Once the remote accepts, a new delivery of the same commit pushes both.
    std::fs::remove_file(attesting.remote.path().join("hooks/update")).unwrap();
    let candidate = result["candidate"].as_str().unwrap().to_owned();
    let (prepared, _) = attesting.delivery.prepare(&candidate, 2, &[]);
    let output = attesting
        .delivery
        .work
        .command(&invoke_args(&prepared))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        attesting.remote.read_ref("refs/heads/main").unwrap(),
        commit
    );
    assert_eq!(
        attesting.remote.read_ref(&name).unwrap(),
        result["attestation"]["blob"].as_str().unwrap()
    );
}

#[test]
fn a_signing_key_sf_cannot_use_refuses_the_landing_before_anything_starts() {
    let attesting = Attesting::new();
    let dir = &attesting.delivery.work.dir;
    let key = dir.join("attest_ed25519");
    // Readable by others: refused, naming the key and the fix.
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let candidate = attesting.delivery.collected("fix", SUM_FIXED);
    let refused = attesting
        .delivery
        .work
        .land(&candidate, "slice", &["--deliver"]);
    let (code, _) = refusal(&refused);
    assert_eq!(code, "attest-key-invalid", "{}", refused.json);
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("chmod 600"), "{message}");
    assert_eq!(
        attesting.delivery.work.target(),
        attesting.delivery.work.initial()
    );
    // An RSA key: refused too.
    let rsa = dir.join("rsa_key");
    let output = Command::new("ssh-keygen")
        .args(["-q", "-t", "rsa", "-b", "2048", "-N", "", "-f"])
        .arg(&rsa)
        .output()
        .unwrap();
    assert!(output.status.success());
    write(
        &dir.join("sf.toml"),
        &format!("[attest]\nkey = {:?}\n", rsa.to_str().unwrap()),
    );
    let refused = attesting
        .delivery
        .work
        .land(&candidate, "slice", &["--deliver"]);
    assert_eq!(
        refusal(&refused).0,
        "attest-key-invalid",
        "{}",
        refused.json
    );
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Ed25519"),
        "{}",
        refused.json
    );
}

#[test]
fn sf_deliver_invoke_attests_and_pushes_the_attestation_and_a_forged_failed_one_is_refused() {
    let attesting = Attesting::new();
    let candidate = attesting.delivery.collected("fix", SUM_FIXED);
    let (prepared, intent) = attesting.delivery.prepare(&candidate, 1, &[]);
    let commit = intent["payload"]["commit"].as_str().unwrap().to_owned();
    let (observed, exit) = attesting.delivery.invoke(&prepared);
    assert_eq!(observed["invocation"], "confirmed", "{observed}");
    assert_eq!(exit, 0);
    let name = format!("refs/sf/attestations/{commit}");
    let owned = attesting.delivery.work.dir.join("repo.git");
    let kept = git(&owned, &["rev-parse", &name]);
    assert_eq!(attesting.remote.read_ref(&name).unwrap(), kept);
    let (_away, away) = sf_tests::private_dir();
    let verified = verify(&away, &attesting.url(), "main", &attesting.trusted);
    assert_eq!(verified.result()["commit"], commit.as_str());

    // The same statement with a Failed outcome, signed with the very key by another DSSE
    // implementation: signature and subject check, and sf verify still refuses it (16).
    let envelope = attesting.remote.git(&["cat-file", "blob", &name]);
    let mut parsed: serde_json::Value = serde_json::from_str(&envelope).unwrap();
    let payload = STANDARD
        .decode(parsed["payload"].as_str().unwrap())
        .unwrap();
    let mut statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    statement["predicate"]["verdict"]["outcome"] = "failed".into();
    let forged = sf_test_support::attest::sign_with_cryptography(
        &serde_json::to_vec(&statement).unwrap(),
        &attesting.delivery.work.dir.join("attest_ed25519"),
    );
    parsed["payload"] = STANDARD
        .encode(serde_json::to_vec(&statement).unwrap())
        .into();
    parsed["signatures"][0]["sig"] = STANDARD.encode(forged).into();
    let clone = clone_with_attestations(&attesting.url(), &away);
    let git_dir = clone.join(".git");
    let id = hash_object(&git_dir, parsed.to_string().as_bytes());
    git(&git_dir, &["update-ref", &name, &id]);
    let refused = verify(&away, clone.to_str().unwrap(), &commit, &attesting.trusted);
    assert_eq!(refusal(&refused), ("not-verified".into(), 16));

    // Where the evidence is at hand, the attested attempt judged again from the stored
    // records gives the attested Verdict.
    let work = &attesting.delivery.work.dir;
    let at_hand = ["--identity", "identity.json", "--slice", "slice"];
    let rejudged = verify_with(
        work,
        &attesting.url(),
        &commit,
        &attesting.trusted,
        &at_hand,
    );
    let attested = rejudged.result()["verdict"]["digest"].clone();
    assert_eq!(rejudged.result()["rejudged"], attested, "{}", rejudged.json);

    // A Verified statement naming another Verdict, signed with the very key: the signature
    // alone passes it, and the records judged again refuse it (17).
    let mut statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    let other = format!("sha256:{}", "0".repeat(64));
    statement["predicate"]["verdict"]["digest"] = other.clone().into();
    let bytes = serde_json::to_vec(&statement).unwrap();
    let forged = sf_test_support::attest::sign_with_cryptography(
        &bytes,
        &attesting.delivery.work.dir.join("attest_ed25519"),
    );
    parsed["payload"] = STANDARD.encode(&bytes).into();
    parsed["signatures"][0]["sig"] = STANDARD.encode(forged).into();
    let id = hash_object(&git_dir, parsed.to_string().as_bytes());
    git(&git_dir, &["update-ref", &name, &id]);
    let clone_path = clone.to_str().unwrap();
    let signed = verify(&away, clone_path, &commit, &attesting.trusted);
    assert_eq!(signed.result()["verdict"]["digest"], other.as_str());
    let refused = verify_with(work, clone_path, &commit, &attesting.trusted, &at_hand);
    assert_eq!(refusal(&refused), ("rejudged-differently".into(), 17));
    assert!(
        refused.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains(attested.as_str().unwrap()),
        "{}",
        refused.json
    );
}
