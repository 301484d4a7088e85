//! What the benchmarks that drive the `sf` binary on a small repository share: a repository of
//! one script `work.sh` (Product `bench`), a frozen Slice over it whose checks run harness
//! scripts, and Candidates that edit `work.sh`.

use std::error::Error;
use std::path::Path;
use std::process::Command;

/// Writes `text` at `path`, making its parents.
pub fn write(path: &Path, text: &str) -> Result<(), Box<dyn Error>> {
    std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
    std::fs::write(path, text)?;
    Ok(())
}

/// Runs `sf --json ARGS` in `dir`: its result, or an error naming the command and what it
/// printed.
pub fn sf_json(sf: &Path, dir: &Path, args: &[&str]) -> Result<serde_json::Value, Box<dyn Error>> {
    let output = Command::new(sf)
        .arg("--json")
        .args(args)
        .current_dir(dir)
        .output()?;
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|error| {
        format!(
            "sf {args:?}: {error}: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    if envelope["ok"] != true {
        return Err(format!("sf {args:?}: {envelope}").into());
    }
    Ok(envelope["result"].clone())
}

/// In `dir`: the repository `repo.git` (`identity.json`) of one script, and the Slice `slice`
/// over it, frozen, with `harness` (file name, text) and the process `checks` (acceptance JSON,
/// input `none`).
pub fn set_up(
    sf: &Path,
    dir: &Path,
    harness: &[(&str, String)],
    checks: Vec<serde_json::Value>,
) -> Result<(), Box<dyn Error>> {
    set_up_scoped(sf, dir, &["work.sh"], harness, checks)
}

/// [`set_up`] with a Slice whose scope is `scope`.
pub fn set_up_scoped(
    sf: &Path,
    dir: &Path,
    scope: &[&str],
    harness: &[(&str, String)],
    checks: Vec<serde_json::Value>,
) -> Result<(), Box<dyn Error>> {
    write(&dir.join("project/work.sh"), "echo work\n")?;
    sf_json(
        sf,
        dir,
        &[
            "repo",
            "create",
            "--path",
            "repo.git",
            "--product",
            "bench",
            "--target",
            "refs/heads/main",
            "--from",
            "project",
            "--identity-out",
            "identity.json",
        ],
    )?;
    let slice = dir.join("slice");
    write(
        &slice.join("slice.json"),
        &serde_json::json!({"id": "bench", "revision": 1, "scope": scope}).to_string(),
    )?;
    write(
        &slice.join("recipe.json"),
        r#"{"timeoutMs":120000,"outputLimit":65536}"#,
    )?;
    write(&slice.join("inputs/none/empty.txt"), "")?;
    for (name, text) in harness {
        write(&slice.join("harness").join(name), text)?;
    }
    write(
        &slice.join("acceptance.json"),
        &serde_json::json!({"protocol": "sf-repository-acceptance/2", "checks": checks})
            .to_string(),
    )?;
    sf_json(
        sf,
        dir,
        &[
            "slice",
            "freeze",
            "--dir",
            "slice",
            "--identity",
            "identity.json",
        ],
    )?;
    Ok(())
}

/// A process check of the Slice: `script` from the harness at `stage`, expected to exit 0.
pub fn harness_check(id: &str, stage: &str, script: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "process", "id": id, "phase": "guardrail", "stage": stage,
        "entry": {"from": "harness", "path": script}, "entryInScope": false,
        "args": [], "input": "none",
        "expectation": {"exitCode": 0, "stdoutDigest": null},
    })
}

/// Seals the Candidate that makes `work.sh` say `text` (written as `proposal-NAME.json`): its
/// digest.
pub fn seal(sf: &Path, dir: &Path, name: &str, text: &str) -> Result<String, Box<dyn Error>> {
    let prior = {
        use sha2::Digest as _;
        format!(
            "sha256:{}",
            hex::encode(sha2::Sha256::digest(b"echo work\n"))
        )
    };
    let proposal = format!("proposal-{name}.json");
    write(
        &dir.join(&proposal),
        &serde_json::json!({"edits": [{"path": "work.sh", "prior": prior, "text": text}]})
            .to_string(),
    )?;
    let sealed = sf_json(
        sf,
        dir,
        &[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--proposal",
            &proposal,
        ],
    )?;
    Ok(sealed["digest"].as_str().ok_or("no digest")?.to_owned())
}
