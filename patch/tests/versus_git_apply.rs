//! Where a hunk lands, compared with `git apply` itself: diffs of random edits (3, 1 or 0
//! lines of context) to files of few distinct lines (so that context matches in several
//! places), applied to the file they were made from and to a file with lines inserted or
//! removed above, between or below the hunks. sf-patch must succeed exactly when `git apply`
//! does, with the same bytes. The `index` lines are dropped for the moved files, since sf-patch
//! (unlike `git apply` on a text file) refuses a pre-image whose blob id is not the diff's.

mod common;

use std::fs;
use std::path::Path;

use common::{MapBase, git, git_command};
use sf_patch::{After, Limits, PatchError, apply_diff};

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % below.max(1)
    }

    fn lines(&mut self, n: usize) -> Vec<String> {
        const WORDS: [&str; 5] = ["a", "b", "{", "}", ""];
        (0..n)
            .map(|_| format!("{}\n", WORDS[self.next(WORDS.len())]))
            .collect()
    }

    /// Replaces, inserts or removes a few runs of lines.
    fn edit(&mut self, lines: &[String]) -> Vec<String> {
        let mut out = lines.to_vec();
        for _ in 0..1 + self.next(3) {
            let at = self.next(out.len() + 1);
            let remove = self.next(3).min(out.len() - at.min(out.len()));
            let count = self.next(3);
            let insert: Vec<String> = (0..count)
                .map(|i| format!("new {i} {}\n", self.next(100)))
                .collect();
            out.splice(at..at + remove, insert);
        }
        out
    }
}

fn text(lines: &[String], newline_at_end: bool) -> Vec<u8> {
    let mut bytes = lines.concat().into_bytes();
    if !newline_at_end && bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    bytes
}

/// `git diff` of `f.txt` from `old` to `new` with `context` lines.
fn make_diff(repo: &Path, old: &[u8], new: &[u8], context: usize) -> Vec<u8> {
    fs::write(repo.join("f.txt"), old).expect("write");
    git(repo, &["add", "f.txt"]);
    fs::write(repo.join("f.txt"), new).expect("write");
    git(repo, &["diff", &format!("-U{context}"), "--", "f.txt"])
}

/// What `git apply` makes of `diff` on a directory holding `f.txt` = `base`.
fn git_apply(dir: &Path, base: &[u8], diff: &[u8]) -> Option<Vec<u8>> {
    fs::write(dir.join("f.txt"), base).expect("write");
    fs::write(dir.join("p.diff"), diff).expect("write");
    let ok = git_command(dir)
        .args(["apply", "p.diff"])
        .stderr(std::process::Stdio::null())
        .status()
        .expect("git apply")
        .success();
    ok.then(|| fs::read(dir.join("f.txt")).expect("read"))
}

/// What sf-patch makes of it; Err(true) when it refused a result whose blob id is not the
/// index line's.
fn sf_apply(base: &[u8], diff: &[u8]) -> Result<Vec<u8>, bool> {
    let mut files = MapBase::default().with("f.txt", base, sf_patch::Mode::Regular);
    let changes = apply_diff(diff, &mut files, &Limits::default())
        .map_err(|e| matches!(e, PatchError::ResultMismatch { .. }))?;
    match &changes[..] {
        [change] => match &change.after {
            After::Entry(entry) => Ok(entry.content.clone()),
            After::Absent => Err(false),
        },
        _ => Err(false),
    }
}

#[test]
fn hunks_land_where_git_apply_puts_them() {
    let repo = tempfile::tempdir().expect("tempdir");
    git(repo.path(), &["init", "-q"]);
    let plain = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng(42);
    let (mut cases, mut applied, mut moved_applied, mut wrong_places) = (0, 0, 0, 0);
    for round in 0..200 {
        let count = 5 + rng.next(30);
        let lines = rng.lines(count);
        let newline_at_end = round % 5 != 0;
        let old = text(&lines, newline_at_end);
        let new = text(&rng.edit(&lines), newline_at_end || round % 10 == 0);
        if old == new {
            continue;
        }
        let context = [3, 3, 1, 0][round % 4];
        let diff = make_diff(repo.path(), &old, &new, context);
        // Unmoved: both must give the new file (git apply refuses -U0 hunks not at the end).
        let expected = git_apply(plain.path(), &old, &diff);
        // Git appends a hunk without context at the end of the file, which a -U0 diff's
        // insertion elsewhere is not: sf-patch applies it as Git does, then refuses the result,
        // whose blob id is not the diff's.
        let wrong_place = expected.as_ref().is_some_and(|e| *e != new);
        let sf = sf_apply(&old, &diff);
        assert!(
            sf.as_ref().ok() == expected.as_ref() || (wrong_place && sf == Err(true)),
            "round {round}, unmoved: sf-patch {:?}, git apply {:?}\nbase {:?}\n{}",
            sf.map(String::from_utf8),
            expected.map(String::from_utf8),
            String::from_utf8_lossy(&old),
            String::from_utf8_lossy(&diff)
        );
        if context > 0 {
            assert_eq!(expected.as_deref(), Some(&new[..]), "round {round}");
        }
        wrong_places += usize::from(wrong_place);
        applied += usize::from(expected.is_some());
        // Moved: lines added or removed somewhere in the base.
        let diff: Vec<u8> = String::from_utf8(diff)
            .expect("UTF-8")
            .lines()
            .filter(|l| !l.starts_with("index "))
            .flat_map(|l| format!("{l}\n").into_bytes())
            .collect();
        let mut moved_lines = lines.clone();
        let at = rng.next(moved_lines.len() + 1);
        if rng.next(2) == 0 {
            let count = 1 + rng.next(4);
            moved_lines.splice(at..at, rng.lines(count));
        } else if at < moved_lines.len() {
            moved_lines.remove(at);
        }
        let moved = text(&moved_lines, newline_at_end);
        let expected = git_apply(plain.path(), &moved, &diff);
        let sf = sf_apply(&moved, &diff).ok();
        assert!(
            sf == expected,
            "round {round}, moved at {at}: sf-patch {:?}, git apply {:?}\nbase {:?}\n{}",
            sf.map(String::from_utf8),
            expected.map(String::from_utf8),
            String::from_utf8_lossy(&moved),
            String::from_utf8_lossy(&diff)
        );
        moved_applied += usize::from(expected.is_some());
        cases += 2;
    }
    eprintln!(
        "{cases} cases; git apply applied {applied} unmoved ({wrong_places} of them -U0 hunks \
         put at the end) and {moved_applied} moved"
    );
    assert!(
        moved_applied > 10,
        "too few moved cases applied to mean anything"
    );
}
