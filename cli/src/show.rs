//! `sf show` and `sf list`: what sf decided about a Candidate, in the terminal, read-only.
//!
//! `sf show --identity FILE WHAT [--slice DIR]`, `WHAT` a Candidate digest (`sha256:…`) or
//! the id of a Candidate commit M: the Candidate (base, commit, Slice, the proposal's
//! message, each edit), its newest Verdict under `--slice` (judged from the Slice's evidence
//! store, as `sf judge` does, writing nothing), and its landing: every integration intent
//! retained for it as `sf integrate inspect` reads it, every delivery intent as `sf deliver
//! inspect` reads it (the remote too). `sf list --identity FILE [--slice DIR]`: one line per
//! Candidate with the same newest Verdict and landing state.
//!
//! Colour only on a terminal, and never with `NO_COLOR` set ([`paint`]); the text passes
//! through the terminal escape first, and only sf's own fields are coloured.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use clap::Args;

use super::assure::parse_digest;
use std::time::{Duration, Instant};

use super::common::{CliError, Context, Output, json_value, repository_error};
use super::slice_dir::SliceDir;
use sf_host::assurance::review::assess;
use sf_host::assurance::{REVIEW_FORMAT, Review, Verdict};
use sf_host::canonical::Digest;
use sf_host::collector::derive;
use sf_host::contracts::EvidenceStoreExt as _;
use sf_host::git_object::ObjectId;
use sf_host::landing::Judging;
use sf_host::repository::{EditedEntry, Repository, SealedCandidate};
use sf_host::text_escape;
use sf_host::tree_store::collect_trees;

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The Candidate: its digest (sha256:…) or the id of its commit M
    #[arg(value_name = "CANDIDATE_OR_COMMIT")]
    what: String,
    /// The frozen Slice whose evidence the newest Verdict is judged from (read-only);
    /// without it, no Verdict is shown
    #[arg(long, value_name = "SLICE")]
    slice: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// The repository identity file
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The frozen Slice whose evidence each Candidate sealed for it is judged from
    /// (read-only); without it, no Verdict is shown
    #[arg(long, value_name = "SLICE")]
    slice: Option<PathBuf>,
}

/// What one Candidate's facts come to.
pub(super) struct Facts {
    /// The Candidate, re-exported.
    pub(super) sealed: SealedCandidate,
    /// Its edited entries, before and after.
    pub(super) edits: Vec<EditedEntry>,
    /// The newest Verdict and the judge's view it came from (judged once, read-only), or why
    /// there is none.
    pub(super) judged: Result<(Verdict, Judging), String>,
    /// The newest Verdict's outcome, digest and attempt, or why there is none.
    verdict: Result<(String, String, String), String>,
    /// The review records of the judged attempt, each with whether it counts and why not.
    reviews: Vec<serde_json::Value>,
    integrations: Vec<serde_json::Value>,
    deliveries: Vec<serde_json::Value>,
}

impl Facts {
    /// The landing state in a word: `delivered`, `integrated`, `unknown` (a claim with no
    /// confirmation), `prepared`, or `-` when nothing was prepared.
    pub(super) fn landing(&self) -> &'static str {
        let any = |records: &[serde_json::Value], word: &str| {
            records.iter().any(|record| record["invocation"] == word)
        };
        if any(&self.deliveries, "confirmed") {
            "delivered"
        } else if any(&self.integrations, "confirmed") {
            "integrated"
        } else if any(&self.integrations, "unknown") || any(&self.deliveries, "unknown") {
            "unknown"
        } else if !self.integrations.is_empty() || !self.deliveries.is_empty() {
            "prepared"
        } else {
            "-"
        }
    }

    fn outcome(&self) -> &str {
        self.verdict
            .as_ref()
            .map_or("-", |(outcome, _, _)| outcome.as_str())
    }

    pub(super) fn json(&self) -> serde_json::Value {
        let manifest = &self.sealed.manifest;
        let message = self
            .sealed
            .proposal
            .as_ref()
            .and_then(|p| p.message.as_ref());
        serde_json::json!({
            "digest": self.sealed.digest.to_string(),
            "commit": manifest.commit.to_hex(),
            "base": manifest.base_commit.to_hex(),
            "tree": manifest.tree.to_hex(),
            "slice": {
                "id": manifest.slice.id,
                "revision": manifest.slice.revision,
                "digest": manifest.binding.as_ref().map(|b| b.digest.to_string()),
            },
            "message": message.map(|m| serde_json::json!({"title": m.title, "body": m.body})),
            "edits": manifest.edits.iter().map(|edit| serde_json::json!({
                "path": edit.path,
                "change": change_word(edit.prior.is_some(), edit.next.is_some()),
            })).collect::<Vec<_>>(),
            "verdict": match &self.verdict {
                Ok((outcome, digest, attempt)) => serde_json::json!({
                    "outcome": outcome, "digest": digest, "attempt": attempt,
                }),
                Err(why) => serde_json::json!({"none": why}),
            },
            "review": self.review_json(),
            "landing": self.landing(),
            "integrations": self.integrations,
            "deliveries": self.deliveries,
        })
    }

    /// The review checks of the newest Verdict, its subject and every review record of its
    /// attempt; `null` when the Slice counts no review check or there is no Verdict.
    fn review_json(&self) -> serde_json::Value {
        let Some(reviews) = self
            .judged
            .as_ref()
            .ok()
            .and_then(|(verdict, _)| verdict.reviews.as_ref())
        else {
            return serde_json::Value::Null;
        };
        serde_json::json!({
            "subject": reviews.subject.to_string(),
            "process": reviews.process.as_str(),
            "checks": reviews
                .checks
                .iter()
                .map(|check| json_value(&check.to_value()))
                .collect::<Vec<_>>(),
            "records": self.reviews,
        })
    }
}

/// Every review record of the judged attempt, in the store's order, each with whether the
/// judge counts it (`counts`) and, when not, why: what a reviewer checks after `sf review`.
fn review_records(verdict: &Verdict, judging: &Judging) -> Vec<serde_json::Value> {
    let Some(reviews) = &verdict.reviews else {
        return Vec::new();
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    let Ok(ids) = judging.store.find(&verdict.pins, deadline) else {
        return Vec::new();
    };
    let acceptance = &judging.slice.acceptance;
    ids.into_iter()
        .filter_map(|id| {
            let record = judging.store.get_verified(&id, deadline).ok()?;
            if record.format() != REVIEW_FORMAT || record.attempt() != &verdict.attempt {
                return None;
            }
            let review = Review::from_payload(record.payload()).ok()?;
            let why = match acceptance
                .counted_reviews()
                .find(|(check, _)| *check == review.check)
            {
                None => Some(format!("check {:?} is not a review check", review.check)),
                Some((check, requirement)) => assess(
                    &review,
                    check,
                    requirement,
                    &reviews.subject,
                    &reviews.subject_record.candidate,
                ),
            };
            Some(serde_json::json!({
                "record": id.to_string(),
                "check": review.check,
                "reviewer": review.reviewer,
                "decision": review.decision.as_str(),
                "at": review.at,
                "reason": review.reason,
                "signed": review.signature.is_some(),
                "counts": why.is_none(),
                "why": why,
            }))
        })
        .collect()
}

fn change_word(prior: bool, next: bool) -> &'static str {
    match (prior, next) {
        (false, true) => "added",
        (true, false) => "deleted",
        _ => "changed",
    }
}

/// Reads every fact of Candidate `digest`, writing nothing.
pub(super) fn facts(
    context: &Context,
    repository: &Repository,
    digest: &Digest,
    slice: Option<&SliceDir>,
) -> Result<Facts, CliError> {
    let sealed = repository
        .export_candidate(digest)
        .map_err(|error| repository_error(&format!("Candidate {digest}"), &error))?;
    let edits = repository
        .edited_entries(&sealed)
        .map_err(|error| repository_error(&format!("Candidate {digest}"), &error))?;
    let judged = match slice {
        None => Err("no --slice given".to_owned()),
        Some(slice) => judged(context, slice, repository, &sealed),
    };
    let verdict = judged
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|(verdict, _)| {
            let digest = verdict.digest().map_err(|error| error.to_string())?;
            Ok((
                verdict.outcome.as_str().to_owned(),
                digest.to_string(),
                verdict.attempt.to_string(),
            ))
        });
    let reviews = judged.as_ref().map_or_else(
        |_| Vec::new(),
        |(verdict, judging)| review_records(verdict, judging),
    );
    let integrations = repository
        .retained_intents()
        .map_err(|error| repository_error("reading the integration intents", &error))?
        .into_iter()
        .filter(|intent| intent.payload.candidate == *digest)
        .map(|intent| {
            let observed = repository
                .inspect_integration(&intent)
                .map_err(|error| repository_error("inspecting an integration", &error))?;
            Ok(serde_json::json!({
                "intent": intent.digest.to_string(),
                "action": intent.payload.action.id,
                "occurrence": intent.payload.action.occurrence,
                "invocation": observed.invocation.as_str(),
                "postcondition": observed.postcondition.as_str(),
            }))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    let deliveries: Vec<_> = repository
        .retained_deliveries()
        .map_err(|error| repository_error("reading the delivery intents", &error))?
        .into_iter()
        .filter(|delivery| delivery.payload.candidate == *digest)
        .collect();
    let deliveries = if deliveries.is_empty() {
        Vec::new()
    } else {
        let remote = super::deliver::remote(context)?;
        deliveries
            .into_iter()
            .map(|delivery| {
                let observed = repository
                    .inspect_delivery(&delivery, &remote)
                    .map_err(|error| repository_error("inspecting a delivery", &error))?;
                Ok(serde_json::json!({
                    "intent": delivery.digest.to_string(),
                    "action": delivery.payload.action.id,
                    "occurrence": delivery.payload.action.occurrence,
                    "remote": delivery.payload.remote,
                    "remoteRef": delivery.payload.remote_ref,
                    "invocation": observed.invocation.as_str(),
                    "postcondition": observed.postcondition(),
                }))
            })
            .collect::<Result<Vec<_>, CliError>>()?
    };
    Ok(Facts {
        sealed,
        edits,
        judged,
        verdict,
        reviews,
        integrations,
        deliveries,
    })
}

/// The newest Verdict of the Candidate under `slice` and the judge's view it came from, or
/// why there is none; read-only.
pub(super) fn judged(
    context: &Context,
    slice: &SliceDir,
    repository: &Repository,
    sealed: &SealedCandidate,
) -> Result<(sf_host::assurance::Verdict, Judging), String> {
    // The programs are named (from the repository), never run: no tree is materialised.
    let trees = collect_trees(repository, sealed, &slice.frozen, None)
        .map_err(|error| error.to_string())?;
    let programs = derive(&slice.frozen, sealed, &trees)
        .map_err(|_| "not sealed for this Slice".to_owned())?;
    let store = slice
        .existing_evidence_store(context)
        .map_err(|error| error.message)?;
    let judging = Judging {
        slice: slice.frozen.clone(),
        pins: programs.pins.clone(),
        store,
    };
    let verdict = judging.verdict(None).map_err(|error| error.to_string())?;
    Ok((verdict, judging))
}

/// The Candidate `what` names: a digest, or the id of a Candidate's commit M.
pub(super) fn find(repository: &Repository, what: &str) -> Result<Digest, CliError> {
    if what.starts_with("sha256:") {
        return parse_digest(what, "CANDIDATE_OR_COMMIT");
    }
    let commit = ObjectId::parse_hex(what).ok_or_else(|| {
        CliError::new(
            "usage",
            format!(
                "{what:?}: names neither a Candidate digest (sha256: and 64 hex digits) nor a \
                 commit id (40 hex digits)"
            ),
        )
    })?;
    for (digest, _) in candidates(repository)? {
        let sealed = repository
            .export_candidate(&digest)
            .map_err(|error| repository_error(&format!("Candidate {digest}"), &error))?;
        if sealed.manifest.commit == commit {
            return Ok(digest);
        }
    }
    Err(CliError::new(
        "missing",
        format!(
            "commit {what}: no Candidate of repository {} has it as its commit; `sf list` \
             lists them",
            repository.identity().path
        ),
    ))
}

fn candidates(repository: &Repository) -> Result<Vec<(Digest, ObjectId)>, CliError> {
    repository
        .candidates()
        .map_err(|error| repository_error("listing the Candidates", &error))
}

fn open_slice(slice: Option<&PathBuf>) -> Result<Option<SliceDir>, CliError> {
    slice.map(|dir| SliceDir::open(dir)).transpose()
}

/// `sf show`.
pub fn show(context: &Context, args: ShowArgs) -> Result<Output, CliError> {
    let repository = context.open_repository(&args.identity)?;
    let slice = open_slice(args.slice.as_ref())?;
    let digest = find(&repository, &args.what)?;
    let facts = facts(context, &repository, &digest, slice.as_ref())?;
    let manifest = &facts.sealed.manifest;
    let mut text = format!(
        "candidate  {}\ncommit     {}\nbase       {}\nslice      {} revision {}\n",
        facts.sealed.digest,
        manifest.commit.to_hex(),
        manifest.base_commit.to_hex(),
        manifest.slice.id,
        manifest.slice.revision
    );
    match &facts.verdict {
        Ok((outcome, digest, attempt)) => text.push_str(&format!(
            "verdict    {outcome} (attempt {attempt}, {digest})\n"
        )),
        Err(why) => text.push_str(&format!("verdict    - ({})\n", text_escape::line(why))),
    }
    if let Ok((verdict, _)) = &facts.judged
        && let Some(reviews) = &verdict.reviews
    {
        text.push_str(&format!(
            "review     subject {} (process checks {})\n",
            reviews.subject,
            reviews.process.as_str()
        ));
        for check in &reviews.checks {
            text.push_str(&format!(
                "  check {}: {} ({} of {} approvals)\n",
                check.check,
                check.state(),
                check.approved_by.len(),
                check.approvals
            ));
        }
        for record in &facts.reviews {
            let counts = match record["why"].as_str() {
                None => "counts".to_owned(),
                Some(why) => format!("counts for nothing: {}", text_escape::line(why)),
            };
            text.push_str(&format!(
                "  {} {} by {} at {} ({counts})\n",
                word(&record["decision"]),
                word(&record["check"]),
                word(&record["reviewer"]),
                word(&record["at"]),
            ));
        }
    }
    text.push_str(&format!("landing    {}\n", facts.landing()));
    for record in &facts.integrations {
        text.push_str(&format!(
            "  integration {}#{}: {} ({})\n",
            word(&record["action"]),
            record["occurrence"],
            word(&record["invocation"]),
            word(&record["postcondition"])
        ));
    }
    for record in &facts.deliveries {
        text.push_str(&format!(
            "  delivery {}#{} to {} {}: {} ({})\n",
            word(&record["action"]),
            record["occurrence"],
            text_escape::line(&word(&record["remote"])),
            word(&record["remoteRef"]),
            word(&record["invocation"]),
            word(&record["postcondition"])
        ));
    }
    text.push_str(&format!("edits      {}\n", manifest.edits.len()));
    for edit in &manifest.edits {
        text.push_str(&format!(
            "  {:<8} {}\n",
            change_word(edit.prior.is_some(), edit.next.is_some()),
            text_escape::line(&edit.path)
        ));
    }
    if let Some(message) = facts
        .sealed
        .proposal
        .as_ref()
        .and_then(|p| p.message.as_ref())
    {
        let mut whole = message.title.clone();
        if let Some(body) = &message.body {
            whole.push_str("\n\n");
            whole.push_str(body);
        }
        whole.push('\n');
        // The proposal's words are the Candidate's: a block, never a line of sf's.
        text.push_str(&text_escape::block("message", whole.as_bytes()));
    }
    Ok(Output {
        json: facts.json(),
        text,
    })
}

fn word(value: &serde_json::Value) -> String {
    value.as_str().unwrap_or("-").to_owned()
}

/// `sf list`.
pub fn list(context: &Context, args: ListArgs) -> Result<Output, CliError> {
    let repository = context.open_repository(&args.identity)?;
    let slice = open_slice(args.slice.as_ref())?;
    let mut rows = Vec::new();
    let mut text = String::new();
    for (digest, _) in candidates(&repository)? {
        let facts = facts(context, &repository, &digest, slice.as_ref())?;
        let manifest = &facts.sealed.manifest;
        text.push_str(&format!(
            "{}  {}  {:<12}  {:<10}  {} r{}\n",
            digest,
            &manifest.commit.to_hex()[..12],
            facts.outcome(),
            facts.landing(),
            manifest.slice.id,
            manifest.slice.revision
        ));
        rows.push(facts.json());
    }
    if rows.is_empty() {
        text.push_str("no Candidates yet: seal one with `sf seal`\n");
    }
    Ok(Output {
        json: serde_json::json!({"candidates": rows}),
        text,
    })
}

/// Whether text output may be coloured: stdout is a terminal and `NO_COLOR` is unset or
/// empty.
pub fn colour_wanted() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// Colours the outcome fields of `show` and `list` text that has already been escaped: the
/// word after `verdict` at the start of a line, and the third field of a row starting with
/// `sha256:`. Both are sf's own fields (a Candidate's words are in `| ` blocks), and only
/// the three outcome words are ever coloured.
pub fn paint(text: &str) -> String {
    let colour = |word: &str| match word {
        "verified" => Some("32"),
        "failed" => Some("31"),
        "inconclusive" => Some("33"),
        _ => None,
    };
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let field = if let Some(rest) = line.strip_prefix("verdict    ") {
            rest.split(' ')
                .next()
                .map(|word| (line.len() - rest.len(), word))
        } else if line.starts_with("sha256:") {
            let mut at = 0;
            line.split("  ").enumerate().find_map(|(index, word)| {
                let start = at;
                at += word.len() + 2;
                (index == 2).then(|| (start, word.trim_end()))
            })
        } else {
            None
        };
        match field.and_then(|(start, word)| colour(word).map(|code| (start, word, code))) {
            Some((start, word, code)) => {
                out.push_str(&line[..start]);
                out.push_str(&format!("\x1b[{code}m{word}\x1b[0m"));
                out.push_str(&line[start + word.len()..]);
            }
            None => out.push_str(line),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_outcome_fields_are_painted() {
        let text = "verdict    verified (attempt a@1, sha256:x)\n\
                    sha256:ab  0123456789ab  failed        -           s r1\n\
                    | verified\n";
        let painted = paint(text);
        assert!(painted.contains("verdict    \x1b[32mverified\x1b[0m (attempt"));
        assert!(painted.contains("0123456789ab  \x1b[31mfailed\x1b[0m        -"));
        assert!(painted.ends_with("| verified\n"), "{painted:?}");
        assert_eq!(paint("verdict    - (none)\n"), "verdict    - (none)\n");
    }
}
