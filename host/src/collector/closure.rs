//! The collector closure: which code wrote a record.
//!
//! Computed at build time by `host/build.rs` over the collector's own source files (every
//! module file the collector declares or names, transitively, without `lib.rs`) and the sf
//! version. A recipe pins it, the collector refuses a recipe that pins another, and every
//! observation names it, so records are never attributed to other code. Any change to one
//! of [`collector_sources`] changes it: recipes pinned with the old closure are refused and
//! their Verdicts must be re-established under a new Slice revision.

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
            "host/src/collector/mod.rs",
            "host/src/collector/closure.rs",
            "host/src/collector/placement.rs",
            "host/src/assurance/observation.rs",
            "host/src/assurance/pins.rs",
            "contracts/src/executor.rs",
            "contracts/src/evidence_store.rs",
            "contracts/src/gate.rs",
            "host/src/fence.rs",
            "contracts/src/canonical.rs",
            "contracts/src/snapshot.rs",
            "io/src/private_dir.rs",
        ] {
            assert!(paths.contains(&expected), "{expected} is not in {paths:?}");
        }
        for path in &paths {
            assert!(
                !path.starts_with("host/src/plugin/")
                    && !path.starts_with("cli/")
                    && *path != "host/src/lib.rs",
                "{path} is in the closure"
            );
        }
        let mut sorted = paths.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, paths);
    }
}
