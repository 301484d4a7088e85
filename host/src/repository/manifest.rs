//! The Candidate manifest (`sf-candidate/1`) and the frozen inputs a Candidate is sealed for,
//! with the Candidate commit message derived from them.

use crate::canonical::{self, Digest, Value, object};
use crate::git_object::ObjectId;
use crate::snapshot::SnapshotFile;
use crate::source_path;

use super::error::RepositoryError;
use super::identity::{CANDIDATE_PROTOCOL, RepositoryIdentity};
use super::record::{FieldError, Fields, ID_RULE, index, is_valid_id};
use super::source::{FILE_MODE, SourceFile};

/// The most scope entries frozen inputs may hold.
pub const MAX_SCOPE_ENTRIES: usize = 64;

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

/// What a Candidate is sealed for: its base B, its Slice, the paths it may touch, and the
/// digests of its acceptance, recipe and environment records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrozenInputs {
    pub base: ObjectId,
    pub slice: Slice,
    pub scope: Vec<String>,
    pub acceptance: Digest,
    pub recipe: Digest,
    pub environment: Digest,
}

impl FrozenInputs {
    /// Checks the rules the types do not carry: the slice id grammar, a positive safe
    /// revision, and 1 to 64 distinct valid scope paths.
    pub fn validate(&self) -> Result<(), RepositoryError> {
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

    /// The frozen inputs as a JSON record (what [`FrozenInputs::from_json`] reads).
    pub fn to_value(&self) -> Value {
        object([
            ("base", self.base.to_hex().into()),
            ("slice", self.slice.to_value()),
            ("scope", scope_value(&self.scope)),
            ("acceptance", self.acceptance.to_string().into()),
            ("recipe", self.recipe.to_string().into()),
            ("environment", self.environment.to_string().into()),
        ])
    }

    /// Parses frozen inputs from JSON: `{base, slice: {id, revision}, scope, acceptance,
    /// recipe, environment}`, strictly.
    pub fn from_json(bytes: &[u8]) -> Result<Self, RepositoryError> {
        let value = canonical::parse(bytes)
            .map_err(|error| RepositoryError::invalid("frozen inputs", error.to_string()))?;
        let frozen = Self::from_value(&value)
            .map_err(|error| RepositoryError::invalid(error.field, error.rule))?;
        frozen.validate()?;
        Ok(frozen)
    }

    fn from_value(value: &Value) -> Result<Self, FieldError> {
        let fields = Fields::exact(
            value,
            "frozen",
            &[
                "base",
                "slice",
                "scope",
                "acceptance",
                "recipe",
                "environment",
            ],
        )?;
        let slice = slice_from_value(fields.value("slice"), &fields.path("slice"))?;
        let scope = string_list(fields.array("scope")?, &fields.path("scope"))?;
        Ok(Self {
            base: fields.object_id("base")?,
            slice,
            scope,
            acceptance: fields.digest("acceptance")?,
            recipe: fields.digest("recipe")?,
            environment: fields.digest("environment")?,
        })
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
/// digest, never from the manifest (which names M), so there is no cycle.
pub fn candidate_message(product_id: &str, frozen: &FrozenInputs, proposal: &Digest) -> String {
    format!(
        "{CANDIDATE_PROTOCOL}\n\nproduct: {product_id}\nslice: {} {}\nacceptance: {}\nrecipe: {}\nenvironment: {}\nproposal: {proposal}\n",
        frozen.slice.id,
        frozen.slice.revision,
        frozen.acceptance,
        frozen.recipe,
        frozen.environment
    )
}

/// Whether `message` is a Candidate commit message naming `product_id`, in canonical form.
pub(crate) fn is_candidate_message(message: &str, product_id: &str) -> bool {
    let Some(rest) =
        message.strip_prefix(&format!("{CANDIDATE_PROTOCOL}\n\nproduct: {product_id}\n"))
    else {
        return false;
    };
    let lines: Vec<&str> = rest.split_terminator('\n').collect();
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
        object([
            ("protocol", CANDIDATE_PROTOCOL.into()),
            ("repository", self.repository.to_value()),
            ("slice", self.slice.to_value()),
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
        ])
    }

    /// Parses a manifest strictly. Canonical form is the caller's check (it has the bytes).
    pub fn from_value(value: &Value) -> Result<Self, FieldError> {
        let fields = Fields::exact(
            value,
            "manifest",
            &[
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
            ],
        )?;
        fields.literal("protocol", CANDIDATE_PROTOCOL)?;
        let repository =
            RepositoryIdentity::from_value(fields.value("repository"), &fields.path("repository"))?;
        let slice = slice_from_value(fields.value("slice"), &fields.path("slice"))?;
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
