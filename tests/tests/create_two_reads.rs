//! A new repository's first base read twice, over the real git store and real directories and
//! Git repositories: the first read lists every leaf by its identities (every check made,
//! nothing created), the second stores the bytes. Whatever changes between the two reads is
//! refused, and nothing that was not read the first time is stored under a published ref.

use std::path::Path;
use std::sync::{Arc, Mutex};

use sf_host::git_source::GitSource;
use sf_host::repository::{
    CreateRepository, InitialBase, RepositoryError, RepositoryOptions, RepositorySettings,
    StreamedBase, create_repository, open_repository,
};
use sf_host::source_dir::{SourceDirBytes, list_source_dir};
use sf_tests::{git_factory, plain_git, private_dir};

fn request(path: &Path, base: InitialBase) -> CreateRepository {
    CreateRepository {
        path: path.to_str().unwrap().into(),
        product_id: "p".into(),
        target_ref: "refs/heads/main".into(),
        base,
        settings: RepositorySettings::default(),
    }
}

/// A directory of `n` files, `src/f{i}.txt`, and one executable.
fn source_dir(root: &Path, n: usize) {
    std::fs::create_dir_all(root.join("src")).unwrap();
    for i in 0..n {
        std::fs::write(root.join(format!("src/f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    let run = root.join("run.sh");
    std::fs::write(&run, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The directory `root` listed, as a base whose bytes are read again from it.
fn listed(root: &Path) -> InitialBase {
    let limits = RepositorySettings::default().limits();
    InitialBase::Streamed(StreamedBase {
        leaves: list_source_dir(root, &limits).unwrap(),
        commit: None,
        bytes: Arc::new(Mutex::new(SourceDirBytes::new(root, &limits))),
    })
}

#[test]
fn a_directory_read_twice_builds_the_tree_a_whole_read_builds() {
    let (_keep, dir) = private_dir();
    let src = dir.join("src-tree");
    source_dir(&src, 300);
    let factory = git_factory();
    let streamed = create_repository(
        factory.as_ref(),
        &request(&dir.join("streamed"), listed(&src)),
        &RepositoryOptions::default(),
    )
    .unwrap();
    let files = sf_host::source_dir::read_source_dir(&src, &RepositorySettings::default().limits())
        .unwrap();
    let whole = create_repository(
        factory.as_ref(),
        &request(&dir.join("whole"), InitialBase::Files(files)),
        &RepositoryOptions::default(),
    )
    .unwrap();
    let tree = |identity| {
        let repo = open_repository(factory.as_ref(), identity, RepositoryOptions::default());
        let repo = repo.unwrap();
        let snapshot = repo.snapshot(&repo.identity().initial).unwrap();
        (snapshot.tree, snapshot.files.len())
    };
    // Every blob was stored and reads back re-hashed; the trees are the same.
    assert_eq!(tree(&streamed), tree(&whole));
    assert_eq!(tree(&streamed).1, 301);
}

#[test]
fn a_file_changed_between_the_reads_is_refused_and_the_directory_never_opens() {
    for change in ["edit", "add", "remove", "chmod"] {
        let (_keep, dir) = private_dir();
        let src = dir.join("src-tree");
        source_dir(&src, 20);
        let base = listed(&src);
        match change {
            "edit" => std::fs::write(src.join("src/f7.txt"), "changed\n").unwrap(),
            "add" => std::fs::write(src.join("src/new.txt"), "new\n").unwrap(),
            "remove" => std::fs::remove_file(src.join("src/f7.txt")).unwrap(),
            _ => {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::Permissions::from_mode(0o644);
                std::fs::set_permissions(src.join("run.sh"), mode).unwrap();
            }
        }
        let path = dir.join("repo");
        let error = create_repository(
            git_factory().as_ref(),
            &request(&path, base),
            &RepositoryOptions::default(),
        )
        .unwrap_err();
        let RepositoryError::Conflict { what } = &error else {
            panic!("{change}: {error}");
        };
        assert!(what.contains("while sf read it"), "{change}: {what}");
        assert!(what.contains("has no ownership marker"), "{change}: {what}");
        // The directory holds no ref and no marker: nothing names what was written.
        let refs = plain_git(&path, &["for-each-ref"], b"");
        assert!(
            refs.is_empty(),
            "{change}: {}",
            String::from_utf8_lossy(&refs)
        );
        assert!(!path.join("sf-repository.json").exists(), "{change}");
    }
}

#[test]
fn a_commit_read_twice_is_held_byte_for_byte() {
    let (_keep, dir) = private_dir();
    let team = dir.join("team");
    std::fs::create_dir_all(&team).unwrap();
    plain_git(&team, &["init", "-q", "-b", "main"], b"");
    source_dir(&team, 50);
    plain_git(&team, &["add", "-A"], b"");
    plain_git(
        &team,
        &[
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@x",
            "commit",
            "-q",
            "-m",
            "first",
        ],
        b"",
    );
    let head = String::from_utf8(plain_git(&team, &["rev-parse", "HEAD"], b"")).unwrap();
    let settings = RepositorySettings::default();
    let mut git = GitSource::open(&team).unwrap();
    let (commit, leaves) = git
        .read_leaves("main", &settings.limits(), settings.policy())
        .unwrap();
    assert_eq!(leaves.len(), 51);
    let bytes = git.into_bytes(commit.tree, &settings.limits(), settings.policy());
    let base = InitialBase::Streamed(StreamedBase {
        leaves,
        commit: Some(commit),
        bytes: Arc::new(Mutex::new(bytes)),
    });
    let factory = git_factory();
    let identity = create_repository(
        factory.as_ref(),
        &request(&dir.join("owned"), base),
        &RepositoryOptions::default(),
    )
    .unwrap();
    assert_eq!(identity.initial.to_hex(), head.trim());
    let repo = open_repository(factory.as_ref(), &identity, RepositoryOptions::default());
    assert_eq!(
        repo.unwrap()
            .snapshot(&identity.initial)
            .unwrap()
            .files
            .len(),
        51
    );
}
