//! The Candidate manifest (`sf-candidate/2`) and the frozen inputs a Candidate is sealed for,
//! with the Candidate commit message derived from them.
//!
//! A version 2 Candidate is sealed for one frozen Slice: its manifest and message name the
//! Slice's digest, and the manifest its protected-path patterns, so that no Candidate can
//! claim a scope, a base or records its Slice does not have. Version 1 Candidates
//! (`sf-candidate/1`, without the binding) are still read and exported; nothing collects,
//! judges or integrates them.

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, FieldError, FieldErrorKind, Value};
use crate::contracts::tree_path;
use crate::git_object::ObjectId;
use crate::path_glob::PathGlob;
use crate::snapshot::SnapshotFile;

use super::error::RepositoryError;
use super::identity::{CANDIDATE_PROTOCOL, CANDIDATE_PROTOCOL_V1, RepositoryIdentity};
use super::source::{FILE_MODE, SourceFile};
use crate::contracts::grammar::{ID_RULE, is_valid_id};

/// The most scope entries frozen inputs may hold.
pub const MAX_SCOPE_ENTRIES: usize = 64;
/// The most protected-path patterns frozen inputs may hold.
pub const MAX_PROTECTED_PATTERNS: usize = 1024;

/// What binds a Candidate to its frozen Slice: the Slice record's digest and the patterns of
/// the paths no proposal may create, change or delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceBinding {
    /// The `sha256:` of the Slice record's canonical bytes.
    pub digest: Digest,
    /// Protected-path patterns ([`crate::path_glob`]), as the Slice lists them.
    pub protected: Vec<String>,
}

impl SliceBinding {
    /// Checks the patterns ([`parse_protected`]).
    pub fn validate(&self) -> Result<Vec<PathGlob>, RepositoryError> {
        parse_protected(&self.protected)
    }
}

/// Parses protected-path patterns: at most [`MAX_PROTECTED_PATTERNS`], each valid, none
/// twice.
pub fn parse_protected(patterns: &[String]) -> Result<Vec<PathGlob>, RepositoryError> {
    if patterns.len() > MAX_PROTECTED_PATTERNS {
        return Err(RepositoryError::invalid(
            "frozen.protected",
            "holds at most 1024 patterns",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut globs = Vec::with_capacity(patterns.len());
    for (at, pattern) in patterns.iter().enumerate() {
        let glob = PathGlob::parse(pattern).map_err(|error| {
            RepositoryError::invalid(format!("frozen.protected[{at}]"), error.to_string())
        })?;
        if !seen.insert(pattern.as_str()) {
            return Err(RepositoryError::invalid(
                format!("frozen.protected[{at}] ({pattern})"),
                "patterns are distinct",
            ));
        }
        globs.push(glob);
    }
    Ok(globs)
}

/// Which Slice, at which revision, a Candidate belongs to: `{id, revision}` in records.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slice {
    /// The Slice's id; follows [`ID_RULE`].
    pub id: String,
    /// Which revision of the Slice (a positive safe integer); a new revision is a new Slice
    /// record with its own digest.
    #[serde(deserialize_with = "canonical::positive")]
    pub revision: u64,
}

/// What a Candidate is sealed for: its base B, its Slice, the paths it may touch, the
/// digests of its acceptance, recipe and environment records, and (from `sf-candidate/2` on)
/// the Slice's digest and protected paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrozenInputs {
    /// The base commit B the proposal is applied to; a factory commit of the repository.
    pub base: ObjectId,
    /// The Slice the Candidate belongs to.
    pub slice: Slice,
    /// The paths a proposal may touch: 1 to 64 distinct paths, each a file or a directory
    /// and everything below it ([`in_scope`](super::in_scope)).
    pub scope: Vec<String>,
    /// The `sha256:` of the canonical acceptance record the Candidate is judged by.
    pub acceptance: Digest,
    /// The `sha256:` of the canonical recipe record its checks are run by.
    pub recipe: Digest,
    /// The `sha256:` of the canonical environment record its checks must run in.
    pub environment: Digest,
    /// `None` only for a version 1 Candidate read back; `seal` requires it.
    pub binding: Option<SliceBinding>,
}

impl FrozenInputs {
    /// The protected-path patterns, parsed (none for a version 1 Candidate).
    pub fn protected(&self) -> Result<Vec<PathGlob>, RepositoryError> {
        self.binding
            .as_ref()
            .map_or(Ok(Vec::new()), SliceBinding::validate)
    }

    /// Checks the rules the types do not carry: the slice id grammar, a positive safe
    /// revision, 1 to 64 distinct valid scope paths, and valid protected patterns.
    pub fn validate(&self) -> Result<(), RepositoryError> {
        self.protected()?;
        if !is_valid_id(&self.slice.id) {
            return Err(RepositoryError::invalid("frozen.slice.id", ID_RULE));
        }
        if self.slice.revision == 0 || self.slice.revision > canonical::MAX_SAFE_INTEGER as u64 {
            return Err(RepositoryError::invalid(
                "frozen.slice.revision",
                "must be a positive safe integer",
            ));
        }
        if self.scope.is_empty() || self.scope.len() > MAX_SCOPE_ENTRIES {
            return Err(RepositoryError::invalid(
                "frozen.scope",
                "holds 1 to 64 paths",
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (at, path) in self.scope.iter().enumerate() {
            tree_path::check_path(path, None).map_err(|rule| {
                RepositoryError::invalid(format!("frozen.scope[{at}] ({path})"), rule.describe())
            })?;
            if !seen.insert(path.to_ascii_lowercase()) {
                return Err(RepositoryError::invalid(
                    format!("frozen.scope[{at}] ({path})"),
                    "scope paths are distinct (compared ignoring case)",
                ));
            }
        }
        Ok(())
    }
}

/// The message of Candidate commit M: derived from the frozen inputs and the proposal
/// digest, never from the manifest (which names M), so there is no cycle. A version 2
/// message names the Slice's digest on the line after the Slice.
pub fn candidate_message(product_id: &str, frozen: &FrozenInputs, proposal: &Digest) -> String {
    let (protocol, slice_digest) = match &frozen.binding {
        Some(binding) => (
            CANDIDATE_PROTOCOL,
            format!("slice-digest: {}\n", binding.digest),
        ),
        None => (CANDIDATE_PROTOCOL_V1, String::new()),
    };
    format!(
        "{protocol}\n\nproduct: {product_id}\nslice: {} {}\n{slice_digest}acceptance: {}\nrecipe: {}\nenvironment: {}\nproposal: {proposal}\n",
        frozen.slice.id,
        frozen.slice.revision,
        frozen.acceptance,
        frozen.recipe,
        frozen.environment
    )
}

/// Whether `message` is a Candidate commit message (of either version) naming `product_id`,
/// in canonical form.
pub(crate) fn is_candidate_message(message: &str, product_id: &str) -> bool {
    let (rest, v2) = if let Some(rest) =
        message.strip_prefix(&format!("{CANDIDATE_PROTOCOL}\n\nproduct: {product_id}\n"))
    {
        (rest, true)
    } else if let Some(rest) = message.strip_prefix(&format!(
        "{CANDIDATE_PROTOCOL_V1}\n\nproduct: {product_id}\n"
    )) {
        (rest, false)
    } else {
        return false;
    };
    let mut lines: Vec<&str> = rest.split_terminator('\n').collect();
    if v2 {
        if lines.len() != 6
            || lines[1]
                .strip_prefix("slice-digest: ")
                .and_then(Digest::parse)
                .is_none()
        {
            return false;
        }
        lines.remove(1);
    }
    if lines.len() != 5 || !message.ends_with('\n') {
        return false;
    }
    let Some((id, revision)) = lines[0]
        .strip_prefix("slice: ")
        .and_then(|slice| slice.split_once(' '))
    else {
        return false;
    };
    let revision_ok = revision.parse::<u64>().is_ok_and(|r| {
        r >= 1 && r <= canonical::MAX_SAFE_INTEGER as u64 && r.to_string() == revision
    });
    let digests_ok = ["acceptance: ", "recipe: ", "environment: ", "proposal: "]
        .iter()
        .zip(&lines[1..])
        .all(|(label, line)| line.strip_prefix(label).and_then(Digest::parse).is_some());
    is_valid_id(id) && revision_ok && digests_ok
}

/// One file of a Candidate's tree, as the manifest lists it (with `"mode": "100644"`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct ManifestFile {
    /// The file's path in the tree.
    pub path: String,
    /// The Git blob id (SHA-1) of its bytes.
    pub blob: ObjectId,
    /// The `sha256:` of its bytes.
    pub sha256: Digest,
    /// Its length in bytes.
    pub bytes: u64,
}
canonical::literal_fields!(ManifestFile { "mode": FILE_MODE });

impl ManifestFile {
    /// The listing of `files` as an `sf-candidate/1` or `/2` manifest records it. Those
    /// manifests list regular files only: a tree holding an executable or a symbolic link
    /// has no listing (the error names the first).
    pub fn listing(files: &[SourceFile]) -> Result<Vec<Self>, String> {
        files
            .iter()
            .map(|file| {
                if file.mode != crate::contracts::tree_path::EntryMode::Regular {
                    return Err(format!(
                        "{} is {}: an {CANDIDATE_PROTOCOL} manifest lists regular files only",
                        file.path,
                        file.mode.word()
                    ));
                }
                Ok(Self {
                    path: file.path.clone(),
                    blob: file.blob,
                    sha256: file.sha256.clone(),
                    bytes: file.bytes,
                })
            })
            .collect()
    }
}

/// One edit as the manifest records it: `next` is the new bytes' digest, or `None` for a
/// deletion; never the text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEdit {
    /// The path the edit touches.
    pub path: String,
    /// The `sha256:` of the file's bytes in the base; `None` when the edit created it.
    #[serde(deserialize_with = "canonical::nullable")]
    pub prior: Option<Digest>,
    /// The `sha256:` of the file's new bytes; `None` when the edit deleted it.
    #[serde(deserialize_with = "canonical::nullable")]
    pub next: Option<Digest>,
}

/// The record a Candidate's digest is taken over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateManifest {
    /// The repository the Candidate was sealed in.
    pub repository: RepositoryIdentity,
    /// The Slice it was sealed for.
    pub slice: Slice,
    /// The Slice binding of a version 2 manifest; `None` for version 1.
    pub binding: Option<SliceBinding>,
    /// The frozen scope the proposal was checked against.
    pub scope: Vec<String>,
    /// The `sha256:` of the frozen acceptance record.
    pub acceptance: Digest,
    /// The `sha256:` of the frozen recipe record.
    pub recipe: Digest,
    /// The `sha256:` of the frozen environment record.
    pub environment: Digest,
    /// The base commit B, M's sole parent.
    pub base_commit: ObjectId,
    /// B's tree.
    pub base_tree: ObjectId,
    /// The Candidate commit M.
    pub commit: ObjectId,
    /// M's tree: the base with the proposal applied.
    pub tree: ObjectId,
    /// Every file of M's tree, sorted by path.
    pub files: Vec<ManifestFile>,
    /// The `sha256:` of the proposal's canonical record (edits sorted by path).
    pub proposal_digest: Digest,
    /// The proposal's edits as digests, sorted by path.
    pub edits: Vec<ManifestEdit>,
}

impl CandidateManifest {
    /// The frozen inputs this Candidate was sealed for.
    pub fn frozen(&self) -> FrozenInputs {
        FrozenInputs {
            base: self.base_commit,
            slice: self.slice.clone(),
            scope: self.scope.clone(),
            acceptance: self.acceptance.clone(),
            recipe: self.recipe.clone(),
            environment: self.environment.clone(),
            binding: self.binding.clone(),
        }
    }

    /// The manifest's protocol string.
    pub fn protocol(&self) -> &'static str {
        if self.binding.is_some() {
            CANDIDATE_PROTOCOL
        } else {
            CANDIDATE_PROTOCOL_V1
        }
    }

    /// The manifest as a JSON value, in the written record's shape (`base: {commit, tree}`,
    /// `proposal: {digest, edits}`, and `slice.digest` and `protected` in version 2).
    pub fn to_value(&self) -> Value {
        canonical::to_value(&ManifestRecord::from(self))
            .expect("a manifest holds only strings and integers")
    }

    /// The canonical bytes of the manifest: what the Candidate's digest is taken over.
    pub fn to_bytes(&self) -> Result<Vec<u8>, canonical::JsonError> {
        canonical::to_canonical_bytes(&ManifestRecord::from(self))
    }

    /// Parses a manifest of either version strictly: its `protocol` first (so that a
    /// manifest of another version is named as such), then exactly that version's fields.
    /// Canonical form is the caller's check (it has the bytes).
    pub fn from_value(value: &Value) -> Result<Self, FieldError> {
        let protocol = canonical::variant_tag(
            value,
            "manifest",
            "protocol",
            &[CANDIDATE_PROTOCOL, CANDIDATE_PROTOCOL_V1],
        )?;
        let record: ManifestRecord = canonical::from_value(value, "manifest")?;
        // Version 2 is version 1 with these two fields; which may be here is the protocol's.
        let absent = |field: &str, kind| FieldError {
            rule: match kind {
                FieldErrorKind::Missing => format!("is required in a {protocol} manifest"),
                _ => format!("is not a field of a {protocol} manifest"),
            },
            kind,
            field: format!("manifest.{field}"),
        };
        let binding = match (
            protocol == CANDIDATE_PROTOCOL,
            record.slice.digest,
            record.protected,
        ) {
            (true, Some(digest), Some(protected)) => Some(SliceBinding { digest, protected }),
            (false, None, None) => None,
            (true, None, _) => return Err(absent("slice.digest", FieldErrorKind::Missing)),
            (true, _, None) => return Err(absent("protected", FieldErrorKind::Missing)),
            (false, Some(_), _) => return Err(absent("slice.digest", FieldErrorKind::Unknown)),
            (false, _, Some(_)) => return Err(absent("protected", FieldErrorKind::Unknown)),
        };
        Ok(Self {
            repository: record.repository,
            slice: Slice {
                id: record.slice.id,
                revision: record.slice.revision,
            },
            binding,
            scope: record.scope,
            acceptance: record.acceptance,
            recipe: record.recipe,
            environment: record.environment,
            base_commit: record.base.commit,
            base_tree: record.base.tree,
            commit: record.commit,
            tree: record.tree,
            files: record.files,
            proposal_digest: record.proposal.digest,
            edits: record.proposal.edits,
        })
    }
}

/// The manifest as it is written: version 2 adds `slice.digest` and `protected` to version 1.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestRecord {
    /// Checked before the record is read ([`CandidateManifest::from_value`]).
    protocol: String,
    repository: RepositoryIdentity,
    slice: SliceRecord,
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    protected: Option<Vec<String>>,
    scope: Vec<String>,
    acceptance: Digest,
    recipe: Digest,
    environment: Digest,
    base: BaseRecord,
    commit: ObjectId,
    tree: ObjectId,
    files: Vec<ManifestFile>,
    proposal: ProposalRecord,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SliceRecord {
    id: String,
    #[serde(deserialize_with = "canonical::positive")]
    revision: u64,
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    digest: Option<Digest>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct BaseRecord {
    commit: ObjectId,
    tree: ObjectId,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProposalRecord {
    digest: Digest,
    edits: Vec<ManifestEdit>,
}

impl From<&CandidateManifest> for ManifestRecord {
    fn from(manifest: &CandidateManifest) -> Self {
        let binding = manifest.binding.as_ref();
        Self {
            protocol: manifest.protocol().to_owned(),
            repository: manifest.repository.clone(),
            slice: SliceRecord {
                id: manifest.slice.id.clone(),
                revision: manifest.slice.revision,
                digest: binding.map(|binding| binding.digest.clone()),
            },
            protected: binding.map(|binding| binding.protected.clone()),
            scope: manifest.scope.clone(),
            acceptance: manifest.acceptance.clone(),
            recipe: manifest.recipe.clone(),
            environment: manifest.environment.clone(),
            base: BaseRecord {
                commit: manifest.base_commit,
                tree: manifest.base_tree,
            },
            commit: manifest.commit,
            tree: manifest.tree,
            files: manifest.files.clone(),
            proposal: ProposalRecord {
                digest: manifest.proposal_digest.clone(),
                edits: manifest.edits.clone(),
            },
        }
    }
}

/// A sealed Candidate as seal and export return it: its digest, its manifest (and the exact
/// manifest bytes the digest is taken over), fresh copies of its files, and their snapshot
/// digest (what the executor runs as input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedCandidate {
    /// The Candidate's digest: the `sha256:` of `manifest_bytes`, and the name of its ref.
    pub digest: Digest,
    /// The manifest, parsed.
    pub manifest: CandidateManifest,
    /// The canonical manifest bytes as stored in the seal commit's tree.
    pub manifest_bytes: Vec<u8>,
    /// M's files with their bytes, read back from the store.
    pub files: Vec<SnapshotFile>,
    /// The snapshot digest of `files`: what the executor is given as the Candidate's input.
    pub snapshot_digest: Digest,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn manifest(binding: Option<SliceBinding>) -> CandidateManifest {
        let oid = |byte| ObjectId::from_bytes([byte; 20]);
        CandidateManifest {
            repository: RepositoryIdentity {
                product_id: "p".into(),
                path: "/r".into(),
                dev: 1,
                ino: 2,
                nonce: "0".repeat(32),
                target_ref: "refs/heads/main".into(),
                initial: oid(1),
                settings: None,
            },
            slice: Slice {
                id: "s".into(),
                revision: 2,
            },
            binding,
            scope: vec!["src".into()],
            acceptance: Digest::of(b"a"),
            recipe: Digest::of(b"r"),
            environment: Digest::of(b"e"),
            base_commit: oid(1),
            base_tree: oid(2),
            commit: oid(3),
            tree: oid(4),
            files: vec![ManifestFile {
                path: "src/a".into(),
                blob: oid(5),
                sha256: Digest::of(b"x"),
                bytes: 1,
            }],
            proposal_digest: Digest::of(b"p"),
            edits: vec![ManifestEdit {
                path: "src/a".into(),
                prior: None,
                next: Some(Digest::of(b"x")),
            }],
        }
    }

    fn binding() -> SliceBinding {
        SliceBinding {
            digest: Digest::of(b"slice"),
            protected: vec!["tests/**".into()],
        }
    }

    /// The manifest's JSON with `edit` applied to its object.
    fn edited(manifest: &CandidateManifest, edit: impl Fn(&mut BTreeMap<String, Value>)) -> Value {
        let mut value = manifest.to_value();
        if let Value::Object(map) = &mut value {
            edit(map);
        }
        value
    }

    #[test]
    fn both_versions_round_trip_and_keep_their_own_fields() {
        for manifest in [manifest(None), manifest(Some(binding()))] {
            let back = CandidateManifest::from_value(&manifest.to_value()).unwrap();
            assert_eq!(back, manifest);
            assert_eq!(
                manifest.to_bytes().unwrap(),
                canonical::encode(&manifest.to_value()).unwrap()
            );
        }
        let v2 = manifest(Some(binding()));
        let v1 = manifest(None);
        let cases = [
            (
                edited(&v2, |map| {
                    map.remove("protected");
                }),
                "missing-field",
                "manifest.protected",
            ),
            (
                edited(&v2, |map| {
                    if let Some(Value::Object(slice)) = map.get_mut("slice") {
                        slice.remove("digest");
                    }
                }),
                "missing-field",
                "manifest.slice.digest",
            ),
            (
                edited(&v1, |map| {
                    map.insert("protected".into(), Value::Array(Vec::new()));
                }),
                "unknown-field",
                "manifest.protected",
            ),
            (
                edited(&v2, |map| {
                    map.insert("protected".into(), Value::Null);
                }),
                "wrong-type",
                "manifest.protected",
            ),
            (
                edited(&v2, |map| {
                    map.insert("protocol".into(), "sf-candidate/3".into());
                    map.insert("trees".into(), Value::Null);
                }),
                "wrong-type",
                "manifest.protocol",
            ),
            (
                edited(&v1, |map| {
                    if let Some(Value::Array(files)) = map.get_mut("files")
                        && let Some(Value::Object(file)) = files.first_mut()
                    {
                        file.insert("mode".into(), "100755".into());
                    }
                }),
                "wrong-type",
                "manifest.files[0].mode",
            ),
        ];
        for (value, code, field) in cases {
            let error = CandidateManifest::from_value(&value).unwrap_err();
            assert_eq!(
                (error.code(), error.field.as_str()),
                (code, field),
                "{error}"
            );
        }
    }
}
