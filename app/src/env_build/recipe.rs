//! The recipes an environment is built by: for each package tool, the lockfile it reads by
//! default and the files beside it, the registry hosts it reaches, and the script its
//! sandboxed run executes. A recipe's script only ever reads the lockfile's files (copied
//! into the run as its program, read-only) and writes the environment's directory.

use crate::error::AppError;

/// A package tool an environment is built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// A pip requirements file: pinned versions (and hashes, where given) installed into a
    /// venv with no pip of its own.
    Pip,
    /// A `uv.lock` with its `pyproject.toml`: `uv sync --frozen` of the locked dependencies
    /// (the groups and extras asked for), the project itself not installed (it comes from the
    /// tree). uv itself, at [`UV_VERSION`], comes from PyPI into the run's scratch.
    Uv,
    /// An npm `package-lock.json`: `npm ci` with install scripts off, the `node_modules`
    /// beside the manifest and the lockfile.
    Npm,
    /// A crate's `Cargo.lock` with its `Cargo.toml`: a copy of a toolchain environment
    /// (`--toolchain`) with the locked crates vendored beside it (`cargo vendor --locked`)
    /// and the configuration that replaces crates.io with them, so that checks run `cargo
    /// test --offline --locked --config AT/cargo-config.toml`.
    Cargo,
}

/// The recipes by name, in the order messages list them.
pub const RECIPES: [(&str, Recipe); 4] = [
    ("pip", Recipe::Pip),
    ("uv", Recipe::Uv),
    ("npm", Recipe::Npm),
    ("cargo", Recipe::Cargo),
];

/// The uv the `uv` recipe installs (from PyPI, into the build's scratch) and runs.
pub const UV_VERSION: &str = "0.13.9";

impl Recipe {
    /// The recipe named `name`; `uv` and `cargo` are named as not built yet.
    pub fn parse(name: &str) -> Result<Self, AppError> {
        if let Some((_, recipe)) = RECIPES.iter().find(|(known, _)| *known == name) {
            return Ok(*recipe);
        }
        let known = RECIPES.map(|(known, _)| known).join(", ");
        Err(AppError::invalid(
            format!("--recipe {name:?}"),
            format!("is not a recipe; the recipes are {known}"),
        ))
    }

    /// The recipe's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Pip => "pip",
            Self::Uv => "uv",
            Self::Npm => "npm",
            Self::Cargo => "cargo",
        }
    }

    /// The lockfile read when none is named.
    pub fn default_lockfile(self) -> &'static str {
        match self {
            Self::Pip => "requirements.txt",
            Self::Uv => "uv.lock",
            Self::Npm => "package-lock.json",
            Self::Cargo => "Cargo.lock",
        }
    }

    /// The files beside the lockfile the tool reads too (paths in its directory), each
    /// required.
    pub fn companions(self) -> &'static [&'static str] {
        match self {
            Self::Pip => &[],
            Self::Uv => &["pyproject.toml"],
            Self::Npm => &["package.json"],
            Self::Cargo => &["Cargo.toml"],
        }
    }

    /// The registry hosts the tool reaches by default.
    pub fn registries(self) -> &'static [&'static str] {
        match self {
            Self::Pip | Self::Uv => &["pypi.org", "files.pythonhosted.org"],
            Self::Npm => &["registry.npmjs.org"],
            Self::Cargo => &["index.crates.io", "static.crates.io"],
        }
    }

    /// The script the build's run executes with `sh -c`, in the directory of the lockfile's
    /// copy (the run's program), with `SF_ENV` the environment's directory and
    /// `SF_LOCKFILE` the lockfile's name. It first prints a `sf-tool NAME VERSION` line for
    /// each tool it uses, which the build's record keeps.
    pub fn script(self) -> &'static str {
        match self {
            // `--without-pip` and `--no-compile`: no pip and no bytecode of the build's time
            // in the environment, so that the same lockfile gives the same files.
            Self::Pip => {
                r#"set -eu
echo "sf-tool python3 $(python3 -c 'import sys; print(sys.version.split()[0])')"
echo "sf-tool pip $(python3 -m pip --version | cut -d ' ' -f 2)"
python3 -m venv --without-pip "$SF_ENV"
python3 -m pip --python "$SF_ENV/bin/python" install --no-compile --no-cache-dir \
  --disable-pip-version-check --no-input --progress-bar off -r "$SF_LOCKFILE"
find "$SF_ENV" -name __pycache__ -prune -exec rm -rf {} +
"#
            }
            // uv is installed into the scratch (which the run may execute) and syncs a copy
            // of the project there; `SF_GROUPS` and `SF_EXTRAS` hold checked names only.
            Self::Uv => {
                r#"set -eu
echo "sf-tool python3 $(python3 -c 'import sys; print(sys.version.split()[0])')"
python3 -m pip install --no-compile --no-cache-dir --disable-pip-version-check --no-input \
  --progress-bar off --quiet --target /sf/scratch/uv-tool "uv==$SF_UV_VERSION"
uv=/sf/scratch/uv-tool/bin/uv
echo "sf-tool uv $("$uv" --version | cut -d ' ' -f 2)"
mkdir /sf/scratch/project
cp pyproject.toml "$SF_LOCKFILE" /sf/scratch/project/
cd /sf/scratch/project
[ "$SF_LOCKFILE" = uv.lock ] || mv "$SF_LOCKFILE" uv.lock
set --
if [ -n "$SF_GROUPS" ]; then
  set -- --no-default-groups
  for group in $SF_GROUPS; do set -- "$@" --group "$group"; done
fi
for extra in $SF_EXTRAS; do set -- "$@" --extra "$extra"; done
UV_PROJECT_ENVIRONMENT="$SF_ENV" UV_PYTHON_DOWNLOADS=never UV_LINK_MODE=copy \
  UV_CACHE_DIR=/sf/scratch/uv-cache UV_NO_PROGRESS=1 \
  "$uv" sync --frozen --no-install-workspace --system-certs --python /usr/bin/python3 "$@"
find "$SF_ENV" -name __pycache__ -prune -exec rm -rf {} +
"#
            }
            // The toolchain is copied in first (links kept as links: its `bin/cc`), so that a
            // check binds one environment holding both. A crate's targets are not needed to
            // vendor its dependencies: an empty `src/lib.rs` stands in for them.
            Self::Cargo => {
                r#"set -eu
echo "sf-tool cargo $(cargo --version | cut -d ' ' -f 2)"
echo "sf-tool rustc $(rustc --version | cut -d ' ' -f 2)"
cp -RP "$SF_TOOLCHAIN/." "$SF_ENV/"
mkdir -p /sf/scratch/project/src
cp Cargo.toml /sf/scratch/project/Cargo.toml
cp "$SF_LOCKFILE" /sf/scratch/project/Cargo.lock
: > /sf/scratch/project/src/lib.rs
cd /sf/scratch/project
CARGO_HOME=/sf/scratch/cargo-home CARGO_HTTP_CAINFO=/etc/ssl/certs/ca-certificates.crt \
  cargo vendor --locked --versioned-dirs "$SF_ENV/vendor" > /sf/scratch/vendored.toml
printf '[source.crates-io]\nreplace-with = "vendored"\n\n[source.vendored]\ndirectory = "%s/vendor"\n' \
  "$SF_ENV" > "$SF_ENV/cargo-config.toml"
"#
            }
            Self::Npm => {
                r#"set -eu
echo "sf-tool node $(node --version)"
echo "sf-tool npm $(npm --version)"
cp package.json "$SF_ENV/package.json"
cp "$SF_LOCKFILE" "$SF_ENV/package-lock.json"
cd "$SF_ENV"
npm ci --ignore-scripts --no-audit --no-fund --no-update-notifier \
  --cache /sf/scratch/npm-cache --loglevel warn
"#
            }
        }
    }

    /// Whether the build's run executes what it writes to its scratch (uv, installed there).
    pub fn executes_scratch(self) -> bool {
        self == Self::Uv
    }

    /// Whether the recipe builds on a toolchain environment (`--toolchain`): cargo's.
    pub fn needs_toolchain(self) -> bool {
        self == Self::Cargo
    }

    /// Refuses options the recipe has no use for (groups and extras belong to a `uv.lock`)
    /// and names that are not a package index's group or extra names.
    pub fn check_options(self, groups: &[String], extras: &[String]) -> Result<(), AppError> {
        if self == Self::Uv {
            let named = |option: &str, name: &String| -> Result<(), AppError> {
                let fits = !name.is_empty()
                    && name.len() <= 64
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
                if fits {
                    Ok(())
                } else {
                    Err(AppError::invalid(
                        format!("{option} {name:?}"),
                        "a group or an extra is 1 to 64 letters, digits, '.', '_' and '-'",
                    ))
                }
            };
            groups
                .iter()
                .try_for_each(|group| named("--group", group))?;
            extras
                .iter()
                .try_for_each(|extra| named("--extra", extra))?;
            return Ok(());
        }
        let (option, given) = match (groups.first(), extras.first()) {
            (Some(group), _) => ("--group", group),
            (None, Some(extra)) => ("--extra", extra),
            (None, None) => return Ok(()),
        };
        Err(AppError::invalid(
            format!("{option} {given}"),
            format!(
                "the {} recipe installs what its lockfile lists and has no groups or extras; \
                 name a lockfile that lists what the checks need",
                self.name()
            ),
        ))
    }
}
