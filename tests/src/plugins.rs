//! Plugin libraries and the `sf` binary for the tests that load them at run time, built by
//! the first test that needs them, once per test process
//! ([`sf_test_support::build::cargo_build`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use sf_test_support::build::{
    BACKENDS_PLUGIN, HOSTILE_PLUGIN, cargo_build, library, strip_group_write, test_plugin_dir,
};

/// The packages whose libraries (and the `sf` binary) the plugin tests load, and sf-tests
/// itself, so that shared dependencies resolve to the features of the test build.
const PACKAGES: &[&str] = &[
    "sf-tests",
    "sf-cli",
    "sf-git-cli",
    "sf-sandbox-exec",
    "sf-sandbox-exec-plugin",
    "sf-test-hostile-plugin",
    "sf-test-backends-plugin",
    "sf-oats-plugin",
    "sf-oats-cli",
    "sf-example-out-of-tree-plugin",
    "sf-postgres",
    "sf-reapi-plugin",
    "sf-reapi-worker",
    "sf-serve",
];

/// Where the built artifacts are.
#[derive(Debug)]
pub struct Built {
    /// `<target>/<profile>`: the directory of `sf`, so the first entry of its plugin path.
    pub dir: PathBuf,
    /// The `sf` binary.
    pub sf: PathBuf,
    /// The git-cli plugin library.
    pub git_cli: PathBuf,
    /// The sandbox-exec plugin library (package sf-sandbox-exec-plugin).
    pub sandbox_exec: PathBuf,
    /// The sandbox-exec launcher, beside the library.
    pub launcher: PathBuf,
    /// The sandbox-exec probe program (run inside the sandbox by the confinement tests).
    pub probe: PathBuf,
    /// `<target>/<profile>/sf-test-plugins`: the test-only plugins, off `sf`'s default plugin
    /// path; name it in `SF_PLUGIN_PATH` (or a plugin path) where a test wants them found.
    pub test_plugins: PathBuf,
    /// The hostile test plugin library, installed in `test_plugins`.
    pub hostile: PathBuf,
    /// The test plugin exporting sf's SQLite EvidenceStore and file Gate (`test-sqlite`,
    /// `test-file-gate`), installed in `test_plugins`.
    pub backends: PathBuf,
    /// The oats plugin library (`[gate] type = "oats-binding"`).
    pub oats: PathBuf,
    /// The `sf-oats` program `sf oats` runs.
    pub sf_oats: PathBuf,
    /// The out-of-tree example plugin library.
    pub example: PathBuf,
    /// The PostgreSQL evidence store plugin library.
    pub postgres: PathBuf,
    /// The reapi Executor plugin library (package sf-reapi-plugin).
    pub reapi: PathBuf,
    /// The `sf-worker` program `sf worker` runs.
    pub sf_worker: PathBuf,
    /// The `sf-serve` program `sf serve` runs.
    pub sf_serve: PathBuf,
}

/// Builds (once per process) and returns the plugin libraries and the `sf` binary.
pub fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = cargo_build(
            PACKAGES,
            &[
                "--lib",
                "--bin",
                "sf",
                "--bin",
                "sf-sandbox-launcher",
                "--bin",
                "sf-sandbox-probe",
                "--bin",
                "sf-oats",
                "--bin",
                "sf-worker",
                "--bin",
                "sf-serve",
            ],
        );
        let built = Built {
            sf: dir.join("sf"),
            git_cli: library(&dir, "sf_git_cli"),
            sandbox_exec: library(&dir, "sf_sandbox_exec_plugin"),
            launcher: dir.join("sf-sandbox-launcher"),
            probe: dir.join("sf-sandbox-probe"),
            test_plugins: test_plugin_dir(&dir),
            hostile: HOSTILE_PLUGIN.install(&dir),
            backends: BACKENDS_PLUGIN.install(&dir),
            oats: library(&dir, "sf_oats_plugin"),
            sf_oats: dir.join("sf-oats"),
            example: library(&dir, "sf_example_out_of_tree_plugin"),
            postgres: library(&dir, "sf_postgres"),
            reapi: library(&dir, "sf_reapi_plugin"),
            sf_worker: dir.join("sf-worker"),
            sf_serve: dir.join("sf-serve"),
            dir,
        };
        for path in [
            &built.dir,
            &built.sf,
            &built.git_cli,
            &built.sandbox_exec,
            &built.launcher,
            &built.probe,
            &built.oats,
            &built.sf_oats,
            &built.example,
            &built.postgres,
            &built.reapi,
            &built.sf_worker,
            &built.sf_serve,
        ] {
            strip_group_write(path);
        }
        built
    })
}

/// A command running the built `sf` with a clean plugin environment: no `SF_PLUGIN_PATH`
/// and none of the hostile plugin's switches, unless the caller sets them.
pub fn sf() -> Command {
    let mut command = Command::new(&built().sf);
    for name in [
        "SF_PLUGIN_PATH",
        "SF_HOSTILE_ENTRY",
        "SF_HOSTILE_REPLY",
        "SF_HOSTILE_REPLY_SCOPE",
    ] {
        command.env_remove(name);
    }
    command
}

/// What a `sf --json` run printed and how it ended.
#[derive(Debug)]
pub struct Envelope {
    /// The parsed envelope (exactly one JSON value on stdout).
    pub json: serde_json::Value,
    /// The exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Everything on stderr.
    pub stderr: String,
}

impl Envelope {
    /// Parses the output of a `--json` run, asserting that stdout is exactly one envelope of
    /// the documented shape whose `ok` agrees with the exit status.
    pub fn parse(output: Output) -> Self {
        Self::parse_with(output, false)
    }

    /// [`Envelope::parse`] for a command that decides (`sf land`, `sf judge --exit-code`): an
    /// ok envelope may come with the exit status of its decision (3 to 7).
    pub fn parse_decided(output: Output) -> Self {
        Self::parse_with(output, true)
    }

    fn parse_with(output: Output, decided: bool) -> Self {
        let stdout = String::from_utf8(output.stdout).expect("UTF-8 stdout");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|error| {
            panic!("stdout is not one JSON value ({error}):\n{stdout}\nstderr:\n{stderr}")
        });
        assert_eq!(json["schemaVersion"], 1, "{json}");
        let ok = json["ok"].as_bool().expect("ok is a boolean");
        let keys: Vec<&String> = json.as_object().expect("an object").keys().collect();
        if ok {
            assert_eq!(keys, ["ok", "result", "schemaVersion"], "{json}");
            let allowed = if decided { 0..=7 } else { 0..=0 };
            assert!(
                output
                    .status
                    .code()
                    .is_some_and(|code| allowed.contains(&code) && code != 1 && code != 2),
                "ok but exit {:?}",
                output.status
            );
        } else {
            assert_eq!(keys, ["error", "ok", "schemaVersion"], "{json}");
            let error = json["error"].as_object().expect("error is an object");
            assert!(
                error["code"].is_string() && error["message"].is_string(),
                "{json}"
            );
            assert_eq!(error.len(), 2, "{json}");
            assert!(
                output.status.code().is_some_and(|code| code != 0),
                "not ok but exit {:?}",
                output.status
            );
        }
        Self {
            json,
            code: output.status.code(),
            stderr,
        }
    }

    /// The result of an ok envelope (panics, showing the error, otherwise).
    pub fn result(&self) -> &serde_json::Value {
        assert_eq!(
            self.json["ok"], true,
            "expected ok, got {}\nstderr:\n{}",
            self.json, self.stderr
        );
        &self.json["result"]
    }

    /// The error code of a failed envelope (panics otherwise).
    pub fn error_code(&self) -> &str {
        assert_eq!(
            self.json["ok"], false,
            "expected a failure, got {}",
            self.json
        );
        self.json["error"]["code"].as_str().expect("a code")
    }

    /// The error message of a failed envelope (panics otherwise).
    pub fn error_message(&self) -> &str {
        assert_eq!(
            self.json["ok"], false,
            "expected a failure, got {}",
            self.json
        );
        self.json["error"]["message"].as_str().expect("a message")
    }
}

/// Runs `command` (which must pass `--json`) and parses its envelope.
pub fn run_json(command: &mut Command) -> Envelope {
    Envelope::parse(command.output().expect("running sf"))
}

/// Writes a minimal Slice into `dir/slice` (scope `scope`, one check: a harness script on the
/// base) and freezes it for the repository of `identity` through the built `sf`; returns the
/// Slice directory, for tests that need a Candidate sealed for some Slice.
pub fn freeze_minimal_slice(dir: &Path, identity: &Path, scope: &[&str]) -> PathBuf {
    freeze_minimal_slice_with_result(dir, identity, scope).0
}

/// [`freeze_minimal_slice`], with the result of `sf slice freeze --json` (its `base`, its
/// `slice` digest, …).
pub fn freeze_minimal_slice_with_result(
    dir: &Path,
    identity: &Path,
    scope: &[&str],
) -> (PathBuf, serde_json::Value) {
    let slice = dir.join("slice");
    std::fs::create_dir_all(slice.join("inputs/none")).unwrap();
    std::fs::create_dir_all(slice.join("harness")).unwrap();
    std::fs::write(slice.join("harness/t.sh"), "echo ok\n").unwrap();
    std::fs::write(
        slice.join("slice.json"),
        serde_json::json!({"id": "slice-1", "revision": 1, "scope": scope}).to_string(),
    )
    .unwrap();
    std::fs::write(
        slice.join("recipe.json"),
        r#"{"timeoutMs":10000,"outputLimit":4096}"#,
    )
    .unwrap();
    std::fs::write(
        slice.join("acceptance.json"),
        r#"{"protocol":"sf-repository-acceptance/2","checks":[{"kind":"process","id":"runs","phase":"guardrail","stage":"base","entry":{"from":"harness","path":"t.sh"},"entryInScope":false,"args":[],"input":"none","expectation":{"exitCode":0,"stdoutDigest":null}}]}"#,
    )
    .unwrap();
    let frozen = run_json(
        sf().args(["slice", "freeze", "--json", "--dir"])
            .arg(&slice)
            .arg("--identity")
            .arg(identity),
    )
    .result()
    .clone();
    (slice, frozen)
}
