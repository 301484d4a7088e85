#!/usr/bin/env python3
"""Runs Python unittest tests and writes their per-test results as JUnit XML.

A Slice puts this file in its harness and a check runs it as

    python3 /sf/harness/sf_unittest_junit.py --out /sf/scratch/results.xml [ARGS]

where ARGS are what `python -m unittest` takes: test names (modules, classes,
methods, or file paths) or `discover -s DIR -t DIR -p PATTERN`, and the usual
options (-v, -q, -f, -b, -k, ...). With no ARGS it discovers, as unittest does.

Each test is one <testcase> whose classname is the test's class
(`module.Class`) and whose name is the test method, so sf's id for it is
`module.Class::test_method`. Errors outside a test (setUpClass, setUpModule,
tearDownClass, tearDownModule) are <error> test cases named by unittest's own
description of them (`setUpClass (module.Class)`, with an empty classname); a
module that cannot be imported is unittest's `_FailedTest` case
(`unittest.loader._FailedTest::module`). A failing subtest fails its test;
a subtest that raises errors it. Skips are <skipped>, expected failures pass
and unexpected successes fail.

The file is written once the run ends, failed tests or not, atomically (a
temporary file in the same directory, then os.replace), so a reader never sees
half a file. The exit status is 0 if every test passed and 1 otherwise, as
unittest's; a usage error exits 2 and writes nothing.

Standard library only; Python 3.8 or later.
"""

import os
import sys
import tempfile
import time
import traceback
import unicodedata
import unittest
from xml.sax.saxutils import escape as _xml_escape

USAGE = (
    "usage: sf_unittest_junit.py --out RESULTS.xml [python -m unittest arguments]\n"
)

# How one test ended, worst last: a test recorded several times (subtests, a
# failing tearDown after a failure) keeps the worst.
PASSED, SKIPPED, FAILED, ERROR = "passed", "skipped", "failed", "error"
_RANK = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3}

# A message attribute is a hint for a person; the traceback is on stderr. Kept
# short so that a large suite's results stay far below sf's size limit.
MAX_MESSAGE_CHARS = 256


class _Record:
    __slots__ = ("classname", "name", "outcome", "message", "started", "seconds")

    def __init__(self, classname, name):
        self.classname = classname
        self.name = name
        self.outcome = None
        self.message = ""
        self.started = None
        self.seconds = 0.0

    def note(self, outcome, message=""):
        if self.outcome is None or _RANK[outcome] > _RANK[self.outcome]:
            self.outcome = outcome
            self.message = message


def _names(test):
    """The (classname, name) a test is written as."""
    error_holder = getattr(unittest.suite, "_ErrorHolder", None)
    if error_holder is not None and isinstance(test, error_holder):
        # unittest names an error outside any test by a description such as
        # "setUpClass (module.Class)", whose dots are not a class path.
        return "", test.id()
    method = getattr(test, "_testMethodName", None)
    test_id = test.id()
    if isinstance(method, str) and test_id.endswith("." + method):
        return test_id[: -len(method) - 1], method
    classname, dot, name = test_id.rpartition(".")
    return (classname, name) if dot else ("", test_id)


def _owner(test):
    """The test a subtest belongs to; a test is its own."""
    subtest = getattr(unittest.case, "_SubTest", None)
    if subtest is not None and isinstance(test, subtest):
        return test.test_case
    return test


def _message(err):
    kind, value = err[0], err[1]
    try:
        lines = "".join(traceback.format_exception_only(kind, value)).splitlines()
        text = lines[0].strip() if lines else kind.__name__
    except Exception:  # a broken __str__ must not lose the result
        text = getattr(kind, "__name__", "error")
    return text[:MAX_MESSAGE_CHARS]


class JUnitResult(unittest.TextTestResult):
    """Records every test's outcome, in the order tests first appear."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = {}

    def _record(self, test):
        # By id: a test listed twice is one test case, keeping its worse outcome.
        names = _names(_owner(test))
        record = self.records.get(names)
        if record is None:
            record = self.records[names] = _Record(*names)
        return record

    def startTest(self, test):
        super().startTest(test)
        self._record(test).started = time.perf_counter()

    def stopTest(self, test):
        super().stopTest(test)
        record = self._record(test)
        if record.started is not None:
            record.seconds += time.perf_counter() - record.started
            record.started = None
        if record.outcome is None:
            # unittest reports every test it runs; one that reported nothing
            # cannot be counted as a pass.
            record.note(ERROR, "the test reported no outcome")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test).note(PASSED)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test).note(FAILED, _message(err))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test).note(ERROR, _message(err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test).note(SKIPPED, str(reason)[:MAX_MESSAGE_CHARS])

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test).note(PASSED)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test).note(FAILED, "unexpected success")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        record = self._record(test)
        if err is None:
            return
        if issubclass(err[0], test.failureException):
            record.note(FAILED, _message(err))
        else:
            record.note(ERROR, _message(err))


class JUnitRunner(unittest.TextTestRunner):
    """unittest's text runner, reporting through JUnitResult."""

    resultclass = JUnitResult


class JUnitLoader(unittest.TestLoader):
    """unittest's loader, except that a named module whose import raises
    something other than ImportError becomes a failed test, as an ImportError
    does, instead of ending the run without results."""

    def loadTestsFromName(self, name, module=None):
        try:
            return super().loadTestsFromName(name, module)
        except Exception as error:
            failed_test = getattr(unittest.loader, "_FailedTest", None)
            if failed_test is None:
                raise
            traceback.print_exc()
            return self.suiteClass((failed_test(name, error),))


def _text(value):
    """`value` as XML 1.0 can hold it: control characters and code points XML
    cannot carry are written as backslash escapes, so that no id sf reads holds
    a control character and the file always parses."""
    out = []
    for char in value:
        code = ord(char)
        if (
            unicodedata.category(char) in ("Cc", "Cs")
            or code in (0xFFFE, 0xFFFF)
        ):
            out.append("\\x%02x" % code if code < 0x100 else "\\u%04x" % code)
        else:
            out.append(char)
    return "".join(out)


def _attribute(value):
    return '"' + _xml_escape(_text(value), {'"': "&quot;"}) + '"'


def junit_xml(records, seconds):
    """The JUnit document for `records`, as bytes."""
    counts = {PASSED: 0, SKIPPED: 0, FAILED: 0, ERROR: 0}
    for record in records:
        counts[record.outcome] += 1
    lines = [
        '<?xml version="1.0" encoding="utf-8"?>',
        "<testsuites>",
        '  <testsuite name="unittest" tests="%d" failures="%d" errors="%d" '
        'skipped="%d" time="%.3f">'
        % (
            len(records),
            counts[FAILED],
            counts[ERROR],
            counts[SKIPPED],
            seconds,
        ),
    ]
    for record in records:
        head = "    <testcase classname=%s name=%s time=\"%.3f\"" % (
            _attribute(record.classname),
            _attribute(record.name),
            max(record.seconds, 0.0),
        )
        if record.outcome == PASSED:
            lines.append(head + "/>")
            continue
        element = {SKIPPED: "skipped", FAILED: "failure", ERROR: "error"}[
            record.outcome
        ]
        lines.append(head + ">")
        lines.append("      <%s message=%s/>" % (element, _attribute(record.message)))
        lines.append("    </testcase>")
    lines.append("  </testsuite>")
    lines.append("</testsuites>")
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_atomically(path, data):
    """Writes `data` to `path` through a temporary file beside it, so that the
    path holds either nothing or the whole document."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(
        dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise


def split_arguments(argv):
    """(results path, unittest arguments) from our command line, or None."""
    out = None
    rest = []
    index = 0
    while index < len(argv):
        argument = argv[index]
        if out is None and argument == "--out" and index + 1 < len(argv):
            out = argv[index + 1]
            index += 2
            continue
        if out is None and argument.startswith("--out="):
            out = argument[len("--out="):]
            index += 1
            continue
        rest.append(argument)
        index += 1
    if not out:
        return None
    return out, rest


def main(argv):
    parsed = split_arguments(argv)
    if parsed is None:
        sys.stderr.write(USAGE)
        return 2
    out, rest = parsed
    # `python -m unittest` imports tests from the working directory; a script's
    # own directory (the harness) is first on the path instead.
    script_directory = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == script_directory:
        sys.path[0] = os.getcwd()
    started = time.perf_counter()
    program = unittest.main(
        module=None,
        argv=["python -m unittest"] + rest,
        testRunner=JUnitRunner,
        testLoader=JUnitLoader(),
        exit=False,
    )
    result = program.result
    records = list(result.records.values())
    write_atomically(out, junit_xml(records, time.perf_counter() - started))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
