//! Which paths a Slice closes around its trusted test material: every name a test runner
//! could load instead of a trusted file or before it, and the directories that hold trusted
//! files, so that a Candidate cannot shadow a test it cannot edit.
//!
//! Trusted material is the overlay's files and what the checks name outside the scope: the
//! test modules of their FAIL_TO_PASS and PASS_TO_PASS ids, the files and directories their
//! arguments name, a process check's entry. Around each trusted file `D/N.ext`, with the
//! directories `A` above it and each check's working directory `C`:
//!
//! | closed | because | what loads it |
//! |---|---|---|
//! | `D/N.*`, `D/N/**`, `C/N.*`, `C/N/**` | stands in | a package, a compiled module (`.pyc`, `.so`), Node's `N.mjs`, `N/index.js`, found first |
//! | `A/__pycache__/**`, `A/node_modules/**`, `P.*` for each `A` = `P` | stands in | cached byte code, a package a test requires, a module named as a test package |
//! | `C/M.*`, `C/M/**` for `python -m M` not in the tree | stands in | the runner itself, shadowed from the working directory |
//! | `A/__init__.*`, and in `A` and above `C`: `conftest.py`, `pytest.ini`, `.pytest.ini`, `pyproject.toml`, `tox.ini`, `setup.cfg`, `package.json`, `.cargo/**`, `Cargo.toml` | loaded before | the runner's start-up and configuration |
//! | `**/*.pth`, `**/sitecustomize.*`, `**/usercustomize.*` | loaded before | the interpreter's start-up |
//!
//! (The runners' configuration above `C`, `node_modules` there and the start-up hooks are
//! closed only when the Slice has trusted material.)
//! | `D/**`, and every directory a check names | beside | anything a runner finds in a test directory |
//!
//! The rule is closed by construction rather than a list of tricks: a new name in a test
//! directory is closed whatever it is, and a Slice opens what a fix may add there.

use std::collections::{BTreeMap, BTreeSet};

use crate::path_glob::{PathGlob, covering_text};
use crate::repository::{Because, ClosedPath, ClosedPaths, in_scope};
use crate::snapshot::SnapshotFile;

use super::AssuranceError;
use super::acceptance::{Acceptance, CwdFrom, ProcessCheck};
use crate::contracts::executor::EntryPlace;

/// Where a check's tree is inside a run; an argument under it names a tree path.
const PROGRAM: &str = "/sf/program";

/// The files a runner reads as its configuration or start-up, in a directory the tests or
/// the working directory sit in.
const CONFIGURATION: &[&str] = &[
    "conftest.py",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
    "package.json",
    ".cargo/**",
    "Cargo.toml",
];

/// Patterns closed wherever they are: Python reads them at start-up from every directory on
/// its path.
const START_UP: &[&str] = &["**/*.pth", "**/sitecustomize.*", "**/usercustomize.*"];

/// What kind of entry a path of the base (with the overlay laid over it) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeEntry {
    /// A file (or a link).
    File,
    /// A directory.
    Directory,
}

/// A view of the tree the checks run on, to find what their arguments name.
pub trait TreeLookup {
    /// The kind of the entry at `path` (`""` is the root), or `None` when there is none.
    fn entry(&self, path: &str) -> Option<TreeEntry>;
}

/// A [`TreeLookup`] over a list of file paths: every path listed is a file, every path
/// above one a directory.
#[derive(Debug, Default)]
pub struct PathSet {
    files: BTreeSet<String>,
    directories: BTreeSet<String>,
}

impl PathSet {
    /// The set of `files` and the directories above them.
    pub fn new<'a>(files: impl IntoIterator<Item = &'a str>) -> Self {
        let mut set = Self::default();
        set.directories.insert(String::new());
        for path in files {
            let mut at = 0;
            while let Some(slash) = path[at..].find('/') {
                set.directories.insert(path[..at + slash].to_owned());
                at += slash + 1;
            }
            set.files.insert(path.to_owned());
        }
        set
    }
}

impl TreeLookup for PathSet {
    fn entry(&self, path: &str) -> Option<TreeEntry> {
        if self.files.contains(path) {
            Some(TreeEntry::File)
        } else if self.directories.contains(path) {
            Some(TreeEntry::Directory)
        } else {
            None
        }
    }
}

/// A tree with files laid over it (a Slice's overlay over its base): a file laid over is a
/// file, the directories above it directories, and every other path what `under` holds.
/// Whether the files fit (none beneath a file of `under`, none where it has a directory) is
/// [`check_overlay`]'s question, asked before this view is used.
pub struct Overlaid<'a> {
    under: &'a dyn TreeLookup,
    over: PathSet,
}

impl<'a> Overlaid<'a> {
    /// `under` with `overlay` laid over it.
    pub fn new(under: &'a dyn TreeLookup, overlay: &[SnapshotFile]) -> Self {
        Self {
            under,
            over: PathSet::new(overlay.iter().map(|file| file.path.as_str())),
        }
    }
}

impl TreeLookup for Overlaid<'_> {
    fn entry(&self, path: &str) -> Option<TreeEntry> {
        self.over.entry(path).or_else(|| self.under.entry(path))
    }
}

/// Refuses an overlay file that cannot be laid over `tree` (the `what` tree): one beneath a
/// file of the tree, or where the tree has a directory (the rule a whole snapshot of the two
/// would break), judged by looking up only the overlay's paths and the directories above
/// them.
pub fn check_overlay(
    tree: &dyn TreeLookup,
    overlay: &[SnapshotFile],
    what: &str,
) -> Result<(), String> {
    for file in overlay {
        let beneath_file = file
            .path
            .match_indices('/')
            .any(|(at, _)| tree.entry(&file.path[..at]) == Some(TreeEntry::File));
        if beneath_file || tree.entry(&file.path) == Some(TreeEntry::Directory) {
            return Err(format!(
                "the overlay cannot be laid over the {what} tree: {} clashes with it \
                 (file-directory-clash)",
                file.path
            ));
        }
    }
    Ok(())
}

/// What a Slice closes around its trusted material, as it is derived.
#[derive(Debug, Default)]
pub struct Closing {
    patterns: BTreeMap<String, ClosedPath>,
    /// The trusted files found in the base (not the overlay's): the freeze protects them.
    pub named_files: BTreeSet<String>,
}

impl Closing {
    /// Everything closed around the Slice's trusted material: the overlay's files, what its
    /// checks name outside `scope` in `tree` (the base with the overlay laid over it), and
    /// the start-up hooks.
    pub fn derive(
        acceptance: &Acceptance,
        overlay: &[SnapshotFile],
        scope: &[String],
        tree: &dyn TreeLookup,
    ) -> Result<Self, AssuranceError> {
        let mut closing = Self::around_overlay(acceptance, overlay)?;
        let overlay: BTreeSet<&str> = overlay.iter().map(|file| file.path.as_str()).collect();
        let cwds = cwds(acceptance);
        for check in acceptance.process_checks() {
            let Some(cwd) = tree_cwd(check) else {
                continue;
            };
            let named = Named::of(check, cwd, tree);
            for (path, entry, graded) in named.paths {
                if !graded && in_scope(&path, scope) {
                    // The Candidate's own code (a module it runs, say), as an entry in scope is.
                    continue;
                }
                match entry {
                    TreeEntry::File => {
                        closing.around_file(&path, &cwds)?;
                        if !overlay.contains(path.as_str()) {
                            closing.named_files.insert(path);
                        }
                    }
                    TreeEntry::Directory => closing.around_directory(&path, &path)?,
                }
            }
            for module in named.runners {
                let protects = format!("{module}, the runner of check {}", check.id);
                for suffix in [".*", "/**"] {
                    closing.close(&join(cwd, &module), suffix, &protects, Because::StandsIn)?;
                }
            }
        }
        if !closing.patterns.is_empty() {
            closing.around_runners(&cwds)?;
        }
        Ok(closing)
    }

    /// What is closed whatever the base holds: around each overlay file and each check's
    /// working directory in the tree, and the start-up hooks. A frozen Slice must close at
    /// least this ([`Closing::missing_from`]).
    pub fn around_overlay(
        acceptance: &Acceptance,
        overlay: &[SnapshotFile],
    ) -> Result<Self, AssuranceError> {
        let mut closing = Self::default();
        let cwds = cwds(acceptance);
        for file in overlay {
            closing.around_file(&file.path, &cwds)?;
        }
        if !overlay.is_empty() {
            closing.around_runners(&cwds)?;
        }
        Ok(closing)
    }

    /// Closes what the runners load before any test: their configuration in and above each
    /// working directory, the packages found from there, and the interpreter's start-up
    /// hooks. Only a Slice with trusted material has something for them to stand in front of.
    fn around_runners(&mut self, cwds: &[(&str, &str)]) -> Result<(), AssuranceError> {
        for (cwd, check) in cwds {
            let configured = format!("the tests of check {check} (its runner's configuration)");
            let packages = format!("the packages check {check} requires from its environment");
            for directory in ancestors_and_self(cwd) {
                self.configuration(directory, &configured)?;
                self.close(directory, "/node_modules/**", &packages, Because::StandsIn)?;
            }
        }
        for pattern in START_UP {
            self.insert(
                (*pattern).to_owned(),
                "any test (at the Python interpreter's start-up)",
                Because::LoadedBefore,
            )?;
        }
        Ok(())
    }

    /// The closed patterns, sorted by pattern.
    pub fn closed(&self) -> Vec<ClosedPath> {
        self.patterns.values().cloned().collect()
    }

    /// The first of these patterns that `closed` lacks, or holds with a weaker reason.
    pub fn missing_from<'a>(&'a self, closed: &[ClosedPath]) -> Option<&'a ClosedPath> {
        let held: BTreeMap<&str, Because> = closed
            .iter()
            .map(|entry| (entry.pattern.as_str(), entry.because))
            .collect();
        self.patterns.values().find(|entry| {
            held.get(entry.pattern.as_str())
                .is_none_or(|because| *because > entry.because)
        })
    }

    /// Closes what could stand in for the trusted file `path`, be loaded before it, or sit
    /// beside it.
    fn around_file(&mut self, path: &str, cwds: &[(&str, &str)]) -> Result<(), AssuranceError> {
        let (directory, name) = path.rsplit_once('/').unwrap_or(("", path));
        let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
        let places = std::iter::once(directory).chain(cwds.iter().map(|(cwd, _)| *cwd));
        for place in places {
            for suffix in [".*", "/**"] {
                self.close(&join(place, stem), suffix, path, Because::StandsIn)?;
            }
        }
        self.around_directory(directory, path)
    }

    /// Closes the directory `directory` of the trusted material `protects` (a file in it, or
    /// itself), what stands in for the packages above it, and what is loaded before it.
    fn around_directory(&mut self, directory: &str, protects: &str) -> Result<(), AssuranceError> {
        for above in ancestors_and_self(directory) {
            self.close(above, "/__pycache__/**", protects, Because::StandsIn)?;
            self.close(above, "/node_modules/**", protects, Because::StandsIn)?;
            if !above.is_empty() {
                self.close(above, ".*", protects, Because::StandsIn)?;
            }
            self.close(above, "/__init__.*", protects, Because::LoadedBefore)?;
            self.configuration(above, protects)?;
        }
        self.close(directory, "/**", protects, Because::Beside)
    }

    /// Closes the runners' configuration files in `directory`.
    fn configuration(&mut self, directory: &str, protects: &str) -> Result<(), AssuranceError> {
        for name in CONFIGURATION {
            self.close(
                directory,
                &format!("/{name}"),
                protects,
                Because::LoadedBefore,
            )?;
        }
        Ok(())
    }

    /// Closes `place` (a tree path, written as a pattern covering it) followed by `suffix`
    /// (`/name` below it, or `.*` beside it); at the root, `/name` is `name`.
    fn close(
        &mut self,
        place: &str,
        suffix: &str,
        protects: &str,
        because: Because,
    ) -> Result<(), AssuranceError> {
        let pattern = match (place, suffix.strip_prefix('/')) {
            ("", Some(below)) => below.to_owned(),
            _ => format!("{}{suffix}", covering_text(place)),
        };
        self.insert(pattern, protects, because)
    }

    /// Adds `pattern`, keeping the strictest reason (and its trusted file) when it is there.
    fn insert(
        &mut self,
        pattern: String,
        protects: &str,
        because: Because,
    ) -> Result<(), AssuranceError> {
        if PathGlob::parse(&pattern).is_err() {
            return Err(AssuranceError::invalid(
                format!("trusted material {protects}"),
                format!(
                    "its path is too long to close what could stand in for it (\"{pattern}\"); \
                     move it to a shorter path"
                ),
            ));
        }
        let entry = ClosedPath {
            pattern: pattern.clone(),
            protects: protects.to_owned(),
            because,
        };
        match self.patterns.get(&pattern) {
            Some(held) if held.because <= because => {}
            _ => {
                self.patterns.insert(pattern, entry);
            }
        }
        Ok(())
    }
}

/// Checks what a Slice's scope and `open` patterns leave a proposal: each `open` pattern
/// reaches something closed that a Slice may open, and some scope entry is not closed whole.
pub fn check_reachable(scope: &[String], closed: &ClosedPaths) -> Result<(), AssuranceError> {
    closed
        .parse()
        .map_err(|error| AssuranceError::invalid("slice", error.to_string()))?;
    let openable: Vec<(PathGlob, &ClosedPath)> = closed
        .closed
        .iter()
        .filter(|entry| entry.because != Because::StandsIn)
        .filter_map(|entry| {
            PathGlob::parse(&entry.pattern)
                .ok()
                .map(|glob| (glob, entry))
        })
        .collect();
    let open: Vec<PathGlob> = closed
        .open
        .iter()
        .filter_map(|pattern| PathGlob::parse(pattern).ok())
        .collect();
    for glob in &open {
        // A pattern closed everywhere (`**/*.pth`) reaches everything; only one rooted in a
        // place shows that an open pattern means something.
        let reaches = openable.iter().any(|(closed, entry)| {
            (entry.because == Because::Beside || !entry.pattern.starts_with("**"))
                && closed.may_overlap(glob)
        });
        if !reaches {
            return Err(AssuranceError::invalid(
                format!("slice.open ({glob})"),
                "opens nothing the Slice closes: open a sub-path of a directory of trusted \
                 test material, or a file loaded before a test (the freeze lists what is \
                 closed)",
            ));
        }
    }
    let whole = |entry: &str| {
        closed.closed.iter().find(|closed| {
            PathGlob::parse(&closed.pattern).is_ok_and(|glob| {
                glob.covers_subtree(entry)
                    && (closed.because == Because::StandsIn
                        || !PathGlob::covering(&format!("{entry}/**"))
                            .is_some_and(|below| open.iter().any(|o| o.may_overlap(&below))))
            })
        })
    };
    let closed: Vec<(&String, &ClosedPath)> = scope
        .iter()
        .filter_map(|entry| whole(entry).map(|closed| (entry, closed)))
        .collect();
    if !scope.is_empty() && closed.len() == scope.len() {
        let (entry, closing) = closed[0];
        return Err(AssuranceError::invalid(
            "slice.scope",
            format!(
                "every path of the scope is closed (\"{entry}\" by \"{}\", for {}): no \
                 proposal could be sealed; open the paths a fix may edit (\"open\": \
                 [\"{entry}\"] in slice.json, or a narrower path)",
                closing.pattern, closing.protects
            ),
        ));
    }
    Ok(())
}

/// The tree path a check runs in, if it runs in its stage's tree.
fn tree_cwd(check: &ProcessCheck) -> Option<&str> {
    match check.command() {
        Some(command) if command.cwd.from == CwdFrom::Tree => Some(command.cwd.path.as_str()),
        Some(_) => None,
        None => Some(""),
    }
}

/// Each check's working directory in its tree, with the check's id.
fn cwds(acceptance: &Acceptance) -> Vec<(&str, &str)> {
    let mut seen = BTreeSet::new();
    acceptance
        .process_checks()
        .filter_map(|check| tree_cwd(check).map(|cwd| (cwd, check.id.as_str())))
        .filter(|(cwd, _)| seen.insert(*cwd))
        .collect()
}

/// What one check names: tree paths (with whether a graded test id named it), and the
/// modules it runs with `-m` that are not in the tree.
struct Named {
    paths: Vec<(String, TreeEntry, bool)>,
    runners: Vec<String>,
}

impl Named {
    fn of(check: &ProcessCheck, cwd: &str, tree: &dyn TreeLookup) -> Self {
        let mut named = Self {
            paths: Vec::new(),
            runners: Vec::new(),
        };
        let arguments: Vec<&str> = match (check.command(), check.entry()) {
            (Some(command), _) => command.argv.iter().skip(1).map(String::as_str).collect(),
            (None, Some((entry, entry_in_scope, args))) => {
                if entry.place == EntryPlace::Program && !entry_in_scope {
                    named
                        .paths
                        .push((entry.path.clone(), TreeEntry::File, false));
                }
                args.iter().map(String::as_str).collect()
            }
            (None, None) => Vec::new(),
        };
        let mut after_m = false;
        for argument in arguments {
            let runner = std::mem::replace(&mut after_m, argument == "-m");
            match named_path(argument, cwd, tree) {
                Some((path, entry)) => named.paths.push((path, entry, false)),
                None if runner && is_module_name(argument) => {
                    named
                        .runners
                        .push(argument.split('.').next().unwrap_or(argument).to_owned());
                }
                None => {}
            }
        }
        let expectation = &check.expectation;
        for id in expectation
            .fail_to_pass
            .iter()
            .chain(&expectation.pass_to_pass)
        {
            let module = id
                .split_once("::")
                .map_or(id.as_str(), |(module, _)| module);
            for base in [cwd, ""] {
                if let Some(path) = module_file(module, base, tree) {
                    named.paths.push((path, TreeEntry::File, true));
                    break;
                }
            }
        }
        named
    }
}

/// The tree path an argument names, if it names one: a path (relative to the working
/// directory, or under `/sf/program`; a pytest node id's `::` part dropped; an option's
/// `=value`), or a dotted module name that resolves to a module or package there.
fn named_path(argument: &str, cwd: &str, tree: &dyn TreeLookup) -> Option<(String, TreeEntry)> {
    let value = match argument.strip_prefix("--") {
        Some(option) => option.split_once('=')?.1,
        None if argument.starts_with('-') => return None,
        None => argument,
    };
    let value = value.split_once("::").map_or(value, |(path, _)| path);
    let path = match value.strip_prefix(PROGRAM) {
        Some("") => Some(String::new()),
        Some(rest) => rest.strip_prefix('/').and_then(|rest| normalise("", rest)),
        None if value.starts_with('/') => None,
        None => normalise(cwd, value),
    };
    if let Some(path) = path
        && let Some(entry) = tree.entry(&path)
    {
        return Some((path, entry));
    }
    if !is_module_name(value) {
        return None;
    }
    let segments: Vec<&str> = value.split('.').collect();
    (1..=segments.len()).rev().find_map(|count| {
        let module = join(cwd, &segments[..count].join("/"));
        match (tree.entry(&format!("{module}.py")), tree.entry(&module)) {
            (Some(TreeEntry::File), _) => Some((format!("{module}.py"), TreeEntry::File)),
            (_, Some(TreeEntry::Directory)) => Some((module, TreeEntry::Directory)),
            _ => None,
        }
    })
}

/// The module file a test id's class name (`tests.test_utils.TestX`) lives in, found from
/// `base`: the longest dotted prefix that is a `.py` file.
fn module_file(class: &str, base: &str, tree: &dyn TreeLookup) -> Option<String> {
    if !is_module_name(class) {
        return None;
    }
    let segments: Vec<&str> = class.split('.').collect();
    (1..=segments.len()).rev().find_map(|count| {
        let path = format!("{}.py", join(base, &segments[..count].join("/")));
        (tree.entry(&path) == Some(TreeEntry::File)).then_some(path)
    })
}

/// Whether `text` is a dotted Python module name (`pytest`, `tests.test_x`).
fn is_module_name(text: &str) -> bool {
    !text.is_empty()
        && text.split('.').all(|part| {
            part.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// `relative` resolved against the tree path `base`, `.` and `..` taken away; `None` when it
/// leaves the tree.
fn normalise(base: &str, relative: &str) -> Option<String> {
    let mut parts: Vec<&str> = base.split('/').filter(|part| !part.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// `name` below the tree path `place`.
fn join(place: &str, name: &str) -> String {
    if place.is_empty() {
        name.to_owned()
    } else {
        format!("{place}/{name}")
    }
}

/// The root, each directory above `directory`, and `directory`.
fn ancestors_and_self(directory: &str) -> impl Iterator<Item = &str> {
    let ends = directory
        .match_indices('/')
        .map(|(at, _)| at)
        .chain((!directory.is_empty()).then_some(directory.len()));
    std::iter::once("").chain(ends.map(|end| &directory[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_run_from_the_root_down() {
        assert_eq!(ancestors_and_self("").collect::<Vec<_>>(), [""]);
        assert_eq!(
            ancestors_and_self("a/b/c").collect::<Vec<_>>(),
            ["", "a", "a/b", "a/b/c"]
        );
    }

    #[test]
    fn arguments_name_paths_modules_and_node_ids() {
        let tree = PathSet::new([
            "tests/__init__.py",
            "tests/test_utils.py",
            "src/test_te.py",
            "src/te.py",
            "test/greet.test.js",
        ]);
        let named = |argument: &str, cwd: &str| named_path(argument, cwd, &tree);
        let file = |path: &str| Some((path.to_owned(), TreeEntry::File));
        let directory = |path: &str| Some((path.to_owned(), TreeEntry::Directory));
        assert_eq!(
            named("tests/test_utils.py", ""),
            file("tests/test_utils.py")
        );
        assert_eq!(
            named("tests/test_utils.py::TestX::test_y", ""),
            file("tests/test_utils.py")
        );
        assert_eq!(named("/sf/program/tests", "src"), directory("tests"));
        assert_eq!(
            named("../tests/./test_utils.py", "src"),
            file("tests/test_utils.py")
        );
        assert_eq!(named("--rootdir=tests", ""), directory("tests"));
        assert_eq!(named("test_te", "src"), file("src/test_te.py"));
        assert_eq!(
            named("tests.test_utils.TestX.test_y", ""),
            file("tests/test_utils.py")
        );
        assert_eq!(named("test/", ""), directory("test"));
        assert_eq!(named(".", ""), directory(""));
        assert_eq!(named("/sf/scratch/results.xml", ""), None);
        assert_eq!(named("-q", ""), None);
        assert_eq!(named("../../x", ""), None);
        assert_eq!(named("pytest", ""), None);
    }

    fn acceptance(checks: serde_json::Value) -> Acceptance {
        let value = serde_json::json!({"protocol": "sf-repository-acceptance/3", "checks": checks});
        Acceptance::from_json(value.to_string().as_bytes()).unwrap()
    }

    fn pytest_check() -> serde_json::Value {
        serde_json::json!({
            "kind": "command", "id": "tests-pass", "phase": "after", "stage": "candidate",
            "argv": ["python3", "-m", "pytest", "-q", "tests/test_utils.py",
                     "--junitxml=/sf/scratch/results.xml"],
            "cwd": {"from": "tree", "path": ""}, "env": {}, "environment": null,
            "results": {"junit": "results.xml", "maxBytes": 4096},
            "input": format!("sha256:{}", "0".repeat(64)),
            "expectation": {"exitCode": 0, "stdoutDigest": null,
                            "failToPass": ["tests.helpers.TestX::test_y"]},
        })
    }

    fn because(closing: &Closing, pattern: &str) -> Option<(Because, String)> {
        closing
            .patterns
            .get(pattern)
            .map(|entry| (entry.because, entry.protects.clone()))
    }

    #[test]
    fn a_test_named_by_a_check_is_closed_around_and_its_runner_too() {
        let tree = PathSet::new([
            "tests/test_utils.py",
            "tests/helpers.py",
            "src/pkg/utils.py",
        ]);
        let closing = Closing::derive(
            &acceptance(serde_json::json!([pytest_check()])),
            &[],
            &["src".into(), "tests/helpers.py".into()],
            &tree,
        )
        .unwrap();
        let stands_in = |protects: &str| Some((Because::StandsIn, protects.to_owned()));
        for pattern in [
            "tests/test_utils/**",
            "tests/test_utils.*",
            "tests/__pycache__/**",
            "tests.*",
            "test_utils.*",
        ] {
            assert_eq!(
                because(&closing, pattern),
                stands_in("tests/test_utils.py"),
                "{pattern}"
            );
        }
        assert_eq!(
            because(&closing, "tests/helpers/**"),
            stands_in("tests/helpers.py"),
            "a graded test id names its module, even inside the scope"
        );
        assert_eq!(
            because(&closing, "pytest/**"),
            stands_in("pytest, the runner of check tests-pass")
        );
        assert_eq!(
            because(&closing, "tests/**").map(|(because, _)| because),
            Some(Because::Beside)
        );
        for before in [
            "conftest.py",
            "tests/conftest.py",
            "tests/__init__.*",
            "**/*.pth",
        ] {
            assert_eq!(
                because(&closing, before).map(|(because, _)| because),
                Some(Because::LoadedBefore),
                "{before}"
            );
        }
        assert!(
            because(&closing, "src/**").is_none(),
            "the code under test stays open"
        );
        assert_eq!(
            closing.named_files.iter().collect::<Vec<_>>(),
            ["tests/helpers.py", "tests/test_utils.py"]
        );
    }

    #[test]
    fn a_path_a_check_names_inside_the_scope_is_the_candidates() {
        let tree = PathSet::new(["tests/test_utils.py"]);
        let closing = Closing::derive(
            &acceptance(serde_json::json!([pytest_check()])),
            &[],
            &["tests/test_utils.py".into()],
            &tree,
        )
        .unwrap();
        assert!(because(&closing, "tests/test_utils/**").is_none());
        assert!(closing.named_files.is_empty());
    }

    #[test]
    fn a_frozen_slice_must_close_the_overlays_part_as_strictly() {
        let overlay = [SnapshotFile::new(
            "tests/test_x.py",
            crate::contracts::tree_path::EntryMode::Regular,
            &b"def test(): pass\n"[..],
        )];
        let accepted = acceptance(serde_json::json!([pytest_check()]));
        let needed = Closing::around_overlay(&accepted, &overlay).unwrap();
        let derived = Closing::derive(&accepted, &overlay, &["src".into()], &PathSet::new([]))
            .unwrap()
            .closed();
        assert!(needed.missing_from(&derived).is_none());
        let mut weakened = derived.clone();
        let at = weakened
            .iter()
            .position(|entry| entry.pattern == "tests/test_x/**")
            .unwrap();
        weakened[at].because = Because::Beside;
        assert_eq!(
            needed
                .missing_from(&weakened)
                .map(|entry| entry.pattern.as_str()),
            Some("tests/test_x/**")
        );
        weakened.remove(at);
        assert!(needed.missing_from(&weakened).is_some());
    }

    fn closed_paths(closed: &[(&str, Because)], open: &[&str]) -> ClosedPaths {
        ClosedPaths {
            closed: closed
                .iter()
                .map(|(pattern, because)| ClosedPath {
                    pattern: (*pattern).into(),
                    protects: "src/test_te.py".into(),
                    because: *because,
                })
                .collect(),
            open: open.iter().map(|pattern| (*pattern).into()).collect(),
        }
    }

    #[test]
    fn a_scope_closed_whole_or_an_open_pattern_reaching_nothing_is_refused() {
        let closed = [
            ("src/**", Because::Beside),
            ("src/test_te.*", Because::StandsIn),
            ("**/*.pth", Because::LoadedBefore),
        ];
        let scope = ["src/te.py".to_owned()];
        let refused = check_reachable(&scope, &closed_paths(&closed, &[])).unwrap_err();
        assert!(
            refused.to_string().contains("\"open\": [\"src/te.py\"]"),
            "{refused}"
        );
        assert!(check_reachable(&scope, &closed_paths(&closed, &["src/te.py"])).is_ok());
        let two = ["src/te.py".to_owned(), "lib".to_owned()];
        assert!(
            check_reachable(&two, &closed_paths(&closed, &[])).is_ok(),
            "lib is open"
        );
        let refused = check_reachable(&two, &closed_paths(&closed, &["lib/**"])).unwrap_err();
        assert!(refused.to_string().contains("opens nothing"), "{refused}");
    }
}
