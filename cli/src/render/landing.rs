//! A landing as `sf land` (and `sf demo`) shows it: the outcome, what was collected and
//! judged, the intent and the move, and the delivery that followed.

use sf_app::land::{Delivered, Landed};
use sf_host::text_escape;

use super::effects::delivery;
use super::runs::run_json_of;
use super::verdict::{output_tails, verdict_json, verdict_text};
use crate::common::{Output, json_value};

/// A landing, as text and JSON.
pub fn landed(landed: &Landed) -> Output {
    let landing = &landed.landing;
    let record = &landed.slice.frozen.record;
    let json = serde_json::json!({
        "outcome": landing.outcome.as_str(),
        "replayed": landing.replayed,
        "candidate": landed.candidate.to_string(),
        "slice": landed.slice.digest.to_string(),
        "noVerdict": landing.no_verdict,
    });
    let text = format!(
        "{}{}: Candidate {} under Slice {} revision {}\n",
        landing.outcome.as_str(),
        if landing.replayed {
            " (an earlier landing of this occurrence)"
        } else {
            ""
        },
        landed.candidate,
        record.id,
        record.revision
    );
    let mut output = Output { json, text };
    withheld(landed, &mut output);
    judged(landed, &mut output);
    moved(landed, &mut output);
    if let Some(attested) = &landed.attestation {
        output.json["attestation"] = serde_json::json!({
            "commit": attested.commit.to_string(),
            "ref": attested.name,
            "blob": attested.id.to_string(),
            "created": attested.created,
        });
        output.text.push_str(&format!(
            "  attested: {} (blob {}{})\n",
            attested.name,
            attested.id,
            if attested.created {
                ""
            } else {
                ", kept from an earlier landing"
            }
        ));
    }
    if let Some(delivered) = &landed.delivery {
        delivered_into(delivered, &mut output);
    }
    output
}

/// Why the gate withheld the landing, in one shape wherever it did: `withheld: {reason,
/// occurrenceConsumed}` (consumed only when it withheld after the claim).
fn withheld(landed: &Landed, output: &mut Output) {
    let Some((consumed, reason)) = landed.landing.withheld() else {
        return;
    };
    output.json["withheld"] = serde_json::json!({
        "reason": reason,
        "occurrenceConsumed": consumed,
    });
    let when = if consumed {
        "immediately before the move; the occurrence is consumed: land again with a new \
         --occurrence"
    } else {
        "before anything started; nothing was written: land again once the gate proceeds"
    };
    output.text.push_str(&format!(
        "  the gate withheld it {when}: {}\n",
        text_escape::line(reason)
    ));
}

/// What the landing collected and judged.
fn judged(landed: &Landed, output: &mut Output) {
    let (landing, json, text) = (&landed.landing, &mut output.json, &mut output.text);
    if let Some(collected) = &landing.collected {
        json["attempt"] = json_value(&collected.attempt.to_value());
        json["mayJudge"] = collected.may_judge().into();
        json["runs"] = collected.runs.iter().map(run_json_of).collect();
        text.push_str(&format!(
            "  collected attempt {} ({} records)\n",
            collected.attempt,
            collected.evidence.len()
        ));
    } else if let Some(verdict) = landing.verdict.as_ref().filter(|_| !landing.replayed) {
        json["attempt"] = json_value(&verdict.attempt.to_value());
        json["reviewedAttempt"] = true.into();
        text.push_str(&format!(
            "  judged attempt {} again, nothing collected: its process checks are Verified, and \
             its reviewers read it\n",
            verdict.attempt
        ));
    }
    if let Some(reason) = &landing.no_verdict {
        text.push_str(&format!("  no Verdict: {}\n", text_escape::line(reason)));
    }
    if let Some(verdict) = &landing.verdict
        && let Ok(digest) = verdict.digest()
    {
        json["verdict"] = verdict_json(verdict, &digest);
        for line in verdict_text(verdict, &digest).lines() {
            text.push_str(&format!("  {line}\n"));
        }
        text.push_str(&output_tails(&landed.unmet));
    }
}

/// The intent the landing prepared and what its invocation observed.
fn moved(landed: &Landed, output: &mut Output) {
    let (landing, json, text) = (&landed.landing, &mut output.json, &mut output.text);
    if let Some(prepared) = &landing.prepared {
        json["prepared"] = json_value(&prepared.to_value());
        text.push_str(&format!(
            "  intent        {} (action {} #{})\n",
            prepared.digest, prepared.payload.action.id, prepared.payload.action.occurrence
        ));
    }
    if let Some(observation) = &landing.observation {
        json["observation"] = json_value(&observation.to_value());
        text.push_str(&format!(
            "  invocation    {} (dispatched {})\n  target        {} {}\n",
            observation.invocation.as_str(),
            observation.dispatched,
            observation.target_ref,
            observation.target.map_or("-".into(), |id| id.to_hex()),
        ));
        if let Some(problem) = &observation.problem {
            text.push_str(&format!("  problem       {}\n", text_escape::line(problem)));
        }
    }
}

/// The delivery that followed the landing, indented under it.
fn delivered_into(delivered: &Delivered, output: &mut Output) {
    output.json["delivery"] = serde_json::json!({
        "prepared": json_value(&delivered.prepared.to_value()),
        "observation": json_value(&delivered.observation.to_value()),
    });
    let described = delivery(&delivered.observation);
    output.text.push_str("  delivery\n");
    for line in described.text.lines() {
        output
            .text
            .push_str(&format!("    {}\n", text_escape::line(line)));
    }
}
