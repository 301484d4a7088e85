//! The Slices of the real test suite the tests share: python/typing_extensions at three fix
//! commits (its standard-library `unittest` suite run by the trusted JUnit runner in the
//! Slice's harness as a command check), the base each fix's parent, the fix's test changes
//! laid over both trees.

#![allow(dead_code)]

use crate::land_support::{Work, show, write};

/// The trusted runner: a stdlib unittest runner that writes JUnit XML.
pub const RUNNER: &str = include_str!("../../../docs/examples/harness/sf_unittest_junit.py");

/// A fix commit of python/typing_extensions and the tests it makes pass (found by running
/// the module on the parent with the fix's tests, and on the fix).
pub struct Fix {
    pub commit: &'static str,
    pub fail_to_pass: &'static [&'static str],
}

pub const FIXES: &[Fix] = &[
    Fix {
        commit: "364c9e0",
        fail_to_pass: &[
            "test_typing_extensions.TypedDictTests::test_keys_inheritance_with_same_name",
            "test_typing_extensions.TypedDictTests::test_multiple_inheritance_with_same_key",
        ],
    },
    Fix {
        commit: "2f06414",
        fail_to_pass: &["test_typing_extensions.TypeAliasTypeTests::test_cannot_set_attributes"],
    },
    Fix {
        commit: "7b79d4a",
        fail_to_pass: &["test_typing_extensions.ProtocolTests::test_builtin_protocol_allowlist"],
    },
];

/// Tests that pass before and after every fix above.
pub const PASS_TO_PASS: &[&str] = &[
    "test_typing_extensions.AllTests::test_all_names_in___all__",
    "test_typing_extensions.TypedDictTests::test_annotations",
];

pub const SOURCE: &str = "src/typing_extensions.py";
pub const TESTS: &str = "src/test_typing_extensions.py";

/// A working directory whose repository's base is the parent of `fix`, and the Slice of the
/// fix frozen in `slice/`. Returns the work and the parent's source.
pub fn slice_for(fix: &Fix) -> (Work, String) {
    slice_forbidding(fix, &[])
}

/// [`slice_for`], with a Slice forbidding `forbidden` constructs.
pub fn slice_forbidding(fix: &Fix, forbidden: &[&str]) -> (Work, String) {
    slice_configured(fix, forbidden, None)
}

/// [`slice_forbidding`], the Slice frozen under the sf.toml `config` (written as `sf.toml`
/// in the working directory) when one is given.
pub fn slice_configured(fix: &Fix, forbidden: &[&str], config: Option<&str>) -> (Work, String) {
    let mut clone = None;
    let work = Work::from_git(
        |dir| {
            let (path, _) = sf_tests::clone_fixture(dir, "typing_extensions.bundle");
            clone = Some(path.clone());
            path.file_name().unwrap().to_str().unwrap().to_owned()
        },
        &format!("{}^", fix.commit),
    );
    let clone = clone.unwrap();
    let show = |rev: &str, path: &str| show(&clone, rev, path);
    let slice = work.dir.join("slice");
    write(
        &slice.join("slice.json"),
        &serde_json::json!({
            "id": format!("fix-{}", fix.commit),
            "revision": 1,
            "scope": [SOURCE],
            // The test module sits beside the source: its directory is closed to proposals,
            // and the Slice opens the one file a fix edits.
            "open": [SOURCE],
            "protected": [TESTS],
            "forbidden": forbidden,
        })
        .to_string(),
    );
    write(&slice.join("overlay").join(TESTS), &show(fix.commit, TESTS));
    write(&slice.join("harness/sf_unittest_junit.py"), RUNNER);
    write(&slice.join("inputs/none/README"), "no input\n");
    write(
        &slice.join("recipe.json"),
        r#"{"timeoutMs":300000,"outputLimit":1048576}"#,
    );
    let check = |id: &str, phase: &str, stage: &str, exit: i32| {
        serde_json::json!({
            "kind": "command", "id": id, "phase": phase, "stage": stage,
            "argv": ["python3", "/sf/harness/sf_unittest_junit.py",
                     "--out", "/sf/scratch/results.xml", "test_typing_extensions"],
            "cwd": {"from": "tree", "path": "src"},
            "env": {"PYTHONDONTWRITEBYTECODE": "1"},
            "environment": null,
            "results": {"junit": "results.xml", "maxBytes": 4194304},
            "input": "none",
            "expectation": {"exitCode": exit, "stdoutDigest": null,
                            "failToPass": fix.fail_to_pass, "passToPass": PASS_TO_PASS},
        })
    };
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [
                check("tests-fail-on-base", "before", "base", 1),
                check("tests-pass-on-candidate", "after", "candidate", 0),
            ],
        })
        .to_string(),
    );
    match config {
        Some(config) => {
            write(&work.dir.join("sf.toml"), config);
            work.freeze_configured("slice", "sf.toml").result();
        }
        None => {
            work.freeze("slice").result();
        }
    }
    let parent = show(&format!("{}^", fix.commit), SOURCE);
    let fixed = show(fix.commit, SOURCE);
    write(&work.dir.join("fixed.py"), &fixed);
    (work, parent)
}
