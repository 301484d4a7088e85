//! What is known of a Candidate ([`Facts`]) as JSON: the form `sf show`, `sf list` and `sf
//! report` share.

use sf_app::facts::{Facts, ReviewRecord};

use crate::common::json_value;

/// The newest Verdict's outcome, digest and attempt, or why there is none.
pub fn verdict_words(facts: &Facts) -> Result<(String, String, String), String> {
    let digest = facts.verdict.clone()?;
    let verdict = facts
        .verdict()
        .expect("a Verdict's digest comes with the Verdict");
    Ok((
        verdict.outcome.as_str().to_owned(),
        digest.to_string(),
        verdict.attempt.to_string(),
    ))
}

/// The word of an edit: `added`, `deleted` or `changed`.
pub fn change_word(prior: bool, next: bool) -> &'static str {
    match (prior, next) {
        (false, true) => "added",
        (true, false) => "deleted",
        _ => "changed",
    }
}

/// A Candidate's facts as JSON.
pub fn facts_json(facts: &Facts) -> serde_json::Value {
    let manifest = &facts.sealed.manifest;
    let message = facts
        .sealed
        .proposal
        .as_ref()
        .and_then(|p| p.message.as_ref());
    serde_json::json!({
        "digest": facts.sealed.digest.to_string(),
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
        "verdict": match verdict_words(facts) {
            Ok((outcome, digest, attempt)) => serde_json::json!({
                "outcome": outcome, "digest": digest, "attempt": attempt,
            }),
            Err(why) => serde_json::json!({"none": why}),
        },
        "review": review_json(facts),
        "landing": facts.landing(),
        "attestation": facts.attestation.as_ref().map(|(name, blob)| serde_json::json!({
            "ref": name, "blob": blob.to_hex(),
        })),
        "integrations": integrations_json(facts),
        "deliveries": deliveries_json(facts),
    })
}

/// The review checks of the newest Verdict, its subject and every review record of its
/// attempt; `null` when the Slice counts no review check or there is no Verdict.
fn review_json(facts: &Facts) -> serde_json::Value {
    let Some(reviews) = facts.verdict().and_then(|verdict| verdict.reviews.as_ref()) else {
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
        "records": facts.reviews.iter().map(review_record_json).collect::<Vec<_>>(),
    })
}

/// A review record of the judged attempt, with whether it counts and why not.
fn review_record_json(record: &ReviewRecord) -> serde_json::Value {
    let review = &record.review;
    serde_json::json!({
        "record": record.id.to_string(),
        "check": review.check,
        "reviewer": review.reviewer,
        "decision": review.decision.as_str(),
        "at": review.at,
        "reason": review.reason,
        "signed": review.signature.is_some(),
        "counts": record.why.is_none(),
        "why": record.why,
    })
}

/// Every integration intent of the Candidate, as inspected.
pub fn integrations_json(facts: &Facts) -> Vec<serde_json::Value> {
    facts
        .integrations
        .iter()
        .map(|(intent, observed)| {
            serde_json::json!({
                "intent": intent.digest.to_string(),
                "action": intent.payload.action.id,
                "occurrence": intent.payload.action.occurrence,
                "invocation": observed.invocation.as_str(),
                "postcondition": observed.postcondition.as_str(),
            })
        })
        .collect()
}

/// Every delivery intent of the Candidate, as inspected.
pub fn deliveries_json(facts: &Facts) -> Vec<serde_json::Value> {
    facts
        .deliveries
        .iter()
        .map(|(delivery, observed)| {
            serde_json::json!({
                "intent": delivery.digest.to_string(),
                "action": delivery.payload.action.id,
                "occurrence": delivery.payload.action.occurrence,
                "remote": delivery.payload.remote,
                "remoteRef": delivery.payload.remote_ref,
                "invocation": observed.invocation.as_str(),
                "postcondition": observed.postcondition(),
            })
        })
        .collect()
}
