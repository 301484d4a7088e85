//! A rejected proposal writes nothing, and limits are exact: every bad proposal fails with a
//! code naming the reason, and the repository directory is byte-identical afterwards.

use sf_host::canonical::Digest;
use sf_host::contracts::tree_path::{PathRule, TreeRule};
use sf_host::repository::{
    FileEdit, FrozenInputs, InitialBase, Proposal, ProposalBounds, REPOSITORY_LIMITS, Rejection,
    RepositoryError, RepositorySettings, parse_proposal,
};
use sf_tests::{TestRepo, edit, frozen, proposal};

const EMPTY_PATH: Rejection = Rejection::Tree(TreeRule::Path(PathRule::Empty));
const EMPTY_SEGMENT: Rejection = Rejection::Tree(TreeRule::Path(PathRule::EmptySegment));
const DOT_SEGMENT: Rejection = Rejection::Tree(TreeRule::Path(PathRule::DotSegment));
const GIT_SEGMENT: Rejection = Rejection::Tree(TreeRule::Path(PathRule::DotGit));
const CONTROL_CHARACTER: Rejection = Rejection::Tree(TreeRule::Path(PathRule::ControlCharacter));
const SEGMENT_TOO_LONG: Rejection = Rejection::Tree(TreeRule::Path(PathRule::SegmentTooLong));
const FILE_DIRECTORY_CLASH: Rejection = Rejection::Tree(TreeRule::ThroughNonDirectory);
const CASE_COLLISION: Rejection = Rejection::Tree(TreeRule::CaseCollision);

const FILES: &[(&str, &str)] = &[
    ("src/a.txt", "alpha\n"),
    ("src/b.txt", "beta\n"),
    ("docs/readme.md", "readme\n"),
];
const SCOPE: &[&str] = &["src", "docs/readme.md"];

enum Input {
    Typed(Proposal),
    Json(Vec<u8>),
}

fn typed(edits: Vec<FileEdit>) -> Input {
    Input::Typed(proposal(edits))
}

fn json(text: &str) -> Input {
    Input::Json(text.as_bytes().to_vec())
}

fn create(path: &str, text: &str) -> FileEdit {
    edit(path, None, Some(text))
}

/// Seals `input` (parsing it first when it is JSON) and returns the error.
fn seal_error(test: &TestRepo, inputs: &FrozenInputs, input: &Input) -> RepositoryError {
    let parsed = match input {
        Input::Typed(proposal) => Ok(proposal.clone()),
        Input::Json(bytes) => parse_proposal(bytes),
    };
    match parsed.and_then(|proposal| test.repo.seal(inputs, &proposal)) {
        Ok(sealed) => panic!("sealed {}", sealed.digest),
        Err(error) => error,
    }
}

#[test]
fn rejected_proposals_write_nothing() {
    use Rejection::*;
    let test = TestRepo::git(FILES);
    let inputs = frozen(test.identity.initial, SCOPE);
    let over_edits: Vec<FileEdit> = (0..=(ProposalBounds::DEFAULT.edits as usize))
        .map(|n| create(&format!("src/n{n}.txt"), "x"))
        .collect();
    let big = "x".repeat(REPOSITORY_LIMITS.max_file_bytes + 1);
    let half = "y".repeat((ProposalBounds::DEFAULT.bytes as usize) / 2);
    let long_path = format!("src/{}", "p".repeat(256));
    let wrong = Digest::of(b"not the file").to_string();
    let alpha = Digest::of(b"alpha\n").to_string();
    let cases: Vec<(&str, Input, Rejection)> = vec![
        (
            "wrong prior",
            typed(vec![FileEdit::text(
                "src/a.txt",
                Some(Digest::of(b"x")),
                Some("n".into()),
            )]),
            WrongPrior,
        ),
        (
            "prior of another file",
            typed(vec![edit("src/b.txt", Some("alpha\n"), Some("n"))]),
            WrongPrior,
        ),
        (
            "absent file",
            typed(vec![edit("src/zzz.txt", Some("alpha\n"), Some("n"))]),
            AbsentFile,
        ),
        (
            "delete absent file",
            typed(vec![edit("src/zzz.txt", Some("alpha\n"), None)]),
            AbsentFile,
        ),
        (
            "existing file with prior null",
            typed(vec![create("src/a.txt", "n")]),
            FileExists,
        ),
        (
            "both null",
            typed(vec![edit("src/a.txt", None, None)]),
            EmptyEdit,
        ),
        (
            "unchanged text",
            typed(vec![edit("src/a.txt", Some("alpha\n"), Some("alpha\n"))]),
            NoChange,
        ),
        (
            "duplicate path",
            typed(vec![create("src/n.txt", "1"), create("src/n.txt", "2")]),
            DuplicatePath,
        ),
        (
            "duplicate path differing only in case",
            typed(vec![create("src/n.txt", "1"), create("src/N.txt", "2")]),
            DuplicatePath,
        ),
        (
            "path outside scope",
            typed(vec![create("other/x.txt", "x")]),
            OutsideScope,
        ),
        (
            "scope prefix is not a directory",
            typed(vec![create("srcx/a.txt", "x")]),
            OutsideScope,
        ),
        (
            "scope file's sibling",
            typed(vec![create("docs/other.md", "x")]),
            OutsideScope,
        ),
        (
            "absolute path",
            typed(vec![create("/src/x.txt", "x")]),
            EMPTY_SEGMENT,
        ),
        (
            "trailing slash",
            typed(vec![create("src/", "x")]),
            EMPTY_SEGMENT,
        ),
        (
            "empty segment",
            typed(vec![create("src//x.txt", "x")]),
            EMPTY_SEGMENT,
        ),
        ("empty path", typed(vec![create("", "x")]), EMPTY_PATH),
        (
            ".git after a backslash",
            typed(vec![create("src/a\\.git", "x")]),
            GIT_SEGMENT,
        ),
        (
            "NUL in path",
            typed(vec![create("src/a\0.txt", "x")]),
            CONTROL_CHARACTER,
        ),
        (
            "carriage return in path",
            typed(vec![create("src/a\r", "x")]),
            CONTROL_CHARACTER,
        ),
        (
            "dot-dot segment",
            typed(vec![create("src/../x.txt", "x")]),
            DOT_SEGMENT,
        ),
        (
            "dot segment",
            typed(vec![create("src/./x.txt", "x")]),
            DOT_SEGMENT,
        ),
        (
            ".git segment",
            typed(vec![create("src/.git/config", "x")]),
            GIT_SEGMENT,
        ),
        (
            ".GIT segment",
            typed(vec![create("src/.GIT/hooks", "x")]),
            GIT_SEGMENT,
        ),
        (
            "NTFS short name of .git",
            typed(vec![create("src/GIT~1/config", "x")]),
            GIT_SEGMENT,
        ),
        (
            ".git with a trailing dot",
            typed(vec![create("src/.git./config", "x")]),
            GIT_SEGMENT,
        ),
        (
            "HFS-ignorable spelling of .git",
            typed(vec![create("src/.g\u{200c}it/config", "x")]),
            GIT_SEGMENT,
        ),
        (
            "segment one byte over the limit",
            typed(vec![create(&long_path, "x")]),
            SEGMENT_TOO_LONG,
        ),
        (
            "NUL in text",
            typed(vec![create("src/n.txt", "a\0b")]),
            NulByte,
        ),
        (
            "LFS pointer",
            typed(vec![create(
                "src/n.bin",
                "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 1\n",
            )]),
            LfsPointer,
        ),
        (
            "file below an existing file",
            typed(vec![create("src/a.txt/x", "x")]),
            FILE_DIRECTORY_CLASH,
        ),
        (
            "file where a directory is",
            typed(vec![create("src", "x")]),
            FILE_DIRECTORY_CLASH,
        ),
        (
            "case collision with an existing file",
            typed(vec![create("src/A.txt", "x")]),
            CASE_COLLISION,
        ),
        (
            "case collision with an existing directory",
            typed(vec![create("SRC/x.txt", "x")]),
            OutsideScope,
        ),
        ("no edits", typed(vec![]), NoEdits),
        ("one edit over the limit", typed(over_edits), TooManyEdits),
        (
            "file one byte over the limit",
            typed(vec![create("src/big.txt", &big)]),
            FileTooLarge,
        ),
        (
            "proposal one byte over the limit",
            typed(vec![create("src/h1", &half), create("src/h2", &half)]),
            ProposalTooLarge,
        ),
        (
            "claimed passed",
            json(r#"{"edits":[{"path":"src/n","prior":null,"text":"x"}],"passed":true}"#),
            UnknownField,
        ),
        (
            "claimed verified in an edit",
            json(r#"{"edits":[{"path":"src/n","prior":null,"text":"x","verified":true}]}"#),
            UnknownField,
        ),
        (
            "missing text",
            json(r#"{"edits":[{"path":"src/n","prior":null}]}"#),
            MissingField,
        ),
        ("missing edits", json(r#"{}"#), MissingField),
        (
            "path is a number",
            json(r#"{"edits":[{"path":1,"prior":null,"text":"x"}]}"#),
            WrongType,
        ),
        (
            "text is an array",
            json(r#"{"edits":[{"path":"src/n","prior":null,"text":["x"]}]}"#),
            WrongType,
        ),
        ("edits is an object", json(r#"{"edits":{}}"#), WrongType),
        ("proposal is an array", json(r#"[]"#), WrongType),
        (
            "prior without prefix",
            json(&format!(
                r#"{{"edits":[{{"path":"src/a.txt","prior":"{}","text":"x"}}]}}"#,
                &alpha[7..]
            )),
            WrongType,
        ),
        (
            "prior in upper case",
            json(&format!(
                r#"{{"edits":[{{"path":"src/a.txt","prior":"{}","text":"x"}}]}}"#,
                alpha.to_uppercase()
            )),
            WrongType,
        ),
        (
            "prior too short",
            json(r#"{"edits":[{"path":"src/a.txt","prior":"sha256:00","text":"x"}]}"#),
            WrongType,
        ),
        (
            "wrong prior via JSON",
            json(&format!(
                r#"{{"edits":[{{"path":"src/a.txt","prior":"{wrong}","text":"x"}}]}}"#
            )),
            WrongPrior,
        ),
        (
            "duplicate key",
            json(r#"{"edits":[{"path":"src/n","path":"src/m","prior":null,"text":"x"}]}"#),
            DuplicateKey,
        ),
        (
            "invalid UTF-8",
            Input::Json(
                b"{\"edits\":[{\"path\":\"src/n\",\"prior\":null,\"text\":\"\xc3\x28\"}]}".to_vec(),
            ),
            InvalidUtf8,
        ),
        (
            "lone surrogate",
            json(r#"{"edits":[{"path":"src/n","prior":null,"text":"\ud800"}]}"#),
            InvalidJson,
        ),
        (
            "fractional number",
            json(r#"{"edits":[{"path":"src/n","prior":null,"text":"x"}],"n":1.5}"#),
            InvalidJson,
        ),
        ("trailing garbage", json(r#"{"edits":[]} x"#), InvalidJson),
    ];
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let before = test.tree_hash();
    let mut failures = Vec::new();
    for (name, input, reason) in &cases {
        let error = seal_error(&test, &inputs, input);
        if error.rejection() != Some(*reason) {
            failures.push(format!(
                "{name}: expected {}, got {} ({error})",
                reason.code(),
                error.code()
            ));
        }
        assert_eq!(test.tree_hash(), before, "{name} wrote something");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Nothing was published, and the repository still works.
    let sealed = test
        .repo
        .seal(&inputs, &proposal(vec![create("src/ok.txt", "ok\n")]))
        .unwrap();
    assert_eq!(test.repo.candidate_files(&sealed).unwrap().len(), 4);
}

#[test]
fn invalid_frozen_inputs_write_nothing() {
    let test = TestRepo::git(FILES);
    let good = frozen(test.identity.initial, SCOPE);
    let edits = proposal(vec![create("src/n.txt", "x")]);
    let blob = sf_host::git_object::object_id(sf_host::git_object::ObjectKind::Blob, b"alpha\n");
    let tree = test.repo.snapshot(&test.identity.initial).unwrap().tree;
    let mut cases: Vec<(&str, FrozenInputs)> = Vec::new();
    let mut push = |name, change: &dyn Fn(&mut FrozenInputs)| {
        let mut inputs = good.clone();
        change(&mut inputs);
        cases.push((name, inputs));
    };
    push("empty scope", &|f| f.scope.clear());
    push("scope over 64 entries", &|f| {
        f.scope = (0..65).map(|n| format!("s{n}")).collect()
    });
    push("scope with a bad path", &|f| f.scope.push("../x".into()));
    push("scope duplicated ignoring case", &|f| {
        f.scope.push("SRC".into())
    });
    push("slice id grammar", &|f| f.slice.id = "-bad".into());
    push("slice revision zero", &|f| f.slice.revision = 0);
    push("slice revision over 2^53-1", &|f| {
        f.slice.revision = 1 << 53
    });
    push("base that does not exist", &|f| {
        f.base = sf_host::git_object::ObjectId::from_bytes([9; 20])
    });
    push("base that is a blob", &|f| f.base = blob);
    push("base that is a tree", &|f| f.base = tree);
    let before = test.tree_hash();
    for (name, inputs) in &cases {
        let error = test.repo.seal(inputs, &edits).unwrap_err();
        assert_eq!(error.code(), "invalid-input", "{name}: {error}");
        assert_eq!(test.tree_hash(), before, "{name} wrote something");
    }
    // The proposal's canonical JSON can exceed the largest proposal document within the
    // hard cap's bytes when control characters are escaped (six bytes each): rejected, still
    // before any write.
    let mut raised = good.clone();
    raised.bounds = ProposalBounds::HARD_CAP;
    let controls = "\u{1}".repeat(6 * 1024 * 1024);
    let error = test
        .repo
        .seal(&raised, &proposal(vec![create("src/c.txt", &controls)]))
        .unwrap_err();
    assert_eq!(
        error.rejection(),
        Some(Rejection::ProposalTooLarge),
        "{}",
        error.to_string().chars().take(200).collect::<String>()
    );
    assert_eq!(test.tree_hash(), before);
}

#[test]
fn limits_are_exact() {
    let test = TestRepo::git(FILES);
    let inputs = frozen(test.identity.initial, SCOPE);
    // Edits: 64 accepted, 65 refused (above).
    let edits: Vec<FileEdit> = (0..(ProposalBounds::DEFAULT.edits as usize))
        .map(|n| create(&format!("src/e{n}.txt"), "x"))
        .collect();
    test.repo.seal(&inputs, &proposal(edits)).expect("64 edits");
    // Path: 255-byte segments accepted, making a path of 4096 bytes.
    let segment = "p".repeat(255);
    let mut path = format!("src/{}", vec![segment.as_str(); 16].join("/"));
    path.truncate(REPOSITORY_LIMITS.max_path_bytes);
    assert_eq!(path.len(), 4096);
    test.repo
        .seal(&inputs, &proposal(vec![create(&path, "x")]))
        .expect("4096-byte path");
    // Proposal bytes: paths plus texts exactly at the limit accepted, one over refused.
    let text = "z".repeat((ProposalBounds::DEFAULT.bytes as usize) - "src/q".len());
    test.repo
        .seal(&inputs, &proposal(vec![create("src/q", &text)]))
        .expect("proposal at the limit");
    let error = test
        .repo
        .seal(&inputs, &proposal(vec![create("src/qq", &text)]))
        .unwrap_err();
    assert_eq!(error.rejection(), Some(Rejection::ProposalTooLarge));
    // Scope: 64 entries accepted, 65 refused (above).
    let mut wide = inputs.clone();
    wide.scope = (0..63)
        .map(|n| format!("s{n}"))
        .chain(["src".to_owned()])
        .collect();
    test.repo
        .seal(&wide, &proposal(vec![create("src/w.txt", "w")]))
        .expect("64 scope entries");
}

/// A repository's own limits, recorded in its identity at create, hold exactly at create and
/// at seal: N files accepted and N + 1 refused before anything is written, and the same for
/// one file's bytes and the tree's bytes.
#[test]
fn source_limits_are_exact_at_create_and_seal() {
    let settings = RepositorySettings {
        max_files: 64,
        max_file_bytes: 1000,
        max_tree_bytes: 4000,
        allow_case_collisions: false,
    };
    let limited = |files: &[(&str, &str)]| {
        TestRepo::create_with(
            sf_tests::git_factory(),
            "product-1",
            InitialBase::Files(sf_tests::texts(files)),
            settings,
        )
    };
    let names: Vec<String> = (0..64).map(|n| format!("f/{n:04}")).collect();
    let full: Vec<(&str, &str)> = names.iter().map(|name| (name.as_str(), "x")).collect();
    let test = limited(&full);
    assert_eq!(test.identity.settings, Some(settings));
    let error = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["f"]),
            &proposal(vec![create("f/extra", "x")]),
        )
        .unwrap_err();
    assert_eq!(error.rejection(), Some(Rejection::TooManyFiles), "{error}");
    let replaced = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["f"]),
            &proposal(vec![edit("f/0000", Some("x"), Some("y"))]),
        )
        .unwrap();
    assert_eq!(test.repo.candidate_files(&replaced).unwrap().len(), 64);

    let (_dir, parent) = sf_tests::private_dir();
    let create_over = |name: &str, files: &[(&str, &str)]| {
        sf_host::repository::create_repository(
            sf_tests::git_factory().as_ref(),
            &sf_host::repository::CreateRepository {
                path: parent.join(name).to_str().unwrap().into(),
                product_id: "p".into(),
                target_ref: "refs/heads/main".into(),
                base: InitialBase::Files(sf_tests::texts(files)),
                settings,
            },
            &Default::default(),
        )
        .unwrap_err()
    };
    let mut over = full.clone();
    over.push(("f/extra", "x"));
    let error = create_over("over", &over);
    assert_eq!(error.code(), "invalid-input", "{error}");
    assert!(error.to_string().contains("too-many-files"), "{error}");
    assert!(
        !parent.join("over").exists(),
        "a refused create made its directory"
    );

    // Bytes: files of exactly the per-file limit making a tree of exactly the tree limit are
    // accepted; one byte more of either is refused.
    let most = "m".repeat(1000);
    let names: Vec<String> = (0..4).map(|n| format!("big/{n}")).collect();
    let big: Vec<(&str, &str)> = names
        .iter()
        .map(|name| (name.as_str(), most.as_str()))
        .collect();
    let test = limited(&big);
    let error = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["big"]),
            &proposal(vec![create("big/one-more", "1")]),
        )
        .unwrap_err();
    assert_eq!(
        error.rejection(),
        Some(Rejection::SourceTooLarge),
        "{error}"
    );
    let error = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["big"]),
            &proposal(vec![
                edit("big/0", Some(&most), Some(&format!("{most}m"))),
                edit("big/1", Some(&most), Some("s")),
            ]),
        )
        .unwrap_err();
    assert_eq!(error.rejection(), Some(Rejection::FileTooLarge), "{error}");
    let exported = test
        .repo
        .seal(
            &frozen(test.identity.initial, &["big"]),
            &proposal(vec![edit("big/0", Some(&most), Some("small"))]),
        )
        .unwrap();
    assert_eq!(
        test.repo.candidate_files(&exported).unwrap().len(),
        names.len()
    );
    let mut over = big.clone();
    let over_text = format!("{most}m");
    over[0].1 = &over_text;
    let error = create_over("over-bytes", &over);
    assert_eq!(error.code(), "invalid-input", "{error}");
    assert!(error.to_string().contains("file-too-large"), "{error}");
}
