//! The plugin path and discovery: which directories are searched, in which order, and the
//! manifests found there. Discovery reads manifest files only; no library is opened.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::error::PluginError;
use super::loader::read_manifest_file;
use super::manifest::{self, MANIFEST_SUFFIX, PluginManifest};

/// The environment variable naming more plugin directories, separated by `:`.
pub const PLUGIN_PATH_ENV: &str = "SF_PLUGIN_PATH";

/// The directories searched for plugins, in order: first match wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginPath {
    dirs: Vec<PathBuf>,
}

/// One manifest file found on the plugin path.
#[derive(Clone, Debug)]
pub struct Discovered {
    /// The manifest file.
    pub manifest_file: PathBuf,
    /// The library it describes (which may be missing).
    pub library: PathBuf,
    /// The manifest, or why it cannot be used.
    pub manifest: Result<PluginManifest, PluginError>,
}

impl PluginPath {
    /// A plugin path of exactly `dirs`, in order.
    pub fn new(dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        Self {
            dirs: dirs.into_iter().collect(),
        }
    }

    /// sf's plugin path: the directory of the running executable, then each entry of
    /// `SF_PLUGIN_PATH`.
    pub fn from_env() -> Result<Self, PluginError> {
        let exe = std::env::current_exe()
            .and_then(std::fs::canonicalize)
            .map_err(|error| PluginError::PluginPath {
                path: PathBuf::from("(the running executable)"),
                detail: format!("its location cannot be found: {error}"),
            })?;
        let exe_dir = exe.parent().map(Path::to_path_buf);
        Self::from_parts(exe_dir, std::env::var_os(PLUGIN_PATH_ENV).as_deref())
    }

    /// The plugin path made of `exe_dir` (if any), then the entries of `env` (the value of
    /// `SF_PLUGIN_PATH`). Empty entries are skipped; relative ones are refused, because a
    /// plugin path that depends on the working directory loads whatever is lying there.
    pub fn from_parts(exe_dir: Option<PathBuf>, env: Option<&OsStr>) -> Result<Self, PluginError> {
        let mut dirs: Vec<PathBuf> = exe_dir.into_iter().collect();
        if let Some(env) = env {
            for entry in env.as_bytes().split(|&b| b == b':') {
                if entry.is_empty() {
                    continue;
                }
                let path = PathBuf::from(OsStr::from_bytes(entry));
                if !path.is_absolute() {
                    return Err(PluginError::PluginPath {
                        path,
                        detail: format!(
                            "{PLUGIN_PATH_ENV} entries must be absolute directories; fix \
                             {PLUGIN_PATH_ENV}"
                        ),
                    });
                }
                dirs.push(path);
            }
        }
        Ok(Self { dirs })
    }

    /// The directories, in search order.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// Every manifest file in every directory, in search order (directories in order, files
    /// by name). A directory that cannot be read is an error: a plugin path that silently
    /// skips a directory would load another plugin than the one meant.
    pub fn discover(&self) -> Result<Vec<Discovered>, PluginError> {
        let mut found = Vec::new();
        let mut seen: Vec<PathBuf> = Vec::new();
        for dir in &self.dirs {
            let unreadable = |detail: String| PluginError::PluginPath {
                path: dir.clone(),
                detail: format!(
                    "cannot read this plugin directory ({detail}); fix {PLUGIN_PATH_ENV} or the \
                     directory's permissions"
                ),
            };
            let canonical = std::fs::canonicalize(dir).map_err(|e| unreadable(e.to_string()))?;
            if seen.contains(&canonical) {
                continue;
            }
            seen.push(canonical);
            let mut names = Vec::new();
            for entry in std::fs::read_dir(dir).map_err(|e| unreadable(e.to_string()))? {
                let entry = entry.map_err(|e| unreadable(e.to_string()))?;
                let name = entry.file_name();
                if name.as_bytes().ends_with(MANIFEST_SUFFIX.as_bytes()) {
                    names.push(name);
                }
            }
            names.sort();
            for name in names {
                let manifest_file = dir.join(&name);
                let Some(library) = manifest::library_path(&manifest_file) else {
                    continue;
                };
                let manifest = read_manifest_file(&library).map(|(manifest, _)| manifest);
                found.push(Discovered {
                    manifest_file,
                    library,
                    manifest,
                });
            }
        }
        Ok(found)
    }
}

/// The first usable plugin in `found` that serves `tag` under `contract`.
pub fn find<'a>(found: &'a [Discovered], contract: &str, tag: &str) -> Option<&'a Discovered> {
    found.iter().find(|candidate| {
        candidate
            .manifest
            .as_ref()
            .is_ok_and(|manifest| manifest.provides(contract, tag))
    })
}

/// Every tag served under `contract` by a usable plugin in `found`, with the plugin's name and
/// library, in search order.
pub fn tags<'a>(found: &'a [Discovered], contract: &str) -> Vec<(&'a str, &'a str, &'a Path)> {
    let mut tags = Vec::new();
    for candidate in found {
        if let Ok(manifest) = &candidate.manifest {
            for tag in manifest.tags(contract) {
                tags.push((
                    tag.as_str(),
                    manifest.name.as_str(),
                    candidate.library.as_path(),
                ));
            }
        }
    }
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_from_parts() {
        let path =
            PluginPath::from_parts(Some("/exe".into()), Some(OsStr::new("/a::/b:"))).unwrap();
        assert_eq!(
            path.dirs(),
            [PathBuf::from("/exe"), "/a".into(), "/b".into()]
        );
        assert_eq!(
            PluginPath::from_parts(None, Some(OsStr::new("/a:rel")))
                .unwrap_err()
                .code(),
            "plugin-path"
        );
    }

    #[test]
    fn unreadable_directory_is_an_error() {
        let path = PluginPath::new([PathBuf::from("/nonexistent/sf-plugins")]);
        assert_eq!(path.discover().unwrap_err().code(), "plugin-path");
    }
}
