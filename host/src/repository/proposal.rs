//! Proposals: a bounded list of whole-file text edits, parsed strictly, validated as a whole
//! and applied in memory to a base source before anything is built or written.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize, Serializer};

use crate::canonical::{self, Digest, FieldError, FieldErrorKind, JsonError, Value};
use crate::contracts::tree_path::{self, EntryMode as Mode, TreeRule};
use crate::path_glob::{PathGlob, first_match};

use super::error::{Rejection, RepositoryError};
use super::identity::{REPOSITORY_LIMITS, RepositorySettings};
use super::source::{SourceFile, check_resulting_source, check_text};

/// One edit. `prior: None` creates a file that must not exist; otherwise `prior` is the
/// current file's SHA-256. `text: None` deletes the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEdit {
    /// The path to create, replace or delete; inside the scope and not protected.
    pub path: String,
    /// The `sha256:` of the file's current bytes, or `None` to create a file that must not
    /// exist.
    #[serde(deserialize_with = "canonical::nullable")]
    pub prior: Option<Digest>,
    /// The file's whole new text, or `None` to delete it.
    #[serde(deserialize_with = "canonical::nullable")]
    pub text: Option<String>,
}

/// A proposal of 1 to 64 edits. Its record lists the edits sorted by path, so that the same
/// edits listed in another order are the same proposal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Proposal {
    /// The edits, in any order; at most one per path (compared ignoring case).
    #[serde(serialize_with = "sorted_by_path")]
    pub edits: Vec<FileEdit>,
}

fn sorted_by_path<S: Serializer>(edits: &[FileEdit], serializer: S) -> Result<S::Ok, S::Error> {
    let mut sorted: Vec<&FileEdit> = edits.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    serializer.collect_seq(sorted)
}

impl Proposal {
    /// The proposal's canonical record: edits sorted by path.
    pub fn to_value(&self) -> Value {
        canonical::to_value(self).expect("a proposal holds only strings")
    }
}

fn rejected_field(error: FieldError) -> RepositoryError {
    let reason = match error.kind {
        FieldErrorKind::Unknown => Rejection::UnknownField,
        FieldErrorKind::Missing => Rejection::MissingField,
        FieldErrorKind::Json(JsonError::InvalidUtf8) => Rejection::InvalidUtf8,
        FieldErrorKind::Json(JsonError::DuplicateKey { .. }) => Rejection::DuplicateKey,
        FieldErrorKind::Json(_) | FieldErrorKind::NotCanonical => Rejection::InvalidJson,
        _ => Rejection::WrongType,
    };
    RepositoryError::rejected(reason, error.field, error.rule)
}

/// Parses a proposal from JSON bytes: `{"edits":[{"path","prior","text"}…]}` and nothing
/// else. Shape only; [`validate_proposal`] and the seal check the rest.
pub fn parse_proposal(bytes: &[u8]) -> Result<Proposal, RepositoryError> {
    canonical::from_slice(bytes, "proposal").map_err(rejected_field)
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

/// Validates a proposal on its own (without a base): edit count, paths, texts, duplicates,
/// scope and size. Returns the proposal's digest.
pub fn validate_proposal(proposal: &Proposal, scope: &[String]) -> Result<Digest, RepositoryError> {
    let edits = &proposal.edits;
    if edits.is_empty() {
        return Err(RepositoryError::rejected(
            Rejection::NoEdits,
            "proposal.edits",
            "a proposal holds at least one edit",
        ));
    }
    if edits.len() > REPOSITORY_LIMITS.max_edits {
        return Err(RepositoryError::rejected(
            Rejection::TooManyEdits,
            "proposal.edits",
            format!(
                "a proposal holds at most {} edits",
                REPOSITORY_LIMITS.max_edits
            ),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut proposal_bytes = 0usize;
    for (at, edit) in edits.iter().enumerate() {
        let field = format!("proposal.edits[{at}] ({})", edit.path);
        tree_path::check_path(&edit.path, Some(Mode::Regular)).map_err(|rule| {
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
        if edit.prior.is_none() && edit.text.is_none() {
            return Err(RepositoryError::rejected(
                Rejection::EmptyEdit,
                &field,
                "prior and text are not both null: an edit creates, replaces or deletes a file",
            ));
        }
        if let Some(text) = &edit.text {
            check_text(text)
                .map_err(|(reason, rule)| RepositoryError::rejected(reason, &field, rule))?;
        }
        proposal_bytes += edit.path.len() + edit.text.as_ref().map_or(0, String::len);
    }
    if proposal_bytes > REPOSITORY_LIMITS.max_proposal_bytes {
        return Err(RepositoryError::rejected(
            Rejection::ProposalTooLarge,
            "proposal",
            format!(
                "a proposal's paths and texts hold at most {} bytes together",
                REPOSITORY_LIMITS.max_proposal_bytes
            ),
        ));
    }
    canonical::digest_of(proposal).map_err(|error| {
        RepositoryError::invalid(
            "proposal",
            format!("its canonical JSON must fit the 1 MiB bound: {error}"),
        )
    })
}

/// Applies validated edits to the base's files, checking priors, and the resulting source
/// against the supported subset and limits. Returns the new files sorted by path.
pub(crate) fn apply_edits(
    base: &[SourceFile],
    proposal: &Proposal,
    settings: &RepositorySettings,
) -> Result<Vec<SourceFile>, RepositoryError> {
    let mut files: BTreeMap<&str, &SourceFile> =
        base.iter().map(|file| (file.path.as_str(), file)).collect();
    let mut added: Vec<SourceFile> = Vec::new();
    for (at, edit) in proposal.edits.iter().enumerate() {
        let field = format!("proposal.edits[{at}] ({})", edit.path);
        let current = files.get(edit.path.as_str()).copied();
        match (&edit.prior, current) {
            (None, Some(_)) => {
                return Err(RepositoryError::rejected(
                    Rejection::FileExists,
                    &field,
                    "prior null creates a file, and this file exists",
                ));
            }
            (Some(_), None) => {
                return Err(RepositoryError::rejected(
                    Rejection::AbsentFile,
                    &field,
                    "prior names a file that does not exist",
                ));
            }
            (Some(prior), Some(file)) if *prior != file.sha256 => {
                return Err(RepositoryError::rejected(
                    Rejection::WrongPrior,
                    &field,
                    format!("prior must be the current file's sha256, {}", file.sha256),
                ));
            }
            (Some(_), Some(file))
                if file.mode != Mode::Symlink
                    && edit.text.as_deref().map(str::as_bytes) == Some(file.content.as_slice()) =>
            {
                return Err(RepositoryError::rejected(
                    Rejection::NoChange,
                    &field,
                    "the new text equals the current text",
                ));
            }
            _ => {}
        }
        // A text edit of an executable keeps it executable; of a link, makes a regular file.
        let mode = match current.map(|file| file.mode) {
            Some(Mode::Executable) => Mode::Executable,
            _ => Mode::Regular,
        };
        files.remove(edit.path.as_str());
        if let Some(text) = &edit.text {
            added.push(SourceFile::new(
                edit.path.clone(),
                mode,
                text.clone().into_bytes(),
            ));
        }
    }
    let mut result: Vec<SourceFile> = files.into_values().cloned().chain(added).collect();
    result.sort_by(|a, b| a.path.cmp(&b.path));
    check_resulting_source(&result, settings)?;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_is_strict() {
        let good = br#"{"edits":[{"path":"a","prior":null,"text":"x"}]}"#;
        assert_eq!(parse_proposal(good).unwrap().edits.len(), 1);
        let cases: &[(&[u8], Rejection)] = &[
            (br#"{"edits":[],"passed":true}"#, Rejection::UnknownField),
            (
                br#"{"edits":[{"path":"a","prior":null}]}"#,
                Rejection::MissingField,
            ),
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
        let a = FileEdit {
            path: "a".into(),
            prior: None,
            text: Some("1".into()),
        };
        let b = FileEdit {
            path: "b".into(),
            prior: None,
            text: Some("2".into()),
        };
        let scope = vec!["a".to_owned(), "b".to_owned()];
        let one = validate_proposal(
            &Proposal {
                edits: vec![a.clone(), b.clone()],
            },
            &scope,
        )
        .unwrap();
        let two = validate_proposal(&Proposal { edits: vec![b, a] }, &scope).unwrap();
        assert_eq!(one, two);
    }
}
