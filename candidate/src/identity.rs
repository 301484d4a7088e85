//! The repository's identity record, its ownership marker, and the fixed encodings and limits
//! that every stored object of the repository follows.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

use crate::canonical::literal::WithLiterals;
use crate::canonical::{self, FieldErrorKind, Value};
use crate::contracts::tree_path::TreePolicy;
use crate::git_object::ObjectId;

use super::error::RepositoryError;
use crate::contracts::grammar::{ID_RULE, is_valid_id};

/// The protocol string of [`RepositoryIdentity`] and of the ownership marker, for a
/// repository that records its own settings (limits, case policy).
pub const REPOSITORY_PROTOCOL: &str = "sf-repository/2";
/// The protocol string of identities made before repositories had settings: still opened,
/// with the default settings.
pub const REPOSITORY_PROTOCOL_V1: &str = "sf-repository/1";
/// The protocol string of the Candidates sf seals: Git's whole tree model, a proposal with
/// its own message and author, and a manifest that names the base's and the Candidate's
/// trees by their `sf-tree/1` digests (a digest per directory).
pub const CANDIDATE_PROTOCOL: &str = "sf-candidate/4";
/// The protocol string of version 3 Candidates (still read): as version 4, but the manifest
/// names the tree by one snapshot digest over every entry's bytes.
pub const CANDIDATE_PROTOCOL_V3: &str = "sf-candidate/3";
/// The protocol string of Candidates sealed for a frozen Slice over regular text files, their
/// manifests listing every file: still exported, collected, judged and integrated.
pub const CANDIDATE_PROTOCOL_V2: &str = "sf-candidate/2";
/// The protocol string of the Candidates sealed before a Slice had a digest: still exported
/// and snapshotted, never collected, judged or integrated.
pub const CANDIDATE_PROTOCOL_V1: &str = "sf-candidate/1";
/// The protocol string of seal commit messages.
pub const SEAL_PROTOCOL: &str = "sf-seal/1";
/// The author and committer of every commit sf writes. A fixed time makes equal inputs give
/// equal commits, which is what lets identical seals converge.
pub const IDENT: &str = "sf <sf@localhost.invalid> 0 +0000";
/// sf's name and email: the committer of every Candidate commit, dated as its author.
pub const SF_NAME_EMAIL: &str = "sf <sf@localhost.invalid>";
/// The largest Candidate commit sf reads, in bytes: a proposal's title and body (64 KiB at
/// most), its author and the trailers.
pub const MAX_CANDIDATE_COMMIT_BYTES: u64 = 72 * 1024;
/// The largest commit body sf reads, in bytes; also the budget of a seal commit's tree.
pub const MAX_COMMIT_BYTES: u64 = 4096;
/// The byte budget of one tree level when reading.
pub const MAX_TREE_LEVEL_BYTES: u64 = 64 * 1024 * 1024;
/// The default bound on each store operation.
pub const DEFAULT_GIT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest repository path accepted, in bytes.
pub const MAX_REPOSITORY_PATH_BYTES: usize = 1024;
/// The longest target ref accepted, in bytes.
pub const MAX_TARGET_REF_BYTES: usize = 128;

/// The bounds of a repository's source trees; see docs/repository.md. (A proposal's bounds
/// are its Slice's: [`ProposalBounds`](super::ProposalBounds).)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepositoryLimits {
    /// Leaves (files and symbolic links) in one source tree.
    pub max_files: usize,
    /// Bytes of one file.
    pub max_file_bytes: usize,
    /// Bytes of all blobs of one source tree together.
    pub max_source_bytes: usize,
    /// Bytes of one path.
    pub max_path_bytes: usize,
}

/// The limits every repository enforces before any write: room for real repositories (a
/// hundred thousand files, 2 GiB of blobs, 100 MiB a file).
pub const REPOSITORY_LIMITS: RepositoryLimits = RepositoryLimits {
    max_files: 100_000,
    max_file_bytes: 100 * 1024 * 1024,
    max_source_bytes: 2 * 1024 * 1024 * 1024,
    max_path_bytes: crate::contracts::tree_path::MAX_PATH_BYTES,
};

/// Who a repository is: persist it and hand it back to [`open_repository`](super::open_repository).
/// Serialised (as the ownership marker, too) with the camelCase field names listed in
/// [`to_value`](Self::to_value); reading checks every field's rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields, rename_all = "camelCase")]
pub struct RepositoryIdentity {
    /// The Product the repository holds; follows [`ID_RULE`].
    #[serde(deserialize_with = "product_id")]
    pub product_id: String,
    /// The canonical absolute path of the root.
    #[serde(deserialize_with = "root_path")]
    pub path: String,
    /// The device number of the root directory, recorded at creation; the store refuses to
    /// open a root whose device differs.
    pub dev: u64,
    /// The inode number of the root directory, recorded at creation; the store refuses to open
    /// a root whose inode differs (a moved or replaced root).
    pub ino: u64,
    /// 32 lowercase hex characters of randomness drawn at creation.
    #[serde(deserialize_with = "nonce")]
    pub nonce: String,
    /// The branch Candidates are based on and integrated into; checked by
    /// [`check_target_ref`].
    #[serde(deserialize_with = "target_ref")]
    pub target_ref: String,
    /// The initial commit: sf's pinned commit, or the commit imported from the team's
    /// repository.
    pub initial: ObjectId,
    /// What this repository holds beyond every tree's rules; `None` in an
    /// `sf-repository/1` identity, which has the defaults.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "canonical::optional"
    )]
    pub settings: Option<RepositorySettings>,
}

/// The settings a repository records at creation: how large its trees may be, and whether
/// paths that differ only in case are held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RepositorySettings {
    /// Leaves (files and links) in one tree.
    #[serde(deserialize_with = "canonical::positive")]
    pub max_files: u64,
    /// Bytes of one file.
    #[serde(deserialize_with = "canonical::positive")]
    pub max_file_bytes: u64,
    /// Bytes of all blobs of one tree.
    #[serde(deserialize_with = "canonical::positive")]
    pub max_tree_bytes: u64,
    /// Paths that differ only in case are held when neither is a symbolic link.
    pub allow_case_collisions: bool,
}

impl Default for RepositorySettings {
    fn default() -> Self {
        Self {
            max_files: REPOSITORY_LIMITS.max_files as u64,
            max_file_bytes: REPOSITORY_LIMITS.max_file_bytes as u64,
            max_tree_bytes: REPOSITORY_LIMITS.max_source_bytes as u64,
            allow_case_collisions: false,
        }
    }
}

impl RepositorySettings {
    /// The limits of this repository's trees.
    pub fn limits(&self) -> RepositoryLimits {
        let clamp = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        RepositoryLimits {
            max_files: clamp(self.max_files),
            max_file_bytes: clamp(self.max_file_bytes),
            max_source_bytes: clamp(self.max_tree_bytes),
            ..REPOSITORY_LIMITS
        }
    }

    /// The tree policy of this repository.
    pub fn policy(&self) -> TreePolicy {
        TreePolicy {
            allow_case_collisions: self.allow_case_collisions,
        }
    }
}

const V1_LITERALS: &[(&str, &str)] = &[
    ("protocol", REPOSITORY_PROTOCOL_V1),
    ("objectFormat", "sha1"),
];
const V2_LITERALS: &[(&str, &str)] = &[("protocol", REPOSITORY_PROTOCOL), ("objectFormat", "sha1")];

/// Written as `sf-repository/2` when it records settings, as `sf-repository/1` (the exact
/// bytes of an identity made before settings) when it does not.
impl Serialize for RepositoryIdentity {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let literals = if self.settings.is_some() {
            V2_LITERALS
        } else {
            V1_LITERALS
        };
        RepositoryIdentity::serialize(self, WithLiterals::new(serializer, literals))
    }
}

/// One version's shape: its literal fields, and whether it holds settings.
struct Versioned<const V2: bool>(RepositoryIdentity);

impl<'de, const V2: bool> Deserialize<'de> for Versioned<V2> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let literals = if V2 { V2_LITERALS } else { V1_LITERALS };
        let identity = RepositoryIdentity::deserialize(WithLiterals::new(deserializer, literals))?;
        match (V2, identity.settings.is_some()) {
            (true, false) => Err(serde::de::Error::custom(
                "settings: is required in an sf-repository/2 identity",
            )),
            (false, true) => Err(serde::de::Error::custom(
                "settings: is not a field of an sf-repository/1 identity",
            )),
            _ => Ok(Self(identity)),
        }
    }
}

/// Read by its `protocol`: version 2 with its settings, or version 1 without.
impl<'de> Deserialize<'de> for RepositoryIdentity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let protocol = match &value {
            Value::Object(map) => map.get("protocol").and_then(|protocol| match protocol {
                Value::String(text) => Some(text.as_str()),
                _ => None,
            }),
            _ => None,
        };
        let read = match protocol {
            Some(REPOSITORY_PROTOCOL) => {
                canonical::from_value::<Versioned<true>>(&value, "identity").map(|v| v.0)
            }
            Some(REPOSITORY_PROTOCOL_V1) => {
                canonical::from_value::<Versioned<false>>(&value, "identity").map(|v| v.0)
            }
            _ => {
                return Err(serde::de::Error::custom(format!(
                    "protocol: must be {REPOSITORY_PROTOCOL:?} or {REPOSITORY_PROTOCOL_V1:?}"
                )));
            }
        };
        read.map_err(|error| serde::de::Error::custom(format!("{}: {}", error.field, error.rule)))
    }
}

fn product_id<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::valid_if(deserializer, |id: &String| is_valid_id(id), ID_RULE)
}

fn root_path<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::checked(deserializer, |path: &String| check_root_path(path))
}

fn nonce<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let lowercase_hex = |nonce: &String| {
        nonce.len() == 32
            && nonce
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    canonical::valid_if(
        deserializer,
        lowercase_hex,
        "must be 32 lowercase hex characters",
    )
}

fn target_ref<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    canonical::checked(deserializer, |name: &String| check_target_ref(name))
}

impl RepositoryIdentity {
    /// The repository's settings: those it records, or the defaults for an
    /// `sf-repository/1` identity.
    pub fn settings(&self) -> RepositorySettings {
        self.settings.unwrap_or_default()
    }

    /// The record as a JSON value (`protocol`, `productId`, `path`, `dev`, `ino`, `nonce`,
    /// `objectFormat`, `targetRef`, `initial`).
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("an identity holds only strings and integers")
    }

    /// The canonical JSON bytes of the record: what the ownership marker holds.
    pub fn to_canonical_bytes(&self) -> Vec<u8> {
        // Every field is bounded (paths 1 KiB, ids 128 bytes), far below the 1 MiB bound, and
        // dev/ino were checked to be safe integers when the identity was made or parsed.
        canonical::to_canonical_bytes(self).unwrap_or_default()
    }
}

/// Parses a persisted identity exactly: canonical or not, but every field declared, typed and
/// valid, and nothing else.
pub fn parse_repository_identity(bytes: &[u8]) -> Result<RepositoryIdentity, RepositoryError> {
    canonical::from_slice(bytes, "identity").map_err(|error| match error.kind {
        FieldErrorKind::Json(_) => RepositoryError::invalid("repository identity", error.rule),
        _ => RepositoryError::invalid(error.field, error.rule),
    })
}

/// Checks a target ref: `^refs/heads/[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$`,
/// at most 128 bytes, no `..`, no segment ending in `.` or `.lock`.
pub fn check_target_ref(name: &str) -> Result<(), &'static str> {
    const RULE: &str = "a target ref matches ^refs/heads/[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$, \
                        is at most 128 bytes, contains no .. and has no segment ending in . or .lock";
    if name.len() > MAX_TARGET_REF_BYTES || name.contains("..") {
        return Err(RULE);
    }
    let Some(rest) = name.strip_prefix("refs/heads/") else {
        return Err(RULE);
    };
    for segment in rest.split('/') {
        let bytes = segment.as_bytes();
        let first_ok = bytes
            .first()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
        let rest_ok = bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !first_ok || !rest_ok || segment.ends_with('.') || segment.ends_with(".lock") {
            return Err(RULE);
        }
    }
    Ok(())
}

/// Checks the textual shape of a root path: absolute, normalised, at most 1024 bytes. Whether
/// it is canonical on disk is the store's check.
pub fn check_root_path(path: &str) -> Result<(), &'static str> {
    const RULE: &str = "a repository path is absolute and normalised (no empty, . or .. segment, no trailing /), \
                        at most 1024 bytes, without NUL";
    if path.len() > MAX_REPOSITORY_PATH_BYTES || path.contains('\0') || path == "/" {
        return Err(RULE);
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(RULE);
    };
    if rest
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == "..")
    {
        return Err(RULE);
    }
    Ok(())
}

/// The message of a repository's initial commit. The nonce makes every repository's initial
/// commit, and so every Candidate built on it, distinct.
pub fn initial_message(product_id: &str, nonce: &str) -> String {
    // The initial commit's form did not change with the identity's settings: every pinned
    // initial commit, old or new, carries the first protocol string.
    format!("{REPOSITORY_PROTOCOL_V1} initial\n\nproduct: {product_id}\nnonce: {nonce}\n")
}

/// The message of a seal commit.
pub fn seal_message() -> String {
    format!("{SEAL_PROTOCOL}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_refs() {
        for good in ["refs/heads/main", "refs/heads/a/b-c_d.e", "refs/heads/_x"] {
            assert_eq!(check_target_ref(good), Ok(()), "{good}");
        }
        for bad in [
            "refs/heads/",
            "refs/heads/.x",
            "refs/heads/a..b",
            "refs/heads/a.",
            "refs/heads/a.lock",
            "refs/heads/a//b",
            "refs/tags/v1",
            "HEAD",
            "refs/heads/a b",
        ] {
            assert!(check_target_ref(bad).is_err(), "{bad}");
        }
        let long = format!("refs/heads/{}", "a".repeat(117));
        assert_eq!(long.len(), 128);
        assert_eq!(check_target_ref(&long), Ok(()));
        assert!(check_target_ref(&format!("{long}a")).is_err());
    }

    #[test]
    fn root_paths() {
        assert!(check_root_path("/a/b").is_ok());
        for bad in ["a/b", "/", "/a/", "/a//b", "/a/./b", "/a/../b", ""] {
            assert!(check_root_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn identity_round_trip() {
        let identity = RepositoryIdentity {
            product_id: "p".into(),
            path: "/r".into(),
            dev: 1,
            ino: 2,
            nonce: "0".repeat(32),
            target_ref: "refs/heads/main".into(),
            initial: ObjectId::from_bytes([7; 20]),
            settings: None,
        };
        let bytes = identity.to_canonical_bytes();
        assert!(String::from_utf8_lossy(&bytes).contains("sf-repository/1"));
        let with_settings = RepositoryIdentity {
            settings: Some(RepositorySettings {
                max_files: 3,
                allow_case_collisions: true,
                ..RepositorySettings::default()
            }),
            ..identity.clone()
        };
        let v2 = with_settings.to_canonical_bytes();
        assert!(
            String::from_utf8_lossy(&v2).contains("sf-repository/2"),
            "{}",
            String::from_utf8_lossy(&v2)
        );
        assert_eq!(parse_repository_identity(&v2).unwrap(), with_settings);
        // A version 1 identity never holds settings, and version 2 always does.
        let forged = String::from_utf8_lossy(&v2).replace("sf-repository/2", "sf-repository/1");
        assert!(parse_repository_identity(forged.as_bytes()).is_err());
        let bare = String::from_utf8_lossy(&bytes).replace("sf-repository/1", "sf-repository/2");
        assert!(parse_repository_identity(bare.as_bytes()).is_err());
        assert_eq!(parse_repository_identity(&bytes).unwrap(), identity);
        let extra = String::from_utf8(bytes)
            .unwrap()
            .replacen('{', "{\"extra\":1,", 1);
        assert_eq!(
            parse_repository_identity(extra.as_bytes())
                .unwrap_err()
                .code(),
            "invalid-input"
        );
    }
}
