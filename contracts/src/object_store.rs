//! The ObjectStore contract: the Git object database and refs of one owned repository.
//!
//! The host encodes and hashes every object; a store writes an object only after checking
//! its id against its bytes, and never invents one. Reads are bounded by an explicit byte
//! budget. Refs are created only if absent and moved only by compare-and-swap; once a ref
//! write may have started, its outcome is a value ([`RefUpdate`]) that can say "unknown",
//! never an `Err`.
//!
//! Lifecycle: an [`ObjectStoreFactory`] creates a fresh, empty, unmarked root (exclusively:
//! an existing path is `exists`, never adopted) or opens a marked one. The host writes the
//! repository's initial objects and refs into the fresh store and then calls
//! [`ObjectStore::mark`] last, with the ownership marker bytes; from then on the store checks
//! that marker byte for byte (with the rest of its root's ownership) before every operation
//! and before accepting any result.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::git_object::{ObjectId, ObjectKind, object_id};

use crate::error_fields::contract_error;

/// One encoded Git object: its kind, its id and its body (without the `"<kind> <size>\0"`
/// header). The id is the host's claim; stores check it against the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct EncodedObject {
    /// The object's kind, which its id also hashes.
    pub kind: ObjectKind,
    /// The SHA-1 id the host computed for the kind and body.
    pub id: ObjectId,
    /// The object's body, without the header.
    pub body: Vec<u8>,
}

impl fmt::Debug for EncodedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncodedObject")
            .field("kind", &self.kind)
            .field("id", &self.id)
            .field("bytes", &self.body.len())
            .finish()
    }
}

impl EncodedObject {
    /// Encodes `body` as an object of `kind`, computing its id.
    pub fn new(kind: ObjectKind, body: Vec<u8>) -> Self {
        let id = crate::git_object::object_id(kind, &body);
        Self { kind, id, body }
    }

    /// Whether `id` is the SHA-1 of this object's kind, size and body.
    pub fn verify(&self) -> bool {
        crate::git_object::object_id(self.kind, &self.body) == self.id
    }
}

/// An object as a store read it. Hosts re-hash it: a store's answer is never trusted.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredObject {
    /// The kind the store says the object is.
    pub kind: ObjectKind,
    /// The body the store read, without the header.
    pub body: Vec<u8>,
}

impl fmt::Debug for StoredObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredObject")
            .field("kind", &self.kind)
            .field("bytes", &self.body.len())
            .finish()
    }
}

/// A validated ref name: `refs/` followed by one or more segments of `A-Z a-z 0-9 . _ -`,
/// no segment empty, starting with `.` or ending in `.` or `.lock`, and no `..`; at most
/// 255 bytes. Narrower than Git's own rules on purpose: every name sf writes fits it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RefName(String);

impl RefName {
    /// The longest ref name accepted.
    pub const MAX_BYTES: usize = 255;

    /// Parses `name`, naming the rule it breaks.
    pub fn parse(name: &str) -> Result<Self, ObjectStoreError> {
        let refuse = |rule: &'static str| ObjectStoreError::InvalidInput {
            input: format!("ref name {name:?}"),
            rule,
        };
        if name.len() > Self::MAX_BYTES {
            return Err(refuse("a ref name is at most 255 bytes"));
        }
        let Some(rest) = name.strip_prefix("refs/") else {
            return Err(refuse("a ref name starts with refs/"));
        };
        if name.contains("..") {
            return Err(refuse("the ref name contains .."));
        }
        for segment in rest.split('/') {
            if segment.is_empty() {
                return Err(refuse("a ref name has no empty segment"));
            }
            if !segment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
            {
                return Err(refuse("a ref name segment is made of A-Z a-z 0-9 . _ -"));
            }
            if segment.starts_with('.') || segment.ends_with('.') || segment.ends_with(".lock") {
                return Err(refuse(
                    "a ref name segment neither starts with . nor ends in . or .lock",
                ));
            }
        }
        Ok(Self(name.to_owned()))
    }

    /// The name as text (`refs/heads/main`).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RefName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RefName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RefName({})", self.0)
    }
}

/// The value of one ref as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefValue {
    /// A direct ref naming an object.
    Direct(ObjectId),
    /// A symbolic ref naming another ref. sf never writes one; it reports one so that callers
    /// refuse to move it.
    Symbolic(String),
}

/// The outcome of a ref write that may have started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefUpdate {
    /// The store's write reported success and a readback showed exactly the new value.
    Applied,
    /// The store refused: the ref did not hold the expected value. `current` is what it held
    /// when read afterwards (`None`: absent).
    Refused {
        /// The ref's value read after the refusal; `None` when it is absent.
        current: Option<RefValue>,
    },
    /// The write may or may not have happened. Never treat this as "not applied".
    Unknown {
        /// Why the outcome is not known.
        reason: String,
    },
}

/// Where an owned root lives and which directory it is: the canonical path and the device
/// and inode numbers observed when it was created. A root with the same path but another
/// device or inode is a replaced root and never opens.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StoreRoot {
    /// The root's canonical absolute path.
    pub path: PathBuf,
    /// The device number of the root directory when it was created.
    pub dev: u64,
    /// The inode number of the root directory when it was created.
    pub ino: u64,
}

/// Creates and opens owned roots. A backend is configured once and hands out one
/// [`ObjectStore`] per root.
pub trait ObjectStoreFactory: Send + Sync {
    /// Creates a fresh, empty, unmarked root at `path` with an exclusive create: an existing
    /// path fails `exists` and is never adopted. `path` must be absolute and canonical and its
    /// parent a directory of this user that no one else can write.
    fn create(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError>;

    /// Opens the marked root `root`: its ownership, including `marker` byte for byte, is
    /// checked now and before every later operation.
    fn open(
        &self,
        root: &StoreRoot,
        marker: &[u8],
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError>;

    /// Whether the stores this factory makes hold history boundaries
    /// ([`ObjectStore::record_boundaries`]): `Ok` if they do, `unavailable` naming why not.
    /// The host asks before it creates a root whose first base needs a boundary, so that a
    /// store that cannot hold one creates nothing. Asking starts nothing. The default is the
    /// default of `record_boundaries`: a store that cannot.
    fn supports_boundaries(&self) -> Result<(), ObjectStoreError> {
        Err(no_boundaries())
    }
}

/// Why a store without history boundaries refuses one: the answer of the defaults of
/// [`ObjectStoreFactory::supports_boundaries`] and [`ObjectStore::record_boundaries`].
fn no_boundaries() -> ObjectStoreError {
    ObjectStoreError::Unavailable {
        reason: "this object store cannot hold a history boundary (an imported commit whose \
                 parents it does not hold)"
            .into(),
    }
}

/// The object database and refs of one owned repository.
///
/// Every method checks the root's ownership before it starts anything and again before it
/// accepts a result. `Err` means no ref was touched; once a ref write may have started, ref
/// methods answer with a [`RefUpdate`]. [`write_objects`](Self::write_objects) is the one
/// exception to "nothing started": an `Err` after it started may leave some of the objects
/// written, which is harmless because objects no ref names are unreachable and a later
/// identical write completes them.
pub trait ObjectStore: Send + Sync {
    /// The root this store owns.
    fn root(&self) -> &StoreRoot;

    /// Writes the ownership marker of a fresh root, create-only. The host calls it last, after
    /// the initial objects and refs; a store refuses it when a marker exists.
    fn mark(&self, marker: &[u8], deadline: Instant) -> Result<(), ObjectStoreError>;

    /// Writes `objects`, each checked against its id first. Objects already present are left
    /// as they are. All or nothing is not promised: an interrupted write may leave some
    /// objects, which are unreachable until a ref names them.
    fn write_objects(
        &self,
        objects: &[EncodedObject],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError>;

    /// Records `commits` as boundaries of the history this store holds (Git's shallow
    /// commits): their parents are not in the store, by design. A commit whose parents are
    /// absent is written only after it is recorded; a store that checks connectivity (as Git
    /// does) refuses it otherwise. Idempotent, and a boundary is never removed. A store that
    /// cannot hold boundaries answers `unavailable`, and nothing was started.
    fn record_boundaries(
        &self,
        commits: &[ObjectId],
        deadline: Instant,
    ) -> Result<(), ObjectStoreError> {
        let _ = (commits, deadline);
        Err(no_boundaries())
    }

    /// Opens a read scope: the caller is about to read many times for one operation (a tree
    /// level by level, then its blobs), and the store may serve every read until the matching
    /// [`end_reads`](Self::end_reads) from one reader it keeps open (git-cli: one long-lived
    /// `cat-file`) instead of one per read. Scopes nest; the reader ends with the last one,
    /// so that no read after the operation is answered by a reader that has held the object
    /// database open since before it. A hint only: answers and checks are the same inside
    /// and outside a scope. The default does nothing.
    fn begin_reads(&self) {}

    /// Closes the scope [`begin_reads`](Self::begin_reads) opened. The default does nothing.
    fn end_reads(&self) {}

    /// Reads `ids` in order; `None` for a missing object. The whole answer (bodies plus 64
    /// framing bytes per unique id) may not exceed `budget` bytes: past it, the read fails
    /// `limit`. Hosts re-hash what they get.
    fn read_objects(
        &self,
        ids: &[ObjectId],
        budget: u64,
        deadline: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError>;

    /// Reads one ref: `None` if absent.
    fn read_ref(
        &self,
        name: &RefName,
        deadline: Instant,
    ) -> Result<Option<RefValue>, ObjectStoreError>;

    /// Lists the refs whose names start with `prefix` (which must end in `/`), sorted by name.
    fn list_refs(
        &self,
        prefix: &str,
        deadline: Instant,
    ) -> Result<Vec<(RefName, RefValue)>, ObjectStoreError>;

    /// Creates `name` naming `value` only if `name` is absent. An existing ref, even one
    /// naming `value`, is `Refused` with its current value.
    fn create_ref(
        &self,
        name: &RefName,
        value: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError>;

    /// Moves the direct ref `name` from `expected` to `new`, never dereferencing. A symbolic
    /// ref is refused before anything starts (`Err` with code `symbolic-ref`).
    fn compare_and_swap_ref(
        &self,
        name: &RefName,
        expected: &ObjectId,
        new: &ObjectId,
        deadline: Instant,
    ) -> Result<RefUpdate, ObjectStoreError>;
}

/// What a caller of an [`ObjectStore`] uses on top of the contract: reads whose answers are
/// checked here, whatever the store claims. Implemented for every store.
pub trait ObjectStoreExt: ObjectStore {
    /// Reads `ids` in order (`None` for a missing object) within `body_budget` bytes of
    /// bodies, plus the framing the contract allows per unique id ([`READ_FRAMING_BYTES`]),
    /// and checks the answer: exactly one per id, and every object present hashing, with its
    /// kind, to the id it was read under. Any other answer is `corrupt`; nothing is repaired.
    fn read_verified(
        &self,
        ids: &[ObjectId],
        body_budget: u64,
        deadline: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
        let unique: std::collections::BTreeSet<&ObjectId> = ids.iter().collect();
        let budget = body_budget.saturating_add(READ_FRAMING_BYTES * unique.len() as u64);
        let answers = self.read_objects(ids, budget, deadline)?;
        if answers.len() != ids.len() {
            return Err(ObjectStoreError::Corrupt {
                what: format!(
                    "the store answered {} objects for {} requested",
                    answers.len(),
                    ids.len()
                ),
            });
        }
        for (id, answer) in ids.iter().zip(&answers) {
            if let Some(object) = answer
                && object_id(object.kind, &object.body) != *id
            {
                return Err(ObjectStoreError::Corrupt {
                    what: format!("object {id}: the stored bytes do not hash to its id"),
                });
            }
        }
        Ok(answers)
    }

    /// Opens a read scope ([`ObjectStore::begin_reads`]) that closes when the guard drops,
    /// on every path out of the operation.
    fn read_scope(&self) -> ReadScope<'_, Self> {
        self.begin_reads();
        ReadScope { store: self }
    }
}

impl<T: ObjectStore + ?Sized> ObjectStoreExt for T {}

/// An open read scope of `store`; dropping it closes the scope.
#[must_use = "the scope closes as soon as the guard drops"]
pub struct ReadScope<'a, S: ObjectStore + ?Sized> {
    store: &'a S,
}

impl<S: ObjectStore + ?Sized> Drop for ReadScope<'_, S> {
    fn drop(&mut self) {
        self.store.end_reads();
    }
}

contract_error! {
    /// Why an ObjectStore refused. Every variant means nothing was started by the failing call.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum ObjectStoreError {
        /// An argument breaks a rule; nothing was started.
        #[error("invalid input: {input}: {rule}")]
        "invalid-input" InvalidInput {
            /// The argument at fault, named and shown (`ref name "refs/a..b"`).
            input: String,
            /// The rule it breaks.
            rule: &'static str,
        },
        /// The path to create already exists; it is never adopted.
        #[error("{path} already exists; sf never adopts an existing path, choose a new one")]
        "exists" Exists {
            /// The path that already exists.
            path: PathBuf,
        },
        /// The root is missing, replaced, re-permissioned, foreign, unmarked, tampered with, or
        /// otherwise not this store's to use.
        #[error("repository root unavailable: {reason}")]
        "unavailable" Unavailable {
            /// What is wrong with the root.
            reason: String,
        },
        /// Stored data failed verification (an object whose bytes do not hash to its id, a
        /// malformed answer). Never repaired.
        #[error("corrupt repository data: {what}")]
        "corrupt" Corrupt {
            /// Which data failed which check.
            what: String,
        },
        /// A read would exceed its byte budget.
        #[error("read limit exceeded: {what}")]
        "limit" Limit {
            /// What was being read, and the budget it would exceed.
            what: String,
        },
        /// A ref to move is symbolic; sf never moves or dereferences one.
        #[error("ref {name} is symbolic; sf never moves a symbolic ref")]
        "symbolic-ref" SymbolicRef {
            /// The ref's name.
            name: String,
        },
        /// The deadline passed.
        #[error("timed out: {what}")]
        "timeout" Timeout {
            /// What was being done when the deadline passed.
            what: String,
        },
        /// The backend's operation failed in a way that proves nothing was changed (a tool
        /// that exited with an error before writing, a refused request). `operation` names
        /// what was attempted, in the backend's words.
        #[error("store operation failed: {operation}: {detail}")]
        "failed" Failed {
            /// What was attempted, in the backend's words.
            operation: String,
            /// How it failed (a tool's message, a refusal).
            detail: String,
        },
    }
}

/// Framing bytes a read may use per unique object on top of the bodies.
pub const READ_FRAMING_BYTES: u64 = 64;
