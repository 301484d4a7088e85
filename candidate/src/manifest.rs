//! The Candidate manifest and the frozen inputs a Candidate is sealed for, with the Candidate
//! commit message derived from them.
//!
//! sf seals `sf-candidate/3`: the manifest names the Slice's digest, its protected paths and
//! proposal bounds, M's tree by id and by a content digest of every entry (never a listing,
//! so a 100,000-file tree has a small manifest), and each edit's entries before and after;
//! M's message is the proposal's title and body followed by trailers. `sf-candidate/2`
//! (regular text files, every file listed) is still exported, collected, judged and
//! integrated. `sf-candidate/1` (without the Slice binding) is still read and exported;
//! nothing collects, judges or integrates it.

use serde::{Deserialize, Serialize};

use crate::canonical::{self, Digest, FieldError, FieldErrorKind, Value};
use crate::contracts::tree_path;
use crate::git_object::ObjectId;
use crate::path_glob::PathGlob;

use super::closed_paths::ClosedPaths;
use super::error::RepositoryError;
use super::identity::{
    CANDIDATE_PROTOCOL, CANDIDATE_PROTOCOL_V1, CANDIDATE_PROTOCOL_V2, CANDIDATE_PROTOCOL_V3, IDENT,
    RepositoryIdentity, SF_NAME_EMAIL,
};
use super::proposal::{Proposal, ProposalBounds};
use super::source::{FILE_MODE, SourceFile};
use crate::contracts::grammar::{ID_RULE, is_valid_id};
use crate::contracts::tree_path::EntryMode;

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
    /// How large a proposal may be ([`ProposalBounds::DEFAULT`] unless the Slice raises them).
    pub bounds: ProposalBounds,
    /// Constructs no proposal may add to a file ([`check_forbidden`](super::check_forbidden)):
    /// checked at seal and again before a collection. Not written in the manifest: the Slice
    /// record holds them, and the manifest names its digest.
    pub forbidden: Vec<String>,
    /// The paths closed around the Slice's trusted test material and the sub-paths it opens
    /// ([`ClosedPaths`]): checked at seal and again before a collection. Not written in the
    /// manifest, for the same reason.
    pub closed_paths: ClosedPaths,
}

impl FrozenInputs {
    /// The protected-path patterns, parsed (none for a version 1 Candidate).
    pub fn protected(&self) -> Result<Vec<PathGlob>, RepositoryError> {
        self.binding
            .as_ref()
            .map_or(Ok(Vec::new()), SliceBinding::validate)
    }

    /// Checks the rules the types do not carry: the slice id grammar, a positive safe
    /// revision, 1 to 64 distinct valid scope paths, valid protected patterns, and proposal
    /// bounds within the hard cap.
    pub fn validate(&self) -> Result<(), RepositoryError> {
        self.protected()?;
        self.closed_paths.parse()?;
        super::check_forbidden_list(&self.forbidden)?;
        self.bounds.check("frozen.bounds")?;
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

/// Which Candidate protocol a manifest follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CandidateProtocol {
    /// `sf-candidate/1`: no Slice binding; read and exported only.
    V1,
    /// `sf-candidate/2`: bound to a Slice, regular text files listed one by one.
    V2,
    /// `sf-candidate/3`: Git's whole tree model, named by one content digest; M carries the
    /// proposal's message and author.
    V3,
    /// `sf-candidate/4`: as version 3, the base's and the Candidate's trees named by their
    /// `sf-tree/1` digests.
    V4,
}

impl CandidateProtocol {
    /// The protocol string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1 => CANDIDATE_PROTOCOL_V1,
            Self::V2 => CANDIDATE_PROTOCOL_V2,
            Self::V3 => CANDIDATE_PROTOCOL_V3,
            Self::V4 => CANDIDATE_PROTOCOL,
        }
    }

    /// Whether the seal commit holds the proposal beside the manifest and M carries the
    /// proposal's message (versions 3 and 4).
    pub fn holds_proposal(self) -> bool {
        self >= Self::V3
    }

    fn parse(text: &str) -> Option<Self> {
        [Self::V1, Self::V2, Self::V3, Self::V4]
            .into_iter()
            .find(|protocol| protocol.as_str() == text)
    }
}

/// The message of an `sf-candidate/1` or `/2` Candidate commit M: derived from the frozen
/// inputs and the proposal digest, never from the manifest (which names M), so there is no
/// cycle. A version 2 message names the Slice's digest on the line after the Slice.
pub fn legacy_candidate_message(
    product_id: &str,
    frozen: &FrozenInputs,
    proposal: &Digest,
) -> String {
    let (protocol, slice_digest) = match &frozen.binding {
        Some(binding) => (
            CANDIDATE_PROTOCOL_V2,
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

/// The message of an `sf-candidate/3` Candidate commit M: the proposal's title and body (a
/// title naming the Slice when the proposal has none), then a paragraph of trailers naming
/// the protocol, the Product, the Slice and its digest, and the proposal digest. The
/// proposal digest covers the message and author, and the Slice digest every frozen record;
/// nothing here depends on the manifest (which names M).
pub fn candidate_message(
    protocol: CandidateProtocol,
    product_id: &str,
    frozen: &FrozenInputs,
    proposal: &Proposal,
    proposal_digest: &Digest,
) -> String {
    let slice_digest = frozen
        .binding
        .as_ref()
        .map_or_else(String::new, |binding| binding.digest.to_string());
    let text = match &proposal.message {
        Some(message) => match &message.body {
            Some(body) => format!("{}\n\n{body}", message.title),
            None => message.title.clone(),
        },
        None => format!(
            "sf: Candidate for Slice {} revision {}",
            frozen.slice.id, frozen.slice.revision
        ),
    };
    format!(
        "{text}\n\n{}",
        trailers(
            protocol,
            product_id,
            &frozen.slice,
            &slice_digest,
            &proposal_digest.to_string()
        )
    )
}

fn trailers(
    protocol: CandidateProtocol,
    product_id: &str,
    slice: &Slice,
    slice_digest: &str,
    proposal: &str,
) -> String {
    format!(
        "Sf-Candidate: {}\nSf-Product: {product_id}\nSf-Slice: {} {}\nSf-Slice-Digest: {slice_digest}\nSf-Proposal: {proposal}\n",
        protocol.as_str(),
        slice.id,
        slice.revision
    )
}

/// The author and committer lines of an `sf-candidate/3` M: the proposal's author (sf's own
/// identity at time 0 when it names none), and sf as the committer at the author's time.
pub fn candidate_idents(proposal: &Proposal) -> (String, String) {
    match &proposal.author {
        Some(author) => (
            author.line(),
            format!("{SF_NAME_EMAIL} {} {}", author.time, author.offset),
        ),
        None => (IDENT.to_owned(), IDENT.to_owned()),
    }
}

/// Whether `commit` is in the form of a Candidate commit (of any version) naming
/// `product_id`: one parent, sf's identity (as author and committer for versions 1 and 2,
/// as committer for version 3), and the version's message in canonical form.
#[doc(hidden)]
pub fn is_candidate_commit(commit: &crate::git_object::Commit, product_id: &str) -> bool {
    if commit.parents.len() != 1 {
        return false;
    }
    if commit.is_by(IDENT) && is_legacy_message(&commit.message, product_id) {
        return true;
    }
    commit
        .committer
        .strip_prefix(SF_NAME_EMAIL)
        .is_some_and(|date| date.starts_with(' '))
        && is_v3_message(&commit.message, product_id)
}

/// Whether `message` ends with a version 3 or 4 trailer paragraph naming `product_id`, after a
/// non-empty text.
fn is_v3_message(message: &str, product_id: &str) -> bool {
    let Some((text, last)) = message.rsplit_once("\n\nSf-Candidate: ") else {
        return false;
    };
    let lines: Vec<&str> = last.split_terminator('\n').collect();
    let [protocol, product, slice, slice_digest, proposal] = lines.as_slice() else {
        return false;
    };
    let digest =
        |line: &str, label: &str| line.strip_prefix(label).and_then(Digest::parse).is_some();
    (*protocol == CANDIDATE_PROTOCOL || *protocol == CANDIDATE_PROTOCOL_V3)
        && product.strip_prefix("Sf-Product: ") == Some(product_id)
        && slice.strip_prefix("Sf-Slice: ").is_some_and(slice_names)
        && digest(slice_digest, "Sf-Slice-Digest: ")
        && digest(proposal, "Sf-Proposal: ")
        && message.ends_with('\n')
        && !text.is_empty()
        && !text.starts_with('\n')
}

/// Whether `slice` is `<id> <revision>` in canonical form.
fn slice_names(slice: &str) -> bool {
    let Some((id, revision)) = slice.split_once(' ') else {
        return false;
    };
    let revision_ok = revision.parse::<u64>().is_ok_and(|r| {
        r >= 1 && r <= canonical::MAX_SAFE_INTEGER as u64 && r.to_string() == revision
    });
    is_valid_id(id) && revision_ok
}

/// Whether `message` is a version 1 or 2 Candidate commit message naming `product_id`, in
/// canonical form.
fn is_legacy_message(message: &str, product_id: &str) -> bool {
    let (rest, v2) = if let Some(rest) = message.strip_prefix(&format!(
        "{CANDIDATE_PROTOCOL_V2}\n\nproduct: {product_id}\n"
    )) {
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
    let slice_ok = lines[0].strip_prefix("slice: ").is_some_and(slice_names);
    let digests_ok = ["acceptance: ", "recipe: ", "environment: ", "proposal: "]
        .iter()
        .zip(&lines[1..])
        .all(|(label, line)| line.strip_prefix(label).and_then(Digest::parse).is_some());
    slice_ok && digests_ok
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
                        "{} is {}: an {CANDIDATE_PROTOCOL_V1} or {CANDIDATE_PROTOCOL_V2} manifest \
                         lists regular files only",
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

/// One entry as a version 3 manifest records it: its mode and the `sha256:` of its bytes (a
/// link's target bytes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    /// `100644`, `100755` or `120000`.
    #[serde(with = "octal")]
    pub mode: EntryMode,
    /// The `sha256:` of the entry's bytes.
    pub sha256: Digest,
}

impl ManifestEntry {
    /// The entry of `file`.
    pub fn of(file: &SourceFile) -> Self {
        Self {
            mode: file.mode,
            sha256: file.sha256.clone(),
        }
    }
}

/// A leaf's mode as its octal string.
mod octal {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::contracts::tree_path::EntryMode;

    pub fn serialize<S: Serializer>(mode: &EntryMode, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(mode.octal())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<EntryMode, D::Error> {
        let word = String::deserialize(deserializer)?;
        EntryMode::from_octal(word.as_bytes())
            .ok_or_else(|| serde::de::Error::custom("must be \"100644\", \"100755\" or \"120000\""))
    }
}

/// One edit as the manifest records it: the entry before (`None` when the edit created it)
/// and after (`None` when it deleted it), never the bytes. Version 1 and 2 manifests record
/// the digests only (their entries are regular files).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEdit {
    /// The path the edit touches.
    pub path: String,
    /// The entry in the base; `None` when the edit created it.
    #[serde(deserialize_with = "canonical::nullable")]
    pub prior: Option<ManifestEntry>,
    /// The entry in M; `None` when the edit deleted it.
    #[serde(deserialize_with = "canonical::nullable")]
    pub next: Option<ManifestEntry>,
}

/// How a manifest names M's entries beyond its tree id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeContents {
    /// Versions 1 and 2: every file, sorted by path.
    Files(Vec<ManifestFile>),
    /// Version 3: the snapshot digest of every entry (path, mode, bytes), what the executor
    /// is given as input.
    Digest(Digest),
    /// Version 4: the `sf-tree/1` digests of the base's tree and of M's.
    Trees {
        /// The digest of B's tree.
        base: Digest,
        /// The digest of M's tree.
        candidate: Digest,
    },
}

/// The record a Candidate's digest is taken over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CandidateManifest {
    /// Which protocol the manifest follows.
    pub protocol: CandidateProtocol,
    /// The repository the Candidate was sealed in.
    pub repository: RepositoryIdentity,
    /// The Slice it was sealed for.
    pub slice: Slice,
    /// The Slice binding (versions 2 and 3); `None` for version 1.
    pub binding: Option<SliceBinding>,
    /// The proposal bounds it was sealed within (recorded from version 3; the default before).
    pub bounds: ProposalBounds,
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
    /// M's entries: listed (versions 1 and 2) or digested (version 3).
    pub contents: TreeContents,
    /// The `sha256:` of the proposal's canonical record (edits sorted by path).
    pub proposal_digest: Digest,
    /// The proposal's edits as entries, sorted by path.
    pub edits: Vec<ManifestEdit>,
}

impl CandidateManifest {
    /// The frozen inputs this Candidate was sealed for.
    pub fn frozen(&self) -> FrozenInputs {
        FrozenInputs {
            forbidden: Vec::new(),
            closed_paths: ClosedPaths::default(),
            base: self.base_commit,
            slice: self.slice.clone(),
            scope: self.scope.clone(),
            acceptance: self.acceptance.clone(),
            recipe: self.recipe.clone(),
            environment: self.environment.clone(),
            binding: self.binding.clone(),
            bounds: self.bounds,
        }
    }

    /// The manifest's protocol string.
    pub fn protocol(&self) -> &'static str {
        self.protocol.as_str()
    }

    /// Checks `files` (M's entries, sorted by path), whose [`contents_digest`] is `digest`,
    /// against what the manifest names beyond the tree id: the listing, or the content
    /// digest. The error says how they differ.
    pub fn check_contents(&self, files: &[SourceFile], digest: &Digest) -> Result<(), String> {
        match &self.contents {
            TreeContents::Files(listed) => {
                if ManifestFile::listing(files)? != *listed {
                    return Err("the files are not the ones the manifest lists".into());
                }
            }
            TreeContents::Digest(named) => {
                if digest != named {
                    return Err(format!(
                        "the entries do not have the content digest {named}"
                    ));
                }
            }
            TreeContents::Trees { candidate, .. } => {
                if super::tree_record::tree_digest_of(files)? != *candidate {
                    return Err(format!(
                        "the entries do not have the tree digest {candidate}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The manifest as a JSON value, in the written record's shape.
    pub fn to_value(&self) -> Value {
        match self.record() {
            Record::Legacy(record) => canonical::to_value(&record),
            Record::V3(record) => canonical::to_value(&record),
            Record::V4(record) => canonical::to_value(&record),
        }
        .expect("a manifest holds only strings and integers")
    }

    /// The canonical bytes of the manifest: what the Candidate's digest is taken over.
    pub fn to_bytes(&self) -> Result<Vec<u8>, canonical::JsonError> {
        canonical::encode(&self.to_value())
    }

    /// Parses a manifest of any version strictly: its `protocol` first (so that a manifest
    /// of another version is named as such), then exactly that version's fields. Canonical
    /// form is the caller's check (it has the bytes).
    pub fn from_value(value: &Value) -> Result<Self, FieldError> {
        let tag = canonical::variant_tag(
            value,
            "manifest",
            "protocol",
            &[
                CANDIDATE_PROTOCOL,
                CANDIDATE_PROTOCOL_V3,
                CANDIDATE_PROTOCOL_V2,
                CANDIDATE_PROTOCOL_V1,
            ],
        )?;
        let protocol = CandidateProtocol::parse(tag).expect("variant_tag checked the protocol");
        if protocol == CandidateProtocol::V4 {
            let record: V4Record = canonical::from_value(value, "manifest")?;
            return record.try_into();
        }
        if protocol == CandidateProtocol::V3 {
            let record: V3Record = canonical::from_value(value, "manifest")?;
            return record.try_into();
        }
        let record: LegacyRecord = canonical::from_value(value, "manifest")?;
        // Version 2 is version 1 with these two fields; which may be here is the protocol's.
        let absent = |field: &str, kind| FieldError {
            rule: match kind {
                FieldErrorKind::Missing => format!("is required in a {tag} manifest"),
                _ => format!("is not a field of a {tag} manifest"),
            },
            kind,
            field: format!("manifest.{field}"),
        };
        let binding = match (
            protocol == CandidateProtocol::V2,
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
        let entry = |digest: Option<Digest>| {
            digest.map(|sha256| ManifestEntry {
                mode: EntryMode::Regular,
                sha256,
            })
        };
        Ok(Self {
            protocol,
            repository: record.repository,
            slice: Slice {
                id: record.slice.id,
                revision: record.slice.revision,
            },
            binding,
            bounds: ProposalBounds::DEFAULT,
            scope: record.scope,
            acceptance: record.acceptance,
            recipe: record.recipe,
            environment: record.environment,
            base_commit: record.base.commit,
            base_tree: record.base.tree,
            commit: record.commit,
            tree: record.tree,
            contents: TreeContents::Files(record.files),
            proposal_digest: record.proposal.digest,
            edits: record
                .proposal
                .edits
                .into_iter()
                .map(|edit| ManifestEdit {
                    path: edit.path,
                    prior: entry(edit.prior),
                    next: entry(edit.next),
                })
                .collect(),
        })
    }

    fn record(&self) -> Record {
        let binding = self.binding.as_ref();
        let digest = binding.map(|binding| binding.digest.clone());
        let base = BaseRecord {
            commit: self.base_commit,
            tree: self.base_tree,
        };
        match &self.contents {
            TreeContents::Trees {
                base: base_digest,
                candidate,
            } => Record::V4(V4Record {
                protocol: self.protocol().to_owned(),
                repository: self.repository.clone(),
                slice: SliceRecord {
                    id: self.slice.id.clone(),
                    revision: self.slice.revision,
                    digest,
                },
                protected: binding.map_or_else(Vec::new, |binding| binding.protected.clone()),
                bounds: self.bounds,
                scope: self.scope.clone(),
                acceptance: self.acceptance.clone(),
                recipe: self.recipe.clone(),
                environment: self.environment.clone(),
                base: V4BaseRecord {
                    commit: self.base_commit,
                    tree: self.base_tree,
                    tree_digest: base_digest.clone(),
                },
                commit: self.commit,
                tree: self.tree,
                tree_digest: candidate.clone(),
                proposal: V3ProposalRecord {
                    digest: self.proposal_digest.clone(),
                    edits: self.edits.clone(),
                },
            }),
            TreeContents::Digest(content) => Record::V3(V3Record {
                protocol: self.protocol().to_owned(),
                repository: self.repository.clone(),
                slice: SliceRecord {
                    id: self.slice.id.clone(),
                    revision: self.slice.revision,
                    digest,
                },
                protected: binding.map_or_else(Vec::new, |binding| binding.protected.clone()),
                bounds: self.bounds,
                scope: self.scope.clone(),
                acceptance: self.acceptance.clone(),
                recipe: self.recipe.clone(),
                environment: self.environment.clone(),
                base,
                commit: self.commit,
                tree: self.tree,
                content: content.clone(),
                proposal: V3ProposalRecord {
                    digest: self.proposal_digest.clone(),
                    edits: self.edits.clone(),
                },
            }),
            TreeContents::Files(files) => Record::Legacy(LegacyRecord {
                protocol: self.protocol().to_owned(),
                repository: self.repository.clone(),
                slice: SliceRecord {
                    id: self.slice.id.clone(),
                    revision: self.slice.revision,
                    digest,
                },
                protected: binding.map(|binding| binding.protected.clone()),
                scope: self.scope.clone(),
                acceptance: self.acceptance.clone(),
                recipe: self.recipe.clone(),
                environment: self.environment.clone(),
                base,
                commit: self.commit,
                tree: self.tree,
                files: files.clone(),
                proposal: LegacyProposalRecord {
                    digest: self.proposal_digest.clone(),
                    edits: self
                        .edits
                        .iter()
                        .map(|edit| LegacyEdit {
                            path: edit.path.clone(),
                            prior: edit.prior.as_ref().map(|entry| entry.sha256.clone()),
                            next: edit.next.as_ref().map(|entry| entry.sha256.clone()),
                        })
                        .collect(),
                },
            }),
        }
    }
}

/// The content digest a version 3 manifest names: the snapshot digest of M's entries.
pub fn contents_digest(files: &[SourceFile]) -> Digest {
    let entries: Vec<(&str, EntryMode, &[u8])> = files
        .iter()
        .map(|file| (file.path.as_str(), file.mode, file.content.as_slice()))
        .collect();
    crate::snapshot::digest_of_entries(&entries)
}

enum Record {
    Legacy(LegacyRecord),
    V3(V3Record),
    V4(V4Record),
}

/// A version 1 or 2 manifest as it is written: version 2 adds `slice.digest` and `protected`.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacyRecord {
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
    proposal: LegacyProposalRecord,
}

/// A version 3 manifest as it is written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct V3Record {
    /// Checked before the record is read ([`CandidateManifest::from_value`]).
    protocol: String,
    repository: RepositoryIdentity,
    slice: SliceRecord,
    protected: Vec<String>,
    bounds: ProposalBounds,
    scope: Vec<String>,
    acceptance: Digest,
    recipe: Digest,
    environment: Digest,
    base: BaseRecord,
    commit: ObjectId,
    tree: ObjectId,
    content: Digest,
    proposal: V3ProposalRecord,
}

/// A version 4 manifest as it is written.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct V4Record {
    /// Checked before the record is read ([`CandidateManifest::from_value`]).
    protocol: String,
    repository: RepositoryIdentity,
    slice: SliceRecord,
    protected: Vec<String>,
    bounds: ProposalBounds,
    scope: Vec<String>,
    acceptance: Digest,
    recipe: Digest,
    environment: Digest,
    base: V4BaseRecord,
    commit: ObjectId,
    tree: ObjectId,
    #[serde(rename = "treeDigest")]
    tree_digest: Digest,
    proposal: V3ProposalRecord,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct V4BaseRecord {
    commit: ObjectId,
    tree: ObjectId,
    #[serde(rename = "treeDigest")]
    tree_digest: Digest,
}

impl TryFrom<V4Record> for CandidateManifest {
    type Error = FieldError;

    fn try_from(record: V4Record) -> Result<Self, FieldError> {
        let v3 = V3Record {
            protocol: record.protocol,
            repository: record.repository,
            slice: record.slice,
            protected: record.protected,
            bounds: record.bounds,
            scope: record.scope,
            acceptance: record.acceptance,
            recipe: record.recipe,
            environment: record.environment,
            base: BaseRecord {
                commit: record.base.commit,
                tree: record.base.tree,
            },
            commit: record.commit,
            tree: record.tree,
            content: record.tree_digest.clone(),
            proposal: record.proposal,
        };
        let mut manifest = CandidateManifest::try_from(v3)?;
        manifest.protocol = CandidateProtocol::V4;
        manifest.contents = TreeContents::Trees {
            base: record.base.tree_digest,
            candidate: record.tree_digest,
        };
        Ok(manifest)
    }
}

impl TryFrom<V3Record> for CandidateManifest {
    type Error = FieldError;

    fn try_from(record: V3Record) -> Result<Self, FieldError> {
        let digest = record.slice.digest.ok_or_else(|| FieldError {
            kind: FieldErrorKind::Missing,
            field: "manifest.slice.digest".into(),
            rule: format!("is required in a {} manifest", record.protocol),
        })?;
        Ok(Self {
            protocol: CandidateProtocol::V3,
            repository: record.repository,
            slice: Slice {
                id: record.slice.id,
                revision: record.slice.revision,
            },
            binding: Some(SliceBinding {
                digest,
                protected: record.protected,
            }),
            bounds: record.bounds,
            scope: record.scope,
            acceptance: record.acceptance,
            recipe: record.recipe,
            environment: record.environment,
            base_commit: record.base.commit,
            base_tree: record.base.tree,
            commit: record.commit,
            tree: record.tree,
            contents: TreeContents::Digest(record.content),
            proposal_digest: record.proposal.digest,
            edits: record.proposal.edits,
        })
    }
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
struct LegacyProposalRecord {
    digest: Digest,
    edits: Vec<LegacyEdit>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LegacyEdit {
    path: String,
    #[serde(deserialize_with = "canonical::nullable")]
    prior: Option<Digest>,
    #[serde(deserialize_with = "canonical::nullable")]
    next: Option<Digest>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct V3ProposalRecord {
    digest: Digest,
    edits: Vec<ManifestEdit>,
}

/// A sealed Candidate as seal and export return it: its digest, its manifest (and the exact
/// manifest bytes the digest is taken over) and its proposal. Its files are not carried: a
/// Candidate's tree may hold 100,000 files and gigabytes; whoever needs bytes reads them
/// (`Repository::snapshot` of M, bounded by the repository's limits), and what names the
/// tree is [`SealedCandidate::content_digest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SealedCandidate {
    /// The Candidate's digest: the `sha256:` of `manifest_bytes`, and the name of its ref.
    pub digest: Digest,
    /// The manifest, parsed.
    pub manifest: CandidateManifest,
    /// The canonical manifest bytes as stored in the seal commit's tree.
    pub manifest_bytes: Vec<u8>,
    /// The proposal, as the seal commit holds it (versions 3 and 4; `None` before, whose seal
    /// commits hold only the manifest).
    pub proposal: Option<Proposal>,
}

impl SealedCandidate {
    /// The digest that names the Candidate's content: the `sf-tree/1` digest of M's tree
    /// (version 4), the snapshot digest of its entries (version 3); `None` for versions 1
    /// and 2, whose manifests list the files instead.
    pub fn content_digest(&self) -> Option<&Digest> {
        match &self.manifest.contents {
            TreeContents::Trees { candidate, .. } => Some(candidate),
            TreeContents::Digest(digest) => Some(digest),
            TreeContents::Files(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn manifest(binding: Option<SliceBinding>) -> CandidateManifest {
        let oid = |byte| ObjectId::from_bytes([byte; 20]);
        CandidateManifest {
            protocol: if binding.is_some() {
                CandidateProtocol::V2
            } else {
                CandidateProtocol::V1
            },
            bounds: ProposalBounds::DEFAULT,
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
            contents: TreeContents::Files(vec![ManifestFile {
                path: "src/a".into(),
                blob: oid(5),
                sha256: Digest::of(b"x"),
                bytes: 1,
            }]),
            proposal_digest: Digest::of(b"p"),
            edits: vec![ManifestEdit {
                path: "src/a".into(),
                prior: None,
                next: Some(ManifestEntry {
                    mode: EntryMode::Regular,
                    sha256: Digest::of(b"x"),
                }),
            }],
        }
    }

    fn v3() -> CandidateManifest {
        CandidateManifest {
            protocol: CandidateProtocol::V3,
            contents: TreeContents::Digest(Digest::of(b"contents")),
            bounds: ProposalBounds {
                edits: 100,
                bytes: 1000,
            },
            edits: vec![ManifestEdit {
                path: "src/l".into(),
                prior: None,
                next: Some(ManifestEntry {
                    mode: EntryMode::Symlink,
                    sha256: Digest::of(b"a"),
                }),
            }],
            ..manifest(Some(binding()))
        }
    }

    fn v4() -> CandidateManifest {
        CandidateManifest {
            protocol: CandidateProtocol::V4,
            contents: TreeContents::Trees {
                base: Digest::of(b"base tree"),
                candidate: Digest::of(b"tree"),
            },
            ..v3()
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
        for manifest in [manifest(None), manifest(Some(binding())), v3(), v4()] {
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
                    map.insert("protocol".into(), "sf-candidate/5".into());
                    map.insert("trees".into(), Value::Null);
                }),
                "wrong-type",
                "manifest.protocol",
            ),
            (
                edited(&v2, |map| {
                    map.insert("protocol".into(), "sf-candidate/3".into());
                }),
                "unknown-field",
                "manifest.files",
            ),
            (
                edited(&v3(), |map| {
                    map.remove("bounds");
                }),
                "missing-field",
                "manifest.bounds",
            ),
            (
                edited(&v4(), |map| {
                    map.insert("content".into(), Digest::of(b"x").to_string().into());
                }),
                "unknown-field",
                "manifest.content",
            ),
            (
                edited(&v4(), |map| {
                    if let Some(Value::Object(base)) = map.get_mut("base") {
                        base.remove("treeDigest");
                    }
                }),
                "missing-field",
                "manifest.base.treeDigest",
            ),
            (
                edited(&v3(), |map| {
                    map.insert("treeDigest".into(), Digest::of(b"x").to_string().into());
                }),
                "unknown-field",
                "manifest.treeDigest",
            ),
            (
                edited(&v3(), |map| {
                    if let Some(Value::Object(slice)) = map.get_mut("slice") {
                        slice.remove("digest");
                    }
                }),
                "missing-field",
                "manifest.slice.digest",
            ),
            (
                edited(&v3(), |map| {
                    if let Some(Value::Object(proposal)) = map.get_mut("proposal")
                        && let Some(Value::Array(edits)) = proposal.get_mut("edits")
                        && let Some(Value::Object(edit)) = edits.first_mut()
                        && let Some(Value::Object(next)) = edit.get_mut("next")
                    {
                        next.insert("mode".into(), "160000".into());
                    }
                }),
                "wrong-type",
                "manifest.proposal.edits[0].next.mode",
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

    #[test]
    fn a_version_3_candidate_commit_is_recognised_by_its_committer_and_trailers() {
        let frozen = FrozenInputs {
            forbidden: Vec::new(),
            closed_paths: Default::default(),
            base: ObjectId::from_bytes([1; 20]),
            slice: Slice {
                id: "s".into(),
                revision: 2,
            },
            scope: vec!["src".into()],
            acceptance: Digest::of(b"a"),
            recipe: Digest::of(b"r"),
            environment: Digest::of(b"e"),
            binding: Some(binding()),
            bounds: ProposalBounds::DEFAULT,
        };
        let proposal = Proposal {
            author: Some(super::super::Author {
                name: "Ada".into(),
                email: "ada@example.org".into(),
                time: 5,
                offset: "-0230".into(),
            }),
            ..Proposal::new(Vec::new())
        };
        let (author, committer) = candidate_idents(&proposal);
        let commit = crate::git_object::Commit {
            tree: ObjectId::from_bytes([2; 20]),
            parents: vec![frozen.base],
            author,
            committer,
            message: candidate_message(
                CandidateProtocol::V4,
                "p",
                &frozen,
                &proposal,
                &Digest::of(b"p"),
            ),
        };
        assert!(is_candidate_commit(&commit, "p"));
        assert!(!is_candidate_commit(&commit, "q"), "another Product");
        let changed = |edit: &dyn Fn(&mut crate::git_object::Commit)| {
            let mut other = commit.clone();
            edit(&mut other);
            is_candidate_commit(&other, "p")
        };
        assert!(!changed(&|c| c.committer = c.author.clone()), "not sf's");
        assert!(!changed(&|c| c.parents.clear()), "no parent");
        assert!(
            !changed(&|c| c.message.push_str("Extra: x\n")),
            "a sixth trailer"
        );
        assert!(!changed(
            &|c| c.message = c.message.replacen("Sf-Slice: s 2", "Sf-Slice: s 02", 1)
        ));
        assert!(
            !changed(&|c| c.message = c.message.replacen("sf: Candidate", "\nsf: Candidate", 1)),
            "a text that starts blank"
        );
    }
}
