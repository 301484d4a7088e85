//! The C ABI between sf and a plugin library: the one exported symbol, the table it returns,
//! the status codes of its functions, and the borrowed and owned byte buffers that cross.
//!
//! Only C types cross the boundary: integers, pointers and `extern "C"` function pointers.
//! Everything else travels as a framed message ([`super::message`]): a JSON header plus raw
//! byte sections. A plugin carries its own copy of the Rust standard library and of this
//! crate, so no Rust type (no `String`, no `Box<dyn …>`, no panic) ever crosses.
//!
//! # Version rule
//!
//! The table starts with [`MAGIC`] and the ABI version. The host refuses a table whose magic is
//! wrong or whose major version differs from [`ABI_MAJOR`]; the minor version may differ either
//! way. A newer minor may only add methods (new method names on existing contracts), new
//! contracts, and fields appended at the end of [`PluginEntryV1`]; a side that does not know a
//! method answers it with the plugin error `unsupported-method`. Any change to the shape of an
//! existing message or field is a new major version (and a new entry symbol).

use std::ffi::c_void;

/// The symbol every plugin library exports: `extern "C" fn() -> *const PluginEntryV1`.
pub const ENTRY_SYMBOL: &str = "sf_plugin_entry_v1";

/// The first field of every table: the bytes `sfplugin` read as a big-endian integer.
pub const MAGIC: u64 = u64::from_be_bytes(*b"sfplugin");

/// The ABI major version this host and this sdk speak. A plugin with another major is refused.
pub const ABI_MAJOR: u32 = 1;

/// The ABI minor version this host and this sdk speak. Minor 1 added the `evidence-store` and
/// `gate` contracts; minor 2 the executor's `run_v2` (the harness); minor 3 its `run_v3`
/// (enforcement as the Executor's own facts); minor 4 its `run_v4` (snapshot entries with
/// their modes: executables and symbolic links); minor 5 its `run_v5` (the limits a run hit);
/// minor 6 its `run_v6` (commands); minor 7 a command's executable scratch (`run_v6`'s
/// `scratchExecutable`, never sent to a plugin of an older minor); minor 8 a command's root
/// environment (`run_v6`'s `environment.at` of `/`, likewise); minor 9 the `fence` contract
/// (the attempt fence, never instantiated from a plugin of an older minor); minor 10 the
/// object store's read scopes (`begin_reads`, `end_reads`, sent only to a plugin of minor 10
/// or later); minor 11 the executor's program by reference (`run_v6`'s `programTree`, sent
/// only to a plugin of minor 11 or later:
/// [`executor_protocol::PROGRAM_TREE_SINCE_MINOR`](crate::executor_protocol::PROGRAM_TREE_SINCE_MINOR));
/// minor 12 a command's network to its caller's proxy and its output directory (`run_v6`'s
/// `network` and `output`, sent only to a plugin of minor 12 or later: environment builds);
/// minor 13 the fence per Candidate (`acquire`'s `candidate`, sent only to a plugin of minor
/// 13 or later: [`fence_protocol::CANDIDATE_SINCE_MINOR`](crate::fence_protocol::CANDIDATE_SINCE_MINOR));
/// minor 14 `instantiate` answering the contract's own error (`STATUS_CONTRACT_ERROR`: a
/// backend that could not be made because its server is `unavailable` or its data `corrupt`),
/// read as that error only from a plugin of minor 14 or later:
/// [`protocol::INSTANTIATE_ERROR_SINCE_MINOR`](crate::protocol::INSTANTIATE_ERROR_SINCE_MINOR));
/// minor 15 the executor's `run_v7`, whose answer may name where a remote run was executed
/// (the Action and the worker: called only on a plugin of minor 15 or later,
/// [`executor_protocol::REMOTE_RUN_SINCE_MINOR`](crate::executor_protocol::REMOTE_RUN_SINCE_MINOR)).
pub const ABI_MINOR: u32 = 15;

/// The call succeeded; the reply is the answer message.
pub const STATUS_OK: i32 = 0;
/// The contract's method refused; the reply is the contract's error message (for example an
/// `ObjectStoreError` with its code and fields).
pub const STATUS_CONTRACT_ERROR: i32 = 1;
/// The plugin could not serve the call at all (unknown method, malformed request, unknown
/// contract or tag, bad configuration); the reply is `{"code", "message"}`.
pub const STATUS_PLUGIN_ERROR: i32 = 2;
/// The plugin panicked; the panic was caught. The reply is `{"message"}`.
pub const STATUS_PANIC: i32 = 3;

/// Bytes lent by the caller for the duration of one call. `ptr` may be dangling when `len` is
/// zero, but is never null.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SfBytes {
    /// The first byte.
    pub ptr: *const u8,
    /// The number of bytes.
    pub len: usize,
}

impl SfBytes {
    /// Lends `bytes`.
    pub const fn new(bytes: &[u8]) -> Self {
        Self {
            ptr: bytes.as_ptr(),
            len: bytes.len(),
        }
    }

    /// The lent bytes, or `None` for a null pointer or an impossible length.
    ///
    /// # Safety
    /// `ptr` must point to `len` readable bytes that stay valid and unchanged for `'a`.
    pub unsafe fn as_slice<'a>(&self) -> Option<&'a [u8]> {
        if self.ptr.is_null() || self.len > isize::MAX as usize {
            return None;
        }
        // SAFETY: non-null and bounded; validity is the caller's promise.
        Some(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }
}

/// Bytes a plugin allocated for the host: a reply. The host reads them and hands them back
/// through the table's `free_buf`, exactly once. `ptr` is null only for "no reply".
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SfBuffer {
    /// The first byte, or null for no reply.
    pub ptr: *mut u8,
    /// The number of bytes.
    pub len: usize,
}

impl SfBuffer {
    /// The empty buffer: "no reply".
    pub const EMPTY: Self = Self {
        ptr: std::ptr::null_mut(),
        len: 0,
    };

    /// Hands `bytes` over as a buffer that [`SfBuffer::free`] (in the same library) releases.
    pub fn from_vec(bytes: Vec<u8>) -> Self {
        let boxed: Box<[u8]> = bytes.into_boxed_slice();
        let len = boxed.len();
        let ptr = Box::into_raw(boxed) as *mut u8;
        Self { ptr, len }
    }

    /// Releases a buffer made by [`SfBuffer::from_vec`] in this same library.
    ///
    /// # Safety
    /// The buffer must come from `from_vec` in this library and not have been freed.
    pub unsafe fn free(self) {
        if self.ptr.is_null() {
            return;
        }
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: the caller promises this is the boxed slice from `from_vec`.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// Makes a new instance of one contract from a configuration.
///
/// `contract` is the contract's name (`object-store`); `config` is the configuration section as
/// JSON (with its `type` tag). On [`STATUS_OK`] the plugin writes the new instance handle to
/// `*instance` (never null); on every status it may write a reply to `*reply`. Since minor 14
/// a backend that could not be made answers [`STATUS_CONTRACT_ERROR`] with the contract's own
/// error (its code kept: `unavailable`, `corrupt`, …); before, only [`STATUS_PLUGIN_ERROR`].
pub type InstantiateFn = unsafe extern "C" fn(
    contract: SfBytes,
    config: SfBytes,
    instance: *mut *mut c_void,
    reply: *mut SfBuffer,
) -> i32;

/// Calls `method` on `instance` with the framed `request`. The plugin writes its reply to
/// `*reply`. A method that makes a new instance (an ObjectStore factory's `create` and
/// `open`) writes its handle to `*new_instance` on [`STATUS_OK`].
pub type CallFn = unsafe extern "C" fn(
    instance: *mut c_void,
    method: SfBytes,
    request: SfBytes,
    reply: *mut SfBuffer,
    new_instance: *mut *mut c_void,
) -> i32;

/// Releases a reply buffer the plugin allocated.
pub type FreeBufFn = unsafe extern "C" fn(buffer: SfBuffer);

/// Releases an instance. No call on it may be running or follow. Returns a status: a panic in
/// the instance's destructor is caught and reported as [`STATUS_PANIC`].
pub type DropInstanceFn = unsafe extern "C" fn(instance: *mut c_void) -> i32;

/// The signature of [`ENTRY_SYMBOL`].
pub type EntryFn = unsafe extern "C" fn() -> *const PluginEntryV1;

/// A UTF-8 string with static lifetime inside the plugin library.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SfStr {
    /// The first byte.
    pub ptr: *const u8,
    /// The number of bytes.
    pub len: usize,
}

impl SfStr {
    /// Points at a static string (usable in a `static` initializer).
    pub const fn from_static(text: &'static str) -> Self {
        Self {
            ptr: text.as_ptr(),
            len: text.len(),
        }
    }
}

/// The table [`ENTRY_SYMBOL`] returns. It lives as long as the library (forever: sf never
/// unloads one).
///
/// Layout (x86-64 and aarch64 Linux; `repr(C)`, 80 bytes): `magic: u64` at 0, `abi_major: u32`
/// at 8, `abi_minor: u32` at 12, `sdk_version: {ptr, len}` at 16, `manifest: {ptr, len}` at 32,
/// then the four function pointers `instantiate`, `call`, `free_buf`, `drop_instance` at 48, 56,
/// 64 and 72. A null function pointer makes the table malformed.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PluginEntryV1 {
    /// [`MAGIC`].
    pub magic: u64,
    /// [`ABI_MAJOR`] of the sdk the plugin was built with.
    pub abi_major: u32,
    /// [`ABI_MINOR`] of the sdk the plugin was built with.
    pub abi_minor: u32,
    /// The version of sf-sdk the plugin was built with.
    pub sdk_version: SfStr,
    /// The plugin's manifest, JSON; byte-identical to the manifest file beside the library.
    pub manifest: SfStr,
    /// Makes a backend instance of a contract and tag from its configuration.
    pub instantiate: Option<InstantiateFn>,
    /// Calls one method of an instance.
    pub call: Option<CallFn>,
    /// Frees a reply buffer the plugin allocated.
    pub free_buf: Option<FreeBufFn>,
    /// Drops an instance.
    pub drop_instance: Option<DropInstanceFn>,
}

/// A table in a `static`: the raw pointers it holds point at static data and are never written,
/// so sharing it between threads is sound.
#[repr(transparent)]
pub struct StaticEntry(pub PluginEntryV1);

// SAFETY: the table is immutable and every pointer in it points at immutable static data.
unsafe impl Sync for StaticEntry {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_layout_is_fixed() {
        assert_eq!(std::mem::size_of::<PluginEntryV1>(), 80);
        assert_eq!(std::mem::offset_of!(PluginEntryV1, abi_major), 8);
        assert_eq!(std::mem::offset_of!(PluginEntryV1, sdk_version), 16);
        assert_eq!(std::mem::offset_of!(PluginEntryV1, manifest), 32);
        assert_eq!(std::mem::offset_of!(PluginEntryV1, instantiate), 48);
        assert_eq!(std::mem::offset_of!(PluginEntryV1, drop_instance), 72);
        assert_eq!(&MAGIC.to_be_bytes(), b"sfplugin");
    }

    #[test]
    fn buffers_round_trip() {
        let buffer = SfBuffer::from_vec(b"hello".to_vec());
        // SAFETY: the buffer was just made from a vector and is not freed yet.
        let bytes = unsafe {
            SfBytes {
                ptr: buffer.ptr,
                len: buffer.len,
            }
            .as_slice()
        }
        .unwrap();
        assert_eq!(bytes, b"hello");
        // SAFETY: each buffer is freed once, by the side that made it.
        unsafe { buffer.free() };
        // SAFETY: freeing the empty buffer is a no-op.
        unsafe { SfBuffer::EMPTY.free() };
        let empty = SfBuffer::from_vec(Vec::new());
        assert!(!empty.ptr.is_null());
        // SAFETY: as above, freed once.
        unsafe { empty.free() };
    }
}
