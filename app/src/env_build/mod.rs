//! `sf env build`: a dependency environment built from the lockfile in a factory commit's
//! tree, inside the sandbox, with the network limited to the package registries.
//!
//! The lockfile (and the files the tool reads beside it) is read from the commit's tree (the
//! base's, never a Candidate's: the lockfile is trusted material) and given to the build's run
//! as its program, read-only. The run executes the recipe's script in the executor of
//! `[env.build]` (a sandbox like the checks', with a build's limits), writing the
//! environment into an output directory bound at the path it will be bound at in checks. Its
//! network reaches one place, the registry proxy this use case runs, which allows the
//! recipe's registries and `[env.network] allow` and refuses and records everything else: a
//! build that tried another host fails, the host named. The output is then added to the
//! environment store like `sf env add` (content-addressed, read-only), and the build's
//! record names the recipe, the lockfile's path and digest, the commit, the tools and their
//! versions, and the registries reached.
//!
//! The path an environment is built for is derived from what was built (the recipe, the
//! lockfile's path and the digests of the files read), so that the same lockfile gives the
//! same path and, when the tool is deterministic, the same environment digest.

mod recipe;
mod record;
mod run;

pub use recipe::{RECIPES, Recipe};
pub use record::BuildRecord;

use run::BuildRun;

use std::path::PathBuf;
use std::time::Duration;

use sf_host::canonical::Digest;
use sf_host::environment_builds::RecordWritten;
use sf_host::environment_store::{
    EnvironmentEntry, EnvironmentLimits, EnvironmentStore, check_name,
};
use sf_host::snapshot::SnapshotFile;

use crate::backends::Backends;
use crate::env::store_error;
use crate::error::AppError;
use crate::freeze::base_of;

/// Where built environments are bound, each in a directory named by what it was built from.
pub const BUILT_AT: &str = "/opt/sf-env";

/// The most bytes of a lockfile or a file beside it.
const MAX_LOCKFILE_BYTES: u64 = 16 * 1024 * 1024;

/// An environment to build.
#[derive(Clone, Debug)]
pub struct BuildRequest {
    /// The name to store it under.
    pub name: String,
    /// The repository identity file.
    pub identity: PathBuf,
    /// The factory commit whose lockfile is read (a commit id); the target when `None`.
    pub commit: Option<String>,
    /// The package tool.
    pub recipe: Recipe,
    /// The lockfile's path in the commit's tree; the recipe's usual file when `None`.
    pub lockfile: Option<String>,
    /// Dependency groups (a `uv.lock`'s).
    pub groups: Vec<String>,
    /// Extras (a `uv.lock`'s).
    pub extras: Vec<String>,
    /// The toolchain environment a cargo build copies and vendors beside (a name).
    pub toolchain: Option<String>,
    /// Point the name at this environment whatever it named before.
    pub replace: bool,
    /// The bounds of what is stored.
    pub limits: EnvironmentLimits,
    /// How long the build's run may take.
    pub timeout: Duration,
}

/// An environment built.
#[derive(Clone, Debug)]
pub struct Built {
    /// The entry stored.
    pub entry: EnvironmentEntry,
    /// What the name named before a replacing build, when it was another environment.
    pub replaced: Option<Digest>,
    /// This build's record.
    pub record: BuildRecord,
    /// Whether an earlier build had made the same environment (its record is kept).
    pub rebuilt: bool,
    /// When an earlier build of the same inputs gave another environment: it, and the first
    /// path at which the two differ.
    pub differs_from: Option<(Digest, String)>,
}

/// Builds the environment `request` asks for and stores it.
pub fn build(backends: &Backends, request: &BuildRequest) -> Result<Built, AppError> {
    check_name(&request.name).map_err(store_error)?;
    let options = Options::new(
        backends,
        request.recipe,
        &request.groups,
        &request.extras,
        request.toolchain.as_deref(),
    )?;
    let base = base_of(backends, &request.identity, request.commit.as_deref())?;
    let lockfile = request
        .lockfile
        .clone()
        .unwrap_or_else(|| request.recipe.default_lockfile().to_owned());
    let inputs = read_inputs(&base, request.recipe, &lockfile)?;
    build_on(backends, &base, request, &options, &lockfile, &inputs)
}

/// The environment a Slice's check names by its recipe (`"environment": {"build": …}`), for
/// a freeze on `base`: the one built from the base's lockfile, found in the store by the name
/// derived from what it is built from (`<recipe>-<16 hex digits>`, the last component of the
/// path it is built for), or built now under that name. A base whose lockfile changed has
/// another name, so it gets a new environment, never the one of an older lockfile.
pub(crate) fn for_base(
    backends: &Backends,
    base: &crate::freeze::Base,
    recipe: Recipe,
    lockfile: Option<&str>,
    options: &Options,
) -> Result<EnvironmentEntry, AppError> {
    let lockfile = lockfile.unwrap_or(recipe.default_lockfile());
    let inputs = read_inputs(base, recipe, lockfile)?;
    let at = built_at(recipe, lockfile, options, &inputs);
    let name = at
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    match crate::env::resolve(backends, &name) {
        Ok(entry) if entry.at == at => return Ok(entry),
        Ok(_) => {}
        Err(error) if error.code == "missing" => {}
        Err(error) => return Err(error),
    }
    let request = BuildRequest {
        name,
        identity: PathBuf::new(),
        commit: None,
        recipe,
        lockfile: Some(lockfile.to_owned()),
        groups: options.groups.clone(),
        extras: options.extras.clone(),
        toolchain: options
            .toolchain
            .as_ref()
            .and_then(|entry| entry.name.clone()),
        replace: true,
        limits: EnvironmentLimits::default(),
        timeout: DEFAULT_TIMEOUT,
    };
    build_on(backends, base, &request, options, lockfile, &inputs).map(|built| built.entry)
}

/// How long a build a freeze starts may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// Builds `request`'s environment from `inputs`, the lockfile's files at `base`.
fn build_on(
    backends: &Backends,
    base: &crate::freeze::Base,
    request: &BuildRequest,
    options: &Options,
    lockfile: &str,
    inputs: &[(SnapshotFile, String)],
) -> Result<Built, AppError> {
    let recipe = request.recipe;
    let lockfile = lockfile.to_owned();
    let at = built_at(recipe, &lockfile, options, inputs);
    let root = backends.environment_store_dir()?;
    crate::env::check_reachable(&root)?;
    let store = EnvironmentStore::open(&root).map_err(store_error)?;
    let space = store.build_space().map_err(store_error)?;
    let run = BuildRun {
        recipe,
        lockfile: file_name(&lockfile).to_owned(),
        at: at.clone(),
        out: space.out().to_path_buf(),
        inputs: inputs.iter().map(|(file, _)| file.clone()).collect(),
        options: options.clone(),
        timeout: request.timeout,
    };
    let (answer, log) = run::execute(backends, &run)?;
    let stderr = String::from_utf8_lossy(&answer.stderr).into_owned();
    run::check_succeeded(recipe, &lockfile, &answer, &log, &stderr)?;
    let (entry, before) = store
        .add_built(
            &request.name,
            space.out(),
            &at,
            request.replace,
            request.limits,
        )
        .map_err(store_error)?;
    let differs_from = earlier_build(&store, &at, &entry.digest)?;
    let record = BuildRecord {
        at: at.display().to_string(),
        differs_from: differs_from.clone(),
        commit: base.commit.to_hex(),
        environment: entry.digest.clone(),
        inputs: inputs
            .iter()
            .map(|(file, path)| (path.clone(), Digest::of(&file.content)))
            .collect(),
        lockfile,
        recipe: recipe.name().to_owned(),
        registries: log
            .reached
            .iter()
            .map(|reached| format!("{}:{}", reached.host, reached.port))
            .collect(),
        tools: record::tools(&String::from_utf8_lossy(&answer.stdout)),
        ..BuildRecord::of_options(options)
    };
    let written = store
        .write_build_record(&entry.digest, &record.encode())
        .map_err(store_error)?;
    drop(space);
    Ok(Built {
        replaced: before.filter(|before| *before != entry.digest),
        rebuilt: !matches!(written, RecordWritten::Created),
        entry,
        record,
        differs_from,
    })
}

/// An environment built before for the same path (so from the same inputs) that is not
/// `digest`, and the first path at which it differs: a build that did not reproduce.
fn earlier_build(
    store: &EnvironmentStore,
    at: &std::path::Path,
    digest: &Digest,
) -> Result<Option<(Digest, String)>, AppError> {
    let at = at.display().to_string();
    for (earlier, bytes) in store.build_records().map_err(store_error)? {
        if earlier != *digest && BuildRecord::at_of(&bytes).as_deref() == Some(at.as_str()) {
            let path = store
                .first_difference(&earlier, digest)
                .map_err(store_error)?
                .unwrap_or_default();
            return Ok(Some((earlier, path)));
        }
    }
    Ok(None)
}

/// The lockfile and the files beside it the recipe reads, from the base's tree: each as a
/// file of the run's program (by name) and its path in the tree.
fn read_inputs(
    base: &crate::freeze::Base,
    recipe: Recipe,
    lockfile: &str,
) -> Result<Vec<(SnapshotFile, String)>, AppError> {
    if sf_host::contracts::tree_path::check_path(lockfile, None).is_err() {
        return Err(AppError::invalid(
            format!("--lockfile {lockfile:?}"),
            "is a path in the repository's tree, relative and '/'-separated",
        ));
    }
    let tree = base
        .repository
        .tree_at(&base.commit)
        .map_err(|error| AppError::new(error.code(), format!("{}: {error}", base.named)))?;
    let dir = lockfile.rsplit_once('/').map(|(dir, _)| dir);
    let beside = recipe
        .companions()
        .iter()
        .map(|name| dir.map_or_else(|| (*name).to_owned(), |dir| format!("{dir}/{name}")));
    std::iter::once(lockfile.to_owned())
        .chain(beside)
        .map(|path| {
            let bytes = match tree.read(&path) {
                Ok(Some((_, bytes))) => bytes,
                Ok(None) => {
                    return Err(AppError::invalid(
                        format!("{path} at {}", base.named),
                        format!(
                            "is not a file of the tree; the {} recipe reads {} (name another \
                             with --lockfile)",
                            recipe.name(),
                            recipe.default_lockfile()
                        ),
                    ));
                }
                Err(error) => {
                    return Err(AppError::new(
                        error.code(),
                        format!("{path} at {}: {error}", base.named),
                    ));
                }
            };
            if bytes.len() as u64 > MAX_LOCKFILE_BYTES {
                return Err(AppError::invalid(
                    &path,
                    "is larger than 16 MiB, more than a lockfile holds",
                ));
            }
            Ok((SnapshotFile::regular(file_name(&path), bytes), path))
        })
        .collect()
}

/// The groups and extras a build installs, sorted and without repeats, and the toolchain it
/// builds on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Dependency groups.
    pub groups: Vec<String>,
    /// Extras.
    pub extras: Vec<String>,
    /// The toolchain environment (cargo's), verified.
    pub toolchain: Option<EnvironmentEntry>,
}

impl Options {
    /// `groups` and `extras`, sorted and without repeats, checked for `recipe`, and the
    /// stored environment `toolchain` names, which the cargo recipe needs and no other takes.
    pub fn new(
        backends: &Backends,
        recipe: Recipe,
        groups: &[String],
        extras: &[String],
        toolchain: Option<&str>,
    ) -> Result<Self, AppError> {
        recipe.check_options(groups, extras)?;
        let toolchain = match (recipe.needs_toolchain(), toolchain) {
            (true, Some(name)) => Some(crate::env::resolve(backends, name)?),
            (false, None) => None,
            (true, None) => {
                return Err(AppError::invalid(
                    "--recipe cargo",
                    "builds on a toolchain environment holding cargo and rustc: name it with \
                     --toolchain NAME (see checks.md, Rust)",
                ));
            }
            (false, Some(name)) => {
                return Err(AppError::invalid(
                    format!("--toolchain {name}"),
                    format!("the {} recipe builds on no toolchain", recipe.name()),
                ));
            }
        };
        let sorted = |names: &[String]| {
            let mut names = names.to_vec();
            names.sort();
            names.dedup();
            names
        };
        Ok(Self {
            groups: sorted(groups),
            extras: sorted(extras),
            toolchain,
        })
    }
}

/// The path an environment is built for: `/opt/sf-env/<recipe>-<16 hex digits>`, the digits
/// those of the digest of the recipe's script and tool, the lockfile's path, the groups and
/// extras, and the files read.
fn built_at(
    recipe: Recipe,
    lockfile: &str,
    options: &Options,
    inputs: &[(SnapshotFile, String)],
) -> PathBuf {
    let mut key = format!(
        "{}\n{}\n{}\n{}\ngroups {}\nextras {}\ntoolchain {}\n",
        recipe.name(),
        lockfile,
        Digest::of(recipe.script().as_bytes()),
        recipe::UV_VERSION,
        options.groups.join(" "),
        options.extras.join(" "),
        options
            .toolchain
            .as_ref()
            .map(|toolchain| toolchain.digest.to_string())
            .unwrap_or_default(),
    );
    for (file, path) in inputs {
        key.push_str(&format!("{path} {}\n", Digest::of(&file.content)));
    }
    let hex = Digest::of(key.as_bytes()).hex();
    PathBuf::from(format!("{BUILT_AT}/{}-{}", recipe.name(), &hex[..16]))
}

fn file_name(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(_, name)| name)
}
