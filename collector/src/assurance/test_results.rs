//! Per-test results: the JUnit XML a check's run writes, read into one outcome per test, and
//! the grade of one run against the tests its check lists (failToPass and passToPass).
//!
//! The file is written inside the run, so by code the Candidate controls: it is read as
//! hostile input, and what it says never outranks the run's exit code (graded elsewhere).
//! [`TestResults::parse_junit`] keeps these rules:
//!
//! - At most [`MAX_RESULTS_BYTES`], refused before any parsing; the bytes must be UTF-8, and
//!   an XML declaration may name no other encoding than UTF-8 (or US-ASCII). A UTF-8 byte
//!   order mark is allowed.
//! - Read by a streaming reader (quick-xml), with no recursion of its own: elements nest at
//!   most 64 deep, counted as they open. A `<!DOCTYPE>` is refused, so there is no DTD and no
//!   declared entity; the only references decoded are the five predefined entities (`&lt;`
//!   `&gt;` `&amp;` `&apos;` `&quot;`) and numeric character references other than `&#0;`.
//!   Anything else, and anything not well-formed (a truncated document, mismatched tags, a
//!   second root, text outside the root), is malformed.
//! - The root is `<testsuites>` or `<testsuite>`; suites nest. A `<testcase>` counts as a test
//!   where it is a child of a suite; at most [`MAX_TEST_CASES`] of them. Its `name` is
//!   required and not empty; `classname` is optional; `time` is in seconds, and a missing or
//!   unreadable, negative or non-finite time is 0 ms, a huge one the largest a record holds.
//! - A test's id is `classname::name` when the classname is not empty and `name` otherwise,
//!   exactly as the attributes hold them after XML's own decoding (references resolved, and
//!   a literal tab or line break in an attribute read as a space, as every XML reader does).
//!   Ids are 1 to [`MAX_TEST_ID_BYTES`] bytes without control characters.
//! - A test's outcome is the worst of its `<failure>` (failed), `<error>` (error) and
//!   `<skipped>` (skipped) children, and passed with none of them. Every other element and
//!   attribute, and all text (properties, system-out, system-err, reruns, messages), is
//!   ignored and never kept; attribute values are still checked for their references.
//! - Zero test cases is a valid parse; [`grade`] finds it undecided.
//!
//! An id can appear more than once (a runner that lists a test twice, or names two tests
//! alike): [`TestResults::outcome`] and [`grade`] take the worst of its outcomes, so a
//! duplicate cannot turn a failure into a pass.

use std::collections::{BTreeSet, HashMap};

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};
use quick_xml::reader::Reader;
use serde::{Deserialize, Serialize};

use crate::canonical::MAX_SAFE_INTEGER;
use crate::text_escape;

/// The most bytes of a results file sf reads (8 MiB); a check may declare less.
pub const MAX_RESULTS_BYTES: u64 = 8 * 1024 * 1024;
/// The most test cases one results file may list.
pub const MAX_TEST_CASES: usize = 100_000;
/// The longest test id, in bytes.
pub const MAX_TEST_ID_BYTES: usize = 4096;

/// The deepest elements may nest, the root being at depth 1. Real JUnit files nest suites a
/// few levels; the bound keeps the reader's stack of open elements small.
const MAX_DEPTH: usize = 64;
/// The longest duration a record holds, in milliseconds: canonical JSON's largest integer.
const MAX_DURATION_MS: u64 = MAX_SAFE_INTEGER as u64;
/// The most characters of the file's own text an error repeats.
const MAX_QUOTED_CHARS: usize = 64;
/// The most characters of a reader's reason an error repeats.
const MAX_REASON_CHARS: usize = 256;

crate::contracts::word_enum! {
    /// How one test ended, as the runner reported it; ordered from best to worst.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum TestOutcome {
        /// The test ran and passed.
        "passed" Passed,
        /// The runner did not run the test, or did not count it (pytest's xfail, say).
        "skipped" Skipped,
        /// The test ran and an assertion failed.
        "failed" Failed,
        /// The test could not run to its end: an error in it, or in its setup.
        "error" Error,
    }
}

/// One test case of a results file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TestCase {
    /// The runner's id of the test: `classname::name`, or `name` without a classname.
    pub id: String,
    /// How the test ended.
    pub outcome: TestOutcome,
    /// How long it took, as the runner reported it, in milliseconds (0 when not reported).
    pub duration_ms: u64,
}

/// The per-test results of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestResults {
    /// Every test case, in document order; an id may appear more than once.
    pub cases: Vec<TestCase>,
}

/// How many test cases ended each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TestCounts {
    /// Test cases that passed.
    pub passed: usize,
    /// Test cases that were skipped.
    pub skipped: usize,
    /// Test cases that failed.
    pub failed: usize,
    /// Test cases that errored.
    pub error: usize,
}

/// Why a results file was refused. Every position is a byte offset into the file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResultsError {
    /// The file is larger than sf reads.
    #[error("the results file is {size} bytes, more than the {limit} sf reads")]
    TooLarge {
        /// The file's size.
        size: u64,
        /// The most sf reads.
        limit: u64,
    },
    /// The file is not UTF-8.
    #[error("the results file is not UTF-8: an invalid byte at byte {position}")]
    NotUtf8 {
        /// Where the first invalid byte is.
        position: u64,
    },
    /// The XML declaration names an encoding other than UTF-8.
    #[error("the results file declares the encoding {declared:?}; sf reads results as UTF-8 only")]
    OtherEncoding {
        /// The encoding declared (its first characters, escaped).
        declared: String,
    },
    /// The file is not well-formed XML, or uses what sf refuses (a DTD, an unknown entity).
    #[error("the results file is malformed at byte {position}: {reason}")]
    Malformed {
        /// Where the fault was found.
        position: u64,
        /// What is wrong, as a sentence.
        reason: String,
    },
    /// Elements nest deeper than sf reads.
    #[error("the results file nests elements more than {limit} deep at byte {position}")]
    TooDeep {
        /// Where the element too deep starts.
        position: u64,
        /// The deepest nesting read.
        limit: usize,
    },
    /// The file is XML but not JUnit: the root is neither `<testsuites>` nor `<testsuite>`.
    #[error(
        "the results file is not JUnit XML: its root element <{root}> (byte {position}) is \
         neither <testsuites> nor <testsuite>"
    )]
    NotJunit {
        /// Where the root element starts.
        position: u64,
        /// The root element's name (its first characters, escaped).
        root: String,
    },
    /// The file lists more test cases than sf reads.
    #[error("the results file lists more than {limit} test cases (the next at byte {position})")]
    TooManyCases {
        /// Where the first test case past the limit starts.
        position: u64,
        /// The most test cases read.
        limit: usize,
    },
    /// A test case has no `name`, or an empty one.
    #[error("the <testcase> at byte {position} has no name")]
    MissingName {
        /// Where the test case starts.
        position: u64,
    },
    /// A test id is longer than sf reads.
    #[error("the <testcase> at byte {position} has an id of {bytes} bytes, more than {limit}")]
    IdTooLong {
        /// Where the test case starts.
        position: u64,
        /// The id's length.
        bytes: usize,
        /// The longest id read.
        limit: usize,
    },
    /// A test id holds a control character.
    #[error("the <testcase> at byte {position} has an invalid id: {reason}")]
    IdInvalid {
        /// Where the test case starts.
        position: u64,
        /// What is wrong with the id.
        reason: String,
    },
}

impl ResultsError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } => "too-large",
            Self::NotUtf8 { .. } => "not-utf8",
            Self::OtherEncoding { .. } => "other-encoding",
            Self::Malformed { .. } => "malformed",
            Self::TooDeep { .. } => "too-deep",
            Self::NotJunit { .. } => "not-junit",
            Self::TooManyCases { .. } => "too-many-cases",
            Self::MissingName { .. } => "missing-name",
            Self::IdTooLong { .. } => "id-too-long",
            Self::IdInvalid { .. } => "id-invalid",
        }
    }
}

fn malformed(position: u64, reason: impl Into<String>) -> ResultsError {
    ResultsError::Malformed {
        position,
        reason: reason.into(),
    }
}

/// The first characters of `text`, which came from the file, escaped to show on one line.
fn quoted(text: &str, most: usize) -> String {
    let mut kept: String = text.chars().take(most).collect();
    if kept.len() < text.len() {
        kept.push('…');
    }
    text_escape::line(&kept).into_owned()
}

/// A reader's error as a reason: its messages repeat the file's text (tag names, entities).
fn reader_reason(error: &quick_xml::Error) -> String {
    quoted(&error.to_string(), MAX_REASON_CHARS)
}

/// Why `id` is not a valid test id, if it is not.
fn id_fault(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("it is empty".into());
    }
    if id.len() > MAX_TEST_ID_BYTES {
        return Some(format!(
            "it is {} bytes, more than {MAX_TEST_ID_BYTES}",
            id.len()
        ));
    }
    id.chars()
        .find(|c| c.is_control())
        .map(|c| format!("it holds the control character U+{:04X}", u32::from(c)))
}

/// The milliseconds a `time` attribute (decimal seconds) stands for: 0 when it is missing,
/// unreadable, negative or not finite, and at most [`MAX_DURATION_MS`].
fn duration_ms(time: Option<&str>) -> u64 {
    let Some(seconds) = time.and_then(|time| time.trim().parse::<f64>().ok()) else {
        return 0;
    };
    if !seconds.is_finite() || seconds <= 0.0 {
        return 0;
    }
    let millis = (seconds * 1000.0).round();
    if millis >= MAX_DURATION_MS as f64 {
        MAX_DURATION_MS
    } else {
        millis as u64
    }
}

/// What an open element is to the reading.
enum Frame {
    /// `<testsuites>` or `<testsuite>`: its test cases and suites count.
    Suite,
    /// A `<testcase>` being read.
    Case(TestCase),
    /// Anything else, and everything inside it: ignored.
    Ignored,
}

/// The attributes of a test case that sf reads.
#[derive(Default)]
struct CaseAttributes {
    name: Option<String>,
    classname: Option<String>,
    time: Option<String>,
}

/// One pass over a document.
struct Reading<'a> {
    reader: Reader<&'a [u8]>,
    /// Where the document starts in the file (after a byte order mark).
    start: u64,
    version: XmlVersion,
    /// The open elements, outermost first; never longer than [`MAX_DEPTH`].
    open: Vec<Frame>,
    /// Whether the root element has closed.
    root_closed: bool,
    cases: Vec<TestCase>,
}

impl<'a> Reading<'a> {
    fn new(text: &'a str) -> Self {
        const BOM: &str = "\u{feff}";
        let (start, document) = match text.strip_prefix(BOM) {
            Some(rest) => (BOM.len() as u64, rest),
            None => (0, text),
        };
        let mut reader = Reader::from_str(document);
        // A comment holding `--` is not XML; quick-xml checks it only when asked.
        reader.config_mut().check_comments = true;
        Self {
            reader,
            start,
            version: XmlVersion::Implicit1_0,
            open: Vec::new(),
            root_closed: false,
            cases: Vec::new(),
        }
    }

    fn run(mut self) -> Result<TestResults, ResultsError> {
        let mut first = true;
        loop {
            let at = self.start + self.reader.buffer_position();
            let event = match self.reader.read_event() {
                Ok(event) => event,
                Err(error) => {
                    let position = self.start + self.reader.error_position();
                    return Err(malformed(position, reader_reason(&error)));
                }
            };
            match event {
                Event::Decl(declaration) => {
                    if !first {
                        return Err(malformed(
                            at,
                            "an XML declaration is allowed only at the start",
                        ));
                    }
                    self.declaration(&declaration, at)?;
                }
                Event::DocType(_) => {
                    return Err(malformed(
                        at,
                        "a document type declaration (<!DOCTYPE>) is refused: results declare \
                         no DTD and no entities",
                    ));
                }
                Event::Start(element) => self.open(&element, at, false)?,
                Event::Empty(element) => self.open(&element, at, true)?,
                Event::End(_) => self.close(at)?,
                Event::Text(text) => {
                    if self.open.is_empty() && !text.chars().all(is_xml_space) {
                        return Err(malformed(at, "text outside the root element"));
                    }
                }
                Event::CData(_) => {
                    if self.open.is_empty() {
                        return Err(malformed(at, "a CDATA section outside the root element"));
                    }
                }
                Event::GeneralRef(reference) => {
                    check_reference(&reference, at)?;
                    if self.open.is_empty() {
                        return Err(malformed(at, "a reference outside the root element"));
                    }
                }
                Event::Comment(_) | Event::PI(_) => {}
                Event::Eof => break,
            }
            first = false;
        }
        let end = self.start + self.reader.buffer_position();
        if !self.open.is_empty() {
            return Err(malformed(
                end,
                format!(
                    "the document ends with {} elements still open",
                    self.open.len()
                ),
            ));
        }
        if !self.root_closed {
            return Err(malformed(end, "the document has no root element"));
        }
        Ok(TestResults { cases: self.cases })
    }

    fn declaration(
        &mut self,
        declaration: &quick_xml::events::BytesDecl<'_>,
        at: u64,
    ) -> Result<(), ResultsError> {
        self.version = declaration
            .xml_version()
            .map_err(|error| malformed(at, reader_reason(&error)))?;
        if let Some(encoding) = declaration.encoding() {
            let encoding = encoding.map_err(|error| {
                malformed(at, reader_reason(&quick_xml::Error::InvalidAttr(error)))
            })?;
            let label = encoding.trim().to_ascii_lowercase();
            if !matches!(label.as_str(), "utf-8" | "utf8" | "us-ascii" | "ascii") {
                return Err(ResultsError::OtherEncoding {
                    declared: quoted(&encoding, MAX_QUOTED_CHARS),
                });
            }
        }
        Ok(())
    }

    fn open(&mut self, element: &BytesStart<'_>, at: u64, empty: bool) -> Result<(), ResultsError> {
        if self.open.len() >= MAX_DEPTH {
            return Err(ResultsError::TooDeep {
                position: at,
                limit: MAX_DEPTH,
            });
        }
        let name = element.name();
        let name = name.as_ref();
        let is_case = name == "testcase" && matches!(self.open.last(), Some(Frame::Suite));
        // Every attribute is decoded, read or not, so that an unknown entity anywhere is refused.
        let attributes = self.attributes(element, at, is_case)?;
        let frame = match self.open.last_mut() {
            None => {
                if self.root_closed {
                    return Err(malformed(at, "a second root element"));
                }
                if name != "testsuites" && name != "testsuite" {
                    return Err(ResultsError::NotJunit {
                        position: at,
                        root: quoted(name, MAX_QUOTED_CHARS),
                    });
                }
                Frame::Suite
            }
            Some(Frame::Suite) => match name {
                "testsuite" => Frame::Suite,
                "testcase" => Frame::Case(self.case(attributes, at)?),
                _ => Frame::Ignored,
            },
            Some(Frame::Case(case)) => {
                let outcome = match name {
                    "failure" => Some(TestOutcome::Failed),
                    "error" => Some(TestOutcome::Error),
                    "skipped" => Some(TestOutcome::Skipped),
                    _ => None,
                };
                if let Some(outcome) = outcome {
                    case.outcome = case.outcome.max(outcome);
                }
                Frame::Ignored
            }
            Some(Frame::Ignored) => Frame::Ignored,
        };
        self.open.push(frame);
        if empty {
            self.close(at)?;
        }
        Ok(())
    }

    fn close(&mut self, at: u64) -> Result<(), ResultsError> {
        match self.open.pop() {
            None => return Err(malformed(at, "an end tag outside the root element")),
            Some(Frame::Case(case)) => self.cases.push(case),
            Some(Frame::Suite | Frame::Ignored) => {}
        }
        if self.open.is_empty() {
            self.root_closed = true;
        }
        Ok(())
    }

    /// Decodes every attribute of `element`, keeping those of a test case when `keep`.
    fn attributes(
        &self,
        element: &BytesStart<'_>,
        at: u64,
        keep: bool,
    ) -> Result<CaseAttributes, ResultsError> {
        let mut kept = CaseAttributes::default();
        for attribute in element.attributes() {
            let attribute = attribute.map_err(|error| {
                malformed(at, reader_reason(&quick_xml::Error::InvalidAttr(error)))
            })?;
            let value = attribute
                .normalized_value(self.version)
                .map_err(|error| malformed(at, reader_reason(&error)))?;
            if !keep {
                continue;
            }
            let slot = match attribute.key.as_ref() {
                "name" => &mut kept.name,
                "classname" => &mut kept.classname,
                "time" => &mut kept.time,
                _ => continue,
            };
            *slot = Some(value.into_owned());
        }
        Ok(kept)
    }

    fn case(&self, attributes: CaseAttributes, at: u64) -> Result<TestCase, ResultsError> {
        if self.cases.len() >= MAX_TEST_CASES {
            return Err(ResultsError::TooManyCases {
                position: at,
                limit: MAX_TEST_CASES,
            });
        }
        let name = match attributes.name {
            Some(name) if !name.is_empty() => name,
            _ => return Err(ResultsError::MissingName { position: at }),
        };
        let id = match attributes.classname {
            Some(classname) if !classname.is_empty() => format!("{classname}::{name}"),
            _ => name,
        };
        if id.len() > MAX_TEST_ID_BYTES {
            return Err(ResultsError::IdTooLong {
                position: at,
                bytes: id.len(),
                limit: MAX_TEST_ID_BYTES,
            });
        }
        if let Some(reason) = id_fault(&id) {
            return Err(ResultsError::IdInvalid {
                position: at,
                reason,
            });
        }
        Ok(TestCase {
            id,
            outcome: TestOutcome::Passed,
            duration_ms: duration_ms(attributes.time.as_deref()),
        })
    }
}

fn is_xml_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

/// Refuses a reference in text other than a predefined entity or a character reference.
fn check_reference(
    reference: &quick_xml::events::BytesRef<'_>,
    at: u64,
) -> Result<(), ResultsError> {
    if reference.is_char_ref() {
        return reference
            .resolve_char_ref()
            .map(|_| ())
            .map_err(|error| malformed(at, reader_reason(&error)));
    }
    match &**reference {
        "lt" | "gt" | "amp" | "apos" | "quot" => Ok(()),
        other => Err(malformed(
            at,
            format!(
                "the entity &{};: only &lt; &gt; &amp; &apos; &quot; and character references \
                 are read",
                quoted(other, MAX_QUOTED_CHARS)
            ),
        )),
    }
}

impl TestResults {
    /// Parses JUnit XML (the forms pytest's --junitxml, unittest-xml-reporting, node --test's
    /// junit reporter, cargo2junit and most CI tools write), by the rules of this module.
    pub fn parse_junit(bytes: &[u8]) -> Result<TestResults, ResultsError> {
        let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if size > MAX_RESULTS_BYTES {
            return Err(ResultsError::TooLarge {
                size,
                limit: MAX_RESULTS_BYTES,
            });
        }
        let text = std::str::from_utf8(bytes).map_err(|error| ResultsError::NotUtf8 {
            position: error.valid_up_to() as u64,
        })?;
        Reading::new(text).run()
    }

    /// The outcome of `id`: if listed more than once, the worst (error > failed > skipped >
    /// passed) — a duplicate cannot turn a failure into a pass.
    pub fn outcome(&self, id: &str) -> Option<TestOutcome> {
        self.cases
            .iter()
            .filter(|case| case.id == id)
            .map(|case| case.outcome)
            .max()
    }

    /// Counts by outcome (for summaries): passed, skipped, failed, error.
    pub fn counts(&self) -> TestCounts {
        let mut counts = TestCounts::default();
        for case in &self.cases {
            *match case.outcome {
                TestOutcome::Passed => &mut counts.passed,
                TestOutcome::Skipped => &mut counts.skipped,
                TestOutcome::Failed => &mut counts.failed,
                TestOutcome::Error => &mut counts.error,
            } += 1;
        }
        counts
    }

    /// The worst outcome of every id, for many look-ups.
    fn worst_outcomes(&self) -> HashMap<&str, TestOutcome> {
        let mut worst = HashMap::with_capacity(self.cases.len());
        for case in &self.cases {
            worst
                .entry(case.id.as_str())
                .and_modify(|outcome: &mut TestOutcome| *outcome = (*outcome).max(case.outcome))
                .or_insert(case.outcome);
        }
        worst
    }
}

/// What a check expects of the tests it runs, by the runner's test ids.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TestExpectation {
    /// Tests the change fixes: they fail or error on the base and pass on the Candidate.
    pub fail_to_pass: Vec<String>,
    /// Tests that must keep working: they pass on the base and on the Candidate.
    pub pass_to_pass: Vec<String>,
}

impl TestExpectation {
    /// Checks the rules the types do not carry: at least one id and at most
    /// [`MAX_TEST_CASES`] in both lists together, each a valid test id (1 to
    /// [`MAX_TEST_ID_BYTES`] bytes, no control character), none listed twice in either list
    /// or across them. The error names the list and index.
    pub fn check(&self) -> Result<(), String> {
        let total = self.fail_to_pass.len() + self.pass_to_pass.len();
        if total == 0 {
            return Err("a test expectation lists at least one test id".into());
        }
        if total > MAX_TEST_CASES {
            return Err(format!(
                "a test expectation lists at most {MAX_TEST_CASES} test ids, not {total}"
            ));
        }
        let mut seen = BTreeSet::new();
        for (list, ids) in [
            (TestList::FailToPass, &self.fail_to_pass),
            (TestList::PassToPass, &self.pass_to_pass),
        ] {
            for (at, id) in ids.iter().enumerate() {
                let field = format!("{}[{at}]", list.as_str());
                if let Some(fault) = id_fault(id) {
                    return Err(format!("{field}: not a valid test id: {fault}"));
                }
                if !seen.insert(id.as_str()) {
                    return Err(format!(
                        "{field}: the test id {} is listed twice",
                        quoted(id, MAX_QUOTED_CHARS)
                    ));
                }
            }
        }
        Ok(())
    }

    /// Whether neither list names a test.
    pub fn is_empty(&self) -> bool {
        self.fail_to_pass.is_empty() && self.pass_to_pass.is_empty()
    }
}

crate::contracts::word_enum! {
    /// Which list of a [`TestExpectation`] names a test.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum TestList {
        /// `failToPass`: fails or errors on the base, passes on the Candidate.
        "failToPass" FailToPass,
        /// `passToPass`: passes on both.
        "passToPass" PassToPass,
    }
}

/// One listed test that did not do what its stage expects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestMiss {
    /// The test's id, as listed.
    pub id: String,
    /// The list that names it.
    pub list: TestList,
    /// What the stage expects of it: `"pass"` or `"fail or error"`.
    pub wanted: &'static str,
    /// How it ended, or `None` when the results do not list it.
    pub seen: Option<TestOutcome>,
}

impl std::fmt::Display for TestMiss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} test {}: expected {}, ",
            self.list.as_str(),
            text_escape::line(&self.id),
            self.wanted
        )?;
        match self.seen {
            Some(outcome) => write!(f, "was {}", outcome.as_str()),
            None => f.write_str("was not in the results"),
        }
    }
}

/// How one run's per-test results measure against its check's [`TestExpectation`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TestGrade {
    /// Every listed test did what the stage expects, and the results agree with the exit code.
    Met,
    /// The results show the expectation missed: these tests, and/or the results disagree
    /// with the exit code.
    Missed {
        /// The listed tests that did not do what the stage expects: the failToPass list's in
        /// its order, then the passToPass list's.
        misses: Vec<TestMiss>,
        /// How the results contradict the exit code, if they do.
        disagreement: Option<String>,
    },
    /// The results cannot decide: none were written, they could not be parsed, or zero
    /// tests were collected.
    Undecided(String),
}

/// What a stage expects of one listed test.
#[derive(Clone, Copy)]
enum Wanted {
    Pass,
    /// A failToPass test on the base: it shows the defect by failing, or by erroring (the
    /// code it tests may not exist yet).
    Failure,
}

impl Wanted {
    fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Failure => "fail or error",
        }
    }

    fn is_met_by(self, outcome: TestOutcome) -> bool {
        match self {
            Self::Pass => outcome == TestOutcome::Passed,
            Self::Failure => matches!(outcome, TestOutcome::Failed | TestOutcome::Error),
        }
    }
}

/// Grades one run's results. `stage_is_base`: on the base, every failToPass test must have
/// failed or errored and every passToPass test passed; on the Candidate, every listed test
/// passed. `exit_code` is the run's (`None` if it did not exit).
///
/// The exit code stays the authority and is graded elsewhere; here the results must agree
/// with it: a run that exited 0 while its results list a failed or errored test (listed or
/// not) disagrees. A non-zero exit needs no agreement: the exit-code expectation already
/// catches one where 0 was expected. A test in neither list changes nothing else.
///
/// `results` is `None` when the run wrote no results file; that, a file that could not be
/// parsed, and zero test cases are [`TestGrade::Undecided`].
pub fn grade(
    stage_is_base: bool,
    exit_code: Option<i32>,
    results: Option<&Result<TestResults, ResultsError>>,
    expectation: &TestExpectation,
) -> TestGrade {
    let results = match results {
        None => return TestGrade::Undecided("the run wrote no results file".into()),
        Some(Err(error)) => return TestGrade::Undecided(error.to_string()),
        Some(Ok(results)) => results,
    };
    if results.cases.is_empty() {
        return TestGrade::Undecided("zero tests were collected".into());
    }
    let seen = results.worst_outcomes();
    let fixed = if stage_is_base {
        Wanted::Failure
    } else {
        Wanted::Pass
    };
    let mut misses = Vec::new();
    for (list, ids, wanted) in [
        (TestList::FailToPass, &expectation.fail_to_pass, fixed),
        (
            TestList::PassToPass,
            &expectation.pass_to_pass,
            Wanted::Pass,
        ),
    ] {
        for id in ids {
            let outcome = seen.get(id.as_str()).copied();
            if !outcome.is_some_and(|outcome| wanted.is_met_by(outcome)) {
                misses.push(TestMiss {
                    id: id.clone(),
                    list,
                    wanted: wanted.as_str(),
                    seen: outcome,
                });
            }
        }
    }
    let disagreement = (exit_code == Some(0))
        .then(|| disagreement(results))
        .flatten();
    if misses.is_empty() && disagreement.is_none() {
        TestGrade::Met
    } else {
        TestGrade::Missed {
            misses,
            disagreement,
        }
    }
}

/// How results that list failed or errored tests contradict an exit code of 0, if they do.
fn disagreement(results: &TestResults) -> Option<String> {
    let counts = results.counts();
    let first = results
        .cases
        .iter()
        .find(|case| matches!(case.outcome, TestOutcome::Failed | TestOutcome::Error))?;
    Some(format!(
        "the run exited 0, but its results list {} failed and {} errored tests (the first: {} \
         {})",
        counts.failed,
        counts.error,
        quoted(&first.id, MAX_QUOTED_CHARS * 4),
        first.outcome.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    use TestOutcome::{Error, Failed, Passed, Skipped};

    const PYTEST: &[u8] = include_bytes!("../../tests/fixtures/junit/pytest.xml");
    const PYTEST_XUNIT1: &[u8] =
        include_bytes!("../../tests/fixtures/junit/pytest-xunit1-logging.xml");
    const NODE: &[u8] = include_bytes!("../../tests/fixtures/junit/node-test.xml");
    const UNITTEST: &[u8] = include_bytes!("../../tests/fixtures/junit/unittest.xml");
    const XMLRUNNER: &[u8] = include_bytes!("../../tests/fixtures/junit/xmlrunner.xml");

    fn ids_and_outcomes(results: &TestResults) -> Vec<(&str, TestOutcome)> {
        results
            .cases
            .iter()
            .map(|case| (case.id.as_str(), case.outcome))
            .collect()
    }

    fn parse(text: &str) -> Result<TestResults, ResultsError> {
        TestResults::parse_junit(text.as_bytes())
    }

    fn code(text: &str) -> &'static str {
        parse(text).expect_err(text).code()
    }

    fn suite(cases: &str) -> String {
        format!("<testsuites><testsuite name=\"s\">{cases}</testsuite></testsuites>")
    }

    #[test]
    fn reads_pytest() {
        let results = TestResults::parse_junit(PYTEST).unwrap();
        let class = "tests.test_sample";
        let expected: Vec<(String, TestOutcome)> = [
            ("test_passes", Passed),
            ("test_fails", Failed),
            ("test_fixture_error", Error),
            ("test_skipped", Skipped),
            ("test_even[1]", Failed),
            ("test_even[2]", Passed),
            ("test_even[3]", Failed),
            ("test_words[a b]", Passed),
            ("test_words[x::y]", Passed),
            ("test_words[<&>]", Passed),
            // pytest writes an xfail as skipped.
            ("test_expected_failure", Skipped),
            ("TestGroup::test_method", Passed),
            // An error in teardown is an <error> child of the test's own case.
            ("test_teardown_error", Error),
        ]
        .into_iter()
        .map(|(name, outcome)| match name.strip_prefix("TestGroup::") {
            Some(method) => (format!("{class}.TestGroup::{method}"), outcome),
            None => (format!("{class}::{name}"), outcome),
        })
        .collect();
        let got: Vec<(String, TestOutcome)> = ids_and_outcomes(&results)
            .into_iter()
            .map(|(id, outcome)| (id.to_owned(), outcome))
            .collect();
        assert_eq!(got, expected);
        assert_eq!(
            results.counts(),
            TestCounts {
                passed: 6,
                skipped: 2,
                failed: 3,
                error: 2
            }
        );
        assert_eq!(results.cases[0].duration_ms, 1);
        assert_eq!(
            results.outcome("tests.test_sample::test_even[3]"),
            Some(Failed)
        );
        // The id is the runner's classname and name, not pytest's node id.
        assert_eq!(results.outcome("tests/test_sample.py::test_passes"), None);
    }

    #[test]
    fn reads_pytest_xunit1_with_captured_output() {
        let results = TestResults::parse_junit(PYTEST_XUNIT1).unwrap();
        assert_eq!(
            ids_and_outcomes(&results),
            [
                ("tests.test_logging::test_prints", Passed),
                ("tests.test_logging::test_prints_and_fails", Failed),
            ]
        );
    }

    #[test]
    fn reads_node_test_runner() {
        let results = TestResults::parse_junit(NODE).unwrap();
        // node's reporter writes classname "test" for every test and no suite path, so tests
        // in nested describe blocks keep only their own name.
        assert_eq!(
            ids_and_outcomes(&results),
            [
                ("test::adds", Passed),
                ("test::fails", Failed),
                ("test::throws", Failed),
                ("test::skipped", Skipped),
                ("test::todo", Skipped),
                ("test::multiplies", Passed),
                ("test::divides", Failed),
            ]
        );
        // time="0.001316"
        assert_eq!(results.cases[0].duration_ms, 1);
    }

    #[test]
    fn reads_the_unittest_runner() {
        let results = TestResults::parse_junit(UNITTEST).unwrap();
        assert_eq!(
            ids_and_outcomes(&results),
            [
                ("unittest.loader._FailedTest::test_broken_import", Error),
                ("test_sample.Arithmetic::test_adds", Passed),
                ("test_sample.Arithmetic::test_expected_failure", Passed),
                ("test_sample.Arithmetic::test_fails", Failed),
                ("test_sample.Arithmetic::test_raises", Error),
                ("test_sample.Arithmetic::test_skipped", Skipped),
                ("test_sample.Arithmetic::test_subtests", Failed),
                ("test_sample.Arithmetic::test_subtests_pass", Passed),
                ("test_sample.Arithmetic::test_unexpected_success", Failed),
                ("setUpClass (test_sample.BrokenSetup)", Error),
            ]
        );
    }

    #[test]
    fn reads_unittest_xml_reporting() {
        let results = TestResults::parse_junit(XMLRUNNER).unwrap();
        // The same tests as the harness runner's: xmlrunner writes each failing subtest as a
        // case of its own and leaves out the test they belong to, writes an expected failure
        // as skipped and an unexpected success as an error.
        assert_eq!(
            ids_and_outcomes(&results),
            [
                ("test_sample.Arithmetic::test_adds", Passed),
                ("test_sample.Arithmetic::test_subtests_pass", Passed),
                ("test_sample.Arithmetic::test_fails", Failed),
                ("test_sample.Arithmetic::test_subtests (n=1)", Failed),
                ("test_sample.Arithmetic::test_subtests (n=3)", Failed),
                ("test_sample.Arithmetic::test_raises", Error),
                ("test_sample.Arithmetic::test_skipped", Skipped),
                ("test_sample.Arithmetic::test_expected_failure", Skipped),
                ("test_sample.Arithmetic::test_unexpected_success", Error),
                ("unittest.loader._FailedTest::test_broken_import", Error),
                ("setUpClass (test_sample.BrokenSetup)", Error),
            ]
        );
        assert_eq!(
            results.outcome("test_sample.Arithmetic::test_subtests"),
            None
        );
    }

    #[test]
    fn reads_a_bare_testsuite_root_nested_suites_and_the_worst_child() {
        let results = parse(
            "\u{feff}<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- a comment -->\n\
             <testsuite><properties><property name=\"a\" value=\"b\"/></properties>\
             <testsuite><testcase name=\"deep\" classname=\"\" time=\"2.5\">\
             <skipped/><failure>x</failure><system-out>&lt;&#x41;</system-out></testcase>\
             <testcase name=\"both\"><error/><failure/></testcase>\
             <testcase name=\"flaky\"><flakyFailure/><rerunFailure/></testcase>\
             </testsuite></testsuite>\n",
        )
        .unwrap();
        assert_eq!(
            results.cases,
            [
                TestCase {
                    id: "deep".into(),
                    outcome: Failed,
                    duration_ms: 2500
                },
                TestCase {
                    id: "both".into(),
                    outcome: Error,
                    duration_ms: 0
                },
                TestCase {
                    id: "flaky".into(),
                    outcome: Passed,
                    duration_ms: 0
                },
            ]
        );
    }

    #[test]
    fn zero_cases_is_a_valid_parse() {
        assert_eq!(parse("<testsuites/>").unwrap(), TestResults::default());
        assert_eq!(
            parse("<testsuites><testsuite name=\"empty\"/></testsuites>").unwrap(),
            TestResults::default()
        );
    }

    #[test]
    fn a_testcase_outside_a_suite_is_not_a_test() {
        let results = parse(&suite(
            "<properties><testcase name=\"hidden\"/></properties>\
             <testcase name=\"real\"><testcase name=\"inner\"/></testcase>",
        ))
        .unwrap();
        assert_eq!(ids_and_outcomes(&results), [("real", Passed)]);
    }

    #[test]
    fn ids_are_as_written_after_xml_decoding() {
        let results = parse(&suite(
            "<testcase classname=\"a.B\" name=\"t[x&amp;y]\"/>\
             <testcase classname=\"m\" name=\"&#x3C;&#955;&gt;\"/>\
             <testcase name=\"tab\tand\nline\"/>\
             <testcase classname=\"  \" name=\" spaced \"/>",
        ))
        .unwrap();
        assert_eq!(
            results
                .cases
                .iter()
                .map(|case| case.id.as_str())
                .collect::<Vec<_>>(),
            ["a.B::t[x&y]", "m::<λ>", "tab and line", "  :: spaced "]
        );
    }

    #[test]
    fn durations_never_panic() {
        for (time, millis) in [
            ("2.5", 2500),
            (" 0.25 ", 250),
            ("", 0),
            ("abc", 0),
            ("-5", 0),
            ("NaN", 0),
            ("inf", 0),
            ("-inf", 0),
            ("1e400", 0),
            ("1e300", MAX_DURATION_MS),
            ("9007199254741", MAX_DURATION_MS),
            ("9007199254740", 9_007_199_254_740_000),
            ("1,5", 0),
        ] {
            let results = parse(&suite(&format!("<testcase name=\"t\" time=\"{time}\"/>")))
                .unwrap_or_else(|error| panic!("{time}: {error}"));
            assert_eq!(results.cases[0].duration_ms, millis, "time {time:?}");
        }
        let missing = parse(&suite("<testcase name=\"t\"/>")).unwrap();
        assert_eq!(missing.cases[0].duration_ms, 0);
    }

    #[test]
    fn refuses_a_file_over_the_limit_before_parsing() {
        let mut bytes = vec![b' '; MAX_RESULTS_BYTES as usize + 1];
        bytes[..13].copy_from_slice(b"<testsuites/>");
        let error = TestResults::parse_junit(&bytes).unwrap_err();
        assert_eq!(
            error,
            ResultsError::TooLarge {
                size: MAX_RESULTS_BYTES + 1,
                limit: MAX_RESULTS_BYTES
            }
        );
        assert_eq!(error.code(), "too-large");
        bytes.truncate(MAX_RESULTS_BYTES as usize);
        assert_eq!(
            TestResults::parse_junit(&bytes).unwrap(),
            TestResults::default()
        );
    }

    #[test]
    fn refuses_invalid_utf8_and_other_encodings() {
        let error = TestResults::parse_junit(b"<testsuites>\xff</testsuites>").unwrap_err();
        assert_eq!(error, ResultsError::NotUtf8 { position: 12 });
        assert_eq!(error.code(), "not-utf8");
        assert_eq!(
            code("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><testsuites/>"),
            "other-encoding"
        );
        // UTF-16 with its byte order mark is not UTF-8 at all.
        assert_eq!(
            TestResults::parse_junit(b"\xff\xfe<\0t\0")
                .unwrap_err()
                .code(),
            "not-utf8"
        );
        assert!(parse("<?xml version=\"1.0\" encoding=\"us-ascii\"?><testsuites/>").is_ok());
    }

    #[test]
    fn refuses_a_doctype_and_so_the_billion_laughs() {
        let laughs = "<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n\
             <!ENTITY lol \"lol\">\n\
             <!ENTITY lol2 \"&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;\">\n\
             <!ENTITY lol3 \"&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;\">\n\
             ]>\n<testsuites><testcase name=\"&lol3;\"/></testsuites>";
        let error = parse(laughs).unwrap_err();
        assert_eq!(error.code(), "malformed", "{error}");
        assert!(error.to_string().contains("DOCTYPE"), "{error}");
        assert_eq!(
            code("<!DOCTYPE testsuites SYSTEM \"file:///etc/passwd\"><testsuites/>"),
            "malformed"
        );
    }

    #[test]
    fn refuses_unknown_entities_anywhere() {
        assert_eq!(code(&suite("<testcase name=\"&nbsp;\"/>")), "malformed");
        // In an attribute sf does not read, and in text it ignores.
        assert_eq!(
            code(&suite("<testcase name=\"t\" message=\"&x;\"/>")),
            "malformed"
        );
        assert_eq!(
            code(&suite(
                "<testcase name=\"t\"><failure>&secret;</failure></testcase>"
            )),
            "malformed"
        );
        assert_eq!(code(&suite("<testcase name=\"a & b\"/>")), "malformed");
        assert_eq!(code(&suite("<testcase name=\"t\"/>&amp")), "malformed");
        // The five predefined entities and character references are read.
        assert!(
            parse(&suite(
                "<testcase name=\"t\"><failure>&lt;&gt;&amp;&apos;&quot;&#65;&#x42;</failure>\
                 </testcase>"
            ))
            .is_ok()
        );
    }

    #[test]
    fn refuses_deep_nesting_without_recursion() {
        let depth = 10_000;
        let deep = format!(
            "<testsuites>{}{}</testsuites>",
            "<x>".repeat(depth),
            "</x>".repeat(depth)
        );
        let error = parse(&deep).unwrap_err();
        assert_eq!(
            error,
            ResultsError::TooDeep {
                position: 12 + 3 * (MAX_DEPTH as u64 - 1),
                limit: MAX_DEPTH
            }
        );
        assert_eq!(error.code(), "too-deep");
        let nested_suites = format!(
            "{}{}",
            "<testsuite>".repeat(depth),
            "</testsuite>".repeat(depth)
        );
        assert_eq!(code(&nested_suites), "too-deep");
        // Exactly the limit is read.
        let at_limit = format!(
            "<testsuites>{}{}</testsuites>",
            "<x>".repeat(MAX_DEPTH - 1),
            "</x>".repeat(MAX_DEPTH - 1)
        );
        assert!(parse(&at_limit).is_ok());
        let empty_past_limit = format!(
            "<testsuites>{}<x/>{}</testsuites>",
            "<x>".repeat(MAX_DEPTH - 1),
            "</x>".repeat(MAX_DEPTH - 1)
        );
        assert_eq!(code(&empty_past_limit), "too-deep");
    }

    #[test]
    fn refuses_every_truncation_of_a_real_file() {
        let text = std::str::from_utf8(PYTEST).unwrap();
        let end = text.rfind("</testsuites>").unwrap() + "</testsuites>".len();
        for cut in (0..end).filter(|&cut| text.is_char_boundary(cut)) {
            let error = parse(&text[..cut]).expect_err(&format!("cut at {cut}"));
            assert_eq!(error.code(), "malformed", "cut at {cut}: {error}");
        }
        assert!(parse(&text[..end]).is_ok());
    }

    #[test]
    fn refuses_what_is_not_well_formed_or_not_junit() {
        for text in [
            "",
            "   ",
            "<testsuites>",
            "<testsuites></testsuite>",
            "<testsuites/><testsuites/>",
            "<testsuites/>trailing",
            "leading<testsuites/>",
            "<testsuites/><![CDATA[x]]>",
            "<testsuites><testcase name=\"a\" name=\"b\"/></testsuites>",
            "<testsuites><testcase name=a/></testsuites>",
            "<testsuites><!-- a -- b --></testsuites>",
            "<testsuites/><?xml version=\"1.0\"?>",
            "<?xml version=\"2.0\"?><testsuites/>",
            "</testsuites>",
        ] {
            assert_eq!(code(text), "malformed", "{text:?}");
        }
        let error = parse("<html><testsuite/></html>").unwrap_err();
        assert_eq!(
            error,
            ResultsError::NotJunit {
                position: 0,
                root: "html".into()
            }
        );
        assert_eq!(error.code(), "not-junit");
        assert_eq!(
            code("<?xml version=\"1.0\"?>\n<testcase name=\"t\"/>"),
            "not-junit"
        );
    }

    #[test]
    fn refuses_invalid_ids() {
        assert_eq!(code(&suite("<testcase name=\"t&#0;\"/>")), "malformed");
        for case in [
            "<testcase name=\"t&#1;\"/>",
            "<testcase name=\"t&#9;\"/>",
            "<testcase name=\"t&#10;\"/>",
            "<testcase name=\"t&#x7f;\"/>",
            "<testcase name=\"t&#x9b;\"/>",
            "<testcase name=\"t\u{1}\"/>",
            "<testcase classname=\"c&#27;\" name=\"t\"/>",
        ] {
            let error = parse(&suite(case)).expect_err(case);
            assert_eq!(error.code(), "id-invalid", "{case}: {error}");
        }
        let error = parse(&suite("<testcase classname=\"c\"/>")).unwrap_err();
        assert_eq!(error, ResultsError::MissingName { position: 32 });
        assert_eq!(error.code(), "missing-name");
        assert_eq!(
            code(&suite("<testcase classname=\"c\" name=\"\"/>")),
            "missing-name"
        );
        let longest = "n".repeat(MAX_TEST_ID_BYTES);
        assert!(parse(&suite(&format!("<testcase name=\"{longest}\"/>"))).is_ok());
        let error = parse(&suite(&format!("<testcase name=\"{longest}n\"/>"))).unwrap_err();
        assert_eq!(error.code(), "id-too-long");
        // The limit is on the id, classname and separator included.
        let half = "n".repeat(MAX_TEST_ID_BYTES / 2);
        assert_eq!(
            code(&suite(&format!(
                "<testcase classname=\"{half}\" name=\"{half}\"/>"
            ))),
            "id-too-long"
        );
    }

    #[test]
    fn refuses_more_than_the_most_test_cases() {
        let most = suite(&"<testcase name=\"t\"/>".repeat(MAX_TEST_CASES));
        assert_eq!(parse(&most).unwrap().cases.len(), MAX_TEST_CASES);
        let one_more = suite(&"<testcase name=\"t\"/>".repeat(MAX_TEST_CASES + 1));
        let error = parse(&one_more).unwrap_err();
        assert!(
            matches!(
                error,
                ResultsError::TooManyCases {
                    limit: MAX_TEST_CASES,
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(error.code(), "too-many-cases");
    }

    #[test]
    fn errors_repeat_little_of_the_file_and_nothing_a_terminal_acts_on() {
        let root = format!("x\u{1b}[2J{}", "y".repeat(10_000));
        let error = parse(&format!("<{root}/>")).unwrap_err();
        let ResultsError::NotJunit { root: shown, .. } = &error else {
            panic!("{error}");
        };
        assert!(shown.len() < 100 && !shown.contains('\u{1b}'), "{shown}");
        let mismatched = format!("<testsuites></{root}>");
        let error = parse(&mismatched).unwrap_err();
        let message = error.to_string();
        assert!(
            message.len() < 600 && !message.contains('\u{1b}'),
            "{message}"
        );
    }

    /// A small seeded generator (xorshift64*), for mutations that are the same every run.
    struct Mutations(u64);

    impl Mutations {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, bound: usize) -> usize {
            (self.next() % bound.max(1) as u64) as usize
        }
    }

    #[test]
    fn random_mutations_of_real_files_never_panic() {
        const INTERESTING: &[&[u8]] = &[
            b"<",
            b">",
            b"/>",
            b"&",
            b";",
            b"\"",
            b"<testcase name=\"x\">",
            b"</testcase>",
            b"<failure/>",
            b"<!DOCTYPE a>",
            b"&#0;",
            b"&#x10FFFF;",
            b"\xff",
            b"\xc3",
            b"\0",
            b"]]>",
            b"<![CDATA[",
            b"<!--",
            b"-->",
            b"<?",
            b"?>",
            b"&lt;",
            b"time=\"1e999\"",
        ];
        let mut random = Mutations(0x5eed_1234_abcd_ef01);
        let fixtures = [PYTEST, NODE, UNITTEST, XMLRUNNER, PYTEST_XUNIT1];
        let mut parsed = 0;
        for _ in 0..4000 {
            let mut bytes = fixtures[random.below(fixtures.len())].to_vec();
            for _ in 0..=random.below(4) {
                let at = random.below(bytes.len() + 1);
                match random.below(5) {
                    0 if at < bytes.len() => bytes[at] = random.next() as u8,
                    1 if at < bytes.len() => {
                        let end = (at + random.below(64)).min(bytes.len());
                        bytes.drain(at..end);
                    }
                    2 => {
                        let piece = INTERESTING[random.below(INTERESTING.len())];
                        bytes.splice(at..at, piece.iter().copied());
                    }
                    3 => {
                        let end = (at + random.below(256)).min(bytes.len());
                        let copy = bytes[at..end].to_vec();
                        let to = random.below(bytes.len() + 1);
                        bytes.splice(to..to, copy);
                    }
                    _ => bytes.truncate(at),
                }
            }
            if let Ok(results) = TestResults::parse_junit(&bytes) {
                parsed += 1;
                assert!(results.cases.len() <= MAX_TEST_CASES);
                for case in &results.cases {
                    assert_eq!(id_fault(&case.id), None, "{:?}", case.id);
                }
            }
        }
        // Some mutations keep the file well-formed, so both paths run.
        assert!(parsed > 0);
    }

    fn results(cases: &[(&str, TestOutcome)]) -> Result<TestResults, ResultsError> {
        Ok(TestResults {
            cases: cases
                .iter()
                .map(|&(id, outcome)| TestCase {
                    id: id.into(),
                    outcome,
                    duration_ms: 0,
                })
                .collect(),
        })
    }

    fn expectation(fail_to_pass: &[&str], pass_to_pass: &[&str]) -> TestExpectation {
        TestExpectation {
            fail_to_pass: fail_to_pass.iter().map(|&id| id.into()).collect(),
            pass_to_pass: pass_to_pass.iter().map(|&id| id.into()).collect(),
        }
    }

    fn miss(id: &str, list: TestList, wanted: &'static str, seen: Option<TestOutcome>) -> TestMiss {
        TestMiss {
            id: id.into(),
            list,
            wanted,
            seen,
        }
    }

    fn missed(misses: Vec<TestMiss>) -> TestGrade {
        TestGrade::Missed {
            misses,
            disagreement: None,
        }
    }

    #[test]
    fn base_wants_fail_to_pass_broken_and_pass_to_pass_passing() {
        let want = expectation(&["f1", "f2"], &["p"]);
        let run = results(&[("f1", Failed), ("f2", Error), ("p", Passed)]);
        assert_eq!(grade(true, Some(1), Some(&run), &want), TestGrade::Met);

        let run = results(&[("f1", Passed), ("f2", Skipped), ("p", Failed)]);
        assert_eq!(
            grade(true, Some(1), Some(&run), &want),
            missed(vec![
                miss("f1", TestList::FailToPass, "fail or error", Some(Passed)),
                miss("f2", TestList::FailToPass, "fail or error", Some(Skipped)),
                miss("p", TestList::PassToPass, "pass", Some(Failed)),
            ])
        );
    }

    #[test]
    fn candidate_wants_every_listed_test_passing() {
        let want = expectation(&["f"], &["p"]);
        let run = results(&[("f", Passed), ("p", Passed)]);
        assert_eq!(grade(false, Some(0), Some(&run), &want), TestGrade::Met);

        let run = results(&[("f", Failed), ("p", Passed)]);
        assert_eq!(
            grade(false, Some(1), Some(&run), &want),
            missed(vec![miss("f", TestList::FailToPass, "pass", Some(Failed))])
        );
        let run = results(&[("f", Skipped), ("p", Passed)]);
        assert_eq!(
            grade(false, Some(0), Some(&run), &want),
            missed(vec![miss("f", TestList::FailToPass, "pass", Some(Skipped))])
        );
    }

    #[test]
    fn a_listed_test_missing_from_the_results_is_a_miss() {
        let want = expectation(&["f"], &["p"]);
        let run = results(&[("f", Passed), ("other", Passed)]);
        let grade = grade(false, Some(0), Some(&run), &want);
        assert_eq!(
            grade,
            missed(vec![miss("p", TestList::PassToPass, "pass", None)])
        );
        let TestGrade::Missed { misses, .. } = grade else {
            unreachable!()
        };
        assert_eq!(
            misses[0].to_string(),
            "passToPass test p: expected pass, was not in the results"
        );
        // On the base too: an absent failToPass test did not show the defect.
        let run = results(&[("p", Passed)]);
        assert_eq!(
            grade_base(&run, &want),
            missed(vec![miss("f", TestList::FailToPass, "fail or error", None)])
        );
    }

    fn grade_base(run: &Result<TestResults, ResultsError>, want: &TestExpectation) -> TestGrade {
        grade(true, Some(1), Some(run), want)
    }

    #[test]
    fn a_duplicate_cannot_turn_a_failure_into_a_pass() {
        let run = results(&[("t", Failed), ("t", Passed)]);
        assert_eq!(run.as_ref().unwrap().outcome("t"), Some(Failed));
        let run_reversed = results(&[("t", Passed), ("t", Failed)]);
        for run in [run, run_reversed] {
            assert_eq!(
                grade(false, Some(1), Some(&run), &expectation(&[], &["t"])),
                missed(vec![miss("t", TestList::PassToPass, "pass", Some(Failed))])
            );
        }
        let errored = results(&[("t", Error), ("t", Failed), ("t", Skipped)]);
        assert_eq!(errored.unwrap().outcome("t"), Some(Error));
    }

    #[test]
    fn exit_zero_with_a_failure_listed_disagrees() {
        let want = expectation(&["f"], &["p"]);
        // The failing test is in neither list, and every listed test passed.
        let run = results(&[("f", Passed), ("p", Passed), ("unlisted", Failed)]);
        let TestGrade::Missed {
            misses,
            disagreement,
        } = grade(false, Some(0), Some(&run), &want)
        else {
            panic!("an exit of 0 with a failed test must not be met");
        };
        assert!(misses.is_empty());
        let disagreement = disagreement.unwrap();
        assert!(disagreement.contains("unlisted"), "{disagreement}");
        // An errored test too, and on the base stage.
        let run = results(&[("f", Error), ("p", Passed)]);
        assert!(matches!(
            grade(true, Some(0), Some(&run), &want),
            TestGrade::Missed {
                disagreement: Some(_),
                ..
            }
        ));
        // A non-zero exit, or none, needs no agreement here.
        let run = results(&[("f", Passed), ("p", Passed), ("unlisted", Failed)]);
        assert_eq!(grade(false, Some(1), Some(&run), &want), TestGrade::Met);
        assert_eq!(grade(false, None, Some(&run), &want), TestGrade::Met);
        // Nor does a non-zero exit where every test passed (the exit code grades that).
        let run = results(&[("f", Passed), ("p", Passed)]);
        assert_eq!(grade(false, Some(1), Some(&run), &want), TestGrade::Met);
    }

    #[test]
    fn an_extra_test_in_neither_list_changes_nothing() {
        let want = expectation(&["f"], &[]);
        let run = results(&[("f", Passed), ("extra", Passed), ("skipped", Skipped)]);
        assert_eq!(grade(false, Some(0), Some(&run), &want), TestGrade::Met);
        let run = results(&[("f", Failed), ("extra", Passed)]);
        assert_eq!(grade(true, Some(1), Some(&run), &want), TestGrade::Met);
    }

    #[test]
    fn results_that_cannot_decide_are_undecided() {
        let want = expectation(&["f"], &[]);
        assert_eq!(
            grade(false, Some(0), None, &want),
            TestGrade::Undecided("the run wrote no results file".into())
        );
        assert_eq!(
            grade(false, Some(0), Some(&results(&[])), &want),
            TestGrade::Undecided("zero tests were collected".into())
        );
        let broken = TestResults::parse_junit(b"<testsuites>");
        let TestGrade::Undecided(why) = grade(false, Some(0), Some(&broken), &want) else {
            panic!("a parse error must be undecided");
        };
        assert!(why.contains("malformed"), "{why}");
    }

    #[test]
    fn misses_follow_the_lists_order() {
        let want = expectation(&["f2", "f1"], &["p2", "p1"]);
        let run = results(&[("p1", Failed), ("f1", Skipped)]);
        let TestGrade::Missed { misses, .. } = grade(false, Some(1), Some(&run), &want) else {
            panic!();
        };
        let order: Vec<&str> = misses.iter().map(|miss| miss.id.as_str()).collect();
        assert_eq!(order, ["f2", "f1", "p2", "p1"]);
        assert_eq!(
            misses[1].to_string(),
            "failToPass test f1: expected pass, was skipped"
        );
    }

    #[test]
    fn grades_real_pytest_results() {
        let run = TestResults::parse_junit(PYTEST);
        let want = expectation(
            &[
                "tests.test_sample::test_fails",
                "tests.test_sample::test_fixture_error",
            ],
            &["tests.test_sample::test_passes"],
        );
        assert_eq!(grade(true, Some(1), Some(&run), &want), TestGrade::Met);
        assert_eq!(
            grade(false, Some(1), Some(&run), &want),
            missed(vec![
                miss(
                    "tests.test_sample::test_fails",
                    TestList::FailToPass,
                    "pass",
                    Some(Failed)
                ),
                miss(
                    "tests.test_sample::test_fixture_error",
                    TestList::FailToPass,
                    "pass",
                    Some(Error)
                ),
            ])
        );
    }

    #[test]
    fn expectation_check() {
        assert!(expectation(&["a"], &["b"]).check().is_ok());
        assert!(expectation(&[], &["b"]).check().is_ok());
        assert!(TestExpectation::default().is_empty());
        assert!(!expectation(&["a"], &[]).is_empty());
        let refused = |want: TestExpectation| want.check().unwrap_err();
        assert!(refused(TestExpectation::default()).contains("at least one"));
        assert!(refused(expectation(&["a"], &["a"])).starts_with("passToPass[0]"));
        assert!(refused(expectation(&["a", "b", "a"], &[])).starts_with("failToPass[2]"));
        assert!(refused(expectation(&[""], &[])).contains("empty"));
        assert!(refused(expectation(&["a", "b\nc"], &[])).starts_with("failToPass[1]"));
        let long = "x".repeat(MAX_TEST_ID_BYTES + 1);
        assert!(refused(expectation(&[], &[&long])).contains("bytes"));
        let many: Vec<String> = (0..=MAX_TEST_CASES).map(|n| format!("t{n}")).collect();
        let too_many = TestExpectation {
            fail_to_pass: many,
            pass_to_pass: Vec::new(),
        };
        assert!(refused(too_many).contains("at most"));
    }

    #[test]
    fn records_round_trip_through_serde() {
        let results = TestResults::parse_junit(PYTEST).unwrap();
        let json = serde_json::to_string(&results).unwrap();
        assert!(json.contains("\"durationMs\":1"), "{json}");
        assert!(json.contains("\"outcome\":\"error\""), "{json}");
        assert_eq!(serde_json::from_str::<TestResults>(&json).unwrap(), results);
        let want: TestExpectation =
            serde_json::from_str(r#"{"failToPass":["a"],"passToPass":["b"]}"#).unwrap();
        assert_eq!(want, expectation(&["a"], &["b"]));
        assert!(serde_json::from_str::<TestExpectation>(r#"{"failToPass":[],"x":1}"#).is_err());
    }
}
