//! `sf repo create --from-git` reads only the repository it is given, and only one the caller
//! or root owns: a repository owned by another user, one borrowing a root-only repository's
//! objects through `objects/info/alternates`, a work tree whose `.git` is a symbolic link or a
//! gitfile, and a linked work tree's Git directory (`commondir`) are each refused with the
//! rule's code and the path at fault, and nothing is created. Controls show plain Git reading
//! each of them (so sf's refusal is its own rule) except the foreign-owned one, which plain
//! Git refuses too ("dubious ownership") unless `GIT_DIR` is set, as sf sets it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sf_tests::plugins::{run_json, sf};
use sf_tests::private_dir;

/// A uid no account on the machine uses: "another user".
const OTHER_UID: u32 = 64_123;

/// Plain git, isolated from the machine's configuration, in `dir`, with `env` set.
fn git_output(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new("git");
    command
        .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("running git")
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = git_output(dir, args, &[]);
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// A work tree at `root/name` with `files` in one commit.
fn make_repo(root: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir(&dir).unwrap();
    git(&dir, &["init", "-q"]);
    for (path, text) in files {
        std::fs::write(dir.join(path), text).unwrap();
    }
    git(&dir, &["add", "-A"]);
    git(&dir, &["commit", "-q", "-m", "source"]);
    dir
}

/// Gives everything under `path` (itself included) to `uid`, not following links.
fn chown_tree(path: &Path, uid: u32) {
    nix::unistd::fchownat(
        None,
        path,
        Some(nix::unistd::Uid::from_raw(uid)),
        None,
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .unwrap();
    if path.symlink_metadata().unwrap().is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_tree(&entry.unwrap().path(), uid);
        }
    }
}

/// The secret: a root-only repository holding `secret.txt`.
const SECRET: &str = "root-only secret bytes\n";

struct Work {
    _dir: tempfile::TempDir,
    root: PathBuf,
    secret: PathBuf,
}

impl Work {
    fn new() -> Self {
        let (dir, root) = private_dir();
        let secret = make_repo(&root, "secret", &[("secret.txt", SECRET)]);
        Self {
            _dir: dir,
            root,
            secret,
        }
    }

    /// `sf repo create --from-git REPO --rev HEAD` into `root/owned`: refused with `code`,
    /// naming `path`, and nothing created.
    fn assert_refused(&self, repo: &Path, code: &str, path: &Path) {
        let envelope = run_json(
            sf().args(["repo", "create", "--json", "--product", "p"])
                .args(["--target", "refs/heads/main", "--rev=HEAD", "--path"])
                .arg(self.root.join("owned"))
                .arg("--from-git")
                .arg(repo),
        );
        assert_eq!(envelope.error_code(), code, "{}", envelope.json);
        let message = envelope.error_message();
        assert!(
            message.contains(path.to_str().unwrap()) && message.contains(code),
            "the message names neither {} nor {code}: {message}",
            path.display()
        );
        assert!(!message.contains(SECRET.trim()), "{message}");
        assert!(self.root.join("owned").symlink_metadata().is_err());
    }
}

#[test]
fn a_repository_owned_by_another_user_is_refused() {
    let work = Work::new();
    let theirs = make_repo(&work.root, "theirs", &[("a.txt", "a\n")]);
    let bare = work.root.join("bare.git");
    git(&work.root, &["clone", "-q", "--bare", "theirs", "bare.git"]);
    chown_tree(&theirs, OTHER_UID);
    work.assert_refused(&theirs, "dubious-ownership", &theirs);
    // A bare repository of theirs, too.
    chown_tree(&bare, OTHER_UID);
    work.assert_refused(&bare, "dubious-ownership", &bare);

    // Control: plain Git refuses it as well when it finds the repository itself...
    let discovered = git_output(&theirs, &["rev-parse", "HEAD"], &[]);
    assert!(!discovered.status.success());
    assert!(
        String::from_utf8_lossy(&discovered.stderr).contains("dubious ownership"),
        "{discovered:?}"
    );
    // ... but not when told the Git directory, as sf tells it: the check is sf's to make.
    let explicit = git_output(
        &theirs,
        &["rev-parse", "HEAD"],
        &[("GIT_DIR", &theirs.join(".git"))],
    );
    assert!(explicit.status.success(), "{explicit:?}");
}

#[test]
fn a_repository_borrowing_objects_through_alternates_is_refused() {
    let work = Work::new();
    // A shared clone holds no objects of its own: its alternates file names the secret's.
    git(
        &work.root,
        &["clone", "-q", "--shared", "secret", "borrower"],
    );
    let borrower = work.root.join("borrower");
    let alternates = borrower.join(".git/objects/info/alternates");
    assert!(alternates.exists());
    work.assert_refused(&borrower, "alternates", &alternates);
    // The same file under another user's repository: the owner is refused first.
    chown_tree(&borrower, OTHER_UID);
    work.assert_refused(&borrower, "dubious-ownership", &borrower);
    // http-alternates too.
    let http = make_repo(&work.root, "http", &[("a.txt", "a\n")]);
    let file = http.join(".git/objects/info/http-alternates");
    std::fs::write(&file, "https://example.invalid/objects\n").unwrap();
    work.assert_refused(&http, "alternates", &file);

    // Control: plain Git reads the secret's bytes through the borrower.
    chown_tree(&borrower, 0);
    assert_eq!(
        git(&borrower, &["cat-file", "-p", "HEAD:secret.txt"]),
        SECRET
    );
}

#[test]
fn a_symlinked_git_dir_a_gitfile_and_a_commondir_are_refused() {
    let work = Work::new();
    let linked = work.root.join("linked");
    std::fs::create_dir(&linked).unwrap();
    std::os::unix::fs::symlink(work.secret.join(".git"), linked.join(".git")).unwrap();
    work.assert_refused(&linked, "symlinked-git-dir", &linked.join(".git"));

    let gitfile = work.root.join("gitfile");
    std::fs::create_dir(&gitfile).unwrap();
    std::fs::write(
        gitfile.join(".git"),
        format!("gitdir: {}\n", work.secret.join(".git").display()),
    )
    .unwrap();
    work.assert_refused(&gitfile, "gitfile", &gitfile.join(".git"));

    // A linked work tree: its .git is a gitfile, and its Git directory has a commondir.
    git(
        &work.secret,
        &["worktree", "add", "-q", "../tree", "-b", "side"],
    );
    let tree = work.root.join("tree");
    work.assert_refused(&tree, "gitfile", &tree.join(".git"));
    let admin = work.secret.join(".git/worktrees/tree");
    work.assert_refused(&admin, "commondir", &admin.join("commondir"));

    // A link in the path to the repository is not followed either.
    std::os::unix::fs::symlink(&work.secret, work.root.join("alias")).unwrap();
    work.assert_refused(
        &work.root.join("alias"),
        "symlink",
        &work.root.join("alias"),
    );

    // Controls: plain Git reads through each of them.
    for dir in [&linked, &gitfile, &tree] {
        assert_eq!(git(dir, &["show", "HEAD:secret.txt"]), SECRET, "{dir:?}");
    }
    let through_commondir = git_output(
        &work.root,
        &["show", "HEAD:secret.txt"],
        &[("GIT_DIR", &admin)],
    );
    assert!(through_commondir.status.success(), "{through_commondir:?}");

    // And the repository itself, named plainly, is read.
    let created = run_json(
        sf().args(["repo", "create", "--json", "--product", "p"])
            .args(["--target", "refs/heads/main", "--rev=HEAD", "--path"])
            .arg(work.root.join("owned"))
            .arg("--from-git")
            .arg(&work.secret),
    );
    created.result();
}
