//! `sf land`: the whole guarded path in one command (see [`sf_host::landing`]): preflight,
//! re-export, collect, re-export, judge, and only on Verified prepare and invoke behind a
//! guard that judges the stored evidence again immediately before the move. A replay of an
//! occurrence that landed starts nothing and reports the earlier result.
//!
//! Exit status, for CI scripts: 0 integrated (now or before); 2 invalid input or usage
//! (nothing written); 3 Failed; 4 Inconclusive, or no Verdict could be issued; 5 withheld by
//! the gate (before anything started, or after the claim: the occurrence is then consumed);
//! 6 unknown (inspect; never retry the occurrence); 7 not dispatched (the target moved away
//! from the Candidate's base); 1 anything else (nothing decided). With `--deliver`, a
//! landing that integrated goes on to deliver the same commit to the base's upstream (the
//! same Verified Verdict, a delivery intent for the same action occurrence), and the exit
//! status is the delivery's when it is not confirmed: 5 withheld, 6 unknown, 7 not
//! dispatched, 8 refused.

use std::path::{Path, PathBuf};

use clap::Args;

use super::assure::{
    CandidateInSlice, Loaded, PREFLIGHT_GATE_TIMEOUT, Progress, deadline, fence, land_error,
    output_tails, run_json_of, verdict_json, verdict_text,
};
use super::common::{CliError, Context, Output, json_value, read_input};
use super::deliver;
use super::{
    EXIT_FAILED, EXIT_FAILURE, EXIT_INCONCLUSIVE, EXIT_NOT_DISPATCHED, EXIT_UNKNOWN, EXIT_USAGE,
    EXIT_WITHHELD, Outcome,
};
use sf_host::contracts::EvidenceStore;
use sf_host::landing::{LandOutcome, LandRequest, Landed, land, preflight};
use sf_host::repository::CandidateProtocol;
use sf_host::repository::{Action, DeliveryMode, DeliveryRequest, Owner};

/// The owner a landing names when `--owner` is not given.
pub const DEFAULT_OWNER: &str = "sf-land";

#[derive(Debug, Args)]
pub struct LandArgs {
    #[command(flatten)]
    pub(super) target: CandidateInSlice,
    /// A gate file ({"proceed": true} or {"proceed": false, "reason": …}), read before
    /// anything starts, before every run and immediately before the move, in place of the
    /// configured [gate] (default: open)
    #[arg(long, value_name = "FILE")]
    pub(super) gate: Option<PathBuf>,
    /// The action id of the integration; default: land/<the Candidate digest>
    #[arg(long, value_name = "ID")]
    pub(super) action: Option<String>,
    /// The action's occurrence; default 1. A new effect needs a new occurrence
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(super) occurrence: u64,
    /// The owner id of the integration
    #[arg(long, value_name = "ID", default_value = DEFAULT_OWNER)]
    pub(super) owner: String,
    /// The owner's generation
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(super) generation: u64,
    /// When the collection must be over (RFC 3339 UTC); default: in one hour
    #[arg(long, value_name = "ISO")]
    pub(super) deadline: Option<String>,
    /// How many checks run at a time (each still one sandboxed run and one record)
    #[arg(long, value_name = "N", default_value = "1")]
    pub(super) jobs: std::num::NonZeroUsize,
    /// After integrating, deliver the commit to the base's upstream, at most once (see `sf
    /// deliver`)
    #[arg(long)]
    pub(super) deliver: bool,
    /// With --deliver: push to a new side branch refs/heads/sf/<candidate> instead of the
    /// upstream branch
    #[arg(long, requires = "deliver")]
    pub(super) side_branch: bool,
}

/// The exit status of a landing's outcome.
pub fn exit_status(outcome: LandOutcome) -> u8 {
    match outcome {
        LandOutcome::Integrated => 0,
        LandOutcome::Failed => EXIT_FAILED,
        LandOutcome::Inconclusive => EXIT_INCONCLUSIVE,
        LandOutcome::Withheld => EXIT_WITHHELD,
        LandOutcome::Unknown => EXIT_UNKNOWN,
        LandOutcome::NotDispatched => EXIT_NOT_DISPATCHED,
    }
}

/// The exit status of a landing that ended in an error.
pub fn error_status(error: &CliError) -> u8 {
    match error.code.as_str() {
        "usage" | "invalid-input" | "unreadable-input" | "invalid-identity" | "missing" => {
            EXIT_USAGE
        }
        "withheld" => EXIT_WITHHELD,
        "not-verified" => EXIT_INCONCLUSIVE,
        _ => EXIT_FAILURE,
    }
}

/// A `--gate FILE` must be a readable gate file before anything starts: a typo there is a
/// usage error, not a consumed occurrence.
pub(super) fn check_gate_file(file: Option<&Path>) -> Result<(), CliError> {
    let Some(file) = file else {
        return Ok(());
    };
    let bytes = read_input(file, "--gate")?;
    let shape = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .filter(|value| {
            value
                .get("proceed")
                .is_some_and(serde_json::Value::is_boolean)
        });
    match shape {
        Some(_) => Ok(()),
        None => Err(CliError::new(
            "invalid-input",
            format!(
                "--gate {}: is not a gate file ({{\"proceed\": true}} or {{\"proceed\": false, \
                 \"reason\": …}}); nothing was started",
                file.display()
            ),
        )),
    }
}

/// `sf land`.
pub fn run(context: &Context, args: LandArgs) -> Outcome {
    match land_command(context, &args) {
        Ok((output, exit)) => Outcome {
            result: Ok(output),
            exit,
        },
        Err(error) => Outcome {
            exit: error_status(&error),
            result: Err(error),
        },
    }
}

fn land_command(context: &Context, args: &LandArgs) -> Result<(Output, u8), CliError> {
    let deadline = deadline(args.deadline.as_deref())?;
    check_gate_file(args.gate.as_deref())?;
    let loaded = Loaded::read(context, &args.target)?;
    let action = Action {
        id: args
            .action
            .clone()
            .unwrap_or_else(|| format!("land/{}", loaded.sealed.digest)),
        occurrence: args.occurrence,
    };
    let owner = Owner {
        id: args.owner.clone(),
        generation: args.generation,
    };
    let delivery_action = action.clone();
    let delivery_owner = owner.clone();
    let executor = loaded.slice.executor(context)?;
    let gate = context.gate(args.gate.as_deref())?;
    let delivery_gate = std::sync::Arc::clone(&gate);
    let replay = loaded
        .repository
        .retained_intent(&action)
        .map_err(|error| super::common::repository_error("the action's intent", &error))?;
    if replay.is_none() {
        preflight(
            executor.as_ref(),
            &loaded.slice.frozen,
            &gate,
            deadline,
            PREFLIGHT_GATE_TIMEOUT,
        )
        .map_err(|error| land_error("before anything started", error))?;
    }
    let protected = loaded.protected()?;
    let store = loaded.slice.evidence_store(context)?;
    let records = std::sync::Arc::clone(&store);
    let product = loaded.repository.identity().product_id.clone();
    let fence = fence(context, &loaded.slice, &product)?;
    let progress = Progress::new(loaded.slice.frozen.acceptance.process_checks().count());
    // An sf-candidate/4 Candidate's programs run by reference from its materialised base.
    let trees_store = match loaded.sealed.manifest.protocol {
        CandidateProtocol::V4 => Some(super::assure::trees_store(context)?),
        _ => None,
    };
    let landed = land(
        LandRequest {
            repository: &loaded.repository,
            candidate: loaded.sealed.digest.clone(),
            slice: loaded.slice.frozen.clone(),
            executor,
            store,
            gate,
            fence: &fence,
            protected,
            action,
            owner,
            deadline,
            jobs: args.jobs,
            environments: super::assure::environments(context, &loaded.slice.frozen.acceptance)?,
            tree_store: trees_store.as_ref(),
            faults: std::sync::Arc::clone(&context.faults),
        },
        &mut |event| progress.report(event),
    )
    .map_err(|error| land_error("landing", error))?;
    drop(progress);
    let mut exit = exit_status(landed.outcome);
    let mut output = describe(&landed, &loaded, records.as_ref());
    if args.deliver
        && landed.outcome == LandOutcome::Integrated
        && let Some(prepared) = &landed.prepared
    {
        let delivery = deliver::prepare_for(
            &loaded,
            DeliveryRequest {
                action: delivery_action,
                owner: delivery_owner,
                candidate: loaded.sealed.digest.clone(),
                verdict: prepared.payload.proof.clone(),
                mode: if args.side_branch {
                    DeliveryMode::SideBranch
                } else {
                    DeliveryMode::Branch
                },
            },
        )?;
        let observed = deliver::invoke_for(context, &loaded, &delivery, delivery_gate)?;
        exit = deliver::invocation_status(observed.invocation);
        output.json["delivery"] = serde_json::json!({
            "prepared": json_value(&delivery.to_value()),
            "observation": json_value(&observed.to_value()),
        });
        let described = deliver::describe(&observed);
        output.text.push_str("  delivery\n");
        for line in described.text.lines() {
            output
                .text
                .push_str(&format!("    {}\n", sf_host::text_escape::line(line)));
        }
    }
    Ok((output, exit))
}

fn describe(landed: &Landed, loaded: &Loaded, store: &dyn EvidenceStore) -> Output {
    let mut json = serde_json::json!({
        "outcome": landed.outcome.as_str(),
        "replayed": landed.replayed,
        "candidate": loaded.sealed.digest.to_string(),
        "slice": loaded.slice.digest.to_string(),
        "noVerdict": landed.no_verdict,
    });
    let mut text = format!(
        "{}{}: Candidate {} under Slice {} revision {}\n",
        landed.outcome.as_str(),
        if landed.replayed {
            " (an earlier landing of this occurrence)"
        } else {
            ""
        },
        loaded.sealed.digest,
        loaded.slice.frozen.record.id,
        loaded.slice.frozen.record.revision
    );
    if let Some(collected) = &landed.collected {
        json["attempt"] = json_value(&collected.attempt.to_value());
        json["mayJudge"] = collected.may_judge().into();
        json["runs"] = collected.runs.iter().map(run_json_of).collect();
        text.push_str(&format!(
            "  collected attempt {} ({} records)\n",
            collected.attempt,
            collected.evidence.len()
        ));
    } else if let Some(verdict) = landed.verdict.as_ref().filter(|_| !landed.replayed) {
        json["attempt"] = json_value(&verdict.attempt.to_value());
        json["reviewedAttempt"] = true.into();
        text.push_str(&format!(
            "  judged attempt {} again, nothing collected: its process checks are Verified, and \
             its reviewers read it\n",
            verdict.attempt
        ));
    }
    if let Some(reason) = &landed.no_verdict {
        text.push_str(&format!(
            "  no Verdict: {}\n",
            sf_host::text_escape::line(reason)
        ));
    }
    if let Some(verdict) = &landed.verdict
        && let Ok(digest) = verdict.digest()
    {
        json["verdict"] = verdict_json(verdict, &digest);
        for line in verdict_text(verdict, &digest).lines() {
            text.push_str(&format!("  {line}\n"));
        }
        text.push_str(&output_tails(store, verdict));
    }
    if let Some(prepared) = &landed.prepared {
        json["prepared"] = json_value(&prepared.to_value());
        text.push_str(&format!(
            "  intent        {} (action {} #{})\n",
            prepared.digest, prepared.payload.action.id, prepared.payload.action.occurrence
        ));
    }
    if let Some(observation) = &landed.observation {
        json["observation"] = json_value(&observation.to_value());
        text.push_str(&format!(
            "  invocation    {} (dispatched {})\n  target        {} {}\n",
            observation.invocation.as_str(),
            observation.dispatched,
            observation.target_ref,
            observation.target.map_or("-".into(), |id| id.to_hex()),
        ));
        if let Some(problem) = &observation.problem {
            text.push_str(&format!(
                "  problem       {}\n",
                sf_host::text_escape::line(problem)
            ));
        }
    }
    Output { json, text }
}
