//! Imported bases: a commit of the team's own repository, held byte for byte as a base of
//! an owned repository. sf never rewrites such a commit: its id and tree id in the owned
//! repository are the source's, so a Candidate built on it is a child of the team's real
//! history.
//!
//! What is checked here is what sf relies on in the commit's bytes: that it names one tree
//! (the first header), its parents next, an author and a committer, and that it is bounded.
//! Other headers (an encoding, a signature, a merge tag) are carried as they are.

use crate::git_object::{ObjectId, ObjectKind, object_id};

use super::source::SourceFile;

/// The largest imported commit accepted: far above any real commit with a signature.
pub const MAX_IMPORTED_COMMIT_BYTES: u64 = 1024 * 1024;

/// A commit read from a foreign repository and checked whole: its exact bytes and the files
/// of its tree, every object re-hashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImportedCommit {
    /// The commit's id, in the source and in the owned repository alike.
    pub commit: ObjectId,
    /// The commit's bytes, exactly as the source holds them.
    pub body: Vec<u8>,
    /// The tree the commit names.
    pub tree: ObjectId,
    /// The commit's parents, which the owned repository does not hold: its history begins
    /// at the imported commit (a shallow boundary, in Git's words).
    pub parents: Vec<ObjectId>,
    /// Every leaf of the tree, sorted by path.
    pub files: Vec<SourceFile>,
}

/// The headers of a commit that sf relies on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitHeads {
    /// The tree.
    pub tree: ObjectId,
    /// The parents, in order.
    pub parents: Vec<ObjectId>,
}

/// Reads the headers sf relies on from a commit's bytes: `tree` first, then any `parent`
/// lines, then `author` and `committer` among the other headers, then a blank line. The error
/// says which rule the bytes break.
pub fn commit_heads(body: &[u8]) -> Result<CommitHeads, &'static str> {
    if body.len() as u64 > MAX_IMPORTED_COMMIT_BYTES {
        return Err("a commit is at most 1 MiB");
    }
    let end = body
        .windows(2)
        .position(|pair| pair == b"\n\n")
        .ok_or("a commit's headers end with a blank line")?;
    let headers = std::str::from_utf8(&body[..end]).map_err(|_| "a commit's headers are UTF-8")?;
    let mut lines = headers.split('\n').peekable();
    let tree = lines
        .next()
        .and_then(|line| line.strip_prefix("tree "))
        .and_then(ObjectId::parse_hex)
        .ok_or("a commit's first header is `tree <40 hex>`")?;
    let mut parents = Vec::new();
    while let Some(parent) = lines.peek().and_then(|line| line.strip_prefix("parent ")) {
        parents.push(ObjectId::parse_hex(parent).ok_or("a parent is `parent <40 hex>`")?);
        lines.next();
    }
    let (mut author, mut committer) = (false, false);
    for line in lines {
        if line.starts_with("tree ") || line.starts_with("parent ") {
            return Err("tree and parent headers come first, once each");
        }
        author |= line.starts_with("author ");
        committer |= line.starts_with("committer ");
    }
    if !(author && committer) {
        return Err("a commit has an author and a committer");
    }
    Ok(CommitHeads { tree, parents })
}

impl ImportedCommit {
    /// Checks that the parts agree: the body hashes to the id and names the tree and
    /// parents recorded. (The files were checked against the tree when they were read.)
    pub fn check(&self) -> Result<(), String> {
        check_commit(self.commit, &self.body, self.tree, &self.parents)
    }
}

/// Checks that `body` hashes to `commit` and names `tree` and `parents`.
pub(super) fn check_commit(
    commit: ObjectId,
    body: &[u8],
    tree: ObjectId,
    parents: &[ObjectId],
) -> Result<(), String> {
    if object_id(ObjectKind::Commit, body) != commit {
        return Err(format!("the bytes of commit {commit} do not hash to it"));
    }
    let heads = commit_heads(body).map_err(str::to_owned)?;
    if heads.tree != tree || heads.parents != parents {
        return Err(format!(
            "commit {commit} does not name the recorded tree and parents"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";
    const PARENT: &str = "1111111111111111111111111111111111111111";

    #[test]
    fn real_commit_shapes_are_read() {
        let signed = format!(
            "tree {TREE}\nparent {PARENT}\nparent {PARENT}\nauthor A <a@x> 1 +0100\n\
             committer C <c@x> 2 -0500\nencoding ISO-8859-1\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n \
             abc\n -----END PGP SIGNATURE-----\n\ntitle\n\nbody\n"
        );
        let heads = commit_heads(signed.as_bytes()).unwrap();
        assert_eq!(heads.tree.to_hex(), TREE);
        assert_eq!(heads.parents.len(), 2);
        let root = format!("tree {TREE}\nauthor A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n\nm");
        assert!(commit_heads(root.as_bytes()).unwrap().parents.is_empty());
    }

    #[test]
    fn malformed_commits_are_named() {
        for bad in [
            format!("parent {PARENT}\ntree {TREE}\nauthor a\ncommitter c\n\nm"),
            format!("tree {TREE}\nauthor a\n\nm"),
            format!("tree {TREE}\nauthor a\ncommitter c\nparent {PARENT}\n\nm"),
            format!("tree {TREE}\nauthor a\ncommitter c\nm"),
            "tree xyz\nauthor a\ncommitter c\n\nm".to_owned(),
        ] {
            assert!(commit_heads(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }
}
