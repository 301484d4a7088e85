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

use sf_app::facts::{self, Facts, ShowRequest};
use sf_host::text_escape;

use super::common::{CliError, Context, Output};
use super::render::{change_word, facts_json, verdict_words};

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

/// `sf show`.
pub fn show(context: &Context, args: ShowArgs) -> Result<Output, CliError> {
    let request = ShowRequest {
        identity: args.identity,
        what: args.what,
        slice: args.slice,
    };
    let facts = facts::show(&context.backends, &request)?;
    let manifest = &facts.sealed.manifest;
    let mut text = format!(
        "candidate  {}\ncommit     {}\nbase       {}\nslice      {} revision {}\n",
        facts.sealed.digest,
        manifest.commit.to_hex(),
        manifest.base_commit.to_hex(),
        manifest.slice.id,
        manifest.slice.revision
    );
    match verdict_words(&facts) {
        Ok((outcome, digest, attempt)) => text.push_str(&format!(
            "verdict    {outcome} (attempt {attempt}, {digest})\n"
        )),
        Err(why) => text.push_str(&format!("verdict    - ({})\n", text_escape::line(&why))),
    }
    text.push_str(&review_text(&facts));
    text.push_str(&landing_text(&facts));
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
        json: facts_json(&facts),
        text,
    })
}

/// The review subject of the newest Verdict, each review check's state, and every review
/// record of its attempt with whether it counts.
fn review_text(facts: &Facts) -> String {
    let Some(reviews) = facts.verdict().and_then(|verdict| verdict.reviews.as_ref()) else {
        return String::new();
    };
    let mut text = format!(
        "review     subject {} (process checks {})\n",
        reviews.subject,
        reviews.process.as_str()
    );
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
        let counts = match &record.why {
            None => "counts".to_owned(),
            Some(why) => format!("counts for nothing: {}", text_escape::line(why)),
        };
        let review = &record.review;
        text.push_str(&format!(
            "  {} {} by {} at {} ({counts})\n",
            review.decision.as_str(),
            review.check,
            review.reviewer,
            review.at,
        ));
    }
    text
}

/// The landing word, and every integration and delivery intent with what inspect reads.
fn landing_text(facts: &Facts) -> String {
    let mut text = format!("landing    {}\n", facts.landing());
    for (intent, observed) in &facts.integrations {
        text.push_str(&format!(
            "  integration {}#{}: {} ({})\n",
            intent.payload.action.id,
            intent.payload.action.occurrence,
            observed.invocation.as_str(),
            observed.postcondition.as_str()
        ));
    }
    for (delivery, observed) in &facts.deliveries {
        text.push_str(&format!(
            "  delivery {}#{} to {} {}: {} ({})\n",
            delivery.payload.action.id,
            delivery.payload.action.occurrence,
            text_escape::line(&delivery.payload.remote),
            delivery.payload.remote_ref,
            observed.invocation.as_str(),
            observed.postcondition()
        ));
    }
    if let Some((name, blob)) = &facts.attestation {
        text.push_str(&format!(
            "  attestation {name} (blob {blob}): check it with `sf verify`\n"
        ));
    }
    text
}

/// `sf list`.
pub fn list(context: &Context, args: ListArgs) -> Result<Output, CliError> {
    let listed = facts::list(&context.backends, &args.identity, args.slice.as_deref())?;
    let mut rows = Vec::new();
    let mut text = String::new();
    for facts in &listed {
        let manifest = &facts.sealed.manifest;
        let outcome = verdict_words(facts).map_or_else(|_| "-".to_owned(), |(word, _, _)| word);
        text.push_str(&format!(
            "{}  {}  {:<12}  {:<10}  {} r{}\n",
            facts.sealed.digest,
            &manifest.commit.to_hex()[..12],
            outcome,
            facts.landing(),
            manifest.slice.id,
            manifest.slice.revision
        ));
        rows.push(facts_json(facts));
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
