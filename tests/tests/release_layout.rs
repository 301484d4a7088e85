//! A plain `cargo build --release` at the workspace root builds exactly what a user installs,
//! and no test-only plugin can reach `sf`'s default plugin path (the directory of `sf`,
//! where cargo puts what it builds): read from the workspace as cargo sees it.

mod metadata_support;

use std::collections::BTreeSet;

use metadata_support::{Workspace, names};
use sf_test_support::build::TEST_PLUGINS;

/// What a user installs: `sf`, `sf-oats`, `sf-worker`, `sf-serve`, and the git-cli, sandbox-exec (with
/// its launcher), oats, PostgreSQL and reapi plugins.
const INSTALLED: &[&str] = &[
    "sf-cli",
    "sf-oats-cli",
    "sf-git-cli",
    "sf-sandbox-exec",
    "sf-sandbox-exec-plugin",
    "sf-oats-plugin",
    "sf-postgres",
    "sf-reapi-plugin",
    "sf-reapi-worker",
    "sf-serve",
];

/// Plugin libraries that exist for tests and examples only.
const NOT_INSTALLED_PLUGINS: &[&str] = &[
    "sf-test-hostile-plugin",
    "sf-test-backends-plugin",
    "sf-example-out-of-tree-plugin",
];

#[test]
fn a_release_build_builds_exactly_what_a_user_installs() {
    let workspace = Workspace::read();
    assert_eq!(
        workspace.default_members,
        names(INSTALLED),
        "the workspace's default-members"
    );
    for package in
        NOT_INSTALLED_PLUGINS
            .iter()
            .chain(&["sf-tests", "sf-test-support", "sf-examples"])
    {
        assert!(
            !workspace.default_members.contains(*package),
            "{package} is a default member: `cargo build --release` would put it beside sf"
        );
    }
}

/// Every plugin library of the workspace is either installed or known to be for tests and
/// examples only, so a new plugin crate has to be put on one side.
#[test]
fn every_plugin_library_is_installed_or_test_only() {
    let workspace = Workspace::read();
    let plugins: BTreeSet<String> = workspace
        .packages
        .keys()
        .filter(|name| workspace.target_kinds(name).contains("cdylib"))
        .cloned()
        .collect();
    let installed: BTreeSet<String> = plugins
        .intersection(&workspace.default_members)
        .cloned()
        .collect();
    assert_eq!(
        installed,
        names(&[
            "sf-git-cli",
            "sf-sandbox-exec-plugin",
            "sf-oats-plugin",
            "sf-postgres",
            "sf-reapi-plugin"
        ])
    );
    assert_eq!(
        plugins
            .difference(&installed)
            .cloned()
            .collect::<BTreeSet<_>>(),
        names(NOT_INSTALLED_PLUGINS)
    );
}

/// The test plugins have no build script, so no build ever puts their manifest beside the
/// libraries cargo builds (the directory of `sf`): a library without its manifest is never
/// found on the plugin path. The tests install both into a directory of their own.
#[test]
fn test_plugins_have_no_manifest_beside_the_built_libraries() {
    let workspace = Workspace::read();
    let listed: BTreeSet<String> = TEST_PLUGINS
        .iter()
        .map(|plugin| plugin.package.to_owned())
        .collect();
    assert_eq!(
        listed,
        names(&["sf-test-hostile-plugin", "sf-test-backends-plugin"])
    );
    for plugin in TEST_PLUGINS {
        let kinds = workspace.target_kinds(plugin.package);
        assert!(kinds.contains("cdylib"), "{}: {kinds:?}", plugin.package);
        assert!(
            !kinds.contains("custom-build"),
            "{} has a build script: it would put its manifest beside sf",
            plugin.package
        );
    }
}
