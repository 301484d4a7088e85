//! What an environment build keeps in the environment store beside the environments: the
//! directory a build's sandboxed run leaves its output in, and one record per built
//! environment.
//!
//! - `builds/` (0711): a build's space, `builds/build-<random>/` (0711, so the sandbox's
//!   user can pass it but no one can list it), holding `out/`, the output directory the
//!   Executor gives to the run. A build's space is removed when the build ends, however it
//!   ends; one left by a build that was killed is only ever a directory no name points to.
//! - `records/<hex>.json` (0444): the record of the build that made the environment whose
//!   digest's hex is `<hex>`, written once: a second build of the same environment (the same
//!   lockfile giving the same files) keeps the first record.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use crate::canonical::Digest;
use crate::dir_fd::{DirFd, DirFdError, WriteOnce};
use crate::environment_store::{
    EnvironmentStore, EnvironmentStoreError, Result, make_dir, store_failed, unavailable,
};

/// The largest build record kept or read.
pub const MAX_RECORD_BYTES: u64 = 1024 * 1024;

/// A build's space in the store, removed when dropped.
#[derive(Debug)]
pub struct BuildSpace {
    dir: tempfile::TempDir,
    out: PathBuf,
}

impl BuildSpace {
    /// The output directory the build's run is given: empty, 0755, this user's.
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// The space itself.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// How writing a build record went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordWritten {
    /// It was written.
    Created,
    /// The same record was there.
    AlreadyThere,
    /// Another record of the same environment was there, and is kept: its bytes.
    Kept(Vec<u8>),
}

impl EnvironmentStore {
    /// A new build space (see the module documentation), making the store when it is not
    /// there.
    pub fn build_space(&self) -> Result<BuildSpace> {
        let store = self.check()?;
        let builds = make_dir(&store.root, OsStr::new("builds"), 0o711).map_err(store_failed)?;
        let dir = tempfile::Builder::new()
            .prefix("build-")
            .tempdir_in(builds.path())
            .map_err(|error| unavailable(format!("{}: {error}", builds.path().display())))?;
        let out = dir.path().join("out");
        let made = set_mode(dir.path(), 0o711)
            .and_then(|()| std::fs::create_dir(&out))
            .and_then(|()| set_mode(&out, 0o755));
        made.map_err(|error| unavailable(format!("{}: {error}", dir.path().display())))?;
        Ok(BuildSpace { dir, out })
    }

    /// Writes `record` as the build record of the environment `digest`, once.
    pub fn write_build_record(&self, digest: &Digest, record: &[u8]) -> Result<RecordWritten> {
        let store = self.check()?;
        let records = make_dir(&store.root, OsStr::new("records"), 0o755).map_err(store_failed)?;
        let name = format!("{}.json", digest.hex());
        match records.write_once(OsStr::new(&name), record, 0o444) {
            Ok(WriteOnce::Created) => Ok(RecordWritten::Created),
            Ok(WriteOnce::AlreadyThere) => Ok(RecordWritten::AlreadyThere),
            Err(DirFdError::Differs { .. }) => {
                Ok(RecordWritten::Kept(self.build_record(digest)?.ok_or_else(
                    || unavailable(format!("records/{name}: removed while it was written")),
                )?))
            }
            Err(error) => Err(store_failed(error)),
        }
    }

    /// The build record of the environment `digest`, if it was built by sf.
    pub fn build_record(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let Some(records) = self.records()? else {
            return Ok(None);
        };
        let name = format!("{}.json", digest.hex());
        let Some(entry) = records.entry(OsStr::new(&name)).map_err(store_failed)? else {
            return Ok(None);
        };
        records
            .read_file(&entry, MAX_RECORD_BYTES)
            .map(|read| Some(read.bytes))
            .map_err(|error| EnvironmentStoreError::Corrupt {
                what: format!("the build record of {digest}"),
                detail: error.to_string(),
            })
    }
}

impl EnvironmentStore {
    /// Every build record in the store, by the digest of the environment it records: a
    /// file whose name is not `<hex>.json` is not a record and is skipped.
    pub fn build_records(&self) -> Result<Vec<(Digest, Vec<u8>)>> {
        let Some(records) = self.records()? else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        for entry in records.entries(MAX_RECORDS).map_err(store_failed)? {
            let digest = entry
                .name
                .to_str()
                .and_then(|name| name.strip_suffix(".json"))
                .and_then(|hex| Digest::parse(&format!("sha256:{hex}")));
            let Some(digest) = digest else { continue };
            let read = records
                .read_file(&entry, MAX_RECORD_BYTES)
                .map_err(|error| EnvironmentStoreError::Corrupt {
                    what: format!("the build record of {digest}"),
                    detail: error.to_string(),
                })?;
            found.push((digest, read.bytes));
        }
        Ok(found)
    }

    /// `records/`, opened, if any build has written it.
    fn records(&self) -> Result<Option<DirFd>> {
        let store = self.check()?;
        let name = OsStr::new("records");
        if store.root.entry(name).map_err(store_failed)?.is_none() {
            return Ok(None);
        }
        store
            .root
            .open_dir_named(name)
            .map(Some)
            .map_err(store_failed)
    }
}

/// The most build records read.
const MAX_RECORDS: usize = 100_000;

fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}
