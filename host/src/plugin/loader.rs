//! Loading a plugin library: its manifest file checked before the library is opened, the
//! library opened once and never unloaded, the entry table checked (magic, ABI, functions,
//! manifest) before the first call, and the raw calls that adapters build on.

use std::collections::HashMap;
use std::ffi::c_void;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::abi::{
    self, ABI_MAJOR, CallFn, DropInstanceFn, ENTRY_SYMBOL, EntryFn, FreeBufFn, InstantiateFn,
    MAGIC, PluginEntryV1, SfBuffer, SfBytes, SfStr,
};
use super::error::PluginError;
use super::library_file::{CopyError, SealedLibrary};
use super::manifest::{self, MAX_MANIFEST_BYTES, PluginManifest};
use super::protocol::{self, PanicReply, PluginErrorReply};
use crate::canonical::Digest;

/// The longest sdk version string accepted from a table.
const MAX_SDK_VERSION_BYTES: usize = 64;

/// A plugin library that passed every check: its manifest file, the entry table's magic, ABI
/// and functions, and the manifest compiled into it.
pub struct LoadedPlugin {
    manifest: PluginManifest,
    /// The sealed copy the library was mapped from.
    sealed: Arc<SealedLibrary>,
    library: PathBuf,
    manifest_file: PathBuf,
    sdk_version: String,
    abi_minor: u32,
    instantiate: InstantiateFn,
    call: CallFn,
    free_buf: FreeBufFn,
    drop_instance: DropInstanceFn,
}

impl std::fmt::Debug for LoadedPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedPlugin")
            .field("name", &self.manifest.name)
            .field("version", &self.manifest.version)
            .field("library", &self.library)
            .field("sdk_version", &self.sdk_version)
            .field("abi_minor", &self.abi_minor)
            .finish_non_exhaustive()
    }
}

/// A library opened from its sealed copy, never closed.
struct Opened {
    library: &'static libloading::Library,
    sealed: Arc<SealedLibrary>,
}

/// Libraries opened so far, by canonical path. A library is opened once and never closed:
/// code and static data of a plugin may be referenced by instances until the process ends;
/// its sealed copy (and the descriptor `dlopen` named) lives as long.
fn opened() -> &'static Mutex<HashMap<PathBuf, Opened>> {
    static OPENED: OnceLock<Mutex<HashMap<PathBuf, Opened>>> = OnceLock::new();
    OPENED.get_or_init(Default::default)
}

/// Reads the manifest file beside `library` and parses it, checking its ABI major.
pub fn read_manifest_file(library: &Path) -> Result<(PluginManifest, Vec<u8>), PluginError> {
    let file = manifest::manifest_path(library);
    let missing = |detail: String| PluginError::MissingManifest {
        library: library.to_owned(),
        manifest: file.clone(),
        detail,
    };
    let meta = std::fs::metadata(&file).map_err(|error| missing(error.to_string()))?;
    if !meta.is_file() {
        return Err(missing("not a regular file".into()));
    }
    check_owner(&file, &meta, &library.display().to_string())?;
    let mut bytes = Vec::new();
    std::fs::File::open(&file)
        .and_then(|handle| {
            handle
                .take(MAX_MANIFEST_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
        })
        .map_err(|error| missing(error.to_string()))?;
    let manifest =
        PluginManifest::parse(&bytes).map_err(|detail| PluginError::InvalidManifest {
            file: file.clone(),
            detail,
        })?;
    if manifest.abi != ABI_MAJOR {
        return Err(PluginError::AbiMismatch {
            plugin: manifest.name.clone(),
            library: library.to_owned(),
            found: manifest.abi.to_string(),
        });
    }
    Ok((manifest, bytes))
}

/// Refuses a plugin file or directory that someone other than this user or root owns, or that
/// its group or others may write: whoever can change it can run code inside sf.
pub fn check_owner(path: &Path, meta: &std::fs::Metadata, plugin: &str) -> Result<(), PluginError> {
    let euid = nix::unistd::geteuid().as_raw();
    let refuse = |rule: String| PluginError::Insecure {
        plugin: plugin.to_owned(),
        path: path.to_owned(),
        rule,
    };
    if meta.uid() != 0 && meta.uid() != euid {
        return Err(refuse(format!(
            "it is owned by uid {}, neither this user ({euid}) nor root",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(refuse("its group or others may write it".into()));
    }
    Ok(())
}

/// Refuses a directory above a plugin's own that someone else could change on the way to it:
/// each must be owned by this user or root and writable by neither group nor others, unless
/// it is sticky (like `/tmp`), where no one else can rename or remove what is ours.
pub fn check_directories_above(directory: &Path, plugin: &str) -> Result<(), PluginError> {
    let euid = nix::unistd::geteuid().as_raw();
    for above in directory.ancestors().skip(1) {
        let refuse = |rule: String| PluginError::Insecure {
            plugin: plugin.to_owned(),
            path: above.to_owned(),
            rule,
        };
        let meta = std::fs::symlink_metadata(above)
            .map_err(|error| refuse(format!("a directory above it cannot be examined: {error}")))?;
        if !meta.is_dir() {
            return Err(refuse("it is above the plugin and not a directory".into()));
        }
        if meta.uid() != 0 && meta.uid() != euid {
            return Err(refuse(format!(
                "it is above the plugin and owned by uid {}, neither this user ({euid}) nor root",
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
            return Err(refuse(
                "it is above the plugin and its group or others may write it (without the \
                 sticky bit, they could replace the plugin's directory)"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// Loads and checks the plugin library at `library`, in this order: the manifest file beside
/// it (parsed, ABI major), the library file (regular, safe owner and mode, and its directory
/// and every directory above it too), then its bytes, read once through a descriptor into a
/// sealed in-memory copy ([`SealedLibrary`]: whole as its ELF headers say, and unchangeable),
/// then `dlopen` of that copy (once per canonical path, never closed), the entry symbol, the
/// table's magic, its ABI major, its functions and strings, and the embedded manifest, which
/// must be byte-identical to the file. Nothing in the library runs before the file checks
/// pass.
pub fn load(library: &Path) -> Result<Arc<LoadedPlugin>, PluginError> {
    load_pinned(library, None)
}

/// [`load`], refusing the library unless the SHA-256 of the bytes it would map is `pin`
/// (when given): the check is made on the sealed copy, before `dlopen`.
pub fn load_pinned(library: &Path, pin: Option<&Digest>) -> Result<Arc<LoadedPlugin>, PluginError> {
    let (manifest, manifest_bytes) = read_manifest_file(library)?;
    let manifest_file = manifest::manifest_path(library);
    let name = manifest.name.clone();
    let missing = |detail: String| PluginError::MissingLibrary {
        plugin: name.clone(),
        library: library.to_owned(),
        manifest: manifest_file.clone(),
        detail,
    };
    let meta = std::fs::metadata(library).map_err(|error| missing(error.to_string()))?;
    if !meta.is_file() {
        return Err(missing("not a regular file".into()));
    }
    let canonical = std::fs::canonicalize(library).map_err(|error| missing(error.to_string()))?;
    check_owner(&canonical, &meta, &name)?;
    if let Some(directory) = canonical.parent() {
        let dir_meta = std::fs::metadata(directory).map_err(|error| missing(error.to_string()))?;
        check_owner(directory, &dir_meta, &name)?;
        check_directories_above(directory, &name)?;
    }

    let (handle, sealed) = open_once(&canonical, &name, pin)?;
    // SAFETY: the symbol's type is the ABI's entry signature; a library exporting the name
    // with another type is outside what any check could detect.
    let entry: EntryFn = unsafe {
        *handle
            .get::<EntryFn>(ENTRY_SYMBOL.as_bytes())
            .map_err(|error| PluginError::MissingEntry {
                plugin: name.clone(),
                library: library.to_owned(),
                detail: error.to_string(),
            })?
    };
    // SAFETY: calling the entry is what loading a plugin means; the sdk's entry only returns
    // a pointer to a static table.
    let table = unsafe { entry() };
    let malformed = |detail: &str| PluginError::MalformedTable {
        plugin: name.clone(),
        library: library.to_owned(),
        detail: detail.to_owned(),
    };
    if table.is_null() {
        return Err(malformed("the entry returned a null table"));
    }
    if !table.cast::<u64>().is_aligned() {
        return Err(malformed("the table is not aligned"));
    }
    // Read only the magic first: a table of another kind may be shorter than ours.
    // SAFETY: non-null, aligned, and every table starts with a u64.
    let magic = unsafe { table.cast::<u64>().read() };
    if magic != MAGIC {
        return Err(PluginError::WrongMagic {
            plugin: name.clone(),
            library: library.to_owned(),
            found: magic,
        });
    }
    // SAFETY: the magic says this is a table of this family, whose header (magic, major,
    // minor) is fixed across versions.
    let (major, minor) = unsafe {
        let versions = table.cast::<u8>().add(8).cast::<u32>();
        (versions.read(), versions.add(1).read())
    };
    if major != ABI_MAJOR {
        return Err(PluginError::AbiMismatch {
            plugin: name.clone(),
            library: library.to_owned(),
            found: format!("{major}.{minor}"),
        });
    }
    // SAFETY: magic and major say this is a v1 table (a newer minor only appends fields).
    let table: PluginEntryV1 = unsafe { table.read() };
    let (Some(instantiate), Some(call), Some(free_buf), Some(drop_instance)) = (
        table.instantiate,
        table.call,
        table.free_buf,
        table.drop_instance,
    ) else {
        return Err(malformed("a function pointer is null"));
    };
    // SAFETY: the table's strings point at static data of the library, which is never closed.
    let sdk_version = unsafe { static_str(table.sdk_version, MAX_SDK_VERSION_BYTES) }
        .ok_or_else(|| malformed("the sdk version is not a short UTF-8 string"))?;
    // SAFETY: as above.
    let embedded = unsafe { static_str(table.manifest, MAX_MANIFEST_BYTES) }
        .ok_or_else(|| malformed("the embedded manifest is not UTF-8 of at most 64 KiB"))?;
    if embedded.as_bytes() != manifest_bytes.as_slice() {
        let detail = match PluginManifest::parse(embedded.as_bytes()) {
            Ok(compiled) if compiled == manifest => "same content, different bytes".to_owned(),
            Ok(compiled) => format!(
                "the library is {} {} providing {:?}; the file says {} {} providing {:?}",
                compiled.name,
                compiled.version,
                compiled.contracts,
                manifest.name,
                manifest.version,
                manifest.contracts
            ),
            Err(error) => format!("the compiled manifest is invalid: {error}"),
        };
        return Err(PluginError::ManifestMismatch {
            plugin: name.clone(),
            library: library.to_owned(),
            manifest: manifest_file.clone(),
            detail,
        });
    }
    Ok(Arc::new(LoadedPlugin {
        manifest,
        sealed,
        library: library.to_owned(),
        manifest_file,
        sdk_version: sdk_version.to_owned(),
        abi_minor: minor,
        instantiate,
        call,
        free_buf,
        drop_instance,
    }))
}

/// Opens the library at `canonical` once: read through a descriptor (no link followed; the
/// file's owner and mode checked again on that descriptor) into a sealed copy, checked against
/// `pin`, and mapped from the copy. A library opened before is checked against `pin` by its
/// copy's digest and not read again.
fn open_once(
    canonical: &Path,
    plugin: &str,
    pin: Option<&Digest>,
) -> Result<(&'static libloading::Library, Arc<SealedLibrary>), PluginError> {
    let load_failed = |detail: String| PluginError::LoadFailed {
        plugin: plugin.to_owned(),
        library: canonical.to_owned(),
        detail,
    };
    let mut opened = opened().lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(done) = opened.get(canonical) {
        check_pin(&done.sealed, pin, canonical, plugin)?;
        return Ok((done.library, Arc::clone(&done.sealed)));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(canonical)
        .map_err(|error| load_failed(format!("it cannot be opened: {error}")))?;
    let meta = file
        .metadata()
        .map_err(|error| load_failed(error.to_string()))?;
    if !meta.is_file() {
        return Err(load_failed("it is not a regular file".into()));
    }
    // The descriptor's file is the one read: its owner and mode are checked on it too.
    check_owner(canonical, &meta, plugin)?;
    let sealed = SealedLibrary::copy(&file, plugin).map_err(|problem| match problem {
        CopyError::Truncated(truncated) => PluginError::TruncatedLibrary {
            plugin: plugin.to_owned(),
            library: canonical.to_owned(),
            bytes: truncated.bytes,
            detail: truncated.detail,
        },
        CopyError::Unreadable(detail) => load_failed(detail),
    })?;
    drop(file);
    check_pin(&sealed, pin, canonical, plugin)?;
    // RTLD_NOW: every symbol the library needs is resolved now, so a library built for
    // another system fails here instead of in the middle of a call.
    // SAFETY: opening a library runs its initialisers; the manifest file, the file's
    // ownership, its completeness and its pin were checked first, on the very bytes mapped,
    // which is all that can be checked before running its code.
    let library = unsafe {
        libloading::os::unix::Library::open(
            Some(sealed.path()),
            libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL,
        )
    }
    .map_err(|error| load_failed(error.to_string()))?;
    let library: &'static libloading::Library = Box::leak(Box::new(library.into()));
    let sealed = Arc::new(sealed);
    opened.insert(
        canonical.to_owned(),
        Opened {
            library,
            sealed: Arc::clone(&sealed),
        },
    );
    Ok((library, sealed))
}

/// Refuses `sealed` unless its digest is `pin` (when given).
fn check_pin(
    sealed: &SealedLibrary,
    pin: Option<&Digest>,
    canonical: &Path,
    plugin: &str,
) -> Result<(), PluginError> {
    let Some(expected) = pin else {
        return Ok(());
    };
    let found = sealed.sha256().map_err(|detail| PluginError::LoadFailed {
        plugin: plugin.to_owned(),
        library: canonical.to_owned(),
        detail,
    })?;
    if found != expected {
        return Err(PluginError::PinMismatch {
            plugin: plugin.to_owned(),
            library: canonical.to_owned(),
            expected: expected.clone(),
            found: found.clone(),
        });
    }
    Ok(())
}

/// # Safety
/// `text` must point at `len` bytes that live for the rest of the process.
unsafe fn static_str(text: SfStr, max: usize) -> Option<&'static str> {
    if text.len > max {
        return None;
    }
    // SAFETY: forwarded to the caller.
    let bytes = unsafe {
        SfBytes {
            ptr: text.ptr,
            len: text.len,
        }
        .as_slice()
    }?;
    std::str::from_utf8(bytes).ok()
}

impl LoadedPlugin {
    /// The manifest (file and compiled, which are identical).
    pub fn manifest(&self) -> &PluginManifest {
        &self.manifest
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// The library's path, as given to [`load`].
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// The manifest file's path.
    pub fn manifest_file(&self) -> &Path {
        &self.manifest_file
    }

    /// The `sha256:` of the library's bytes as they were mapped (its sealed copy), computed
    /// once: what `sha256 = …` in a section of `sf.toml` pins.
    pub fn sha256(&self) -> Result<&Digest, PluginError> {
        self.sealed
            .sha256()
            .map_err(|detail| PluginError::LoadFailed {
                plugin: self.manifest.name.clone(),
                library: self.library.clone(),
                detail,
            })
    }

    /// The sf-sdk version the plugin was built with.
    pub fn sdk_version(&self) -> &str {
        &self.sdk_version
    }

    /// The ABI minor version the plugin was built with.
    pub fn abi_minor(&self) -> u32 {
        self.abi_minor
    }

    /// Makes an instance of `contract` served under `tag`, configured by `config` (a JSON
    /// object; `type` is set to `tag`). The contract must be one this sf knows and the tag one
    /// the manifest lists under it.
    pub fn instantiate(
        self: &Arc<Self>,
        contract: &str,
        tag: &str,
        config: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Instance, PluginError> {
        let provided: Vec<String> = self.manifest.contracts.keys().cloned().collect();
        if !super::KNOWN_CONTRACTS.contains(&contract) {
            return Err(PluginError::UnknownContract {
                plugin: self.name().to_owned(),
                contract: contract.to_owned(),
                provided,
                detail: format!(
                    "this sf knows the contracts {}",
                    super::KNOWN_CONTRACTS.join(", ")
                ),
            });
        }
        if self.manifest.tags(contract).is_empty() {
            return Err(PluginError::UnknownContract {
                plugin: self.name().to_owned(),
                contract: contract.to_owned(),
                provided,
                detail: "its manifest does not list it".into(),
            });
        }
        if !self.manifest.provides(contract, tag) {
            return Err(PluginError::UnknownTag {
                plugin: self.name().to_owned(),
                contract: contract.to_owned(),
                tag: tag.to_owned(),
                provided: self.manifest.tags(contract).to_vec(),
            });
        }
        let mut config = config.clone();
        config.insert("type".into(), serde_json::Value::String(tag.to_owned()));
        let config = serde_json::to_vec(&config).unwrap_or_default();
        let during = format!("instantiate({contract}, {tag})");
        let mut handle: *mut c_void = std::ptr::null_mut();
        let mut reply = SfBuffer::EMPTY;
        // SAFETY: both byte spans outlive the call; the out-pointers are valid.
        let status = unsafe {
            (self.instantiate)(
                SfBytes::new(contract.as_bytes()),
                SfBytes::new(&config),
                &mut handle,
                &mut reply,
            )
        };
        let reply = ReplyBuffer::new(self, reply, &during)?;
        match status {
            abi::STATUS_OK => {
                let Some(handle) = NonNull::new(handle) else {
                    return Err(self.malformed(&during, "OK without an instance"));
                };
                let instance = Instance {
                    plugin: Arc::clone(self),
                    handle,
                };
                protocol::Empty::decode(reply.bytes())
                    .map_err(|error| self.malformed(&during, &error.to_string()))?;
                Ok(instance)
            }
            // The contract's own error (a server down, a schema tampered with): its class is
            // kept, from a plugin whose sdk answers so.
            abi::STATUS_CONTRACT_ERROR
                if self.abi_minor >= protocol::INSTANTIATE_ERROR_SINCE_MINOR =>
            {
                Err(super::registry::instantiate_error(
                    contract,
                    self.name(),
                    &during,
                    reply.bytes(),
                ))
            }
            abi::STATUS_CONTRACT_ERROR => Err(self.malformed(
                &during,
                &format!(
                    "instantiate answered with a contract error, which a plugin of ABI \
                     {ABI_MAJOR}.{} never may (only from {ABI_MAJOR}.{} on)",
                    self.abi_minor,
                    protocol::INSTANTIATE_ERROR_SINCE_MINOR
                ),
            )),
            other => Err(self.failure(other, reply.bytes(), &during)),
        }
    }

    fn malformed(&self, during: &str, detail: &str) -> PluginError {
        PluginError::MalformedMessage {
            plugin: self.name().to_owned(),
            during: during.to_owned(),
            detail: detail.to_owned(),
        }
    }

    /// The error for a status that is neither OK nor a contract error.
    fn failure(&self, status: i32, reply: &[u8], during: &str) -> PluginError {
        let plugin = self.name().to_owned();
        match status {
            abi::STATUS_PANIC => PluginError::Panicked {
                plugin,
                during: during.to_owned(),
                message: PanicReply::decode(reply).map_or_else(
                    |error| format!("(the panic report is malformed: {error})"),
                    |panic| panic.message,
                ),
            },
            abi::STATUS_PLUGIN_ERROR => match PluginErrorReply::decode(reply) {
                Err(error) => self.malformed(during, &format!("plugin error reply: {error}")),
                Ok(refusal) => match refusal.code.as_str() {
                    protocol::UNSUPPORTED_METHOD => PluginError::UnsupportedMethod {
                        plugin,
                        method: during.to_owned(),
                        detail: refusal.message,
                    },
                    _ => PluginError::Refused {
                        plugin,
                        during: during.to_owned(),
                        code: refusal.code,
                        message: refusal.message,
                    },
                },
            },
            other => self.malformed(during, &format!("status {other} is not a status of ABI 1")),
        }
    }
}

/// A reply buffer owned by the plugin, handed back through `free_buf` when dropped.
struct ReplyBuffer<'a> {
    plugin: &'a LoadedPlugin,
    buffer: SfBuffer,
}

impl<'a> ReplyBuffer<'a> {
    fn new(plugin: &'a LoadedPlugin, buffer: SfBuffer, during: &str) -> Result<Self, PluginError> {
        let reply = Self { plugin, buffer };
        if buffer.ptr.is_null() && buffer.len != 0 {
            return Err(plugin.malformed(during, "a null reply with a non-zero length"));
        }
        if buffer.len > isize::MAX as usize {
            return Err(plugin.malformed(during, "a reply longer than memory"));
        }
        Ok(reply)
    }

    fn bytes(&self) -> &[u8] {
        if self.buffer.ptr.is_null() {
            return &[];
        }
        // SAFETY: the plugin owns these bytes until `free_buf`, which only `drop` calls.
        unsafe { std::slice::from_raw_parts(self.buffer.ptr, self.buffer.len) }
    }
}

impl Drop for ReplyBuffer<'_> {
    fn drop(&mut self) {
        if !self.buffer.ptr.is_null() {
            // SAFETY: the buffer came from this plugin and is freed once.
            unsafe { (self.plugin.free_buf)(self.buffer) };
        }
    }
}

/// One instance inside a plugin (a factory, a store, …). Calls may run concurrently (the
/// contracts are `Send + Sync`); dropping it releases the plugin's object.
pub struct Instance {
    plugin: Arc<LoadedPlugin>,
    handle: NonNull<c_void>,
}

// SAFETY: an instance is a plugin-side implementation of a `Send + Sync` contract trait; the
// handle is only an address, used by `call` (shared) and `drop_instance` (exclusive, in Drop).
unsafe impl Send for Instance {}
// SAFETY: as above.
unsafe impl Sync for Instance {}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("plugin", &self.plugin.name())
            .finish_non_exhaustive()
    }
}

/// A successful or contract-refused call's reply.
pub enum CallReply<'a> {
    /// `STATUS_OK`: the answer message, and the new instance if the method made one.
    Answer {
        /// The encoded answer, in the plugin's buffer.
        bytes: &'a [u8],
        /// The instance the method made (an object store factory's `open` or `create`), if any.
        new_instance: Option<Instance>,
    },
    /// `STATUS_CONTRACT_ERROR`: the contract's error message.
    ContractError {
        /// The encoded contract error, in the plugin's buffer.
        bytes: &'a [u8],
    },
}

impl Instance {
    /// The plugin this instance lives in.
    pub fn plugin(&self) -> &Arc<LoadedPlugin> {
        &self.plugin
    }

    /// Calls `method` with `request` and hands the reply to `read` while the plugin's buffer is
    /// alive. Panics, plugin errors and malformed statuses are `Err`.
    pub fn call<T>(
        &self,
        method: &str,
        request: &[u8],
        read: impl FnOnce(CallReply<'_>) -> T,
    ) -> Result<T, PluginError> {
        let plugin = &self.plugin;
        let mut reply = SfBuffer::EMPTY;
        let mut new_handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: the handle is live (dropped only in Drop), the byte spans outlive the call
        // and the out-pointers are valid.
        let status = unsafe {
            (plugin.call)(
                self.handle.as_ptr(),
                SfBytes::new(method.as_bytes()),
                SfBytes::new(request),
                &mut reply,
                &mut new_handle,
            )
        };
        let reply = ReplyBuffer::new(plugin, reply, method)?;
        match status {
            abi::STATUS_OK => {
                let new_instance = NonNull::new(new_handle).map(|handle| Instance {
                    plugin: Arc::clone(plugin),
                    handle,
                });
                Ok(read(CallReply::Answer {
                    bytes: reply.bytes(),
                    new_instance,
                }))
            }
            abi::STATUS_CONTRACT_ERROR => Ok(read(CallReply::ContractError {
                bytes: reply.bytes(),
            })),
            other => Err(plugin.failure(other, reply.bytes(), method)),
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SAFETY: the handle came from this plugin and no call can run (we are being dropped).
        let status = unsafe { (self.plugin.drop_instance)(self.handle.as_ptr()) };
        if status != abi::STATUS_OK {
            eprintln!(
                "sf: warning: plugin {} failed to release an instance (status {status}); \
                 continuing",
                self.plugin.name()
            );
        }
    }
}
