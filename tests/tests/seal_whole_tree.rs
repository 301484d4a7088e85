//! Proposals over Git's whole tree model (`sf-candidate/3`), sealed on a base imported from
//! a real Git repository: a proposal that changes a mode, adds a link, replaces a binary file
//! and edits text is sealed, exported exactly (the export equals `git archive` of M), and
//! replayed to the same Candidate with nothing written; M's parent is the imported commit and
//! `git log` shows the proposal's message and author; and dangerous edits (Git's spellings of
//! `.git`, a symlinked `.gitmodules`, links that leave the tree, paths through a link) are
//! refused at seal, naming the path and the rule, with nothing written.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sf_host::canonical::Digest;
use sf_host::contracts::tree_path::EntryMode;
use sf_host::git_source::read_git_source;
use sf_host::repository::{
    Author, CandidateProtocol, FileEdit, InitialBase, Proposal, ProposalBounds, ProposalMessage,
    RepositorySettings,
};
use sf_tests::{TestRepo, frozen, git_factory, private_dir};

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    sf_tests::plain_git(dir, args, &[])
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap().trim_end().to_owned()
}

const LOGO: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\xff\x00old";
const NEW_LOGO: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\x00\xfe\0new";

/// A source repository with history (two commits), holding a text file, a script that is not
/// executable yet, an executable, a binary image and a link; and the owned repository
/// imported from its tip.
fn imported(root: &Path) -> (std::path::PathBuf, TestRepo) {
    let source = root.join("source");
    std::fs::create_dir(&source).unwrap();
    git(&source, &["init", "-q"]);
    let write = |path: &str, bytes: &[u8]| {
        let file = source.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, bytes).unwrap();
    };
    write("README.md", b"# greeter\n");
    git(&source, &["add", "-A"]);
    git(&source, &["commit", "-q", "-m", "first"]);
    write("src/greet.txt", b"hello\n");
    write("src/run.sh", b"#!/bin/sh\ncat greet.txt\n");
    write("src/tool", b"#!/bin/sh\necho tool\n");
    std::fs::set_permissions(source.join("src/tool"), PermissionsExt::from_mode(0o755)).unwrap();
    write("src/logo.png", LOGO);
    std::os::unix::fs::symlink("tool", source.join("src/t")).unwrap();
    git(&source, &["add", "-A"]);
    git(&source, &["commit", "-q", "-m", "second"]);
    let commit = read_git_source(&source, "HEAD").unwrap();
    let repo = TestRepo::create_with(
        git_factory(),
        "greeter",
        InitialBase::Imported(commit),
        RepositorySettings::default(),
    );
    (source, repo)
}

fn digest(bytes: &[u8]) -> Digest {
    Digest::of(bytes)
}

fn whole_tree_proposal() -> Proposal {
    Proposal {
        edits: vec![
            FileEdit::mode(
                "src/run.sh",
                digest(b"#!/bin/sh\ncat greet.txt\n"),
                EntryMode::Executable,
            ),
            FileEdit::link("src/current", None, "greet.txt"),
            FileEdit::bytes("src/logo.png", Some(digest(LOGO)), NEW_LOGO.to_vec()),
            FileEdit::text(
                "src/greet.txt",
                Some(digest(b"hello\n")),
                Some("hello, world\n".into()),
            ),
        ],
        message: Some(ProposalMessage {
            title: "Greet the whole world".into(),
            body: Some("The greeting named nobody.\n\nRefs: #7".into()),
        }),
        author: Some(Author {
            name: "Ada Lovelace".into(),
            email: "ada@example.org".into(),
            time: 1_764_600_000,
            offset: "+0100".into(),
        }),
    }
}

#[test]
fn a_proposal_over_every_entry_kind_is_sealed_exported_exactly_and_replayed() {
    let (_dir, root) = private_dir();
    let (source, test) = imported(&root);
    let base = test.identity.initial;
    let head = text(git(&source, &["rev-parse", "HEAD"]));
    assert_eq!(base.to_hex(), head, "the base is the team's commit");
    let inputs = frozen(base, &["src"]);
    let proposal = whole_tree_proposal();
    let sealed = test.repo.seal(&inputs, &proposal).unwrap();
    assert_eq!(sealed.manifest.protocol, CandidateProtocol::V4);
    let files = test.repo.candidate_files(&sealed).unwrap();
    // The stored proposal is the given one, its edits in path order.
    let stored = sealed.proposal.as_ref().unwrap();
    assert_eq!(stored.to_bytes().unwrap(), proposal.to_bytes().unwrap());

    // The exported entries: modes and links exact.
    let entry = |path: &str| {
        let file = files.iter().find(|file| file.path == path).unwrap();
        (file.mode, file.content.clone())
    };
    assert_eq!(entry("src/run.sh").0, EntryMode::Executable);
    assert_eq!(
        entry("src/current"),
        (EntryMode::Symlink, b"greet.txt".to_vec())
    );
    assert_eq!(
        entry("src/logo.png"),
        (EntryMode::Regular, NEW_LOGO.to_vec())
    );
    assert_eq!(entry("src/greet.txt").1, b"hello, world\n");
    assert_eq!(entry("src/tool").0, EntryMode::Executable, "untouched");
    assert_eq!(entry("src/t"), (EntryMode::Symlink, b"tool".to_vec()));

    // What Git itself reads out of M is exactly what sf exported.
    let m = sealed.manifest.commit.to_hex();
    let held: BTreeMap<String, (EntryMode, Vec<u8>)> = files
        .iter()
        .map(|file| (file.path.clone(), (file.mode, file.content.clone())))
        .collect();
    assert_eq!(sf_tests::archived_leaves(&test.path, &m, &root), held);

    // M is a commit a team would accept: the imported commit its parent, the proposal's
    // author, message and date; sf its committer at the same time.
    let show = |format: &str| {
        text(git(
            &test.path,
            &["log", "-1", &format!("--format={format}"), &m],
        ))
    };
    assert_eq!(show("%P"), head);
    assert_eq!(
        show("%an <%ae> %at %ai"),
        "Ada Lovelace <ada@example.org> 1764600000 2025-12-01 15:40:00 +0100"
    );
    assert_eq!(
        show("%cn <%ce> %ct"),
        "sf <sf@localhost.invalid> 1764600000"
    );
    assert_eq!(show("%s"), "Greet the whole world");
    let body = show("%b");
    assert!(
        body.starts_with(
            "The greeting named nobody.\n\nRefs: #7\n\nSf-Candidate: sf-candidate/4\n"
        ),
        "{body}"
    );
    assert!(
        body.contains(&format!("Sf-Proposal: {}", sealed.manifest.proposal_digest)),
        "{body}"
    );
    let trailers = text(git(
        &test.path,
        &[
            "log",
            "-1",
            "--format=%(trailers:key=Sf-Slice,valueonly)",
            &m,
        ],
    ));
    assert_eq!(trailers, "slice-1 1", "git reads the trailers as trailers");
    git(&test.path, &["fsck", "--strict", "--no-dangling"]);

    // Replayed: the same Candidate, nothing written; exported again: the same.
    let before = test.tree_hash();
    let again = test.reopen().seal(&inputs, &proposal).unwrap();
    assert_eq!(again, sealed);
    assert_eq!(test.tree_hash(), before, "a replay writes nothing");
    assert_eq!(
        test.reopen().export_candidate(&sealed.digest).unwrap(),
        sealed
    );

    // The same edits with another author are another Candidate (the proposal digest covers
    // the author), on the same tree.
    let mut other = proposal.clone();
    other.author.as_mut().unwrap().name = "Grace Hopper".into();
    let resealed = test.repo.seal(&inputs, &other).unwrap();
    assert_ne!(resealed.digest, sealed.digest);
    assert_eq!(resealed.manifest.tree, sealed.manifest.tree);
}

#[test]
fn a_candidate_on_a_candidate_keeps_modes_links_and_bytes() {
    // M, once integrated, is a base: a later seal on it reads its executables, links and
    // binary files back as they are.
    let (_dir, root) = private_dir();
    let (_source, test) = imported(&root);
    let first = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["src"]),
            &whole_tree_proposal(),
        )
        .unwrap();
    let base = test.repo.snapshot(&first.manifest.commit).unwrap();
    let modes: BTreeMap<&str, EntryMode> = base
        .files
        .iter()
        .map(|file| (file.path.as_str(), file.mode))
        .collect();
    assert_eq!(modes["src/run.sh"], EntryMode::Executable);
    assert_eq!(modes["src/current"], EntryMode::Symlink);
    let second = test
        .repo
        .seal(
            &frozen(first.manifest.commit, &["src"]),
            &Proposal::new(vec![FileEdit::text(
                "src/current",
                Some(digest(b"greet.txt")),
                None,
            )]),
        )
        .unwrap();
    let second_files = test.repo.candidate_files(&second).unwrap();
    assert!(second_files.iter().all(|file| file.path != "src/current"));
    assert_eq!(
        second_files
            .iter()
            .find(|f| f.path == "src/logo.png")
            .unwrap()
            .content,
        NEW_LOGO
    );
}

#[test]
fn dangerous_edits_are_refused_at_seal_naming_path_and_rule() {
    let (_dir, root) = private_dir();
    let (_source, test) = imported(&root);
    let inputs = frozen(test.identity.initial, &["src"]);
    let create = |path: &str| FileEdit::text(path, None, Some("x\n".into()));
    let link = |path: &str, target: &str| FileEdit::link(path, None, target);
    let cases: Vec<(&str, FileEdit, &str)> = vec![
        ("a .git directory", create("src/.git/config"), "git-segment"),
        ("a .GIT directory", create("src/.GIT/config"), "git-segment"),
        ("NTFS short name", create("src/git~1/config"), "git-segment"),
        ("a trailing dot", create("src/.git./config"), "git-segment"),
        (
            "a trailing space",
            create("src/.git /config"),
            "git-segment",
        ),
        (
            "an NTFS stream",
            create("src/.git::$INDEX_ALLOCATION/config"),
            "git-segment",
        ),
        (
            "an HFS ignorable",
            create("src/.g\u{200c}it/config"),
            "git-segment",
        ),
        (
            "a symlinked .gitmodules",
            link("src/.gitmodules", "greet.txt"),
            "symlinked-gitmodules",
        ),
        (
            "a link out of the tree",
            link("src/up", "../.."),
            "link-escapes",
        ),
        (
            "an absolute link",
            link("src/abs", "/etc/passwd"),
            "absolute-link",
        ),
        (
            "a link into .git",
            link("src/g", "../.git/config"),
            "link-into-git",
        ),
        (
            "a path through a link",
            create("src/t/inner"),
            "file-directory-clash",
        ),
        ("a dot segment", create("src/../x"), "dot-segment"),
    ];
    let before = test.tree_hash();
    for (name, edit, code) in cases {
        let path = edit.path.clone();
        let error = test
            .repo
            .seal(&inputs, &Proposal::new(vec![edit]))
            .unwrap_err();
        assert_eq!(error.code(), "rejected", "{name}: {error}");
        assert_eq!(
            error.rejection().map(|r| r.code()),
            Some(code),
            "{name}: {error}"
        );
        assert!(
            error.to_string().contains(&path),
            "{name}: names the path: {error}"
        );
        assert_eq!(test.tree_hash(), before, "{name}: nothing written");
    }
    // A link escaping through another link: `src/a -> ..` stays inside, but `src/b -> a/..`
    // then leaves the tree.
    let error = test
        .repo
        .seal(
            &inputs,
            &Proposal::new(vec![link("src/a", ".."), link("src/b", "a/..")]),
        )
        .unwrap_err();
    assert_eq!(
        error.rejection().map(|r| r.code()),
        Some("link-escapes"),
        "{error}"
    );
    assert!(error.to_string().contains("src/b"), "{error}");
    assert_eq!(test.tree_hash(), before);
}

#[test]
fn edits_that_say_nothing_or_too_much_are_refused() {
    let (_dir, root) = private_dir();
    let (_source, test) = imported(&root);
    let inputs = frozen(test.identity.initial, &["src"]);
    let run = digest(b"#!/bin/sh\ncat greet.txt\n");
    let cases: Vec<(&str, FileEdit, &str)> = vec![
        (
            "a mode it already has",
            FileEdit::mode("src/run.sh", run.clone(), EntryMode::Regular),
            "no-change",
        ),
        (
            "a mode for a link",
            FileEdit::mode("src/t", digest(b"tool"), EntryMode::Executable),
            "wrong-kind",
        ),
        (
            "the same bytes",
            FileEdit::bytes("src/logo.png", Some(digest(LOGO)), LOGO.to_vec()),
            "no-change",
        ),
        (
            "the same link",
            FileEdit::link("src/t", Some(digest(b"tool")), "tool"),
            "no-change",
        ),
        (
            "a link and a mode",
            FileEdit::link("src/l", None, "tool").with_mode(EntryMode::Executable),
            "ambiguous-edit",
        ),
        (
            "a mode for nothing",
            FileEdit::mode("src/none", run, EntryMode::Executable),
            "absent-file",
        ),
    ];
    let before = test.tree_hash();
    for (name, edit, code) in cases {
        let error = test
            .repo
            .seal(&inputs, &Proposal::new(vec![edit]))
            .unwrap_err();
        assert_eq!(
            error.rejection().map(|r| r.code()),
            Some(code),
            "{name}: {error}"
        );
        assert_eq!(test.tree_hash(), before, "{name}: nothing written");
    }
    // A text edit of an executable keeps it executable; text with a mode sets it.
    let sealed = test
        .repo
        .seal(
            &inputs,
            &Proposal::new(vec![
                FileEdit::text(
                    "src/tool",
                    Some(digest(b"#!/bin/sh\necho tool\n")),
                    Some("#!/bin/sh\necho tool 2\n".into()),
                ),
                FileEdit::text("src/new.sh", None, Some("#!/bin/sh\n".into()))
                    .with_mode(EntryMode::Executable),
            ]),
        )
        .unwrap();
    let files = test.repo.candidate_files(&sealed).unwrap();
    for path in ["src/tool", "src/new.sh"] {
        let file = files.iter().find(|file| file.path == path).unwrap();
        assert_eq!(file.mode, EntryMode::Executable, "{path}");
    }
}

#[test]
fn a_slice_may_raise_the_proposal_bounds_up_to_the_hard_cap() {
    let (_dir, root) = private_dir();
    let (_source, test) = imported(&root);
    let many: Vec<FileEdit> = (0..100)
        .map(|at| FileEdit::text(format!("src/gen/{at}.txt"), None, Some(format!("{at}\n"))))
        .collect();
    let mut inputs = frozen(test.identity.initial, &["src"]);
    let error = test
        .repo
        .seal(&inputs, &Proposal::new(many.clone()))
        .unwrap_err();
    assert_eq!(
        error.rejection().map(|r| r.code()),
        Some("too-many-edits"),
        "{error}"
    );
    inputs.bounds = ProposalBounds {
        edits: 128,
        bytes: ProposalBounds::DEFAULT.bytes,
    };
    let sealed = test.repo.seal(&inputs, &Proposal::new(many)).unwrap();
    assert_eq!(sealed.manifest.bounds.edits, 128);
    assert_eq!(sealed.manifest.edits.len(), 100);
    // Beyond the hard cap, the frozen inputs themselves are refused.
    inputs.bounds.edits = ProposalBounds::HARD_CAP.edits + 1;
    let error = test
        .repo
        .seal(
            &inputs,
            &Proposal::new(vec![FileEdit::text("src/x", None, Some("x".into()))]),
        )
        .unwrap_err();
    assert_eq!(error.code(), "invalid-input", "{error}");
    assert!(error.to_string().contains("frozen.bounds.edits"), "{error}");
}
