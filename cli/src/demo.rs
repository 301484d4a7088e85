//! `sf demo`: the whole pipeline on real components, through the same use cases as the
//! subcommands (each step calls the use case a subcommand calls, with the request a user's
//! arguments make), in a fresh private directory on the embedded defaults. It walks the safe path:
//! Candidates are sealed for a frozen Slice and landed with `sf land --deliver`, which
//! integrates only a Verified Candidate and then pushes that very commit to the team's
//! repository, once. The team's repository is a bare Git repository the demo makes first, with
//! the sample project as its `main`; the owned repository imports it byte for byte.
//!
//! The sample project (`demo/sample/`, embedded in the binary): `sum.sh FILE` prints the sum
//! of the numbers in FILE but skips the first line (the bug). The Slice brings its own test,
//! `tests/numbers.sh`, laid over both the base and every Candidate, and a harness,
//! `run-test.sh`, that runs it; the expected sums are held only as digests. Its acceptance:
//! `bug-shown` (before, on the base: the sum of 1, 2, 3 comes out as 5), `bug-fixed` (after,
//! on the Candidate: 6) and `empty-sums-to-zero` (a guardrail running the Candidate's own
//! `sum.sh`, declared `entryInScope`).

use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use clap::Args;

use sf_app::error::repository_error;
use sf_app::files::absolute_new_path;
use sf_app::freeze::{FreezeRequest, freeze};
use sf_app::land::{DEFAULT_OWNER, LandRequest, land};
use sf_app::repo::{CreateRequest, Source, UpstreamRequest, create};
use sf_app::seal::{ProposalInput, SealRequest, seal};
use sf_app::{Backends, Target};
use sf_host::canonical::Digest;
use sf_host::contracts::RefName;
use sf_host::repository::Remote as _;
use sf_host::repository::{DeliveryMode, RepositorySettings};

use super::common::{CliError, Context, Output};
use super::exit::{EXIT_FAILED, landed_status, landing_error_status};
use super::progress::Progress;
use super::render;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo's files in this new directory (it must not exist yet) instead of a
    /// temporary one, and print the commands to explore them
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
}

/// The sample project, the Slice, and the proposed versions of `sum.sh` and of the test.
const SAMPLE: &[(&str, &str)] = &[
    ("project/sum.sh", include_str!("demo/sample/project/sum.sh")),
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
        "slice/inputs/empty/numbers.txt",
        include_str!("demo/sample/slice/inputs/empty/numbers.txt"),
    ),
    (
        "slice/harness/run-test.sh",
        include_str!("demo/sample/slice/harness/run-test.sh"),
    ),
    (
        "slice/overlay/tests/numbers.sh",
        include_str!("demo/sample/slice/overlay/tests/numbers.sh"),
    ),
];
const SUM_BUGGY: &str = include_str!("demo/sample/project/sum.sh");
const SUM_FIXED: &str = include_str!("demo/sample/fix/sum.sh");
const SUM_NOT_FIXED: &str = include_str!("demo/sample/no-fix/sum.sh");
const TEST_TAMPERED: &str = include_str!("demo/sample/tamper/numbers.sh");

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
    if context.backends.config.is_some() {
        return Err(CliError::new(
            "usage",
            "--config: sf demo always runs on the embedded defaults (git-cli, sandbox-exec, \
             SQLite evidence, file gate); run it without --config",
        ));
    }
    let workspace = workspace(args.keep.as_deref())?;
    let root = workspace.root.clone();
    // Every step runs with the embedded defaults, as `sf <subcommand>` without --config.
    let defaults = Backends::new(None);
    for (path, text) in SAMPLE {
        write(&root.join(path), text)?;
    }
    let identity = root.join("identity.json");
    let slice = root.join("slice");
    let gate = root.join("gate.json");
    let repository = root.join("repo.git");
    let mut steps = Steps {
        json: context.json,
        steps: Vec::new(),
        ok: true,
    };

    // 1. The team's repository: the sample project committed on `main` of a bare repository.
    let team = root.join("team.git");
    let upstream = team_repository(&root.join("project"), &team)?;
    steps.record(
        "team repository",
        true,
        format!("{} main at {upstream} (the sample project)", team.display()),
        serde_json::json!({"team": team.display().to_string(), "main": upstream}),
    );

    // 2. An owned repository whose first base is that commit, byte for byte, with the team's
    // repository recorded as its upstream.
    let created = create(
        &defaults,
        &CreateRequest {
            path: repository.clone(),
            product: PRODUCT.into(),
            target: TARGET.into(),
            source: Source::Git {
                repo: team.clone(),
                rev: "main".into(),
            },
            settings: RepositorySettings::default(),
            identity_out: Some(identity.clone()),
            upstream: UpstreamRequest {
                url: None,
                branch: Some("main".into()),
            },
        },
    )?;
    let initial = created.identity.initial.to_hex();
    steps.record(
        "repo create",
        initial == upstream
            && created
                .upstream
                .as_ref()
                .is_some_and(|record| record.upstream.branch == "main"),
        format!(
            "owned repository {} (target {TARGET} at {initial}, the team's commit; upstream {} main)",
            repository.display(),
            team.display()
        ),
        serde_json::json!({"repository": repository.display().to_string(), "initial": initial}),
    );

    // 2. Freeze the Slice: its harness, its test laid over both trees, its answer key as
    // digests.
    let frozen = freeze(
        &defaults,
        &FreezeRequest {
            dir: slice.clone(),
            identity: identity.clone(),
            base: None,
            dry_run: true,
        },
    )?;
    let record = &frozen.slice.record;
    steps.record(
        "slice freeze",
        record.base.to_hex() == initial
            && record
                .protected
                .iter()
                .any(|pattern| pattern == "tests/numbers.sh"),
        format!(
            "Slice sum-fix revision 1 ({}), harness and test overlay frozen",
            frozen.digest
        ),
        serde_json::json!({
            "slice": frozen.digest.to_string(),
            "acceptance": record.acceptance.to_string(),
            "harness": record.harness.to_string(),
            "overlay": record.overlay.to_string(),
            "base": record.base.to_hex(),
        }),
    );

    // 3. Open the gate the landing asks before each run and immediately before the move.
    write(&gate, "{\"proceed\": true}\n")?;
    steps.record(
        "gate open",
        true,
        format!("wrote {{\"proceed\": true}} to {}", gate.display()),
        serde_json::json!({"gate": gate.display().to_string()}),
    );

    // 4-5. The fixing Candidate: seal, land (collect, judge Verified, integrate once, deliver
    // once).
    let fix = seal_sum(&defaults, &mut steps, &root, "fix", SUM_FIXED)?;
    let landed = land_candidate(&defaults, &root, &fix.digest);
    let delivered = &landed.json["delivery"]["observation"];
    steps.record(
        "land fix",
        landed.exit == 0
            && landed.json["outcome"] == "integrated"
            && landed.json["verdict"]["verdict"]["outcome"] == "verified"
            && landed.json["observation"]["dispatched"] == true
            && delivered["invocation"] == "confirmed"
            && delivered["dispatched"] == true
            && delivered["read"]["target"] == fix.commit.as_str(),
        format!(
            "{} (exit {}): verdict {}, invocation {}, {TARGET} -> {}; delivered {}: the team's \
             main -> {}",
            text(&landed.json["outcome"]),
            landed.exit,
            text(&landed.json["verdict"]["verdict"]["outcome"]),
            text(&landed.json["observation"]["invocation"]),
            text(&landed.json["observation"]["target"]),
            text(&delivered["invocation"]),
            text(&delivered["read"]["target"]),
        ),
        landed.summary(),
    );

    // 6. Landing the same occurrence again starts nothing.
    let again = land_candidate(&defaults, &root, &fix.digest);
    steps.record(
        "land again",
        again.exit == 0
            && again.json["replayed"] == true
            && again.json["observation"]["dispatched"] == false
            && again.json["observation"]["target"] == fix.commit.as_str()
            && again.json["delivery"]["observation"]["dispatched"] == false
            && again.json["delivery"]["observation"]["invocation"] == "confirmed",
        format!(
            "{} (replayed {}): nothing collected, started or pushed, target still {}",
            text(&again.json["outcome"]),
            again.json["replayed"],
            text(&again.json["observation"]["target"])
        ),
        again.summary(),
    );

    // 7-8. A Candidate that does not fix the bug: judged Failed, never prepared.
    let no_fix = seal_sum(&defaults, &mut steps, &root, "no-fix", SUM_NOT_FIXED)?;
    let failed = land_candidate(&defaults, &root, &no_fix.digest);
    steps.record(
        "land no-fix",
        failed.exit == EXIT_FAILED
            && failed.json["outcome"] == "failed"
            && failed.json["prepared"].is_null()
            && failed.json["delivery"].is_null(),
        format!(
            "{} (exit {}): {}; nothing prepared",
            text(&failed.json["outcome"]),
            failed.exit,
            missed(&failed.json["verdict"]["verdict"])
        ),
        failed.summary(),
    );

    // 9. A proposal that rewrites the Slice's own test is refused at seal.
    let tamper = root.join("proposals").join("tamper.json");
    write(
        &tamper,
        &serde_json::json!({"edits": [{
            "path": "tests/numbers.sh",
            "prior": null,
            "text": TEST_TAMPERED,
        }]})
        .to_string(),
    )?;
    let refused = seal(
        &defaults,
        &SealRequest {
            identity: identity.clone(),
            slice: slice.clone(),
            proposal: ProposalInput::File(tamper),
        },
    );
    let refusal = refused.as_ref().err().map(|error| error.message.clone());
    steps.record(
        "seal tamper",
        refusal
            .as_deref()
            .is_some_and(|message| message.contains("protected-path")),
        format!(
            "a proposal that rewrites tests/numbers.sh: {}",
            refusal
                .as_deref()
                .unwrap_or("sealed (it should not have been)")
        ),
        serde_json::json!({"refused": refusal}),
    );

    // 10. The target is still the fix.
    let target = defaults
        .open_repository(&identity)?
        .target()
        .map_err(|error| repository_error("the repository's target", &error))?
        .to_hex();
    let main = RefName::parse(TARGET)
        .map_err(|error| CliError::new("invalid-input", error.to_string()))?;
    let team_main = defaults
        .remote()?
        .read_refs(&team.display().to_string(), &[&main])
        .map_err(|error| CliError::new("remote-unavailable", error.to_string()))?
        .get(TARGET)
        .map(|id| id.to_hex())
        .unwrap_or_default();
    steps.record(
        "not integrated",
        target == fix.commit && target != no_fix.commit && team_main == fix.commit,
        format!(
            "{TARGET} is {target} (the fix), and so is the team's main; Candidate {} was never \
             prepared",
            no_fix.digest
        ),
        serde_json::json!({"target": target, "team": team_main, "candidate": no_fix.digest}),
    );

    let mut text = String::new();
    if steps.ok {
        text.push_str("demo ok: every step behaved as described\n");
    }
    if workspace.keep {
        let id = identity.display();
        let sl = slice.display();
        text.push_str(&format!(
            "explore the result in {}:\n  sf judge --identity {id} --candidate {} --slice {sl}\n  \
             sf judge --identity {id} --candidate {} --slice {sl}\n  \
             sf evidence find --identity {id} --candidate {} --slice {sl}\n  \
             sf land --identity {id} --candidate {} --slice {sl} --gate {}\n  \
             git --git-dir {} log --oneline {TARGET}\n  \
             git --git-dir {} log --format='%h %an: %s' main   # the team's repository\n  \
             git --git-dir {} for-each-ref refs/sf/delivered/   # the delivery's marker\n",
            root.display(),
            fix.digest,
            no_fix.digest,
            fix.digest,
            fix.digest,
            gate.display(),
            repository.display(),
            team.display(),
            team.display(),
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

/// Makes the team's repository `team`, a bare repository whose `main` is one commit of the
/// files of `project`, with the pinned git binary and none of the user's configuration (no
/// hooks, no signing); returns the commit.
fn team_repository(project: &Path, team: &Path) -> Result<String, CliError> {
    let git = sf_host::pin_git(None).map_err(|reason| CliError::new("git-unavailable", reason))?;
    let run = |dir: &Path, args: &[&str]| -> Result<String, CliError> {
        let output = std::process::Command::new(&git.path)
            .current_dir(dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "The Team")
            .env("GIT_AUTHOR_EMAIL", "team@example.org")
            .env("GIT_COMMITTER_NAME", "The Team")
            .env("GIT_COMMITTER_EMAIL", "team@example.org")
            .env("GIT_AUTHOR_DATE", "1700000000 +0000")
            .env("GIT_COMMITTER_DATE", "1700000000 +0000")
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .output()
            .map_err(|error| CliError::new("git-unavailable", error.to_string()))?;
        if !output.status.success() {
            return Err(CliError::new(
                "git-failed",
                format!(
                    "making the demo's team repository: git {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    };
    run(project, &["init", "-q"])?;
    run(project, &["add", "-A"])?;
    run(
        project,
        &["commit", "-q", "-m", "The sample project: sum.sh"],
    )?;
    let parent = team.parent().unwrap_or(project);
    run(
        parent,
        &[
            "clone",
            "-q",
            "--bare",
            "--no-local",
            &project.display().to_string(),
            &team.display().to_string(),
        ],
    )?;
    run(team, &["rev-parse", "refs/heads/main"])
}

/// Seals the Candidate replacing `sum.sh` with `sum` for the demo's Slice.
fn seal_sum(
    backends: &Backends,
    steps: &mut Steps,
    root: &Path,
    name: &str,
    sum: &str,
) -> Result<Sealed, CliError> {
    let proposal = root.join("proposals").join(format!("{name}.json"));
    let edits = serde_json::json!({
        "message": {"title": format!("sum.sh: {name}"), "body": "Proposed by the sf demo."},
        "author": {"name": "Demo Contributor", "email": "contributor@example.org",
                   "time": 1_700_000_100u64, "offset": "+0000"},
        "edits": [{
            "path": "sum.sh",
            "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
            "text": sum,
        }],
    });
    write(&proposal, &edits.to_string())?;
    let sealed = seal(
        backends,
        &SealRequest {
            identity: root.join("identity.json"),
            slice: root.join("slice"),
            proposal: ProposalInput::File(proposal),
        },
    )?;
    let ids = Sealed {
        digest: sealed.digest.to_string(),
        commit: sealed.manifest.commit.to_hex(),
    };
    let bound = sealed.manifest.binding.as_ref();
    steps.record(
        &format!("seal {name}"),
        bound.is_some(),
        format!(
            "Candidate {} (commit {}) for Slice {}",
            ids.digest,
            ids.commit,
            bound.map_or_else(|| "-".to_owned(), |binding| binding.digest.to_string())
        ),
        serde_json::json!({"candidate": ids.digest, "commit": ids.commit}),
    );
    Ok(ids)
}

/// What one `sf land` of the demo answered.
struct LandedStep {
    json: serde_json::Value,
    exit: u8,
}

impl LandedStep {
    fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "outcome": self.json["outcome"],
            "exit": self.exit,
            "replayed": self.json["replayed"],
            "attempt": self.json["attempt"],
            "verdict": self.json["verdict"]["digest"],
            "invocation": self.json["observation"]["invocation"],
            "target": self.json["observation"]["target"],
        })
    }
}

/// `sf land --deliver` of `candidate` behind the demo's gate file, shown as `sf land` shows
/// it (progress on stderr).
fn land_candidate(backends: &Backends, root: &Path, candidate: &str) -> LandedStep {
    let request = LandRequest {
        target: Target {
            identity: root.join("identity.json"),
            candidate: candidate.to_owned(),
            slice: root.join("slice"),
        },
        gate: Some(root.join("gate.json")),
        action: None,
        occurrence: 1,
        owner: DEFAULT_OWNER.into(),
        generation: 1,
        deadline: None,
        jobs: std::num::NonZeroUsize::MIN,
        deliver: Some(DeliveryMode::Branch),
        attempt: None,
    };
    let mut progress = Progress::default();
    let landed = land(backends, &request, &mut |event| progress.report(event));
    drop(progress);
    match landed {
        Ok(landed) => LandedStep {
            json: render::landed(&landed).json,
            exit: landed_status(&landed),
        },
        Err(error) => LandedStep {
            exit: landing_error_status(&error),
            json: serde_json::json!({"error": {"code": error.code, "message": error.message}}),
        },
    }
}

/// The checks a Verdict's JSON says missed, as `id missed` words.
fn missed(verdict: &serde_json::Value) -> String {
    let checks: Vec<String> = verdict["checks"]
        .as_array()
        .map(|checks| {
            checks
                .iter()
                .map(|check| {
                    let met = match check["met"].as_bool() {
                        Some(true) => "met",
                        Some(false) => "missed",
                        None => "not attributable",
                    };
                    format!("{} {met}", text(&check["check"]))
                })
                .collect()
        })
        .unwrap_or_default();
    format!("{} ({})", text(&verdict["outcome"]), checks.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_acceptance_expects_the_sample_outputs() {
        let acceptance = include_str!("demo/sample/slice/acceptance.json");
        for output in ["5\n", "6\n", "0\n"] {
            assert!(acceptance.contains(&Digest::of(output.as_bytes()).to_string()));
        }
        assert_ne!(SUM_BUGGY, SUM_FIXED);
        assert_ne!(SUM_FIXED, SUM_NOT_FIXED);
    }
}
