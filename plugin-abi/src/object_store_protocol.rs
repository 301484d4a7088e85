//! The `object-store` contract on the wire: one request and one answer shape per method of
//! [`ObjectStoreFactory`](crate::contracts::ObjectStoreFactory) and
//! [`ObjectStore`](crate::contracts::ObjectStore), and the error encoding that keeps every
//! [`ObjectStoreError`] code and field.
//!
//! Both sides use this module: the host encodes requests and decodes answers, the sdk decodes
//! requests and encodes answers, so the two can only disagree across versions. Object bodies,
//! markers and paths travel as raw sections; ids as 40 lowercase hex characters; deadlines as
//! the milliseconds left (`deadlineMs`).
//!
//! | method | instance | request header | answer header |
//! |---|---|---|---|
//! | `create` | factory | `{path, deadlineMs}` | `{root}` + a new store instance |
//! | `open` | factory | `{root, marker, deadlineMs}` | `{root}` + a new store instance |
//! | `mark` | store | `{marker, deadlineMs}` | `{}` |
//! | `write_objects` | store | `{objects: [{kind, id, body}], deadlineMs}` | `{}` |
//! | `read_objects` | store | `{ids, budget, deadlineMs}` | `{objects: [null or {kind, body}]}` |
//! | `read_ref` | store | `{name, deadlineMs}` | `{value: null, {direct} or {symbolic}}` |
//! | `list_refs` | store | `{prefix, deadlineMs}` | `{refs: [{name, value}]}` |
//! | `create_ref` | store | `{name, value, deadlineMs}` | `{update}` |
//! | `compare_and_swap_ref` | store | `{name, expected, new, deadlineMs}` | `{update}` |
//! | `record_boundaries` | store | `{commits, deadlineMs}` | `{}` |
//! | `begin_reads` | store | `{}` | `{}` |
//! | `end_reads` | store | `{}` | `{}` |
//!
//! `record_boundaries` came with ABI minor 3's object stores; a plugin of an older minor
//! answers it as an unknown method, which the host reports as `unavailable`, and the host's
//! factory adapter answers `supports_boundaries` from the plugin's minor without a call, so
//! that a create needing a boundary is refused before a root exists.
//!
//! `begin_reads` and `end_reads` (a read scope, a hint) came with ABI minor 10; the host sends
//! them only to a plugin of minor 10 or later, and a store of an older plugin serves every
//! read on its own, as it always did.
//!
//! `root` is `{path, dev, ino}`, `update` is `{outcome: "applied"}`, `{outcome: "refused",
//! current}` or `{outcome: "unknown", reason}`. Numbers in `path`, `marker` and `body` are
//! section indexes.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::contracts::git_object::{ObjectId, ObjectKind};
use crate::contracts::{
    EncodedObject, ObjectStoreError, RefName, RefUpdate, RefValue, StoreRoot, StoredObject,
};
use crate::message::{self, MessageBuilder, MessageError, Sections};
use crate::protocol::{self, Empty, deadline_in, remaining_ms};

protocol::wire_contract! {
    /// The `object-store` contract, as the host and the sdk name it.
    ObjectStoreContract: "object-store", ObjectStoreError
}

/// The method names, as sent in `call`.
pub mod method {
    /// [`ObjectStoreFactory::create`](crate::contracts::ObjectStoreFactory::create).
    pub const CREATE: &str = "create";
    /// [`ObjectStoreFactory::open`](crate::contracts::ObjectStoreFactory::open).
    pub const OPEN: &str = "open";
    /// [`ObjectStore::mark`](crate::contracts::ObjectStore::mark).
    pub const MARK: &str = "mark";
    /// [`ObjectStore::write_objects`](crate::contracts::ObjectStore::write_objects).
    pub const WRITE_OBJECTS: &str = "write_objects";
    /// [`ObjectStore::read_objects`](crate::contracts::ObjectStore::read_objects).
    pub const READ_OBJECTS: &str = "read_objects";
    /// [`ObjectStore::read_ref`](crate::contracts::ObjectStore::read_ref).
    pub const READ_REF: &str = "read_ref";
    /// [`ObjectStore::list_refs`](crate::contracts::ObjectStore::list_refs).
    pub const LIST_REFS: &str = "list_refs";
    /// [`ObjectStore::create_ref`](crate::contracts::ObjectStore::create_ref).
    pub const CREATE_REF: &str = "create_ref";
    /// [`ObjectStore::compare_and_swap_ref`](crate::contracts::ObjectStore::compare_and_swap_ref).
    pub const COMPARE_AND_SWAP_REF: &str = "compare_and_swap_ref";
    /// [`ObjectStore::record_boundaries`](crate::contracts::ObjectStore::record_boundaries).
    pub const RECORD_BOUNDARIES: &str = "record_boundaries";
    /// [`ObjectStore::begin_reads`](crate::contracts::ObjectStore::begin_reads).
    pub const BEGIN_READS: &str = "begin_reads";
    /// [`ObjectStore::end_reads`](crate::contracts::ObjectStore::end_reads).
    pub const END_READS: &str = "end_reads";
}

/// A request, as the plugin side decodes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `create` (on the factory).
    Create {
        /// The path to create.
        path: PathBuf,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `open` (on the factory).
    Open {
        /// The root to open, as `create` returned it.
        root: StoreRoot,
        /// The marker bytes.
        marker: Vec<u8>,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `mark`.
    Mark {
        /// The marker bytes.
        marker: Vec<u8>,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `write_objects`.
    WriteObjects {
        /// The objects to write.
        objects: Vec<EncodedObject>,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `read_objects`.
    ReadObjects {
        /// The ids to read, in order.
        ids: Vec<ObjectId>,
        /// The most bytes the answer may hold.
        budget: u64,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `read_ref`.
    ReadRef {
        /// The ref.
        name: RefName,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `list_refs`.
    ListRefs {
        /// The prefix refs are listed under.
        prefix: String,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `create_ref`.
    CreateRef {
        /// The ref.
        name: RefName,
        /// The value to create it with.
        value: ObjectId,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `record_boundaries`.
    RecordBoundaries {
        /// The commits whose parents the store does not hold.
        commits: Vec<ObjectId>,
        /// When the host stops waiting.
        deadline: Instant,
    },
    /// `begin_reads`.
    BeginReads,
    /// `end_reads`.
    EndReads,
    /// `compare_and_swap_ref`.
    CompareAndSwapRef {
        /// The ref.
        name: RefName,
        /// The value it must have now.
        expected: ObjectId,
        /// The value to set.
        new: ObjectId,
        /// When the host stops waiting.
        deadline: Instant,
    },
}

impl Request {
    /// Whether `method` is one a factory instance serves (the others are store methods).
    pub fn is_factory_method(method: &str) -> bool {
        matches!(method, method::CREATE | method::OPEN)
    }

    /// Decodes the request of `method`. `Ok(None)`: the method is not one of this contract's.
    pub fn decode(method: &str, bytes: &[u8]) -> Result<Option<Self>, MessageError> {
        let request = match method {
            method::CREATE => {
                let (header, mut sections) = message::decode::<CreateHeader>(bytes)?;
                let path = PathBuf::from(OsStr::from_bytes(sections.take(header.path)?));
                sections.finish()?;
                Self::Create {
                    path,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::OPEN => {
                let (header, mut sections) = message::decode::<OpenHeader>(bytes)?;
                let root = header.root.decode(&mut sections)?;
                let marker = sections.take(header.marker)?.to_vec();
                sections.finish()?;
                Self::Open {
                    root,
                    marker,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::MARK => {
                let (header, mut sections) = message::decode::<MarkHeader>(bytes)?;
                let marker = sections.take(header.marker)?.to_vec();
                sections.finish()?;
                Self::Mark {
                    marker,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::WRITE_OBJECTS => {
                let (header, mut sections) = message::decode::<WriteObjectsHeader>(bytes)?;
                let mut objects = Vec::with_capacity(header.objects.len());
                for (at, object) in header.objects.iter().enumerate() {
                    let field = format!("objects[{at}]");
                    objects.push(EncodedObject {
                        kind: parse_kind(&object.kind, &field)?,
                        id: parse_id(&object.id, &field)?,
                        body: sections.take(object.body)?.to_vec(),
                    });
                }
                sections.finish()?;
                Self::WriteObjects {
                    objects,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::READ_OBJECTS => {
                let header = message::decode_header::<ReadObjectsHeader>(bytes)?;
                let ids = header
                    .ids
                    .iter()
                    .enumerate()
                    .map(|(at, id)| parse_id(id, &format!("ids[{at}]")))
                    .collect::<Result<_, _>>()?;
                Self::ReadObjects {
                    ids,
                    budget: header.budget,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::RECORD_BOUNDARIES => {
                let header = message::decode_header::<RecordBoundariesHeader>(bytes)?;
                let commits = header
                    .commits
                    .iter()
                    .enumerate()
                    .map(|(at, id)| parse_id(id, &format!("commits[{at}]")))
                    .collect::<Result<_, _>>()?;
                Self::RecordBoundaries {
                    commits,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::READ_REF => {
                let header = message::decode_header::<ReadRefHeader>(bytes)?;
                Self::ReadRef {
                    name: parse_name(&header.name, "name")?,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::LIST_REFS => {
                let header = message::decode_header::<ListRefsHeader>(bytes)?;
                Self::ListRefs {
                    prefix: header.prefix,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::CREATE_REF => {
                let header = message::decode_header::<CreateRefHeader>(bytes)?;
                Self::CreateRef {
                    name: parse_name(&header.name, "name")?,
                    value: parse_id(&header.value, "value")?,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::COMPARE_AND_SWAP_REF => {
                let header = message::decode_header::<CompareAndSwapHeader>(bytes)?;
                Self::CompareAndSwapRef {
                    name: parse_name(&header.name, "name")?,
                    expected: parse_id(&header.expected, "expected")?,
                    new: parse_id(&header.new, "new")?,
                    deadline: deadline_in(header.deadline_ms),
                }
            }
            method::BEGIN_READS => {
                Empty::decode(bytes)?;
                Self::BeginReads
            }
            method::END_READS => {
                Empty::decode(bytes)?;
                Self::EndReads
            }
            _ => return Ok(None),
        };
        Ok(Some(request))
    }
}

// ---------------------------------------------------------------------------------------------
// Requests: encoding (host side)

/// `create`.
pub fn encode_create(path: &std::path::Path, deadline: Instant) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let path = builder.section(path.as_os_str().as_bytes());
    builder.encode(&CreateHeader {
        path,
        deadline_ms: remaining_ms(deadline),
    })
}

/// `open`.
pub fn encode_open(root: &StoreRoot, marker: &[u8], deadline: Instant) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let root = RootHeader::encode(root, &mut builder);
    let marker = builder.section(marker);
    builder.encode(&OpenHeader {
        root,
        marker,
        deadline_ms: remaining_ms(deadline),
    })
}

/// `mark`.
pub fn encode_mark(marker: &[u8], deadline: Instant) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let marker = builder.section(marker);
    builder.encode(&MarkHeader {
        marker,
        deadline_ms: remaining_ms(deadline),
    })
}

/// `write_objects`.
pub fn encode_write_objects(objects: &[EncodedObject], deadline: Instant) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let objects = objects
        .iter()
        .map(|object| ObjectHeader {
            kind: object.kind.as_str().to_owned(),
            id: object.id.to_hex(),
            body: builder.section(&object.body),
        })
        .collect();
    builder.encode(&WriteObjectsHeader {
        objects,
        deadline_ms: remaining_ms(deadline),
    })
}

/// `read_objects`.
pub fn encode_read_objects(ids: &[ObjectId], budget: u64, deadline: Instant) -> Vec<u8> {
    message::encode_header(&ReadObjectsHeader {
        ids: ids.iter().map(ObjectId::to_hex).collect(),
        budget,
        deadline_ms: remaining_ms(deadline),
    })
}

/// `record_boundaries`.
pub fn encode_record_boundaries(commits: &[ObjectId], deadline: Instant) -> Vec<u8> {
    message::encode_header(&RecordBoundariesHeader {
        commits: commits.iter().map(ObjectId::to_hex).collect(),
        deadline_ms: remaining_ms(deadline),
    })
}

/// `begin_reads` and `end_reads`, whose requests are empty.
pub fn encode_read_scope() -> Vec<u8> {
    Empty::encode()
}

/// `read_ref`.
pub fn encode_read_ref(name: &RefName, deadline: Instant) -> Vec<u8> {
    message::encode_header(&ReadRefHeader {
        name: name.as_str().to_owned(),
        deadline_ms: remaining_ms(deadline),
    })
}

/// `list_refs`.
pub fn encode_list_refs(prefix: &str, deadline: Instant) -> Vec<u8> {
    message::encode_header(&ListRefsHeader {
        prefix: prefix.to_owned(),
        deadline_ms: remaining_ms(deadline),
    })
}

/// `create_ref`.
pub fn encode_create_ref(name: &RefName, value: &ObjectId, deadline: Instant) -> Vec<u8> {
    message::encode_header(&CreateRefHeader {
        name: name.as_str().to_owned(),
        value: value.to_hex(),
        deadline_ms: remaining_ms(deadline),
    })
}

/// `compare_and_swap_ref`.
pub fn encode_compare_and_swap_ref(
    name: &RefName,
    expected: &ObjectId,
    new: &ObjectId,
    deadline: Instant,
) -> Vec<u8> {
    message::encode_header(&CompareAndSwapHeader {
        name: name.as_str().to_owned(),
        expected: expected.to_hex(),
        new: new.to_hex(),
        deadline_ms: remaining_ms(deadline),
    })
}

// ---------------------------------------------------------------------------------------------
// Answers

/// The answer of `create` and `open`: the new store's root.
pub fn encode_root(root: &StoreRoot) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let root = RootHeader::encode(root, &mut builder);
    builder.encode(&RootAnswer { root })
}

/// Decodes the answer of `create`: the new root.
pub fn decode_root(bytes: &[u8]) -> Result<StoreRoot, MessageError> {
    let (answer, mut sections) = message::decode::<RootAnswer>(bytes)?;
    let root = answer.root.decode(&mut sections)?;
    sections.finish()?;
    Ok(root)
}

/// The answer of `read_objects`.
pub fn encode_objects(objects: &[Option<StoredObject>]) -> Vec<u8> {
    let mut builder = MessageBuilder::new();
    let objects = objects
        .iter()
        .map(|object| {
            object.as_ref().map(|object| StoredHeader {
                kind: object.kind.as_str().to_owned(),
                body: builder.section(&object.body),
            })
        })
        .collect();
    builder.encode(&ObjectsAnswer { objects })
}

/// Decodes the answer of `read_objects`: one entry per id, `None` for a missing object.
pub fn decode_objects(bytes: &[u8]) -> Result<Vec<Option<StoredObject>>, MessageError> {
    let (answer, mut sections) = message::decode::<ObjectsAnswer>(bytes)?;
    let mut objects = Vec::with_capacity(answer.objects.len());
    for (at, object) in answer.objects.iter().enumerate() {
        objects.push(match object {
            None => None,
            Some(object) => Some(StoredObject {
                // The field's name is formatted only when the kind is wrong, not for each of a
                // read's thousands of objects.
                kind: ObjectKind::parse(&object.kind)
                    .map_or_else(|| parse_kind(&object.kind, &format!("objects[{at}]")), Ok)?,
                body: sections.take(object.body)?.to_vec(),
            }),
        });
    }
    sections.finish()?;
    Ok(objects)
}

/// The answer of `read_ref`.
pub fn encode_ref_value(value: Option<&RefValue>) -> Vec<u8> {
    message::encode_header(&RefValueAnswer {
        value: value.map(RefValueHeader::encode),
    })
}

/// Decodes the answer of `read_ref`.
pub fn decode_ref_value(bytes: &[u8]) -> Result<Option<RefValue>, MessageError> {
    let answer = message::decode_header::<RefValueAnswer>(bytes)?;
    answer.value.map(|value| value.decode("value")).transpose()
}

/// The answer of `list_refs`.
pub fn encode_ref_list(refs: &[(RefName, RefValue)]) -> Vec<u8> {
    message::encode_header(&RefListAnswer {
        refs: refs
            .iter()
            .map(|(name, value)| RefEntry {
                name: name.as_str().to_owned(),
                value: RefValueHeader::encode(value),
            })
            .collect(),
    })
}

/// Decodes the answer of `list_refs`.
pub fn decode_ref_list(bytes: &[u8]) -> Result<Vec<(RefName, RefValue)>, MessageError> {
    let answer = message::decode_header::<RefListAnswer>(bytes)?;
    answer
        .refs
        .into_iter()
        .enumerate()
        .map(|(at, entry)| {
            let field = format!("refs[{at}]");
            Ok((
                parse_name(&entry.name, &format!("{field}.name"))?,
                entry.value.decode(&format!("{field}.value"))?,
            ))
        })
        .collect()
}

/// The answer of `create_ref` and `compare_and_swap_ref`.
pub fn encode_ref_update(update: &RefUpdate) -> Vec<u8> {
    let update = match update {
        RefUpdate::Applied => UpdateHeader::Applied {},
        RefUpdate::Refused { current } => UpdateHeader::Refused {
            current: current.as_ref().map(RefValueHeader::encode),
        },
        RefUpdate::Unknown { reason } => UpdateHeader::Unknown {
            reason: reason.clone(),
        },
    };
    message::encode_header(&RefUpdateAnswer { update })
}

/// Decodes the answer of `create_ref` and `compare_and_swap_ref`.
pub fn decode_ref_update(bytes: &[u8]) -> Result<RefUpdate, MessageError> {
    let answer = message::decode_header::<RefUpdateAnswer>(bytes)?;
    Ok(match answer.update {
        UpdateHeader::Applied {} => RefUpdate::Applied,
        UpdateHeader::Refused { current } => RefUpdate::Refused {
            current: current
                .map(|value| value.decode("update.current"))
                .transpose()?,
        },
        UpdateHeader::Unknown { reason } => RefUpdate::Unknown { reason },
    })
}

// ---------------------------------------------------------------------------------------------
// Header shapes

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CreateHeader {
    path: usize,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OpenHeader {
    root: RootHeader,
    marker: usize,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct MarkHeader {
    marker: usize,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct WriteObjectsHeader {
    objects: Vec<ObjectHeader>,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectHeader {
    kind: String,
    id: String,
    body: usize,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReadObjectsHeader {
    ids: Vec<String>,
    budget: u64,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RecordBoundariesHeader {
    commits: Vec<String>,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReadRefHeader {
    name: String,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ListRefsHeader {
    prefix: String,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CreateRefHeader {
    name: String,
    value: String,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct CompareAndSwapHeader {
    name: String,
    expected: String,
    new: String,
    deadline_ms: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RootHeader {
    path: usize,
    dev: u64,
    ino: u64,
}

impl RootHeader {
    fn encode<'a>(root: &'a StoreRoot, builder: &mut MessageBuilder<'a>) -> Self {
        Self {
            path: builder.section(root.path.as_os_str().as_bytes()),
            dev: root.dev,
            ino: root.ino,
        }
    }

    fn decode(&self, sections: &mut Sections<'_>) -> Result<StoreRoot, MessageError> {
        Ok(StoreRoot {
            path: PathBuf::from(OsStr::from_bytes(sections.take(self.path)?)),
            dev: self.dev,
            ino: self.ino,
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RootAnswer {
    root: RootHeader,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredHeader {
    kind: String,
    body: usize,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectsAnswer {
    objects: Vec<Option<StoredHeader>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "lowercase")]
enum RefValueHeader {
    Direct(String),
    Symbolic(String),
}

impl RefValueHeader {
    fn encode(value: &RefValue) -> Self {
        match value {
            RefValue::Direct(id) => Self::Direct(id.to_hex()),
            RefValue::Symbolic(target) => Self::Symbolic(target.clone()),
        }
    }

    fn decode(self, field: &str) -> Result<RefValue, MessageError> {
        Ok(match self {
            Self::Direct(id) => RefValue::Direct(parse_id(&id, field)?),
            Self::Symbolic(target) => RefValue::Symbolic(target),
        })
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefValueAnswer {
    value: Option<RefValueHeader>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefEntry {
    name: String,
    value: RefValueHeader,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefListAnswer {
    refs: Vec<RefEntry>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "lowercase", deny_unknown_fields)]
enum UpdateHeader {
    Applied {},
    Refused { current: Option<RefValueHeader> },
    Unknown { reason: String },
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RefUpdateAnswer {
    update: UpdateHeader,
}

fn parse_id(text: &str, field: &str) -> Result<ObjectId, MessageError> {
    ObjectId::parse_hex(text)
        .ok_or_else(|| MessageError::field(field, "must be 40 lowercase hex characters"))
}

fn parse_kind(text: &str, field: &str) -> Result<ObjectKind, MessageError> {
    ObjectKind::parse(text)
        .ok_or_else(|| MessageError::field(format!("{field}.kind"), "must be blob, tree or commit"))
}

fn parse_name(text: &str, field: &str) -> Result<RefName, MessageError> {
    RefName::parse(text).map_err(|error| MessageError::field(field, error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn id(byte: u8) -> ObjectId {
        ObjectId::from_bytes([byte; 20])
    }

    /// An answer naming a kind no object has is refused, naming the object's field.
    #[test]
    fn an_answer_of_an_unknown_kind_names_its_object() {
        let answer = |kind: &str| {
            let mut builder = MessageBuilder::new();
            let objects = vec![
                Some(StoredHeader {
                    kind: "blob".to_owned(),
                    body: builder.section(b"a"),
                }),
                Some(StoredHeader {
                    kind: kind.to_owned(),
                    body: builder.section(b"b"),
                }),
            ];
            builder.encode(&ObjectsAnswer { objects })
        };
        let decoded = decode_objects(&answer("tree")).unwrap();
        assert_eq!(decoded[1].as_ref().unwrap().kind, ObjectKind::Tree);
        assert_eq!(
            decode_objects(&answer("tag")).unwrap_err(),
            MessageError::field("objects[1].kind", "must be blob, tree or commit")
        );
    }

    #[test]
    fn requests_round_trip() {
        let deadline = Instant::now() + Duration::from_secs(60);
        let name = RefName::parse("refs/heads/main").unwrap();
        let root = StoreRoot {
            path: PathBuf::from(OsStr::from_bytes(b"/tmp/\xffodd")),
            dev: u64::MAX,
            ino: 7,
        };
        let blob = EncodedObject::new(ObjectKind::Blob, b"\x00\x01 bytes".to_vec());
        let cases: Vec<(&str, Vec<u8>)> = vec![
            (method::CREATE, encode_create(&root.path, deadline)),
            (method::OPEN, encode_open(&root, b"marker\0", deadline)),
            (method::MARK, encode_mark(b"m", deadline)),
            (
                method::RECORD_BOUNDARIES,
                encode_record_boundaries(&[id(4)], deadline),
            ),
            (
                method::WRITE_OBJECTS,
                encode_write_objects(std::slice::from_ref(&blob), deadline),
            ),
            (
                method::READ_OBJECTS,
                encode_read_objects(&[id(1), id(1)], u64::MAX, deadline),
            ),
            (method::READ_REF, encode_read_ref(&name, deadline)),
            (
                method::LIST_REFS,
                encode_list_refs("not/validated", deadline),
            ),
            (
                method::CREATE_REF,
                encode_create_ref(&name, &id(2), deadline),
            ),
            (
                method::COMPARE_AND_SWAP_REF,
                encode_compare_and_swap_ref(&name, &id(2), &id(3), deadline),
            ),
            (method::BEGIN_READS, encode_read_scope()),
            (method::END_READS, encode_read_scope()),
        ];
        for (method, bytes) in cases {
            let request = Request::decode(method, &bytes).unwrap().unwrap();
            match request {
                Request::Create { path, .. } => assert_eq!(path, root.path),
                Request::Open {
                    root: got, marker, ..
                } => {
                    assert_eq!(got, root);
                    assert_eq!(marker, b"marker\0");
                }
                Request::Mark { marker, .. } => assert_eq!(marker, b"m"),
                Request::RecordBoundaries { commits, .. } => assert_eq!(commits, vec![id(4)]),
                Request::WriteObjects { objects, .. } => assert_eq!(objects, vec![blob.clone()]),
                Request::ReadObjects {
                    ids,
                    budget,
                    deadline: got,
                } => {
                    assert_eq!(ids, vec![id(1), id(1)]);
                    assert_eq!(budget, u64::MAX);
                    assert!(got > Instant::now() + Duration::from_secs(50));
                }
                Request::ReadRef { name: got, .. } => assert_eq!(got, name),
                Request::ListRefs { prefix, .. } => assert_eq!(prefix, "not/validated"),
                Request::CreateRef { value, .. } => assert_eq!(value, id(2)),
                Request::CompareAndSwapRef { expected, new, .. } => {
                    assert_eq!((expected, new), (id(2), id(3)))
                }
                Request::BeginReads => assert_eq!(method, method::BEGIN_READS),
                Request::EndReads => assert_eq!(method, method::END_READS),
            }
        }
        assert_eq!(Request::decode("frobnicate", b"").unwrap(), None);
        // A read scope's request is empty: anything in it is refused.
        assert!(Request::decode(method::BEGIN_READS, &encode_mark(b"m", deadline)).is_err());
        assert!(Request::decode(method::READ_REF, &encode_mark(b"m", deadline)).is_err());
    }

    #[test]
    fn answers_round_trip() {
        let root = StoreRoot {
            path: "/r".into(),
            dev: 1,
            ino: u64::MAX,
        };
        assert_eq!(decode_root(&encode_root(&root)).unwrap(), root);
        let objects = vec![
            None,
            Some(StoredObject {
                kind: ObjectKind::Tree,
                body: vec![0, 255],
            }),
            Some(StoredObject {
                kind: ObjectKind::Blob,
                body: Vec::new(),
            }),
        ];
        assert_eq!(decode_objects(&encode_objects(&objects)).unwrap(), objects);
        for value in [
            None,
            Some(RefValue::Direct(id(4))),
            Some(RefValue::Symbolic("refs/heads/x".into())),
        ] {
            assert_eq!(
                decode_ref_value(&encode_ref_value(value.as_ref())).unwrap(),
                value
            );
        }
        let refs = vec![(RefName::parse("refs/a/b").unwrap(), RefValue::Direct(id(5)))];
        assert_eq!(decode_ref_list(&encode_ref_list(&refs)).unwrap(), refs);
        for update in [
            RefUpdate::Applied,
            RefUpdate::Refused { current: None },
            RefUpdate::Refused {
                current: Some(RefValue::Direct(id(6))),
            },
            RefUpdate::Unknown {
                reason: "lost".into(),
            },
        ] {
            assert_eq!(
                decode_ref_update(&encode_ref_update(&update)).unwrap(),
                update
            );
        }
        assert!(decode_ref_update(&encode_ref_value(None)).is_err());
    }

    #[test]
    fn decoders_never_panic_on_garbage() {
        let deadline = Instant::now() + Duration::from_secs(1);
        let name = RefName::parse("refs/heads/main").unwrap();
        let seeds = [
            encode_open(
                &StoreRoot {
                    path: "/r".into(),
                    dev: 1,
                    ino: 2,
                },
                b"marker",
                deadline,
            ),
            encode_write_objects(
                &[EncodedObject::new(ObjectKind::Blob, b"body".to_vec())],
                deadline,
            ),
            encode_ref_update(&RefUpdate::Refused {
                current: Some(RefValue::Direct(id(1))),
            }),
            encode_ref_list(&[(name, RefValue::Symbolic("refs/x".into()))]),
            encode_error(&ObjectStoreError::Exists { path: "/p".into() }),
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let methods = [
            method::CREATE,
            method::OPEN,
            method::MARK,
            method::WRITE_OBJECTS,
            method::READ_OBJECTS,
            method::READ_REF,
            method::LIST_REFS,
            method::CREATE_REF,
            method::COMPARE_AND_SWAP_REF,
        ];
        for round in 0..4000 {
            let mut bytes = seeds[round % seeds.len()].clone();
            // Flip, truncate or extend: mostly-valid frames reach the deeper decoders.
            match next() % 3 {
                0 if !bytes.is_empty() => {
                    let at = next() as usize % bytes.len();
                    bytes[at] ^= next() as u8 | 1;
                }
                1 => bytes.truncate(next() as usize % (bytes.len() + 1)),
                _ => bytes.extend((0..next() % 16).map(|_| next() as u8)),
            }
            for method in methods {
                let _ = Request::decode(method, &bytes);
            }
            let _ = decode_root(&bytes);
            let _ = decode_objects(&bytes);
            let _ = decode_ref_value(&bytes);
            let _ = decode_ref_list(&bytes);
            let _ = decode_ref_update(&bytes);
            let _ = decode_error(&bytes);
        }
    }

    #[test]
    fn errors_round_trip() {
        let errors = [
            ObjectStoreError::InvalidInput {
                input: "x".into(),
                rule: "a rule",
            },
            ObjectStoreError::Exists {
                path: PathBuf::from(OsStr::from_bytes(b"/a/\xfe")),
            },
            ObjectStoreError::Unavailable { reason: "r".into() },
            ObjectStoreError::Corrupt { what: "c".into() },
            ObjectStoreError::Limit { what: "l".into() },
            ObjectStoreError::SymbolicRef { name: "n".into() },
            ObjectStoreError::Timeout { what: "t".into() },
            ObjectStoreError::Failed {
                operation: "git".into(),
                detail: "d".into(),
            },
        ];
        for error in errors {
            assert_eq!(
                decode_error(&encode_error(&error)).unwrap(),
                DecodedError::Known(error)
            );
        }
        let unknown = message::encode_header(&serde_json::json!({
            "code": "frozen", "message": "a newer code", "extra": 1
        }));
        assert_eq!(
            decode_error(&unknown).unwrap(),
            DecodedError::Unknown {
                code: "frozen".into(),
                message: "a newer code".into()
            }
        );
        let missing = message::encode_header(&serde_json::json!({
            "code": "corrupt", "message": "m"
        }));
        assert!(decode_error(&missing).is_err());
        let extra = message::encode_header(&serde_json::json!({
            "code": "corrupt", "message": "m", "what": "w", "more": "x"
        }));
        assert!(decode_error(&extra).is_err());
    }
}
