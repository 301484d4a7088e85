//! sf-patch against real history: for a deterministic sample of the non-merge commits of the
//! fixture repositories (every Nth, plus every commit with a rename, a copy, a mode change, a
//! binary file or a symbolic link), the commit's `git diff --binary --full-index -M` against its
//! parent (and, for every 4th sampled commit, its `git format-patch --binary` mail) is applied
//! with sf-patch to the parent's tree, and every change must be exactly what the commit holds
//! (content and mode, or no entry), every path the commit changed covered.
//!
//! Numbers (debug build, this 2-core machine, both fixtures in parallel: about 11 s):
//! requests' main has 4,877 non-merge commits: every 16th (305) plus the special ones not
//! among them make 363 commits checked (90 also as mails), of which 19 have renames, 3 copies,
//! 13 mode changes, 28 binary files (58 literal and 6 delta hunks applied) and 1 symbolic
//! links; typing_extensions' main has 530: every 3rd (177) plus 2 with renames make 179 (44
//! also as mails).

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use common::{CatFile, EMPTY_TREE, TreeBase, check_changes, clone_bundle, git, git_str, tree};
use sf_patch::{BinaryHunk, Body, Limits, Mode, Operation, apply_diff, parse_diff};

/// What kind of special commits were found, for the report.
#[derive(Default, Debug)]
struct Special {
    rename: BTreeSet<String>,
    copy: BTreeSet<String>,
    mode: BTreeSet<String>,
    binary: BTreeSet<String>,
    symlink: BTreeSet<String>,
}

impl Special {
    fn all(&self) -> BTreeSet<String> {
        let sets = [
            &self.rename,
            &self.copy,
            &self.mode,
            &self.binary,
            &self.symlink,
        ];
        sets.into_iter().flatten().cloned().collect()
    }
}

/// The commits whose diffs have a rename or copy, a mode change, a symbolic link or a binary
/// file, from one `git log --raw --numstat` pass.
fn special_commits(repo: &Path) -> Special {
    let log = git_str(
        repo,
        &[
            "log",
            "--no-merges",
            "-M",
            "-C",
            "--raw",
            "--numstat",
            "--format=@%H",
            "main",
        ],
    );
    let mut special = Special::default();
    let mut commit = String::new();
    for line in log.lines() {
        if let Some(hash) = line.strip_prefix('@') {
            commit = hash.to_string();
        } else if let Some(raw) = line.strip_prefix(':') {
            let fields: Vec<&str> = raw.split(['\t', ' ']).collect();
            let (old, new, status) = (fields[0], fields[1], fields[4]);
            if status.starts_with('R') {
                special.rename.insert(commit.clone());
            }
            if status.starts_with('C') {
                special.copy.insert(commit.clone());
            }
            if old != new && old != "000000" && new != "000000" {
                special.mode.insert(commit.clone());
            }
            if old == "120000" || new == "120000" {
                special.symlink.insert(commit.clone());
            }
        } else if line.starts_with("-\t-\t") {
            special.binary.insert(commit.clone());
        }
    }
    special
}

/// How many file patches of each form sf-patch applied.
#[derive(Default, Debug)]
struct Forms {
    files: usize,
    renames: usize,
    copies: usize,
    mode_changes: usize,
    symlinks: usize,
    literals: usize,
    deltas: usize,
}

impl Forms {
    fn count(&mut self, diff: &[u8]) {
        for patch in parse_diff(diff).unwrap_or_default() {
            self.files += 1;
            match patch.operation {
                Operation::Rename => self.renames += 1,
                Operation::Copy => self.copies += 1,
                Operation::Modify if patch.old_mode != patch.new_mode => self.mode_changes += 1,
                _ => {}
            }
            if [patch.old_mode, patch.new_mode].contains(&Some(Mode::Symlink)) {
                self.symlinks += 1;
            }
            match patch.body {
                Body::Binary(b) if matches!(b.forward, BinaryHunk::Literal(_)) => {
                    self.literals += 1
                }
                Body::Binary(_) => self.deltas += 1,
                _ => {}
            }
        }
    }
}

/// Applies one commit's diff (`args` make it) to its parent's tree and checks the result.
fn check_diff(
    repo: &Path,
    cat: &mut CatFile,
    forms: &mut Forms,
    (commit, parent): (&str, &str),
    form: &str,
    args: &[&str],
) {
    let diff = git(repo, args);
    forms.count(&diff);
    let before = tree(repo, parent);
    let after = tree(repo, commit);
    let what = format!("{form} of {commit}");
    let mut base = TreeBase {
        tree: &before,
        cat: &mut *cat,
    };
    let changes = match apply_diff(&diff, &mut base, &Limits::default()) {
        Ok(changes) => changes,
        Err(e) if before == after => {
            // An empty diff (a commit that changes nothing) is refused as holding no patch.
            assert!(matches!(e, sf_patch::PatchError::NoPatches), "{what}: {e}");
            return;
        }
        Err(e) => panic!("{what}: {e}"),
    };
    check_changes(&what, &changes, &before, &after, cat);
}

/// Checks a fixture; returns (commits checked, special commits, mails checked, forms applied).
fn check_fixture(bundle: &str, every: usize) -> (usize, Special, usize, Forms) {
    let (_tmp, repo) = clone_bundle(bundle);
    let commits = git_str(
        &repo,
        &["rev-list", "--no-merges", "--reverse", "--parents", "main"],
    );
    let special = special_commits(&repo);
    let wanted = special.all();
    let mut cat = CatFile::new(&repo);
    let (mut checked, mut mails, mut forms) = (0, 0, Forms::default());
    for (i, line) in commits.lines().enumerate() {
        let mut ids = line.split(' ');
        let commit = ids.next().expect("commit id");
        let parent = ids.next().unwrap_or(EMPTY_TREE);
        if i % every != 0 && !wanted.contains(commit) {
            continue;
        }
        let diff_args = [
            "diff",
            "--binary",
            "--full-index",
            "-M",
            "-C",
            parent,
            commit,
        ];
        check_diff(
            &repo,
            &mut cat,
            &mut forms,
            (commit, parent),
            "git diff",
            &diff_args,
        );
        checked += 1;
        if checked % 4 == 0 && parent != EMPTY_TREE {
            let mail_args = ["format-patch", "-1", "--binary", "--stdout", commit];
            check_diff(
                &repo,
                &mut cat,
                &mut forms,
                (commit, parent),
                "format-patch",
                &mail_args,
            );
            mails += 1;
        }
    }
    (checked, special, mails, forms)
}

fn report(name: &str, every: usize, start: Instant) {
    let (checked, special, mails, forms) = check_fixture(name, every);
    eprintln!(
        "{name}: {checked} commits checked ({mails} also as mails); commits with renames {}, \
         copies {}, mode changes {}, binary files {}, symbolic links {}; file patches applied: \
         {forms:?}; {:.1} s",
        special.rename.len(),
        special.copy.len(),
        special.mode.len(),
        special.binary.len(),
        special.symlink.len(),
        start.elapsed().as_secs_f64()
    );
    assert!(checked > 100, "{name}: too few commits checked");
}

#[test]
fn requests_history_applies_as_git_does() {
    report("requests.bundle", 16, Instant::now());
}

#[test]
fn typing_extensions_history_applies_as_git_does() {
    report("typing_extensions.bundle", 3, Instant::now());
}
