//! The Candidate manifest (`sf-candidate/2`) and the frozen inputs a Candidate is sealed for,
//! with the Candidate commit message derived from them.
//!
//! A version 2 Candidate is sealed for one frozen Slice: its manifest and message name the
//! Slice's digest, and the manifest its protected-path patterns, so that no Candidate can
//! claim a scope, a base or records its Slice does not have. Version 1 Candidates
//! (`sf-candidate/1`, without the binding) are still read and exported; nothing collects,
//! judges or integrates them.

use crate::canonical::{self, Digest, Value, object};
use crate::git_object::ObjectId;
use crate::path_glob::PathGlob;
use crate::snapshot::SnapshotFile;
use crate::source_path;

use super::error::RepositoryError;
use super::identity::{CANDIDATE_PROTOCOL, CANDIDATE_PROTOCOL_V1, RepositoryIdentity};
use super::record::{FieldError, Fields, ID_RULE, index, is_valid_id};
use super::source::{FILE_MODE, SourceFile};

/// The most scope entries frozen inputs may hold.
pub const MAX_SCOPE_ENTRIES: usize = 64;
/// The most protected-path patterns frozen inputs may hold.
pub const MAX_PROTECTED_PATTERNS: usize = 1024;

/// What binds a Candidate to its frozen Slice: the Slice record's digest and the patterns of
/// the paths no proposal may create, change or delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceBinding {
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

/// Which Slice, at which revision, a Candidate belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    pub id: String,
    pub revision: u64,
}

impl Slice {
    /// The Slice as a JSON record: `{id, revision}`.
    pub fn to_value(&self) -> Value {
        object([
            ("id", self.id.as_str().into()),
            ("revision", Value::Integer(self.revision as i64)),
        ])
    }
}

fn scope_value(scope: &[String]) -> Value {
    Value::Array(scope.iter().map(|path| path.as_str().into()).collect())
}

/// What a Candidate is sealed for: its base B, its Slice, the paths it may touch, the
/// digests of its acceptance, recipe and environment records, and (from `sf-candidate/2` on)
/// the Slice's digest and protected paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrozenInputs {
    pub base: ObjectId,
    pub slice: Slice,
    pub scope: Vec<String>,
    pub acceptance: Digest,
    pub recipe: Digest,
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
            source_path::check_path(path).map_err(|rule| {
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

fn slice_from_value(value: &Value, path: &str) -> Result<Slice, FieldError> {
    let fields = Fields::exact(value, path, &["id", "revision"])?;
    Ok(Slice {
        id: fields.string("id")?.to_owned(),
        revision: fields.positive("revision")?,
    })
}

fn string_list(items: &[Value], path: &str) -> Result<Vec<String>, FieldError> {
    items
        .iter()
        .enumerate()
        .map(|(at, item)| match item {
            Value::String(text) => Ok(text.clone()),
            other => Err(FieldError::wrong(
                &index(path, at),
                format!("must be a string, not {}", other.type_name()),
            )),
        })
        .collect()
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

/// One file of a Candidate's tree, as the manifest lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestFile {
    pub path: String,
    pub blob: ObjectId,
    pub sha256: Digest,
    pub bytes: u64,
}

impl From<&SourceFile> for ManifestFile {
    fn from(file: &SourceFile) -> Self {
        Self {
            path: file.path.clone(),
            blob: file.blob,
            sha256: file.sha256.clone(),
            bytes: file.bytes,
        }
    }
}

/// One edit as the manifest records it: `next` is the new bytes' digest, or `None` for a
/// deletion; never the text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestEdit {
    pub path: String,
    pub prior: Option<Digest>,
    pub next: Option<Digest>,
}

/// The record a Candidate's digest is taken over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateManifest {
    pub repository: RepositoryIdentity,
    pub slice: Slice,
    /// The Slice binding of a version 2 manifest; `None` for version 1.
    pub binding: Option<SliceBinding>,
    pub scope: Vec<String>,
    pub acceptance: Digest,
    pub recipe: Digest,
    pub environment: Digest,
    pub base_commit: ObjectId,
    pub base_tree: ObjectId,
    pub commit: ObjectId,
    pub tree: ObjectId,
    pub files: Vec<ManifestFile>,
    pub proposal_digest: Digest,
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

    /// The manifest as a JSON value with the seed's field names.
    pub fn to_value(&self) -> Value {
        let files = self
            .files
            .iter()
            .map(|file| {
                object([
                    ("path", file.path.as_str().into()),
                    ("mode", FILE_MODE.into()),
                    ("blob", file.blob.to_hex().into()),
                    ("sha256", file.sha256.to_string().into()),
                    ("bytes", Value::Integer(file.bytes as i64)),
                ])
            })
            .collect();
        let edits = self
            .edits
            .iter()
            .map(|edit| {
                object([
                    ("path", edit.path.as_str().into()),
                    ("prior", edit.prior.as_ref().map(ToString::to_string).into()),
                    ("next", edit.next.as_ref().map(ToString::to_string).into()),
                ])
            })
            .collect();
        let mut slice = self.slice.to_value();
        let mut fields = vec![
            ("protocol", Value::from(self.protocol())),
            ("repository", self.repository.to_value()),
        ];
        if let (Some(binding), Value::Object(map)) = (&self.binding, &mut slice) {
            map.insert("digest".into(), binding.digest.to_string().into());
            fields.push(("protected", scope_value(&binding.protected)));
        }
        fields.extend([
            ("slice", slice),
            ("scope", scope_value(&self.scope)),
            ("acceptance", self.acceptance.to_string().into()),
            ("recipe", self.recipe.to_string().into()),
            ("environment", self.environment.to_string().into()),
            (
                "base",
                object([
                    ("commit", self.base_commit.to_hex().into()),
                    ("tree", self.base_tree.to_hex().into()),
                ]),
            ),
            ("commit", self.commit.to_hex().into()),
            ("tree", self.tree.to_hex().into()),
            ("files", Value::Array(files)),
            (
                "proposal",
                object([
                    ("digest", self.proposal_digest.to_string().into()),
                    ("edits", Value::Array(edits)),
                ]),
            ),
        ]);
        Value::Object(
            fields
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value))
                .collect(),
        )
    }

    /// Parses a manifest of either version strictly. Canonical form is the caller's check (it
    /// has the bytes).
    pub fn from_value(value: &Value) -> Result<Self, FieldError> {
        const V1_FIELDS: [&str; 12] = [
            "protocol",
            "repository",
            "slice",
            "scope",
            "acceptance",
            "recipe",
            "environment",
            "base",
            "commit",
            "tree",
            "files",
            "proposal",
        ];
        let v2 = matches!(value, Value::Object(map)
            if map.get("protocol") == Some(&Value::from(CANDIDATE_PROTOCOL)));
        let mut names = V1_FIELDS.to_vec();
        if v2 {
            names.push("protected");
        }
        let fields = Fields::exact(value, "manifest", &names)?;
        fields.literal(
            "protocol",
            if v2 {
                CANDIDATE_PROTOCOL
            } else {
                CANDIDATE_PROTOCOL_V1
            },
        )?;
        let repository =
            RepositoryIdentity::from_value(fields.value("repository"), &fields.path("repository"))?;
        let (slice, binding) = if v2 {
            let slice = Fields::exact(
                fields.value("slice"),
                &fields.path("slice"),
                &["id", "revision", "digest"],
            )?;
            let binding = SliceBinding {
                digest: slice.digest("digest")?,
                protected: string_list(fields.array("protected")?, &fields.path("protected"))?,
            };
            let slice = Slice {
                id: slice.string("id")?.to_owned(),
                revision: slice.positive("revision")?,
            };
            (slice, Some(binding))
        } else {
            (
                slice_from_value(fields.value("slice"), &fields.path("slice"))?,
                None,
            )
        };
        let scope = string_list(fields.array("scope")?, &fields.path("scope"))?;
        let base = Fields::exact(
            fields.value("base"),
            &fields.path("base"),
            &["commit", "tree"],
        )?;
        let mut files = Vec::new();
        for (at, item) in fields.array("files")?.iter().enumerate() {
            let file = Fields::exact(
                item,
                &index("manifest.files", at),
                &["path", "mode", "blob", "sha256", "bytes"],
            )?;
            file.literal("mode", FILE_MODE)?;
            files.push(ManifestFile {
                path: file.string("path")?.to_owned(),
                blob: file.object_id("blob")?,
                sha256: file.digest("sha256")?,
                bytes: file.natural("bytes")?,
            });
        }
        let proposal = Fields::exact(
            fields.value("proposal"),
            &fields.path("proposal"),
            &["digest", "edits"],
        )?;
        let mut edits = Vec::new();
        for (at, item) in proposal.array("edits")?.iter().enumerate() {
            let edit = Fields::exact(
                item,
                &index("manifest.proposal.edits", at),
                &["path", "prior", "next"],
            )?;
            edits.push(ManifestEdit {
                path: edit.string("path")?.to_owned(),
                prior: edit.nullable_digest("prior")?,
                next: edit.nullable_digest("next")?,
            });
        }
        Ok(Self {
            repository,
            slice,
            binding,
            scope,
            acceptance: fields.digest("acceptance")?,
            recipe: fields.digest("recipe")?,
            environment: fields.digest("environment")?,
            base_commit: base.object_id("commit")?,
            base_tree: base.object_id("tree")?,
            commit: fields.object_id("commit")?,
            tree: fields.object_id("tree")?,
            files,
            proposal_digest: proposal.digest("digest")?,
            edits,
        })
    }
}

/// A sealed Candidate as seal and export return it: its digest, its manifest (and the exact
/// manifest bytes the digest is taken over), fresh copies of its files, and their snapshot
/// digest (what the executor runs as input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedCandidate {
    pub digest: Digest,
    pub manifest: CandidateManifest,
    pub manifest_bytes: Vec<u8>,
    pub files: Vec<SnapshotFile>,
    pub snapshot_digest: Digest,
}
