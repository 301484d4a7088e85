//! The workspace as cargo sees it: `cargo metadata --format-version 1` run by the real cargo
//! (`CARGO`), for the tests of the crate layering and of the release layout.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sf_test_support::build::{cargo, workspace_root};

/// The workspace's packages and the dependencies cargo resolved between them.
pub struct Workspace {
    /// Every package of the workspace, by name, as `cargo metadata` describes it.
    pub packages: BTreeMap<String, Value>,
    /// The names of the default members (what a plain `cargo build` builds).
    pub default_members: BTreeSet<String>,
    /// For each workspace package, the workspace packages it depends on, each with the kinds
    /// of the dependency (`normal`, `build`, `dev`).
    pub edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

impl Workspace {
    /// Runs `cargo metadata` at the workspace root.
    pub fn read() -> Self {
        let output = cargo()
            .args(["metadata", "--format-version", "1", "--manifest-path"])
            .arg(workspace_root().join("Cargo.toml"))
            .output()
            .expect("running cargo metadata");
        assert!(
            output.status.success(),
            "cargo metadata failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_json::from_slice(&output.stdout).expect("metadata JSON");
        let members: BTreeSet<&str> = strings(&metadata["workspace_members"]).collect();
        let name_of: BTreeMap<&str, &str> = metadata["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .map(|package| {
                (
                    package["id"].as_str().expect("an id"),
                    package["name"].as_str().expect("a name"),
                )
            })
            .collect();
        let packages = metadata["packages"]
            .as_array()
            .expect("packages")
            .iter()
            .filter(|package| members.contains(package["id"].as_str().expect("an id")))
            .map(|package| {
                (
                    package["name"].as_str().unwrap().to_owned(),
                    package.clone(),
                )
            })
            .collect();
        let default_members = strings(&metadata["workspace_default_members"])
            .map(|id| name_of[id].to_owned())
            .collect();
        let mut edges = BTreeMap::new();
        for node in metadata["resolve"]["nodes"]
            .as_array()
            .expect("resolve nodes")
        {
            let id = node["id"].as_str().expect("a node id");
            if !members.contains(id) {
                continue;
            }
            let mut deps = BTreeMap::new();
            for dep in node["deps"].as_array().expect("deps") {
                let pkg = dep["pkg"].as_str().expect("a dependency id");
                if !members.contains(pkg) {
                    continue;
                }
                let kinds = dep["dep_kinds"]
                    .as_array()
                    .expect("dep_kinds")
                    .iter()
                    .map(|kind| kind["kind"].as_str().unwrap_or("normal").to_owned())
                    .collect();
                deps.insert(name_of[pkg].to_owned(), kinds);
            }
            edges.insert(name_of[id].to_owned(), deps);
        }
        Self {
            packages,
            default_members,
            edges,
        }
    }

    /// The workspace packages `package` depends on, directly or through others, by normal or
    /// build dependencies (what its library or program is made of; dev-dependencies are not).
    pub fn links(&self, package: &str) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        let mut next = vec![package.to_owned()];
        while let Some(current) = next.pop() {
            for (dep, kinds) in self.edges.get(&current).into_iter().flatten() {
                let linked = kinds.iter().any(|kind| kind != "dev");
                if linked && found.insert(dep.clone()) {
                    next.push(dep.clone());
                }
            }
        }
        found
    }

    /// The kinds of `package`'s targets (`lib`, `cdylib`, `bin`, `custom-build`, …).
    pub fn target_kinds(&self, package: &str) -> BTreeSet<String> {
        self.packages[package]["targets"]
            .as_array()
            .expect("targets")
            .iter()
            .flat_map(|target| {
                strings(&target["kind"])
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// The set of `names`.
pub fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|name| (*name).to_owned()).collect()
}

fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value
        .as_array()
        .expect("an array of strings")
        .iter()
        .map(|item| item.as_str().expect("a string"))
}
