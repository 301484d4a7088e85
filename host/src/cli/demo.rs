//! `sf demo`: the whole pipeline on real components, through the same code paths as the
//! subcommands (each step calls the subcommand's own function with the arguments a user would
//! type), in a fresh private directory on the embedded defaults.
//!
//! The sample project (`demo/sample/`, embedded in the binary): `sum.sh FILE` prints the sum of
//! the numbers in FILE but skips the first line (the bug); `check.sh` compares its answer with
//! an expected sum. The Slice's acceptance: `bug-shown` (before, on the base: fails),
//! `bug-fixed` (after, on the Candidate: passes) and `empty-sums-to-zero` (a guardrail).

use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use clap::Args;

use super::assure::{self, CandidateInSlice, CollectArgs, FreezeArgs, JudgeArgs, SliceCommand};
use super::common::{CliError, Context, Output, absolute_new_path};
use super::integrate::{self, InspectArgs, IntegrateCommand, InvokeArgs, PrepareArgs};
use super::repo::{self, CreateArgs, RepoCommand};
use super::seal::{self, SealArgs};
use crate::assurance::Outcome;
use crate::canonical::{self, Digest};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo's files in this new directory (it must not exist yet) instead of a
    /// temporary one, and print the commands to explore them
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
}

/// The sample project, its two proposed versions of `sum.sh` and the Slice.
const SAMPLE: &[(&str, &str)] = &[
    ("project/sum.sh", include_str!("demo/sample/project/sum.sh")),
    (
        "project/check.sh",
        include_str!("demo/sample/project/check.sh"),
    ),
    (
        "slice/slice.json",
        include_str!("demo/sample/slice/slice.json"),
    ),
    (
        "slice/acceptance.json",
        include_str!("demo/sample/slice/acceptance.json"),
    ),
    (
        "slice/recipe.json",
        include_str!("demo/sample/slice/recipe.json"),
    ),
    (
        "slice/inputs/numbers/numbers.txt",
        include_str!("demo/sample/slice/inputs/numbers/numbers.txt"),
    ),
    (
        "slice/inputs/numbers/expected.txt",
        include_str!("demo/sample/slice/inputs/numbers/expected.txt"),
    ),
    (
        "slice/inputs/empty/numbers.txt",
        include_str!("demo/sample/slice/inputs/empty/numbers.txt"),
    ),
];
const SUM_BUGGY: &str = include_str!("demo/sample/project/sum.sh");
const SUM_FIXED: &str = include_str!("demo/sample/fix/sum.sh");
const SUM_NOT_FIXED: &str = include_str!("demo/sample/no-fix/sum.sh");

const PRODUCT: &str = "sf-demo";
const TARGET: &str = "refs/heads/main";

/// The steps taken so far, printed as they happen unless `--json`.
struct Steps {
    json: bool,
    steps: Vec<serde_json::Value>,
    ok: bool,
}

impl Steps {
    fn record(&mut self, step: &str, ok: bool, line: String, mut ids: serde_json::Value) {
        self.ok &= ok;
        ids["step"] = step.into();
        ids["ok"] = ok.into();
        self.steps.push(ids);
        if !self.json {
            let mark = if ok { "ok  " } else { "FAIL" };
            let mut stdout = std::io::stdout().lock();
            let _ = writeln!(stdout, "[{mark}] {step:<18} {line}");
            let _ = stdout.flush();
        }
    }

    fn failed(&self, detail: &str) -> CliError {
        let failed: Vec<&str> = self
            .steps
            .iter()
            .filter(|step| step["ok"] == false)
            .filter_map(|step| step["step"].as_str())
            .collect();
        CliError::new(
            "demo-failed",
            format!(
                "the demo did not behave as described ({detail}); steps that failed: [{}]; \
                 steps: {}",
                failed.join(", "),
                serde_json::Value::Array(self.steps.clone())
            ),
        )
    }
}

/// Where the demo runs: a new private directory, removed at the end unless kept.
struct Workspace {
    root: PathBuf,
    keep: bool,
}

impl Drop for Workspace {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

fn workspace(keep: Option<&Path>) -> Result<Workspace, CliError> {
    let (root, keep) = match keep {
        Some(dir) => {
            let dir = absolute_new_path(dir, "--keep")?;
            if dir.symlink_metadata().is_ok() {
                return Err(CliError::new(
                    "exists",
                    format!(
                        "--keep {}: already exists; the demo never reuses a directory: name a \
                         new one",
                        dir.display()
                    ),
                ));
            }
            (dir, true)
        }
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos());
            let dir = std::env::temp_dir().join(format!("sf-demo-{}-{nanos}", std::process::id()));
            (dir, false)
        }
    };
    // Created private (0700), never reused: a directory that exists already is refused.
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&root)
        .map_err(|error| {
            CliError::new(
                "unavailable",
                format!("the demo directory {}: {error}", root.display()),
            )
        })?;
    let workspace = Workspace { root, keep };
    Ok(workspace)
}

fn write(path: &Path, text: &str) -> Result<(), CliError> {
    let unwritable = |error: std::io::Error| {
        CliError::new(
            "unavailable",
            format!("the demo file {}: {error}", path.display()),
        )
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(unwritable)?;
    }
    std::fs::write(path, text).map_err(unwritable)
}

fn text(value: &serde_json::Value) -> String {
    value.as_str().unwrap_or("-").to_owned()
}

pub fn run(context: &Context, args: DemoArgs) -> Result<Output, CliError> {
    if context.config.is_some() {
        return Err(CliError::new(
            "usage",
            "--config: sf demo always runs on the embedded defaults (git-cli, sandbox-exec, \
             SQLite evidence, file gate); run it without --config",
        ));
    }
    let workspace = workspace(args.keep.as_deref())?;
    let root = workspace.root.clone();
    // Every step runs with the embedded defaults, as `sf <subcommand>` without --config.
    let defaults = Context {
        config: None,
        json: context.json,
    };
    for (path, text) in SAMPLE {
        write(&root.join(path), text)?;
    }
    let identity = root.join("identity.json");
    let slice = root.join("slice");
    let gate = root.join("gate.json");
    let prepared = root.join("prepared.json");
    let repository = root.join("repo.git");
    let mut steps = Steps {
        json: context.json,
        steps: Vec::new(),
        ok: true,
    };

    // 1. An owned repository from the sample project.
    let created = repo::run(
        &defaults,
        RepoCommand::Create(CreateArgs {
            path: repository.clone(),
            product: PRODUCT.into(),
            target: TARGET.into(),
            from: Some(root.join("project")),
            from_git: None,
            rev: None,
            identity_out: Some(identity.clone()),
        }),
    )?;
    let initial = text(&created.json["initial"]);
    steps.record(
        "repo create",
        true,
        format!(
            "owned repository {} (target {TARGET} at {initial})",
            repository.display()
        ),
        serde_json::json!({"repository": repository.display().to_string(), "initial": initial}),
    );

    // 2. Freeze the Slice.
    let frozen = assure::run_slice(
        &defaults,
        SliceCommand::Freeze(FreezeArgs {
            dir: slice.clone(),
            identity: identity.clone(),
        }),
    )?;
    steps.record(
        "slice freeze",
        frozen.json["base"] == initial.as_str(),
        format!(
            "Slice sum-fix revision 1, acceptance {}",
            text(&frozen.json["acceptance"])
        ),
        serde_json::json!({
            "acceptance": frozen.json["acceptance"],
            "recipe": frozen.json["recipe"],
            "environment": frozen.json["environment"],
            "base": frozen.json["base"],
        }),
    );

    // 3-5. The fixing Candidate: seal, collect, judge.
    let (fix, fix_verdict) = candidate(
        &defaults,
        &mut steps,
        &root,
        "fix",
        SUM_FIXED,
        Outcome::Verified,
    )?;

    // 6. Open the gate.
    write(&gate, "{\"proceed\": true}\n")?;
    steps.record(
        "gate open",
        true,
        format!("wrote {{\"proceed\": true}} to {}", gate.display()),
        serde_json::json!({"gate": gate.display().to_string()}),
    );

    // 7. Prepare the integration, the Verdict as its proof.
    let proof = Digest::of(
        &canonical::encode(&fix_verdict)
            .map_err(|error| CliError::new("invalid-input", error.to_string()))?,
    );
    let intent = integrate::run(
        &defaults,
        IntegrateCommand::Prepare(PrepareArgs {
            identity: identity.clone(),
            payload: None,
            candidate: Some(fix.digest.clone()),
            action: Some("demo-integrate-sum-fix".into()),
            occurrence: Some(1),
            proof: Some(proof.to_string()),
            owner: Some("sf-demo".into()),
            generation: Some(1),
            prepared_out: Some(prepared.clone()),
        }),
    )?;
    let intent_digest = text(&intent.json["digest"]);
    steps.record(
        "integrate prepare",
        intent.json["payload"]["commit"] == fix.commit.as_str(),
        format!(
            "intent {intent_digest}: {TARGET} {initial} -> {}",
            fix.commit
        ),
        serde_json::json!({"intent": intent_digest, "proof": proof.to_string(),
                           "prepared": prepared.display().to_string()}),
    );

    // 8. Invoke once, 9. inspect, 10. invoke again.
    let invoke = || {
        integrate::run(
            &defaults,
            IntegrateCommand::Invoke(InvokeArgs {
                identity: identity.clone(),
                prepared: prepared.clone(),
                gate: Some(gate.clone()),
            }),
        )
    };
    let first = invoke()?;
    observation(&mut steps, "integrate invoke", &first.json, true);
    let inspected = integrate::run(
        &defaults,
        IntegrateCommand::Inspect(InspectArgs {
            identity: identity.clone(),
            prepared: prepared.clone(),
        }),
    )?;
    observation(&mut steps, "integrate inspect", &inspected.json, false);
    let second = invoke()?;
    let again_ok =
        second.json["dispatched"] == false && second.json["target"] == fix.commit.as_str();
    steps.record(
        "invoke again",
        again_ok,
        format!(
            "dispatched {}, invocation {}: nothing started, target still {}",
            second.json["dispatched"],
            text(&second.json["invocation"]),
            text(&second.json["target"])
        ),
        serde_json::json!({"invocation": second.json["invocation"],
                           "dispatched": second.json["dispatched"],
                           "target": second.json["target"]}),
    );

    // 11-13. A Candidate that does not fix the bug: seal, collect, judge; never prepared.
    let (no_fix, _) = candidate(
        &defaults,
        &mut steps,
        &root,
        "no-fix",
        SUM_NOT_FIXED,
        Outcome::Failed,
    )?;
    let target = defaults
        .open_repository(&identity)?
        .target()
        .map_err(|error| super::common::repository_error("the repository's target", &error))?
        .to_hex();
    steps.record(
        "not integrated",
        target == fix.commit && target != no_fix.commit,
        format!(
            "{TARGET} is {target} (the fix); Candidate {} was never prepared",
            no_fix.digest
        ),
        serde_json::json!({"target": target, "candidate": no_fix.digest}),
    );

    let mut text = String::new();
    if steps.ok {
        text.push_str("demo ok: every step behaved as described\n");
    }
    if workspace.keep {
        let id = identity.display();
        let sl = slice.display();
        text.push_str(&format!(
            "explore the result in {}:\n  sf evidence find --candidate {} --identity {id} --slice {sl}\n  \
             sf evidence find --candidate {} --identity {id} --slice {sl}\n  \
             sf integrate inspect --identity {id} --prepared {}\n  \
             git --git-dir {} log --oneline {TARGET}\n",
            root.display(),
            fix.digest,
            no_fix.digest,
            prepared.display(),
            repository.display(),
        ));
    }
    if !steps.ok {
        return Err(steps.failed("see the steps marked FAIL"));
    }
    let mut json = serde_json::json!({"steps": steps.steps, "ok": true});
    if workspace.keep {
        json["dir"] = root.display().to_string().into();
    }
    Ok(Output { json, text })
}

/// A sealed Candidate's ids.
struct Sealed {
    digest: String,
    commit: String,
}

/// Seals the Candidate replacing `sum.sh` with `sum`, collects its evidence and judges it,
/// expecting `expected`; returns its ids and the Verdict.
fn candidate(
    context: &Context,
    steps: &mut Steps,
    root: &Path,
    name: &str,
    sum: &str,
    expected: Outcome,
) -> Result<(Sealed, canonical::Value), CliError> {
    let identity = root.join("identity.json");
    let slice = root.join("slice");
    let proposal = root.join("proposals").join(format!("{name}.json"));
    let edits = serde_json::json!({"edits": [{
        "path": "sum.sh",
        "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
        "text": sum,
    }]});
    write(&proposal, &edits.to_string())?;
    let sealed = seal::run(
        context,
        SealArgs {
            identity: identity.clone(),
            frozen: slice.join("frozen").join("frozen-inputs.json"),
            proposal,
        },
    )?;
    let ids = Sealed {
        digest: text(&sealed.json["digest"]),
        commit: text(&sealed.json["commit"]),
    };
    steps.record(
        &format!("seal {name}"),
        true,
        format!("Candidate {} (commit {})", ids.digest, ids.commit),
        serde_json::json!({"candidate": ids.digest, "commit": ids.commit}),
    );
    let collected = assure::run_collect(
        context,
        CollectArgs {
            target: CandidateInSlice {
                identity: identity.clone(),
                candidate: ids.digest.clone(),
                slice: slice.clone(),
            },
            gate: None,
            deadline: None,
        },
    )?;
    let records = collected.json["evidence"].as_array().map_or(0, Vec::len);
    steps.record(
        &format!("collect {name}"),
        collected.json["mayJudge"] == true && records == 3,
        format!(
            "attempt {}: {records} Evidence records",
            collected.json["attempt"]["epoch"]
        ),
        serde_json::json!({"attempt": collected.json["attempt"],
                           "evidence": collected.json["evidence"]}),
    );
    let verdict = assure::judge_verdict(
        context,
        JudgeArgs {
            target: CandidateInSlice {
                identity,
                candidate: ids.digest.clone(),
                slice,
            },
            attempt: None,
        },
    )?;
    let checks: Vec<String> = verdict
        .checks
        .iter()
        .map(|check| {
            let met = match check.met {
                Some(true) => "met",
                Some(false) => "missed",
                None => "not attributable",
            };
            format!("{} {met}", check.check)
        })
        .collect();
    steps.record(
        &format!("judge {name}"),
        verdict.outcome == expected,
        format!("{} ({})", verdict.outcome.as_str(), checks.join(", ")),
        serde_json::json!({"candidate": ids.digest, "outcome": verdict.outcome.as_str(),
                           "pins": verdict.pins.to_string()}),
    );
    Ok((ids, verdict.to_value()))
}

/// Records an integration observation; `invoke` whether it is the first invoke's.
fn observation(steps: &mut Steps, step: &str, observed: &serde_json::Value, invoke: bool) {
    let ok = observed["invocation"] == "confirmed" && (!invoke || observed["dispatched"] == true);
    steps.record(
        step,
        ok,
        format!(
            "invocation {}, dispatched {}, target {}",
            text(&observed["invocation"]),
            observed["dispatched"],
            text(&observed["target"])
        ),
        serde_json::json!({"invocation": observed["invocation"],
                           "dispatched": observed["dispatched"],
                           "target": observed["target"],
                           "receipt": observed["receipt"]}),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_acceptance_expects_the_sample_outputs() {
        let acceptance = include_str!("demo/sample/slice/acceptance.json");
        for output in ["ok\n", "0\n"] {
            assert!(acceptance.contains(&Digest::of(output.as_bytes()).to_string()));
        }
        assert_ne!(SUM_BUGGY, SUM_FIXED);
        assert_ne!(SUM_FIXED, SUM_NOT_FIXED);
    }
}
