//! `sf verify`: checks a commit's attestation with only the signer's public key, from a clone
//! or the team's remote. Exit 0 only for a Verified attestation of exactly that commit signed
//! by a trusted key; every refusal has its own exit status.

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use sf_app::verify::{Rejudge, Verification, VerifyRequest, verify};

use super::common::{Context, Output};
use super::exit::{Outcome, error_status};

/// Exit status of `sf verify` when the commit has no attestation.
pub const EXIT_NO_ATTESTATION: u8 = 11;
/// … when a signature by a trusted key does not verify (the envelope was changed).
pub const EXIT_BAD_SIGNATURE: u8 = 12;
/// … when no trusted key signed the envelope.
pub const EXIT_UNTRUSTED_KEY: u8 = 13;
/// … when the attestation is about another commit (or tree).
pub const EXIT_ANOTHER_COMMIT: u8 = 14;
/// … when the envelope or its Statement is not what sf writes.
pub const EXIT_MALFORMED_ENVELOPE: u8 = 15;
/// … when the attestation does not say Verified.
pub const EXIT_NOT_VERIFIED: u8 = 16;
/// … when the stored records, judged again (`--identity`, `--slice`), give another Verdict.
pub const EXIT_REJUDGED_DIFFERENTLY: u8 = 17;

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The repository: a local directory (a clone that fetched refs/sf/attestations/*) or
    /// the team's remote URL (fetched into a scratch repository)
    #[arg(long, value_name = "DIR_OR_URL")]
    repo: String,
    /// The commit, as a revision (a commit id, a branch)
    #[arg(long, value_name = "REV")]
    commit: String,
    /// The public keys to trust, one per line as OpenSSH's authorized_keys or
    /// allowed_signers file holds them (Ed25519 keys count)
    #[arg(long, value_name = "FILE")]
    trusted_keys: PathBuf,
    /// Where the evidence is at hand: the repository identity; with --slice, the attested
    /// attempt is judged again from the stored records and must give the attested Verdict
    #[arg(long, value_name = "FILE", requires = "slice")]
    identity: Option<PathBuf>,
    /// The frozen Slice whose evidence store holds the attested records (with --identity)
    #[arg(long, value_name = "DIR", requires = "identity")]
    slice: Option<PathBuf>,
}

/// `sf verify`.
pub fn run(context: &Context, args: VerifyArgs) -> Outcome {
    let request = VerifyRequest {
        repo: args.repo,
        commit: args.commit,
        trusted_keys: args.trusted_keys,
        rejudge: args
            .identity
            .zip(args.slice)
            .map(|(identity, slice)| Rejudge { identity, slice }),
    };
    match verify(&context.backends, &request) {
        Ok(verified) => Ok(output(&verified)).into(),
        Err(error) => {
            let exit = match error.code.as_str() {
                "no-attestation" => EXIT_NO_ATTESTATION,
                "bad-signature" => EXIT_BAD_SIGNATURE,
                "untrusted-key" => EXIT_UNTRUSTED_KEY,
                "another-commit" => EXIT_ANOTHER_COMMIT,
                "malformed-envelope" => EXIT_MALFORMED_ENVELOPE,
                "not-verified" => EXIT_NOT_VERIFIED,
                "rejudged-differently" => EXIT_REJUDGED_DIFFERENTLY,
                _ => error_status(&error),
            };
            Outcome {
                result: Err(error),
                exit,
            }
        }
    }
}

/// What a person and a script read of a verified attestation.
fn output(verified: &Verification) -> Output {
    let statement = &verified.checked.statement;
    let signer = &verified.checked.signer;
    let landing = &statement.predicate;
    let subject = statement.subject();
    let checks: Vec<_> = landing
        .checks
        .iter()
        .map(|check| {
            let judged = landing
                .verdict
                .checks
                .iter()
                .find(|judged| judged.check == check.id);
            json!({
                "id": check.id,
                "kind": check.kind,
                "stage": check.stage,
                "expectation": check.expectation.as_ref().map(ToString::to_string),
                "record": judged.and_then(|judged| judged.record.as_ref()).map(ToString::to_string),
                "met": judged.and_then(|judged| judged.met),
            })
        })
        .collect();
    let json = json!({
        "verified": true,
        "commit": verified.commit.to_string(),
        "tree": subject.git_tree.to_string(),
        "sfTree": format!("sha256:{}", subject.sf_tree),
        "attestation": verified.name,
        "signer": {"name": signer.name, "keyid": signer.keyid, "key": signer.public},
        "candidate": landing.candidate.to_string(),
        "slice": {
            "id": landing.slice.id,
            "revision": landing.slice.revision,
            "digest": landing.slice.digest.to_string(),
        },
        "verdict": {
            "outcome": landing.verdict.outcome,
            "digest": landing.verdict.digest.to_string(),
            "attempt": landing.verdict.attempt,
        },
        "checks": checks,
        "runs": landing.runs.len(),
        "rejudged": verified.rejudged.as_ref().map(ToString::to_string),
    });
    let mut text = format!(
        "Verified: commit {} (tree {}) was landed by sf\n  Slice {} revision {} ({})\n  Verdict \
         {} ({}, attempt {})\n  Candidate {}\n  signed by {} ({})\n",
        verified.commit,
        subject.git_tree,
        landing.slice.id,
        landing.slice.revision,
        landing.slice.digest,
        landing.verdict.outcome,
        landing.verdict.digest,
        landing.verdict.attempt,
        landing.candidate,
        signer.name,
        signer.keyid,
    );
    if let Some(rejudged) = &verified.rejudged {
        text.push_str(&format!(
            "  judged again from the stored records: the same Verdict ({rejudged})\n"
        ));
    }
    for check in &checks {
        text.push_str(&format!(
            "  check {} ({}, {}): {}\n",
            check["id"].as_str().unwrap_or_default(),
            check["kind"].as_str().unwrap_or_default(),
            check["stage"].as_str().unwrap_or("-"),
            match check["met"].as_bool() {
                Some(true) => "met",
                Some(false) => "missed",
                None => "-",
            }
        ));
    }
    Output { json, text }
}
