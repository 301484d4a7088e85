//! Plugin manifests: what a plugin is and provides, as a small JSON record shipped twice: as
//! a file beside the library (read before the library is loaded) and compiled into the
//! library (returned by its entry table). The two must be byte-identical.
//!
//! ```json
//! {"schema":"sf-plugin/1","name":"git-cli","version":"0.1.0","abi":1,
//!  "contracts":{"object-store":["git-cli"]}}
//! ```
//!
//! Names, contracts and tags are lowercase words: `[a-z0-9][a-z0-9-]*`, at most 64 bytes.
//! The file of library `libfoo.so` is `libfoo.sf-plugin.json` in the same directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer};

use crate::contracts::canonical;

/// The value of a manifest's `schema` field.
pub const MANIFEST_SCHEMA: &str = "sf-plugin/1";
/// What a manifest file's name ends with.
pub const MANIFEST_SUFFIX: &str = ".sf-plugin.json";
/// The largest manifest accepted, in bytes.
pub const MAX_MANIFEST_BYTES: usize = 64 * 1024;
/// The longest name, contract or tag.
pub const MAX_WORD_BYTES: usize = 64;
/// The rule names, contracts and tags follow.
pub const WORD_RULE: &str = "a lowercase word: [a-z0-9][a-z0-9-]*, at most 64 bytes";

/// A parsed, checked manifest.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct PluginManifest {
    /// The plugin's name.
    #[serde(deserialize_with = "name")]
    pub name: String,
    /// The plugin's own version (free text, at most 64 bytes).
    #[serde(deserialize_with = "version")]
    pub version: String,
    /// The ABI major version the plugin was built for.
    pub abi: u32,
    /// Each contract the plugin provides, with the tags (`type` values) it serves under it.
    #[serde(deserialize_with = "contracts")]
    pub contracts: BTreeMap<String, Vec<String>>,
}
canonical::literal_fields!(deserialize PluginManifest { "schema": MANIFEST_SCHEMA });

fn name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::checked(deserializer, |name: &String| check_word(name))
}

fn version<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::checked(deserializer, |version: &String| {
        if version.is_empty()
            || version.len() > MAX_WORD_BYTES
            || version.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            Err("1 to 64 bytes without spaces or control characters")
        } else {
            Ok(())
        }
    })
}

/// At least one contract, each a word with at least one tag, every tag a word listed once.
fn contracts<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, Vec<String>>, D::Error> {
    canonical::checked(deserializer, |listed: &BTreeMap<String, Vec<String>>| {
        if listed.is_empty() {
            return Err("lists no contract".to_owned());
        }
        for (contract, tags) in listed {
            check_word(contract).map_err(|rule| format!("contract {contract:?}: {rule}"))?;
            if tags.is_empty() {
                return Err(format!("{contract} lists no tag"));
            }
            for (at, tag) in tags.iter().enumerate() {
                check_word(tag).map_err(|rule| format!("tag {tag:?}: {rule}"))?;
                if tags[..at].contains(tag) {
                    return Err(format!("{contract} lists {tag:?} twice"));
                }
            }
        }
        Ok(())
    })
}

impl PluginManifest {
    /// Parses a manifest strictly: UTF-8 JSON without duplicate keys, exactly the declared
    /// fields, every word in the grammar, at least one contract, each with at least one tag.
    /// The ABI field is parsed, not compared: the loader does that, to name the mismatch.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(format!("a manifest is at most {MAX_MANIFEST_BYTES} bytes"));
        }
        canonical::from_slice(bytes, "").map_err(|error| error.to_string())
    }

    /// The tags the plugin serves under `contract` (empty if it does not provide it).
    pub fn tags(&self, contract: &str) -> &[String] {
        self.contracts.get(contract).map_or(&[], Vec::as_slice)
    }

    /// Whether the plugin serves `tag` under `contract`.
    pub fn provides(&self, contract: &str, tag: &str) -> bool {
        self.tags(contract).iter().any(|listed| listed == tag)
    }
}

/// Checks a name, contract or tag against [`WORD_RULE`].
pub fn check_word(word: &str) -> Result<(), &'static str> {
    let bytes = word.as_bytes();
    let first_ok = bytes
        .first()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = bytes
        .iter()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    if !first_ok || !rest_ok || bytes.len() > MAX_WORD_BYTES {
        return Err(WORD_RULE);
    }
    Ok(())
}

/// The manifest file of `library`: its file name without the platform's library suffix,
/// followed by [`MANIFEST_SUFFIX`], in the same directory.
pub fn manifest_path(library: &Path) -> PathBuf {
    let name = library
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = name
        .strip_suffix(std::env::consts::DLL_SUFFIX)
        .unwrap_or(&name);
    library.with_file_name(format!("{stem}{MANIFEST_SUFFIX}"))
}

/// The library a manifest file describes, or `None` if `manifest` is not a manifest file name.
pub fn library_path(manifest: &Path) -> Option<PathBuf> {
    let name = manifest.file_name()?.to_str()?;
    let stem = name.strip_suffix(MANIFEST_SUFFIX)?;
    if stem.is_empty() {
        return None;
    }
    Some(manifest.with_file_name(format!("{stem}{}", std::env::consts::DLL_SUFFIX)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"schema":"sf-plugin/1","name":"git-cli","version":"0.1.0","abi":1,"contracts":{"object-store":["git-cli"]}}"#;

    #[test]
    fn parses_a_good_manifest() {
        let manifest = PluginManifest::parse(GOOD.as_bytes()).unwrap();
        assert_eq!(manifest.name, "git-cli");
        assert_eq!(manifest.abi, 1);
        assert!(manifest.provides("object-store", "git-cli"));
        assert!(!manifest.provides("object-store", "other"));
        assert!(!manifest.provides("executor", "git-cli"));
    }

    #[test]
    fn refuses_bad_manifests() {
        for bad in [
            GOOD.replace("sf-plugin/1", "sf-plugin/2"),
            GOOD.replace("\"git-cli\",", "\"Git\","),
            GOOD.replace("[\"git-cli\"]", "[]"),
            GOOD.replace("[\"git-cli\"]", "[\"a\",\"a\"]"),
            GOOD.replace("{\"object-store\":[\"git-cli\"]}", "{}"),
            GOOD.replace("\"abi\":1", "\"abi\":\"1\""),
            GOOD.replace("\"abi\":1", "\"abi\":1,\"extra\":0"),
            GOOD.replace("\"abi\":1", "\"abi\":1,\"abi\":1"),
            GOOD.replace("0.1.0", "0.1 0"),
            "[]".to_owned(),
        ] {
            assert!(PluginManifest::parse(bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn manifest_and_library_paths_pair_up() {
        let library = Path::new("/p/libsf_git_cli.so");
        let manifest = manifest_path(library);
        assert_eq!(manifest, Path::new("/p/libsf_git_cli.sf-plugin.json"));
        assert_eq!(library_path(&manifest).unwrap(), library);
        assert_eq!(library_path(Path::new("/p/x.json")), None);
        assert_eq!(library_path(Path::new("/p/.sf-plugin.json")), None);
    }
}
