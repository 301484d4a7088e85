//! Dependency environments (a venv, a `node_modules`, a toolchain) that checks run in, kept
//! read-only by digest in the store `[environments] store` names: adding, showing and
//! listing them, resolving a name when a Slice is frozen, and verifying the trees a
//! collection binds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sf_host::canonical::Digest;
use sf_host::environment_store::{
    EnvironmentEntry, EnvironmentLimits, EnvironmentStore, EnvironmentStoreError, check_bind_path,
    check_name,
};

use crate::backends::Backends;
use crate::error::AppError;

/// An environment to add: the directory `dir` copied into the store under `name`.
#[derive(Clone, Debug)]
pub struct AddRequest {
    /// The new name (a name is never re-pointed).
    pub name: String,
    /// The directory, by the absolute path it was built at.
    pub dir: PathBuf,
    /// `dir` is a whole root, seen as `/` by a check's run.
    pub root: bool,
    /// The bounds of what is copied.
    pub limits: EnvironmentLimits,
    /// Point the name at this tree whatever it named before (a new version).
    pub replace: bool,
}

/// An environment added: its entry, and with `replace`, the digest the name held before.
#[derive(Clone, Debug)]
pub struct Added {
    /// The entry stored.
    pub entry: EnvironmentEntry,
    /// What the name named before a replacing add, if anything.
    pub replaced: Option<Digest>,
}

/// Copies `request.dir` into the store under its name.
pub fn add(backends: &Backends, request: &AddRequest) -> Result<Added, AppError> {
    // Refused before the store is opened, so that a bad argument creates nothing.
    check_name(&request.name).map_err(store_error)?;
    check_bind_path(&request.dir).map_err(store_error)?;
    let root = backends.environment_store_dir()?;
    check_reachable(&root)?;
    let store = EnvironmentStore::open(&root).map_err(store_error)?;
    let (entry, replaced) = if request.replace {
        store.add_version(&request.name, &request.dir, request.root, request.limits)
    } else if request.root {
        store
            .add_root(&request.name, &request.dir, request.limits)
            .map(|entry| (entry, None))
    } else {
        store
            .add(&request.name, &request.dir, request.limits)
            .map(|entry| (entry, None))
    }
    .map_err(store_error)?;
    Ok(Added {
        replaced: replaced.filter(|before| *before != entry.digest),
        entry,
    })
}

/// Removes the name `name` from the store; the environment it named stays stored, for the
/// Slices frozen with it. Answers the digest it named.
pub fn remove(backends: &Backends, name: &str) -> Result<Digest, AppError> {
    check_name(name).map_err(store_error)?;
    let root = backends.environment_store_dir()?;
    let store = EnvironmentStore::open_existing(&root).map_err(store_error)?;
    store.remove_name(name).map_err(store_error)
}

/// The stored environment `environment` names (a name, or a digest), verified.
pub fn show(backends: &Backends, environment: &str) -> Result<EnvironmentEntry, AppError> {
    // The argument is read before the store is opened, so that a bad one names itself.
    let digest = if environment.starts_with("sha256:") {
        Some(Digest::parse(environment).ok_or_else(|| {
            AppError::new(
                "invalid-input",
                format!(
                    "{environment:?}: a digest is sha256: and 64 lowercase hex characters; or \
                     give a name"
                ),
            )
        })?)
    } else {
        check_name(environment).map_err(store_error)?;
        None
    };
    let root = backends.environment_store_dir()?;
    let store = EnvironmentStore::open_existing(&root).map_err(store_error)?;
    match digest {
        Some(digest) => store.verify(&digest),
        None => store.resolve(environment),
    }
    .map_err(store_error)
}

/// Every environment name in the store, with its digest.
#[derive(Clone, Debug)]
pub struct Listed {
    /// The store's directory.
    pub store: PathBuf,
    /// The names and their digests.
    pub names: Vec<(String, Digest)>,
    /// For each environment sf built (`sf env build`), by digest: its recipe, its lockfile's
    /// path and the lockfile's digest.
    pub built: BTreeMap<Digest, (String, String, String)>,
}

/// Lists the store; a store never created lists nothing, and is not created.
pub fn list(backends: &Backends) -> Result<Listed, AppError> {
    let root = backends.environment_store_dir()?;
    let store = match EnvironmentStore::open_existing(&root) {
        Ok(store) => store,
        Err(EnvironmentStoreError::NoStore { .. }) => {
            return Ok(Listed {
                store: root,
                names: Vec::new(),
                built: BTreeMap::new(),
            });
        }
        Err(error) => return Err(store_error(error)),
    };
    let names = store.names().map_err(store_error)?;
    let mut built = BTreeMap::new();
    for (_, digest) in &names {
        if let Some(record) = store.build_record(digest).map_err(store_error)?
            && let Some(summary) = crate::env_build::BuildRecord::summary(&record)
        {
            built.insert(digest.clone(), summary);
        }
    }
    Ok(Listed {
        store: root,
        names,
        built,
    })
}

/// The entry `name` points to in the configured store, verified (what a freeze pins).
pub(crate) fn resolve(backends: &Backends, name: &str) -> Result<EnvironmentEntry, AppError> {
    check_name(name).map_err(store_error)?;
    let root = backends.environment_store_dir()?;
    check_reachable(&root)?;
    let store = EnvironmentStore::open_existing(&root).map_err(store_error)?;
    store.resolve(name).map_err(store_error)
}

/// Refuses a store a check's run could not read. As root, each run reads its environments as
/// a reserved user of its own, not as root, so every directory from `/` down to the store
/// must let others pass (search, `o+x`); one that does not (a store below root's 0700 home,
/// say) would leave every run that binds an environment with nothing to run, found only when
/// an attempt is spent. Not yet existing directories are made by the store, searchable.
pub(crate) fn check_reachable(store: &Path) -> Result<(), AppError> {
    use std::os::unix::fs::PermissionsExt as _;
    if !nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    for dir in store.ancestors() {
        let Ok(metadata) = std::fs::metadata(dir) else {
            continue;
        };
        let mode = metadata.permissions().mode() & 0o7777;
        if metadata.is_dir() && mode & 0o001 == 0 {
            return Err(AppError::new(
                "unreachable-store",
                format!(
                    "the environment store {} is below {} (mode {mode:04o}), which only its \
                     owner may pass: each run reads its environments as a reserved user of its \
                     own, not as root, and could not reach them. Let others pass (`chmod o+x \
                     {}`), or set `[environments] store` in sf.toml to a directory they can \
                     reach (such as /var/lib/sf/environments); nothing was written",
                    store.display(),
                    dir.display(),
                    dir.display()
                ),
            ));
        }
    }
    Ok(())
}

/// Each of `digests` in the configured store, verified now, by the directory holding its
/// files; an environment that changed is `corrupt` and nothing runs (before an attempt
/// starts).
pub(crate) fn verified_trees<'a>(
    backends: &Backends,
    digests: impl IntoIterator<Item = &'a Digest>,
) -> Result<BTreeMap<Digest, PathBuf>, AppError> {
    let mut digests = digests.into_iter().peekable();
    if digests.peek().is_none() {
        return Ok(BTreeMap::new());
    }
    verified_trees_in(&backends.environment_store_dir()?, digests)
}

/// [`verified_trees`] in the store at `root`, which needs no [`Backends`] (so that another
/// thread can verify while the use case goes on).
pub(crate) fn verified_trees_in<'a>(
    root: &Path,
    digests: impl IntoIterator<Item = &'a Digest>,
) -> Result<BTreeMap<Digest, PathBuf>, AppError> {
    let mut digests = digests.into_iter().peekable();
    if digests.peek().is_none() {
        return Ok(BTreeMap::new());
    }
    let store = EnvironmentStore::open_existing(root).map_err(store_error)?;
    digests
        .map(|digest| {
            let entry = store.verify_for_use(digest).map_err(store_error)?;
            Ok((entry.digest, entry.tree))
        })
        .collect()
}

pub(crate) fn store_error(error: EnvironmentStoreError) -> AppError {
    let fix = match &error {
        EnvironmentStoreError::Missing { .. } => "; `sf env list` lists the names",
        EnvironmentStoreError::NoStore { .. } => "; `sf env add NAME DIR` creates it",
        _ => "",
    };
    AppError::new(error.code(), format!("{error}{fix}"))
}
