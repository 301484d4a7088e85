//! Exporting contract implementations as an sf plugin library: the [`export_plugin!`](crate::export_plugin) macro
//! and the runtime it expands to.
//!
//! A plugin crate builds as a `cdylib`, keeps its manifest in a file (conventionally
//! `sf-plugin.json` beside its `Cargo.toml`), copies that file beside the built library in a
//! build script, and invokes the macro once at its crate root:
//!
//! ```text
//! sf_sdk::export_plugin! {
//!     manifest: "sf-plugin.json",
//!     object_store: {
//!         "example-memory" => make_store,
//!     },
//!     executor: {                      // each group optional, in this order; at least one
//!         "my-executor" => make_executor,
//!     },
//!     evidence_store: {
//!         "my-evidence" => make_evidence_store,
//!     },
//!     gate: {
//!         "my-gate" => make_gate,
//!     },
//!     fence: {                         // the attempt fence (ABI minor 9)
//!         "my-fence" => make_fence,
//!     },
//! }
//!
//! fn make_store(config: &sf_sdk::export::PluginConfig) -> Result<MyFactory, String> { … }
//! fn make_executor(config: &sf_sdk::export::PluginConfig) -> Result<MyExecutor, String> { … }
//! fn make_evidence_store(config: &sf_sdk::export::PluginConfig) -> Result<MyStore, String> { … }
//! fn make_gate(config: &sf_sdk::export::PluginConfig) -> Result<MyGate, String> { … }
//! fn make_fence(config: &sf_sdk::export::PluginConfig) -> Result<MyFence, String> { … }
//! ```
//!
//! A fence's `acquire` hands the host a new instance, the hold (as an object store factory's
//! `open` hands it a store); the host's `drop_instance` of a hold drops it, which releases it.
//!
//! An executor instance also serves `cancel`: the host calls it from another thread while a
//! `run` of the same instance is in flight, naming the run by the id the `run` request
//! carried; the runtime here keeps one [`CancelToken`] per run in flight and cancels it.
//!
//! The macro generates the `sf_plugin_entry_v1` symbol and its static table (magic, ABI
//! version, sdk version, the manifest compiled in with `include_str!`, and the four C
//! functions). Every function runs the plugin's code under `catch_unwind`: a panic becomes a
//! `STATUS_PANIC` reply and the host keeps running. A plugin built with `panic = "abort"` could
//! not do that, so the macro refuses to compile under it. It also generates a unit test that
//! checks that the manifest lists exactly the exported contracts and tags.
//!
//! The functions here are public so that the macro can call them from the plugin crate; a
//! plugin never needs to call them itself.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::c_void;
use std::fmt::Display;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, PoisonError};

use serde::de::DeserializeOwned;
use sf_contracts::{
    AttemptFence, CancelToken, EvidenceStore, Executor, FenceHold, Gate, ObjectStore,
    ObjectStoreFactory,
};
use sf_plugin_abi::evidence_store_protocol as evidence_wire;
use sf_plugin_abi::executor_protocol as executor_wire;
use sf_plugin_abi::fence_protocol as fence_wire;
use sf_plugin_abi::gate_protocol as gate_wire;
use sf_plugin_abi::object_store_protocol::{self as wire, Request};
use sf_plugin_abi::protocol::{self, Empty, PanicReply, PluginErrorReply};
use sf_plugin_abi::{PluginManifest, abi};

pub use sf_plugin_abi::abi::{
    ABI_MAJOR, ABI_MINOR, MAGIC, PluginEntryV1, SfBuffer, SfBytes, SfStr, StaticEntry,
};

/// The version of this sdk, recorded in every plugin's table.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Makes an ObjectStore factory from a configuration.
pub type ObjectStoreConstructor = fn(&PluginConfig) -> Result<Box<dyn ObjectStoreFactory>, String>;

/// Makes an Executor from a configuration.
pub type ExecutorConstructor = fn(&PluginConfig) -> Result<Box<dyn Executor>, String>;

/// Makes an EvidenceStore from a configuration.
pub type EvidenceStoreConstructor = fn(&PluginConfig) -> Result<Box<dyn EvidenceStore>, String>;

/// Makes a Gate from a configuration.
pub type GateConstructor = fn(&PluginConfig) -> Result<Box<dyn Gate>, String>;

/// Makes an AttemptFence from a configuration.
pub type FenceConstructor = fn(&PluginConfig) -> Result<Box<dyn AttemptFence>, String>;

/// What a plugin exports: its manifest and one constructor per tag of each contract.
pub struct PluginDefinition {
    /// The manifest, byte for byte as in the manifest file.
    pub manifest: &'static str,
    /// `(tag, constructor)` for the `object-store` contract.
    pub object_stores: &'static [(&'static str, ObjectStoreConstructor)],
    /// `(tag, constructor)` for the `executor` contract.
    pub executors: &'static [(&'static str, ExecutorConstructor)],
    /// `(tag, constructor)` for the `evidence-store` contract.
    pub evidence_stores: &'static [(&'static str, EvidenceStoreConstructor)],
    /// `(tag, constructor)` for the `gate` contract.
    pub gates: &'static [(&'static str, GateConstructor)],
    /// `(tag, constructor)` for the `fence` contract.
    pub fences: &'static [(&'static str, FenceConstructor)],
}

impl PluginDefinition {
    /// Checks that the manifest is valid, of this sdk's ABI, and lists exactly the contracts
    /// and tags that have constructors.
    pub fn check(&self) -> Result<PluginManifest, String> {
        let manifest = PluginManifest::parse(self.manifest.as_bytes())
            .map_err(|error| format!("the manifest is invalid: {error}"))?;
        if manifest.abi != ABI_MAJOR {
            return Err(format!(
                "the manifest says abi {}, and this sf-sdk builds ABI {ABI_MAJOR}",
                manifest.abi
            ));
        }
        let mut exported: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let contracts: [(&str, Vec<&str>); 5] = [
            (wire::CONTRACT, tags(self.object_stores)),
            (executor_wire::CONTRACT, tags(self.executors)),
            (evidence_wire::CONTRACT, tags(self.evidence_stores)),
            (gate_wire::CONTRACT, tags(self.gates)),
            (fence_wire::CONTRACT, tags(self.fences)),
        ];
        for (contract, tags) in contracts {
            if !tags.is_empty() {
                let mut tags: Vec<String> = tags.into_iter().map(str::to_owned).collect();
                tags.sort();
                exported.insert(contract.to_owned(), tags);
            }
        }
        let mut listed = manifest.contracts.clone();
        for tags in listed.values_mut() {
            tags.sort();
        }
        if listed != exported {
            return Err(format!(
                "the manifest lists {listed:?}, and the plugin exports {exported:?}"
            ));
        }
        Ok(manifest)
    }
}

fn tags<C>(constructors: &[(&'static str, C)]) -> Vec<&'static str> {
    constructors.iter().map(|(tag, _)| *tag).collect()
}

/// The constructor registered under `tag`.
fn constructor<C: Copy>(constructors: &[(&'static str, C)], tag: &str) -> Option<C> {
    constructors
        .iter()
        .find(|(registered, _)| *registered == tag)
        .map(|(_, constructor)| *constructor)
}

/// A plugin instance's configuration: its section of `sf.toml` as JSON.
#[derive(Clone, Debug)]
pub struct PluginConfig {
    tag: String,
    fields: serde_json::Map<String, serde_json::Value>,
    /// Set when [`PluginConfig::parse`] refused the fields: a constructor failing after that
    /// is answered `invalid-config` (the user's sf.toml is at fault), not
    /// `instantiate-failed`.
    refused: std::cell::Cell<bool>,
}

impl PluginConfig {
    /// The tag (`type`) the instance is made for.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The section's fields, without `type`.
    pub fn fields(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.fields
    }

    /// The fields (without `type`) as a `T`. Use `#[serde(deny_unknown_fields)]` on `T` so
    /// that a misspelt key is refused rather than ignored.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, String> {
        serde_json::from_value(serde_json::Value::Object(self.fields.clone())).map_err(|error| {
            self.refused.set(true);
            format!("invalid configuration for type {:?}: {error}", self.tag)
        })
    }
}

/// Boxes a constructor's result; what the macro wraps every `executor` constructor in.
pub fn executor<X, E>(made: Result<X, E>) -> Result<Box<dyn Executor>, String>
where
    X: Executor + 'static,
    E: Display,
{
    made.map(|executor| Box::new(executor) as Box<dyn Executor>)
        .map_err(|error| error.to_string())
}

/// Boxes a constructor's result; what the macro wraps every `evidence_store` constructor in.
pub fn evidence_store<S, E>(made: Result<S, E>) -> Result<Box<dyn EvidenceStore>, String>
where
    S: EvidenceStore + 'static,
    E: Display,
{
    made.map(|store| Box::new(store) as Box<dyn EvidenceStore>)
        .map_err(|error| error.to_string())
}

/// Boxes a constructor's result; what the macro wraps every `gate` constructor in.
pub fn gate<G, E>(made: Result<G, E>) -> Result<Box<dyn Gate>, String>
where
    G: Gate + 'static,
    E: Display,
{
    made.map(|gate| Box::new(gate) as Box<dyn Gate>)
        .map_err(|error| error.to_string())
}

/// Boxes a constructor's result; what the macro wraps every `fence` constructor in.
pub fn fence<F, E>(made: Result<F, E>) -> Result<Box<dyn AttemptFence>, String>
where
    F: AttemptFence + 'static,
    E: Display,
{
    made.map(|fence| Box::new(fence) as Box<dyn AttemptFence>)
        .map_err(|error| error.to_string())
}

/// Boxes a constructor's result; what the macro wraps every `object_store` constructor in.
pub fn object_store_factory<F, E>(made: Result<F, E>) -> Result<Box<dyn ObjectStoreFactory>, String>
where
    F: ObjectStoreFactory + 'static,
    E: Display,
{
    made.map(|factory| Box::new(factory) as Box<dyn ObjectStoreFactory>)
        .map_err(|error| error.to_string())
}

/// The entry table of a plugin; a `const fn` so that it can live in a `static`.
pub const fn entry_table(manifest: &'static str, instantiate: abi::InstantiateFn) -> PluginEntryV1 {
    PluginEntryV1 {
        magic: MAGIC,
        abi_major: ABI_MAJOR,
        abi_minor: ABI_MINOR,
        sdk_version: SfStr::from_static(SDK_VERSION),
        manifest: SfStr::from_static(manifest),
        instantiate: Some(instantiate),
        call: Some(call),
        free_buf: Some(free_buf),
        drop_instance: Some(drop_instance),
    }
}

/// One instance handed to the host.
enum Instance {
    ObjectStoreFactory(Box<dyn ObjectStoreFactory>),
    ObjectStore(Box<dyn ObjectStore>),
    Executor(ExecutorInstance),
    EvidenceStore(Box<dyn EvidenceStore>),
    Gate(Box<dyn Gate>),
    Fence(Box<dyn AttemptFence>),
    FenceHold(Box<dyn FenceHold>),
}

/// The most cancellations remembered for runs that are not in flight (cancelled before they
/// registered, or after they ended). Run ids only grow, so the oldest are dropped first.
const MAX_EARLY_CANCELS: usize = 1024;

/// An Executor and the cancel tokens of its runs in flight, by the host's run id.
struct ExecutorInstance {
    executor: Box<dyn Executor>,
    runs: Mutex<Runs>,
}

#[derive(Default)]
struct Runs {
    in_flight: HashMap<u64, CancelToken>,
    early_cancels: BTreeSet<u64>,
}

impl ExecutorInstance {
    fn new(executor: Box<dyn Executor>) -> Self {
        Self {
            executor,
            runs: Mutex::default(),
        }
    }

    fn runs(&self) -> std::sync::MutexGuard<'_, Runs> {
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers run `id` and returns its token (already cancelled if a `cancel` came first);
    /// `None` if a run with that id is in flight.
    fn register(&self, id: u64) -> Option<CancelToken> {
        let mut runs = self.runs();
        if runs.in_flight.contains_key(&id) {
            return None;
        }
        let token = CancelToken::new();
        if runs.early_cancels.remove(&id) {
            token.cancel();
        }
        runs.in_flight.insert(id, token.clone());
        Some(token)
    }

    fn cancel(&self, id: u64) {
        let mut runs = self.runs();
        match runs.in_flight.get(&id) {
            Some(token) => token.cancel(),
            None => {
                runs.early_cancels.insert(id);
                while runs.early_cancels.len() > MAX_EARLY_CANCELS {
                    runs.early_cancels.pop_first();
                }
            }
        }
    }
}

/// Removes a run from its instance's table when the run ends, even by a panic.
struct Registered<'a> {
    instance: &'a ExecutorInstance,
    id: u64,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.instance.runs().in_flight.remove(&self.id);
    }
}

/// How a call ended, before it is written to the reply.
enum Outcome {
    Ok(Vec<u8>),
    ContractError(Vec<u8>),
    PluginError(PluginErrorReply),
}

/// Runs `body` under `catch_unwind`: a panic becomes a panic report, never an unwind out of
/// the library.
fn run(body: impl FnOnce() -> Outcome) -> (i32, Vec<u8>) {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Outcome::Ok(bytes)) => (abi::STATUS_OK, bytes),
        Ok(Outcome::ContractError(bytes)) => (abi::STATUS_CONTRACT_ERROR, bytes),
        Ok(Outcome::PluginError(error)) => (abi::STATUS_PLUGIN_ERROR, error.encode()),
        Err(payload) => {
            let message = crate::panic_payload::message(payload.as_ref());
            // Dropping a payload can itself panic; keep that inside the plugin too.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            (abi::STATUS_PANIC, PanicReply { message }.encode())
        }
    }
}

/// Hands `bytes` to the host as the reply.
///
/// # Safety
/// `reply` must be null or valid for one write.
unsafe fn write_reply(reply: *mut SfBuffer, bytes: Vec<u8>) {
    if !reply.is_null() {
        // SAFETY: the caller promises `reply` is valid for a write.
        unsafe { reply.write(SfBuffer::from_vec(bytes)) };
    }
}

fn plugin_error(code: &str, message: impl Into<String>) -> Outcome {
    Outcome::PluginError(PluginErrorReply::new(code, message))
}

/// The body of the table's `instantiate`: parses the configuration, finds the constructor
/// for its tag and hands the new instance to the host.
///
/// # Safety
/// The arguments must satisfy [`abi::InstantiateFn`]'s contract.
pub unsafe fn instantiate(
    definition: &PluginDefinition,
    contract: SfBytes,
    config: SfBytes,
    instance: *mut *mut c_void,
    reply: *mut SfBuffer,
) -> i32 {
    let (status, bytes) = run(|| {
        if let Err(detail) = definition.check() {
            return plugin_error(protocol::EXPORTS_MISMATCH, detail);
        }
        // SAFETY: the host lends both spans for the call.
        let (Some(contract), Some(config)) =
            (unsafe { contract.as_slice() }, unsafe { config.as_slice() })
        else {
            return plugin_error(protocol::MALFORMED_REQUEST, "a null argument");
        };
        let Ok(contract) = std::str::from_utf8(contract) else {
            return plugin_error(protocol::MALFORMED_REQUEST, "the contract is not UTF-8");
        };
        let mut fields: serde_json::Map<String, serde_json::Value> =
            match serde_json::from_slice(config) {
                Ok(fields) => fields,
                Err(error) => {
                    return plugin_error(
                        protocol::INVALID_CONFIG,
                        format!("the configuration is not a JSON object: {error}"),
                    );
                }
            };
        let tag = match fields.remove("type") {
            Some(serde_json::Value::String(tag)) => tag,
            _ => return plugin_error(protocol::INVALID_CONFIG, "the configuration has no type"),
        };
        let config = PluginConfig {
            tag,
            fields,
            refused: std::cell::Cell::new(false),
        };
        let unknown_tag = || {
            plugin_error(
                protocol::UNKNOWN_TAG,
                format!("no {contract} type {:?} here", config.tag),
            )
        };
        let made = match contract {
            wire::CONTRACT => match constructor(definition.object_stores, &config.tag) {
                Some(make) => make(&config).map(Instance::ObjectStoreFactory),
                None => return unknown_tag(),
            },
            executor_wire::CONTRACT => match constructor(definition.executors, &config.tag) {
                Some(make) => {
                    make(&config).map(|made| Instance::Executor(ExecutorInstance::new(made)))
                }
                None => return unknown_tag(),
            },
            evidence_wire::CONTRACT => match constructor(definition.evidence_stores, &config.tag) {
                Some(make) => make(&config).map(Instance::EvidenceStore),
                None => return unknown_tag(),
            },
            gate_wire::CONTRACT => match constructor(definition.gates, &config.tag) {
                Some(make) => make(&config).map(Instance::Gate),
                None => return unknown_tag(),
            },
            fence_wire::CONTRACT => match constructor(definition.fences, &config.tag) {
                Some(make) => make(&config).map(Instance::Fence),
                None => return unknown_tag(),
            },
            other => {
                return plugin_error(
                    protocol::UNKNOWN_CONTRACT,
                    format!("this plugin does not provide the contract {other:?}"),
                );
            }
        };
        match made {
            Ok(made) => {
                if !instance.is_null() {
                    // SAFETY: the host passes a valid out-pointer.
                    unsafe { instance.write(Box::into_raw(Box::new(made)).cast()) };
                }
                Outcome::Ok(Empty::encode())
            }
            Err(message) if config.refused.get() => plugin_error(protocol::INVALID_CONFIG, message),
            Err(message) => plugin_error(protocol::INSTANTIATE_FAILED, message),
        }
    });
    // SAFETY: the host passes a valid out-pointer for the reply.
    unsafe { write_reply(reply, bytes) };
    status
}

/// The table's `call`.
///
/// # Safety
/// The arguments must satisfy [`abi::CallFn`]'s contract.
pub unsafe extern "C" fn call(
    instance: *mut c_void,
    method: SfBytes,
    request: SfBytes,
    reply: *mut SfBuffer,
    new_instance: *mut *mut c_void,
) -> i32 {
    let (status, bytes) = run(|| {
        // SAFETY: a live handle this library made; shared use is what the contracts allow.
        let Some(target) = (unsafe { instance.cast::<Instance>().as_ref() }) else {
            return plugin_error(protocol::MALFORMED_REQUEST, "a null instance");
        };
        // SAFETY: the host lends both spans for the call.
        let (Some(method), Some(request)) =
            (unsafe { method.as_slice() }, unsafe { request.as_slice() })
        else {
            return plugin_error(protocol::MALFORMED_REQUEST, "a null argument");
        };
        let Ok(method) = std::str::from_utf8(method) else {
            return plugin_error(protocol::UNSUPPORTED_METHOD, "the method is not UTF-8");
        };
        match target {
            Instance::ObjectStoreFactory(factory) => {
                serve_factory(factory.as_ref(), method, request, new_instance)
            }
            Instance::ObjectStore(store) => serve_store(store.as_ref(), method, request),
            Instance::Executor(executor) => serve_executor(executor, method, request),
            Instance::EvidenceStore(store) => serve_evidence_store(store.as_ref(), method, request),
            Instance::Gate(gate) => serve_gate(gate.as_ref(), method, request),
            Instance::Fence(fence) => serve_fence(fence.as_ref(), method, request, new_instance),
            Instance::FenceHold(hold) => serve_hold(hold.as_ref(), method, request),
        }
    });
    // SAFETY: the host passes a valid out-pointer for the reply.
    unsafe { write_reply(reply, bytes) };
    status
}

fn decode(method: &str, request: &[u8]) -> Result<Request, Outcome> {
    undecodable(wire::CONTRACT, method, Request::decode(method, request))
}

fn serve_factory(
    factory: &dyn ObjectStoreFactory,
    method: &str,
    request: &[u8],
    new_instance: *mut *mut c_void,
) -> Outcome {
    let request = match decode(method, request) {
        Ok(request) => request,
        Err(outcome) => return outcome,
    };
    let made = match request {
        Request::Create { path, deadline } => factory.create(&path, deadline),
        Request::Open {
            root,
            marker,
            deadline,
        } => factory.open(&root, &marker, deadline),
        _ => {
            return plugin_error(
                protocol::UNSUPPORTED_METHOD,
                format!("{method} is a store method, and this instance is a factory"),
            );
        }
    };
    match made {
        Ok(store) => {
            let answer = wire::encode_root(store.root());
            if new_instance.is_null() {
                return plugin_error(protocol::MALFORMED_REQUEST, "no place for the new store");
            }
            let handle = Box::into_raw(Box::new(Instance::ObjectStore(store)));
            // SAFETY: the host passes a valid out-pointer (checked non-null above).
            unsafe { new_instance.write(handle.cast()) };
            Outcome::Ok(answer)
        }
        Err(error) => Outcome::ContractError(wire::encode_error(&error)),
    }
}

fn serve_store(store: &dyn ObjectStore, method: &str, request: &[u8]) -> Outcome {
    let request = match decode(method, request) {
        Ok(request) => request,
        Err(outcome) => return outcome,
    };
    let answer = match request {
        Request::Mark { marker, deadline } => {
            store.mark(&marker, deadline).map(|()| Empty::encode())
        }
        Request::RecordBoundaries { commits, deadline } => store
            .record_boundaries(&commits, deadline)
            .map(|()| Empty::encode()),
        Request::BeginReads => {
            store.begin_reads();
            Ok(Empty::encode())
        }
        Request::EndReads => {
            store.end_reads();
            Ok(Empty::encode())
        }
        Request::WriteObjects { objects, deadline } => store
            .write_objects(&objects, deadline)
            .map(|()| Empty::encode()),
        Request::ReadObjects {
            ids,
            budget,
            deadline,
        } => store
            .read_objects(&ids, budget, deadline)
            .map(|objects| wire::encode_objects(&objects)),
        Request::ReadRef { name, deadline } => store
            .read_ref(&name, deadline)
            .map(|value| wire::encode_ref_value(value.as_ref())),
        Request::ListRefs { prefix, deadline } => store
            .list_refs(&prefix, deadline)
            .map(|refs| wire::encode_ref_list(&refs)),
        Request::CreateRef {
            name,
            value,
            deadline,
        } => store
            .create_ref(&name, &value, deadline)
            .map(|update| wire::encode_ref_update(&update)),
        Request::CompareAndSwapRef {
            name,
            expected,
            new,
            deadline,
        } => store
            .compare_and_swap_ref(&name, &expected, &new, deadline)
            .map(|update| wire::encode_ref_update(&update)),
        Request::Create { .. } | Request::Open { .. } => {
            return plugin_error(
                protocol::UNSUPPORTED_METHOD,
                format!("{method} is a factory method, and this instance is a store"),
            );
        }
    };
    match answer {
        Ok(bytes) => Outcome::Ok(bytes),
        Err(error) => Outcome::ContractError(wire::encode_error(&error)),
    }
}

fn serve_executor(instance: &ExecutorInstance, method: &str, request: &[u8]) -> Outcome {
    let request = match undecodable(
        executor_wire::CONTRACT,
        method,
        executor_wire::Request::decode(method, request),
    ) {
        Ok(request) => request,
        Err(outcome) => return outcome,
    };
    let executor = instance.executor.as_ref();
    let answer = match request {
        executor_wire::Request::DescribeRuntime => executor
            .describe_runtime()
            .map(|runtime| executor_wire::encode_runtime(&runtime)),
        executor_wire::Request::Profile => executor
            .profile()
            .map(|profile| executor_wire::encode_profile(&profile)),
        executor_wire::Request::Run {
            run_id,
            request,
            wire,
        } => {
            let Some(token) = instance.register(run_id) else {
                return plugin_error(
                    protocol::MALFORMED_REQUEST,
                    format!("run: a run with id {run_id} is already in flight"),
                );
            };
            let _registered = Registered {
                instance,
                id: run_id,
            };
            executor
                .run(&request, &token)
                .map(|answer| executor_wire::encode_answer(&answer, wire))
        }
        executor_wire::Request::Cancel { run_id } => {
            instance.cancel(run_id);
            Ok(executor_wire::encode_cancelled())
        }
    };
    match answer {
        Ok(bytes) => Outcome::Ok(bytes),
        Err(error) => Outcome::ContractError(executor_wire::encode_error(&error)),
    }
}

/// A request the contract does not know or that does not decode.
fn undecodable<R>(
    contract: &str,
    method: &str,
    decoded: Result<Option<R>, sf_plugin_abi::message::MessageError>,
) -> Result<R, Outcome> {
    match decoded {
        Ok(Some(request)) => Ok(request),
        Ok(None) => Err(plugin_error(
            protocol::UNSUPPORTED_METHOD,
            format!("{method:?} is not a method of the {contract} contract"),
        )),
        Err(error) => Err(plugin_error(
            protocol::MALFORMED_REQUEST,
            format!("{method}: {error}"),
        )),
    }
}

fn serve_evidence_store(store: &dyn EvidenceStore, method: &str, request: &[u8]) -> Outcome {
    let request = match undecodable(
        evidence_wire::CONTRACT,
        method,
        evidence_wire::Request::decode(method, request),
    ) {
        Ok(request) => request,
        Err(outcome) => return outcome,
    };
    let answer = match request {
        evidence_wire::Request::Put { record, deadline } => store
            .put(&record, deadline)
            .map(|id| evidence_wire::encode_id(&id)),
        evidence_wire::Request::Get { id, deadline } => store
            .get(&id, deadline)
            .map(|record| evidence_wire::encode_record(&record)),
        evidence_wire::Request::Find { pins, deadline } => store
            .find(&pins, deadline)
            .map(|ids| evidence_wire::encode_ids(&ids)),
    };
    match answer {
        Ok(bytes) => Outcome::Ok(bytes),
        Err(error) => Outcome::ContractError(evidence_wire::encode_error(&error)),
    }
}

fn serve_gate(gate: &dyn Gate, method: &str, request: &[u8]) -> Outcome {
    let request = match undecodable(
        gate_wire::CONTRACT,
        method,
        gate_wire::Request::decode(method, request),
    ) {
        Ok(request) => request,
        Err(outcome) => return outcome,
    };
    let gate_wire::Request::Current { deadline } = request;
    match gate.current(deadline) {
        Ok(answer) => Outcome::Ok(gate_wire::encode_answer(&answer)),
        Err(error) => Outcome::ContractError(gate_wire::encode_error(&error)),
    }
}

fn serve_fence(
    fence: &dyn AttemptFence,
    method: &str,
    request: &[u8],
    new_instance: *mut *mut c_void,
) -> Outcome {
    let request = match undecodable(
        fence_wire::CONTRACT,
        method,
        fence_wire::FenceRequest::decode(method, request),
    ) {
        Ok(request) => request,
        Err(outcome) => return outcome,
    };
    match request {
        fence_wire::FenceRequest::LastEpoch { product } => match fence.last_epoch(&product) {
            Ok(epoch) => Outcome::Ok(fence_wire::encode_epoch(epoch)),
            Err(error) => Outcome::ContractError(fence_wire::encode_error(&error)),
        },
        fence_wire::FenceRequest::Acquire { product } => {
            if new_instance.is_null() {
                return plugin_error(protocol::MALFORMED_REQUEST, "no place for the new hold");
            }
            match fence.acquire(&product) {
                Ok(hold) => {
                    let answer = fence_wire::encode_attempt(hold.attempt());
                    let handle = Box::into_raw(Box::new(Instance::FenceHold(hold)));
                    // SAFETY: the host passes a valid out-pointer (checked non-null above).
                    unsafe { new_instance.write(handle.cast()) };
                    Outcome::Ok(answer)
                }
                Err(error) => Outcome::ContractError(fence_wire::encode_error(&error)),
            }
        }
    }
}

fn serve_hold(hold: &dyn FenceHold, method: &str, request: &[u8]) -> Outcome {
    let request = match undecodable(
        fence_wire::CONTRACT,
        method,
        fence_wire::HoldRequest::decode(method, request),
    ) {
        Ok(request) => request,
        Err(outcome) => return outcome,
    };
    match request {
        fence_wire::HoldRequest::AssertActive => match hold.assert_active() {
            Ok(()) => Outcome::Ok(Empty::encode()),
            Err(error) => Outcome::ContractError(fence_wire::encode_error(&error)),
        },
        fence_wire::HoldRequest::Release => {
            hold.release();
            Outcome::Ok(Empty::encode())
        }
    }
}

/// The table's `free_buf`.
///
/// # Safety
/// `buffer` must be a reply this library made and not yet freed.
pub unsafe extern "C" fn free_buf(buffer: SfBuffer) {
    // Freeing cannot panic (it only deallocates), but nothing may unwind out of here.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: forwarded from the caller.
        unsafe { buffer.free() }
    }));
}

/// The table's `drop_instance`: drops the instance under `catch_unwind`.
///
/// # Safety
/// `instance` must be a live handle this library made, used by no running call and never
/// again.
pub unsafe extern "C" fn drop_instance(instance: *mut c_void) -> i32 {
    if instance.is_null() {
        return abi::STATUS_OK;
    }
    // SAFETY: the caller hands back ownership of a handle made by `Box::into_raw`.
    let owned = unsafe { Box::from_raw(instance.cast::<Instance>()) };
    match catch_unwind(AssertUnwindSafe(move || drop(owned))) {
        Ok(()) => abi::STATUS_OK,
        Err(payload) => {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            abi::STATUS_PANIC
        }
    }
}

/// Exports a plugin: see the [module documentation](self).
///
/// ```text
/// sf_sdk::export_plugin! {
///     manifest: "sf-plugin.json",            // relative to the crate's Cargo.toml
///     object_store: {                        // optional
///         "my-store" => my_store_constructor, // fn(&PluginConfig) -> Result<F, E>
///     },
///     executor: {                            // optional
///         "my-executor" => my_executor_constructor, // fn(&PluginConfig) -> Result<X, E>
///     },
///     evidence_store: {                      // optional
///         "my-evidence" => my_store_constructor, // fn(&PluginConfig) -> Result<S, E>
///     },
///     gate: {                                // optional
///         "my-gate" => my_gate_constructor,  // fn(&PluginConfig) -> Result<G, E>
///     },
///     fence: {                               // optional
///         "my-fence" => my_fence_constructor, // fn(&PluginConfig) -> Result<F, E>
///     },
/// }
/// ```
#[macro_export]
macro_rules! export_plugin {
    (
        manifest: $manifest:literal
        $(, object_store: { $($store_tag:literal => $store_constructor:expr),+ $(,)? })?
        $(, executor: { $($executor_tag:literal => $executor_constructor:expr),+ $(,)? })?
        $(, evidence_store: { $($evidence_tag:literal => $evidence_constructor:expr),+ $(,)? })?
        $(, gate: { $($gate_tag:literal => $gate_constructor:expr),+ $(,)? })?
        $(, fence: { $($fence_tag:literal => $fence_constructor:expr),+ $(,)? })?
        $(,)?
    ) => {
        #[cfg(panic = "abort")]
        ::core::compile_error!(
            "sf plugins must be built with panic = \"unwind\": export_plugin! catches every \
             panic so that the host keeps running, which panic = \"abort\" makes impossible. \
             Set panic = \"unwind\" in the [profile] sections of the workspace's Cargo.toml."
        );

        #[doc(hidden)]
        static __SF_PLUGIN_DEFINITION: $crate::export::PluginDefinition =
            $crate::export::PluginDefinition {
                manifest: ::core::include_str!(::core::concat!(
                    ::core::env!("CARGO_MANIFEST_DIR"),
                    "/",
                    $manifest
                )),
                object_stores: &[$($((
                    $store_tag,
                    (|config: &$crate::export::PluginConfig| {
                        $crate::export::object_store_factory(($store_constructor)(config))
                    }) as $crate::export::ObjectStoreConstructor,
                )),+)?],
                executors: &[$($((
                    $executor_tag,
                    (|config: &$crate::export::PluginConfig| {
                        $crate::export::executor(($executor_constructor)(config))
                    }) as $crate::export::ExecutorConstructor,
                )),+)?],
                evidence_stores: &[$($((
                    $evidence_tag,
                    (|config: &$crate::export::PluginConfig| {
                        $crate::export::evidence_store(($evidence_constructor)(config))
                    }) as $crate::export::EvidenceStoreConstructor,
                )),+)?],
                gates: &[$($((
                    $gate_tag,
                    (|config: &$crate::export::PluginConfig| {
                        $crate::export::gate(($gate_constructor)(config))
                    }) as $crate::export::GateConstructor,
                )),+)?],
                fences: &[$($((
                    $fence_tag,
                    (|config: &$crate::export::PluginConfig| {
                        $crate::export::fence(($fence_constructor)(config))
                    }) as $crate::export::FenceConstructor,
                )),+)?],
            };

        #[doc(hidden)]
        unsafe extern "C" fn __sf_plugin_instantiate(
            contract: $crate::export::SfBytes,
            config: $crate::export::SfBytes,
            instance: *mut *mut ::core::ffi::c_void,
            reply: *mut $crate::export::SfBuffer,
        ) -> i32 {
            // SAFETY: the host calls this through the ABI with valid arguments.
            unsafe {
                $crate::export::instantiate(
                    &__SF_PLUGIN_DEFINITION,
                    contract,
                    config,
                    instance,
                    reply,
                )
            }
        }

        #[doc(hidden)]
        static __SF_PLUGIN_ENTRY: $crate::export::StaticEntry =
            $crate::export::StaticEntry($crate::export::entry_table(
                ::core::include_str!(::core::concat!(
                    ::core::env!("CARGO_MANIFEST_DIR"),
                    "/",
                    $manifest
                )),
                __sf_plugin_instantiate,
            ));

        /// The sf plugin entry point: returns this library's static entry table.
        #[unsafe(no_mangle)]
        pub extern "C" fn sf_plugin_entry_v1() -> *const $crate::export::PluginEntryV1 {
            &__SF_PLUGIN_ENTRY.0
        }

        #[cfg(test)]
        #[test]
        fn sf_plugin_manifest_lists_exactly_the_exports() {
            if let Err(problem) = __SF_PLUGIN_DEFINITION.check() {
                panic!("export_plugin!: {problem}");
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ScriptedExecutor;

    #[test]
    fn cancels_reach_their_run_early_or_late() {
        let instance = ExecutorInstance::new(Box::new(ScriptedExecutor::new()));
        // A cancel before its run registered is kept: the run starts cancelled.
        instance.cancel(1);
        assert!(instance.register(1).unwrap().is_cancelled());
        // A cancel of a run in flight cancels that run only.
        let two = instance.register(2).unwrap();
        let three = instance.register(3).unwrap();
        assert!(instance.register(2).is_none(), "one run per id in flight");
        instance.cancel(3);
        assert!(!two.is_cancelled() && three.is_cancelled());
        // Ended runs leave the table; late cancels are remembered, boundedly.
        {
            let _ended = Registered {
                instance: &instance,
                id: 2,
            };
        }
        assert!(!instance.runs().in_flight.contains_key(&2));
        for id in 100..100 + 2 * MAX_EARLY_CANCELS as u64 {
            instance.cancel(id);
        }
        let runs = instance.runs();
        assert_eq!(runs.early_cancels.len(), MAX_EARLY_CANCELS);
        assert_eq!(
            runs.early_cancels.first().copied(),
            Some(100 + MAX_EARLY_CANCELS as u64)
        );
    }
}
