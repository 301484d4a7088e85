//! Trusted test material stays trusted, through the `sf` binary on real repositories (issue
//! 34). A Slice lays the fix's test file over both trees and protects its path, but a test
//! runner does not load a test module by its path alone: Python imports `tests.test_utils` and
//! takes a package `tests/test_utils/` over the module `tests/test_utils.py`, an extension
//! module before either, pytest's own bytecode cache before the source; pytest runs every
//! `conftest.py` from the root down, and the interpreter runs a `sitecustomize.py` on its path
//! before anything else. A Candidate that leaves the bug in could add one of those names and
//! have its own tests run instead of the protected ones, or the failing test reported as a
//! pass, and be judged Verified.
//!
//! Each such proposal, against a Slice whose scope is wide enough to hold it (psf/requests'
//! fix 47914226 run by pytest from a venv; a Node project run by `node --test`), is refused
//! at seal (rejected as `protected-path`, naming the edited path and the protected file it could stand in
//! for) or, if sealed, never Verified. The package, the root `conftest.py`, the
//! `sitecustomize.py` and pytest's cache entry are written to work: each was sealed and
//! Verified before issue 34 was fixed. A real fix is still Verified under the same scope, and
//! a Slice that opens a sub-path (`"open"` in `slice.json`) lets a fix add a test there and
//! nowhere else. A freeze also refuses an input holding a check's expected stdout written
//! with CRLF line ends, a byte-order mark or trailing spaces: the answer key in disguise is
//! still the answer key.

mod greeter_support;
mod land_support;

use std::process::{Command, Stdio};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use greeter_support::{GREET_BUGGY, GREET_FIXED, PACKAGE_JSON, greeter_slice};
use land_support::{Public, Work, show, write};
use serde_json::{Value, json};
use sf_host::canonical::Digest;
use sf_tests::plugins::Envelope;

/// pytest's version, in the name of the bytecode cache entry its assertion rewriter reads
/// (the shared venv's pin, [`land_support::PYTEST_PACKAGES`]).
const PYTEST_VERSION: &str = "9.2.0";

/// psf/requests' "Fix empty netrc entry usage": the base is its parent.
const FIX: &str = "47914226";
const FAIL_TO_PASS: &str =
    "tests.test_utils.TestGetNetrcAuth::test_empty_default_credentials_ignored";
const PASS_TO_PASS: &str = "tests.test_utils.TestSuperLen::test_io_streams[StringIO-Test]";
const SOURCE: &str = "src/requests/utils.py";
const TESTS: &str = "tests/test_utils.py";
/// Wide enough to hold every attack below, so that none is refused as `outside-scope`, which
/// would prove nothing about protection.
const SCOPE: &[&str] = &["src", "tests", "conftest.py"];

/// A store of this test's own (its `sf.toml`'s) holding the shared pytest venv as `pytest`.
fn pytest() -> Public {
    let public = Public::new();
    Envelope::parse(
        public
            .sf()
            .args(["--json", "env", "add", "pytest"])
            .arg(land_support::pytest_venv())
            .output()
            .unwrap(),
    )
    .result();
    public
}

/// The pytest hook of the forgeries: every failed report becomes a pass before it is logged,
/// so the exit code, the summary and the JUnit results all agree that nothing failed.
const PASS_EVERYTHING: &str = "import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        report.outcome = \"passed\"
        report.longrepr = None
    return report
";

/// A package standing in for `tests/test_utils.py`: it runs the protected file's own source
/// (so every test is there, under the same ids), then rebinds the failing test to pass. It
/// claims the protected file as its `__file__`, which is what pytest checks after the import.
const PACKAGE_STAND_IN: &str = "import os

_tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
__file__ = os.path.join(_tests, \"test_utils.py\")
__package__ = __name__.rpartition(\".\")[0]
with open(__file__) as source:
    exec(compile(source.read(), __file__, \"exec\"))


def _passes(self):
    pass


TestGetNetrcAuth.test_empty_default_credentials_ignored = _passes
";

/// Writes, to the file named by its argument, bytecode of the protected source (on stdin)
/// with the failing test rebound to pass, in the hash-based form (PEP 552) that both
/// importlib and pytest's assertion rewriter accept for that exact source; prints the
/// interpreter's cache tag and first extension-module suffix.
const FORGE_BYTECODE: &str = "import importlib.machinery, importlib.util, marshal, sys
source = sys.stdin.buffer.read()
rebound = b\"\\nTestGetNetrcAuth.test_empty_default_credentials_ignored = lambda self: None\\n\"
code = compile(source + rebound, \"tests/test_utils.py\", \"exec\")
checked_hash = b\"\\x03\\x00\\x00\\x00\" + importlib.util.source_hash(source)[:8]
header = importlib.util.MAGIC_NUMBER + checked_hash
with open(sys.argv[1], \"wb\") as out:
    out.write(header + marshal.dumps(code))
print(sys.implementation.cache_tag)
print(importlib.machinery.EXTENSION_SUFFIXES[0])
";

/// A work on requests' parent of [`FIX`], with the fix's `tests/test_utils.py` as the overlay.
struct Requests {
    work: Work,
    /// The store the Slice's environment is in, kept for the work's life.
    _public: Public,
    /// The parent's `src/requests/utils.py` (the bug) and the fix's.
    parent: String,
    fixed: String,
    /// The fix's `tests/test_utils.py`, the protected file, and the base's.
    tests: String,
    base_tests: String,
    /// What `sf slice freeze` answered.
    frozen: Value,
}

/// A Slice `slice/` of requests' fix over [`SCOPE`], protecting [`TESTS`], opening `open`
/// (written only when not empty), with the model's pair of pytest checks, frozen.
fn requests_slice(open: &[&str]) -> Requests {
    requests_slice_with(open, true)
}

/// [`requests_slice`], with the fix's tests laid over both trees only when `overlay`; without,
/// the checks run the base's own `tests/test_utils.py`, and protect nothing by hand.
fn requests_slice_with(open: &[&str], overlay: bool) -> Requests {
    let public = pytest();
    let mut clone = None;
    let work = Work::from_git(
        |dir| {
            let (path, _) = sf_tests::clone_fixture(dir, "requests.bundle");
            clone = Some(path.clone());
            path.file_name().unwrap().to_str().unwrap().to_owned()
        },
        &format!("{FIX}^"),
    )
    .with_public(&public);
    let clone = clone.unwrap();
    let tests = show(&clone, FIX, TESTS);
    let slice = work.dir.join("slice");
    let mut authored = json!({"id": format!("fix-{FIX}"), "revision": 1, "scope": SCOPE});
    if overlay {
        authored["protected"] = json!([TESTS]);
        write(&slice.join("overlay").join(TESTS), &tests);
    }
    if !open.is_empty() {
        authored["open"] = json!(open);
    }
    write(&slice.join("slice.json"), &authored.to_string());
    write(&slice.join("inputs/none/README"), "no input\n");
    write(
        &slice.join("recipe.json"),
        r#"{"timeoutMs":300000,"outputLimit":1048576}"#,
    );
    let check = |id: &str, phase: &str, stage: &str, exit: i32| {
        json!({
            "kind": "command", "id": id, "phase": phase, "stage": stage,
            "argv": ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", TESTS,
                     "--junitxml=/sf/scratch/results.xml"],
            "cwd": {"from": "tree", "path": ""},
            "env": {"PYTHONPATH": "/sf/program/src", "PYTHONDONTWRITEBYTECODE": "1"},
            "environment": "pytest",
            "results": {"junit": "results.xml", "maxBytes": 4194304},
            "input": "none",
            "expectation": {"exitCode": exit, "stdoutDigest": null,
                            "failToPass": [FAIL_TO_PASS], "passToPass": [PASS_TO_PASS]},
        })
    };
    write(
        &slice.join("acceptance.json"),
        &json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [
                check("tests-fail-on-base", "before", "base", 1),
                check("tests-pass-on-candidate", "after", "candidate", 0),
            ],
        })
        .to_string(),
    );
    // Without the overlay the base's own test module lacks the fix's test, so the dry run
    // would refuse the Slice (every Candidate Failed); what is tested here is what the
    // freeze closes and that nothing is Verified.
    let mut freeze = vec![
        "slice",
        "freeze",
        "--dir",
        "slice",
        "--identity",
        "identity.json",
    ];
    if !overlay {
        freeze.push("--no-dry-run");
    }
    let frozen = work.sf(&freeze).result().clone();
    Requests {
        parent: show(&clone, &format!("{FIX}^"), SOURCE),
        fixed: show(&clone, FIX, SOURCE),
        work,
        _public: public,
        base_tests: show(&clone, &format!("{FIX}^"), TESTS),
        tests,
        frozen,
    }
}

impl Requests {
    /// An attack's edits: `added` (new files) and a harmless comment on the source, which
    /// leaves the bug in.
    fn leaving_the_bug(&self, added: Vec<Value>) -> Vec<Value> {
        let mut edits = added;
        edits.push(replaced(
            SOURCE,
            &self.parent,
            &format!("{}\n# netrc handling reviewed\n", self.parent),
        ));
        edits
    }

    /// The package stand-in ([`PACKAGE_STAND_IN`]) with the bug left in is refused, naming
    /// the protected module, or never Verified.
    fn never_verified_with_the_package_stand_in(&self) {
        let path = "tests/test_utils/__init__.py";
        let edits = self.leaving_the_bug(vec![added(path, PACKAGE_STAND_IN)]);
        never_verified(
            &self.work,
            "slice",
            "package-stand-in",
            edits,
            &[path, TESTS],
        );
    }

    /// The fix's source change, and `added`.
    fn fixing(&self, added: Vec<Value>) -> Vec<Value> {
        let mut edits = added;
        edits.push(replaced(SOURCE, &self.parent, &self.fixed));
        edits
    }

    /// Bytecode of the protected file with the failing test rebound to pass, the
    /// interpreter's cache tag (`cpython-311`) and its extension-module suffix.
    fn forged_bytecode(&self) -> (Vec<u8>, String, String) {
        let out = self.work.dir.join("forged.pyc");
        let mut child = Command::new("/usr/bin/python3")
            .args(["-c", FORGE_BYTECODE])
            .arg(&out)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), self.tests.as_bytes()).unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "forging bytecode: {output:?}");
        let printed = String::from_utf8(output.stdout).unwrap();
        let mut lines = printed.lines().map(str::to_owned);
        let (tag, suffix) = (lines.next().unwrap(), lines.next().unwrap());
        (std::fs::read(&out).unwrap(), tag, suffix)
    }
}

/// An edit creating `path` with `text`.
fn added(path: &str, text: &str) -> Value {
    json!({"path": path, "prior": null, "text": text})
}

/// An edit creating `path` with `bytes`.
fn added_bytes(path: &str, bytes: &[u8]) -> Value {
    json!({"path": path, "prior": null, "bytes": STANDARD.encode(bytes)})
}

/// An edit writing `text` over `path`, whose bytes are `prior`.
fn replaced(path: &str, prior: &str, text: &str) -> Value {
    json!({"path": path, "prior": Digest::of(prior.as_bytes()).to_string(), "text": text})
}

/// `sf seal` under `slice` of a proposal of `edits`.
fn seal(work: &Work, slice: &str, name: &str, edits: Vec<Value>) -> Envelope {
    work.seal_edits(slice, name, Value::Array(edits))
}

/// The Candidate digest of a seal that must succeed.
fn sealed(envelope: &Envelope) -> String {
    envelope.result()["digest"].as_str().unwrap().to_owned()
}

/// Seals the attack `edits` under `slice`: refused as `protected-path` with every one of
/// `named` in the message, or else sealed, collected and judged anything but Verified (the
/// guarantee is the Verdict; a seal refusal is how sf keeps it for a name the runner loads).
fn never_verified(work: &Work, slice: &str, name: &str, edits: Vec<Value>, named: &[&str]) {
    let envelope = seal(work, slice, name, edits);
    if envelope.json["ok"] == true {
        let verdict = work.collect_and_judge(&sealed(&envelope), slice);
        eprintln!("{name}: sealed, judged {}", verdict["outcome"]);
        assert_ne!(
            verdict["outcome"], "verified",
            "{name} leaves the bug in, yet was sealed and Verified: {verdict}"
        );
    } else {
        assert_eq!(
            envelope.error_code(),
            "rejected",
            "{name}: {:?}",
            envelope.json
        );
        let message = envelope.error_message();
        assert!(message.contains("(protected-path)"), "{name}: {message}");
        eprintln!("{name}: refused: {message}");
        // Longest first, each struck out once found: `tests/test_utils.pyc` names
        // `tests/test_utils.py` only by containing it.
        let mut named = named.to_vec();
        named.sort_by_key(|path| std::cmp::Reverse(path.len()));
        let mut rest = message.to_owned();
        for path in named {
            assert!(rest.contains(path), "{name}: {message:?} names {path}");
            rest = rest.replace(path, "\u{0}");
        }
    }
}

/// A package `tests/test_utils/` beside the protected module: Python imports the package
/// instead of the module, and this one runs the protected tests with the failing one rebound
/// to pass (Verified before issue 34 was fixed). It stands in for the protected file, so the
/// refusal names both.
#[test]
fn a_package_beside_the_protected_module_never_stands_in_for_it() {
    let requests = requests_slice(&[]);
    requests.never_verified_with_the_package_stand_in();
}

/// Compiled forms of the protected module under the names Python or pytest would load:
/// sourceless bytecode and an extension module beside it (an extension module is found before
/// the source), the interpreter's `__pycache__` entry, and pytest's own cache entry, which its
/// assertion rewriter reads instead of the source whenever the source's hash matches (so the
/// forged one, made for the protected file's exact bytes, was Verified before issue 34 was
/// fixed). Each is a stand-in for the protected file.
#[test]
fn compiled_modules_beside_the_protected_module_never_stand_in_for_it() {
    let requests = requests_slice(&[]);
    let (bytecode, tag, suffix) = requests.forged_bytecode();
    let elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
    let attacks = [
        (
            "sourceless-bytecode",
            "tests/test_utils.pyc".to_owned(),
            &bytecode,
        ),
        (
            "extension-module",
            format!("tests/test_utils{suffix}"),
            &elf,
        ),
        (
            "interpreter-cache",
            format!("tests/__pycache__/test_utils.{tag}.pyc"),
            &bytecode,
        ),
        (
            "pytest-cache",
            format!(
                "tests/__pycache__/test_utils.{tag}-pytest-{}.pyc",
                PYTEST_VERSION
            ),
            &bytecode,
        ),
    ];
    for (name, path, bytes) in attacks {
        let edits = requests.leaving_the_bug(vec![added_bytes(&path, bytes)]);
        never_verified(&requests.work, "slice", name, edits, &[&path, TESTS]);
    }
}

/// pytest runs every `conftest.py` from the root down to the test's directory before the
/// test: one at the root that turns the failing report into a pass was Verified before issue
/// 34 was fixed; one in a new sub-directory of the tests is held to the same rule, since
/// pytest loads it for any test collected below it.
#[test]
fn conftest_files_never_rewrite_the_protected_tests_reports() {
    let requests = requests_slice(&[]);
    for (name, path) in [
        ("root-conftest", "conftest.py"),
        ("sub-conftest", "tests/sub/conftest.py"),
    ] {
        let edits = requests.leaving_the_bug(vec![added(path, PASS_EVERYTHING)]);
        never_verified(&requests.work, "slice", name, edits, &[path]);
    }
}

/// The interpreter's start-up hooks inside the scope: `src` is on `PYTHONPATH`, so a
/// `sitecustomize.py` there runs before pytest and can register the pass-everything hook as a
/// plugin (Verified before issue 34 was fixed); a `*.pth` there is read only from a site
/// directory today, but a layout that made it one would run it first.
#[test]
fn python_start_up_hooks_in_the_scope_are_refused() {
    let requests = requests_slice(&[]);
    let sitecustomize = format!(
        "import os\n\nos.environ[\"PYTEST_PLUGINS\"] = \"sitecustomize\"\n\n{PASS_EVERYTHING}"
    );
    let pth = format!(
        "import os, sys, types; m = types.ModuleType(\"zz_hook\"); exec({}, m.__dict__); \
         sys.modules[\"zz_hook\"] = m; os.environ[\"PYTEST_PLUGINS\"] = \"zz_hook\"\n",
        serde_json::to_string(PASS_EVERYTHING).unwrap()
    );
    for (name, path, text) in [
        (
            "sitecustomize",
            "src/sitecustomize.py",
            sitecustomize.as_str(),
        ),
        ("pth", "src/zz.pth", pth.as_str()),
    ] {
        let edits = requests.leaving_the_bug(vec![added(path, text)]);
        never_verified(&requests.work, "slice", name, edits, &[path]);
    }
}

/// A Slice whose checks run tests that live in the base, with no overlay and nothing
/// protected by hand: the test module its FAIL_TO_PASS and PASS_TO_PASS ids name is trusted
/// all the same (a graded test is never the Candidate's, though the scope holds it), so the
/// freeze protects it and closes what could stand in for it, and the package beside it is
/// refused at seal as it is with an overlay.
#[test]
fn tests_a_check_names_in_the_base_are_closed_around_too() {
    let requests = requests_slice_with(&[], false);
    let protected = requests.frozen["protected"].as_array().unwrap();
    assert!(
        protected.iter().any(|pattern| pattern == TESTS),
        "{protected:?}"
    );
    requests.never_verified_with_the_package_stand_in();
    let edited = requests.leaving_the_bug(vec![replaced(TESTS, &requests.base_tests, "# none\n")]);
    never_verified(&requests.work, "slice", "tests-emptied", edited, &[TESTS]);
}

/// Closing what could stand in for the tests costs a real fix nothing: the fix's source
/// change is Verified under the same wide scope. The freeze says what it closed and why, so
/// an operator can see that the whole tests directory is closed for the protected file.
#[test]
fn a_real_fix_is_verified_under_the_wide_scope() {
    let requests = requests_slice(&[]);
    let closed = requests.frozen["closed"]
        .as_array()
        .unwrap_or_else(|| panic!("the freeze lists what it closed: {}", requests.frozen));
    for entry in closed {
        let keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["because", "for", "pattern"], "{entry}");
        assert!(
            entry["pattern"].is_string() && entry["for"].is_string(),
            "{entry}"
        );
        assert!(
            ["stands-in", "loaded-before", "beside"].contains(&entry["because"].as_str().unwrap()),
            "{entry}"
        );
    }
    assert!(
        closed
            .iter()
            .any(|entry| entry["pattern"] == "tests/**" && entry["for"] == TESTS),
        "{closed:?}"
    );

    let fixed = seal(&requests.work, "slice", "fix", requests.fixing(Vec::new()));
    let verdict = requests.work.collect_and_judge(&sealed(&fixed), "slice");
    assert_eq!(verdict["outcome"], "verified", "{verdict}");
}

/// A Slice that opens `tests/extra/**` lets a fix add a test there (sealed and Verified),
/// while the rest of the closed tests directory stays closed: the same test under
/// `tests/other/` is refused.
#[test]
fn an_opened_sub_path_lets_a_fix_add_a_test_there_and_nowhere_else() {
    let requests = requests_slice(&["tests/extra/**"]);
    let more = "def test_more():\n    assert True\n";
    let opened = seal(
        &requests.work,
        "slice",
        "fix-with-extra-test",
        requests.fixing(vec![added("tests/extra/test_more.py", more)]),
    );
    let verdict = requests.work.collect_and_judge(&sealed(&opened), "slice");
    assert_eq!(verdict["outcome"], "verified", "{verdict}");

    let closed = seal(
        &requests.work,
        "slice",
        "fix-with-other-test",
        requests.fixing(vec![added("tests/other/test_more.py", more)]),
    );
    assert_eq!(closed.error_code(), "rejected", "{:?}", closed.json);
    let message = closed.error_message();
    assert!(message.contains("(protected-path)"), "{message}");
    assert!(message.contains("tests/other/test_more.py"), "{message}");
}

/// A test file of the Candidate's that reports the failing test's name as a pass.
const GREETS_LOUDLY: &str = "require('node:test')('greets loudly', () => {});\n";

/// The Node equivalents, for a `node --test test/` Slice over a scope holding `lib`, `test`
/// and `package.json`: a directory named like the protected test, a test file of another
/// extension beside it, a `node_modules` inside the tests and an edit of `package.json` (which
/// Node reads for every file below it) are each refused or never Verified, while the real fix
/// is Verified under the same scope (so a Verdict other than Verified means something).
#[test]
fn node_stand_ins_for_a_protected_test_are_never_verified() {
    let public = Public::new();
    let work = greeter_slice(
        &public,
        &json!({"id": "greet", "revision": 1, "scope": ["lib", "test", "package.json"],
                "protected": ["test/greet.test.js"]}),
    );

    let fixed = seal(
        &work,
        "node-slice",
        "fix",
        vec![replaced("lib/greet.js", GREET_BUGGY, GREET_FIXED)],
    );
    let verdict = work.collect_and_judge(&sealed(&fixed), "node-slice");
    assert_eq!(verdict["outcome"], "verified", "{verdict}");

    let leaving_the_bug = |added: Value| {
        vec![
            added,
            replaced(
                "lib/greet.js",
                GREET_BUGGY,
                &format!("{GREET_BUGGY}// greeting reviewed\n"),
            ),
        ]
    };
    let mjs = "import test from 'node:test';\ntest('greets loudly', () => {});\n";
    let package_json = "{\"name\":\"greeter\",\"private\":true,\
                        \"scripts\":{\"test\":\"node --test test/greet.test/\"}}\n";
    let attacks = [
        (
            "directory-stand-in",
            "test/greet.test/index.js",
            added("test/greet.test/index.js", GREETS_LOUDLY),
        ),
        (
            "module-stand-in",
            "test/greet.test.mjs",
            added("test/greet.test.mjs", mjs),
        ),
        (
            "tests-node-modules",
            "test/node_modules/shout/index.js",
            added(
                "test/node_modules/shout/index.js",
                "module.exports = () => 'HELLO ADA!';\n",
            ),
        ),
        (
            "package-json",
            "package.json",
            replaced("package.json", PACKAGE_JSON, package_json),
        ),
    ];
    for (name, path, edit) in attacks {
        never_verified(&work, "node-slice", name, leaving_the_bug(edit), &[path]);
    }
}

/// The demo Slice's `bug-fixed` check expects `6\n` on stdout, kept on the host as a digest;
/// an input file holding it is refused at freeze (a Candidate reads its input). The same
/// answer with CRLF line ends, a byte-order mark or trailing spaces is the same answer to a
/// Candidate that trims what it reads, so each is refused too, naming the file and the
/// check; a number that is no check's answer, with CRLF, still freezes.
#[test]
fn a_freeze_refuses_an_input_holding_a_disguised_expected_stdout() {
    let work = Work::unfrozen();
    for (name, answer) in [
        ("crlf", "6\r\n"),
        ("bom", "\u{feff}6\n"),
        ("trailing-spaces", "6  \n"),
    ] {
        work.author_slice(name, &[("inputs/numbers/answer.txt", answer)]);
        let refused = work.freeze(name);
        assert_eq!(
            refused.error_code(),
            "invalid-input",
            "{name}: {:?}",
            refused.json
        );
        let message = refused.error_message();
        assert!(
            message.contains("answer.txt") && message.contains("bug-fixed"),
            "{name}: {message}"
        );
        assert!(
            !work.dir.join(name).join("frozen").exists(),
            "{name}: a refused freeze writes nothing"
        );
    }
    work.author_slice("not-an-answer", &[("inputs/numbers/answer.txt", "16\r\n")]);
    work.freeze("not-an-answer").result();
}
