//! The delivery tests' shared set-up: a working directory (land_support's `Work`) whose base
//! has an upstream, and the calls of `sf deliver` on it.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sf_host::canonical::Digest;

use super::land_support::{SUM_BUGGY, Work};

/// `sf deliver invoke` of the prepared record `prepared`, behind the open gate file.
pub fn invoke_args(prepared: &Path) -> [&str; 10] {
    [
        "deliver",
        "invoke",
        "--identity",
        "identity.json",
        "--prepared",
        prepared.to_str().unwrap(),
        "--slice",
        "slice",
        "--gate",
        "gate.json",
    ]
}

/// A working directory whose base has an upstream, and that upstream's repository.
pub struct Delivery {
    pub work: Work,
    pub remote: PathBuf,
}

impl Delivery {
    /// The delivery of `work`'s Candidates to the bare repository at `remote`, with the
    /// demo's Slice frozen in `slice/`.
    pub fn at(work: Work, remote: PathBuf) -> Self {
        work.author_slice("slice", &[]);
        work.freeze("slice").result();
        Self { work, remote }
    }

    pub fn remote_ref(&self, name: &str) -> Option<String> {
        let output = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&self.remote)
            .args(["rev-parse", "--verify", "-q", name])
            .output()
            .unwrap();
        output
            .status
            .success()
            .then(|| String::from_utf8(output.stdout).unwrap().trim().to_owned())
    }

    /// Seals `sum` with a message and an author of its own, collects it; the digest.
    pub fn collected(&self, name: &str, sum: &str) -> String {
        let proposal = self.work.proposal(
            name,
            serde_json::json!({
                "message": {"title": "Count the first number too", "body": "sum.sh skipped it."},
                "author": {"name": "Ada Fixer", "email": "ada@example.org",
                           "time": 1_700_000_000u64, "offset": "+0100"},
                "edits": [{"path": "sum.sh",
                           "prior": Digest::of(SUM_BUGGY.as_bytes()).to_string(),
                           "text": sum}],
            }),
        );
        let candidate = self.work.sf(&[
            "seal",
            "--identity",
            "identity.json",
            "--slice",
            "slice",
            "--proposal",
            proposal.to_str().unwrap(),
        ]);
        let candidate = candidate.result()["digest"].as_str().unwrap().to_owned();
        self.work
            .sf(&[
                "collect",
                "--identity",
                "identity.json",
                "--candidate",
                &candidate,
                "--slice",
                "slice",
            ])
            .result();
        candidate
    }

    pub fn prepare(
        &self,
        candidate: &str,
        occurrence: u64,
        extra: &[&str],
    ) -> (PathBuf, serde_json::Value) {
        let prepared = self.work.dir.join(format!("delivery-{occurrence}.json"));
        let mut args = vec![
            "deliver",
            "prepare",
            "--identity",
            "identity.json",
            "--candidate",
            candidate,
            "--slice",
            "slice",
            "--action",
            "deliver-sum",
            "--occurrence",
        ];
        let occurrence = occurrence.to_string();
        args.push(&occurrence);
        args.extend([
            "--owner",
            "owner-1",
            "--generation",
            "1",
            "--prepared-out",
            prepared.to_str().unwrap(),
        ]);
        args.extend_from_slice(extra);
        let value = self.work.sf(&args).result().clone();
        (prepared, value)
    }

    pub fn invoke(&self, prepared: &Path) -> (serde_json::Value, i32) {
        let output = self.work.command(&invoke_args(prepared)).output().unwrap();
        let envelope: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|_| panic!("not an envelope: {output:?}"));
        assert_eq!(envelope["ok"], true, "{envelope}");
        (envelope["result"].clone(), output.status.code().unwrap())
    }

    pub fn inspect(&self, prepared: &Path) -> serde_json::Value {
        self.work
            .sf(&[
                "deliver",
                "inspect",
                "--identity",
                "identity.json",
                "--prepared",
                prepared.to_str().unwrap(),
            ])
            .result()
            .clone()
    }
}
