//! A small Node project the tests share: `lib/greet.js`, which does not shout yet, in a Git
//! repository; a `node_modules` environment holding the package `shout` its fix requires;
//! and a Slice that runs the fix's `test/greet.test.js` (laid over both trees) with `node
//! --test`, graded on Node's JUnit results.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use crate::land_support::{Public, Work, write};

pub const PACKAGE_JSON: &str = "{\"name\":\"greeter\",\"private\":true}\n";
pub const GREET_BUGGY: &str = "module.exports = (name) => 'hello ' + name;\n";
pub const GREET_FIXED: &str =
    "const shout = require('shout');\nmodule.exports = (name) => shout('hello ' + name);\n";
pub const GREET_TEST: &str = "const test = require('node:test');\n\
const assert = require('node:assert');\n\
const greet = require('../lib/greet');\n\
test('greets loudly', () => { assert.strictEqual(greet('ada'), 'HELLO ADA!'); });\n\
test('keeps the name', () => { assert.match(greet('ada'), /ada/i); });\n";

/// The project, in a Git repository `node` in `dir`; its name.
pub fn node_project(dir: &Path) -> String {
    let source = dir.join("node");
    std::fs::create_dir(&source).unwrap();
    write(&source.join("package.json"), PACKAGE_JSON);
    write(&source.join("lib/greet.js"), GREET_BUGGY);
    let run = |args: &[&str]| sf_tests::plain_git(&source, args, &[]);
    run(&["init", "-q"]);
    run(&["add", "-A"]);
    run(&["commit", "-q", "-m", "greet"]);
    "node".into()
}

/// A `node_modules` environment holding the package `shout`, in `public`.
pub fn node_modules(public: &Public) -> PathBuf {
    let env = public.path().join("node-env");
    write(
        &env.join("node_modules/shout/package.json"),
        "{\"name\":\"shout\",\"version\":\"1.0.0\",\"main\":\"index.js\"}\n",
    );
    write(
        &env.join("node_modules/shout/index.js"),
        "module.exports = (text) => text.toUpperCase() + '!';\n",
    );
    env
}

/// A work on the project with the environment added as `node-deps` to `public`'s store, and
/// the Slice `node-slice/` (`slice.json` as given) frozen: `shows-the-bug` on the base
/// expects exit 1 and `shows-the-fix` on the Candidate exit 0, both graded on `greets
/// loudly` (FAIL_TO_PASS) and `keeps the name` (PASS_TO_PASS).
pub fn greeter_slice(public: &Public, slice_json: &serde_json::Value) -> Work {
    let env = node_modules(public);
    let work = Work::from_git(node_project, "HEAD").with_public(public);
    work.sf(&["env", "add", "node-deps", env.to_str().unwrap()])
        .result();
    let slice = work.dir.join("node-slice");
    write(&slice.join("slice.json"), &slice_json.to_string());
    write(&slice.join("overlay/test/greet.test.js"), GREET_TEST);
    write(&slice.join("inputs/none/README"), "no input\n");
    write(
        &slice.join("recipe.json"),
        r#"{"timeoutMs":60000,"outputLimit":65536}"#,
    );
    let check = |id: &str, phase: &str, stage: &str, exit: i32| {
        serde_json::json!({
            "kind": "command", "id": id, "phase": phase, "stage": stage,
            "argv": ["node", "--test", "--test-reporter=junit",
                     "--test-reporter-destination=/sf/scratch/results.xml", "test/"],
            "cwd": {"from": "tree", "path": ""},
            "env": {"NODE_PATH": format!("{}/node_modules", env.display())},
            "environment": "node-deps",
            "results": {"junit": "results.xml", "maxBytes": 1048576},
            "input": "none",
            "expectation": {"exitCode": exit, "stdoutDigest": null,
                            "failToPass": ["test::greets loudly"],
                            "passToPass": ["test::keeps the name"]},
        })
    };
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({
            "protocol": "sf-repository-acceptance/3",
            "checks": [check("shows-the-bug", "before", "base", 1),
                       check("shows-the-fix", "after", "candidate", 0)],
        })
        .to_string(),
    );
    work.freeze("node-slice").result();
    work
}
