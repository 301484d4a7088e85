//! The generated repositories of the scale benchmarks (`seal_scale`, `tree_scale`): a
//! deterministic base of any size, the proposals that edit it, and what every benchmark
//! prints (medians, a process's peak resident memory).

use std::error::Error;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use sf_host::canonical::Digest;
use sf_host::contracts::ObjectStoreFactory;
use sf_host::contracts::tree_path::EntryMode;
use sf_host::git_object::ObjectId;
use sf_host::repository::{
    CreateRepository, FileEdit, FrozenInputs, InitialBase, Proposal, ProposalBounds, Repository,
    RepositoryIdentity, RepositoryOptions, Slice, SliceBinding, SourceFile, create_repository,
    open_repository,
};

/// File `i`'s path: 1,000 files per top directory, 100 per subdirectory.
pub fn path_of(i: usize) -> String {
    format!("src/d{:03}/s{}/f{i:06}.txt", i / 1000, (i / 100) % 10)
}

/// File `i`'s deterministic text, exactly `bytes` long.
pub fn content_of(i: usize, bytes: usize) -> Vec<u8> {
    let mut content = Vec::with_capacity(bytes + 64);
    let mut line = 0usize;
    while content.len() < bytes {
        // A cheap mix of the numbers, so that files and lines differ like source text does.
        let mix = (i as u64 ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(line as u64 + 1) >> 17;
        content.extend_from_slice(format!("file {i} line {line}: {mix:x}\n").as_bytes());
        line += 1;
    }
    content.truncate(bytes);
    content
}

/// Creates an owned repository at `path` whose initial commit holds `files` generated files
/// of `file_bytes` bytes each.
pub fn create_generated(
    factory: &dyn ObjectStoreFactory,
    path: &Path,
    files: usize,
    file_bytes: usize,
) -> Result<RepositoryIdentity, Box<dyn Error>> {
    Ok(create_repository(
        factory,
        &CreateRepository {
            path: path.to_str().ok_or("a UTF-8 path")?.to_owned(),
            product_id: "bench".into(),
            target_ref: "refs/heads/main".into(),
            base: InitialBase::Files(
                (0..files)
                    .map(|i| {
                        SourceFile::new(path_of(i), EntryMode::Regular, content_of(i, file_bytes))
                    })
                    .collect(),
            ),
            settings: Default::default(),
        },
        &options(),
    )?)
}

/// The options of every repository handle of a benchmark: the bound on each store operation
/// raised to 30 minutes, so that a slow store gives a number, not a timeout.
pub fn options() -> RepositoryOptions {
    RepositoryOptions {
        git_timeout: Duration::from_secs(1800),
        ..RepositoryOptions::default()
    }
}

/// Opens the owned repository `identity` with [`options`].
pub fn open(
    factory: &dyn ObjectStoreFactory,
    identity: &RepositoryIdentity,
) -> Result<Repository, Box<dyn Error>> {
    Ok(open_repository(factory, identity, options())?)
}

/// The frozen inputs every seal is sealed for: scope `src`, room for 64 edits of any size.
pub fn frozen(base: ObjectId) -> FrozenInputs {
    FrozenInputs {
        forbidden: Vec::new(),
        closed_paths: Default::default(),
        base,
        slice: Slice {
            id: "scale".into(),
            revision: 1,
        },
        scope: vec!["src".into()],
        acceptance: Digest::of(b"acceptance"),
        recipe: Digest::of(b"recipe"),
        environment: Digest::of(b"environment"),
        binding: Some(SliceBinding {
            digest: Digest::of(b"slice"),
            protected: Vec::new(),
        }),
        bounds: ProposalBounds {
            edits: 64,
            bytes: ProposalBounds::HARD_CAP.bytes,
        },
    }
}

/// The files `edits` edits touch in a base of `files`: spread evenly over the tree.
pub fn edited(files: usize, edits: usize) -> impl Iterator<Item = usize> {
    let step = files / edits;
    (0..edits).map(move |k| k * step)
}

/// The new content of file `at` in run `run` of a change of `edits` files: new in every run
/// and every kind of change, so that no seal is a replay.
pub fn new_content(at: usize, file_bytes: usize, run: usize, edits: usize) -> Vec<u8> {
    let mut content = content_of(at, file_bytes);
    content.extend_from_slice(format!("edited in run {run} of {edits} edits\n").as_bytes());
    content
}

/// The proposal of run `run` editing `edits` files of a generated base of `files` files.
pub fn proposal_of(files: usize, file_bytes: usize, edits: usize, run: usize) -> Proposal {
    Proposal::new(
        edited(files, edits)
            .map(|at| {
                FileEdit::bytes(
                    path_of(at),
                    Some(Digest::of(&content_of(at, file_bytes))),
                    new_content(at, file_bytes, run, edits),
                )
            })
            .collect(),
    )
}

/// The median of `values` (the upper one of an even count).
pub fn median(values: &[Duration]) -> Duration {
    let mut values = values.to_vec();
    values.sort();
    values[values.len() / 2]
}

/// This process's peak resident memory so far (`VmHWM`), in KiB.
pub fn peak_resident_kib() -> Result<u64, Box<dyn Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    Ok(status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().strip_suffix("kB"))
        .ok_or("no VmHWM")?
        .trim()
        .parse()?)
}

/// Runs this program again as `--child ARGS…`, which prints `<microseconds> <VmHWM KiB>` and
/// then what else it gives: the time, the peak (KiB) and the rest of the line's fields.
pub fn run_child(
    args: impl IntoIterator<Item = impl AsRef<OsStr>>,
) -> Result<(Duration, u64, Vec<String>), Box<dyn Error>> {
    let output = Command::new(std::env::current_exe()?)
        .arg("--child")
        .args(args)
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "the child failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let text = String::from_utf8(output.stdout)?;
    let mut fields = text.split_whitespace();
    let micros: u64 = fields.next().ok_or("no time")?.parse()?;
    let kib: u64 = fields.next().ok_or("no peak")?.parse()?;
    Ok((
        Duration::from_micros(micros),
        kib,
        fields.map(str::to_owned).collect(),
    ))
}
