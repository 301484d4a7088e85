//! Where sf keeps its state, as `sf oats` and the oats gate both choose it.

use std::path::{Path, PathBuf};

/// The state directory: `explicit`, else `$SF_STATE_DIR`, else `$XDG_STATE_HOME/sf`, else
/// `$HOME/.local/state/sf`; `None` when none of them is set.
pub fn state_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(dir) = explicit {
        return Some(dir.to_path_buf());
    }
    if let Some(dir) = std::env::var_os("SF_STATE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("sf"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|home| PathBuf::from(home).join(".local/state/sf"))
}
