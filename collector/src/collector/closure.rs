//! The collector closure: which code wrote a record.
//!
//! Computed at build time by `collector/build.rs` over every source file of this crate
//! (sf-collector) and of the sf crates it depends on (sf-candidate, sf-contracts, sf-io), and
//! the sf version. A recipe pins it, the collector refuses a recipe that pins another, and
//! every observation names it, so records are never attributed to other code. Any change to
//! one of [`collector_sources`] changes it: recipes pinned with the old closure are refused
//! and their Verdicts must be re-established under a new Slice revision. An edit anywhere
//! else (integration, delivery, import, the plugin host, the command line) cannot change it:
//! Cargo keeps the collector from using that code at all.

use crate::canonical::Digest;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/collector_closure.rs"));
}

/// The name of the collector in the closure document.
pub const COLLECTOR_NAME: &str = "sf-repository-collector/1";

/// The collector closure of this build.
pub fn collector_closure() -> Digest {
    Digest::parse(generated::COLLECTOR_CLOSURE).expect("build.rs writes a sha256: digest")
}

/// The files of the closure (paths relative to the workspace) with their digests, as
/// they were when this build was made.
pub fn collector_sources() -> &'static [(&'static str, &'static str)] {
    generated::COLLECTOR_SOURCES
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{self, Value, object};

    #[test]
    fn the_closure_is_the_canonical_digest_of_the_sources_on_disk() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let files = collector_sources()
            .iter()
            .map(|(path, recorded)| {
                let bytes = std::fs::read(root.join(path)).unwrap();
                let digest = Digest::of(&bytes).to_string();
                assert_eq!(&digest, recorded, "{path} changed since the build");
                object([("path", (*path).into()), ("sha256", digest.into())])
            })
            .collect();
        let document = object([
            ("collector", COLLECTOR_NAME.into()),
            ("files", Value::Array(files)),
            ("sf", crate::SF_VERSION.into()),
        ]);
        assert_eq!(canonical::digest(&document).unwrap(), collector_closure());
    }

    #[test]
    fn the_closure_holds_the_collector_and_what_it_loads_and_nothing_of_the_host_shell() {
        let paths: Vec<&str> = collector_sources().iter().map(|(path, _)| *path).collect();
        for expected in [
            "collector/src/collector/mod.rs",
            "collector/src/collector/closure.rs",
            "collector/src/collector/placement.rs",
            "collector/src/assurance/observation.rs",
            "collector/src/assurance/pins.rs",
            "collector/src/assurance/judge.rs",
            "collector/src/fence.rs",
            "candidate/src/manifest.rs",
            "contracts/src/executor.rs",
            "contracts/src/evidence_store.rs",
            "contracts/src/gate.rs",
            "contracts/src/canonical.rs",
            "contracts/src/snapshot.rs",
            "io/src/private_dir.rs",
        ] {
            assert!(paths.contains(&expected), "{expected} is not in {paths:?}");
        }
        // Only these crates' sources: nothing of the host (its repository's integration,
        // delivery and import, its plugin loader), the command line or a backend.
        for path in &paths {
            assert!(
                [
                    "collector/src/",
                    "candidate/src/",
                    "contracts/src/",
                    "io/src/"
                ]
                .iter()
                .any(|root| path.starts_with(root)),
                "{path} is in the closure"
            );
            for word in [
                "integration",
                "delivery",
                "deliver",
                "import",
                "plugin",
                "landing",
            ] {
                assert!(!path.contains(word), "{path} is in the closure");
            }
        }
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, paths);
    }

    /// Every source file of the four crates is listed, and nothing else: the closure is the
    /// crates, not a walk of the module graph a new `use` could widen or narrow.
    #[test]
    fn the_closure_is_every_source_file_of_the_collectors_crates() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut on_disk = Vec::new();
        for crate_dir in ["collector", "candidate", "contracts", "io"] {
            let mut stack = vec![root.join(crate_dir).join("src")];
            while let Some(dir) = stack.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        stack.push(path);
                    } else if path.extension().is_some_and(|ext| ext == "rs") {
                        let relative = path.strip_prefix(&root).unwrap();
                        on_disk.push(relative.to_str().unwrap().to_owned());
                    }
                }
            }
        }
        on_disk.sort_unstable();
        let listed: Vec<&str> = collector_sources().iter().map(|(path, _)| *path).collect();
        assert_eq!(listed, on_disk);
    }
}
