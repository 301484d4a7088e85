//! `sf evidence {get,find,migrate}`: Evidence records read back, each re-hashed, creating
//! nothing; and a Slice's SQLite store copied into another evidence store.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use sf_app::evidence::{self, GetRequest, MigrateRequest, Record};
use sf_host::assurance::{Observation, ProcessFacts, Review};
use sf_host::canonical::{Value, object};
use sf_host::text_escape;

use super::args::CandidateInSlice;
use super::common::{CliError, Context, Output, json_value};
use super::render::{command_line, results_lines};

/// `sf evidence …`.
#[derive(Debug, Subcommand)]
pub enum EvidenceCommand {
    /// Print one Evidence record, re-hashed
    Get(GetArgs),
    /// List the records filed under a Candidate's pins
    Find(FindArgs),
    /// Copy every record of a Slice's SQLite store into the evidence store another
    /// configuration names (PostgreSQL, say), each re-verified; running it again copies
    /// nothing twice
    Migrate(MigrateArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The Slice directory whose SQLite store is read
    #[arg(long, value_name = "SLICE")]
    from: PathBuf,
    /// The sf.toml whose [evidence_store] receives the records
    #[arg(long, value_name = "CONFIG")]
    to: PathBuf,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// The record id (sha256:…)
    id: String,
    /// The Slice directory whose evidence store holds it
    #[arg(long, value_name = "SLICE")]
    slice: PathBuf,
}

#[derive(Debug, Args)]
pub struct FindArgs {
    #[command(flatten)]
    target: CandidateInSlice,
}

/// `sf evidence …`.
pub fn run(context: &Context, command: EvidenceCommand) -> Result<Output, CliError> {
    let backends = &context.backends;
    match command {
        EvidenceCommand::Migrate(args) => {
            let request = MigrateRequest {
                from: args.from,
                to: args.to,
            };
            let migrated = evidence::migrate(backends, &request)?;
            Ok(Output {
                json: serde_json::json!({
                    "records": migrated.records,
                    "copied": migrated.copied,
                    "alreadyThere": migrated.present,
                }),
                text: format!(
                    "{} records in {}: {} copied, {} already there\n",
                    migrated.records,
                    migrated.file.display(),
                    migrated.copied,
                    migrated.present
                ),
            })
        }
        EvidenceCommand::Get(args) => {
            let request = GetRequest {
                id: args.id,
                slice: args.slice,
            };
            Ok(record(&evidence::get(backends, &request)?))
        }
        EvidenceCommand::Find(args) => {
            let found = evidence::find(backends, &args.target.target())?;
            let json = json_value(&object([
                ("pins", found.pins.to_string().into()),
                (
                    "ids",
                    Value::Array(found.ids.iter().map(|id| id.to_string().into()).collect()),
                ),
            ]));
            let mut text = format!("pins {}: {} records\n", found.pins, found.ids.len());
            for id in &found.ids {
                text.push_str(&format!("  {id}\n"));
            }
            Ok(Output { json, text })
        }
    }
}

/// One record: its fields, then what it holds (a review, or a run's observation).
fn record(read: &Record) -> Output {
    let (id, record) = (&read.id, &read.record);
    let mut output = Output {
        json: serde_json::json!({
            "id": id.to_string(),
            "pins": record.pins().to_string(),
            "attempt": json_value(&record.attempt().to_value()),
            "format": record.format(),
            "bytes": record.bytes().len(),
        }),
        text: format!(
            "record {id}\n  pins    {}\n  attempt {}\n  format  {}\n",
            record.pins(),
            record.attempt(),
            record.format()
        ),
    };
    if let Some(review) = &read.review {
        output.json["review"] = json_value(&review.to_value());
        output.text.push_str(&review_record_text(review));
    }
    if let Some(observation) = &read.observation {
        observation_into(read, observation, &mut output);
    }
    output
}

/// A run's observation: the check and how it ended, its problems and limits, its results,
/// and its output.
fn observation_into(read: &Record, observation: &Observation, output: &mut Output) {
    let (json, text) = (&mut output.json, &mut output.text);
    json["observation"] = json_value(&observation.facts_value());
    json["stdout"] = String::from_utf8_lossy(&observation.stdout).into();
    json["stderr"] = String::from_utf8_lossy(&observation.stderr).into();
    let facts = &observation.facts;
    text.push_str(&format!(
        "  check   {} ({})\n  status  {}\n",
        facts.check,
        facts.stage.as_str(),
        facts.status.as_str()
    ));
    if let Some(check) = &read.check {
        text.push_str(&format!("  command {}\n", command_line(&read.slice, check)));
    }
    if let Some(process) = &facts.process {
        text.push_str(&process_lines(process));
    }
    for problem in &facts.problems {
        text.push_str(&format!("  problem {}\n", text_escape::line(problem)));
    }
    match facts
        .process
        .as_ref()
        .map(|process| process.limits_hit.as_deref())
    {
        Some(Some(hits)) => {
            for hit in hits {
                text.push_str(&format!(
                    "  limit   {}\n",
                    text_escape::line(&hit.to_string())
                ));
            }
        }
        Some(None) => text.push_str("  limits  not recorded (an older format)\n"),
        None => {}
    }
    if let Some(results) = &observation.results {
        let (summary, tests) = results_lines(results);
        json["results"] = tests;
        text.push_str(&summary);
    }
    text.push_str(&text_escape::block("stdout", &observation.stdout));
    text.push_str(&text_escape::block("stderr", &observation.stderr));
}

/// A review record as `sf evidence get` shows it: its fields a line each, and the reviewer's
/// reason as a block (the reviewer's words never pass for sf's lines).
fn review_record_text(review: &Review) -> String {
    let mut text = format!(
        "  check    {}\n  decision {}\n  reviewer {}{}\n  at       {}\n  subject  {}\n  candidate {}\n",
        review.check,
        review.decision.as_str(),
        review.reviewer,
        if review.signature.is_some() {
            " (signed)"
        } else {
            ""
        },
        review.at,
        review.subject,
        review.candidate
    );
    text.push_str(&text_escape::block(
        "reason",
        format!("{}\n", review.reason).as_bytes(),
    ));
    text
}

/// How a run ended and what it used, one line each.
fn process_lines(process: &ProcessFacts) -> String {
    let ended = match (process.exit_code, process.signal) {
        (Some(code), _) => format!("{} (exit code {code})", process.status.code()),
        (None, Some(signal)) => format!("{} (signal {signal})", process.status.code()),
        (None, None) => process.status.code().to_owned(),
    };
    let peak = process
        .memory_peak_bytes
        .map_or_else(String::new, |bytes| format!(", peak memory {bytes} bytes"));
    format!(
        "  ended   {ended}\n  time    {} ms wall, {} ms user, {} ms system (timeout {} ms)\n  memory  largest process {} KiB{peak}\n",
        process.wall_ms,
        process.user_ms,
        process.system_ms,
        process.timeout_ms,
        process.max_rss_kib
    )
}
