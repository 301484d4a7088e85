//! Hostile and broken diffs: each is refused with its typed error, nothing is returned, and no
//! input (including every truncation and many corruptions of a real diff) makes sf-patch panic.

mod common;

use common::{MapBase, base85_lines, base85_raw, blob_id};
use sf_patch::{Limits, Mode, PatchError, apply_diff, parse_diff};

fn apply(diff: &str, base: &mut MapBase) -> Result<Vec<sf_patch::Changed>, PatchError> {
    apply_diff(diff.as_bytes(), base, &Limits::default())
}

fn refused(diff: &str, base: &mut MapBase) -> PatchError {
    match apply(diff, base) {
        Ok(changes) => panic!("accepted: {changes:?}\n{diff}"),
        Err(e) => e,
    }
}

fn new_file(name: &str) -> String {
    format!(
        "diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n@@ -0,0 +1 @@\n+x\n"
    )
}

#[test]
fn unsafe_paths_are_refused() {
    for name in [
        "../escape",
        "a/../../escape",
        "x//y",
        "dir/",
        "./x",
        ".git/config",
        ".GIT/hooks/pre-commit",
        "sub/.Git/config",
        "\"\\000\"",
    ] {
        let diff = if name.starts_with('"') {
            "diff --git \"a/x\\000y\" \"b/x\\000y\"\nnew file mode 100644\nindex 0000000..e69de29\n"
                .to_string()
        } else {
            new_file(name)
        };
        let err = refused(&diff, &mut MapBase::default());
        assert!(
            matches!(err, PatchError::UnsafePath { .. }),
            "{name}: {err}"
        );
    }
    // Absolute: an empty first component after the prefix.
    let diff =
        "diff --git a//etc/passwd b//etc/passwd\nnew file mode 100644\nindex 0000000..e69de29\n";
    let err = refused(diff, &mut MapBase::default());
    assert!(
        matches!(err, PatchError::UnsafePath { reason, .. } if reason.contains("absolute")),
        "{err}"
    );
    // Control bytes other than tab, and bytes that are not UTF-8.
    for quoted in ["\\033[31m", "\\n", "\\377"] {
        let diff = format!(
            "diff --git \"a/{quoted}\" \"b/{quoted}\"\nnew file mode 100644\nindex 0000000..e69de29\n"
        );
        let err = refused(&diff, &mut MapBase::default());
        assert!(
            matches!(err, PatchError::UnsafePath { .. }),
            "{quoted}: {err}"
        );
    }
}

#[test]
fn names_that_disagree_are_refused() {
    let base = MapBase::default().file("x", "old\n").file("y", "old\n");
    for diff in [
        "diff --git a/x b/x\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-old\n+new\n",
        "diff --git a/x b/x\n--- a/y\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n",
        "diff --git a/x b/y\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-old\n+new\n",
        "diff --git a/x b/y\nrename from x\nrename to z\n",
        "diff --git a/x b/x\nnew file mode 100644\n--- /dev/null\n+++ b/y\n@@ -0,0 +1 @@\n+x\n",
    ] {
        let err = refused(diff, &mut base.clone());
        assert!(
            matches!(err, PatchError::NameMismatch { .. }),
            "{err}\n{diff}"
        );
    }
}

#[test]
fn writing_through_a_symlink_is_refused() {
    // A link created in the diff, then a file through it.
    let diff = "diff --git a/d b/d\nnew file mode 120000\n--- /dev/null\n+++ b/d\n@@ -0,0 +1 @@\n+/etc\n\\ No newline at end of file\n"
        .to_string()
        + &new_file("d/passwd");
    let err = refused(&diff, &mut MapBase::default());
    assert!(
        matches!(err, PatchError::PathConflict { ref prefix, .. } if prefix == "d"),
        "{err}"
    );
    // A link in the base.
    let mut base = MapBase::default().with("d", b"/etc", Mode::Symlink);
    let err = refused(&new_file("d/passwd"), &mut base);
    assert!(
        matches!(err, PatchError::PathConflict { reason, .. } if reason.contains("symbolic link")),
        "{err}"
    );
    // Even when the diff deletes the link: the file and the link are written in two diffs.
    let diff = "diff --git a/d b/d\ndeleted file mode 120000\n--- a/d\n+++ /dev/null\n@@ -1 +0,0 @@\n-/etc\n\\ No newline at end of file\n".to_string()
        + &new_file("d/passwd");
    let err = refused(&diff, &mut base);
    assert!(matches!(err, PatchError::PathConflict { .. }), "{err}");
}

#[test]
fn a_path_that_is_both_file_and_directory_is_refused() {
    let diff = new_file("f") + &new_file("f/x");
    let err = refused(&diff, &mut MapBase::default());
    assert!(
        matches!(err, PatchError::PathConflict { ref prefix, .. } if prefix == "f"),
        "{err}"
    );
    let mut base = MapBase::default().file("f", "file\n");
    let err = refused(&new_file("f/x"), &mut base);
    assert!(
        matches!(err, PatchError::PathConflict { reason, .. } if reason.contains("file")),
        "{err}"
    );
    // A file deleted and a directory created in its place is fine.
    let diff = "diff --git a/f b/f\ndeleted file mode 100644\n--- a/f\n+++ /dev/null\n@@ -1 +0,0 @@\n-file\n"
        .to_string()
        + &new_file("f/x");
    let changes = apply(&diff, &mut base).expect("file becomes a directory");
    assert_eq!(changes.len(), 2);
}

#[test]
fn huge_or_wrong_hunk_counts_are_refused() {
    let base = MapBase::default().file("x", "a\nb\n");
    for header in [
        "@@ -1,99999999999 +1,99999999999 @@",
        "@@ -1,99999999999999999999999 +1,2 @@",
        "@@ -1,18446744073709551616 +1 @@",
        "@@ -1,3 +1,3 @@",
        "@@ -1 +1,2 @@",
        "@@ -x +1 @@",
        "@@ -1,2 +1,2",
    ] {
        let diff = format!("diff --git a/x b/x\n--- a/x\n+++ b/x\n{header}\n-a\n+A\n b\n");
        let err = refused(&diff, &mut base.clone());
        assert!(
            matches!(err, PatchError::BadHunk { hunk: 1, .. }),
            "{header}: {err}"
        );
    }
    // More lines than declared: the extra ones are not silently dropped.
    let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+A\n+extra\n";
    assert!(matches!(
        refused(diff, &mut base.clone()),
        PatchError::BadHunk { .. }
    ));
    // A hunk that changes nothing.
    let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n a\n";
    assert!(matches!(
        refused(diff, &mut base.clone()),
        PatchError::BadHunk { .. }
    ));
}

fn binary_diff(hunk: &str) -> String {
    format!("diff --git a/b.bin b/b.bin\nnew file mode 100644\nGIT binary patch\n{hunk}\n")
}

#[test]
fn oversized_binary_hunks_are_refused_before_inflating() {
    let limits = Limits {
        max_file_bytes: 1000,
        ..Limits::default()
    };
    // Declares more than the limit: refused from the header alone.
    let diff = binary_diff(&format!("literal 1000000000000\n{}", base85_lines(b"x")));
    let err = apply_diff(diff.as_bytes(), &mut MapBase::default(), &limits).expect_err("too large");
    assert!(
        matches!(
            err,
            PatchError::FileTooLarge {
                size: 1_000_000_000_000,
                ..
            }
        ),
        "{err}"
    );
    // Declares little but inflates to much more: inflation stops one byte past the declaration.
    let bomb = vec![0u8; 10 << 20];
    let diff = binary_diff(&format!("literal 10\n{}", base85_lines(&bomb)));
    let err = apply_diff(diff.as_bytes(), &mut MapBase::default(), &limits).expect_err("bomb");
    assert!(
        matches!(err, PatchError::CorruptBinary { ref what, .. } if what.contains("11 or more")),
        "{err}"
    );
    // A literal larger than the limit whatever it declares is also refused.
    let diff = binary_diff(&format!("literal 1001\n{}", base85_lines(&[1u8; 1001])));
    let err = apply_diff(diff.as_bytes(), &mut MapBase::default(), &limits).expect_err("large");
    assert!(matches!(err, PatchError::FileTooLarge { .. }), "{err}");
}

#[test]
fn corrupt_binary_hunks_are_refused() {
    let good = base85_lines(b"hello");
    let cases = [
        // Truncated base85 (a line shorter than its length character says).
        format!("literal 5\n{}", &good[..good.len() - 3]),
        // Characters outside the alphabet.
        "literal 5\nJ\"\"\"\"\"\"\"\"\"\"\n".to_string(),
        // A base85 group that overflows 32 bits.
        "literal 5\nD~~~~~\n".to_string(),
        // Valid base85 of data that is not zlib.
        format!("literal 5\n{}", base85_raw(b"not zlib")),
        // The wrong declared size.
        format!("literal 6\n{good}"),
    ];
    for hunk in cases {
        let err = refused(&binary_diff(&hunk), &mut MapBase::default());
        assert!(
            matches!(err, PatchError::CorruptBinary { .. }),
            "{err}\n{hunk}"
        );
    }
}

#[test]
fn bad_deltas_are_refused() {
    let source = b"source!";
    let base = MapBase::default().with("b.bin", source, Mode::Regular);
    let deltas: [&[u8]; 4] = [
        &[7, 3, 0x91, 6, 3], // copies past the end of the source
        &[
            7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ], // varint overflow
        &[6, 3, 0x91, 0, 3], // the wrong source size
        &[7, 3, 0x91, 0, 0xff, 0xff, 0xff, 0x7f, 3], // offset past everything
    ];
    for delta in deltas {
        let diff = format!(
            "diff --git a/b.bin b/b.bin\nindex {}..1234567 100644\nGIT binary patch\ndelta {}\n{}\n",
            blob_id(source, 7),
            delta.len(),
            base85_lines(delta)
        );
        let err = refused(&diff, &mut base.clone());
        assert!(matches!(err, PatchError::CorruptBinary { .. }), "{err}");
    }
}

#[test]
fn limits_on_files_and_size_are_kept() {
    let diff = new_file("a") + &new_file("b") + &new_file("c");
    let limits = Limits {
        max_files: 2,
        ..Limits::default()
    };
    let err = apply_diff(diff.as_bytes(), &mut MapBase::default(), &limits).expect_err("files");
    assert_eq!(err, PatchError::TooManyFiles { limit: 2 });
    let limits = Limits {
        max_diff_bytes: 10,
        ..Limits::default()
    };
    let err = apply_diff(diff.as_bytes(), &mut MapBase::default(), &limits).expect_err("size");
    assert!(matches!(err, PatchError::DiffTooLarge { limit: 10, .. }));
    let limits = Limits {
        max_file_bytes: 3,
        ..Limits::default()
    };
    let diff = "diff --git a/a b/a\nnew file mode 100644\n--- /dev/null\n+++ b/a\n@@ -0,0 +1,2 @@\n+ab\n+cd\n";
    let err = apply_diff(diff.as_bytes(), &mut MapBase::default(), &limits).expect_err("file");
    assert!(
        matches!(err, PatchError::FileTooLarge { size: 6, .. }),
        "{err}"
    );
}

#[test]
fn diffs_against_another_base_are_refused() {
    let mut base = MapBase::default().file("x", "one\ntwo\nthree\n");
    // Created where the base has it; changed or deleted where it has nothing.
    assert!(matches!(
        refused(&new_file("x"), &mut base),
        PatchError::AlreadyExists { .. }
    ));
    let diff = "diff --git a/y b/y\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n";
    assert!(matches!(
        refused(diff, &mut base),
        PatchError::Missing { .. }
    ));
    let diff = "diff --git a/y b/y\ndeleted file mode 100644\nindex e69de29..0000000\n";
    assert!(matches!(
        refused(diff, &mut base),
        PatchError::Missing { .. }
    ));
    // A context line that differs: the hunk, the line and both texts are named.
    let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n one\n-TWO\n+2\n three\n";
    let err = refused(diff, &mut base);
    assert_eq!(
        err,
        PatchError::HunkMismatch {
            path: "x".into(),
            hunk: 1,
            line: 2,
            expected: "TWO\n".into(),
            actual: "two\n".into(),
        }
    );
    assert!(err.to_string().contains("git diff --binary BASE"), "{err}");
    // The index line names another pre-image.
    let diff = "diff --git a/x b/x\nindex 1234567..89abcde 100644\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n";
    let err = refused(diff, &mut base);
    assert!(
        matches!(err, PatchError::WrongBase { ref expected, .. } if expected == "1234567"),
        "{err}"
    );
    // The right pre-image but a result that is not the index line's.
    let diff = format!(
        "diff --git a/x b/x\nindex {}..89abcde 100644\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n",
        blob_id(b"one\ntwo\nthree\n", 7)
    );
    assert!(matches!(
        refused(&diff, &mut base),
        PatchError::ResultMismatch { .. }
    ));
    // The base's mode is not the diff's.
    let diff = "diff --git a/x b/x\nold mode 100755\nnew mode 100644\n";
    assert!(matches!(
        refused(diff, &mut base),
        PatchError::ModeMismatch { .. }
    ));
    // A deletion that leaves content.
    let diff = "diff --git a/x b/x\ndeleted file mode 100644\n";
    assert!(matches!(
        refused(diff, &mut base),
        PatchError::DeletionLeavesContent { .. }
    ));
    let diff = "diff --git a/x b/x\ndeleted file mode 100644\n--- a/x\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-one\n-two\n";
    assert!(matches!(
        refused(diff, &mut base),
        PatchError::HunkMismatch { .. }
    ));
}

#[test]
fn overlapping_patches_are_refused() {
    let base = MapBase::default().file("x", "a\n");
    let change = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
    let err = refused(&format!("{change}{change}"), &mut base.clone());
    assert_eq!(err, PatchError::Duplicate { path: "x".into() });
    let both = format!(
        "{change}diff --git a/x b/x\ndeleted file mode 100644\n--- a/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"
    );
    assert!(matches!(
        refused(&both, &mut base.clone()),
        PatchError::Duplicate { .. }
    ));
    let renames = "diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\ndiff --git a/x b/z\nsimilarity index 100%\nrename from x\nrename to z\n";
    assert!(matches!(
        refused(renames, &mut base.clone()),
        PatchError::Duplicate { .. }
    ));
}

#[test]
fn unsupported_and_malformed_input_is_refused() {
    let mut base = MapBase::default().file("x", "a\n");
    type Case = (&'static str, fn(&PatchError) -> bool);
    let cases: [Case; 9] = [
        ("", |e| *e == PatchError::NoPatches),
        ("just some text\n", |e| *e == PatchError::NoPatches),
        ("--- x\n+++ x\n@@ -1 +1 @@\n-a\n+b\n", |e| {
            matches!(e, PatchError::NotGitDiff { line: 1 })
        }),
        (
            "diff --git a/m b/m\nnew file mode 160000\nindex 0000000..1234567\n",
            |e| matches!(e, PatchError::UnsupportedMode { .. }),
        ),
        (
            "diff --git a/x b/x\nold mode 100644\nnew mode 120000\n",
            |e| matches!(e, PatchError::TypeChange { .. }),
        ),
        (
            "diff --git a/x b/x\nindex 1234567..89abcde 100644\nBinary files a/x and b/x differ\n",
            |e| matches!(e, PatchError::BinaryWithoutData { .. }),
        ),
        ("diff --git a/x b/x\nindex 1234567..89abcde 100644\n", |e| {
            matches!(e, PatchError::Corrupt { .. })
        }),
        (
            "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b",
            |e| matches!(e, PatchError::BadHunk { .. }),
        ),
        (
            "diff --git a/x b/x\nnew file mode 100644\ndeleted file mode 100644\n",
            |e| matches!(e, PatchError::Corrupt { .. }),
        ),
    ];
    for (diff, expected) in cases {
        let err = refused(diff, &mut base);
        assert!(expected(&err), "{diff:?}: {err:?}");
    }
}

#[test]
fn no_truncation_or_corruption_of_a_diff_panics() {
    let bin: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut bin2 = bin.clone();
    bin2[10] = 99;
    let base = MapBase::default()
        .file("t.txt", "1\n2\n3\n4\n5\n6\n7\n")
        .with("b.bin", &bin, Mode::Regular)
        .with("l", b"t.txt", Mode::Symlink);
    let delta = [&[
        0xb8, 0x17, 0xb8, 0x17, 0x90, 10, 1, 99, 0xb1, 11, 0xad, 0x0b,
    ][..]]
    .concat();
    let diff = format!(
        "From 1 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\ndiff --git a/t.txt \"b/t.txt\"\nindex {}..{} 100644\n--- a/t.txt\n+++ b/t.txt\n@@ -2,5 +2,5 @@\n 2\n 3\n-4\n+four\n 5\n 6\n\
         diff --git a/b.bin b/b.bin\nindex {}..{} 100644\nGIT binary patch\ndelta {}\n{}\ndelta 12\n{}\n\
         diff --git a/l b/l\nindex {}..{} 120000\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-t.txt\n\\ No newline at end of file\n+b.bin\n\\ No newline at end of file\n-- \n2.47.3\n\n",
        blob_id(b"1\n2\n3\n4\n5\n6\n7\n", 7),
        blob_id(b"1\n2\n3\nfour\n5\n6\n7\n", 7),
        blob_id(&bin, 40),
        blob_id(&bin2, 40),
        delta.len(),
        base85_lines(&delta),
        base85_lines(&[
            0xb8, 0x17, 0xb8, 0x17, 0x90, 10, 1, bin[10], 0xb1, 11, 0xad, 0x0b
        ]),
        blob_id(b"t.txt", 7),
        blob_id(b"b.bin", 7),
    );
    let changes = apply(&diff, &mut base.clone()).expect("the intact diff applies");
    assert_eq!(changes.len(), 3);
    let bytes = diff.as_bytes();
    for cut in 0..bytes.len() {
        let _ = apply_diff(&bytes[..cut], &mut base.clone(), &Limits::default());
    }
    for i in 0..bytes.len() {
        for replacement in [b'\n', b'0', b'-', b' ', b'\\', b'"', 0xff] {
            let mut bad = bytes.to_vec();
            bad[i] = replacement;
            let _ = apply_diff(&bad, &mut base.clone(), &Limits::default());
            let _ = parse_diff(&bad);
        }
    }
}
