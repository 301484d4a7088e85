//! Every form of Git diff sf-patch supports, made by real Git on a scratch repository: a binary
//! file modified (a `delta` hunk) and one created (a `literal` hunk), a rename with changes, a
//! copy, a mode change, a symbolic link retargeted, a file turned into a link (a deletion and a
//! creation), quoted names (spaces, a tab, UTF-8), a missing newline at the end on either side,
//! an empty file created and one deleted. sf-patch must give exactly what the commit holds, from
//! `git diff --binary` and from `git format-patch --binary`.

mod common;

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use common::{CatFile, TreeBase, check_changes, git, tree};
use sf_patch::{After, BinaryHunk, Body, Limits, Operation, PatchError, apply_diff, parse_diff};

/// Deterministic bytes that do not compress (so Git keeps the file binary and sends deltas).
fn noise(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (x >> 16) as u8
        })
        .collect()
}

fn numbered(n: usize, tag: &str) -> String {
    (1..=n).map(|i| format!("{tag} line {i}\n")).collect()
}

fn write(dir: &Path, path: &str, content: &[u8]) {
    let path = dir.join(path);
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, content).expect("write");
}

fn commit(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
}

/// The base commit, then one commit with every form; returns the repository.
fn scratch_repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    git(dir, &["init", "-q"]);
    write(dir, "bin.dat", &noise(20_000, 1));
    write(dir, "old name.txt", numbered(30, "moved").as_bytes());
    write(dir, "src.txt", numbered(40, "copied").as_bytes());
    write(dir, "script.sh", b"#!/bin/sh\necho hi\n");
    write(
        dir,
        "spaced dir/\u{e9}t\u{e9}.txt",
        numbered(10, "unicode").as_bytes(),
    );
    write(dir, "noeol.txt", b"one\ntwo\nthree");
    write(dir, "to-link", b"was a file\n");
    write(dir, "gone.txt", b"deleted soon\n");
    write(dir, "empty-gone", b"");
    symlink("src.txt", dir.join("link")).expect("symlink");
    commit(dir, "base");

    let mut bin = noise(20_000, 1);
    bin[100..110].copy_from_slice(b"0123456789");
    bin.extend_from_slice(b"tail");
    write(dir, "bin.dat", &bin);
    write(dir, "new.bin", &noise(3_000, 7));
    fs::remove_file(dir.join("old name.txt")).expect("rm");
    let moved = numbered(30, "moved").replace("moved line 15\n", "moved and changed\n");
    write(dir, "new n\u{e4}me.txt", moved.as_bytes());
    let copied = numbered(40, "copied").replace("copied line 40\n", "copied, last line\n");
    write(dir, "copy of src.txt", copied.as_bytes());
    fs::set_permissions(dir.join("script.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
    fs::remove_file(dir.join("link")).expect("rm");
    symlink("bin.dat", dir.join("link")).expect("symlink");
    fs::remove_file(dir.join("to-link")).expect("rm");
    symlink("noeol.txt", dir.join("to-link")).expect("symlink");
    let unicode = numbered(10, "unicode").replace("unicode line 5\n", "\u{fc}nicode\n");
    write(dir, "spaced dir/\u{e9}t\u{e9}.txt", unicode.as_bytes());
    write(dir, "noeol.txt", b"one\n2\nthree\nfour");
    write(dir, "tab\there.txt", b"tab\n");
    write(dir, "empty-new", b"");
    fs::remove_file(dir.join("gone.txt")).expect("rm");
    fs::remove_file(dir.join("empty-gone")).expect("rm");
    commit(dir, "every form");
    tmp
}

/// Applies `diff` to HEAD^'s tree and checks it gives HEAD's.
fn check(dir: &Path, diff: &[u8], what: &str) {
    let before = tree(dir, "HEAD^");
    let after = tree(dir, "HEAD");
    let mut cat = CatFile::new(dir);
    let mut base = TreeBase {
        tree: &before,
        cat: &mut cat,
    };
    let changes =
        apply_diff(diff, &mut base, &Limits::default()).unwrap_or_else(|e| panic!("{what}: {e}"));
    check_changes(what, &changes, &before, &after, &mut cat);
    let absent = changes.iter().filter(|c| c.after == After::Absent).count();
    // old name.txt, gone.txt, empty-gone (to-link is deleted and created again: an entry)
    assert_eq!(absent, 3, "{what}");
}

#[test]
fn every_form_from_git_diff_applies() {
    let tmp = scratch_repo();
    let dir = tmp.path();
    let diff = git(
        dir,
        &["diff", "--binary", "-M", "-C", "-C", "HEAD^", "HEAD"],
    );
    let text = String::from_utf8_lossy(&diff);
    for form in [
        "rename from old name.txt",
        "copy from src.txt",
        "old mode 100644",
        "new mode 100755",
        "deleted file mode 100644",
        "new file mode 120000",
        "literal 3000",
        "delta ",
        "\\ No newline at end of file",
        "\"b/new n\\303\\244me.txt\"",
        "\"b/spaced dir/\\303\\251t\\303\\251.txt\"",
        "\"b/tab\\there.txt\"",
    ] {
        assert!(text.contains(form), "the diff lacks {form:?}:\n{text}");
    }
    let patches = parse_diff(&diff).expect("parse");
    let ops: Vec<Operation> = patches.iter().map(|p| p.operation).collect();
    assert!(ops.contains(&Operation::Rename) && ops.contains(&Operation::Copy));
    let delta = patches
        .iter()
        .any(|p| matches!(&p.body, Body::Binary(b) if matches!(b.forward, BinaryHunk::Delta(_))));
    assert!(delta, "a delta hunk");
    check(dir, &diff, "git diff");
    // The abbreviated index ids of a plain `git diff` are checked as well.
    let full = git(
        dir,
        &["diff", "--binary", "--full-index", "-M", "HEAD^", "HEAD"],
    );
    check(dir, &full, "git diff --full-index");
}

#[test]
fn every_form_from_format_patch_applies() {
    let tmp = scratch_repo();
    let dir = tmp.path();
    let mail = git(
        dir,
        &[
            "format-patch",
            "-1",
            "--binary",
            "--stdout",
            "-M",
            "-C",
            "-C",
            "HEAD",
        ],
    );
    assert!(mail.starts_with(b"From "), "a mail");
    check(dir, &mail, "format-patch");
}

#[test]
fn plain_binary_diff_is_refused_with_the_fix() {
    let tmp = scratch_repo();
    let dir = tmp.path();
    let diff = git(dir, &["diff", "-M", "HEAD^", "HEAD"]);
    let before = tree(dir, "HEAD^");
    let mut cat = CatFile::new(dir);
    let mut base = TreeBase {
        tree: &before,
        cat: &mut cat,
    };
    let err = apply_diff(&diff, &mut base, &Limits::default()).expect_err("no binary data");
    assert!(matches!(err, PatchError::BinaryWithoutData { ref path } if path == "bin.dat"));
    assert!(err.to_string().contains("git diff --binary"), "{err}");
}

#[test]
fn diff_against_another_base_is_refused() {
    let tmp = scratch_repo();
    let dir = tmp.path();
    // The last commit's diff, applied to the commit itself (not its parent).
    let diff = git(
        dir,
        &["diff", "--binary", "HEAD^", "HEAD", "--", "noeol.txt"],
    );
    let head = tree(dir, "HEAD");
    let mut cat = CatFile::new(dir);
    let mut base = TreeBase {
        tree: &head,
        cat: &mut cat,
    };
    let err = apply_diff(&diff, &mut base, &Limits::default()).expect_err("wrong base");
    assert!(
        matches!(err, PatchError::WrongBase { ref path, .. } if path == "noeol.txt"),
        "{err}"
    );
}
