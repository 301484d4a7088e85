//! A Rust crate's own test suite as a Slice's checks, through the `sf` binary: `cargo test
//! --offline --locked` in a dependency environment holding a toolchain and a vendored
//! registry. The test builds the environment from the toolchain it is itself built with (only
//! what `cargo test` of a small crate needs: cargo, rustc, rustdoc, their two shared
//! libraries, the x86_64 standard library's rlibs, rust-lld, and `bin/cc`, a link to the
//! runtime's gcc, which drives the link) and one vendored crate with the source replacement
//! that points cargo at it, and adds it with `sf env add`.
//!
//! The product is a small crate whose `sum` skips the first number, committed through
//! `sf repo create --from-git` like every other product; its tests and a black-box example come
//! from the Slice's overlay. The fix is Verified; a cosmetic edit (the bug left in) is Failed on
//! the tests; a Candidate that makes its library exit 0 before any test runs passes `cargo
//! test`'s exit code, which is the Candidate's to choose, and is Failed by the black-box check,
//! whose expected output is a digest the Candidate never sees. The same tests are also graded
//! test by test on libtest's own JUnit output (`--format junit` under `RUSTC_BOOTSTRAP=1`):
//! the fix meets FAIL_TO_PASS and PASS_TO_PASS, the cosmetic edit misses the FAIL_TO_PASS
//! test by name, and the early exit leaves no results, so that check cannot decide.
//!
//! A second crate depends on `itoa` from crates.io: `sf env build --recipe cargo` vendors it
//! inside the sandbox beside a copy of the toolchain environment, and the Slice run in that
//! environment lands the fix and fails the bug left in.

mod land_support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use land_support::{Work, write};
use sf_host::canonical::Digest;
use sf_tests::plugins::Envelope;

/// The target whose standard library the environment holds.
const TARGET: &str = "x86_64-unknown-linux-gnu";

/// The vendored crate's name, version and files.
const DEPENDENCY: &str = "numlist";
const DEPENDENCY_TOML: &str =
    "[package]\nname = \"numlist\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";
const DEPENDENCY_LIB: &str =
    "/// The numbers of a whitespace-separated list; other words are skipped.
pub fn parse(text: &str) -> Vec<i64> {
    text.split_whitespace().filter_map(|word| word.parse().ok()).collect()
}
";

const CARGO_TOML: &str = "[package]\nname = \"tally\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
[dependencies]\nnumlist = \"0.1\"\n";
const LIB_BUGGY: &str = "//! Sums of whitespace-separated numbers.

/// The sum of the numbers in `text`.
pub fn sum(text: &str) -> i64 {
    numlist::parse(text).iter().skip(1).sum()
}
";
const LIB_FIXED: &str = "//! Sums of whitespace-separated numbers.

/// The sum of the numbers in `text`.
pub fn sum(text: &str) -> i64 {
    numlist::parse(text).iter().sum()
}
";
/// The bug left in, and the test binary ended with exit 0 by a constructor before its main
/// runs: the Rust form of Python's `atexit.register(lambda: os._exit(0))`.
const LIB_EXITS_EARLY: &str = "//! Sums of whitespace-separated numbers.

/// The sum of the numbers in `text`.
pub fn sum(text: &str) -> i64 {
    numlist::parse(text).iter().skip(1).sum()
}

#[used]
#[link_section = \".init_array\"]
static LEAVE: extern \"C\" fn() = leave;

extern \"C\" fn leave() {
    std::process::exit(0)
}
";

/// The Slice's tests, laid over both trees.
const TESTS: &str = "#[test]
fn sums_every_number() {
    assert_eq!(tally::sum(\"1 2 3\"), 6);
}

#[test]
fn an_empty_list_sums_to_zero() {
    assert_eq!(tally::sum(\"\"), 0);
}
";
/// The black-box check's program: the sum of its arguments.
const EXAMPLE: &str = "fn main() {
    let text: Vec<String> = std::env::args().skip(1).collect();
    println!(\"{}\", tally::sum(&text.join(\" \")));
}
";

/// A directory every user can search (the sandbox's user reads the store when the tests run
/// as root), holding the test's own environment store `environments/` and the `sf.toml` that
/// names it (unset, the store as root is the machine's /var/lib/sf/environments, which every
/// test would share), `home/` (the `HOME` of every sf command) and the environment's source;
/// removed when dropped.
struct Public(tempfile::TempDir);

impl Public {
    fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("sf-test-rust-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        let public = Self(dir);
        write(
            &public.config(),
            &format!(
                "[environments]\nstore = \"{}\"\n",
                public.path().join("environments").display()
            ),
        );
        public
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    /// The `sf.toml` naming the test's environment store.
    fn config(&self) -> PathBuf {
        self.path().join("sf.toml")
    }

    fn toolchain(&self) -> PathBuf {
        self.path().join("toolchain")
    }

    fn cargo_config(&self) -> PathBuf {
        self.toolchain().join("cargo-config.toml")
    }
}

/// The sysroot of the toolchain this test is built with.
fn sysroot() -> PathBuf {
    let output = Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into()))
        .args(["--print", "sysroot"])
        .output()
        .expect("rustc runs");
    assert!(output.status.success(), "rustc --print sysroot: {output:?}");
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

/// `from` at `to`: a hard link where the file systems allow (the store copies what it adds
/// anyway), else a copy.
fn place(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap_or_else(|error| panic!("{}: {error}", from.display()));
    }
}

/// Builds the toolchain environment in `public` and adds it to the store as `rust`: cargo,
/// rustc and rustdoc with the two libraries they load (rustc's driver and LLVM), the target's
/// standard library (its `.rlib` and `.rmeta` files, without the sanitizer runtimes or the
/// dynamic `libstd`), rust-lld and the `ld.lld` wrapper gcc runs it through, `bin/cc` linking
/// to the runtime's gcc (the sandbox binds `/usr/bin` but not `/etc/alternatives`, where
/// `/usr/bin/cc` points), the vendored crate and the cargo configuration that replaces
/// crates.io with it. Its size in bytes, and the digest.
fn rust_environment(public: &Public) -> (u64, String) {
    let toolchain = place_toolchain(public);
    vendor(&toolchain.join("vendor").join(DEPENDENCY));
    write(
        &public.cargo_config(),
        &format!(
            "[source.crates-io]\nreplace-with = \"vendored\"\n\n[source.vendored]\n\
             directory = \"{}\"\n",
            toolchain.join("vendor").display()
        ),
    );
    let size = tree_bytes(&toolchain);
    (size, add_environment(public, "rust", &toolchain))
}

/// `sf env add NAME DIR` in `public`'s store: the digest.
fn add_environment(public: &Public, name: &str, dir: &Path) -> String {
    let added = Envelope::parse(
        sf_tests::plugins::sf()
            .env("HOME", public.home())
            .env("SF_CONFIG", public.config())
            .args(["--json", "env", "add", name])
            .arg(dir)
            .output()
            .unwrap(),
    );
    added.result()["digest"].as_str().unwrap().to_owned()
}

/// The toolchain part of the environment (see [`rust_environment`]), placed in `public`.
fn place_toolchain(public: &Public) -> PathBuf {
    assert!(
        Path::new("/usr/bin/gcc").exists(),
        "the check links with the runtime's /usr/bin/gcc, which this machine lacks"
    );
    let sysroot = sysroot();
    let toolchain = public.toolchain();
    for tool in ["cargo", "rustc", "rustdoc"] {
        place(
            &sysroot.join("bin").join(tool),
            &toolchain.join("bin").join(tool),
        );
    }
    let mut placed = 0;
    for entry in std::fs::read_dir(sysroot.join("lib")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        // The versioned libraries only: `libLLVM-*.so` is a linker script for builds.
        if name.starts_with("librustc_driver-") || name.starts_with("libLLVM.so.") {
            place(&entry.path(), &toolchain.join("lib").join(&name));
            placed += 1;
        }
    }
    assert_eq!(
        placed,
        2,
        "rustc's driver and LLVM in {}",
        sysroot.display()
    );
    let target = Path::new("lib/rustlib").join(TARGET);
    for entry in std::fs::read_dir(sysroot.join(&target).join("lib")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.ends_with(".rlib") || name.ends_with(".rmeta") {
            place(
                &entry.path(),
                &toolchain.join(&target).join("lib").join(&name),
            );
        }
    }
    for linker in ["bin/rust-lld", "bin/gcc-ld/ld.lld"] {
        place(
            &sysroot.join(&target).join(linker),
            &toolchain.join(&target).join(linker),
        );
    }
    std::os::unix::fs::symlink("/usr/bin/gcc", toolchain.join("bin/cc")).unwrap();
    toolchain
}

/// The vendored crate at `dir`, with the checksums a directory source holds: each file's
/// SHA-256 and the package's, which the lock file repeats (there is no `.crate` file, so it
/// is a digest of the name and version).
fn vendor(dir: &Path) {
    write(&dir.join("Cargo.toml"), DEPENDENCY_TOML);
    write(&dir.join("src/lib.rs"), DEPENDENCY_LIB);
    let hex = |text: &str| Digest::of(text.as_bytes()).hex();
    write(
        &dir.join(".cargo-checksum.json"),
        &serde_json::json!({
            "files": {"Cargo.toml": hex(DEPENDENCY_TOML), "src/lib.rs": hex(DEPENDENCY_LIB)},
            "package": hex("numlist-0.1.0"),
        })
        .to_string(),
    );
}

/// The bytes of the files below `dir` (links not followed).
fn tree_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let meta = entry.path().symlink_metadata().unwrap();
            if meta.is_dir() {
                tree_bytes(&entry.path())
            } else if meta.is_file() {
                meta.len()
            } else {
                0
            }
        })
        .sum()
}

/// The product, a Git repository `tally` in `dir`: the crate and the `Cargo.lock` that the
/// environment's cargo writes for it against the vendored registry (a team commits its lock
/// file; `--locked` holds every run to it).
fn product(dir: &Path, public: &Public) -> String {
    let source = dir.join("tally");
    write(&source.join("Cargo.toml"), CARGO_TOML);
    write(&source.join("src/lib.rs"), LIB_BUGGY);
    let toolchain = public.toolchain();
    let locked = Command::new(toolchain.join("bin/cargo"))
        .args(["generate-lockfile", "--offline", "--config"])
        .arg(public.cargo_config())
        .current_dir(&source)
        .env_clear()
        .env("PATH", format!("{}/bin:/usr/bin:/bin", toolchain.display()))
        .env("HOME", dir.join("cargo-home"))
        .env("CARGO_HOME", dir.join("cargo-home"))
        .output()
        .unwrap();
    assert!(
        locked.status.success(),
        "cargo generate-lockfile: {locked:?}"
    );
    let run = |args: &[&str]| sf_tests::plain_git(&source, args, &[]);
    run(&["init", "-q"]);
    run(&["add", "-A"]);
    run(&["commit", "-q", "-m", "tally"]);
    "tally".into()
}

/// The resources each cargo run declares: rustc and LLVM need more memory than a script,
/// cargo and rustc run several processes and threads at once, and the build fills scratch.
fn resources() -> serde_json::Value {
    serde_json::json!({
        "memoryBytes": 2_147_483_648_u64, "processes": 256, "cpuSeconds": 300,
        "scratchBytes": 268_435_456_u64,
    })
}

/// A check running `cargo ARGS --offline --locked` in the tree, cargo's home and its target
/// directory in scratch, its scratch executable (the test programs cargo builds run there).
fn cargo_check(
    public: &Public,
    id: &str,
    phase: &str,
    stage: &str,
    args: &[&str],
    expectation: serde_json::Value,
) -> serde_json::Value {
    let mut argv: Vec<String> = std::iter::once("cargo")
        .chain(args.iter().take_while(|arg| **arg != "--").copied())
        .map(str::to_owned)
        .collect();
    argv.extend(["--offline", "--locked", "--config"].map(str::to_owned));
    argv.push(public.cargo_config().display().to_string());
    argv.extend(
        args.iter()
            .skip_while(|arg| **arg != "--")
            .map(|arg| (*arg).to_owned()),
    );
    serde_json::json!({
        "kind": "command", "id": id, "phase": phase, "stage": stage, "argv": argv,
        "cwd": {"from": "tree", "path": ""},
        "env": {"CARGO_HOME": "/sf/scratch/cargo-home", "CARGO_TARGET_DIR": "/sf/scratch/target",
                "CARGO_INCREMENTAL": "0"},
        "environment": "rust", "results": null, "input": "none",
        "resources": resources(), "timeoutMs": 240000, "scratchExecutable": true,
        "expectation": expectation,
    })
}

/// A check running the Slice's test binary (`tests/sum.rs`) with libtest's own JUnit output
/// (`--format junit`, unstable: `RUSTC_BOOTSTRAP=1` lets a stable toolchain's libtest write
/// it) into scratch, graded on `failToPass` and `passToPass` with the exit code the authority.
fn junit_check(
    public: &Public,
    id: &str,
    phase: &str,
    stage: &str,
    exit: i32,
) -> serde_json::Value {
    let script = format!(
        "cargo test --offline --locked --config {} --test sum -- -Z unstable-options \
         --format junit > /sf/scratch/results.xml",
        public.cargo_config().display()
    );
    serde_json::json!({
        "kind": "command", "id": id, "phase": phase, "stage": stage,
        "argv": ["sh", "-c", script],
        "cwd": {"from": "tree", "path": ""},
        "env": {"CARGO_HOME": "/sf/scratch/cargo-home", "CARGO_TARGET_DIR": "/sf/scratch/target",
                "CARGO_INCREMENTAL": "0", "RUSTC_BOOTSTRAP": "1"},
        "environment": "rust", "results": {"junit": "results.xml", "maxBytes": 1048576},
        "input": "none", "resources": resources(), "timeoutMs": 240000,
        "scratchExecutable": true,
        "expectation": {"exitCode": exit, "stdoutDigest": null,
                        "failToPass": ["integration::sums_every_number"],
                        "passToPass": ["integration::an_empty_list_sums_to_zero"]},
    })
}

#[test]
fn a_rust_crate_is_checked_by_cargo_test_in_a_toolchain_environment() {
    let public = Public::new();
    let (size, digest) = rust_environment(&public);
    // Most of it is rustc's driver and LLVM; the whole toolchain with its documentation is
    // several times larger.
    assert!(size < 1 << 30, "the environment holds {size} bytes");
    let work = Work::from_git(|dir| product(dir, &public), "HEAD")
        .with_env("HOME", &public.home())
        .with_env("SF_CONFIG", &public.config());
    let slice = work.dir.join("slice");
    write(
        &slice.join("slice.json"),
        &serde_json::json!({
            "id": "tally", "revision": 1, "scope": ["src"],
            "protected": ["Cargo.toml", "Cargo.lock", "build.rs", ".cargo/**", "tests/**",
                          "examples/**"],
        })
        .to_string(),
    );
    write(&slice.join("overlay/tests/sum.rs"), TESTS);
    write(&slice.join("overlay/examples/sum.rs"), EXAMPLE);
    write(&slice.join("inputs/none/README"), "no input\n");
    write(
        &slice.join("recipe.json"),
        r#"{"timeoutMs":300000,"outputLimit":1048576}"#,
    );
    let exit = |code: i32| serde_json::json!({"exitCode": code, "stdoutDigest": null});
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [
                cargo_check(&public, "tests-fail-on-base", "before", "base", &["test"], exit(101)),
                // The same tests, graded test by test on libtest's JUnit.
                junit_check(&public, "graded-on-base", "before", "base", 101),
                cargo_check(&public, "tests-pass", "after", "candidate", &["test"], exit(0)),
                junit_check(&public, "graded", "after", "candidate", 0),
                // Black-box: the expected output is a digest the Candidate never sees.
                cargo_check(&public, "sums", "guardrail", "candidate",
                            &["run", "--quiet", "--example", "sum", "--", "4", "5", "6"],
                            serde_json::json!({"exitCode": 0,
                                "stdoutDigest": Digest::of(b"15\n").to_string()})),
            ],
        })
        .to_string(),
    );
    work.freeze("slice").result();
    let frozen: serde_json::Value =
        serde_json::from_slice(&std::fs::read(slice.join("frozen/acceptance.json")).unwrap())
            .unwrap();
    assert_eq!(frozen["checks"][0]["environment"]["digest"], digest);
    assert_eq!(frozen["checks"][0]["scratchExecutable"], true);

    let judged = |name: &str, text: &str| {
        let candidate = work.seal_text("slice", "src/lib.rs", LIB_BUGGY, name, text);
        work.collect_and_judge(&candidate, "slice")
    };
    let fixed = judged("fix", LIB_FIXED);
    assert_eq!(fixed["outcome"], "verified", "{fixed}");

    let unfixed = judged("cosmetic", &format!("{LIB_BUGGY}// tidied\n"));
    assert_eq!(unfixed["outcome"], "failed", "{unfixed}");
    assert_eq!(unfixed["checks"][0]["met"], true, "{unfixed}");
    assert!(
        unfixed["checks"][2]["problems"]
            .to_string()
            .contains("exit code 101, expected 0"),
        "{unfixed}"
    );

    // The test binary ends with exit 0 before a test runs: cargo test's exit code is met, the
    // black-box check is not.
    // Graded on its results, the early exit is no pass either: the tests never reported,
    // the results file is empty, and that check cannot decide, so the Candidate is
    // Inconclusive (never Verified) though its black-box check is Failed.
    let forged = judged("exits-early", LIB_EXITS_EARLY);
    assert_eq!(forged["outcome"], "inconclusive", "{forged}");
    assert_eq!(forged["checks"][2]["met"], true, "{forged}");
    assert_eq!(forged["checks"][4]["met"], false, "{forged}");
    assert_eq!(
        forged["checks"][3]["met"],
        serde_json::Value::Null,
        "{forged}"
    );
    assert_eq!(forged["checks"][3]["attributable"], false, "{forged}");
    assert_eq!(fixed["checks"][1]["met"], true, "{fixed}");
    assert_eq!(fixed["checks"][3]["met"], true, "{fixed}");
    assert_eq!(unfixed["checks"][3]["met"], false, "{unfixed}");
    assert!(
        unfixed["checks"][3]["problems"]
            .to_string()
            .contains("integration::sums_every_number"),
        "{unfixed}"
    );

    // The record says what ran: the command, its environment and the executable scratch.
    let record = fixed["checks"][2]["record"].as_str().unwrap();
    let shown = work
        .text_command(&["evidence", "get", record, "--slice", "slice"])
        .env("HOME", public.home())
        .output()
        .unwrap();
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(
        shown.contains("environment rust at") && shown.contains("scratch executable"),
        "{shown}"
    );
    assert!(shown.contains("test result: ok. 2 passed"), "{shown}");
}

/// A crate whose one dependency comes from crates.io, pinned (with its checksum) in the
/// `Cargo.lock` it commits.
const REGISTRY_TOML: &str = "[package]\nname = \"tally\"\nversion = \"0.1.0\"\n\
edition = \"2021\"\n\n[dependencies]\nitoa = \"=1.0.11\"\n";
const REGISTRY_LOCK: &str = "# This file is automatically @generated by Cargo.
# It is not intended for manual editing.
version = 4

[[package]]
name = \"itoa\"
version = \"1.0.11\"
source = \"registry+https://github.com/rust-lang/crates.io-index\"
checksum = \"49f1f14873335454500d59611f1cf4a4b0f786f9ac11f4312a78e4cf2566695b\"

[[package]]
name = \"tally\"
version = \"0.1.0\"
dependencies = [
 \"itoa\",
]
";
const SHOWN_BUGGY: &str = "/// `n` in decimal.
pub fn shown(n: i64) -> String {
    itoa::Buffer::new().format(n - 1).to_owned()
}
";
const SHOWN_FIXED: &str = "/// `n` in decimal.
pub fn shown(n: i64) -> String {
    itoa::Buffer::new().format(n).to_owned()
}
";
const SHOWN_TESTS: &str = "#[test]
fn shows_the_number() {
    assert_eq!(tally::shown(42), \"42\");
}

#[test]
fn shows_digits() {
    assert!(tally::shown(7).chars().all(|c| c.is_ascii_digit()));
}
";

/// The crate of [`REGISTRY_TOML`], a Git repository `tally` in `dir`.
fn registry_product(dir: &Path) -> String {
    let source = dir.join("tally");
    write(&source.join("Cargo.toml"), REGISTRY_TOML);
    write(&source.join("Cargo.lock"), REGISTRY_LOCK);
    write(&source.join("src/lib.rs"), SHOWN_BUGGY);
    let run = |args: &[&str]| sf_tests::plain_git(&source, args, &[]);
    run(&["init", "-q"]);
    run(&["add", "-A"]);
    run(&["commit", "-q", "-m", "tally"]);
    "tally".into()
}

/// `sf env build --recipe cargo`: the locked crate from crates.io vendored, inside the sandbox
/// (its network reaching only crates.io's index and downloads through sf's proxy), beside a
/// copy of a toolchain environment; checks run `cargo test --offline` in it, graded on
/// libtest's JUnit: the fix is Verified, the bug left in Failed.
#[test]
fn a_crates_io_dependency_is_vendored_by_the_cargo_recipe_and_the_fix_lands() {
    let public = Public::new();
    let toolchain = place_toolchain(&public);
    add_environment(&public, "rust-toolchain", &toolchain);
    let work = Work::from_git(registry_product, "HEAD")
        .with_env("HOME", &public.home())
        .with_env("SF_CONFIG", &public.config());
    let built = work.sf(&[
        "env",
        "build",
        "rust-deps",
        "--identity",
        "identity.json",
        "--recipe",
        "cargo",
        "--toolchain",
        "rust-toolchain",
    ]);
    let built = built.result().clone();
    // The sparse index, and the downloads wherever the index sends them (static.crates.io,
    // or a connection the index's host serves them over): nothing but the two hosts.
    let registries = built["build"]["registries"].as_array().unwrap();
    assert_eq!(registries[0], "index.crates.io:443", "{built}");
    assert!(
        registries
            .iter()
            .all(|registry| registry == "index.crates.io:443" || registry == "static.crates.io:443"),
        "{built}"
    );
    assert!(built["build"]["tools"]["cargo"].is_string(), "{built}");
    let at = built["at"].as_str().unwrap().to_owned();
    let stored = public
        .path()
        .join("environments/objects")
        .join(
            built["digest"]
                .as_str()
                .unwrap()
                .trim_start_matches("sha256:"),
        )
        .join("tree");
    assert!(
        stored.join("vendor/itoa-1.0.11/Cargo.toml").is_file(),
        "{built}"
    );
    assert!(stored.join("bin/cargo").is_file(), "{built}");
    let config = std::fs::read_to_string(stored.join("cargo-config.toml")).unwrap();
    assert!(config.contains(&format!("{at}/vendor")), "{config}");
    let again = work.sf(&[
        "env",
        "build",
        "rust-deps-again",
        "--identity",
        "identity.json",
        "--recipe",
        "cargo",
        "--toolchain",
        "rust-toolchain",
    ]);
    let again = again.result();
    assert_eq!(
        again["digest"], built["digest"],
        "cargo vendor reproduces: {again}"
    );
    assert_eq!(
        again["build"]["differsFrom"],
        serde_json::Value::Null,
        "{again}"
    );

    let slice = work.dir.join("slice");
    write(
        &slice.join("slice.json"),
        &serde_json::json!({
            "id": "shown", "revision": 1, "scope": ["src"],
            "protected": ["Cargo.toml", "Cargo.lock", "build.rs", ".cargo/**", "tests/**"],
        })
        .to_string(),
    );
    write(&slice.join("overlay/tests/shown.rs"), SHOWN_TESTS);
    write(
        &slice.join("recipe.json"),
        r#"{"timeoutMs":300000,"outputLimit":1048576}"#,
    );
    let check = |id: &str, phase: &str, stage: &str, exit: i32| {
        let script = format!(
            "cargo test --offline --locked --config {at}/cargo-config.toml --test shown -- \
             -Z unstable-options --format junit > /sf/scratch/results.xml"
        );
        serde_json::json!({
            "kind": "command", "id": id, "phase": phase, "stage": stage,
            "argv": ["sh", "-c", script],
            "cwd": {"from": "tree", "path": ""},
            "env": {"CARGO_HOME": "/sf/scratch/cargo-home",
                    "CARGO_TARGET_DIR": "/sf/scratch/target", "CARGO_INCREMENTAL": "0",
                    "RUSTC_BOOTSTRAP": "1"},
            "environment": "rust-deps",
            "results": {"junit": "results.xml", "maxBytes": 1048576},
            "resources": resources(), "timeoutMs": 240000, "scratchExecutable": true,
            "expectation": {"exitCode": exit, "stdoutDigest": null,
                            "failToPass": ["integration::shows_the_number"],
                            "passToPass": ["integration::shows_digits"]},
        })
    };
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [check("bug-shown", "before", "base", 101),
                       check("bug-fixed", "after", "candidate", 0)],
        })
        .to_string(),
    );
    work.freeze("slice").result();
    let judged = |name: &str, text: &str| {
        let candidate = work.seal_text("slice", "src/lib.rs", SHOWN_BUGGY, name, text);
        work.collect_and_judge(&candidate, "slice")
    };
    let fixed = judged("fix", SHOWN_FIXED);
    assert_eq!(fixed["outcome"], "verified", "{fixed}");
    let left = judged("cosmetic", &format!("{SHOWN_BUGGY}// tidied\n"));
    assert_eq!(left["outcome"], "failed", "{left}");
    assert!(
        left["checks"][1]["problems"]
            .to_string()
            .contains("integration::shows_the_number"),
        "{left}"
    );
}
