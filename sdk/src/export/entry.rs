//! The entry table's C functions: `instantiate` finds the constructor of a contract's tag and
//! hands the host the instance it makes; `call` hands a call to its instance; `free_buf` and
//! `drop_instance` take back what the host was lent. Every one runs the plugin's code under
//! `catch_unwind`: a panic becomes a `STATUS_PANIC` reply and never unwinds into the host.

use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};

use sf_plugin_abi::abi::{
    self, ABI_MAJOR, ABI_MINOR, MAGIC, PluginEntryV1, SfBuffer, SfBytes, SfStr,
};
use sf_plugin_abi::protocol::{self, Empty, PanicReply};

use super::not_made::NotMade;
use super::served::{self, Handle, Outcome, Place, plugin_error};
use super::{PluginConfig, PluginDefinition, SDK_VERSION};

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

/// The two spans the host lent for a call, or the refusal of a null one.
///
/// # Safety
/// Each must be null or valid for reads for the call.
unsafe fn lent<'a>(first: SfBytes, second: SfBytes) -> Result<(&'a [u8], &'a [u8]), Outcome> {
    // SAFETY: forwarded from the caller.
    match unsafe { (first.as_slice(), second.as_slice()) } {
        (Some(first), Some(second)) => Ok((first, second)),
        _ => Err(plugin_error(protocol::MALFORMED_REQUEST, "a null argument")),
    }
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
        let (contract, config) = match unsafe { lent(contract, config) } {
            Ok(spans) => spans,
            Err(outcome) => return outcome,
        };
        let Ok(contract) = std::str::from_utf8(contract) else {
            return plugin_error(protocol::MALFORMED_REQUEST, "the contract is not UTF-8");
        };
        let config = match PluginConfig::from_json(config) {
            Ok(config) => config,
            Err(outcome) => return outcome,
        };
        match make(definition, contract, &config) {
            Ok(made) => {
                if !instance.is_null() {
                    // SAFETY: the host passes a valid out-pointer.
                    unsafe { instance.write(served::into_raw(made)) };
                }
                Outcome::Ok(Empty::encode())
            }
            Err(outcome) => outcome,
        }
    });
    // SAFETY: the host passes a valid out-pointer for the reply.
    unsafe { write_reply(reply, bytes) };
    status
}

/// The instance `config` asks `contract`'s constructor of its tag for, or the refusal.
fn make(
    definition: &PluginDefinition,
    contract: &str,
    config: &PluginConfig,
) -> Result<Handle, Outcome> {
    let Some(exports) = definition
        .exports()
        .into_iter()
        .find(|exports| exports.contract() == contract)
    else {
        return Err(plugin_error(
            protocol::UNKNOWN_CONTRACT,
            format!("this plugin does not provide the contract {contract:?}"),
        ));
    };
    match exports.make(config.tag(), config) {
        None => Err(plugin_error(
            protocol::UNKNOWN_TAG,
            format!("no {contract} type {:?} here", config.tag()),
        )),
        Some(Ok(made)) => Ok(made),
        // The contract's own error, read by the host as that error (ABI minor 14).
        Some(Err(NotMade::Contract(error))) => Err(Outcome::ContractError(error)),
        Some(Err(NotMade::Failed(message))) if config.was_refused() => {
            Err(plugin_error(protocol::INVALID_CONFIG, message))
        }
        Some(Err(NotMade::Failed(message))) => {
            Err(plugin_error(protocol::INSTANTIATE_FAILED, message))
        }
    }
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
        let Some(target) = (unsafe { instance.cast::<Handle>().as_ref() }) else {
            return plugin_error(protocol::MALFORMED_REQUEST, "a null instance");
        };
        // SAFETY: the host lends both spans for the call.
        let (method, request) = match unsafe { lent(method, request) } {
            Ok(spans) => spans,
            Err(outcome) => return outcome,
        };
        let Ok(method) = std::str::from_utf8(method) else {
            return plugin_error(protocol::UNSUPPORTED_METHOD, "the method is not UTF-8");
        };
        target.serve(method, request, Place::new(new_instance))
    });
    // SAFETY: the host passes a valid out-pointer for the reply.
    unsafe { write_reply(reply, bytes) };
    status
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
    // SAFETY: the caller hands back ownership of a handle made by `served::into_raw`.
    let owned = unsafe { Box::from_raw(instance.cast::<Handle>()) };
    match catch_unwind(AssertUnwindSafe(move || drop(owned))) {
        Ok(()) => abi::STATUS_OK,
        Err(payload) => {
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            abi::STATUS_PANIC
        }
    }
}
