//! The harness runner `docs/examples/harness/sf_unittest_junit.py`, run by the real
//! `/usr/bin/python3` on small test modules: the results file it writes reads back through
//! `TestResults::parse_junit` with unittest's ids and the outcomes unittest saw, it is written
//! whole even when tests fail, and the exit status is unittest's.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sf_host::assurance::test_results::{TestOutcome, TestResults};

use TestOutcome::{Error, Failed, Passed, Skipped};

const PYTHON: &str = "/usr/bin/python3";

fn runner() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples/harness/sf_unittest_junit.py")
}

const SAMPLE: &str = r#"import unittest


class Passing(unittest.TestCase):
    def test_one(self):
        self.assertTrue(True)

    def test_two(self):
        pass


class Mixed(unittest.TestCase):
    def test_passes(self):
        self.assertEqual(2 + 2, 4)

    def test_fails(self):
        self.assertEqual(2 + 2, 5)

    def test_errors(self):
        raise KeyError("missing")

    @unittest.skip("not today")
    def test_skipped(self):
        self.fail("never runs")

    def test_skips_itself(self):
        self.skipTest("decided at run time")

    def test_subtest_fails(self):
        for n in range(3):
            with self.subTest(n=n):
                self.assertLess(n, 2)

    def test_subtest_errors(self):
        for n in range(2):
            with self.subTest(n=n):
                if n == 1:
                    raise ValueError("second subtest")

    def test_subtests_pass(self):
        for n in range(3):
            with self.subTest(n=n):
                self.assertLess(n, 3)

    @unittest.expectedFailure
    def test_expected_failure(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_unexpected_success(self):
        pass

    # Names unittest accepts but XML must escape, and a control character sf refuses in ids.
    locals()["test_<&\"'>"] = lambda self: None
    locals()["test_tab\there"] = lambda self: None


class SetupFails(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise RuntimeError("no database")

    def test_never_runs(self):
        pass
"#;

/// A directory holding the sample module and one that cannot be imported.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("test_sample.py"), SAMPLE).unwrap();
    std::fs::write(
        dir.path().join("test_broken.py"),
        "raise RuntimeError('cannot import me')\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("scratch")).unwrap();
    dir
}

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(PYTHON)
        .arg(runner())
        .args(args)
        .current_dir(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .output()
        .unwrap_or_else(|error| panic!("{PYTHON} must run: {error}"))
}

fn results(path: &Path) -> TestResults {
    let bytes = std::fs::read(path).unwrap();
    TestResults::parse_junit(&bytes).unwrap_or_else(|error| {
        panic!("{error}\n{}", String::from_utf8_lossy(&bytes));
    })
}

fn ids_and_outcomes(results: &TestResults) -> Vec<(&str, TestOutcome)> {
    results
        .cases
        .iter()
        .map(|case| (case.id.as_str(), case.outcome))
        .collect()
}

fn scratch_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("scratch"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn discovery_records_every_kind_of_outcome_and_exits_1() {
    let dir = project();
    let out = dir.path().join("scratch/results.xml");
    let output = run(
        dir.path(),
        &[
            "--out",
            out.to_str().unwrap(),
            "discover",
            "-s",
            ".",
            "-t",
            ".",
            "-p",
            "test_*.py",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    // unittest's own report still goes to stderr.
    assert!(stderr.contains("FAILED"), "{stderr}");
    let results = results(&out);
    assert_eq!(
        ids_and_outcomes(&results),
        [
            // A module whose import raised: unittest's own failed test, as an error.
            ("unittest.loader._FailedTest::test_broken", Error),
            ("test_sample.Mixed::test_<&\"'>", Passed),
            ("test_sample.Mixed::test_errors", Error),
            ("test_sample.Mixed::test_expected_failure", Passed),
            ("test_sample.Mixed::test_fails", Failed),
            ("test_sample.Mixed::test_passes", Passed),
            ("test_sample.Mixed::test_skipped", Skipped),
            ("test_sample.Mixed::test_skips_itself", Skipped),
            ("test_sample.Mixed::test_subtest_errors", Error),
            ("test_sample.Mixed::test_subtest_fails", Failed),
            ("test_sample.Mixed::test_subtests_pass", Passed),
            // The control character is written as a visible escape, so the file stays
            // readable by sf (which refuses control characters in ids).
            ("test_sample.Mixed::test_tab\\x09here", Passed),
            ("test_sample.Mixed::test_unexpected_success", Failed),
            ("test_sample.Passing::test_one", Passed),
            ("test_sample.Passing::test_two", Passed),
            // An error outside any test, by unittest's description; the class's tests never ran.
            ("setUpClass (test_sample.SetupFails)", Error),
        ]
    );
    // Written through a temporary name and renamed: nothing else is left beside it.
    assert_eq!(scratch_names(dir.path()), ["results.xml"]);
}

#[test]
fn named_tests_that_all_pass_exit_0() {
    let dir = project();
    let out = dir.path().join("scratch/results.xml");
    let output = run(
        dir.path(),
        &[
            &format!("--out={}", out.display()),
            "test_sample.Passing",
            "test_sample.Mixed.test_passes",
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        ids_and_outcomes(&results(&out)),
        [
            ("test_sample.Passing::test_one", Passed),
            ("test_sample.Passing::test_two", Passed),
            ("test_sample.Mixed::test_passes", Passed),
        ]
    );
}

#[test]
fn a_named_module_that_raises_on_import_is_an_error_case_not_a_lost_run() {
    let dir = project();
    let out = dir.path().join("scratch/results.xml");
    let output = run(
        dir.path(),
        &[
            "--out",
            out.to_str().unwrap(),
            "test_broken",
            "test_sample.Passing",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        ids_and_outcomes(&results(&out)),
        [
            ("unittest.loader._FailedTest::test_broken", Error),
            ("test_sample.Passing::test_one", Passed),
            ("test_sample.Passing::test_two", Passed),
        ]
    );
}

#[test]
fn a_previous_results_file_is_replaced_whole() {
    let dir = project();
    let out = dir.path().join("scratch/results.xml");
    std::fs::write(&out, "<testsuites><testcase name=\"stale\"/></testsuites>").unwrap();
    let output = run(
        dir.path(),
        &[
            "--out",
            out.to_str().unwrap(),
            "test_sample.Mixed.test_fails",
        ],
    );
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        ids_and_outcomes(&results(&out)),
        [("test_sample.Mixed::test_fails", Failed)]
    );
    assert_eq!(scratch_names(dir.path()), ["results.xml"]);
}

#[test]
fn without_out_it_is_a_usage_error_and_writes_nothing() {
    let dir = project();
    let output = run(dir.path(), &["test_sample.Passing"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("usage"));
    assert!(scratch_names(dir.path()).is_empty());
}
