//! Applying unified hunks to a file's bytes as `git apply` does: each hunk's pre-image lines
//! (context and removed) must match the file exactly, byte for byte, newlines included; a hunk
//! is looked for first where its header puts it, then ever further below and above (Git's
//! offsets), never with fuzz. A hunk that starts at line 1 (or 0) must match at the start, and
//! one without trailing context at the end of the file. Unlike `git apply`, a hunk is looked
//! for only after the previous one (as `git diff` orders them), which keeps applying linear.

use crate::path::shown_line;
use crate::{Hunk, LineKind, PatchError};

/// How many bytes one file's hunks may compare at places where they then do not match: keeps
/// hostile hunks against a large file of equal lines from taking quadratic time. A diff made
/// against the file spends nothing of it.
const SEARCH_BUDGET: u64 = 1 << 28;

/// Where a hunk must match.
#[derive(Clone, Copy)]
struct Anchor {
    start: bool,
    end: bool,
}

/// Applies the hunks in order to `pre` and returns the post-image (at most `max` bytes).
pub(crate) fn apply_hunks(
    pre: &[u8],
    hunks: &[Hunk],
    path: &str,
    max: u64,
) -> Result<Vec<u8>, PatchError> {
    let lines: Vec<&[u8]> = pre.split_inclusive(|&c| c == b'\n').collect();
    // The image Git patches is `out` (done) followed by `lines[done..]` (untouched).
    let mut out: Vec<&[u8]> = Vec::with_capacity(lines.len());
    let mut done = 0;
    let mut budget = SEARCH_BUDGET;
    for (i, hunk) in hunks.iter().enumerate() {
        let old = side(hunk, LineKind::Added);
        let tail = &lines[done..];
        let anchor = Anchor {
            start: hunk.old_start <= 1,
            end: hunk
                .lines
                .last()
                .is_some_and(|l| l.kind != LineKind::Context),
        };
        let wanted = usize::try_from(hunk.new_start.saturating_sub(1))
            .unwrap_or(usize::MAX)
            .saturating_sub(out.len());
        // The start of the image is in the tail only while nothing has been written.
        let found = if anchor.start && !out.is_empty() {
            None
        } else {
            find(tail, &old, wanted, anchor, &mut budget)
        };
        let Some(pos) = found else {
            let (line, expected, actual) = mismatch(tail, &old, wanted, anchor);
            return Err(PatchError::HunkMismatch {
                path: path.into(),
                hunk: i + 1,
                line: (out.len() + line) as u64,
                expected,
                actual,
            });
        };
        out.extend_from_slice(&tail[..pos]);
        out.extend(side(hunk, LineKind::Removed));
        done += pos + old.len();
    }
    out.extend_from_slice(&lines[done..]);
    let size: u64 = out.iter().map(|l| l.len() as u64).sum();
    if size > max {
        return Err(PatchError::FileTooLarge {
            path: path.into(),
            size,
            limit: max,
        });
    }
    Ok(out.concat())
}

/// The hunk's lines without those of kind `skip`: its pre-image (skip added) or post-image.
fn side(hunk: &Hunk, skip: LineKind) -> Vec<&[u8]> {
    hunk.lines
        .iter()
        .filter(|l| l.kind != skip)
        .map(|l| l.text.as_slice())
        .collect()
}

/// Where `old` matches in `image`: at the start or end when it must, else the nearest match
/// to `wanted`, looking at `wanted`, then one line below, one above, two below, and so on
/// (Git's order, which decides between equally near matches).
fn find(
    image: &[&[u8]],
    old: &[&[u8]],
    wanted: usize,
    anchor: Anchor,
    budget: &mut u64,
) -> Option<usize> {
    let last = image.len().checked_sub(old.len())?;
    if anchor.start || anchor.end {
        let pos = if anchor.start { 0 } else { last };
        let fits = !anchor.end || pos == last;
        return (fits && image[pos..pos + old.len()] == *old).then_some(pos);
    }
    let wanted = wanted.min(last);
    for distance in 0..=last {
        let below = wanted.checked_add(distance).filter(|&p| p <= last);
        let above = wanted.checked_sub(distance).filter(|_| distance > 0);
        if below.is_none() && above.is_none() {
            return None;
        }
        for pos in [below, above].into_iter().flatten() {
            let same = old.iter().zip(&image[pos..]).take_while(|(a, b)| a == b);
            let (count, bytes) = same.fold((0, 0), |(n, b), (a, _)| (n + 1, b + a.len() as u64));
            if count == old.len() {
                return Some(pos);
            }
            *budget = budget.checked_sub(bytes + 1)?;
        }
    }
    None
}

/// For a hunk that matches nowhere: the 1-based line of `image` where it first differs from
/// the file where its header (or anchor) puts it, and the diff's and the file's texts there.
fn mismatch(
    image: &[&[u8]],
    old: &[&[u8]],
    wanted: usize,
    anchor: Anchor,
) -> (usize, String, String) {
    let pos = match () {
        _ if anchor.start => 0,
        _ if anchor.end => image.len().saturating_sub(old.len()),
        _ => wanted.min(image.len()),
    };
    let shown =
        |line: Option<&&[u8]>| line.map_or_else(|| "(end of file)".into(), |l| shown_line(l));
    match (0..old.len()).find(|&i| image.get(pos + i) != Some(&old[i])) {
        Some(i) => (pos + i + 1, shown_line(old[i]), shown(image.get(pos + i))),
        // All of it matched there: the file goes on where the hunk must end it.
        None => (
            pos + old.len() + 1,
            "(end of file)".into(),
            shown(image.get(pos + old.len())),
        ),
    }
}
