//! A sealed Candidate as `seal` and `export` show it: its identities and its edits (never
//! every file: a tree may hold 100,000), and a tree's files as JSON.

use sf_host::repository::{
    ListedFile, ManifestEntry, SealedCandidate, TreeContents, candidate_ref,
};

use crate::common::{Output, file_entry};

/// The entries of a tree, as the JSON output shows them.
pub fn listed_files(files: &[ListedFile]) -> Vec<serde_json::Value> {
    files
        .iter()
        .map(|file| file_entry(&file.path, file.mode, &file.sha256, file.bytes))
        .collect()
}

/// The name and value of the digest that names a Candidate's content: its tree digest
/// (`sf-candidate/4`) or its snapshot digest (before).
pub fn content_field(sealed: &SealedCandidate) -> (&'static str, Option<String>) {
    let name = match sealed.manifest.contents {
        TreeContents::Trees { .. } => "treeDigest",
        _ => "snapshotDigest",
    };
    (name, sealed.content_digest().map(ToString::to_string))
}

/// A sealed Candidate: its identities and its edits.
pub fn sealed(sealed: &SealedCandidate) -> Output {
    let manifest = &sealed.manifest;
    let edits: Vec<serde_json::Value> = manifest
        .edits
        .iter()
        .map(|edit| {
            let entry = |entry: &Option<ManifestEntry>| {
                entry.as_ref().map(|entry| {
                    serde_json::json!({"mode": entry.mode.octal(), "sha256": entry.sha256.to_string()})
                })
            };
            serde_json::json!({"path": edit.path, "prior": entry(&edit.prior), "next": entry(&edit.next)})
        })
        .collect();
    let (content_name, content) = content_field(sealed);
    let mut json = serde_json::json!({
        "digest": sealed.digest.to_string(),
        "protocol": manifest.protocol(),
        "ref": candidate_ref(&sealed.digest).as_str(),
        "commit": manifest.commit.to_hex(),
        "tree": manifest.tree.to_hex(),
        "baseCommit": manifest.base_commit.to_hex(),
        "slice": manifest.binding.as_ref().map(|binding| binding.digest.to_string()),
        "proposalDigest": manifest.proposal_digest.to_string(),
        "edits": edits,
    });
    json[content_name] = content.clone().into();
    let text = format!(
        "sealed Candidate {}\n  commit   {}\n  tree     {}\n  base     {}\n  slice    {} revision {}\n  content  {}\n  edits    {}\n",
        sealed.digest,
        manifest.commit,
        manifest.tree,
        manifest.base_commit,
        manifest.slice.id,
        manifest.slice.revision,
        content.unwrap_or_else(|| "-".into()),
        manifest.edits.len()
    );
    Output { json, text }
}
