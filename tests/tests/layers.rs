//! The crates depend on each other in one direction only, as cargo resolves them (normal and
//! build dependencies, directly or through other crates; dev-dependencies never reach a
//! library or program):
//!
//! - sf-contracts depends on no sf crate; sf-plugin-abi on sf-contracts alone;
//! - sf-io and sf-git never on the host (sf-host) or the command line (sf-cli);
//! - sf-sdk and every plugin crate (their plugin and program packages, and the out-of-tree
//!   example) never on sf-host or sf-cli;
//! - sf-test-support on no backend and not on the host, so backend crates can dev-depend on
//!   it;
//! - sf-candidate on sf-contracts alone, and sf-collector (the collector closure) on
//!   sf-candidate, sf-contracts and sf-io alone;
//! - sf-app (the use cases) on sf-host and never on the command line, and sf-cli on sf-app;
//!
//! and the out-of-tree example plugin's library, as the tests build it, carries no SQLite and
//! no clap (which sf-host and sf-cli would bring). No crate's `src/` grows past what one
//! person can hold (20,000 non-empty lines).

mod metadata_support;
mod source_files;

use std::collections::BTreeSet;

use metadata_support::{Workspace, names};
use source_files::non_empty_lines;

/// The sf crates `package` links, directly or through others.
fn sf_links(workspace: &Workspace, package: &str) -> BTreeSet<String> {
    workspace
        .links(package)
        .into_iter()
        .filter(|name| name.starts_with("sf-"))
        .collect()
}

/// Asserts that `package` links neither the host, the use cases nor the command line.
fn assert_off_the_host(workspace: &Workspace, package: &str) {
    let links = sf_links(workspace, package);
    for host in ["sf-host", "sf-app", "sf-cli"] {
        assert!(!links.contains(host), "{package} links {host}: {links:?}");
    }
}

#[test]
fn the_contracts_and_the_abi_depend_only_downwards() {
    let workspace = Workspace::read();
    assert_eq!(
        sf_links(&workspace, "sf-contracts"),
        names(&[]),
        "sf-contracts"
    );
    assert_eq!(
        sf_links(&workspace, "sf-plugin-abi"),
        names(&["sf-contracts"]),
        "sf-plugin-abi"
    );
}

#[test]
fn io_and_git_do_not_depend_on_the_host() {
    let workspace = Workspace::read();
    for package in ["sf-io", "sf-git"] {
        assert_off_the_host(&workspace, package);
    }
}

#[test]
fn the_sdk_and_the_plugins_do_not_depend_on_the_host() {
    let workspace = Workspace::read();
    let plugins = [
        "sf-sdk",
        "sf-git-cli",
        "sf-sandbox-exec",
        "sf-sandbox-exec-plugin",
        "sf-oats",
        "sf-oats-cli",
        "sf-oats-plugin",
        "sf-example-out-of-tree-plugin",
        "sf-reapi",
        "sf-reapi-plugin",
        "sf-reapi-worker",
    ];
    for package in plugins {
        assert!(
            workspace.packages.contains_key(package),
            "{package} is not a workspace package any more: update this test"
        );
        assert_off_the_host(&workspace, package);
    }
}

/// The crates outside the workspace that `package` and the workspace crates it links declare
/// as normal or build dependencies.
fn external_dependencies(workspace: &Workspace, package: &str) -> BTreeSet<String> {
    let mut packages = workspace.links(package);
    packages.insert(package.to_owned());
    packages
        .iter()
        .flat_map(|name| {
            workspace.packages[name]["dependencies"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|dependency| dependency["kind"].as_str() != Some("dev"))
        .filter_map(|dependency| dependency["name"].as_str().map(str::to_owned))
        .filter(|name| !workspace.packages.contains_key(name))
        .collect()
}

/// The gRPC stack of remote execution stays inside its plugin and worker: the contracts, the
/// host and the command line never link it (a change to it rebuilds neither, and `sf` carries
/// no HTTP/2 client).
#[test]
fn the_contracts_the_host_and_the_command_line_link_no_grpc() {
    let workspace = Workspace::read();
    let heavy = ["tonic", "prost", "tokio", "bazel-remote-apis"];
    let plugin = external_dependencies(&workspace, "sf-reapi-plugin");
    assert!(
        heavy.iter().all(|name| plugin.contains(*name)),
        "the reapi plugin declares the gRPC stack: {plugin:?}"
    );
    for package in [
        "sf-contracts",
        "sf-plugin-abi",
        "sf-host",
        "sf-app",
        "sf-cli",
    ] {
        let linked = external_dependencies(&workspace, package);
        for name in heavy {
            assert!(
                !linked.contains(name),
                "{package} links {name}, which only the reapi plugin and worker may"
            );
        }
        assert!(
            !workspace.links(package).contains("sf-reapi"),
            "{package} links sf-reapi"
        );
    }
}

/// The collector's closure is a crate boundary: sf-collector links only what a sealed
/// Candidate is (sf-candidate), the records and encodings (sf-contracts) and file access
/// (sf-io), never the host (its integration, delivery, import and plugin loader) or the
/// command line; and the closure covers exactly those crates' sources.
#[test]
fn the_collector_closure_is_its_crate_and_what_it_links() {
    let workspace = Workspace::read();
    assert_eq!(
        sf_links(&workspace, "sf-candidate"),
        names(&["sf-contracts"]),
        "sf-candidate"
    );
    assert_eq!(
        sf_links(&workspace, "sf-collector"),
        names(&["sf-candidate", "sf-contracts", "sf-io"]),
        "sf-collector"
    );
    let roots: BTreeSet<String> = sf_host::collector::collector_sources()
        .iter()
        .map(|(path, _)| path.split('/').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        roots,
        names(&["collector", "candidate", "contracts", "io"]),
        "the directories of the closure's files"
    );
}

/// The use cases sit between the host and the command line: sf-app links sf-host and never
/// sf-cli (or clap: a use case knows no flags' parser), sf-cli links sf-app, and the host
/// links neither (what composes the core is not part of it).
#[test]
fn the_use_cases_sit_between_the_host_and_the_command_line() {
    let workspace = Workspace::read();
    let app = sf_links(&workspace, "sf-app");
    assert!(app.contains("sf-host"), "sf-app links sf-host: {app:?}");
    assert!(!app.contains("sf-cli"), "sf-app links sf-cli: {app:?}");
    assert!(
        !external_dependencies(&workspace, "sf-app").contains("clap"),
        "sf-app links clap"
    );
    let cli = sf_links(&workspace, "sf-cli");
    assert!(cli.contains("sf-app"), "sf-cli links sf-app: {cli:?}");
    let host = sf_links(&workspace, "sf-host");
    for above in ["sf-app", "sf-cli"] {
        assert!(!host.contains(above), "sf-host links {above}: {host:?}");
    }
}

/// The most non-empty lines the `.rs` files of one crate's `src/` may hold.
const MAX_CRATE_LINES: usize = 20_000;

#[test]
fn no_crate_holds_more_than_twenty_thousand_lines() {
    let workspace = Workspace::read();
    let mut sizes = Vec::new();
    for (name, package) in &workspace.packages {
        let manifest = std::path::Path::new(package["manifest_path"].as_str().unwrap());
        let lines = non_empty_lines(&manifest.parent().unwrap().join("src"));
        sizes.push((lines, name.clone()));
    }
    sizes.sort();
    println!("non-empty lines of each crate's src/: {sizes:?}");
    let host = sizes.iter().find(|(_, name)| name == "sf-host");
    assert!(host.is_some_and(|(lines, _)| *lines > 1_000), "{sizes:?}");
    let over: Vec<_> = sizes
        .iter()
        .filter(|(lines, _)| *lines > MAX_CRATE_LINES)
        .collect();
    assert!(over.is_empty(), "over {MAX_CRATE_LINES} lines: {over:?}");
}

/// A proof without evidence (`Verified::assumed`, sf-collector's feature `testing`) is for
/// sf's own tests: only sf-tests enables the feature, so no package a user builds (the `sf`
/// binary, a plugin, the examples) can make one.
#[test]
fn only_the_tests_can_assume_a_proof() {
    let workspace = Workspace::read();
    let enabling: BTreeSet<String> = workspace
        .packages
        .iter()
        .filter(|(_, package)| {
            package["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|dependency| {
                    dependency["name"] == "sf-collector"
                        && dependency["features"]
                            .as_array()
                            .is_some_and(|features| features.iter().any(|f| f == "testing"))
                })
        })
        .map(|(name, _)| name.clone())
        .collect();
    assert_eq!(enabling, names(&["sf-tests"]));
}

#[test]
fn the_test_support_depends_on_no_backend() {
    let workspace = Workspace::read();
    let links = sf_links(&workspace, "sf-test-support");
    assert_eq!(
        links,
        names(&["sf-sdk", "sf-contracts", "sf-plugin-abi"]),
        "sf-test-support"
    );
}

/// How often `needle` occurs in `haystack`.
fn count(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .filter(|window| *window == needle)
        .count()
}

#[test]
fn the_example_plugin_carries_no_sqlite_and_no_clap() {
    let library = &sf_tests::plugins::built().example;
    let bytes = std::fs::read(library).expect("the example plugin library");
    println!(
        "{}: {} bytes ({:.2} MB)",
        library.display(),
        bytes.len(),
        bytes.len() as f64 / 1e6
    );
    for needle in ["sqlite3_", "clap", "rusqlite", "sf_host"] {
        assert_eq!(
            count(&bytes, needle.as_bytes()),
            0,
            "{} contains {needle:?}",
            library.display()
        );
    }
}

/// The HTTP stack of `sf serve` stays in sf-serve: it builds on the use cases (sf-app), and
/// neither the host, the use cases nor the `sf` binary link axum, hyper or tokio through it.
#[test]
fn the_serve_http_stack_stays_in_sf_serve() {
    let workspace = Workspace::read();
    let serve = sf_links(&workspace, "sf-serve");
    assert!(serve.contains("sf-app"), "sf-serve links sf-app: {serve:?}");
    assert!(
        !serve.contains("sf-cli"),
        "sf-serve links sf-cli: {serve:?}"
    );
    let linked = external_dependencies(&workspace, "sf-serve");
    assert!(linked.contains("axum"), "{linked:?}");
    for package in ["sf-host", "sf-app", "sf-cli"] {
        assert!(
            !workspace.links(package).contains("sf-serve"),
            "{package} links sf-serve"
        );
        let linked = external_dependencies(&workspace, package);
        for name in ["axum", "hyper", "tokio"] {
            assert!(!linked.contains(name), "{package} links {name}");
        }
    }
}
