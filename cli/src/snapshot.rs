//! `sf snapshot`: the files of a factory commit, so that a proposal's priors can be written.

use std::path::PathBuf;

use clap::Args;

use sf_app::repo;

use super::common::{CliError, Context, Output, file_entry};

#[derive(Debug, Args)]
pub struct SnapshotArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// A factory commit (40 lowercase hex characters); default: the commit the target names
    #[arg(long, value_name = "OID")]
    commit: Option<String>,
}

pub fn run(context: &Context, args: SnapshotArgs) -> Result<Output, CliError> {
    let snapshot = repo::snapshot(&context.backends, &args.identity, args.commit.as_deref())?;
    let files: Vec<serde_json::Value> = snapshot
        .files
        .iter()
        .map(|file| file_entry(&file.path, file.mode, &file.sha256, file.bytes))
        .collect();
    let mut text = format!("commit {}\ntree   {}\n", snapshot.commit, snapshot.tree);
    for file in &snapshot.files {
        text.push_str(&format!(
            "{}  {:>8}  {}\n",
            file.sha256, file.bytes, file.path
        ));
    }
    Ok(Output {
        json: serde_json::json!({
            "commit": snapshot.commit.to_hex(),
            "tree": snapshot.tree.to_hex(),
            "files": files,
        }),
        text,
    })
}
