//! The [`ObjectStore`] implementation: each trait method as a sequence of ownership checks,
//! one bounded Git process (or one request to the long-lived reader of a read scope) and
//! strict parsing of its answer.
//!
//! Order inside every method: validate arguments, check the deadline, check ownership, spawn
//! (or send the request), check ownership again, and only then look at what Git said. Ref
//! writes turn every uncertainty after the spawn into [`RefUpdate::Unknown`]; before the spawn
//! they are `Err`.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use sf_contracts::git_object::ObjectId;
use sf_contracts::{
    EncodedObject, ObjectStore, ObjectStoreError, READ_FRAMING_BYTES, RefName, RefUpdate, RefValue,
    StoreRoot, StoredObject,
};

use crate::errors::{before, corrupt, limit, timeout, unavailable};
use crate::layout::{MARKER_MAX_BYTES, MARKER_NAME, sync_dir, write_new_file};
use crate::ownership::{RefSlot, check_ref_path, check_root};
use crate::packs::PackSlot;
use crate::reader::{BatchReader, ReadFailure};
use crate::refs::{
    LIST_REFS_OUTPUT_BYTES, READ_REF_OUTPUT_BYTES, RefFile, parse_listing, read_ref_file,
    walk_ref_files,
};
use crate::rollup;
use crate::runner::{Ending, GitRun, GitRunner, Subcommand};
use sf_git::pack;

/// Output cap for `index-pack --stdin`, which writes one line naming the pack.
const INDEX_PACK_OUTPUT_BYTES: u64 = 64 * 1024;

/// Output cap for `repack -q`, which writes nothing on success.
const REPACK_OUTPUT_BYTES: u64 = 64 * 1024;

/// One owned root, served through the pinned Git binary. Obtained only from
/// [`GitCliFactory`](crate::GitCliFactory).
#[derive(Debug)]
pub struct GitCliStore {
    root: StoreRoot,
    runner: GitRunner,
    /// `None` while unmarked; the marker bytes once marked. Guarded so that two `mark` calls
    /// cannot both pass the "unmarked" check.
    marker: Mutex<Option<Arc<[u8]>>>,
    /// The open read scopes and the reader they share. Reads are serialised through it.
    reads: Mutex<Reads>,
}

/// How many read scopes are open, and the `cat-file` that serves their reads. The
/// reader lives exactly while a scope is open: a read outside every scope starts its own and
/// ends it, as a process per read did, so that no answer comes from a process that has held
/// the object database open since before the current operation began.
#[derive(Debug, Default)]
struct Reads {
    scopes: usize,
    reader: Option<BatchReader>,
}

impl GitCliStore {
    pub(crate) fn new(root: StoreRoot, runner: GitRunner, marker: Option<Arc<[u8]>>) -> Self {
        Self {
            root,
            runner,
            marker: Mutex::new(marker),
            reads: Mutex::new(Reads::default()),
        }
    }

    /// Whether the root has been marked (through this store or before it was opened).
    pub fn is_marked(&self) -> bool {
        self.marker().is_some()
    }

    fn marker(&self) -> Option<Arc<[u8]>> {
        self.marker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The whole-root ownership check, with the marker state as this store knows it.
    pub(crate) fn check_ownership(&self) -> Result<(), ObjectStoreError> {
        check_root(&self.root, self.marker().as_deref())
    }

    /// Refuses a ref operation on a name whose slot cannot hold a ref.
    fn check_slot(&self, name: &RefName) -> Result<RefSlot, ObjectStoreError> {
        let slot = check_ref_path(&self.root.path, name)?;
        if let RefSlot::Blocked(rule) = slot {
            return Err(ObjectStoreError::InvalidInput {
                input: format!("ref name {name}"),
                rule,
            });
        }
        Ok(slot)
    }

    /// Runs a read-only Git command between two ownership checks and maps how it ended to an
    /// error unless it exited 0.
    fn run_read(
        &self,
        subcommand: &Subcommand<'_>,
        stdin: Vec<u8>,
        stdout_cap: u64,
        deadline: Instant,
    ) -> Result<GitRun, ObjectStoreError> {
        self.check_ownership()?;
        let run = self
            .runner
            .run(&self.root.path, subcommand, stdin, stdout_cap, deadline)?;
        if matches!(run.ending, Ending::TimedOut) {
            return Err(timeout(subcommand.describe()));
        }
        self.check_ownership()?;
        match run.ending {
            Ending::OutputOverflow => Err(limit(format!(
                "{} wrote more than {stdout_cap} bytes",
                subcommand.describe()
            ))),
            _ if !run.succeeded() => Err(ObjectStoreError::Failed {
                operation: subcommand.describe(),
                detail: run.describe_ending(),
            }),
            _ => Ok(run),
        }
    }

    /// After a write: rolls small packs up when the root holds more than
    /// [`rollup::MAX_PACKS`] and no one else holds the pack lock, within what is left of the
    /// write's deadline. Housekeeping: the objects were written and checked, so a roll-up
    /// that fails or runs out of time fails nothing (the next write tries again), but the
    /// root must still pass its ownership check after Git ran in it.
    fn roll_up(&self, deadline: Instant) -> Result<(), ObjectStoreError> {
        if Instant::now() >= deadline || !rollup::over_limit(&self.root.path)? {
            return Ok(());
        }
        let Some(_alone) = rollup::try_alone(&self.root.path)? else {
            return Ok(());
        };
        self.check_ownership()?;
        let _ = self.runner.run(
            &self.root.path,
            &Subcommand::Repack,
            Vec::new(),
            REPACK_OUTPUT_BYTES,
            deadline,
        );
        self.check_ownership()
    }

    /// Reads `ids` (distinct) through the reader of the open read scope, or through one
    /// started for this read alone, between two ownership checks. A reader that failed in
    /// any way is dropped (killed and reaped), never reused.
    fn read_batch(
        &self,
        ids: &[ObjectId],
        budget: u64,
        deadline: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
        let mut reads = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
        self.check_ownership()?;
        // A reader whose Git ended (killed from outside, say) is dropped and replaced.
        let running = reads.reader.as_mut().is_some_and(BatchReader::is_running);
        let mut reader = match reads.reader.take() {
            Some(reader) if running => reader,
            _ => self.runner.batch_reader(&self.root.path)?,
        };
        let outcome = reader.read(ids, budget, deadline);
        if outcome.is_ok() && reads.scopes > 0 {
            reads.reader = Some(reader);
        } else {
            drop(reader);
        }
        drop(reads);
        match outcome {
            // The process was killed; its answers are not accepted anyway.
            Err(failure @ ReadFailure::TimedOut) => Err(read_error(failure, budget)),
            Err(failure) => {
                self.check_ownership()?;
                Err(read_error(failure, budget))
            }
            Ok(answers) => {
                self.check_ownership()?;
                Ok(answers)
            }
        }
    }

    /// Reads one ref from its file. The root uses the files backend and holds no
    /// `packed-refs` or reftable (the ownership check refuses both), so a ref's file is its
    /// whole value, and reading it is what Git's own reading does, with a stricter parse: the
    /// file holds exactly a direct or a symbolic ref and a newline, or the ref is corrupt.
    fn read_ref_value(
        &self,
        name: &RefName,
        deadline: Instant,
    ) -> Result<Option<RefValue>, ObjectStoreError> {
        before(deadline, "read_ref")?;
        self.check_ownership()?;
        check_ref_path(&self.root.path, name)?;
        let path = self.root.path.join(name.as_str());
        let value = match read_ref_file(&path, name.as_str())? {
            RefFile::Absent => None,
            RefFile::Symbolic(target) => Some(RefValue::Symbolic(target)),
            RefFile::Direct(id) => Some(RefValue::Direct(id)),
        };
        self.check_ownership()?;
        Ok(value)
    }

    /// `update-ref --no-deref name new old` and its outcome. Only a failure to start is `Err`;
    /// from the spawn on, every answer is a [`RefUpdate`].
    fn update_ref(
        &self,
        name: &RefName,
        new: &ObjectId,
        old: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        before(deadline, "update-ref")?;
        self.check_ownership()?;
        self.check_slot(name)?;
        let subcommand = Subcommand::UpdateRef { name, new, old };
        let run = self.runner.run(
            &self.root.path,
            &subcommand,
            Vec::new(),
            READ_REF_OUTPUT_BYTES,
            deadline,
        )?;
        let unknown = |why: String| RefUpdate::Unknown {
            reason: format!("{}: {why}", subcommand.describe()),
        };
        let exited_with_code =
            matches!(&run.ending, Ending::Exited(status) if status.code().is_some());
        if !exited_with_code {
            return Ok(unknown(run.describe_ending()));
        }
        if let Err(error) = self.check_ownership() {
            return Ok(unknown(format!(
                "{}; the ownership check after it failed: {error}",
                run.describe_ending()
            )));
        }
        let readback = match self.read_ref_value(name, deadline) {
            Ok(readback) => readback,
            Err(error) => {
                return Ok(unknown(format!(
                    "{}; the readback failed: {error}",
                    run.describe_ending()
                )));
            }
        };
        let wanted = RefValue::Direct(*new);
        // Refused only when Git failed and the ref holds a third value: neither the new one
        // (the write may have landed) nor the old one (then the ref did hold what was
        // expected and Git failed for another reason, such as a lock held by another Git).
        let previous = (*old != ObjectId::ZERO).then_some(RefValue::Direct(*old));
        Ok(match (run.succeeded(), readback) {
            (true, Some(current)) if current == wanted => RefUpdate::Applied,
            (false, Some(current)) if current != wanted && Some(&current) != previous.as_ref() => {
                RefUpdate::Refused {
                    current: Some(current),
                }
            }
            (_, readback) => unknown(format!(
                "{}; the readback found {readback:?}",
                run.describe_ending()
            )),
        })
    }
}

/// The contract's error for a read that failed in `failure`, within `budget` bytes.
fn read_error(failure: ReadFailure, budget: u64) -> ObjectStoreError {
    let describe = || Subcommand::CatFileBatch.describe();
    match failure {
        ReadFailure::TimedOut => timeout(describe()),
        // cat-file frames each answer in at most 64 bytes, so output past the budget means
        // the answer would be past it too.
        ReadFailure::OverBudget => limit(format!("{} wrote more than {budget} bytes", describe())),
        ReadFailure::Malformed(error) => error,
        ReadFailure::Ended(detail) => ObjectStoreError::Failed {
            operation: describe(),
            detail,
        },
    }
}

/// Refuses the zero id, which `update-ref` reads as "delete" or "must be absent".
fn nonzero(id: &ObjectId, role: &str) -> Result<(), ObjectStoreError> {
    if *id == ObjectId::ZERO {
        return Err(ObjectStoreError::InvalidInput {
            input: format!("{role} {id}"),
            rule: "a ref value is never the all-zero id",
        });
    }
    Ok(())
}

/// Checks a listing prefix: `refs/` alone, or `refs/` and valid ref-name segments, ending in
/// `/`. The rules keep Git's pattern matching literal (no glob characters).
fn check_prefix(prefix: &str) -> Result<(), ObjectStoreError> {
    let refuse = |rule: &'static str| ObjectStoreError::InvalidInput {
        input: format!("ref prefix {prefix:?}"),
        rule,
    };
    let Some(stem) = prefix.strip_suffix('/') else {
        return Err(refuse("a ref prefix ends in /"));
    };
    if stem != "refs" && RefName::parse(stem).is_err() {
        return Err(refuse(
            "a ref prefix is refs/ followed by valid ref-name segments, each ending in /",
        ));
    }
    Ok(())
}

/// The ids of `ids` in order of first appearance.
fn unique_ids(ids: &[ObjectId]) -> Vec<ObjectId> {
    let mut seen = HashSet::new();
    ids.iter().copied().filter(|id| seen.insert(*id)).collect()
}

impl ObjectStore for GitCliStore {
    fn root(&self) -> &StoreRoot {
        &self.root
    }

    fn begin_reads(&self) {
        let mut reads = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
        reads.scopes = reads.scopes.saturating_add(1);
    }

    fn end_reads(&self) {
        let mut reads = self.reads.lock().unwrap_or_else(PoisonError::into_inner);
        reads.scopes = reads.scopes.saturating_sub(1);
        if reads.scopes == 0 {
            // Dropping the reader kills and reaps it.
            reads.reader = None;
        }
    }

    fn mark(&self, marker: &[u8], deadline: Instant) -> Result<(), ObjectStoreError> {
        if marker.len() > MARKER_MAX_BYTES {
            return Err(ObjectStoreError::InvalidInput {
                input: format!("a marker of {} bytes", marker.len()),
                rule: "a marker is at most 64 KiB",
            });
        }
        before(deadline, "mark")?;
        let mut state = self.marker.lock().unwrap_or_else(PoisonError::into_inner);
        if state.is_some() {
            return Err(ObjectStoreError::InvalidInput {
                input: format!("mark of {}", self.root.path.display()),
                rule: "a root is marked once; this root is already marked",
            });
        }
        check_root(&self.root, None)?;
        let path = self.root.path.join(MARKER_NAME);
        write_new_file(&path, marker).map_err(|error| {
            if error.kind() == ErrorKind::AlreadyExists {
                unavailable(&path, "a marker already exists; a root is marked once")
            } else {
                unavailable(&path, "the marker could not be written and synced")
            }
        })?;
        let marker: Arc<[u8]> = Arc::from(marker);
        // From here the marker is on disk: the store must check it whatever happens next.
        *state = Some(Arc::clone(&marker));
        drop(state);
        sync_dir(&self.root.path)
            .map_err(|_| unavailable(&self.root.path, "the root could not be synced"))?;
        check_root(&self.root, Some(&marker))
    }

    fn record_boundaries(
        &self,
        commits: &[ObjectId],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        before(deadline, "record_boundaries")?;
        self.check_ownership()?;
        if commits.is_empty() {
            return Ok(());
        }
        crate::boundary::add_boundaries(&self.root.path, commits)?;
        self.check_ownership()
    }

    fn write_objects(
        &self,
        objects: &[EncodedObject],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        if let Some(forged) = objects.iter().find(|object| !object.verify()) {
            return Err(ObjectStoreError::InvalidInput {
                input: format!("object {} ({})", forged.id, forged.kind.as_str()),
                rule: "an object's id is the SHA-1 of its kind, size and body",
            });
        }
        let mut seen = HashSet::new();
        let unique: Vec<&EncodedObject> = objects
            .iter()
            .filter(|object| seen.insert(object.id))
            .collect();
        before(deadline, "write_objects")?;
        self.check_ownership()?;
        if unique.is_empty() {
            return Ok(());
        }
        let pack = pack::encode(&unique)?;
        let slot = PackSlot::of(&pack);
        // Held until the pack's files were checked: no roll-up removes them meanwhile.
        let shared = rollup::share(&self.root.path, deadline)?;
        slot.check_before(&self.root.path)?;
        let subcommand = Subcommand::IndexPack;
        let run = self.runner.run(
            &self.root.path,
            &subcommand,
            pack,
            INDEX_PACK_OUTPUT_BYTES,
            deadline,
        )?;
        if matches!(run.ending, Ending::TimedOut) {
            return Err(timeout(subcommand.describe()));
        }
        self.check_ownership()?;
        if !run.succeeded() {
            return Err(ObjectStoreError::Failed {
                operation: subcommand.describe(),
                detail: run.describe_ending(),
            });
        }
        // Git names the pack it kept by the pack's checksum: any other answer is not the
        // pack this store wrote.
        if run.stdout != format!("pack\t{}\n", slot.name()).as_bytes() {
            return Err(corrupt(format!(
                "{} answered {:?}, not the name of the pack it was given ({})",
                subcommand.describe(),
                String::from_utf8_lossy(&run.stdout),
                slot.name()
            )));
        }
        slot.check_after(&self.root.path)?;
        drop(shared);
        self.roll_up(deadline)
    }

    fn read_objects(
        &self,
        ids: &[ObjectId],
        budget: u64,
        deadline: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
        let unique = unique_ids(ids);
        before(deadline, "read_objects")?;
        if unique.is_empty() {
            self.check_ownership()?;
            return Ok(Vec::new());
        }
        let framing = READ_FRAMING_BYTES.saturating_mul(unique.len() as u64);
        if framing > budget {
            return Err(limit(format!(
                "{} objects need {framing} framing bytes, over the budget of {budget}",
                unique.len()
            )));
        }
        let answers = self.read_batch(&unique, budget, deadline)?;
        let bodies: u64 = answers
            .iter()
            .flatten()
            .map(|object| object.body.len() as u64)
            .sum();
        let total = bodies.saturating_add(framing);
        if total > budget {
            return Err(limit(format!(
                "the answer needs {total} bytes, over the budget of {budget}"
            )));
        }
        if unique.len() == ids.len() {
            // No id asked twice: the answers are already in the order asked.
            return Ok(answers);
        }
        let mut by_id = std::collections::HashMap::with_capacity(unique.len());
        for (id, answer) in unique.iter().zip(answers) {
            by_id.insert(*id, answer);
        }
        Ok(ids
            .iter()
            .map(|id| by_id.get(id).cloned().flatten())
            .collect())
    }

    fn read_ref(
        &self,
        name: &RefName,
        deadline: Instant,
    ) -> Result<Option<RefValue>, ObjectStoreError> {
        self.read_ref_value(name, deadline)
    }

    fn list_refs(
        &self,
        prefix: &str,
        deadline: Instant,
    ) -> Result<Vec<(RefName, RefValue)>, ObjectStoreError> {
        check_prefix(prefix)?;
        before(deadline, "list_refs")?;
        let subcommand = Subcommand::ForEachRef { pattern: prefix };
        let run = self.run_read(&subcommand, Vec::new(), LIST_REFS_OUTPUT_BYTES, deadline)?;
        let mut refs = parse_listing(&run.stdout)?;
        refs.retain(|name, _| name.as_str().starts_with(prefix));
        let dir = self.root.path.join(prefix.trim_end_matches('/'));
        for (name, path) in walk_ref_files(&dir, prefix)? {
            let Ok(parsed) = RefName::parse(&name) else {
                return Err(crate::errors::corrupt(format!(
                    "a ref file {name:?} breaks sf's ref-name rules"
                )));
            };
            if refs.contains_key(&parsed) {
                continue;
            }
            // A direct ref Git did not list appeared after it listed; it is left out, as it
            // would be had the listing come a moment earlier.
            if let RefFile::Symbolic(target) = read_ref_file(&path, &name)? {
                refs.insert(parsed, RefValue::Symbolic(target));
            }
        }
        self.check_ownership()?;
        Ok(refs.into_iter().collect())
    }

    fn create_ref(
        &self,
        name: &RefName,
        value: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        nonzero(value, "ref value")?;
        before(deadline, "create_ref")?;
        self.check_ownership()?;
        self.check_slot(name)?;
        // An existing ref, even one naming `value`, is refused with what it holds; nothing
        // is started for it.
        if let Some(current) = self.read_ref_value(name, deadline)? {
            return Ok(RefUpdate::Refused {
                current: Some(current),
            });
        }
        self.update_ref(name, value, &ObjectId::ZERO, deadline)
    }

    fn compare_and_swap_ref(
        &self,
        name: &RefName,
        expected: &ObjectId,
        new: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        nonzero(expected, "expected value")?;
        nonzero(new, "new value")?;
        before(deadline, "compare_and_swap_ref")?;
        self.check_ownership()?;
        self.check_slot(name)?;
        match self.read_ref_value(name, deadline)? {
            Some(RefValue::Symbolic(_)) => {
                return Err(ObjectStoreError::SymbolicRef {
                    name: name.to_string(),
                });
            }
            Some(RefValue::Direct(current)) if current == *expected => {}
            // The ref does not hold `expected` now; update-ref would refuse the same way.
            current => return Ok(RefUpdate::Refused { current }),
        }
        self.update_ref(name, new, expected, deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        for good in ["refs/", "refs/heads/", "refs/sf/candidates/"] {
            check_prefix(good).expect(good);
        }
        for bad in [
            "refs",
            "refs/heads",
            "heads/",
            "refs/*/",
            "refs//",
            "refs/a..b/",
            "",
        ] {
            assert_eq!(check_prefix(bad).expect_err(bad).code(), "invalid-input");
        }
    }

    #[test]
    fn unique_keeps_first_order() {
        let a = ObjectId::from_bytes([1; 20]);
        let b = ObjectId::from_bytes([2; 20]);
        assert_eq!(unique_ids(&[b, a, b, a]), vec![b, a]);
    }
}
