//! A commit of a Git repository as a proposal's source: what it changed against its first
//! parent, read through the verifying reader, with its message and author.

use std::path::Path;

use sf_host::commit_changes::CommitChanges;
use sf_host::git_source::GitSource;
use sf_host::repository::{Author, ProposalMessage, Repository};

use super::changes::{After, Change};
use crate::error::AppError;
use crate::repo::from_git_message;

/// What a commit gives a proposal.
pub(super) struct FromCommit {
    /// The paths it changed.
    pub changes: Vec<Change>,
    /// Its message, or the rule that leaves it out.
    pub message: Kept<ProposalMessage>,
    /// Its author, or the rule that leaves it out.
    pub author: Kept<Author>,
}

/// The changes, message and author of commit `rev` of the repository at `repo`.
pub(super) fn changes(
    repository: &Repository,
    repo: &Path,
    rev: &str,
) -> Result<FromCommit, AppError> {
    let refused = |error| {
        AppError::new(
            sf_host::git_source::GitSourceError::code(&error),
            format!("--commit {rev}: {}", from_git_message(repo, &error)),
        )
    };
    let limits = repository.identity().settings().limits();
    let mut git = GitSource::open(repo).map_err(refused)?;
    let CommitChanges { head, changes } = git.commit_changes(rev, &limits).map_err(refused)?;
    let changes = changes
        .into_iter()
        .map(|change| Change {
            path: change.path,
            after: match change.after {
                Some((mode, bytes)) => After::Entry(mode, bytes),
                None => After::Absent,
            },
        })
        .collect();
    let (message, author) = message_and_author(&head.body);
    Ok(FromCommit {
        changes,
        message,
        author,
    })
}

/// The commit's message as a proposal's (title and body) and its author, each with the rule
/// it breaks when the proposal's rules do not admit it as it is (it is then left out: a
/// proposal never carries an altered message, and without one M's title names the Slice).
fn message_and_author(body: &[u8]) -> (Kept<ProposalMessage>, Kept<Author>) {
    let text = String::from_utf8_lossy(body);
    let (headers, message) = text.split_once("\n\n").unwrap_or((&text, ""));
    let author = headers
        .lines()
        .find_map(|line| line.strip_prefix("author "))
        .and_then(parse_author)
        .ok_or("the commit's author line is not `Name <email> time offset`")
        .and_then(|author| author.check().map(|()| author));
    let message = message.trim();
    let (title, rest) = message.split_once('\n').unwrap_or((message, ""));
    let rest = rest.trim();
    let message = ProposalMessage {
        title: title.trim().to_owned(),
        body: (!rest.is_empty()).then(|| rest.to_owned()),
    };
    let message = message.check().map(|()| message);
    (message, author)
}

/// A part of the commit kept, or the rule that left it out.
pub(super) type Kept<T> = Result<T, &'static str>;

/// `Name <email> time offset`, as a commit writes its author.
fn parse_author(line: &str) -> Option<Author> {
    let (name, rest) = line.split_once(" <")?;
    let (email, rest) = rest.split_once("> ")?;
    let (time, offset) = rest.split_once(' ')?;
    Some(Author {
        name: name.to_owned(),
        email: email.to_owned(),
        time: time.parse().ok()?,
        offset: offset.to_owned(),
    })
}
