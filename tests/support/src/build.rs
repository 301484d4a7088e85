//! Building another package's plugin library or programs for a test, and the directory that
//! test-only plugins are installed in.
//!
//! `cargo test` does not promise to build a dependency's `cdylib`, nor a binary of another
//! package, so a test that loads one runs `cargo build` (once per test process, behind a
//! `OnceLock` of the caller's) into the same target directory the test itself was built in,
//! found from the test executable's path: `<target>/<profile>/deps/<test>`. Cargo's own lock
//! serialises it with any other build; once everything is fresh it takes a fraction of a
//! second.
//!
//! **Test-only plugins** (the packages in [`TEST_PLUGINS`]) have no build script, so nothing
//! puts their manifest beside the libraries cargo builds, which is the directory of `sf` and
//! the first entry of its default plugin path: there the library alone is never found. The
//! tests install library and manifest together into [`test_plugin_dir`] and name that
//! directory (`SF_PLUGIN_PATH`, or a plugin path of their own) where they want them found.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A plugin that exists only for tests.
#[derive(Clone, Copy, Debug)]
pub struct TestPlugin {
    /// Its package.
    pub package: &'static str,
    /// Its directory, relative to the workspace root; `sf-plugin.json` is there.
    pub dir: &'static str,
}

/// The deliberately hostile plugin (wrong magic, panics, garbage replies).
pub const HOSTILE_PLUGIN: TestPlugin = TestPlugin {
    package: "sf-test-hostile-plugin",
    dir: "tests/hostile-plugin",
};

/// sf's own SQLite EvidenceStore and file Gate exported as a plugin (`test-sqlite`,
/// `test-file-gate`).
pub const BACKENDS_PLUGIN: TestPlugin = TestPlugin {
    package: "sf-test-backends-plugin",
    dir: "tests/backends-plugin",
};

/// Every test-only plugin of the workspace.
pub const TEST_PLUGINS: &[TestPlugin] = &[HOSTILE_PLUGIN, BACKENDS_PLUGIN];

/// The name of the directory under `<target>/<profile>/` that test-only plugins are
/// installed in.
pub const TEST_PLUGIN_DIR: &str = "sf-test-plugins";

/// The workspace root (two levels above this crate).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("sf-test-support lives in <workspace>/tests/support")
}

/// The real cargo: the one running the tests (`CARGO`), else the one that built this crate.
pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into()))
}

/// `<target>/<profile>`: the directory this test executable was built for.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable lives in <target>/<profile>/deps")
        .to_path_buf()
}

/// The path of `crate_name`'s dynamic library in `dir`.
pub fn library(dir: &Path, crate_name: &str) -> PathBuf {
    dir.join(format!(
        "{}{crate_name}{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

/// Runs `cargo build` of `packages` with `targets` (cargo's target selection flags) into the
/// target directory and profile this test was built in, and returns `<target>/<profile>`.
/// Name the calling test's own package among `packages`, so that shared dependencies resolve
/// to the same features as in the test build itself and are not compiled a second time.
pub fn cargo_build(packages: &[&str], targets: &[&str]) -> PathBuf {
    let dir = profile_dir();
    let target = dir.parent().expect("<target>/<profile>");
    let profile = dir
        .file_name()
        .and_then(|name| name.to_str())
        .expect("a UTF-8 profile directory name");
    let workspace = workspace_root();
    let mut command = cargo();
    command
        .current_dir(workspace)
        .arg("build")
        .arg("--quiet")
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target);
    for package in packages {
        command.arg("-p").arg(package);
    }
    command.args(targets);
    match profile {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    let output = command.output().expect("running cargo build");
    assert!(
        output.status.success(),
        "cargo build of {packages:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    dir
}

/// Takes group and other write permission away from `path`: sf refuses plugin files,
/// launchers and their directories that others may write, and under a umask of 002 cargo's
/// outputs are group-writable, so the tests must not depend on the umask of whoever runs them.
pub fn strip_group_write(path: &Path) {
    let mode = std::fs::metadata(path)
        .unwrap_or_else(|error| panic!("{} was not built: {error}", path.display()))
        .permissions()
        .mode();
    if mode & 0o022 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & !0o022))
            .expect("chmod go-w on a built artifact");
    }
}

/// Builds a plugin's library with `cargo build` of `packages` (the plugin's package, the
/// calling test's own, and any whose programs the plugin needs) and `targets` (`--lib` is
/// added), makes the library and its directory writable by no one else, and returns the
/// library `lib<crate_name>.so` in `<target>/<profile>`. Call it once per test process
/// (behind a `OnceLock`).
pub fn plugin_library(packages: &[&str], targets: &[&str], crate_name: &str) -> PathBuf {
    let targets: Vec<&str> = ["--lib"].iter().chain(targets).copied().collect();
    let dir = cargo_build(packages, &targets);
    let library = library(&dir, crate_name);
    strip_group_write(&dir);
    strip_group_write(&library);
    library
}

/// `<profile>/sf-test-plugins`: where test-only plugins are installed, off the default
/// plugin path of the `sf` in `<profile>`.
pub fn test_plugin_dir(profile: &Path) -> PathBuf {
    profile.join(TEST_PLUGIN_DIR)
}

impl TestPlugin {
    /// The crate name of its library (the package name with `-` as `_`).
    pub fn crate_name(&self) -> String {
        self.package.replace('-', "_")
    }

    /// Installs the library cargo built in `profile` and the package's `sf-plugin.json`
    /// beside it into [`test_plugin_dir`], and returns the installed library's path. Files
    /// already holding the same bytes are left alone (another test process may have the
    /// library open); others are replaced by a rename, never rewritten in place. A manifest
    /// that an older build script left beside the built library is removed, so the default
    /// plugin path of the `sf` in `profile` never finds a test plugin. `profile` is made
    /// writable by no one else, as the loader requires of every directory above a plugin.
    pub fn install(&self, profile: &Path) -> PathBuf {
        self.install_in(profile, TEST_PLUGIN_DIR)
    }

    /// [`TestPlugin::install`] into `<profile>/<dir>`: callers that build the plugin with
    /// another set of packages (so, through cargo's feature unification, other bytes) install
    /// it in a directory of their own, so that two test processes never replace each other's
    /// library while the other loads it.
    pub fn install_in(&self, profile: &Path, dir: &str) -> PathBuf {
        strip_group_write(profile);
        let dir = profile.join(dir);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => panic!("creating {}: {error}", dir.display()),
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
            .expect("chmod 755 on the test plugin directory");
        let name = self.crate_name();
        let built = library(profile, &name);
        let library_bytes = std::fs::read(&built)
            .unwrap_or_else(|error| panic!("{} was not built: {error}", built.display()));
        let manifest_source = workspace_root().join(self.dir).join("sf-plugin.json");
        let manifest_bytes = std::fs::read(&manifest_source)
            .unwrap_or_else(|error| panic!("reading {}: {error}", manifest_source.display()));
        let installed = library(&dir, &name);
        let manifest = dir.join(format!("lib{name}.sf-plugin.json"));
        publish(&installed, &library_bytes, 0o755);
        publish(&manifest, &manifest_bytes, 0o644);
        let stale = profile.join(format!("lib{name}.sf-plugin.json"));
        match std::fs::remove_file(&stale) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => panic!("removing the stale {}: {error}", stale.display()),
        }
        installed
    }
}

/// Makes `path` hold exactly `bytes` with `mode`: left alone (not even touched) if it already
/// does, otherwise written to a temporary file beside it and renamed over it.
fn publish(path: &Path, bytes: &[u8], mode: u32) {
    let same = std::fs::read(path).is_ok_and(|existing| existing == bytes);
    if !same {
        let dir = path.parent().expect("a file in a directory");
        let mut staged = tempfile::NamedTempFile::new_in(dir).expect("a temporary file");
        staged.write_all(bytes).expect("writing a test plugin file");
        // The mode is set before the rename: a chmod of the published file would move its
        // change time while another test process copies it, and the loader refuses that.
        staged
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))
            .expect("chmod on a staged test plugin file");
        staged
            .persist(path)
            .unwrap_or_else(|error| panic!("installing {}: {error}", path.display()));
    }
    // Only when it differs (a file of the same bytes left by an older install): a chmod moves
    // the file's change time even to the same mode, and the loader refuses a library whose
    // change time moved while it was copied (another test process installing the same bytes
    // would make this one's load fail).
    let current = std::fs::metadata(path).expect("a published test plugin file");
    if current.permissions().mode() & 0o7777 != mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .expect("chmod on a test plugin file");
    }
}
