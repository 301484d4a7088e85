//! `sf export`: a Candidate's files, re-verified, written byte for byte into a new (or empty)
//! directory, appearing whole or not at all, each entry with its mode, through directory
//! descriptors and never through a symbolic link ([`sf_app::export`] says how).

use std::path::PathBuf;

use clap::Args;

use sf_app::export::{ExportRequest, export};

use super::common::{CliError, Context, Output};
use super::render::{content_field, listed_files};

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The repository identity file (from `sf repo create --identity-out`)
    #[arg(long, value_name = "FILE")]
    identity: PathBuf,
    /// The Candidate digest (sha256:…, as `sf seal` printed it)
    #[arg(long, value_name = "DIGEST")]
    candidate: String,
    /// The directory to write the files into: new, or empty
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

pub fn run(context: &Context, args: ExportArgs) -> Result<Output, CliError> {
    let request = ExportRequest {
        identity: args.identity,
        candidate: args.candidate,
        out: args.out,
    };
    let exported = export(&context.backends, &request)?;
    let (sealed, files, out) = (&exported.sealed, &exported.files, &exported.out);
    let (content_name, content) = content_field(sealed);
    let mut json = serde_json::json!({
        "digest": sealed.digest.to_string(),
        "commit": sealed.manifest.commit.to_hex(),
        "tree": sealed.manifest.tree.to_hex(),
        "out": out.display().to_string(),
        "files": listed_files(files),
    });
    json[content_name] = content.into();
    Ok(Output {
        json,
        text: format!(
            "exported Candidate {} ({} files) to {}\n",
            sealed.digest,
            files.len(),
            out.display()
        ),
    })
}
