//! Each form of a Git diff, written out by hand so that the exact bytes are in view: what
//! `parse_diff` reads from it and what `apply_diff` makes of it. (tests/git_forms.rs has the
//! same forms as Git itself writes them.)

mod common;

use std::time::Instant;

use common::{MapBase, blob_id};
use sf_patch::{
    After, BaseEntry, Body, Changed, Limits, Mode, Operation, PatchError, apply_diff, parse_diff,
};

fn apply(diff: &str, base: &mut MapBase) -> Vec<Changed> {
    apply_diff(diff.as_bytes(), base, &Limits::default()).unwrap_or_else(|e| panic!("{e}\n{diff}"))
}

fn entry(content: &str, mode: Mode) -> After {
    After::Entry(BaseEntry {
        content: content.as_bytes().to_vec(),
        mode,
    })
}

fn changed(path: &str, after: After) -> Changed {
    Changed {
        path: path.into(),
        after,
    }
}

#[test]
fn modification_with_index_line_and_offset() {
    let old = "top\n1\n2\n3\n4\n5\n6\n7\n";
    let diff = format!(
        "diff --git a/f b/f\nindex {}..{} 100644\n--- a/f\n+++ b/f\n@@ -3,3 +3,3 @@ section\n 2\n-3\n+three\n 4\n",
        blob_id(old.as_bytes(), 7),
        blob_id(b"top\n1\n2\nthree\n4\n5\n6\n7\n", 7)
    );
    let mut base = MapBase::default().file("f", old);
    assert_eq!(
        apply(&diff, &mut base),
        [changed(
            "f",
            entry("top\n1\n2\nthree\n4\n5\n6\n7\n", Mode::Regular)
        )]
    );
    // Without the index line, a base with two more lines above: found two lines lower.
    let diff: String = diff
        .lines()
        .filter(|l| !l.starts_with("index"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut moved = MapBase::default().file("f", &format!("x\ny\n{old}"));
    let [change] = &apply(&diff, &mut moved)[..] else {
        panic!("one change")
    };
    assert_eq!(
        change.after,
        entry("x\ny\ntop\n1\n2\nthree\n4\n5\n6\n7\n", Mode::Regular)
    );
}

#[test]
fn missing_newline_at_end_on_either_side() {
    let mut base = MapBase::default().file("f", "a\nb");
    let add_newline = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n";
    assert_eq!(
        apply(add_newline, &mut base)[0].after,
        entry("a\nb\n", Mode::Regular)
    );
    let change_last = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n";
    assert_eq!(
        apply(change_last, &mut base)[0].after,
        entry("a\nc", Mode::Regular)
    );
    let mut base = MapBase::default().file("f", "a\nb\n");
    let drop_newline = "diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n";
    assert_eq!(
        apply(drop_newline, &mut base)[0].after,
        entry("a\nb", Mode::Regular)
    );
    // The base's last line has a newline, the diff says it has none: no match.
    let err =
        apply_diff(change_last.as_bytes(), &mut base, &Limits::default()).expect_err("mismatch");
    assert!(
        matches!(err, PatchError::HunkMismatch { line: 2, .. }),
        "{err}"
    );
}

#[test]
fn crlf_lines_are_kept_byte_for_byte() {
    let mut base = MapBase::default().file("w.txt", "one\r\ntwo\r\n");
    let diff = "diff --git a/w.txt b/w.txt\n--- a/w.txt\n+++ b/w.txt\n@@ -1,2 +1,2 @@\n one\r\n-two\r\n+2\r\n";
    assert_eq!(
        apply(diff, &mut base)[0].after,
        entry("one\r\n2\r\n", Mode::Regular)
    );
}

#[test]
fn creation_deletion_and_empty_files() {
    let mut base = MapBase::default().file("old", "bye\n").file("empty", "");
    let diff = "diff --git a/new b/new\nnew file mode 100755\nindex 0000000..ce01362\n--- /dev/null\n+++ b/new\n@@ -0,0 +1 @@\n+hello\n\
                diff --git a/old b/old\ndeleted file mode 100644\nindex b023018..0000000\n--- a/old\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n\
                diff --git a/empty b/empty\ndeleted file mode 100644\nindex e69de29..0000000\n\
                diff --git a/e2 b/e2\nnew file mode 100644\nindex 0000000..e69de29\n";
    assert_eq!(
        apply(diff, &mut base),
        [
            changed("e2", entry("", Mode::Regular)),
            changed("empty", After::Absent),
            changed("new", entry("hello\n", Mode::Executable)),
            changed("old", After::Absent),
        ]
    );
}

#[test]
fn mode_change_rename_and_copy() {
    let mut base = MapBase::default()
        .file("run.sh", "echo\n")
        .file("a.txt", "1\n2\n3\n");
    let diff = "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n\
                diff --git a/a.txt b/b.txt\nsimilarity index 100%\nrename from a.txt\nrename to b.txt\n";
    assert_eq!(
        apply(diff, &mut base),
        [
            changed("a.txt", After::Absent),
            changed("b.txt", entry("1\n2\n3\n", Mode::Regular)),
            changed("run.sh", entry("echo\n", Mode::Executable)),
        ]
    );
    let copy = "diff --git a/a.txt b/c.txt\nsimilarity index 80%\ncopy from a.txt\ncopy to c.txt\n--- a/a.txt\n+++ b/c.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n";
    assert_eq!(
        apply(copy, &mut base),
        [changed("c.txt", entry("1\ntwo\n3\n", Mode::Regular))]
    );
    // Git's older `rename old`/`rename new` spelling.
    let old_style = "diff --git a/a.txt b/d.txt\nrename old a.txt\nrename new d.txt\n";
    assert_eq!(apply(old_style, &mut base).len(), 2);
}

#[test]
fn symbolic_links() {
    let mut base = MapBase::default()
        .with("l", b"target", Mode::Symlink)
        .file("f", "x\n");
    let retarget = "diff --git a/l b/l\nindex 5c4d34a..a0e8c0b 120000\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-target\n\\ No newline at end of file\n+elsewhere\n\\ No newline at end of file\n";
    let patches = parse_diff(retarget.as_bytes()).expect("parse");
    assert_eq!(patches[0].old_mode, Some(Mode::Symlink));
    // (The index ids above are made up: the pre-image check refuses them.)
    let err = apply_diff(retarget.as_bytes(), &mut base, &Limits::default()).expect_err("ids");
    assert!(matches!(err, PatchError::WrongBase { .. }));
    let retarget: String = retarget
        .lines()
        .filter(|l| !l.starts_with("index"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        apply(&retarget, &mut base)[0].after,
        entry("elsewhere", Mode::Symlink)
    );
    // A file becomes a link: a deletion and a creation of the same path.
    let type_change = "diff --git a/f b/f\ndeleted file mode 100644\n--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n\
                       diff --git a/f b/f\nnew file mode 120000\n--- /dev/null\n+++ b/f\n@@ -0,0 +1 @@\n+l\n\\ No newline at end of file\n";
    assert_eq!(
        apply(type_change, &mut base),
        [changed("f", entry("l", Mode::Symlink))]
    );
}

#[test]
fn quoted_and_spaced_names() {
    let diff = "diff --git \"a/sp ace\\t\\303\\251\" \"b/sp ace\\t\\303\\251\"\nnew file mode 100644\nindex 0000000..e69de29\n\
                diff --git a/with space b/with space\nnew file mode 100644\nindex 0000000..e69de29\n\
                diff --git a/one two b/three four\nsimilarity index 100%\nrename from one two\nrename to three four\n\
                diff --git a/plain \"b/quo\\\"ted\"\nsimilarity index 100%\nrename from plain\nrename to \"quo\\\"ted\"\n";
    let patches = parse_diff(diff.as_bytes()).expect("parse");
    let names: Vec<(Option<&str>, Option<&str>)> = patches
        .iter()
        .map(|p| (p.old_path.as_deref(), p.new_path.as_deref()))
        .collect();
    assert_eq!(
        names,
        [
            (None, Some("sp ace\t\u{e9}")),
            (None, Some("with space")),
            (Some("one two"), Some("three four")),
            (Some("plain"), Some("quo\"ted")),
        ]
    );
    // Git adds a tab after a `---`/`+++` name with a space.
    let diff = "diff --git a/x y b/x y\n--- a/x y\t\n+++ b/x y\t\n@@ -1 +1 @@\n-a\n+b\n";
    let mut base = MapBase::default().file("x y", "a\n");
    assert_eq!(
        apply(diff, &mut base),
        [changed("x y", entry("b\n", Mode::Regular))]
    );
}

#[test]
fn parse_gives_the_patch_fields() {
    let diff = "From 1234 Mon Sep 17 00:00:00 2001\nFrom: A <a@b>\nSubject: [PATCH] x\n\n---\n f | 2 +-\n\n\
                diff --git a/f b/f\nindex 1111111..2222222 100644\n--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n+b\n c\n-- \n2.47.3\n\n";
    let patches = parse_diff(diff.as_bytes()).expect("parse");
    let [patch] = &patches[..] else {
        panic!("one patch")
    };
    assert_eq!(patch.operation, Operation::Modify);
    assert_eq!(
        (patch.old_id.as_deref(), patch.new_id.as_deref()),
        (Some("1111111"), Some("2222222"))
    );
    assert_eq!(
        (patch.old_mode, patch.new_mode),
        (Some(Mode::Regular), Some(Mode::Regular))
    );
    assert_eq!(patch.line, 8);
    let Body::Text(hunks) = &patch.body else {
        panic!("text")
    };
    assert_eq!(
        (
            hunks[0].old_start,
            hunks[0].old_count,
            hunks[0].new_start,
            hunks[0].new_count
        ),
        (1, 2, 1, 2)
    );
    assert_eq!(hunks[0].lines.len(), 3);
}

#[test]
fn hostile_search_stays_fast() {
    // A large file of equal lines and hunks whose context matches almost everywhere but never
    // wholly: the search gives up within its budget.
    let base_text = "same\n".repeat(200_000);
    let mut base = MapBase::default().file("f", &base_text);
    let mut diff =
        String::from("diff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -100000,1002 +100000,1002 @@\n");
    diff.push_str(&" same\n".repeat(1000));
    diff.push_str("-other\n+x\n same\n");
    let start = Instant::now();
    let err = apply_diff(diff.as_bytes(), &mut base, &Limits::default()).expect_err("no match");
    assert!(matches!(err, PatchError::HunkMismatch { .. }), "{err}");
    assert!(start.elapsed().as_secs() < 10, "took {:?}", start.elapsed());
    // Many small hunks over a large file apply in linear time.
    let base_text: String = (0..100_000).map(|i| format!("{i}\n")).collect();
    let mut base = MapBase::default().file("f", &base_text);
    let mut diff = String::from("diff --git a/f b/f\n--- a/f\n+++ b/f\n");
    for i in (10..100_000).step_by(10) {
        diff.push_str(&format!(
            "@@ -{i},3 +{i},3 @@\n {}\n-{}\n+x\n {}\n",
            i - 1,
            i,
            i + 1
        ));
    }
    let start = Instant::now();
    let changes = apply(&diff, &mut base);
    assert_eq!(changes.len(), 1);
    assert!(start.elapsed().as_secs() < 10, "took {:?}", start.elapsed());
}
