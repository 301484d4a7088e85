//! Seal a proposal as a Candidate in a fresh owned repository and export its exact bytes.
//!
//! The program makes a private temporary directory, writes a small source tree into it, creates
//! an owned bare repository from that tree with the git-cli ObjectStore, seals a proposal (one
//! replaced file, one new file) and exports the Candidate again, re-verified. It prints the
//! Candidate digest, the snapshot digest the executor would receive, and each file.
//!
//! Run it with `cargo run -p sf-examples --example seal_and_export`. It needs a root-owned
//! `git` at `/usr/bin/git` or `/usr/local/bin/git`. Everything it makes lives in the temporary
//! directory and is removed when it ends.

use std::error::Error;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sf_git_cli::{GitCliConfig, GitCliFactory};
use sf_host::canonical::Digest;
use sf_host::repository::{
    CreateRepository, FileEdit, FrozenInputs, InitialBase, Proposal, ProposalBounds,
    RepositoryOptions, Slice, SliceBinding, SourceText, create_repository, open_repository,
};

fn main() -> Result<(), Box<dyn Error>> {
    // The repository's parent must be a canonical directory of this user that no one else can
    // write, and the repository path itself canonical: /tmp may be a symlink on some systems,
    // so the path is resolved before it is used.
    let workdir = tempfile::Builder::new().prefix("sf-example-").tempdir()?;
    fs::set_permissions(workdir.path(), fs::Permissions::from_mode(0o700))?;
    let root = workdir.path().canonicalize()?;

    let source_dir = root.join("source");
    write_file(
        &source_dir,
        "README.md",
        "# Greeter\n\nPrints a greeting.\n",
    )?;
    write_file(&source_dir, "src/greeting.txt", "Hello, world.\n")?;
    let files = read_source(&source_dir)?;

    let factory = GitCliFactory::new(GitCliConfig::default())?;
    let identity = create_repository(
        &factory,
        &CreateRepository {
            path: path_text(&root.join("repository"))?,
            product_id: "example-product".into(),
            target_ref: "refs/heads/main".into(),
            base: InitialBase::Files(files.into_iter().map(Into::into).collect()),
            settings: Default::default(),
        },
        &RepositoryOptions::default(),
    )?;
    println!("repository  {}", identity.path);
    println!("initial     {}", identity.initial);

    let repository = open_repository(&factory, &identity, RepositoryOptions::default())?;

    // A replacement names the sha256 of the file it replaces, so a proposal made against an
    // older text is rejected instead of silently overwriting it.
    let base = repository.snapshot(&identity.initial)?;
    let readme = base
        .files
        .iter()
        .find(|file| file.path == "README.md")
        .ok_or("the base has no README.md")?;

    let frozen = FrozenInputs {
        forbidden: Vec::new(),
        closed_paths: Default::default(),
        base: identity.initial,
        slice: Slice {
            id: "example".into(),
            revision: 1,
        },
        // Every edited path must equal a scope entry or sit below one.
        scope: vec!["README.md".into(), "src".into()],
        // Placeholders: this example shows sealing and export alone. A frozen Slice (`sf slice
        // freeze`, sf_host::assurance::SliceRecord) supplies real digests and the Slice's own,
        // and only a Candidate sealed for that Slice is ever collected, judged or integrated.
        acceptance: Digest::of(b"placeholder acceptance record"),
        recipe: Digest::of(b"placeholder recipe record"),
        environment: Digest::of(b"placeholder environment record"),
        binding: Some(SliceBinding {
            digest: Digest::of(b"placeholder slice record"),
            protected: Vec::new(),
        }),
        bounds: ProposalBounds::DEFAULT,
    };
    let proposal = Proposal::new(vec![
        FileEdit::text(
            "README.md",
            Some(readme.sha256.clone()),
            Some("# Greeter\n\nPrints a greeting and a farewell.\n".into()),
        ),
        FileEdit::text("src/farewell.txt", None, Some("Goodbye, world.\n".into())),
    ]);

    let sealed = repository.seal(&frozen, &proposal)?;
    // Export reads everything back from the store and re-verifies it; it is what a later
    // process holding only the digest would do.
    let exported = repository.export_candidate(&sealed.digest)?;
    if exported != sealed {
        return Err("the export differs from what seal returned".into());
    }

    println!("candidate   {}", exported.digest);
    if let Some(content) = exported.content_digest() {
        println!("tree        {content}");
    }
    println!("commit M    {}", exported.manifest.commit);
    // The sealed Candidate names its tree; its files are read from the repository.
    for file in &repository.snapshot(&exported.manifest.commit)?.files {
        println!(
            "  {:<20} {:>6} bytes  {}",
            file.path,
            file.content.len(),
            Digest::of(&file.content)
        );
    }
    Ok(())
}

/// Writes `text` to `dir/relative`, making parent directories.
fn write_file(dir: &Path, relative: &str, text: &str) -> Result<(), Box<dyn Error>> {
    let path = dir.join(relative);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    fs::write(path, text)?;
    Ok(())
}

/// Reads every file below `dir` as a `SourceText`, with `/`-separated relative paths, sorted.
/// Nothing is skipped silently: a file that is not UTF-8, a name that is not UTF-8, and
/// anything that is neither a regular file nor a directory (a symlink, say) is an error.
/// Whether the paths and texts are in sf's supported subset is `create_repository`'s check.
fn read_source(dir: &Path) -> Result<Vec<SourceText>, Box<dyn Error>> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in fs::read_dir(&current)? {
            let path = entry?.path();
            let kind = fs::symlink_metadata(&path)?.file_type();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() {
                let relative = path_text(path.strip_prefix(dir)?)?;
                let bytes = fs::read(&path)?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
                files.push(SourceText {
                    path: relative,
                    text,
                });
            } else {
                return Err(
                    format!("{}: neither a regular file nor a directory", path.display()).into(),
                );
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// A path as UTF-8 text (relative paths come out `/`-separated on Unix).
fn path_text(path: &Path) -> Result<String, Box<dyn Error>> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{}: the path is not UTF-8", path.display()).into())
}
