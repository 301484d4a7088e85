//! Applying unified hunks to a file's bytes as `git apply` does: each hunk's pre-image lines
//! (context and removed) must match the file exactly, byte for byte, newlines included; a hunk
//! is looked for first where its header puts it, then ever further above and below (Git's
//! offsets), never with fuzz. A hunk that starts at line 1 (or 0) must match at the start, and
//! one without trailing context at the end of the file.

use crate::path::shown_line;
use crate::{Hunk, LineKind, PatchError};

/// How many line comparisons the search for one hunk may make before giving up: keeps a
/// hostile hunk against a large file of equal lines from taking quadratic time.
const SEARCH_BUDGET: u64 = 50_000_000;

/// Applies the hunks in order to `pre` and returns the post-image (at most `max` bytes).
pub(crate) fn apply_hunks(
    pre: &[u8],
    hunks: &[Hunk],
    path: &str,
    max: u64,
) -> Result<Vec<u8>, PatchError> {
    let mut image: Vec<&[u8]> = pre.split_inclusive(|&c| c == b'\n').collect();
    for (i, hunk) in hunks.iter().enumerate() {
        let old = side(hunk, LineKind::Added);
        let new = side(hunk, LineKind::Removed);
        let at_start = hunk.old_start <= 1;
        let at_end = hunk
            .lines
            .last()
            .is_some_and(|l| l.kind != LineKind::Context);
        let wanted = usize::try_from(hunk.new_start.saturating_sub(1)).unwrap_or(usize::MAX);
        let Some(pos) = find(&image, &old, wanted, at_start, at_end) else {
            return Err(mismatch(
                &image,
                &old,
                wanted,
                at_start,
                at_end,
                path,
                i + 1,
            ));
        };
        image.splice(pos..pos + old.len(), new);
    }
    let size: u64 = image.iter().map(|l| l.len() as u64).sum();
    if size > max {
        return Err(PatchError::FileTooLarge {
            path: path.into(),
            size,
            limit: max,
        });
    }
    Ok(image.concat())
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
    at_start: bool,
    at_end: bool,
) -> Option<usize> {
    let last = image.len().checked_sub(old.len())?;
    if at_start || at_end {
        let pos = if at_start { 0 } else { last };
        let fits = !at_end || pos == last;
        return (fits && image[pos..pos + old.len()] == *old).then_some(pos);
    }
    let wanted = wanted.min(last);
    let mut budget = SEARCH_BUDGET;
    for distance in 0..=last {
        let below = wanted.checked_add(distance).filter(|&p| p <= last);
        let above = wanted.checked_sub(distance).filter(|_| distance > 0);
        if below.is_none() && above.is_none() {
            return None;
        }
        for pos in [below, above].into_iter().flatten() {
            let same = old
                .iter()
                .zip(&image[pos..])
                .take_while(|(a, b)| a == b)
                .count();
            if same == old.len() {
                return Some(pos);
            }
            budget = budget.checked_sub(same as u64 + 1)?;
        }
    }
    None
}

/// The error for a hunk that matches nowhere: the first line that differs where the header
/// puts the hunk (or at the start or end of the file, where it must match).
fn mismatch(
    image: &[&[u8]],
    old: &[&[u8]],
    wanted: usize,
    at_start: bool,
    at_end: bool,
    path: &str,
    hunk: usize,
) -> PatchError {
    let pos = match () {
        _ if at_start => 0,
        _ if at_end => image.len().saturating_sub(old.len()),
        _ => wanted.min(image.len()),
    };
    let differs = (0..old.len()).find(|&i| image.get(pos + i) != Some(&old[i]));
    let (index, expected, actual) = match differs {
        Some(i) => (
            i,
            shown_line(old[i]),
            image.get(pos + i).map(|l| shown_line(l)),
        ),
        // All of it matched there: the file goes on where the hunk must end it.
        None => (
            old.len(),
            "(end of file)".to_string(),
            image.get(pos + old.len()).map(|l| shown_line(l)),
        ),
    };
    PatchError::HunkMismatch {
        path: path.into(),
        hunk,
        line: (pos + index + 1) as u64,
        expected,
        actual: actual.unwrap_or_else(|| "(end of file)".into()),
    }
}
