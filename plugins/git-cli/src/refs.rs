//! Reading refs: one ref from its file, and listings from `git for-each-ref` output with the
//! ref files Git did not list.
//!
//! The root uses the files backend with no `packed-refs` (the ownership check refuses one),
//! so a ref's file is its whole value: a single ref is read from it directly, without
//! starting Git. For a listing, Git silently skips a symbolic ref whose target is missing
//! and skips (with a warning) a ref file it cannot parse. Both would make a read lie by
//! omission, so every ref file Git did not list is examined here: a symbolic ref is reported
//! as symbolic, a direct ref is one that appeared after Git listed (a race, reported as read
//! or skipped), and anything else is corrupt.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use sf_contracts::git_object::ObjectId;
use sf_contracts::{ObjectStoreError, RefName, RefValue};

use crate::errors::{corrupt, limit, unavailable};
use crate::ownership::{effective_uid, read_own_file};

/// The output cap of `update-ref`, which writes nothing on success (64 KiB: far more than
/// one ref line needs).
pub const READ_REF_OUTPUT_BYTES: u64 = 64 * 1024;

/// The `for-each-ref` output cap for a listing: 1 MiB, about 12,000 refs of sf's shapes.
pub const LIST_REFS_OUTPUT_BYTES: u64 = 1024 * 1024;

/// The most entries a listing walks under `refs/` to find refs Git did not list.
pub const LIST_REFS_WALK_ENTRIES: usize = 262_144;

/// The largest ref file read directly: a direct or symbolic ref is far smaller.
const REF_FILE_MAX_BYTES: usize = 512;

/// Parses `for-each-ref --format=%(refname)%00%(symref)%00%(objectname)` output into a map
/// from name to value. A name outside sf's ref-name rules, a malformed line or a duplicate is
/// corrupt.
pub(crate) fn parse_listing(
    output: &[u8],
) -> Result<BTreeMap<RefName, RefValue>, ObjectStoreError> {
    let mut refs = BTreeMap::new();
    if output.is_empty() {
        return Ok(refs);
    }
    let Some(body) = output.strip_suffix(b"\n") else {
        return Err(corrupt(
            "git for-each-ref output does not end with a newline",
        ));
    };
    for line in body.split(|&b| b == b'\n') {
        let text = std::str::from_utf8(line)
            .map_err(|_| corrupt("git for-each-ref wrote a line that is not text"))?;
        let mut fields = text.split('\0');
        let (Some(name), Some(symref), Some(object), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(corrupt(format!(
                "git for-each-ref wrote a malformed line {text:?}"
            )));
        };
        let name = RefName::parse(name)
            .map_err(|_| corrupt(format!("a ref {name:?} breaks sf's ref-name rules")))?;
        let value = if symref.is_empty() {
            let id = ObjectId::parse_hex(object).filter(|id| *id != ObjectId::ZERO);
            RefValue::Direct(id.ok_or_else(|| {
                corrupt(format!("ref {name} names {object:?}, not 40 lowercase hex"))
            })?)
        } else {
            RefValue::Symbolic(symref.to_owned())
        };
        if refs.insert(name.clone(), value).is_some() {
            return Err(corrupt(format!("git for-each-ref listed {name} twice")));
        }
    }
    Ok(refs)
}

/// What a ref file holds.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RefFile {
    /// The file is gone (or never was).
    Absent,
    /// A symbolic ref, typically one whose target is missing.
    Symbolic(String),
    /// A direct ref (in a listing: one that appeared after Git listed).
    Direct(ObjectId),
}

/// Reads the ref file at `path`: exactly a direct ref (40 lowercase hex digits, not all
/// zero) or a symbolic one (`ref: ` and a printable target) and a newline; anything else is
/// corrupt.
pub(crate) fn read_ref_file(path: &Path, name: &str) -> Result<RefFile, ObjectStoreError> {
    let bytes = match std::fs::symlink_metadata(path) {
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Ok(RefFile::Absent);
        }
        Err(_) => return Err(unavailable(path, "cannot be examined")),
        Ok(meta) if meta.file_type().is_dir() => return Ok(RefFile::Absent),
        // A symlink, a hard link or a foreign owner is an ownership problem (unavailable);
        // only the content decides "corrupt".
        Ok(_) => match read_own_file(path, REF_FILE_MAX_BYTES)? {
            Some(bytes) => bytes,
            None => return Ok(RefFile::Absent),
        },
    };
    let broken = || corrupt(format!("ref {name} is broken: Git cannot read it"));
    let text = std::str::from_utf8(&bytes).map_err(|_| broken())?;
    let line = text.strip_suffix('\n').ok_or_else(broken)?;
    if let Some(target) = line.strip_prefix("ref: ") {
        let printable = !target.is_empty()
            && target.len() <= RefName::MAX_BYTES
            && target.bytes().all(|b| b.is_ascii_graphic());
        return if printable {
            Ok(RefFile::Symbolic(target.to_owned()))
        } else {
            Err(broken())
        };
    }
    match ObjectId::parse_hex(line) {
        Some(id) if id != ObjectId::ZERO => Ok(RefFile::Direct(id)),
        _ => Err(broken()),
    }
}

/// Every ref file under `dir` (the directory of a `refs/.../` prefix), as `(name, path)`,
/// skipping Git's transient `*.lock` files. A symlink, a foreign owner or another kind is
/// unavailable; more than [`LIST_REFS_WALK_ENTRIES`] entries is a limit.
pub(crate) fn walk_ref_files(
    dir: &Path,
    prefix: &str,
) -> Result<Vec<(String, std::path::PathBuf)>, ObjectStoreError> {
    let mut found = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), prefix.to_owned())];
    let mut examined = 0usize;
    while let Some((dir, prefix)) = pending.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == ErrorKind::NotFound => continue,
            Err(_) => return Err(unavailable(&dir, "a ref directory cannot be listed")),
        };
        for entry in entries {
            examined += 1;
            if examined > LIST_REFS_WALK_ENTRIES {
                return Err(limit(format!(
                    "more than {LIST_REFS_WALK_ENTRIES} entries under {prefix}"
                )));
            }
            let entry = entry.map_err(|_| unavailable(&dir, "a ref directory cannot be listed"))?;
            let file_name = entry.file_name();
            let path = entry.path();
            let Some(text) = file_name.to_str() else {
                return Err(corrupt(format!(
                    "an entry under {prefix} has a name that is not text"
                )));
            };
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(error) if error.kind() == ErrorKind::NotFound => continue,
                Err(_) => return Err(unavailable(&path, "cannot be examined")),
            };
            if meta.uid() != effective_uid() {
                return Err(unavailable(&path, "a ref entry must be owned by this user"));
            }
            let name = format!("{prefix}{text}");
            if meta.file_type().is_dir() {
                pending.push((path, format!("{name}/")));
            } else if meta.file_type().is_file() {
                if !is_lock(&file_name) {
                    found.push((name, path));
                }
            } else {
                return Err(unavailable(
                    &path,
                    "a ref entry must be a directory or a regular file, not a symlink",
                ));
            }
        }
    }
    Ok(found)
}

fn is_lock(name: &OsStr) -> bool {
    name.to_str().is_some_and(|name| name.ends_with(".lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listing_parses_direct_and_symbolic() {
        let id = "a".repeat(40);
        let output = format!("refs/heads/main\0\0{id}\nrefs/heads/sym\0refs/heads/main\0{id}\n");
        let refs = parse_listing(output.as_bytes()).expect("parses");
        let main = RefName::parse("refs/heads/main").expect("valid");
        let sym = RefName::parse("refs/heads/sym").expect("valid");
        assert_eq!(
            refs.get(&main),
            Some(&RefValue::Direct(ObjectId::parse_hex(&id).expect("hex")))
        );
        assert_eq!(
            refs.get(&sym),
            Some(&RefValue::Symbolic("refs/heads/main".into()))
        );
    }

    #[test]
    fn listing_refuses_malformed_lines() {
        let id = "a".repeat(40);
        for output in [
            format!("refs/heads/main\0\0{id}"),
            format!("refs/heads/main\0\0{}\n", "A".repeat(40)),
            format!("refs/heads/main\0\0{}\n", "0".repeat(40)),
            format!("refs/heads/a+b\0\0{id}\n"),
            format!("refs/heads/main\0{id}\n"),
            format!("refs/heads/main\0\0{id}\nrefs/heads/main\0\0{id}\n"),
        ] {
            let error = parse_listing(output.as_bytes()).expect_err(&output);
            assert_eq!(error.code(), "corrupt");
        }
    }
}
