//! A deliberately hostile sf plugin, for the loader's refusal tests. Never use it.
//!
//! It misbehaves in the ways a faulty or foreign plugin can, each switched on for one process
//! so that a test can run every case in a child process and watch the host survive:
//!
//! - `SF_HOSTILE_ENTRY` changes the entry table: `wrong-magic`, `abi-major` (major + 1),
//!   `abi-minor` (minor + 1, which must still work), `null-table`, `null-function`, and
//!   `abi-minor-2`: a plugin built with an sdk of ABI 1.2, which says so in its table and
//!   answers `record_boundaries` (ABI 1.3's) as an sdk of 1.2 answers any method it does not
//!   know, and aborts the process on `begin_reads` or `end_reads` (ABI 1.10's), which the host
//!   must never send it: the host ignores a failed read-scope hint, so only a crash shows one
//!   was sent.
//! - `SF_HOSTILE_REPLY` replaces the reply of every `call` (after the real call ran; with
//!   `SF_HOSTILE_REPLY_SCOPE=store`, of store methods only):
//!   `garbage` (random bytes), `bad-header` (a frame whose header is not JSON),
//!   `wrong-shape` (a JSON header of the wrong shape), `bad-section` (a header naming a
//!   section that is not there), `bad-status` (a status no ABI defines), `null-reply` (a null
//!   pointer with a length).
//! - The `panicking` ObjectStore tag panics: `panic_in = "instantiate"` in its constructor,
//!   `"factory"` in `create` and `open`, `"store"` (the default) in every store method and in
//!   the store's destructor.
//! - The `panicking` Gate, EvidenceStore and fence tags panic in every method.
//! - The `refusing` EvidenceStore tag is never made: its constructor answers
//!   `refuse = "unavailable"` or `"corrupt"` as the contract's own error and anything else in
//!   words, so that a test sees which class the host reads from which ABI minor; with
//!   `refuse = "later"` it is made, and every method answers `unavailable`.
//! - The `memory-root` ObjectStore tag is not hostile: the sdk's in-memory store, except that
//!   `create` also makes the root as a directory on disk, exclusively, as a real store would,
//!   so that a test of the `sf` binary sees whether a root was created. It lives as long as the
//!   process; open a root only in the process that created it.
//!
//! A manifest mismatch needs no code: the tests copy the library beside an edited manifest.

use std::ffi::c_void;
use std::path::Path;
use std::time::Instant;

use sf_sdk::contracts::{
    AttemptFence, EncodedObject, EvidenceRecord, EvidenceStore, EvidenceStoreError, FenceError,
    FenceHold, Gate, GateAnswer, GateError, ObjectStore, ObjectStoreError, ObjectStoreFactory,
    RefName, RefUpdate, RefValue, StoreRoot, StoredObject,
};
use sf_sdk::export::{
    ConstructorError, EvidenceStoreConstructor, FenceConstructor, GateConstructor,
    ObjectStoreConstructor, PluginConfig, PluginDefinition, PluginEntryV1, SfBuffer, SfBytes,
    StaticEntry,
};
use sf_sdk::git_object::ObjectId;
use sf_sdk::testing::InMemoryObjectStoreFactory;

const MANIFEST: &str = include_str!("../sf-plugin.json");

static DEFINITION: PluginDefinition = PluginDefinition {
    manifest: MANIFEST,
    object_stores: &[
        ("memory-root", memory_root as ObjectStoreConstructor),
        ("panicking", panicking as ObjectStoreConstructor),
    ],
    executors: &[],
    evidence_stores: &[
        ("panicking", panicking_evidence as EvidenceStoreConstructor),
        ("refusing", refusing_evidence as EvidenceStoreConstructor),
    ],
    gates: &[("panicking", panicking_gate as GateConstructor)],
    fences: &[("panicking", panicking_fence as FenceConstructor)],
};

/// A Gate, an EvidenceStore and a fence that panic in every method.
#[derive(Debug)]
struct Panicking;

impl Gate for Panicking {
    fn current(&self, _: Instant) -> Result<GateAnswer, GateError> {
        panic!("hostile: panic in current")
    }
}

impl EvidenceStore for Panicking {
    fn put(
        &self,
        _: &EvidenceRecord,
        _: Instant,
    ) -> Result<sf_sdk::canonical::Digest, EvidenceStoreError> {
        panic!("hostile: panic in put")
    }

    fn get(
        &self,
        _: &sf_sdk::canonical::Digest,
        _: Instant,
    ) -> Result<EvidenceRecord, EvidenceStoreError> {
        panic!("hostile: panic in get")
    }

    fn find(
        &self,
        _: &sf_sdk::canonical::Digest,
        _: Instant,
    ) -> Result<Vec<sf_sdk::canonical::Digest>, EvidenceStoreError> {
        panic!("hostile: panic in find")
    }
}

fn panicking_gate(_: &PluginConfig) -> Result<Box<dyn Gate>, ConstructorError<GateError>> {
    Ok(Box::new(Panicking))
}

fn panicking_evidence(
    _: &PluginConfig,
) -> Result<Box<dyn EvidenceStore>, ConstructorError<EvidenceStoreError>> {
    Ok(Box::new(Panicking))
}

#[derive(sf_sdk::serde::Deserialize)]
#[serde(crate = "sf_sdk::serde", deny_unknown_fields)]
struct RefusingConfig {
    refuse: String,
}

/// An EvidenceStore that is never made: `refuse = "unavailable"` or `"corrupt"` answers the
/// contract's own error, `"later"` makes one whose every method is `unavailable`, anything
/// else answers in words.
fn refusing_evidence(
    config: &PluginConfig,
) -> Result<Box<dyn EvidenceStore>, ConstructorError<EvidenceStoreError>> {
    let config: RefusingConfig = config.parse()?;
    Err(match config.refuse.as_str() {
        "unavailable" => EvidenceStoreError::Unavailable {
            reason: "hostile: the server cannot be reached".into(),
        }
        .into(),
        "corrupt" => EvidenceStoreError::Corrupt {
            id: "database".into(),
            what: "hostile: a trigger is missing".into(),
        }
        .into(),
        "later" => return Ok(Box::new(Unreachable)),
        other => format!("hostile: refused in words ({other})").into(),
    })
}

/// An EvidenceStore made while its server could be reached, which no longer can be: every
/// method answers `unavailable`.
#[derive(Debug)]
struct Unreachable;

impl Unreachable {
    fn error() -> EvidenceStoreError {
        EvidenceStoreError::Unavailable {
            reason: "hostile: the server went away".into(),
        }
    }
}

impl EvidenceStore for Unreachable {
    fn put(
        &self,
        _: &EvidenceRecord,
        _: Instant,
    ) -> Result<sf_sdk::canonical::Digest, EvidenceStoreError> {
        Err(Self::error())
    }

    fn get(
        &self,
        _: &sf_sdk::canonical::Digest,
        _: Instant,
    ) -> Result<EvidenceRecord, EvidenceStoreError> {
        Err(Self::error())
    }

    fn find(
        &self,
        _: &sf_sdk::canonical::Digest,
        _: Instant,
    ) -> Result<Vec<sf_sdk::canonical::Digest>, EvidenceStoreError> {
        Err(Self::error())
    }
}

impl AttemptFence for Panicking {
    fn acquire(
        &self,
        _: &str,
        _: &sf_sdk::contracts::canonical::Digest,
    ) -> Result<Box<dyn FenceHold>, FenceError> {
        panic!("hostile: panic in acquire")
    }

    fn last_epoch(&self, _: &str) -> Result<u64, FenceError> {
        panic!("hostile: panic in last_epoch")
    }
}

fn panicking_fence(
    _: &PluginConfig,
) -> Result<Box<dyn AttemptFence>, ConstructorError<FenceError>> {
    Ok(Box::new(Panicking))
}

#[derive(sf_sdk::serde::Deserialize)]
#[serde(crate = "sf_sdk::serde", deny_unknown_fields)]
struct PanickingConfig {
    #[serde(default)]
    panic_in: Option<String>,
}

fn panicking(
    config: &PluginConfig,
) -> Result<Box<dyn ObjectStoreFactory>, ConstructorError<ObjectStoreError>> {
    let config: PanickingConfig = config.parse()?;
    match config.panic_in.as_deref().unwrap_or("store") {
        "instantiate" => panic!("hostile: panic in instantiate"),
        "factory" => Ok(Box::new(PanickingFactory { inner: None })),
        "store" => Ok(Box::new(PanickingFactory {
            inner: Some(InMemoryObjectStoreFactory::new()),
        })),
        other => Err(format!("panic_in {other:?} is not instantiate, factory or store").into()),
    }
}

/// With `inner`, makes stores that panic; without, panics itself.
struct PanickingFactory {
    inner: Option<InMemoryObjectStoreFactory>,
}

impl ObjectStoreFactory for PanickingFactory {
    fn create(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        let Some(inner) = &self.inner else {
            panic!("hostile: panic in create");
        };
        Ok(Box::new(PanickingStore {
            root: inner.create(path, deadline)?.root().clone(),
        }))
    }

    fn open(
        &self,
        root: &StoreRoot,
        _marker: &[u8],
        _deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        if self.inner.is_none() {
            panic!("hostile: panic in open");
        }
        Ok(Box::new(PanickingStore { root: root.clone() }))
    }
}

/// A store whose every method, and whose destructor, panics.
struct PanickingStore {
    root: StoreRoot,
}

impl Drop for PanickingStore {
    fn drop(&mut self) {
        panic!("hostile: panic in drop");
    }
}

impl ObjectStore for PanickingStore {
    fn root(&self) -> &StoreRoot {
        &self.root
    }

    fn mark(&self, _: &[u8], _: Instant) -> Result<(), ObjectStoreError> {
        panic!("hostile: panic in mark")
    }

    fn write_objects(&self, _: &[EncodedObject], _: Instant) -> Result<(), ObjectStoreError> {
        panic!("hostile: panic in write_objects")
    }

    fn read_objects(
        &self,
        _: &[ObjectId],
        _: u64,
        _: Instant,
    ) -> Result<Vec<Option<StoredObject>>, ObjectStoreError> {
        panic!("hostile: panic in read_objects")
    }

    fn read_ref(&self, _: &RefName, _: Instant) -> Result<Option<RefValue>, ObjectStoreError> {
        panic!("hostile: panic in read_ref")
    }

    fn list_refs(&self, _: &str, _: Instant) -> Result<Vec<(RefName, RefValue)>, ObjectStoreError> {
        panic!("hostile: panic in list_refs")
    }

    fn create_ref(
        &self,
        _: &RefName,
        _: &ObjectId,
        _: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        panic!("hostile: panic in create_ref")
    }

    fn compare_and_swap_ref(
        &self,
        _: &RefName,
        _: &ObjectId,
        _: &ObjectId,
        _: Instant,
    ) -> Result<RefUpdate, ObjectStoreError> {
        panic!("hostile: panic in compare_and_swap_ref")
    }
}

fn memory_root(
    config: &PluginConfig,
) -> Result<Box<dyn ObjectStoreFactory>, ConstructorError<ObjectStoreError>> {
    #[derive(sf_sdk::serde::Deserialize)]
    #[serde(crate = "sf_sdk::serde", deny_unknown_fields)]
    struct Empty {}
    let Empty {} = config.parse()?;
    Ok(Box::new(MemoryRoot {
        inner: InMemoryObjectStoreFactory::new(),
    }))
}

/// The in-memory store, whose `create` also makes the root directory on disk.
struct MemoryRoot {
    inner: InMemoryObjectStoreFactory,
}

impl ObjectStoreFactory for MemoryRoot {
    fn create(
        &self,
        path: &Path,
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        use std::os::unix::fs::DirBuilderExt as _;
        let store = self.inner.create(path, deadline)?;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(path)
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::AlreadyExists => ObjectStoreError::Exists {
                    path: path.to_owned(),
                },
                _ => ObjectStoreError::Unavailable {
                    reason: format!("{}: {error}", path.display()),
                },
            })?;
        Ok(store)
    }

    fn open(
        &self,
        root: &StoreRoot,
        marker: &[u8],
        deadline: Instant,
    ) -> Result<Box<dyn ObjectStore>, ObjectStoreError> {
        self.inner.open(root, marker, deadline)
    }

    fn supports_boundaries(&self) -> Result<(), ObjectStoreError> {
        self.inner.supports_boundaries()
    }
}

unsafe extern "C" fn instantiate(
    contract: SfBytes,
    config: SfBytes,
    instance: *mut *mut c_void,
    reply: *mut SfBuffer,
) -> i32 {
    // SAFETY: forwarded from the host.
    unsafe { sf_sdk::export::instantiate(&DEFINITION, contract, config, instance, reply) }
}

/// The ABI's status of a plugin-level error (`unsupported-method`, …).
const PLUGIN_ERROR: i32 = 2;

/// Runs the real call, then replaces its reply as `SF_HOSTILE_REPLY` says; as ABI 1.2 would,
/// with `SF_HOSTILE_ENTRY=abi-minor-2`, for a method that came later.
unsafe extern "C" fn call(
    instance: *mut c_void,
    method: SfBytes,
    request: SfBytes,
    reply: *mut SfBuffer,
    new_instance: *mut *mut c_void,
) -> i32 {
    if std::env::var("SF_HOSTILE_ENTRY").as_deref() == Ok("abi-minor-2") {
        // SAFETY: the host lends the method name for the call.
        let name = unsafe { method.as_slice() }.unwrap_or_default();
        if name == b"record_boundaries" {
            // What the sdk of ABI 1.2 answered for a method it did not know.
            let header = br#"{"code":"unsupported-method","message":"\"record_boundaries\" is not a method of the object-store contract"}"#;
            let mut bytes = (header.len() as u32).to_le_bytes().to_vec();
            bytes.extend_from_slice(header);
            // SAFETY: the host passed a valid out-pointer for the reply.
            unsafe { reply.write(SfBuffer::from_vec(bytes)) };
            return PLUGIN_ERROR;
        }
        if name == b"begin_reads" || name == b"end_reads" {
            std::process::abort();
        }
    }
    // SAFETY: forwarded from the host.
    let status = unsafe { sf_sdk::export::call(instance, method, request, reply, new_instance) };
    let Ok(mode) = std::env::var("SF_HOSTILE_REPLY") else {
        return status;
    };
    if std::env::var("SF_HOSTILE_REPLY_SCOPE").as_deref() == Ok("store") {
        // SAFETY: the host lends the method name for the call.
        let method = unsafe { method.as_slice() }.unwrap_or_default();
        if method == b"create" || method == b"open" {
            return status;
        }
    }
    // SAFETY: the host passed valid out-pointers; the real reply and any new instance are
    // released before they are replaced.
    unsafe {
        sf_sdk::export::free_buf(reply.read());
        let made = new_instance.read();
        if !made.is_null() {
            sf_sdk::export::drop_instance(made);
            new_instance.write(std::ptr::null_mut());
        }
    }
    let frame = |header: &[u8], sections: &[&[u8]]| {
        let mut bytes = (header.len() as u32).to_le_bytes().to_vec();
        bytes.extend_from_slice(header);
        for section in sections {
            bytes.extend_from_slice(&(section.len() as u64).to_le_bytes());
            bytes.extend_from_slice(section);
        }
        bytes
    };
    let (status, bytes) = match mode.as_str() {
        "bad-header" => (0, frame(b"{not json", &[])),
        "wrong-shape" => (0, frame(br#"{"surprise":[1,2,3]}"#, &[])),
        "bad-section" => (
            0,
            frame(
                br#"{"root":{"path":5,"dev":1,"ino":1},"objects":[{"kind":"blob","body":5}]}"#,
                &[b"x"],
            ),
        ),
        "bad-status" => (42, frame(b"{}", &[])),
        "null-reply" => {
            // SAFETY: as above.
            unsafe {
                reply.write(SfBuffer {
                    ptr: std::ptr::null_mut(),
                    len: 5,
                })
            };
            return 0;
        }
        _ => {
            let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
            let bytes = (0..97)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            (0, bytes)
        }
    };
    // SAFETY: as above.
    unsafe { reply.write(SfBuffer::from_vec(bytes)) };
    status
}

const fn table(magic: u64, major: u32, minor: u32, with_call: bool) -> StaticEntry {
    let mut table = sf_sdk::export::entry_table(MANIFEST, instantiate);
    table.magic = magic;
    table.abi_major = major;
    table.abi_minor = minor;
    table.call = if with_call { Some(call) } else { None };
    StaticEntry(table)
}

static NORMAL: StaticEntry = table(
    sf_sdk::export::MAGIC,
    sf_sdk::export::ABI_MAJOR,
    sf_sdk::export::ABI_MINOR,
    true,
);
static WRONG_MAGIC: StaticEntry = table(
    u64::from_be_bytes(*b"notsfplg"),
    sf_sdk::export::ABI_MAJOR,
    sf_sdk::export::ABI_MINOR,
    true,
);
static NEXT_MAJOR: StaticEntry = table(
    sf_sdk::export::MAGIC,
    sf_sdk::export::ABI_MAJOR + 1,
    0,
    true,
);
static NEXT_MINOR: StaticEntry = table(
    sf_sdk::export::MAGIC,
    sf_sdk::export::ABI_MAJOR,
    sf_sdk::export::ABI_MINOR + 1,
    true,
);
static MINOR_TWO: StaticEntry = table(sf_sdk::export::MAGIC, sf_sdk::export::ABI_MAJOR, 2, true);
static NULL_FUNCTION: StaticEntry = table(
    sf_sdk::export::MAGIC,
    sf_sdk::export::ABI_MAJOR,
    sf_sdk::export::ABI_MINOR,
    false,
);

/// The sf plugin entry point, tampered with as `SF_HOSTILE_ENTRY` says.
#[unsafe(no_mangle)]
pub extern "C" fn sf_plugin_entry_v1() -> *const PluginEntryV1 {
    match std::env::var("SF_HOSTILE_ENTRY").as_deref() {
        Ok("wrong-magic") => &WRONG_MAGIC.0,
        Ok("abi-major") => &NEXT_MAJOR.0,
        Ok("abi-minor") => &NEXT_MINOR.0,
        Ok("abi-minor-2") => &MINOR_TWO.0,
        Ok("null-table") => std::ptr::null(),
        Ok("null-function") => &NULL_FUNCTION.0,
        _ => &NORMAL.0,
    }
}
