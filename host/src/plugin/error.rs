//! The plugin host's typed errors. Each names the plugin (by name once its manifest was read,
//! by library path before) and says what to do about it.

use std::path::PathBuf;

use super::abi::{ABI_MAJOR, ABI_MINOR, ENTRY_SYMBOL, MAGIC};

/// Why a plugin could not be found, loaded, checked, instantiated or called.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The manifest file beside the library cannot be read.
    #[error(
        "plugin library {}: its manifest file {} cannot be read ({detail}); a plugin ships its \
         manifest beside its library: rebuild the plugin (its build script writes the file) or \
         copy the manifest next to the library",
        library.display(),
        manifest.display()
    )]
    MissingManifest {
        /// The library whose manifest was looked for.
        library: PathBuf,
        /// Where its manifest file should be.
        manifest: PathBuf,
        /// Why the file cannot be read.
        detail: String,
    },
    /// The manifest file is not a valid manifest.
    #[error("plugin manifest {}: {detail}; fix the file or rebuild the plugin", file.display())]
    InvalidManifest {
        /// The manifest file.
        file: PathBuf,
        /// The rule the manifest breaks.
        detail: String,
    },
    /// The library named by a manifest is not there.
    #[error(
        "plugin {plugin}: its library {} cannot be used ({detail}); build the plugin, or remove \
         its manifest {} from the plugin path",
        library.display(),
        manifest.display()
    )]
    MissingLibrary {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library path, beside the manifest.
        library: PathBuf,
        /// The manifest file read for it.
        manifest: PathBuf,
        /// Why it cannot be used (absent, not a regular file, ...).
        detail: String,
    },
    /// A plugin file or directory could be changed by someone else.
    #[error(
        "plugin {plugin}: {} is not safe to load: {rule}; fix its owner or permissions \
         (for example chmod go-w)",
        path.display()
    )]
    Insecure {
        /// The plugin's name, from its manifest (or the name of a program checked by the
        /// same rules).
        plugin: String,
        /// The library, or a directory at or above it, that fails the check.
        path: PathBuf,
        /// The ownership or mode rule it breaks.
        rule: String,
    },
    /// The library file is shorter than its own headers say: truncated (an interrupted copy
    /// or build), refused before it is mapped.
    #[error(
        "plugin {plugin}: {} is truncated: it holds {bytes} bytes, and {detail}; rebuild or \
         copy it again",
        library.display()
    )]
    TruncatedLibrary {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library, by its canonical path.
        library: PathBuf,
        /// The file's length.
        bytes: u64,
        /// Which part its headers name lies beyond the end.
        detail: String,
    },
    /// The library's SHA-256 is not the one the configuration pins for it (`sha256 = …` in
    /// its section): refused before it is mapped or any of its code runs.
    #[error(
        "plugin {plugin}: {} hashes to {found}, but the configuration pins {expected}; install \
         the pinned build, or pin this one (`sf plugins check` prints its digest)",
        library.display()
    )]
    PinMismatch {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library, by its canonical path.
        library: PathBuf,
        /// The pinned digest.
        expected: crate::canonical::Digest,
        /// The library's digest (of the bytes read, which are the bytes that would be mapped).
        found: crate::canonical::Digest,
    },
    /// The dynamic loader refused the library.
    #[error(
        "plugin {plugin}: {} could not be loaded: {detail}; rebuild it for this platform",
        library.display()
    )]
    LoadFailed {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library, by its canonical path.
        library: PathBuf,
        /// What the dynamic loader reported.
        detail: String,
    },
    /// The library does not export the entry symbol.
    #[error(
        "plugin {plugin}: {} exports no {ENTRY_SYMBOL} ({detail}): it is not an sf plugin; \
         build it with sf_sdk::export_plugin!",
        library.display()
    )]
    MissingEntry {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library file, as given to the loader.
        library: PathBuf,
        /// What the dynamic loader reported.
        detail: String,
    },
    /// The entry table does not start with the magic number.
    #[error(
        "plugin {plugin}: {} returned a table with the magic number {found:#018x}, not \
         {MAGIC:#018x}: it is not an sf plugin table; rebuild the plugin with sf-sdk",
        library.display()
    )]
    WrongMagic {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library file, as given to the loader.
        library: PathBuf,
        /// The magic number the table starts with.
        found: u64,
    },
    /// The plugin speaks another ABI major version.
    #[error(
        "plugin {plugin}: {} was built for ABI {found} and this sf speaks ABI \
         {ABI_MAJOR}.{ABI_MINOR}; the major versions must match: rebuild the plugin against an \
         sf-sdk of ABI {ABI_MAJOR}, or use an sf that speaks its ABI",
        library.display()
    )]
    AbiMismatch {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library file, as given to the loader.
        library: PathBuf,
        /// `major` or `major.minor`, as far as it is known (the manifest file names only the
        /// major).
        found: String,
    },
    /// The entry table is not usable (null table, null function, bad strings).
    #[error(
        "plugin {plugin}: {} returned a malformed entry table: {detail}; rebuild the plugin \
         with sf-sdk",
        library.display()
    )]
    MalformedTable {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library file, as given to the loader.
        library: PathBuf,
        /// What is wrong with the table.
        detail: String,
    },
    /// The manifest file beside the library is not the manifest compiled into it.
    #[error(
        "plugin {plugin}: the manifest file {} is not the manifest compiled into {} ({detail}); \
         the two must be byte-identical: reinstall the library together with its manifest",
        manifest.display(),
        library.display()
    )]
    ManifestMismatch {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The library file, as given to the loader.
        library: PathBuf,
        /// The manifest file beside the library.
        manifest: PathBuf,
        /// How the two differ.
        detail: String,
    },
    /// The plugin does not provide the contract asked for, or this sf does not know it.
    #[error(
        "plugin {plugin} does not provide the contract {contract} ({detail}); it provides: {}",
        list(provided)
    )]
    UnknownContract {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The contract asked for.
        contract: String,
        /// The contracts the plugin's manifest lists.
        provided: Vec<String>,
        /// Whether this sf does not know the contract or the manifest does not list it.
        detail: String,
    },
    /// The plugin does not serve the tag asked for.
    #[error(
        "plugin {plugin} does not provide the {contract} type {tag:?}; it provides: {}",
        list(provided)
    )]
    UnknownTag {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The contract asked for.
        contract: String,
        /// The `type` tag asked for.
        tag: String,
        /// The tags the manifest lists under the contract.
        provided: Vec<String>,
    },
    /// The plugin panicked; the panic was caught inside the plugin and sf kept running.
    #[error(
        "plugin {plugin} panicked in {during}: {message}; the plugin is faulty: report it to \
         its author, or configure another backend"
    )]
    Panicked {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The call that failed: a method name, or `instantiate(contract, tag)`.
        during: String,
        /// The panic message the plugin reported.
        message: String,
    },
    /// The plugin answered with bytes that are not a well-formed reply.
    #[error(
        "plugin {plugin} answered {during} with a malformed message: {detail}; the plugin is \
         faulty or was built against an incompatible sf-sdk: rebuild it, or configure another \
         backend"
    )]
    MalformedMessage {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The call that failed: a method name, or `instantiate(contract, tag)`.
        during: String,
        /// What is wrong with the reply.
        detail: String,
    },
    /// The plugin does not know a method this sf called (an older minor version).
    #[error(
        "plugin {plugin} does not support {method} ({detail}); rebuild it against a newer sf-sdk"
    )]
    UnsupportedMethod {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The method called.
        method: String,
        /// The plugin's message.
        detail: String,
    },
    /// The plugin refused to serve the call (bad configuration, a backend that could not
    /// start, a request it could not read).
    #[error("plugin {plugin} refused {during} ({code}): {message}")]
    Refused {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The call that failed: a method name, or `instantiate(contract, tag)`.
        during: String,
        /// The plugin's error code.
        code: String,
        /// The plugin's message.
        message: String,
    },
    /// The plugin could not make the backend and said why with the contract's own error (ABI
    /// 1.14): its code is kept (`unavailable`: a server that cannot be reached, retry later;
    /// `corrupt`: stored data or schema failed verification, stop).
    #[error("plugin {plugin} refused {during} ({code}): {message}")]
    Backend {
        /// The plugin's name, from its manifest.
        plugin: String,
        /// The call that failed: `instantiate(contract, tag)`.
        during: String,
        /// The contract error's code.
        code: &'static str,
        /// The contract error's display text.
        message: String,
    },
    /// A plugin directory cannot be used.
    #[error("plugin path: {}: {detail}", path.display())]
    PluginPath {
        /// The directory, or the plugin path entry, at fault.
        path: PathBuf,
        /// What is wrong with it and how to fix it.
        detail: String,
    },
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "nothing".to_owned()
    } else {
        items.join(", ")
    }
}

impl PluginError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::MissingManifest { .. } => "missing-manifest",
            Self::InvalidManifest { .. } => "invalid-manifest",
            Self::MissingLibrary { .. } => "missing-library",
            Self::Insecure { .. } => "insecure-plugin",
            Self::TruncatedLibrary { .. } => "truncated-library",
            Self::PinMismatch { .. } => "pin-mismatch",
            Self::LoadFailed { .. } => "load-failed",
            Self::MissingEntry { .. } => "missing-entry",
            Self::WrongMagic { .. } => "wrong-magic",
            Self::AbiMismatch { .. } => "abi-mismatch",
            Self::MalformedTable { .. } => "malformed-table",
            Self::ManifestMismatch { .. } => "manifest-mismatch",
            Self::UnknownContract { .. } => "unknown-contract",
            Self::UnknownTag { .. } => "unknown-tag",
            Self::Panicked { .. } => "plugin-panicked",
            Self::MalformedMessage { .. } => "malformed-message",
            Self::UnsupportedMethod { .. } => "unsupported-method",
            Self::Refused { .. } => "plugin-refused",
            Self::Backend { code, .. } => code,
            Self::PluginPath { .. } => "plugin-path",
        }
    }
}
