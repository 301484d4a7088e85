//! Proposals: a bounded list of whole-entry edits over Git's tree model (a file's text or
//! bytes, its mode, a symbolic link, a deletion), with the message and author Candidate
//! commit M carries, parsed strictly, validated as a whole and applied in memory to a base
//! source before anything is built or written.

use std::collections::BTreeSet;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::canonical::{self, Digest, FieldError, FieldErrorKind, JsonError, Value};
use crate::contracts::tree_path::{self, EntryMode as Mode, TreeRule};
use crate::path_glob::{PathGlob, first_match};

use super::error::{Rejection, RepositoryError};
use super::source::{SourceFile, check_text};

/// The largest proposal document, in bytes: room for the hard cap's content in base64 and
/// JSON's escapes. A proposal is the one record allowed past the codec's 1 MiB.
pub const MAX_PROPOSAL_DOCUMENT_BYTES: usize = 32 * 1024 * 1024;

/// How large a proposal may be: frozen in the Slice, so that every Candidate of one Slice
/// had the same room. Written `{"edits": N, "bytes": N}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposalBounds {
    /// The most edits.
    #[serde(deserialize_with = "canonical::positive")]
    pub edits: u64,
    /// The most bytes of paths, contents and link targets together.
    #[serde(deserialize_with = "canonical::positive")]
    pub bytes: u64,
}

impl ProposalBounds {
    /// Every Slice's bounds unless it raises them: 64 edits and 512 KiB, a change a reviewer
    /// can read.
    pub const DEFAULT: Self = Self {
        edits: 64,
        bytes: 512 * 1024,
    };
    /// The most any Slice may allow: 1,024 edits and 16 MiB (a codemod or a rename across
    /// hundreds of files), so that a proposal stays one bounded document.
    pub const HARD_CAP: Self = Self {
        edits: 1024,
        bytes: 16 * 1024 * 1024,
    };

    /// Checks the bounds against [`Self::HARD_CAP`]; `field` names them in the error.
    pub fn check(&self, field: &str) -> Result<(), RepositoryError> {
        if self.edits == 0 || self.edits > Self::HARD_CAP.edits {
            return Err(RepositoryError::invalid(
                format!("{field}.edits"),
                format!("is 1 to {}", Self::HARD_CAP.edits),
            ));
        }
        if self.bytes == 0 || self.bytes > Self::HARD_CAP.bytes {
            return Err(RepositoryError::invalid(
                format!("{field}.bytes"),
                format!("is 1 to {}", Self::HARD_CAP.bytes),
            ));
        }
        Ok(())
    }
}

impl Default for ProposalBounds {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A regular file's mode as an edit sets it: `"100644"` or `"100755"` (a link is made with
/// `link`, never with a mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMode(pub Mode);

impl Serialize for FileMode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.octal())
    }
}

impl<'de> Deserialize<'de> for FileMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        canonical::checked(deserializer, |word: &String| match word.as_str() {
            "100644" | "100755" => Ok(()),
            _ => Err("must be \"100644\" or \"100755\" (a link is made with link)"),
        })
        .map(|word| {
            FileMode(if word == "100755" {
                Mode::Executable
            } else {
                Mode::Regular
            })
        })
    }
}

/// Binary content: base64 (RFC 4648, padded, no trailing bits) in the record.
#[derive(Clone, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.0.len())
    }
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&base64::engine::general_purpose::STANDARD.encode(&self.0))
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        base64::engine::general_purpose::STANDARD
            .decode(text.as_bytes())
            .map(Bytes)
            .map_err(|_| {
                serde::de::Error::custom("must be base64 (RFC 4648, padded, no trailing bits)")
            })
    }
}

/// One edit of one path. `prior` is `None` to create an entry that must not exist, or the
/// `sha256:` of the current entry's bytes (a link's target bytes). Then exactly one change:
///
/// - `text` (UTF-8) or `bytes` (base64): the whole new content of a regular file, with an
///   optional `mode`; without one, an existing file keeps its mode and a new file is 100644;
/// - `link`: the path becomes a symbolic link to this target;
/// - `mode` alone: the existing file keeps its bytes and takes this mode;
/// - `text: null`: the entry is deleted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEdit {
    /// The path to create, replace or delete; inside the scope and not protected.
    pub path: String,
    /// The `sha256:` of the entry's current bytes, or `None` to create one that must not exist.
    #[serde(deserialize_with = "canonical::nullable")]
    pub prior: Option<Digest>,
    /// `Some(Some(text))` writes text; `Some(None)` (`"text": null`) deletes; `None` (absent)
    /// says neither.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub text: Option<Option<String>>,
    /// Binary content of a regular file.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub bytes: Option<Bytes>,
    /// A symbolic link's target.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub link: Option<String>,
    /// A regular file's mode.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub mode: Option<FileMode>,
}

/// A field that may be absent, and when present may be null: `Some(None)` is `null`.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::deserialize(deserializer).map(Some)
}

/// What an edit does to its path, once its fields are checked ([`FileEdit::change`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change<'a> {
    /// A regular file with these bytes, and the mode if the edit names one.
    Write {
        /// The new bytes.
        content: &'a [u8],
        /// The mode the edit sets, if any.
        mode: Option<Mode>,
    },
    /// A symbolic link to this target.
    Link(&'a str),
    /// The existing file's bytes with this mode.
    SetMode(Mode),
    /// No entry.
    Delete,
}

impl FileEdit {
    /// A regular file's whole text, or (`None`) a deletion: the edit of a first proposal.
    pub fn text(path: impl Into<String>, prior: Option<Digest>, text: Option<String>) -> Self {
        Self {
            path: path.into(),
            prior,
            text: Some(text),
            bytes: None,
            link: None,
            mode: None,
        }
    }

    /// A regular file's whole bytes.
    pub fn bytes(path: impl Into<String>, prior: Option<Digest>, bytes: Vec<u8>) -> Self {
        Self {
            text: None,
            bytes: Some(Bytes(bytes)),
            ..Self::text(path, prior, None)
        }
    }

    /// A symbolic link to `target`.
    pub fn link(path: impl Into<String>, prior: Option<Digest>, target: impl Into<String>) -> Self {
        Self {
            text: None,
            link: Some(target.into()),
            ..Self::text(path, prior, None)
        }
    }

    /// A mode for the existing file, keeping its bytes.
    pub fn mode(path: impl Into<String>, prior: Digest, mode: Mode) -> Self {
        Self {
            text: None,
            mode: Some(FileMode(mode)),
            ..Self::text(path, Some(prior), None)
        }
    }

    /// The same edit, setting `mode` too.
    pub fn with_mode(self, mode: Mode) -> Self {
        Self {
            mode: Some(FileMode(mode)),
            ..self
        }
    }

    /// What the edit does, or the rule its fields break.
    pub fn change(&self) -> Result<Change<'_>, (Rejection, &'static str)> {
        let text = self.text.as_ref();
        let contents = [
            matches!(text, Some(Some(_))),
            self.bytes.is_some(),
            self.link.is_some(),
        ]
        .iter()
        .filter(|given| **given)
        .count();
        let mode = self.mode.map(|mode| mode.0);
        let conflict = (
            Rejection::AmbiguousEdit,
            "an edit holds one of text, bytes or link (a mode only with text or bytes), or \
             text null alone to delete",
        );
        if contents > 1 {
            return Err(conflict);
        }
        match (text, &self.bytes, &self.link, mode) {
            (Some(Some(text)), None, None, mode) => Ok(Change::Write {
                content: text.as_bytes(),
                mode,
            }),
            (None, Some(bytes), None, mode) => Ok(Change::Write {
                content: &bytes.0,
                mode,
            }),
            (None, None, Some(target), None) => Ok(Change::Link(target)),
            (None, None, None, Some(mode)) => Ok(Change::SetMode(mode)),
            (Some(None), None, None, None) => Ok(Change::Delete),
            (None, None, None, None) => Err((
                Rejection::MissingField,
                "an edit holds text, bytes, link or mode (text null deletes)",
            )),
            _ => Err(conflict),
        }
    }
}

/// The title and body of Candidate commit M.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposalMessage {
    /// One line: 1 to 200 bytes, no control character, no white space at either end.
    pub title: String,
    /// Paragraphs after the title: at most 64 KiB, no control character but newline and tab,
    /// no white space at either end.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub body: Option<String>,
}

/// Who wrote the change, and when: M's author line, `name <email> time offset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Author {
    /// 1 to 256 bytes, no `<`, `>` or control character, no white space at either end.
    pub name: String,
    /// 1 to 256 bytes, no `<`, `>`, white space or control character.
    pub email: String,
    /// Seconds since the epoch (0 to 2^53 − 1).
    pub time: u64,
    /// The time-zone offset, `+HHMM` or `-HHMM` (hours to 14, minutes to 59).
    pub offset: String,
}

impl Author {
    /// The author line as a commit writes it.
    pub fn line(&self) -> String {
        format!(
            "{} <{}> {} {}",
            self.name, self.email, self.time, self.offset
        )
    }

    /// Checks the author against its rules; the error is the rule broken.
    pub fn check(&self) -> Result<(), &'static str> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= 256
            && self.name.trim() == self.name
            && !self
                .name
                .chars()
                .any(|c| c == '<' || c == '>' || c.is_control());
        if !name_ok {
            return Err(
                "author.name is 1 to 256 bytes, with no <, > or control character and \
                        no white space at either end",
            );
        }
        let email_ok = !self.email.is_empty()
            && self.email.len() <= 256
            && !self
                .email
                .chars()
                .any(|c| c == '<' || c == '>' || c.is_whitespace() || c.is_control());
        if !email_ok {
            return Err(
                "author.email is 1 to 256 bytes, with no <, >, white space or control \
                        character",
            );
        }
        if self.time > canonical::MAX_SAFE_INTEGER as u64 {
            return Err("author.time is 0 to 2^53 - 1 seconds since the epoch");
        }
        let offset = self.offset.as_bytes();
        let digits_ok = offset.len() == 5
            && (offset[0] == b'+' || offset[0] == b'-')
            && offset[1..].iter().all(u8::is_ascii_digit);
        let in_range = digits_ok && {
            let hours = (offset[1] - b'0') * 10 + (offset[2] - b'0');
            let minutes = (offset[3] - b'0') * 10 + (offset[4] - b'0');
            hours <= 14 && minutes <= 59
        };
        if !in_range {
            return Err("author.offset is +HHMM or -HHMM, hours at most 14, minutes at most 59");
        }
        Ok(())
    }
}

impl ProposalMessage {
    /// Checks the message against its rules; the error is the rule broken.
    pub fn check(&self) -> Result<(), &'static str> {
        let title_ok = !self.title.is_empty()
            && self.title.len() <= 200
            && self.title.trim() == self.title
            && !self.title.chars().any(char::is_control);
        if !title_ok {
            return Err(
                "message.title is one line of 1 to 200 bytes, with no control character \
                        and no white space at either end",
            );
        }
        if let Some(body) = &self.body {
            let body_ok = !body.is_empty()
                && body.len() <= 64 * 1024
                && body.trim() == body
                && !body
                    .chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\t');
            if !body_ok {
                return Err(
                    "message.body is 1 byte to 64 KiB, with no control character but \
                            newline and tab, and no white space at either end",
                );
            }
        }
        Ok(())
    }
}

/// A proposal: 1 to its bounds' edits, and optionally the message and author of M. Its
/// record lists the edits sorted by path, so that the same edits listed in another order are
/// the same proposal; a proposal without a message or author has the record of a first
/// proposal (`{"edits": […]}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    /// The edits, in any order; at most one per path (compared ignoring case).
    #[serde(serialize_with = "sorted_by_path")]
    pub edits: Vec<FileEdit>,
    /// M's title and body; without one, M's title names the Slice.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub message: Option<ProposalMessage>,
    /// M's author; without one, M's author is sf's identity at time 0.
    #[serde(
        default,
        deserialize_with = "canonical::optional",
        skip_serializing_if = "Option::is_none"
    )]
    pub author: Option<Author>,
}

fn sorted_by_path<S: Serializer>(edits: &[FileEdit], serializer: S) -> Result<S::Ok, S::Error> {
    let mut sorted: Vec<&FileEdit> = edits.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    serializer.collect_seq(sorted)
}

impl Proposal {
    /// A proposal of `edits` with no message or author.
    pub fn new(edits: Vec<FileEdit>) -> Self {
        Self {
            edits,
            message: None,
            author: None,
        }
    }

    /// The proposal's canonical record: edits sorted by path.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a proposal holds only strings and integers")
    }

    /// The proposal's canonical bytes, within [`MAX_PROPOSAL_DOCUMENT_BYTES`].
    pub fn to_bytes(&self) -> Result<Vec<u8>, RepositoryError> {
        canonical::to_canonical_bytes_within(self, MAX_PROPOSAL_DOCUMENT_BYTES).map_err(|error| {
            RepositoryError::rejected(
                Rejection::ProposalTooLarge,
                "proposal",
                format!("its canonical JSON fits {MAX_PROPOSAL_DOCUMENT_BYTES} bytes: {error}"),
            )
        })
    }
}

fn rejected_field(error: FieldError) -> RepositoryError {
    let reason = match error.kind {
        FieldErrorKind::Unknown => Rejection::UnknownField,
        FieldErrorKind::Missing => Rejection::MissingField,
        FieldErrorKind::Json(JsonError::InvalidUtf8) => Rejection::InvalidUtf8,
        FieldErrorKind::Json(JsonError::DuplicateKey { .. }) => Rejection::DuplicateKey,
        FieldErrorKind::Json(JsonError::TooLarge { .. }) => Rejection::ProposalTooLarge,
        FieldErrorKind::Json(_) | FieldErrorKind::NotCanonical => Rejection::InvalidJson,
        _ => Rejection::WrongType,
    };
    RepositoryError::rejected(reason, error.field, error.rule)
}

/// Parses a proposal from JSON bytes (any white space and key order, at most
/// [`MAX_PROPOSAL_DOCUMENT_BYTES`]): `{"edits": […], "message"?, "author"?}` and nothing
/// else. Shape only; [`validate_proposal`] and the seal check the rest.
pub fn parse_proposal(bytes: &[u8]) -> Result<Proposal, RepositoryError> {
    canonical::from_slice_within(bytes, "proposal", MAX_PROPOSAL_DOCUMENT_BYTES)
        .map_err(rejected_field)
}

/// Whether `path` is inside `scope`: it equals a scope entry or sits below one.
pub fn in_scope(path: &str, scope: &[String]) -> bool {
    scope.iter().any(|entry| {
        path == entry
            || path
                .strip_prefix(entry.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// Refuses the first of `paths` (a proposal's edits) that one of the Slice's `protected`
/// patterns matches: no proposal may create, change or delete a protected path, even inside
/// the scope.
pub fn check_protected<'a>(
    paths: impl IntoIterator<Item = &'a str>,
    protected: &[PathGlob],
) -> Result<(), RepositoryError> {
    for path in paths {
        if let Some(pattern) = first_match(protected, path) {
            return Err(RepositoryError::rejected(
                Rejection::ProtectedPath,
                format!("proposal edit {path}"),
                format!(
                    "the Slice protects \"{pattern}\": no proposal may create, change or \
                     delete it, even inside the scope"
                ),
            ));
        }
    }
    Ok(())
}

/// The most constructs a Slice may forbid, and the longest one, in bytes.
pub const MAX_FORBIDDEN: usize = 64;
/// The longest forbidden construct, in bytes.
pub const MAX_FORBIDDEN_BYTES: usize = 256;

/// Checks a Slice's forbidden constructs: at most [`MAX_FORBIDDEN`], each 1 to
/// [`MAX_FORBIDDEN_BYTES`] bytes without a control character, none twice.
pub fn check_forbidden_list(forbidden: &[String]) -> Result<(), RepositoryError> {
    if forbidden.len() > MAX_FORBIDDEN {
        return Err(RepositoryError::invalid(
            "frozen.forbidden",
            "holds at most 64 constructs",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (at, construct) in forbidden.iter().enumerate() {
        if construct.is_empty()
            || construct.len() > MAX_FORBIDDEN_BYTES
            || construct.chars().any(char::is_control)
            || !seen.insert(construct)
        {
            return Err(RepositoryError::invalid(
                format!("frozen.forbidden[{at}]"),
                "a forbidden construct is 1 to 256 bytes without a control character, listed \
                 once",
            ));
        }
    }
    Ok(())
}

/// Refuses the first edit whose new content holds one of the `forbidden` constructs more
/// often than the content it replaces: each of `edits` is a path with its bytes before and
/// after (empty for an entry that is absent). A proposal may keep what the base holds, never
/// add one. Content is compared as bytes, whatever the entry's mode.
pub fn check_forbidden<'a>(
    edits: impl IntoIterator<Item = (&'a str, &'a [u8], &'a [u8])>,
    forbidden: &[String],
) -> Result<(), RepositoryError> {
    if forbidden.is_empty() {
        return Ok(());
    }
    let count = |haystack: &[u8], needle: &[u8]| {
        haystack
            .windows(needle.len())
            .filter(|window| *window == needle)
            .count()
    };
    for (path, before, after) in edits {
        for construct in forbidden {
            let needle = construct.as_bytes();
            if count(after, needle) > count(before, needle) {
                return Err(RepositoryError::rejected(
                    Rejection::ForbiddenConstruct,
                    format!("proposal edit {path}"),
                    format!(
                        "adds {construct:?}, which the Slice forbids a proposal to add (a \
                         construct that could make an in-process test run pass without its \
                         tests passing)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Validates a proposal on its own (without a base): edit count, paths, each edit's one
/// change, texts, duplicates, scope, size against `bounds`, and the message and author.
/// Returns the proposal's digest.
pub fn validate_proposal(
    proposal: &Proposal,
    scope: &[String],
    bounds: &ProposalBounds,
) -> Result<Digest, RepositoryError> {
    validated_bytes(proposal, scope, bounds).map(|bytes| Digest::of(&bytes))
}

/// [`validate_proposal`], giving the proposal's canonical bytes (what the seal stores).
#[doc(hidden)]
pub fn validated_bytes(
    proposal: &Proposal,
    scope: &[String],
    bounds: &ProposalBounds,
) -> Result<Vec<u8>, RepositoryError> {
    let edits = &proposal.edits;
    if edits.is_empty() {
        return Err(RepositoryError::rejected(
            Rejection::NoEdits,
            "proposal.edits",
            "a proposal holds at least one edit",
        ));
    }
    if edits.len() as u64 > bounds.edits {
        return Err(RepositoryError::rejected(
            Rejection::TooManyEdits,
            "proposal.edits",
            format!(
                "a proposal holds at most {} edits (the Slice's bound)",
                bounds.edits
            ),
        ));
    }
    if let Some(message) = &proposal.message {
        message.check().map_err(|rule| {
            RepositoryError::rejected(Rejection::InvalidMessage, "proposal.message", rule)
        })?;
    }
    if let Some(author) = &proposal.author {
        author.check().map_err(|rule| {
            RepositoryError::rejected(Rejection::InvalidAuthor, "proposal.author", rule)
        })?;
    }
    let mut seen = BTreeSet::new();
    let mut proposal_bytes = 0u64;
    for (at, edit) in edits.iter().enumerate() {
        let field = format!("proposal.edits[{at}] ({})", edit.path);
        let change = edit
            .change()
            .map_err(|(reason, rule)| RepositoryError::rejected(reason, &field, rule))?;
        let leaf = match change {
            Change::Link(_) => Mode::Symlink,
            _ => Mode::Regular,
        };
        tree_path::check_path(&edit.path, Some(leaf)).map_err(|rule| {
            RepositoryError::rejected(
                Rejection::Tree(TreeRule::Path(rule)),
                &field,
                rule.describe(),
            )
        })?;
        if !seen.insert(edit.path.to_ascii_lowercase()) {
            return Err(RepositoryError::rejected(
                Rejection::DuplicatePath,
                &field,
                "each path appears once in a proposal (compared ignoring case)",
            ));
        }
        if !in_scope(&edit.path, scope) {
            return Err(RepositoryError::rejected(
                Rejection::OutsideScope,
                &field,
                "every edit equals a scope entry or sits below one",
            ));
        }
        let content = match change {
            Change::Delete | Change::SetMode(_) if edit.prior.is_none() => {
                return Err(RepositoryError::rejected(
                    Rejection::EmptyEdit,
                    &field,
                    "a deletion or a mode change names its prior: an edit creates, replaces or \
                     deletes an entry",
                ));
            }
            Change::Write { content, .. } => content,
            Change::Link(target) => target.as_bytes(),
            Change::SetMode(_) | Change::Delete => &[],
        };
        if let Some(Some(text)) = &edit.text {
            check_text(text)
                .map_err(|(reason, rule)| RepositoryError::rejected(reason, &field, rule))?;
        }
        proposal_bytes += (edit.path.len() + content.len()) as u64;
    }
    if proposal_bytes > bounds.bytes {
        return Err(RepositoryError::rejected(
            Rejection::ProposalTooLarge,
            "proposal",
            format!(
                "a proposal's paths, contents and link targets hold at most {} bytes together \
                 (the Slice's bound)",
                bounds.bytes
            ),
        ));
    }
    proposal.to_bytes()
}

/// One edit resolved against its base: the path's entry before (`None` when the edit
/// creates it) and after (`None` when it deletes it).
#[derive(Clone, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub struct Resolved {
    /// The path the edit touches.
    pub path: String,
    /// The entry in the base.
    pub prior: Option<SourceFile>,
    /// The entry the edit leaves.
    pub next: Option<SourceFile>,
}

/// Resolves every edit of `proposal` against the base, whose entry at a path `current`
/// gives (a file or a link; `None` for a path that is no leaf of the base): each `prior`
/// checked, each change made, each rule of one edit applied (`file-exists`, `absent-file`,
/// `wrong-prior`, `wrong-kind`, `no-change`). The tree as a whole is the caller's to check.
/// Paths are distinct (the proposal's own rule), so each edit is resolved on its own.
#[doc(hidden)]
pub fn resolve_edits<'f>(
    current: impl Fn(&str) -> Option<&'f SourceFile>,
    proposal: &Proposal,
) -> Result<Vec<Resolved>, RepositoryError> {
    let mut resolved = Vec::with_capacity(proposal.edits.len());
    for (at, edit) in proposal.edits.iter().enumerate() {
        let field = format!("proposal.edits[{at}] ({})", edit.path);
        let rejected = |reason, rule: &str| Err(RepositoryError::rejected(reason, &field, rule));
        let change = edit
            .change()
            .map_err(|(reason, rule)| RepositoryError::rejected(reason, &field, rule))?;
        let current = current(edit.path.as_str());
        match (&edit.prior, current) {
            (None, Some(_)) => {
                return rejected(
                    Rejection::FileExists,
                    "prior null creates an entry, and this path exists",
                );
            }
            (Some(_), None) => {
                return rejected(
                    Rejection::AbsentFile,
                    "prior names an entry that does not exist",
                );
            }
            (Some(prior), Some(file)) if *prior != file.sha256 => {
                return Err(RepositoryError::rejected(
                    Rejection::WrongPrior,
                    &field,
                    format!("prior must be the current entry's sha256, {}", file.sha256),
                ));
            }
            _ => {}
        }
        let next = match change {
            Change::Delete => None,
            Change::Write { content, mode } => {
                // Without a mode, a file keeps its own; a new file, or a link replaced by a
                // file, is 100644.
                let mode = mode.unwrap_or(match current.map(|file| file.mode) {
                    Some(Mode::Executable) => Mode::Executable,
                    _ => Mode::Regular,
                });
                Some((mode, content.to_vec()))
            }
            Change::Link(target) => Some((Mode::Symlink, target.as_bytes().to_vec())),
            Change::SetMode(mode) => match current {
                Some(file) if file.mode != Mode::Symlink => Some((mode, file.content.clone())),
                _ => {
                    return rejected(
                        Rejection::WrongKind,
                        "a mode edit names a regular file (a link is replaced with link, text \
                         or bytes)",
                    );
                }
            },
        };
        if let (Some(file), Some((mode, content))) = (current, &next)
            && file.mode == *mode
            && file.content == *content
        {
            return rejected(
                Rejection::NoChange,
                "the edit leaves the entry as it is (the same mode and bytes)",
            );
        }
        resolved.push(Resolved {
            path: edit.path.clone(),
            prior: current.cloned(),
            next: next.map(|(mode, content)| SourceFile::new(edit.path.clone(), mode, content)),
        });
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_forbidden_construct_may_be_kept_never_added() {
        let forbidden = vec!["os._exit".to_owned(), "atexit".to_owned()];
        let check = |before: &str, after: &str| {
            check_forbidden([("m.py", before.as_bytes(), after.as_bytes())], &forbidden)
        };
        assert!(check("x = 1\n", "x = 2\n").is_ok());
        assert!(
            check("os._exit(1)\n", "os._exit(1)\nx = 2\n").is_ok(),
            "kept"
        );
        let error = check("os._exit(1)\n", "os._exit(1)\nos._exit(0)\n").unwrap_err();
        assert_eq!(error.code(), "rejected");
        assert!(error.to_string().contains("forbidden-construct"), "{error}");
        assert!(check("", "import atexit\n").is_err(), "a new file adds it");
        assert!(check_forbidden([("m.py", &b""[..], &b"atexit"[..])], &[]).is_ok());
        for bad in [
            vec![String::new()],
            vec!["a".into(), "a".into()],
            vec!["a\nb".into()],
        ] {
            assert!(check_forbidden_list(&bad).is_err(), "{bad:?}");
        }
    }

    use super::*;

    #[test]
    fn parse_is_strict() {
        let good = br#"{"edits":[{"path":"a","prior":null,"text":"x"}]}"#;
        assert_eq!(parse_proposal(good).unwrap().edits.len(), 1);
        let cases: &[(&[u8], Rejection)] = &[
            (br#"{"edits":[],"passed":true}"#, Rejection::UnknownField),
            (
                br#"{"edits":[{"path":"a","prior":null,"bytes":"eA"}]}"#,
                Rejection::WrongType,
            ),
            (
                br#"{"edits":[{"path":"a","prior":null,"mode":"120000"}]}"#,
                Rejection::WrongType,
            ),
            (
                br#"{"edits":[],"message":{"body":"b"}}"#,
                Rejection::MissingField,
            ),
            (br#"{"edits":[],"author":null}"#, Rejection::WrongType),
            (
                br#"{"edits":[{"path":1,"prior":null,"text":"x"}]}"#,
                Rejection::WrongType,
            ),
            (
                br#"{"edits":[{"path":"a","prior":"sha256:AB","text":"x"}]}"#,
                Rejection::WrongType,
            ),
            (br#"{"edits":[],"edits":[]}"#, Rejection::DuplicateKey),
            (
                b"{\"edits\":[{\"path\":\"a\",\"prior\":null,\"text\":\"\xff\"}]}",
                Rejection::InvalidUtf8,
            ),
            (b"{\"edits\":", Rejection::InvalidJson),
        ];
        for (bytes, reason) in cases {
            assert_eq!(
                parse_proposal(bytes).unwrap_err().rejection(),
                Some(*reason),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn digest_ignores_edit_order() {
        let a = FileEdit::text("a", None, Some("1".into()));
        let b = FileEdit::bytes("b", None, vec![0, 1, 2]);
        let scope = vec!["a".to_owned(), "b".to_owned()];
        let bounds = ProposalBounds::DEFAULT;
        let one =
            validate_proposal(&Proposal::new(vec![a.clone(), b.clone()]), &scope, &bounds).unwrap();
        let two = validate_proposal(&Proposal::new(vec![b, a]), &scope, &bounds).unwrap();
        assert_eq!(one, two);
    }

    #[test]
    fn an_edit_holds_exactly_one_change() {
        let prior = Some(Digest::of(b"x"));
        let both = FileEdit {
            link: Some("t".into()),
            ..FileEdit::text("a", prior.clone(), Some("x".into()))
        };
        let link_with_mode = FileEdit::link("a", prior.clone(), "t").with_mode(Mode::Executable);
        let delete_with_mode = FileEdit::text("a", prior.clone(), None).with_mode(Mode::Regular);
        let nothing = FileEdit {
            text: None,
            ..FileEdit::text("a", prior.clone(), None)
        };
        for (edit, reason) in [
            (both, Rejection::AmbiguousEdit),
            (link_with_mode, Rejection::AmbiguousEdit),
            (delete_with_mode, Rejection::AmbiguousEdit),
            (nothing, Rejection::MissingField),
        ] {
            assert_eq!(edit.change().unwrap_err().0, reason, "{edit:?}");
        }
        let text = FileEdit::text("a", None, Some("x".into())).with_mode(Mode::Executable);
        assert_eq!(
            text.change(),
            Ok(Change::Write {
                content: b"x",
                mode: Some(Mode::Executable)
            })
        );
        // A first proposal's record is unchanged: a deletion is still `"text": null`.
        let deletion = Proposal::new(vec![FileEdit::text("a", prior, None)]);
        assert_eq!(
            String::from_utf8(deletion.to_bytes().unwrap()).unwrap(),
            format!(
                r#"{{"edits":[{{"path":"a","prior":"{}","text":null}}]}}"#,
                Digest::of(b"x")
            )
        );
    }
}
