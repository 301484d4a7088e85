//! The signing and checking rules with real keys from `ssh-keygen`: a Statement signed with
//! one key checks only against that key, only for its commit and tree, only as signed, and
//! only when Verified; keys sf cannot sign with are refused with the fix.

use std::path::{Path, PathBuf};
use std::process::Command;

use sf_contracts::canonical::Digest;
use sf_contracts::git_object::ObjectId;

use crate::statement::{Landing, SliceSummary, Times, VerdictSummary};
use crate::{Expected, SigningKey, Statement, TrustedKeys, check, sign};

fn keygen(dir: &Path, name: &str, kind: &str) -> PathBuf {
    let path = dir.join(name);
    let output = Command::new("ssh-keygen")
        .args(["-q", "-t", kind, "-N", "", "-C", name, "-f"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    path
}

fn public(key: &Path) -> String {
    std::fs::read_to_string(key.with_extension("pub")).unwrap()
}

fn id(byte: u8) -> ObjectId {
    ObjectId::parse_hex(&format!("{byte:02x}").repeat(20)).unwrap()
}

fn landing(outcome: &str) -> Landing {
    Landing {
        candidate: Digest::of(b"candidate"),
        product: "sum".into(),
        base: id(1),
        slice: SliceSummary {
            digest: Digest::of(b"slice"),
            id: "fix".into(),
            revision: 1,
        },
        checks: Vec::new(),
        verdict: VerdictSummary {
            digest: Digest::of(b"verdict"),
            outcome: outcome.into(),
            attempt: 1,
            reasons: Vec::new(),
            checks: Vec::new(),
        },
        runs: Vec::new(),
        reviews: None,
        times: Times {
            runs_started: Some(1),
            runs_ended: None,
        },
    }
}

fn expected() -> Expected {
    Expected {
        commit: id(2),
        tree: id(3),
        sf_tree: Digest::of(b"tree"),
    }
}

#[test]
fn a_signed_statement_checks_only_as_signed_by_its_key_for_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "signer", "ed25519");
    let other = keygen(dir.path(), "other", "ed25519");
    let signer = SigningKey::read(&key).unwrap();
    let trusted = TrustedKeys::parse(&format!("ci@team {}", public(&key))).unwrap();
    let untrusted = TrustedKeys::parse(&public(&other)).unwrap();
    let want = expected();
    let statement = Statement::new(want.commit, want.tree, &want.sf_tree, landing("verified"));
    let bytes = sign(&statement, &signer).unwrap();
    // Deterministic: the same Statement and key give the same envelope.
    assert_eq!(sign(&statement, &signer).unwrap(), bytes);

    let checked = check(&bytes, &trusted, &want).unwrap();
    assert_eq!(checked.statement, statement);
    assert_eq!(checked.signer.name, "ci@team");
    assert_eq!(checked.signer.keyid, signer.keyid());
    assert!(signer.keyid().starts_with("SHA256:"), "{}", signer.keyid());

    let code = |bytes: &[u8], trusted: &TrustedKeys, want: &Expected| {
        check(bytes, trusted, want).unwrap_err().code()
    };
    assert_eq!(code(&bytes, &untrusted, &want), "untrusted-key");
    let mut moved = want.clone();
    moved.commit = id(4);
    assert_eq!(code(&bytes, &trusted, &moved), "another-commit");
    let mut retreed = want.clone();
    retreed.sf_tree = Digest::of(b"another tree");
    assert_eq!(code(&bytes, &trusted, &retreed), "another-commit");
    // Every single changed byte of the envelope is refused, whichever refusal it meets.
    for at in 0..bytes.len() {
        let mut changed = bytes.clone();
        changed[at] ^= 0x01;
        assert!(check(&changed, &trusted, &want).is_err(), "byte {at}");
    }
    let failed = Statement::new(want.commit, want.tree, &want.sf_tree, landing("failed"));
    let failed = sign(&failed, &signer).unwrap();
    assert_eq!(code(&failed, &trusted, &want), "not-verified");
}

#[test]
fn keys_sf_cannot_sign_with_are_refused_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let key = keygen(dir.path(), "open", "ed25519");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let error = SigningKey::read(&key).unwrap_err();
    assert_eq!(error.code(), "attest-key-invalid");
    assert!(error.to_string().contains("chmod 600"), "{error}");

    let rsa = keygen(dir.path(), "rsa", "rsa");
    assert!(
        SigningKey::read(&rsa)
            .unwrap_err()
            .to_string()
            .contains("Ed25519")
    );
    let encrypted = dir.path().join("encrypted");
    let output = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "a passphrase", "-f"])
        .arg(&encrypted)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert!(
        SigningKey::read(&encrypted)
            .unwrap_err()
            .to_string()
            .contains("encrypted")
    );
    assert!(SigningKey::read(&dir.path().join("absent")).is_err());
    // A keys file without an Ed25519 key trusts nothing, and says what to list.
    assert!(TrustedKeys::parse(&public(&rsa)).is_err());
    assert!(TrustedKeys::parse("# only a comment\n").is_err());
    assert!(TrustedKeys::parse("ssh-ed25519 notbase64").is_err());
}
