//! `sf review approve|reject --identity FILE --candidate DIGEST --slice SLICE --reviewer NAME
//! --reason TEXT [--subject DIGEST] [--check ID] [--key FILE] [--attempt EPOCH]`: a named
//! reviewer's decision about a Candidate, stored once as an `sf-review/1` Evidence record
//! under the Candidate's pins and the attempt reviewed (docs/assurance.md, "Review checks").
//!
//! Everything is checked before the one write ([`sf_app::review`]); this prints the review
//! stored and the Verdict the evidence judges now.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use sf_app::review::{ReviewRequest, Reviewed, review};
use sf_host::assurance::Decision;

use super::args::CandidateInSlice;
use super::common::{CliError, Context, Output, json_value};
use super::render::{verdict_json, verdict_text};

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
    let request = ReviewRequest {
        target: args.target.target(),
        decision,
        reviewer: args.reviewer,
        reason: args.reason,
        subject: args.subject,
        check: args.check,
        key: args.key,
        attempt: args.attempt,
    };
    review(&context.backends, &request).map(|reviewed| describe(&reviewed))
}

fn describe(reviewed: &Reviewed) -> Output {
    let review = &reviewed.review;
    let (now, digest) = &reviewed.now;
    let word = match review.decision {
        Decision::Approve => "approved",
        Decision::Reject => "rejected",
    };
    let mut text = format!(
        "{word}: Candidate {} under Slice {} revision {}, check {}, as {}{}\n  review  {}\n  subject {}\n",
        reviewed.candidate,
        reviewed.slice.0,
        reviewed.slice.1,
        review.check,
        review.reviewer,
        if review.signature.is_some() {
            " (signed)"
        } else {
            ""
        },
        reviewed.id,
        review.subject
    );
    text.push_str("now ");
    text.push_str(&verdict_text(now, digest));
    Output {
        json: serde_json::json!({
            "review": reviewed.id.to_string(),
            "record": json_value(&review.to_value()),
            "attempt": json_value(&reviewed.attempt.to_value()),
            "verdict": verdict_json(now, digest),
        }),
        text,
    }
}
