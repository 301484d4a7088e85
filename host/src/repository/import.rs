//! Later bases from the team's repository (`sf repo import`): a commit of the source read and
//! checked whole with the repository's own settings, written byte for byte, and published
//! with a write-once import record that says where it came from. A commit such a record
//! publishes is a factory commit: Slices freeze it, Candidates are sealed on it.
//!
//! The record is `refs/sf/imports/<commit hex>` → record commit R: sf's [`IDENT`], the fixed
//! message [`import_message`], the imported commit I as its one parent, and a tree holding
//! only `import.json`, the canonical [`ImportRecord`]. Nothing here moves the target unless
//! asked (`advance`), and then only forward along the source's history, by one
//! compare-and-swap after the record is published.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use serde::{Deserialize, Deserializer, Serialize};

use crate::canonical;
use crate::contracts::tree_path::TreePolicy;
use crate::contracts::{
    EncodedObject, ObjectStoreError, ObjectStoreExt, RefName, RefUpdate, RefValue,
};
use crate::fault::FaultPoint;
use crate::git_object::{self, Commit, EntryMode, ObjectId, ObjectKind, TreeEntry};

use super::identity::RepositoryLimits;
use super::imported::{MAX_IMPORTED_COMMIT_BYTES, commit_heads};
use super::source::{self, WalkedLeaf};
use super::streamed::{self, EachLeaf, ImportedHead, LeafBytes};
use super::{IDENT, MAX_COMMIT_BYTES, Repository, RepositoryError};
use crate::contracts::grammar::{ID_RULE, is_valid_id};

/// The protocol string of import records and of their commits' message.
pub const IMPORT_PROTOCOL: &str = "sf-import/1";
/// The prefix of every import record ref.
pub const IMPORT_REF_PREFIX: &str = "refs/sf/imports/";
/// The name of the record in a record commit's tree.
pub const IMPORT_RECORD_NAME: &str = "import.json";
/// The largest record blob read back. A record within the field rules is under 5 KiB.
pub const MAX_IMPORT_RECORD_BYTES: u64 = 16 * 1024;
/// The longest `source` a record holds, in bytes (Linux's `PATH_MAX`).
pub const MAX_SOURCE_BYTES: usize = 4096;
/// The longest `rev` a record holds, in bytes (what sf-git's reader accepts).
pub const MAX_REV_BYTES: usize = 256;
/// How long an import waits for a record ref whose creation the store could not confirm to
/// settle (a concurrent identical import holding Git's lock on it).
const RECORD_REF_PATIENCE: Duration = Duration::from_secs(2);

const SOURCE_RULE: &str = "a source is an absolute path of at most 4096 bytes, without control \
                           characters, or the upstream URL a base was fetched from";
const REV_RULE: &str = "a revision is a branch, tag or commit name of 1 to 256 bytes, not \
                        starting with - and without spaces or control characters";

/// The ref that publishes the import record of `commit`.
pub fn import_ref(commit: &ObjectId) -> RefName {
    // 16 + 40 bytes of lowercase hex: always a valid name.
    RefName::parse(&format!("{IMPORT_REF_PREFIX}{commit}")).expect("import ref names are valid")
}

/// The message of every record commit. Fixed: the record's tree and parent say everything.
pub fn import_message() -> String {
    format!("{IMPORT_PROTOCOL}\n")
}

/// Where an imported commit came from, as its record holds it (`sf-import/1`). Written as
/// canonical JSON with the fields `advance`, `commit`, `product`, `protocol`, `rev`, `source`,
/// `tree`; read back strictly, every field's rule checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ImportRecord {
    /// The Product of the repository the commit was imported into; follows [`ID_RULE`].
    #[serde(deserialize_with = "product")]
    pub product: String,
    /// The imported commit, with the same id as in the source.
    pub commit: ObjectId,
    /// Its tree.
    pub tree: ObjectId,
    /// The repository it was read from, as given (made absolute), or the upstream URL it was
    /// fetched from.
    #[serde(deserialize_with = "source_text")]
    pub source: String,
    /// The revision it was read at, as given.
    #[serde(deserialize_with = "rev_text")]
    pub rev: String,
    /// Whether the import asked to move the target to the commit.
    pub advance: bool,
}

canonical::literal_fields!(ImportRecord { "protocol": IMPORT_PROTOCOL });

fn product<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(deserializer, |id: &String| is_valid_id(id), ID_RULE)
}

fn source_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(
        deserializer,
        |text: &String| valid_source(text),
        SOURCE_RULE,
    )
}

fn rev_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(deserializer, |text: &String| valid_rev(text), REV_RULE)
}

fn valid_source(source: &str) -> bool {
    (source.starts_with('/')
        && source.len() <= MAX_SOURCE_BYTES
        && !source.chars().any(char::is_control))
        || super::delivery::check_url(source).is_ok()
}

/// The rule of sf-git's reader (`check_rev`), kept here for records read back.
fn valid_rev(rev: &str) -> bool {
    !rev.is_empty()
        && rev.len() <= MAX_REV_BYTES
        && !rev.starts_with('-')
        && !rev.chars().any(|c| c.is_control() || c.is_whitespace())
}

impl ImportRecord {
    /// The record's canonical bytes: what `import.json` holds.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Every field is bounded (a 4 KiB source, a 256-byte rev, ids): far below 1 MiB.
        canonical::to_canonical_bytes(self).expect("an import record holds bounded strings")
    }

    /// The record as a JSON value.
    pub fn to_value(&self) -> canonical::Value {
        canonical::to_value(self).expect("an import record holds strings and a boolean")
    }

    /// The record's blob, tree and commit R (in that order), and R's id.
    pub fn objects(&self) -> (Vec<EncodedObject>, ObjectId) {
        let blob = EncodedObject::new(ObjectKind::Blob, self.to_bytes());
        let tree = EncodedObject::new(
            ObjectKind::Tree,
            git_object::encode_tree(&[TreeEntry {
                mode: EntryMode::File,
                name: IMPORT_RECORD_NAME.into(),
                id: blob.id,
            }]),
        );
        let commit = EncodedObject::new(ObjectKind::Commit, record_commit(tree.id, self.commit));
        let id = commit.id;
        (vec![blob, tree, commit], id)
    }

    /// The differences from `other`, field by field, for a conflict's message.
    fn differences(&self, other: &Self) -> String {
        let mut fields = Vec::new();
        if self.source != other.source {
            fields.push(format!("source {:?}, not {:?}", self.source, other.source));
        }
        if self.rev != other.rev {
            fields.push(format!("rev {:?}, not {:?}", self.rev, other.rev));
        }
        if self.advance != other.advance {
            fields.push(format!("advance {}, not {}", self.advance, other.advance));
        }
        if self.tree != other.tree || self.product != other.product {
            fields.push("another tree or product".into());
        }
        fields.join("; ")
    }
}

/// The bytes of record commit R: the one place this module builds a commit of sf's.
fn record_commit(tree: ObjectId, imported: ObjectId) -> Vec<u8> {
    git_object::encode_commit(&Commit {
        tree,
        parents: vec![imported],
        author: IDENT.to_owned(),
        committer: IDENT.to_owned(),
        message: import_message(),
    })
}

/// What to import: the commit `rev` names in the repository at `source`, and whether to move
/// the target to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportBase {
    /// The repository to read, as an absolute path (a work tree or a bare repository).
    pub source: String,
    /// The branch, tag or commit to import.
    pub rev: String,
    /// Move the target to the imported commit, only forward along the source's history.
    pub advance: bool,
}

impl ImportBase {
    /// Checks `source`: an absolute path of at most 4096 bytes without control characters
    /// (`invalid-input` otherwise). Call it before opening the source.
    pub fn check_source(&self) -> Result<(), RepositoryError> {
        if valid_source(&self.source) {
            Ok(())
        } else {
            Err(RepositoryError::invalid(
                format!("source {:?}", self.source),
                SOURCE_RULE,
            ))
        }
    }
}

/// What an import did to the target.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TargetMove {
    /// The import did not ask to move it.
    NotAsked,
    /// It named the imported commit already, or does after an update that was refused or
    /// not confirmed (a concurrent import moved it there, or this one did).
    AlreadyThere,
    /// This call moved it from `from` to the imported commit, confirmed by the store's
    /// read-back.
    Moved {
        /// The commit it named before.
        from: ObjectId,
    },
    /// It moved between the check and the update: the update was refused and nothing moved.
    Conflict {
        /// The commit it named when checked.
        expected: ObjectId,
        /// What it named when the update was refused (`None`: absent).
        current: Option<RefValue>,
    },
    /// The update was submitted and its outcome is not known. Never retried here; it is
    /// neither "moved" nor "not moved".
    Unknown {
        /// The commit it named before.
        from: ObjectId,
        /// Why the outcome is not known.
        reason: String,
    },
}

impl TargetMove {
    /// The outcome's word: `not-asked`, `already-there`, `moved`, `conflict`, `unknown`.
    pub fn word(&self) -> &'static str {
        match self {
            Self::NotAsked => "not-asked",
            Self::AlreadyThere => "already-there",
            Self::Moved { .. } => "moved",
            Self::Conflict { .. } => "conflict",
            Self::Unknown { .. } => "unknown",
        }
    }
}

/// A published import: the record, where it is, and what happened to the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedBase {
    /// The record as stored.
    pub record: ImportRecord,
    /// The ref that publishes it.
    pub record_ref: RefName,
    /// Record commit R.
    pub record_commit: ObjectId,
    /// The record existed already: this call wrote nothing (but may have moved the target).
    pub replayed: bool,
    /// What happened to the target.
    pub target: TargetMove,
}

/// Where an import reads from: the team's repository, through a reader that re-hashes every
/// object (`git_source::GitSource` over sf-git). The repository module never names the Git
/// surface itself.
pub trait ImportSource {
    /// Why a read failed.
    type Error: SourceError;

    /// The commit `rev` names, with its exact bytes, and every leaf of its tree by its
    /// identities (sorted by path; no file's bytes kept), checked against the tree model
    /// with `limits` and `policy`; every fault of the tree listed.
    fn read_leaves(
        &mut self,
        rev: &str,
        limits: &RepositoryLimits,
        policy: TreePolicy,
    ) -> Result<(ImportedHead, Vec<WalkedLeaf>), Self::Error>;

    /// Reads the blobs of the tree `tree` again (listed by [`ImportSource::read_leaves`] with
    /// the same `limits` and `policy`), handing each leaf's path, mode and bytes to `each`;
    /// stops at the first error, `each`'s or its own (a read that failed is `unavailable`).
    fn read_again(
        &mut self,
        tree: ObjectId,
        limits: &RepositoryLimits,
        policy: TreePolicy,
        each: &mut EachLeaf<'_>,
    ) -> Result<(), RepositoryError>;

    /// Whether `commit` descends from `ancestor` in the source's history as read; a commit
    /// does not descend from itself.
    fn descends_from(&mut self, commit: ObjectId, ancestor: ObjectId) -> Result<bool, Self::Error>;
}

/// An [`ImportSource`]'s error: a message and a stable kebab-case code.
pub trait SourceError: std::error::Error + 'static {
    /// The stable kebab-case code of the error.
    fn code(&self) -> &'static str;
}

/// Why an import failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError<E: SourceError> {
    /// The source could not be read, or holds a commit or tree sf cannot hold; nothing was
    /// written.
    #[error(transparent)]
    Source(E),
    /// The repository refused (invalid input, a conflicting record, a target the commit does
    /// not descend from) or failed.
    #[error(transparent)]
    Repository(#[from] RepositoryError),
}

impl<E: SourceError> ImportError<E> {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Source(error) => error.code(),
            Self::Repository(error) => error.code(),
        }
    }
}

/// An import's source, reading the tree it listed a second time.
struct SecondRead<'a, S> {
    source: &'a mut S,
    tree: ObjectId,
    limits: RepositoryLimits,
    policy: TreePolicy,
}

impl<S: ImportSource> LeafBytes for SecondRead<'_, S> {
    fn read_again(&mut self, each: &mut EachLeaf<'_>) -> Result<(), RepositoryError> {
        self.source
            .read_again(self.tree, &self.limits, self.policy, each)
    }
}

impl Repository {
    /// Imports the commit `request.rev` names in `git`, the repository at `request.source`,
    /// as a further base and returns its published record.
    ///
    /// Everything is read and checked before anything is written: the commit and its whole
    /// tree, with this repository's settings (a tree the model cannot hold is refused whole,
    /// every path at fault listed); an existing record of the commit (the same record is a
    /// replay, which writes nothing; another is `conflict`); and, with `advance`, that the
    /// commit descends from the target in the source's history as read (`conflict`, naming
    /// both, otherwise). Then the commit's parents are recorded as a history boundary unless
    /// stored, its objects and the record's are written, and the record ref is created,
    /// create-only (a concurrent identical import converges on it). Only then, with
    /// `advance`, the target moves by one compare-and-swap from the commit it was checked at;
    /// what happened is [`ImportedBase::target`]. (A store that refuses to start that update,
    /// its ownership check failing, say, is an `Err` with the record published and nothing
    /// moved; an identical import is then a replay that tries again.)
    pub fn import_base<S: ImportSource>(
        &self,
        git: &mut S,
        request: &ImportBase,
    ) -> Result<ImportedBase, ImportError<S::Error>> {
        request.check_source()?;
        let settings = self.identity.settings();
        let (limits, policy) = (settings.limits(), settings.policy());
        let (imported, leaves) = git
            .read_leaves(&request.rev, &limits, policy)
            .map_err(ImportError::Source)?;
        // The source checked the revision its own way first (a Git reader names a bad one
        // `bad-revision`); what a record holds has a rule of its own.
        if !valid_rev(&request.rev) {
            return Err(RepositoryError::invalid("rev", REV_RULE).into());
        }
        imported
            .check()
            .map_err(|rule| RepositoryError::invalid("imported commit", rule))?;
        // The trees and the tree record from the leaves' identities (the tree may be an
        // earlier base's, whose record is kept); the blobs are read again as they are written.
        let built = streamed::build_base(&leaves).map_err(|why| {
            RepositoryError::invalid("imported commit", format!("its tree record: {why}"))
        })?;
        if built.tree != imported.tree {
            return Err(RepositoryError::invalid(
                "imported commit",
                format!(
                    "its files build tree {}, not the tree {} the commit names",
                    built.tree, imported.tree
                ),
            )
            .into());
        }
        let record = ImportRecord {
            product: self.identity.product_id.clone(),
            commit: imported.commit,
            tree: imported.tree,
            source: request.source.clone(),
            rev: request.rev.clone(),
            advance: request.advance,
        };
        let (record_objects, record_commit) = record.objects();
        let name = import_ref(&imported.commit);
        let replayed = match self.recorded_import(&imported.commit)? {
            None => false,
            Some((_, stored)) if stored == record_commit => {
                // A replay: what the record publishes is read back whole (through one
                // reader, streaming), and nothing is written.
                let _reads = self.store.read_scope();
                let tree = self.factory_tree(&imported.commit)?;
                let ControlFlow::Continue(_) = source::stream_tree(
                    self.store.as_ref(),
                    tree,
                    &settings,
                    &format!("commit {}", imported.commit),
                    self.deadline(),
                    |_, _| ControlFlow::<Infallible>::Continue(()),
                )?;
                true
            }
            Some((stored, _)) => return Err(conflicting_record(&name, &stored, &record).into()),
        };
        let from = if request.advance {
            let from = self.target()?;
            if from != imported.commit
                && !git
                    .descends_from(imported.commit, from)
                    .map_err(ImportError::Source)?
            {
                return Err(RepositoryError::Conflict {
                    what: format!(
                        "{} names {from}, and commit {} does not descend from it in the history \
                         of {} as read: the target follows the source only forward (nothing \
                         was written)",
                        self.identity.target_ref, imported.commit, request.source
                    ),
                }
                .into());
            }
            Some(from)
        } else {
            None
        };
        if !replayed {
            let mut objects = built.objects;
            objects.push(EncodedObject::new(
                ObjectKind::Commit,
                imported.body.clone(),
            ));
            objects.extend(record_objects);
            let mut bytes = SecondRead {
                source: git,
                tree: imported.tree,
                limits,
                policy,
            };
            self.publish_import(
                &imported.parents,
                (&leaves, &mut bytes, &objects),
                (&name, &record, record_commit),
                built.record,
            )?;
        }
        let target = match from {
            None => TargetMove::NotAsked,
            Some(from) => self.advance_target(from, imported.commit)?,
        };
        Ok(ImportedBase {
            record,
            record_ref: name,
            record_commit,
            replayed,
            target,
        })
    }

    /// Records the boundary if a parent is not stored, writes the blobs of `leaves` as
    /// `bytes` reads them again and then `objects`, publishes the tree record `tree_record`
    /// of the commit's tree, and creates the import record ref `name` naming
    /// `record_commit`.
    fn publish_import(
        &self,
        parents: &[ObjectId],
        (leaves, bytes, objects): (&[WalkedLeaf], &mut dyn LeafBytes, &[EncodedObject]),
        (name, record, record_commit): (&RefName, &ImportRecord, ObjectId),
        tree_record: ObjectId,
    ) -> Result<(), RepositoryError> {
        let budget = MAX_IMPORTED_COMMIT_BYTES.saturating_mul(parents.len() as u64);
        let stored = self.store.read_verified(parents, budget, self.deadline());
        let stored = stored.map_err(|error| match error {
            ObjectStoreError::Corrupt { what } => RepositoryError::corrupt(what),
            other => other.into(),
        })?;
        if stored.iter().any(Option::is_none) {
            // Its parents stay in the team's repository: Git must know the history ends here.
            self.store
                .record_boundaries(&[record.commit], self.deadline())
                .map_err(|error| match error {
                    ObjectStoreError::Unavailable { reason } => RepositoryError::Unavailable {
                        reason: format!(
                            "commit {} has parents this repository does not hold, so its \
                             store must hold a history boundary: {reason} (nothing was written)",
                            record.commit
                        ),
                    },
                    other => other.into(),
                })?;
        }
        streamed::write_blobs(
            self.store.as_ref(),
            leaves,
            bytes,
            &format!("commit {}", record.commit),
            &|| self.deadline(),
        )?;
        self.store.write_objects(objects, self.deadline())?;
        self.options.faults.reached(FaultPoint::ObjectsWritten);
        self.publish_tree_record(&record.tree, tree_record)?;
        match self
            .store
            .create_ref(name, &record_commit, self.deadline())?
        {
            RefUpdate::Applied => {}
            // A concurrent identical import published the same record first: converge on it.
            RefUpdate::Refused {
                current: Some(RefValue::Direct(current)),
            } if current == record_commit => {}
            RefUpdate::Refused {
                current: Some(RefValue::Direct(_)),
            } => return Err(self.other_record(name, record)),
            RefUpdate::Refused {
                current: Some(current),
            } => {
                return Err(RepositoryError::corrupt(format!(
                    "{name} names {current:?}, not a record commit"
                )));
            }
            RefUpdate::Refused { current: None } => {
                self.settle_record_ref(
                    name,
                    record,
                    record_commit,
                    "the store refused an absent ref",
                )?;
            }
            RefUpdate::Unknown { reason } => {
                self.settle_record_ref(name, record, record_commit, &reason)?;
            }
        }
        self.options.faults.reached(FaultPoint::Published);
        Ok(())
    }

    /// After a record ref creation the store could not confirm: a concurrent import may hold
    /// Git's lock on the ref. Reads only, for a bounded time, until the ref names a record.
    fn settle_record_ref(
        &self,
        name: &RefName,
        record: &ImportRecord,
        record_commit: ObjectId,
        reason: &str,
    ) -> Result<(), RepositoryError> {
        let patience = Instant::now() + RECORD_REF_PATIENCE.min(self.options.git_timeout);
        loop {
            match self.store.read_ref(name, self.deadline())? {
                Some(RefValue::Direct(current)) if current == record_commit => return Ok(()),
                Some(_) => return Err(self.other_record(name, record)),
                None if Instant::now() < patience => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                None => {
                    return Err(RepositoryError::GitFailed {
                        detail: format!("publishing {name}: {reason}"),
                    });
                }
            }
        }
    }

    /// The error for a record ref that names something else than this import's record: a
    /// conflict if it is another valid record, corrupt otherwise.
    fn other_record(&self, name: &RefName, record: &ImportRecord) -> RepositoryError {
        match self.recorded_import(&record.commit) {
            Ok(Some((stored, _))) => conflicting_record(name, &stored, record),
            Ok(None) => RepositoryError::GitFailed {
                detail: format!("{name} was refused and then read absent"),
            },
            Err(error) => error,
        }
    }

    /// Moves the target from `from` to `commit` by one compare-and-swap.
    fn advance_target(
        &self,
        from: ObjectId,
        commit: ObjectId,
    ) -> Result<TargetMove, RepositoryError> {
        if from == commit {
            return Ok(TargetMove::AlreadyThere);
        }
        let target = RefName::parse(&self.identity.target_ref)?;
        Ok(
            match self
                .store
                .compare_and_swap_ref(&target, &from, &commit, self.deadline())?
            {
                RefUpdate::Applied => TargetMove::Moved { from },
                RefUpdate::Refused {
                    current: Some(RefValue::Direct(current)),
                } if current == commit => TargetMove::AlreadyThere,
                RefUpdate::Refused { current } => TargetMove::Conflict {
                    expected: from,
                    current,
                },
                RefUpdate::Unknown { reason } => self.settle_target(from, commit, reason),
            },
        )
    }

    /// After a target update the store could not confirm: read the target once (never
    /// retrying). Naming the imported commit, the target is where the import wants it,
    /// whoever moved it (a concurrent identical import, typically, whose update made this
    /// one's fail): `AlreadyThere`. Anything else stays `Unknown`.
    fn settle_target(&self, from: ObjectId, commit: ObjectId, reason: String) -> TargetMove {
        match self.target() {
            Ok(current) if current == commit => TargetMove::AlreadyThere,
            Ok(current) => TargetMove::Unknown {
                from,
                reason: format!("{reason}; the target names {current} now"),
            },
            Err(error) => TargetMove::Unknown {
                from,
                reason: format!("{reason}; the target cannot be read back: {error}"),
            },
        }
    }

    /// The record `refs/sf/imports/<commit>` publishes and its commit R, verified whole:
    /// R in sf's form (its bytes exactly what the record rebuilds, so its tree holds only
    /// `import.json` and its parent is `commit`), the record's canonical bytes, its fields'
    /// rules, this Product, and `commit`. `None` when the ref is absent; anything else that
    /// fails is `corrupt`, never repaired.
    pub(super) fn recorded_import(
        &self,
        commit: &ObjectId,
    ) -> Result<Option<(ImportRecord, ObjectId)>, RepositoryError> {
        let name = import_ref(commit);
        let record_commit = match self.store.read_ref(&name, self.deadline())? {
            None => return Ok(None),
            Some(RefValue::Direct(id)) => id,
            Some(RefValue::Symbolic(to)) => {
                return Err(RepositoryError::corrupt(format!(
                    "{name} is a symbolic ref to {to}"
                )));
            }
        };
        let what = format!("import record {name}");
        let not_sf = |why: &str| {
            RepositoryError::corrupt(format!(
                "{what}: {record_commit} is not a record commit sf writes: {why}"
            ))
        };
        let deadline = self.deadline();
        let read = |id: ObjectId, kind: ObjectKind, budget: u64| {
            source::read_verified(self.store.as_ref(), &[id], kind, budget, &what, deadline)
                .map(|mut bodies| bodies.remove(0))
        };
        let body = read(record_commit, ObjectKind::Commit, MAX_COMMIT_BYTES)?;
        let heads = commit_heads(&body).map_err(not_sf)?;
        let tree = read(heads.tree, ObjectKind::Tree, MAX_COMMIT_BYTES)?;
        let blob = match git_object::decode_tree(&tree).as_deref() {
            Some(
                [
                    TreeEntry {
                        mode: EntryMode::File,
                        name,
                        id,
                    },
                ],
            ) if name == IMPORT_RECORD_NAME => *id,
            _ => return Err(not_sf("its tree is not exactly {import.json}")),
        };
        let bytes = read(blob, ObjectKind::Blob, MAX_IMPORT_RECORD_BYTES)?;
        let record: ImportRecord = canonical::from_canonical_slice(&bytes, "import.json")
            .map_err(|error| RepositoryError::corrupt(format!("{what}: {error}")))?;
        if record.product != self.identity.product_id {
            return Err(RepositoryError::corrupt(format!(
                "{what}: records product {:?}, not this repository's {:?}",
                record.product, self.identity.product_id
            )));
        }
        if record.commit != *commit {
            return Err(RepositoryError::corrupt(format!(
                "{what}: records commit {}, not {commit}",
                record.commit
            )));
        }
        if record.objects().1 != record_commit {
            return Err(not_sf("its bytes are not the ones its record rebuilds"));
        }
        Ok(Some((record, record_commit)))
    }
    /// The tree of `commit` when an import record publishes it (checked: the commit is
    /// stored and names the tree its record names); `None` when no record does.
    pub(super) fn imported_tree(
        &self,
        commit: &ObjectId,
    ) -> Result<Option<ObjectId>, RepositoryError> {
        let Some((record, _)) = self.recorded_import(commit)? else {
            return Ok(None);
        };
        let what = format!("imported commit {commit}");
        let body = source::read_verified(
            self.store.as_ref(),
            &[*commit],
            ObjectKind::Commit,
            MAX_IMPORTED_COMMIT_BYTES,
            &what,
            self.deadline(),
        )?
        .remove(0);
        let heads = commit_heads(&body).map_err(|rule| {
            RepositoryError::corrupt(format!("{what} is not a commit sf can hold: {rule}"))
        })?;
        if heads.tree != record.tree {
            return Err(RepositoryError::corrupt(format!(
                "{what} names tree {}, not the tree {} its import record names",
                heads.tree, record.tree
            )));
        }
        Ok(Some(heads.tree))
    }
}

fn conflicting_record(
    name: &RefName,
    stored: &ImportRecord,
    asked: &ImportRecord,
) -> RepositoryError {
    RepositoryError::Conflict {
        what: format!(
            "{name} already records commit {} with {}: an import is recorded once, and this \
             one asked for another record (nothing was written)",
            stored.commit,
            stored.differences(asked)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ImportRecord {
        ImportRecord {
            product: "p".into(),
            commit: ObjectId::from_bytes([1; 20]),
            tree: ObjectId::from_bytes([2; 20]),
            source: "/src/repo".into(),
            rev: "main".into(),
            advance: true,
        }
    }

    #[test]
    fn records_round_trip_canonically_and_refuse_what_breaks_a_rule() {
        let bytes = record().to_bytes();
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            format!(
                "{{\"advance\":true,\"commit\":\"{}\",\"product\":\"p\",\"protocol\":\"sf-import/1\",\"rev\":\"main\",\"source\":\"/src/repo\",\"tree\":\"{}\"}}",
                "01".repeat(20),
                "02".repeat(20)
            )
        );
        let back: ImportRecord = canonical::from_canonical_slice(&bytes, "import.json").unwrap();
        assert_eq!(back, record());
        let text = String::from_utf8(bytes).unwrap();
        for bad in [
            text.replace("sf-import/1", "sf-import/2"),
            text.replace("\"/src/repo\"", "\"src/repo\""),
            text.replace("\"main\"", "\"-all\""),
            text.replace("\"main\"", "\"a b\""),
            text.replace("\"p\"", "\"\""),
            text.replace("true", "1"),
            text.replacen('{', "{\"extra\":1,", 1),
            text.replace(",\"rev\":\"main\"", ""),
            text.replace(":", ": "),
        ] {
            assert!(
                canonical::from_canonical_slice::<ImportRecord>(bad.as_bytes(), "import.json")
                    .is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_record_commit_names_its_tree_and_the_imported_commit() {
        let (objects, id) = record().objects();
        assert_eq!(objects.len(), 3);
        assert!(objects.iter().all(EncodedObject::verify));
        assert_eq!(objects[2].id, id);
        let heads = commit_heads(&objects[2].body).unwrap();
        assert_eq!(heads.tree, objects[1].id);
        assert_eq!(heads.parents, [record().commit]);
        assert!(String::from_utf8_lossy(&objects[2].body).ends_with("\n\nsf-import/1\n"));
        let other = ImportRecord {
            advance: false,
            ..record()
        };
        assert_ne!(other.objects().1, id, "every field is part of the record");
    }

    #[test]
    fn sources_and_revisions() {
        assert!(valid_source("/a/b") && !valid_source("a/b") && !valid_source("/a\nb"));
        assert!(!valid_source(&format!("/{}", "a".repeat(MAX_SOURCE_BYTES))));
        assert!(valid_rev("main") && valid_rev("v1.0^{commit}") && !valid_rev(""));
        assert!(!valid_rev("--all") && !valid_rev("a b") && !valid_rev(&"a".repeat(257)));
    }
}
