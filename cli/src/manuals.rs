//! `sf completions SHELL` and `sf man`: shell completion scripts and man pages generated from
//! the clap definitions themselves (clap_complete, clap_mangen), so they always describe the
//! parser this binary runs.

use std::path::PathBuf;

use clap::{Args, CommandFactory as _};
use clap_complete::Shell;

use sf_app::files::absolute_new_path;

use super::common::{CliError, Context, Output};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell
    #[arg(value_name = "SHELL")]
    shell: Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write one page per command (sf.1, sf-repo-create.1, …) into this new directory;
    /// without it, sf.1 alone is printed
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

/// `sf completions SHELL`: the script on stdout (`--json`: `{shell, script}`).
pub fn completions(_context: &Context, args: CompletionsArgs) -> Result<Output, CliError> {
    let mut command = super::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "sf", &mut script);
    let script = String::from_utf8(script)
        .map_err(|_| CliError::new("invalid-input", "the completion script is not UTF-8"))?;
    Ok(Output {
        json: serde_json::json!({"shell": args.shell.to_string(), "script": script}),
        text: script,
    })
}

/// `sf man [--out DIR]`.
pub fn man(_context: &Context, args: ManArgs) -> Result<Output, CliError> {
    let command = super::Cli::command();
    let Some(out) = args.out else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .render(&mut page)
            .map_err(|error| CliError::new("write-failed", format!("rendering sf.1: {error}")))?;
        let page = String::from_utf8_lossy(&page).into_owned();
        return Ok(Output {
            json: serde_json::json!({"page": page}),
            text: page,
        });
    };
    let dir = absolute_new_path(&out, "--out")?;
    let failed = |error: std::io::Error| {
        CliError::new(
            "write-failed",
            format!("--out {}: {error}; choose a new directory", dir.display()),
        )
    };
    // A new directory: sf never overwrites pages someone may have edited.
    std::fs::create_dir(&dir).map_err(failed)?;
    clap_mangen::generate_to(command, &dir).map_err(failed)?;
    let mut pages: Vec<String> = std::fs::read_dir(&dir)
        .map_err(failed)?
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .collect();
    pages.sort();
    let mut text = format!("wrote {} man pages to {}\n", pages.len(), dir.display());
    for page in &pages {
        text.push_str(&format!("  {page}\n"));
    }
    Ok(Output {
        json: serde_json::json!({"dir": dir.display().to_string(), "pages": pages}),
        text,
    })
}
