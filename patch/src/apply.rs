//! Applying parsed patches to the base: each patch's pre-image is read and checked (existence,
//! `index` blob id, mode), its body applied, and its result checked (type, link target, size,
//! `index` blob id); the changes come back sorted by path, or an error and nothing.

use std::collections::BTreeMap;

use crate::base::Base;
use crate::blob_id::{check, is_null};
use crate::delta::apply_delta;
use crate::plan::Plan;
use crate::text::apply_hunks;
use crate::{
    After, BaseEntry, BaseFiles, BinaryHunk, BinaryPatch, Body, Changed, FilePatch, Limits, Mode,
    PatchError,
};

/// Applies `patches` (as [`crate::parse_diff`] gives them, possibly filtered) to `base`.
pub fn apply_patches(
    patches: &[FilePatch],
    base: &mut dyn BaseFiles,
    limits: &Limits,
) -> Result<Vec<Changed>, PatchError> {
    if patches.len() > limits.max_files {
        return Err(PatchError::TooManyFiles {
            limit: limits.max_files,
        });
    }
    // Said first, whatever else is wrong: the diff must be made again with its binary data.
    if let Some(patch) = patches.iter().find(|p| p.body == Body::BinaryWithoutData) {
        return Err(PatchError::BinaryWithoutData {
            path: patch.path().into(),
        });
    }
    let plan = Plan::new(patches)?;
    let mut base = Base::new(base);
    plan.check_prefixes(patches, &mut base)?;
    let mut result: BTreeMap<String, After> = plan
        .removes
        .keys()
        .map(|p| (p.clone(), After::Absent))
        .collect();
    for patch in patches {
        if let Some((path, entry)) = apply_one(patch, &plan, &mut base, limits)? {
            result.insert(path, After::Entry(entry));
        }
    }
    Ok(result
        .into_iter()
        .map(|(path, after)| Changed { path, after })
        .collect())
}

/// One patch: the new path and entry, or None for a deletion.
fn apply_one(
    patch: &FilePatch,
    plan: &Plan,
    base: &mut Base,
    limits: &Limits,
) -> Result<Option<(String, BaseEntry)>, PatchError> {
    let path = patch.path();
    let pre = pre_image(patch, plan, base)?;
    let pre_content = pre.as_ref().map_or(&[][..], |e| e.content.as_slice());
    let content = post_content(patch, pre_content, limits.max_file_bytes)?;
    let Some(new_path) = &patch.new_path else {
        if !content.is_empty() {
            return Err(PatchError::DeletionLeavesContent { path: path.into() });
        }
        return Ok(None);
    };
    let mode = patch
        .new_mode
        .or(pre.as_ref().map(|e| e.mode))
        .unwrap_or(Mode::Regular);
    if let Some(pre) = &pre
        && (pre.mode == Mode::Symlink) != (mode == Mode::Symlink)
    {
        return Err(PatchError::TypeChange { path: path.into() });
    }
    if mode == Mode::Symlink && (content.is_empty() || content.contains(&0)) {
        return Err(PatchError::BadSymlink { path: path.into() });
    }
    if let Some(id) = patch.new_id.as_deref().filter(|id| !is_null(id)) {
        check(&content, id).map_err(|actual| PatchError::ResultMismatch {
            path: path.into(),
            expected: id.into(),
            actual,
        })?;
    }
    Ok(Some((new_path.clone(), BaseEntry { content, mode })))
}

/// The base entry the patch starts from (None for a creation), checked against the diff.
fn pre_image(
    patch: &FilePatch,
    plan: &Plan,
    base: &mut Base,
) -> Result<Option<BaseEntry>, PatchError> {
    let Some(old) = &patch.old_path else {
        let path = patch.path();
        if base.mode(path)?.is_some() && !plan.removes.contains_key(path) {
            return Err(PatchError::AlreadyExists { path: path.into() });
        }
        return Ok(None);
    };
    let entry = base
        .read(old)?
        .ok_or_else(|| PatchError::Missing { path: old.clone() })?;
    if let Some(id) = &patch.old_id {
        check(&entry.content, id).map_err(|actual| PatchError::WrongBase {
            path: old.clone(),
            expected: id.clone(),
            actual,
        })?;
    }
    if let Some(mode) = patch.old_mode
        && mode != entry.mode
    {
        return Err(PatchError::ModeMismatch {
            path: old.clone(),
            expected: mode.octal().into(),
            actual: entry.mode.octal().into(),
        });
    }
    Ok(Some(entry))
}

/// The post-image's bytes.
fn post_content(patch: &FilePatch, pre: &[u8], max: u64) -> Result<Vec<u8>, PatchError> {
    let path = patch.path();
    let content = match &patch.body {
        Body::None => pre.to_vec(),
        Body::Text(hunks) => apply_hunks(pre, hunks, path, max)?,
        Body::Binary(binary) => {
            apply_binary(pre, binary, max).map_err(|what| PatchError::CorruptBinary {
                path: path.into(),
                what,
            })?
        }
        Body::BinaryWithoutData => {
            return Err(PatchError::BinaryWithoutData { path: path.into() });
        }
    };
    if content.len() as u64 > max {
        return Err(PatchError::FileTooLarge {
            path: path.into(),
            size: content.len() as u64,
            limit: max,
        });
    }
    Ok(content)
}

/// The forward hunk applied, and the reverse one (when given) checked to give `pre` back.
fn apply_binary(pre: &[u8], binary: &BinaryPatch, max: u64) -> Result<Vec<u8>, String> {
    let post = binary_hunk(pre, &binary.forward, max)?;
    if let Some(reverse) = &binary.reverse
        && binary_hunk(&post, reverse, pre.len() as u64)
            .ok()
            .as_deref()
            != Some(pre)
    {
        return Err("its reverse hunk does not give the pre-image back".into());
    }
    Ok(post)
}

fn binary_hunk(source: &[u8], hunk: &BinaryHunk, max: u64) -> Result<Vec<u8>, String> {
    match hunk {
        BinaryHunk::Literal(data) if data.len() as u64 > max => Err(format!(
            "a literal of {} bytes, more than the limit of {max}",
            data.len()
        )),
        BinaryHunk::Literal(data) => Ok(data.clone()),
        BinaryHunk::Delta(delta) => apply_delta(source, delta, max),
    }
}
