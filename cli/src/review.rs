//! `sf review approve|reject --identity FILE --candidate DIGEST --slice SLICE --reviewer NAME
//! --reason TEXT [--subject DIGEST] [--check ID] [--key FILE] [--attempt EPOCH]`: a named
//! reviewer's decision about a Candidate, stored once as an `sf-review/1` Evidence record
//! under the Candidate's pins and the attempt reviewed (docs/assurance.md, "Review checks").
//!
//! Everything is checked before the one write: the Candidate sealed for the Slice, a review
//! check of the Slice's acceptance that lists the reviewer, the subject the reviewer read
//! equal to the one the evidence judges now (an approval must name it), the process checks
//! Verified for an approval, and a signature, when the check lists the reviewer's key, made
//! with `ssh-keygen -Y sign` and verified against that key.

use std::io::Write as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, Subcommand};

use super::assure::{
    CandidateInSlice, Loaded, land_error, parse_digest, verdict_json, verdict_text,
};
use super::common::{CliError, Context, Output, json_value};
use super::slice_dir::{coded, invalid};
use sf_host::assurance::review::{
    MAX_SIGNATURE_BYTES, REVIEW_FORMAT, SIGNATURE_NAMESPACE, check_reason, verify_signature,
};
use sf_host::assurance::{Decision, Outcome, Review, time};
use sf_host::contracts::EvidenceRecord;
use sf_host::contracts::grammar::{ID_RULE, is_valid_id};

/// Where `ssh-keygen` is looked for, in this order.
const SSH_KEYGEN: &[&str] = &["/usr/bin/ssh-keygen", "/usr/local/bin/ssh-keygen"];

/// `sf review …`.
#[derive(Debug, Subcommand)]
pub enum ReviewCommand {
    /// Approve a Candidate under a Slice's review check: the review subject you read (from
    /// `sf report`, `sf show` or `sf judge`) with --subject
    Approve(ReviewArgs),
    /// Reject a Candidate under a Slice's review check; a rejection always wins
    Reject(ReviewArgs),
}

#[derive(Debug, Args)]
pub struct ReviewArgs {
    #[command(flatten)]
    target: CandidateInSlice,
    /// Your name, as the review check lists it
    #[arg(long, value_name = "NAME")]
    reviewer: String,
    /// Why, in your words (1 to 4096 bytes)
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// The review subject you read (sha256:…, shown by `sf report`, `sf show` and `sf
    /// judge`); needed to approve, checked when given to reject
    #[arg(long, value_name = "DIGEST")]
    subject: Option<String>,
    /// The review check answered; needed only when the acceptance has more than one
    #[arg(long, value_name = "ID")]
    check: Option<String>,
    /// Sign the review with this SSH key (`ssh-keygen -Y sign -f FILE`: a private key file,
    /// or the public key of one your ssh-agent holds); needed when the check lists a key for
    /// you
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// The attempt (fence epoch) reviewed; default: the newest
    #[arg(long, value_name = "EPOCH")]
    attempt: Option<u64>,
}

/// `sf review approve|reject`.
pub fn run(context: &Context, command: ReviewCommand) -> Result<Output, CliError> {
    let (decision, args) = match command {
        ReviewCommand::Approve(args) => (Decision::Approve, args),
        ReviewCommand::Reject(args) => (Decision::Reject, args),
    };
    if !is_valid_id(&args.reviewer) {
        return Err(invalid(format!("--reviewer {:?}", args.reviewer), ID_RULE));
    }
    check_reason(&args.reason).map_err(|rule| invalid("--reason", rule))?;
    let read = args
        .subject
        .as_deref()
        .map(|text| parse_digest(text, "--subject"))
        .transpose()?;
    if decision == Decision::Approve && read.is_none() {
        return Err(CliError::new(
            "usage",
            "sf review approve needs --subject: the review subject you read (`sf report`, `sf \
             show` or `sf judge` print it), so that you approve exactly that",
        ));
    }
    let loaded = Loaded::read(context, &args.target)?;
    let acceptance = &loaded.slice.frozen.acceptance;
    let counted: Vec<_> = acceptance.counted_reviews().collect();
    let slice_name = format!("--slice {}", loaded.slice.dir.display());
    let (check, requirement) = match (&args.check, counted.as_slice()) {
        (_, []) => {
            return Err(invalid(
                slice_name,
                "its acceptance has no review check (one listing reviewers, in an \
                 sf-repository-acceptance/4): there is nothing to review",
            ));
        }
        (None, [only]) => *only,
        (None, _) => {
            return Err(CliError::new(
                "usage",
                format!(
                    "the acceptance has several review checks ({}): name one with --check",
                    names(counted.iter().map(|(id, _)| *id))
                ),
            ));
        }
        (Some(wanted), _) => *counted.iter().find(|(id, _)| id == wanted).ok_or_else(|| {
            invalid(
                format!("--check {wanted:?}"),
                format!(
                    "is not a review check of the Slice's acceptance (it has {})",
                    names(counted.iter().map(|(id, _)| *id))
                ),
            )
        })?,
    };
    let Some(reviewer) = requirement.reviewer(&args.reviewer) else {
        return Err(invalid(
            format!("--reviewer {}", args.reviewer),
            format!(
                "is not a reviewer of check {check} (it lists {})",
                names(requirement.reviewers.iter().map(|r| r.name.as_str()))
            ),
        ));
    };
    match (&reviewer.key, &args.key) {
        (Some(_), None) => {
            return Err(invalid(
                format!("--reviewer {}", args.reviewer),
                format!(
                    "check {check} lists a key for {}: sign with --key FILE",
                    args.reviewer
                ),
            ));
        }
        (None, Some(key)) => {
            return Err(invalid(
                format!("--key {}", key.display()),
                format!(
                    "check {check} lists no key for {}: an unsigned review counts, and a \
                     signature no key can verify would prove nothing",
                    args.reviewer
                ),
            ));
        }
        _ => {}
    }
    let judging = loaded.judging(context)?;
    let verdict = judging
        .verdict(args.attempt)
        .map_err(|error| land_error("judging", error))?;
    let reviews = verdict
        .reviews
        .as_ref()
        .expect("an acceptance with a review check is judged with its reviews");
    if let Some(read) = &read
        && *read != reviews.subject
    {
        return Err(coded(
            "conflict",
            format!("--subject {read}"),
            format!(
                "is not the subject the evidence of attempt {} judges now ({}): read the \
                 report again (`sf report`), and review what it shows",
                verdict.attempt, reviews.subject
            ),
        ));
    }
    if decision == Decision::Approve && reviews.process != Outcome::Verified {
        return Err(invalid(
            format!("attempt {}", verdict.attempt),
            format!(
                "its process checks are {}, not verified: an approval would count for nothing",
                reviews.process.as_str()
            ),
        ));
    }
    let mut review = Review {
        at: time::format(SystemTime::now()).unwrap_or_default(),
        candidate: loaded.sealed.digest.clone(),
        check: check.to_owned(),
        decision,
        reason: args.reason.clone(),
        reviewer: args.reviewer.clone(),
        signature: None,
        subject: reviews.subject.clone(),
    };
    if let (Some(key), Some(listed)) = (&args.key, &reviewer.key) {
        let message = review
            .signed_message()
            .map_err(|error| invalid("the review", error))?;
        let signature = sign(key, &message)?;
        verify_signature(listed, &message, &signature).map_err(|why| {
            invalid(
                format!("--key {}", key.display()),
                format!(
                    "is not the key check {check} lists for {}: {why}",
                    reviewer.name
                ),
            )
        })?;
        review.signature = Some(signature);
    }
    let payload = review
        .to_bytes()
        .map_err(|error| invalid("the review", error))?;
    let pins = loaded
        .programs
        .pins
        .digest()
        .map_err(|error| invalid("the pins", error))?;
    let record = EvidenceRecord::new(pins, verdict.attempt.clone(), REVIEW_FORMAT, &payload)
        .map_err(|error| coded(error.code(), "the review record", error))?;
    let store = loaded.slice.evidence_store(context)?;
    let id = store
        .put(&record, Instant::now() + Duration::from_secs(60))
        .map_err(|error| coded(error.code(), "the evidence store", error))?;
    let now = judging
        .verdict(Some(verdict.attempt.epoch))
        .map_err(|error| land_error("judging", error))?;
    let digest = now
        .digest()
        .map_err(|error| invalid("the Verdict", error))?;
    let word = match decision {
        Decision::Approve => "approved",
        Decision::Reject => "rejected",
    };
    let mut text = format!(
        "{word}: Candidate {} under Slice {} revision {}, check {check}, as {}{}\n  review  {id}\n  subject {}\n",
        loaded.sealed.digest,
        loaded.slice.frozen.record.id,
        loaded.slice.frozen.record.revision,
        review.reviewer,
        if review.signature.is_some() {
            " (signed)"
        } else {
            ""
        },
        review.subject
    );
    text.push_str("now ");
    text.push_str(&verdict_text(&now, &digest));
    Ok(Output {
        json: serde_json::json!({
            "review": id.to_string(),
            "record": json_value(&review.to_value()),
            "attempt": json_value(&verdict.attempt.to_value()),
            "verdict": verdict_json(&now, &digest),
        }),
        text,
    })
}

fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

/// The `ssh-keygen` sf signs with: the first of [`SSH_KEYGEN`] that is a regular file owned
/// by root and writable by no one else (the reviewer's key passes through it).
fn ssh_keygen() -> Result<&'static Path, CliError> {
    SSH_KEYGEN
        .iter()
        .map(Path::new)
        .find(|path| {
            std::fs::metadata(path)
                .is_ok_and(|meta| meta.is_file() && meta.uid() == 0 && meta.mode() & 0o022 == 0)
        })
        .ok_or_else(|| {
            CliError::new(
                "unavailable",
                format!(
                    "--key: no root-owned ssh-keygen at {} (install OpenSSH's client: \
                     openssh-client)",
                    SSH_KEYGEN.join(" or ")
                ),
            )
        })
}

/// Signs `message` with `key` through `ssh-keygen -Y sign -n sf-review`: the key never passes
/// through sf (a passphrase is asked on the terminal, an agent's key stays in the agent).
fn sign(key: &Path, message: &[u8]) -> Result<String, CliError> {
    let failed = |detail: String| {
        coded(
            "sign-failed",
            format!("--key {}", key.display()),
            format!("ssh-keygen -Y sign: {detail}"),
        )
    };
    let mut command = Command::new(ssh_keygen()?);
    command
        .args(["-Y", "sign", "-q", "-n", SIGNATURE_NAMESPACE, "-f"])
        .arg(key)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // An agent's key is reached through its socket, and nothing else of the environment.
    if let Some(socket) = std::env::var_os("SSH_AUTH_SOCK") {
        command.env("SSH_AUTH_SOCK", socket);
    }
    let mut child = command
        .spawn()
        .map_err(|error| failed(format!("cannot start: {error}")))?;
    let mut stdin = child.stdin.take().expect("piped");
    let written = stdin.write_all(message);
    drop(stdin);
    let output = child
        .wait_with_output()
        .map_err(|error| failed(error.to_string()))?;
    written.map_err(|error| failed(format!("writing the review: {error}")))?;
    if !output.status.success() {
        return Err(failed(format!(
            "{} ({})",
            String::from_utf8_lossy(&output.stderr).trim(),
            output.status
        )));
    }
    match String::from_utf8(output.stdout) {
        Ok(signature) if !signature.is_empty() && signature.len() <= MAX_SIGNATURE_BYTES => {
            Ok(signature)
        }
        _ => Err(failed("its output is not a signature".into())),
    }
}
