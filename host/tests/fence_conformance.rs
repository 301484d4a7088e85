//! The AttemptFence conformance suite against the file fence, one test per case, twice:
//! linked, and exported by the test plugin sf-test-backends-plugin (tag `test-file-fence`)
//! loaded through the real loader and adapter. Real fence directories, real `flock`s, and a
//! real holder process killed with SIGKILL.

mod support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sf_host::fence::{AttemptFence, FenceHold, FileFence};
use sf_host::plugin::{PluginFence, load};
use sf_sdk::conformance::fence::{CANDIDATE, Harness, candidate};
use sf_test_support::fence::{HOLDER_ENV, PRODUCT_ENV, announce_and_wait, kill_a_holder};

/// The file fence of one case, in a fresh private directory kept until the harness (which
/// each case gets its own of) is dropped.
#[derive(Default)]
struct FileHarness {
    /// Whether handles are the plugin's (loaded) or this process's own (linked).
    loaded: bool,
    dir: Mutex<Option<(tempfile::TempDir, PathBuf)>>,
}

impl FileHarness {
    fn loaded() -> Self {
        Self {
            loaded: true,
            ..Self::default()
        }
    }

    /// A handle on the fence in `root`, linked or loaded.
    fn handle(&self, root: &Path) -> Arc<dyn AttemptFence> {
        if self.loaded {
            let plugin = load(support::backends_plugin()).unwrap_or_else(|error| panic!("{error}"));
            Arc::new(
                PluginFence::new(&plugin, "test-file-fence", &support::path_section(root))
                    .unwrap_or_else(|error| panic!("{error}")),
            )
        } else {
            Arc::new(FileFence::open(root).unwrap_or_else(|error| panic!("{error}")))
        }
    }

    /// The directory of the case's fence (each case makes one).
    fn root_of(&self, _fence: &Arc<dyn AttemptFence>) -> PathBuf {
        self.dir
            .lock()
            .unwrap()
            .as_ref()
            .expect("a fresh fence")
            .1
            .clone()
    }
}

impl Harness for FileHarness {
    fn fresh_fence(&self) -> Arc<dyn AttemptFence> {
        let (dir, parent) = sf_test_support::private_dir();
        let root = parent.join("fence");
        let fence = self.handle(&root);
        *self.dir.lock().unwrap() = Some((dir, root));
        fence
    }

    fn another_handle(&self, fence: &Arc<dyn AttemptFence>) -> Arc<dyn AttemptFence> {
        self.handle(&self.root_of(fence))
    }

    fn lose(&self, fence: &Arc<dyn AttemptFence>, hold: &dyn FenceHold) -> bool {
        // The lock file replaced behind the holder's back: its flock excludes no one now.
        let handle = FileFence::open(&self.root_of(fence)).unwrap();
        // The suite's cases lose holds of its own Candidate.
        let lock = handle
            .lock_path(&hold.attempt().product, &candidate(CANDIDATE))
            .unwrap();
        std::fs::remove_file(&lock).unwrap();
        std::fs::write(&lock, b"").unwrap();
        true
    }

    fn kill_a_holder(&self, fence: &Arc<dyn AttemptFence>, product: &str) -> u64 {
        let root = self.root_of(fence);
        kill_a_holder("file_fence_holder", root.to_str().unwrap(), product)
    }
}

/// The holder process of `kill_a_holder` (this binary re-executed); a no-op otherwise.
#[test]
fn file_fence_holder() {
    let (Some(root), Some(product)) = (
        std::env::var_os(HOLDER_ENV),
        std::env::var(PRODUCT_ENV).ok(),
    ) else {
        return;
    };
    let fence = FileFence::open(Path::new(&root)).unwrap();
    let hold = fence.acquire(&product, &candidate(CANDIDATE)).unwrap();
    announce_and_wait(hold.attempt().epoch);
}

mod file_linked {
    sf_sdk::fence_conformance!(super::FileHarness::default);
}

mod file_loaded {
    sf_sdk::fence_conformance!(super::FileHarness::loaded);
}
