//! The test runners a Slice can be suggested for, and the command each check runs: the
//! runner on the overlay's test files, writing JUnit to the run's scratch, with the tests
//! left out of the lists deselected where the runner can deselect one.

use crate::error::AppError;

/// Where every suggested check's runner writes its JUnit results.
pub(super) const RESULTS: &str = "/sf/scratch/results.xml";

/// The unittest harness that writes JUnit (the standard library's unittest writes none).
pub(super) const UNITTEST_HARNESS: &str = "sf_unittest_junit.py";

/// Its text, copied into the suggested Slice's harness.
pub(super) const UNITTEST_HARNESS_TEXT: &str =
    include_str!("../../../docs/examples/harness/sf_unittest_junit.py");

/// A test runner `sf slice suggest` writes checks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    /// `python3 -m pytest` with `--junitxml`.
    Pytest,
    /// Python's unittest through the trusted JUnit harness.
    Unittest,
    /// `node --test` with its JUnit reporter.
    Node,
}

impl Runner {
    /// The runner named `name` (`pytest`, `unittest`, `node`).
    pub fn parse(name: &str) -> Result<Self, AppError> {
        match name {
            "pytest" => Ok(Self::Pytest),
            "unittest" => Ok(Self::Unittest),
            "node" => Ok(Self::Node),
            _ => Err(AppError::coded(
                "invalid-input",
                format!("--runner {name:?}"),
                "is one of pytest, unittest, node",
            )),
        }
    }

    /// The runner's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pytest => "pytest",
            Self::Unittest => "unittest",
            Self::Node => "node",
        }
    }

    /// The usual test layouts, when `--tests` names none.
    pub(super) fn default_tests(self) -> &'static [&'static str] {
        match self {
            Self::Pytest | Self::Unittest => &[
                "tests/**",
                "test/**",
                "testing/**",
                "**/test_*.py",
                "**/*_test.py",
                "**/tests/**",
            ],
            Self::Node => &[
                "test/**",
                "tests/**",
                "**/__tests__/**",
                "**/*.test.js",
                "**/*.test.mjs",
                "**/*.test.cjs",
                "**/*.spec.js",
            ],
        }
    }

    /// Whether `path` is a test file the runner is given (a test layout may hold helpers
    /// and data too: only the runner's own files are run).
    pub(super) fn runs_file(self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        match self {
            Self::Pytest | Self::Unittest => {
                name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"))
            }
            Self::Node => [".js", ".mjs", ".cjs"]
                .iter()
                .any(|ext| name.ends_with(ext)),
        }
    }

    /// The command of a check: the runner on `files`, with `deselected` (test ids) left out,
    /// and `extra` (the caller's arguments) before the files.
    pub(super) fn argv(
        self,
        files: &[String],
        deselected: &[String],
        extra: &[String],
    ) -> Result<Vec<String>, AppError> {
        let mut argv: Vec<String> = match self {
            Self::Pytest => [
                "python3",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "--continue-on-collection-errors",
            ]
            .map(String::from)
            .to_vec(),
            Self::Unittest => vec![
                "python3".into(),
                format!("/sf/harness/{UNITTEST_HARNESS}"),
                "--out".into(),
                RESULTS.into(),
            ],
            Self::Node => vec![
                "node".into(),
                "--test".into(),
                "--test-reporter=junit".into(),
                format!("--test-reporter-destination={RESULTS}"),
            ],
        };
        if self == Self::Pytest {
            argv.push(format!("--junitxml={RESULTS}"));
            for id in deselected {
                argv.push(format!("--deselect={}", pytest_node_id(id, files)?));
            }
        } else if let Some(id) = deselected.first() {
            return Err(AppError::coded(
                "invalid-input",
                format!("test {id}"),
                format!(
                    "is flaky or does not pass with the fix, and {} cannot leave one test of a \
                     file out; fix the test, or narrow --tests to files whose tests all pass \
                     with the fix",
                    self.as_str()
                ),
            ));
        }
        argv.extend(extra.iter().cloned());
        argv.extend(files.iter().cloned());
        Ok(argv)
    }
}

/// pytest's node id of the JUnit test id `id` (`tests.test_x.TestClass::test_y[p]`), a test
/// of one of `files`: the file whose module path (`tests.test_x`) starts the classname,
/// then each class, then the name.
fn pytest_node_id(id: &str, files: &[String]) -> Result<String, AppError> {
    let (classname, name) = id.split_once("::").unwrap_or(("", id));
    for file in files {
        let module = file.trim_end_matches(".py").replace('/', ".");
        let classes = match classname.strip_prefix(module.as_str()) {
            Some("") => Vec::new(),
            Some(rest) if rest.starts_with('.') => rest[1..].split('.').collect(),
            _ => continue,
        };
        let mut node = file.clone();
        for part in classes.iter().chain([&name]) {
            node.push_str("::");
            node.push_str(part);
        }
        return Ok(node);
    }
    Err(AppError::coded(
        "invalid-input",
        format!("test {id}"),
        "must be left out, but names no test file of the overlay, so pytest cannot deselect it; \
         narrow --tests",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_junit_id_maps_to_the_node_id_of_its_file() {
        let files = vec![
            "tests/test_utils.py".to_owned(),
            "tests/test_x.py".to_owned(),
        ];
        assert_eq!(
            pytest_node_id("tests.test_x::test_a[1-2]", &files).unwrap(),
            "tests/test_x.py::test_a[1-2]"
        );
        assert_eq!(
            pytest_node_id("tests.test_utils.TestSuperLen::test_io", &files).unwrap(),
            "tests/test_utils.py::TestSuperLen::test_io"
        );
        // A module whose name only starts like a file's is not that file.
        assert!(pytest_node_id("tests.test_xy::test_a", &files).is_err());
    }

    #[test]
    fn only_pytest_deselects() {
        let files = vec!["test/a.test.js".to_owned()];
        let deselected = vec!["test::flaky".to_owned()];
        assert!(Runner::Node.argv(&files, &deselected, &[]).is_err());
        assert_eq!(
            Runner::Node.argv(&files, &[], &[]).unwrap().last().unwrap(),
            "test/a.test.js"
        );
    }
}
