//! The acceptance's checks pinned as the freeze writes them: each check's input directory
//! read and named by its snapshot digest, each command's dependency environment by the digest
//! and place its name points to now.

use std::collections::BTreeMap;
use std::path::Path;

use sf_host::assurance::Acceptance;
use sf_host::canonical::{self, Digest, Value};
use sf_host::repository::is_valid_id;
use sf_host::snapshot::{SnapshotFile, snapshot_digest};
use sf_host::source_dir::read_snapshot_dir;

use super::{holds_files, parse_acceptance};
use crate::backends::Backends;
use crate::env::resolve;
use crate::env_build::Recipe;
use crate::error::AppError;
use crate::slice_dir::empty_snapshot;

use super::Base;

/// The inputs read so far, and every snapshot the freeze stores.
#[derive(Default)]
pub(super) struct Inputs {
    /// Input names and the digests they froze to.
    pub(super) names: BTreeMap<String, Digest>,
    /// The files of each input, by digest.
    pub(super) files: BTreeMap<Digest, Vec<SnapshotFile>>,
    /// The snapshots to store: inputs, harness, overlay, each with what it is.
    pub(super) snapshots: Vec<(Digest, Vec<SnapshotFile>, String)>,
}

impl Inputs {
    /// `acceptance` (as authored) with every check's input and environment pinned, parsed.
    pub(super) fn pin(
        &mut self,
        backends: &Backends,
        dir: &Path,
        base: &Base,
        mut acceptance: Value,
    ) -> Result<Acceptance, AppError> {
        if let Value::Object(map) = &mut acceptance
            && let Some(Value::Array(checks)) = map.get_mut("checks")
        {
            for check in checks {
                if let Value::Object(check) = check {
                    self.pin_check(backends, dir, base, check)?;
                }
            }
        }
        parse_acceptance(&acceptance)
    }

    /// Adds `files` (the harness or the overlay) to what is stored, unless empty.
    pub(super) fn store(&mut self, digest: &Digest, files: &[SnapshotFile], what: &str) {
        if holds_files(digest) {
            self.snapshots
                .push((digest.clone(), files.to_vec(), what.to_owned()));
        }
    }

    fn pin_check(
        &mut self,
        backends: &Backends,
        dir: &Path,
        base: &Base,
        check: &mut BTreeMap<String, Value>,
    ) -> Result<(), AppError> {
        // An oats check is staged once to pin its capability's bytes and its run (never
        // stored: every run stages it again at the pinned integrity).
        if matches!(check.get("kind"), Some(Value::String(kind)) if kind == "oats") {
            crate::capabilities::pin_check(backends, dir, check)?;
        }
        // A command's dependency environment is named, or named by the recipe that builds it
        // from the base's lockfile; the freeze pins what it is now: its name, its digest and
        // where it is bound, verified.
        let entry = match check.get("environment") {
            Some(Value::String(name)) => Some(resolve(backends, name)?),
            Some(Value::Object(named)) if named.contains_key("build") => {
                Some(built_for_base(backends, base, named)?)
            }
            _ => None,
        };
        if let Some(entry) = entry {
            check.insert(
                "environment".into(),
                canonical::object([
                    ("name", Value::String(entry.name.unwrap_or_default())),
                    ("digest", Value::String(entry.digest.to_string())),
                    ("at", Value::String(entry.at.display().to_string())),
                ]),
            );
        }
        let runs = matches!(
            check.get("kind"),
            Some(Value::String(kind)) if ["process", "command", "oats"].contains(&kind.as_str())
        );
        let digest = match check.get("input").cloned() {
            Some(Value::String(input)) => self.input(dir, &input)?,
            // A check that reads no input need not name an empty directory: it runs with
            // the empty snapshot at /sf/input.
            None if runs => {
                let empty = empty_snapshot();
                self.files.insert(empty.clone(), Vec::new());
                empty
            }
            _ => return Ok(()),
        };
        check.insert("input".into(), Value::String(digest.to_string()));
        Ok(())
    }

    /// The digest of the input directory `inputs/<input>`, read once.
    fn input(&mut self, dir: &Path, input: &str) -> Result<Digest, AppError> {
        if Digest::parse(input).is_some() {
            return Err(AppError::invalid(
                format!("acceptance.json input {input:?}"),
                "name a directory under inputs/: freeze stores it and writes its digest",
            ));
        }
        if !is_valid_id(input) || input.contains('/') || input.contains(':') {
            return Err(AppError::invalid(
                format!("acceptance.json input {input:?}"),
                "is the name of a directory under inputs/",
            ));
        }
        if let Some(digest) = self.names.get(input) {
            return Ok(digest.clone());
        }
        let input_dir = dir.join("inputs").join(input);
        let files = read_snapshot_dir(&input_dir)
            .map_err(|error| AppError::coded(error.code(), input_dir.display(), error))?;
        let digest = snapshot_digest(&files)
            .map_err(|error| AppError::invalid(input_dir.display(), error))?;
        self.snapshots
            .push((digest.clone(), files.clone(), format!("input {input}")));
        self.files.insert(digest.clone(), files);
        self.names.insert(input.to_owned(), digest.clone());
        Ok(digest)
    }
}

/// The environment `{"build": {"recipe": R, "lockfile"?: PATH}}` names: built from the base's
/// lockfile, or found (see [`crate::env_build::for_base`]).
fn built_for_base(
    backends: &Backends,
    base: &Base,
    named: &BTreeMap<String, Value>,
) -> Result<sf_host::environment_store::EnvironmentEntry, AppError> {
    let invalid = |detail: &str| {
        AppError::invalid(
            "acceptance.json environment",
            format!(
                "{detail}; an environment built from the base's lockfile is \
                 {{\"build\": {{\"recipe\": \"pip\", \"uv\", \"npm\" or \"cargo\", \
                 \"lockfile\": PATH, \"group\": [NAME], \"extra\": [NAME], \"toolchain\": \
                 NAME}}}} (all but the recipe optional; cargo needs its toolchain)"
            ),
        )
    };
    if named.len() != 1 {
        return Err(invalid("holds keys beside build"));
    }
    let Some(Value::Object(build)) = named.get("build") else {
        return Err(invalid("build is not an object"));
    };
    let known = ["recipe", "lockfile", "group", "extra", "toolchain"];
    if let Some(key) = build.keys().find(|key| !known.contains(&key.as_str())) {
        return Err(invalid(&format!(
            "build holds {key:?}, which no recipe built here takes"
        )));
    }
    let Some(Value::String(recipe)) = build.get("recipe") else {
        return Err(invalid("build names no recipe"));
    };
    let lockfile = match build.get("lockfile") {
        None => None,
        Some(Value::String(lockfile)) => Some(lockfile.as_str()),
        Some(_) => return Err(invalid("build's lockfile is not a string")),
    };
    let names = |key: &str| -> Result<Vec<String>, AppError> {
        match build.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(names)) => names
                .iter()
                .map(|name| match name {
                    Value::String(name) => Ok(name.clone()),
                    _ => Err(invalid(&format!("build's {key} holds a non-string"))),
                })
                .collect(),
            Some(_) => Err(invalid(&format!("build's {key} is not a list of names"))),
        }
    };
    let toolchain = match build.get("toolchain") {
        None => None,
        Some(Value::String(name)) => Some(name.as_str()),
        Some(_) => return Err(invalid("build's toolchain is not a name")),
    };
    let recipe = Recipe::parse(recipe)?;
    let options = crate::env_build::Options::new(
        backends,
        recipe,
        &names("group")?,
        &names("extra")?,
        toolchain,
    )?;
    crate::env_build::for_base(backends, base, recipe, lockfile, &options)
}
