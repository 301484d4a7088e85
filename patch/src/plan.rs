//! Which paths each patch reads, writes and removes. Refuses, before any content is read: a
//! path written or removed twice (a deletion followed by a creation of the same path, which is
//! how Git writes a type change, is the one overlap allowed), and a path beneath a symbolic
//! link or beneath a file, in the base or in the result.

use std::collections::{BTreeMap, HashSet};

use crate::base::Base;
use crate::path::parents;
use crate::{FilePatch, Mode, Operation, PatchError};

pub(crate) struct Plan {
    /// Path → index of the patch that leaves an entry there.
    pub(crate) writes: BTreeMap<String, usize>,
    /// Path → index of the patch that takes the base's entry away (deletion, rename).
    pub(crate) removes: BTreeMap<String, usize>,
}

impl Plan {
    pub(crate) fn new(patches: &[FilePatch]) -> Result<Plan, PatchError> {
        let mut plan = Plan {
            writes: BTreeMap::new(),
            removes: BTreeMap::new(),
        };
        for (i, patch) in patches.iter().enumerate() {
            if matches!(patch.operation, Operation::Delete | Operation::Rename) {
                add(&mut plan.removes, patch.old_path.as_deref(), i)?;
            }
            if patch.operation != Operation::Delete {
                add(&mut plan.writes, patch.new_path.as_deref(), i)?;
            }
        }
        // A path both removed and written: only a creation may follow the removal.
        for (path, &writer) in &plan.writes {
            if plan.removes.contains_key(path)
                && patches.get(writer).map(|p| p.operation) != Some(Operation::Create)
            {
                return Err(PatchError::Duplicate { path: path.clone() });
            }
        }
        Ok(plan)
    }

    /// Refuses any path the diff touches whose leading directory is a symbolic link (in the
    /// base or the result) or a file (in the result, or in the base unless the diff removes it).
    pub(crate) fn check_prefixes(
        &self,
        patches: &[FilePatch],
        base: &mut Base,
    ) -> Result<(), PatchError> {
        let reads = patches.iter().filter_map(|p| p.old_path.as_deref());
        let touched: HashSet<&str> = reads
            .chain(self.writes.keys().map(String::as_str))
            .chain(self.removes.keys().map(String::as_str))
            .collect();
        let mut good_dirs: HashSet<&str> = HashSet::new();
        for path in touched {
            for dir in parents(path) {
                if good_dirs.contains(dir) {
                    continue;
                }
                if let Some(reason) = self.not_a_dir(dir, patches, base)? {
                    return Err(PatchError::PathConflict {
                        path: path.into(),
                        prefix: dir.into(),
                        reason,
                    });
                }
                good_dirs.insert(dir);
            }
        }
        Ok(())
    }

    /// Why `dir` cannot be a directory, if it cannot.
    fn not_a_dir(
        &self,
        dir: &str,
        patches: &[FilePatch],
        base: &mut Base,
    ) -> Result<Option<&'static str>, PatchError> {
        if let Some(&writer) = self.writes.get(dir) {
            let link = patches.get(writer).and_then(|p| p.new_mode) == Some(Mode::Symlink);
            return Ok(Some(if link {
                "is a symbolic link in the result"
            } else {
                "is written as a file by the diff"
            }));
        }
        Ok(match base.mode(dir)? {
            Some(Mode::Symlink) => Some("is a symbolic link in the base"),
            Some(_) if !self.removes.contains_key(dir) => Some("is a file in the base"),
            _ => None,
        })
    }
}

fn add(map: &mut BTreeMap<String, usize>, path: Option<&str>, i: usize) -> Result<(), PatchError> {
    let path = path.unwrap_or_default();
    if map.insert(path.to_string(), i).is_some() {
        return Err(PatchError::Duplicate { path: path.into() });
    }
    Ok(())
}
