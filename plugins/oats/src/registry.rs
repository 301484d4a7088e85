//! The registry: one canonical JSON file in sf's state directory that holds, per registered
//! capability, `{id, version, path, integrity, trusted}`, and, by capability id, the Slice
//! directories a freeze recorded as pinning it (`pins`, written only when there are some, so
//! that earlier registries keep their bytes; kept when a registration is removed, since the
//! Slices still pin the bytes; see [`crate::check`]).
//!
//! ```text
//! <state>/oats/registry.json
//! {"capabilities":{"<id>":{"id":…,"integrity":"oats.tree-exec.v1:sha256-…","path":…,
//!   "trusted":false,"version":…}},"protocol":"sf-oats-registry/1"}
//! ```
//!
//! The state directory is private (sf-host's `PrivateDir` rule: canonical, owned by this
//! user, mode 0700, parent not writable by others). Every change is a read-modify-write under
//! an exclusive `flock` on `registry.lock`, written to a new file, synced and renamed over
//! the old one, then the directory is synced. A registry that is not exactly what sf writes
//! is `registry-corrupt` and is never repaired.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sf_contracts::canonical;
use sf_io::private_dir::PrivateDir;

use crate::artifact;
use crate::error::{ErrorCode, OatsError, Result};

/// The protocol string of the registry file.
pub const REGISTRY_PROTOCOL: &str = "sf-oats-registry/1";
/// The registry's file name in the state directory.
pub const REGISTRY_FILE: &str = "registry.json";
const LOCK_FILE: &str = "registry.lock";

/// One registered capability.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryEntry {
    /// The capability id (the manifest's `capability`).
    #[serde(deserialize_with = "capability_id")]
    pub id: String,
    /// The manifest's `version`.
    pub version: String,
    /// The canonical path of the capability directory.
    #[serde(serialize_with = "path_text", deserialize_with = "absolute_path")]
    pub path: PathBuf,
    /// The `oats.tree-exec.v1` integrity of the registered bytes.
    #[serde(deserialize_with = "integrity")]
    pub integrity: String,
    /// Whether an operator approved the executable surface of exactly these bytes.
    pub trusted: bool,
}

/// The Slice directories recorded as pinning each capability, by capability id.
pub type Pins = BTreeMap<String, Vec<PathBuf>>;

/// The registry file: every entry under its capability id, and the pins.
#[derive(Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
struct RegistryFile {
    capabilities: BTreeMap<String, RegistryEntry>,
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "pin_paths"
    )]
    pins: Pins,
}

/// How `pins` is written: absolute paths as text.
mod pin_paths {
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer, de::Error as _, ser::SerializeMap as _};

    use super::Pins;

    pub(super) fn serialize<S: Serializer>(pins: &Pins, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(pins.len()))?;
        for (id, paths) in pins {
            let texts: Vec<String> = paths
                .iter()
                .map(|path| path.to_string_lossy().into_owned())
                .collect();
            map.serialize_entry(id, &texts)?;
        }
        map.end()
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Pins, D::Error> {
        let pins = std::collections::BTreeMap::<String, Vec<PathBuf>>::deserialize(deserializer)?;
        if let Some(path) = pins.values().flatten().find(|path| !path.is_absolute()) {
            return Err(D::Error::custom(format!(
                "pins holds {}, which is not absolute",
                path.display()
            )));
        }
        Ok(pins)
    }
}
canonical::literal_fields!(RegistryFile { "protocol": REGISTRY_PROTOCOL });

fn capability_id<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<String, D::Error> {
    let is_id = |id: &String| crate::grammar::is_capability_id(id);
    canonical::valid_if(deserializer, is_id, "is not a capability id")
}

fn integrity<'de, D: Deserializer<'de>>(deserializer: D) -> std::result::Result<String, D::Error> {
    let is_integrity = |integrity: &String| artifact::is_integrity(integrity);
    canonical::valid_if(
        deserializer,
        is_integrity,
        "is not an oats.tree-exec.v1 integrity",
    )
}

fn absolute_path<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<PathBuf, D::Error> {
    canonical::valid_if(
        deserializer,
        |path: &PathBuf| path.is_absolute(),
        "is not absolute",
    )
}

/// A path as text (a path that is not UTF-8 is written with U+FFFD in its place, as the
/// registry always has).
fn path_text<S: Serializer>(path: &Path, serializer: S) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

/// The registry in one state directory.
#[derive(Debug)]
pub struct Registry {
    dir: PrivateDir,
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// An exclusive lock on the registry, released when dropped.
struct Locked {
    _file: fs::File,
}

impl Registry {
    /// Opens (creating if needed) the registry in `state_dir`, which must be private.
    pub fn open(state_dir: &Path) -> Result<Self> {
        let dir = PrivateDir::create_or_check(state_dir).map_err(|problem| {
            OatsError::new(
                ErrorCode::StateDirectory,
                state_dir.display().to_string(),
                format!("{problem}; sf keeps the oats registry in a private directory"),
            )
        })?;
        Ok(Self { dir })
    }

    /// The state directory.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join(REGISTRY_FILE)
    }

    fn lock(&self) -> Result<Locked> {
        self.dir.recheck().map_err(|problem| {
            OatsError::new(
                ErrorCode::StateDirectory,
                self.dir.path().display().to_string(),
                problem,
            )
        })?;
        let path = self.dir.path().join(LOCK_FILE);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|error| OatsError::io(path.display(), &error))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(OatsError::io(
                path.display(),
                &std::io::Error::last_os_error(),
            ));
        }
        Ok(Locked { _file: file })
    }

    /// Every entry, by id.
    pub fn read(&self) -> Result<BTreeMap<String, RegistryEntry>> {
        Ok(self.read_all()?.0)
    }

    /// Every entry, by id, and the pins.
    pub fn read_all(&self) -> Result<(BTreeMap<String, RegistryEntry>, Pins)> {
        let path = self.file();
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok((BTreeMap::new(), Pins::new()));
            }
            Err(error) => return Err(OatsError::io(path.display(), &error)),
        };
        let corrupt = |what: String| {
            OatsError::new(
                ErrorCode::RegistryCorrupt,
                path.display().to_string(),
                format!(
                    "{what}; sf never repairs it: restore it from a backup or move it away and register again"
                ),
            )
        };
        let file: RegistryFile = canonical::from_canonical_slice(&bytes, "registry")
            .map_err(|error| corrupt(error.to_string()))?;
        if let Some((key, entry)) = file
            .capabilities
            .iter()
            .find(|(key, entry)| entry.id != **key)
        {
            return Err(corrupt(format!(
                "registry.capabilities.{key}.id names {:?}",
                entry.id
            )));
        }
        Ok((file.capabilities, file.pins))
    }

    /// One entry, or `unknown-capability`.
    pub fn get(&self, id: &str) -> Result<RegistryEntry> {
        self.read()?.remove(id).ok_or_else(|| unknown(id))
    }

    /// Applies `change` to the entries under the lock and writes the result. `change` may
    /// refuse, in which case nothing is written.
    pub fn update<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, RegistryEntry>) -> Result<T>,
    ) -> Result<T> {
        self.update_all(|entries, _| change(entries))
    }

    /// [`Registry::update`] of the entries and the pins together.
    pub fn update_all<T>(
        &self,
        change: impl FnOnce(&mut BTreeMap<String, RegistryEntry>, &mut Pins) -> Result<T>,
    ) -> Result<T> {
        let _locked = self.lock()?;
        let (mut entries, mut pins) = self.read_all()?;
        let before = (entries.clone(), pins.clone());
        let answer = change(&mut entries, &mut pins)?;
        if (&entries, &pins) != (&before.0, &before.1) {
            self.write(entries, pins)?;
        }
        Ok(answer)
    }

    fn write(&self, capabilities: BTreeMap<String, RegistryEntry>, pins: Pins) -> Result<()> {
        let document = RegistryFile { capabilities, pins };
        let bytes = canonical::to_canonical_bytes(&document).map_err(|error| {
            OatsError::new(ErrorCode::Io, REGISTRY_FILE, format!("encoding: {error}"))
        })?;
        let temporary = self.dir.path().join(format!(
            ".{REGISTRY_FILE}.{}.{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        let result = (|| -> std::io::Result<()> {
            let mut file = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&temporary)?;
            file.write_all(&bytes)?;
            file.sync_all()?;
            fs::rename(&temporary, self.file())?;
            fs::File::open(self.dir.path())?.sync_all()
        })();
        if let Err(error) = result {
            let _ = fs::remove_file(&temporary);
            return Err(OatsError::io(self.file().display(), &error));
        }
        Ok(())
    }
}

/// The `unknown-capability` error for `id`.
pub fn unknown(id: &str) -> OatsError {
    OatsError::new(
        ErrorCode::UnknownCapability,
        id,
        "no capability is registered under this id; register its directory with `sf oats register DIR` (see `sf oats list`)",
    )
}
