//! `--jobs` above 1 where nothing bounds a collection's runs together: `sf` run as an
//! unprivileged user (`nobody`, through `setpriv`, where sandbox-exec can make no cgroup v1
//! group) refuses `sf collect --jobs 2` before anything starts (no attempt, no record), naming
//! `--jobs 1` and the setting that allows it; `--jobs 1` collects; under a Slice frozen with
//! `[executor] parallel_runs_without_cgroup = true` (a Slice records its executor's
//! settings) the operator's `--jobs 2` runs.

mod land_support;

use std::path::Path;
use std::process::{Command, Output};

use land_support::{SUM_FIXED, Work, write};
use sf_tests::plugins::{Envelope, built};

const NOBODY: u32 = 65534;

/// `sf --json ARGS` in `dir` as `nobody` (as this user when the tests do not run as root),
/// with every file of `dir` given to that user first.
fn as_nobody(dir: &Path, args: &[&str]) -> Output {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { nix::libc::geteuid() } == 0;
    let mut command = if root {
        let chown = Command::new("chown")
            .args(["-R", &format!("{NOBODY}:{NOBODY}")])
            .arg(dir)
            .status()
            .unwrap();
        assert!(chown.success());
        let mut setpriv = Command::new("setpriv");
        setpriv.args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
        ]);
        setpriv.arg(&built().sf);
        setpriv
    } else {
        Command::new(&built().sf)
    };
    command
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("SF_CONFIG")
        .env_remove("SF_PLUGIN_PATH")
        .arg("--json")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn jobs_above_one_without_control_groups_are_refused_before_anything_starts() {
    let work = Work::unfrozen();
    work.author_slice("slice", &[]);
    work.author_slice("allowed", &[]);
    write(
        &work.dir.join("allow.toml"),
        "[executor]\ntype = \"sandbox-exec\"\nparallel_runs_without_cgroup = true\n",
    );
    let proposal = work.sum_proposal("fixed", SUM_FIXED);
    let candidates: Vec<String> = [("slice", None), ("allowed", Some("allow.toml"))]
        .into_iter()
        .map(|(slice, config)| {
            let mut freeze: Vec<&str> = config.map_or_else(Vec::new, |c| vec!["--config", c]);
            freeze.extend([
                "slice",
                "freeze",
                "--dir",
                slice,
                "--identity",
                "identity.json",
            ]);
            Envelope::parse(as_nobody(&work.dir, &freeze)).result();
            let seal = [
                "seal",
                "--identity",
                "identity.json",
                "--slice",
                slice,
                "--proposal",
                proposal.to_str().unwrap(),
            ];
            let sealed = Envelope::parse(as_nobody(&work.dir, &seal));
            sealed.result()["digest"].as_str().unwrap().to_owned()
        })
        .collect();
    let collect = |jobs: &str, at: usize| {
        let slice = ["slice", "allowed"][at];
        let args = [
            "collect",
            "--jobs",
            jobs,
            "--identity",
            "identity.json",
            "--candidate",
            &candidates[at],
            "--slice",
            slice,
        ];
        Envelope::parse(as_nobody(&work.dir, &args))
    };

    let refused = collect("2", 0);
    assert_eq!(
        refused.json["error"]["code"], "invalid-input",
        "{:?}",
        refused.json
    );
    let message = refused.json["error"]["message"].as_str().unwrap();
    for needle in [
        "--jobs 2",
        "--jobs 1",
        "parallel_runs_without_cgroup",
        "nothing was started",
    ] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    // Nothing started: the first collection is still the Product's first attempt.
    let one = collect("1", 0);
    assert_eq!(one.result()["attempt"]["epoch"], 1, "{:?}", one.json);
    assert_eq!(one.result()["mayJudge"], true, "{:?}", one.json);
    // The operator accepts runs without a total: two at once run.
    let allowed = collect("2", 1);
    assert_eq!(allowed.result()["mayJudge"], true, "{:?}", allowed.json);
}
