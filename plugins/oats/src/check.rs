//! A capability's operation as a Slice's check: staged for sf's collector, which runs it
//! confined like every check, and the frozen Slices that pin a capability.
//!
//! **Staging** ([`Oats::stage_check`]) checks everything a run checks (the registration,
//! the bytes against the registered integrity, containment, trust) and, when the caller
//! names the integrity its Slice pinned, that the registered one is still it. It answers the
//! files a check's run gets as its harness: the program of every capability run (the
//! artifact under `artifact/`, the launcher, the kernel stub) and the launch request
//! `request.json` at the top, whose working directory is the tree the check reads (the
//! stage's tree, read-only). The launcher is the run's entry ([`crate::launch::LAUNCHER_PATH`])
//! and its one argument is the request's path. A check's run gets no declared environment
//! values (a check has no network, and its request is part of what the Evidence pins) and the
//! declared settings' defaults.
//!
//! **Pins.** A freeze that stages a check names its Slice directory; the registry keeps it
//! under the capability id (`pins`), also once the registration is removed. A Slice pins a capability while its frozen acceptance
//! (`<slice>/frozen/acceptance.json`) holds an oats check of that capability at the
//! registered integrity: those are the checks an untrust, upgrade or unregister would make
//! Inconclusive, so each is refused while any Slice pins the capability, naming the Slices,
//! unless forced ([`Oats::pinning_slices`]). A Slice directory that is gone or no longer pins
//! the capability does not count.

use std::path::{Path, PathBuf};

use serde_json::Value;
use sf_contracts::snapshot::SnapshotFile;

use crate::error::{ErrorCode, OatsError, Result};
use crate::host::{Oats, RunContext};
use crate::launch::{self, Cwd};
use crate::operation::OperationTarget;
use crate::registry::{Pins, RegistryEntry};

/// Where a Slice keeps its frozen acceptance, relative to the Slice directory.
pub const FROZEN_ACCEPTANCE: &str = "frozen/acceptance.json";
/// The most bytes of a frozen acceptance read when looking for pins.
const MAX_ACCEPTANCE_BYTES: u64 = 16 * 1024 * 1024;

/// An operation staged as a check: the capability it runs and the files of the run's
/// harness.
#[derive(Clone, Debug)]
pub struct StagedCheck {
    /// The capability id.
    pub capability: String,
    /// Its manifest's version.
    pub version: String,
    /// The integrity of the bytes staged.
    pub integrity: String,
    /// The harness: `artifact/…`, the launcher, the kernel stub and `request.json`.
    pub files: Vec<SnapshotFile>,
}

/// One frozen Slice that pins a capability, and its checks that run it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The Slice directory.
    pub slice: PathBuf,
    /// The ids of its oats checks of the capability.
    pub checks: Vec<String>,
}

impl Oats {
    /// Stages operation `name` of capability `id` with `args` as a check whose run reads
    /// the tree at `tree` (an absolute directory inside the run). With `pinned`, the
    /// registered integrity must be it (`integrity-drift` otherwise). With `pin`, the Slice
    /// directory is recorded as pinning the capability. Refused as a run would be:
    /// unknown, drifted, untrusted, undeclared operation, bad arguments; a `home` operation
    /// cannot be a check (it needs an instance home).
    pub fn stage_check(
        &self,
        id: &str,
        name: &str,
        args: &[(String, String)],
        pinned: Option<&str>,
        tree: &str,
        pin: Option<&Path>,
    ) -> Result<StagedCheck> {
        if !tree.starts_with('/') {
            return Err(OatsError::new(
                ErrorCode::OperationUnavailable,
                tree,
                "the tree a check reads is an absolute directory inside the run",
            ));
        }
        let prepared = self.prepare(id, true)?;
        if let Some(pinned) = pinned
            && pinned != prepared.entry.integrity
        {
            return Err(OatsError::new(
                ErrorCode::IntegrityDrift,
                id,
                format!(
                    "the Slice pinned {pinned}, but the registered capability is {} ({}): it \
                     was upgraded or registered again since the freeze; freeze the Slice \
                     again to pin the new bytes",
                    prepared.entry.integrity, prepared.entry.version
                ),
            ));
        }
        let context = RunContext::default();
        let (mut launch, _, _) = self.operation_launch(
            &prepared,
            name,
            args,
            &OperationTarget { home: None },
            &context,
        )?;
        launch.cwd = Cwd::Path(tree.to_owned());
        let mut files = prepared.program.clone();
        files.push(launch::request_file(&launch)?);
        if let Some(slice) = pin {
            self.record_pin(id, slice)?;
        }
        Ok(StagedCheck {
            capability: prepared.entry.id.clone(),
            version: prepared.entry.version.clone(),
            integrity: prepared.entry.integrity.clone(),
            files,
        })
    }

    /// Records that the Slice in `slice` pins `id`, dropping the recorded Slices that no
    /// longer do.
    fn record_pin(&self, id: &str, slice: &Path) -> Result<()> {
        let slice = slice
            .canonicalize()
            .map_err(|error| OatsError::io(slice.display(), &error))?;
        self.registry().update_all(|entries, pins| {
            let entry = entries
                .get(id)
                .ok_or_else(|| crate::registry::unknown(id))?;
            let recorded = pins.entry(id.to_owned()).or_default();
            recorded.retain(|kept| {
                *kept == slice || !checks_pinning(kept, id, &entry.integrity).is_empty()
            });
            if !recorded.contains(&slice) {
                recorded.push(slice);
                recorded.sort();
            }
            Ok(())
        })
    }

    /// The frozen Slices of `pins` that pin `entry` now (see the module documentation).
    pub fn pinning_slices(entry: &RegistryEntry, pins: &Pins) -> Vec<Pin> {
        pins.get(&entry.id)
            .into_iter()
            .flatten()
            .filter_map(|slice| {
                let checks = checks_pinning(slice, &entry.id, &entry.integrity);
                (!checks.is_empty()).then(|| Pin {
                    slice: slice.clone(),
                    checks,
                })
            })
            .collect()
    }
}

/// Refuses a change to `entry` that `what` names (untrusting it, …) while a
/// frozen Slice pins it, unless `force`.
pub fn refuse_if_pinned(entry: &RegistryEntry, pins: &Pins, what: &str, force: bool) -> Result<()> {
    let pins = Oats::pinning_slices(entry, pins);
    if force || pins.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = pins
        .iter()
        .map(|pin| format!("{} (check {})", pin.slice.display(), pin.checks.join(", ")))
        .collect();
    Err(OatsError::new(
        ErrorCode::Pinned,
        entry.id.clone(),
        format!(
            "is pinned at {} by the frozen Slice(s) {}: {what} would make their checks \
             Inconclusive; retire those Slices first (freeze a new revision without the check \
             and remove the old directory), or pass --force",
            entry.integrity,
            named.join("; ")
        ),
    ))
}

/// The ids of the oats checks of capability `id` at `integrity` in the frozen acceptance of
/// the Slice in `slice`; none when it cannot be read.
fn checks_pinning(slice: &Path, id: &str, integrity: &str) -> Vec<String> {
    let path = slice.join(FROZEN_ACCEPTANCE);
    let Ok(metadata) = std::fs::metadata(&path) else {
        return Vec::new();
    };
    if !metadata.is_file() || metadata.len() > MAX_ACCEPTANCE_BYTES {
        return Vec::new();
    }
    let Some(value) = std::fs::read(&path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
    else {
        return Vec::new();
    };
    let Some(checks) = value.get("checks").and_then(Value::as_array) else {
        return Vec::new();
    };
    checks
        .iter()
        .filter(|check| {
            check.get("kind").and_then(Value::as_str) == Some("oats")
                && check.get("capability").and_then(Value::as_str) == Some(id)
                && check.get("integrity").and_then(Value::as_str) == Some(integrity)
        })
        .filter_map(|check| check.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Writes `files` into `out`, a directory made now (0700; its parent must exist and `out`
/// must not): regular files 0644, executables 0755. A link is never written (a staged
/// program holds none: the walk resolves them).
pub fn write_files(out: &Path, files: &[SnapshotFile]) -> Result<()> {
    use sf_contracts::tree_path::EntryMode;
    use std::io::Write as _;
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};

    let io = |path: &Path, error: std::io::Error| OatsError::io(path.display(), &error);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(out)
        .map_err(|error| io(out, error))?;
    for file in files {
        let mode = match file.mode {
            EntryMode::Regular => 0o644,
            EntryMode::Executable => 0o755,
            _ => {
                return Err(OatsError::new(
                    ErrorCode::UnsupportedFile,
                    file.path.clone(),
                    "a staged check holds only regular and executable files",
                ));
            }
        };
        let path = out.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)
                .map_err(|error| io(parent, error))?;
        }
        let mut written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|error| io(&path, error))?;
        written
            .write_all(&file.content)
            .map_err(|error| io(&path, error))?;
    }
    Ok(())
}
