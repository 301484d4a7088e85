//! The checks a foreign Git repository (`sf repo create --from-git REPO`) must pass before
//! Git reads it: sf names the Git directory explicitly (`GIT_DIR`), which switches off Git's
//! own ownership check (`safe.directory`), and Git would follow a `.git` link or gitfile and
//! read the objects of any repository an `objects/info/alternates` file names. So sf applies
//! the rules itself, through directory descriptors ([`sf_io::dir_fd`]), and reads only the
//! repository it was given:
//!
//! - every directory above `REPO` is owned by root or the caller, and writable by no group
//!   or others unless sticky (as `/tmp`), so no one else can swap `REPO` for another
//!   repository between these checks and Git's reading (`unsafe-parent`);
//! - `REPO`, its `.git` directory, `objects` and every directory directly in `objects` are
//!   owned by root or the caller (`dubious-ownership`) and writable by no group or others
//!   (`writable-by-others`), and none is a symbolic link (`symlink-in-repository`);
//! - no component of the path given is a symbolic link (`symlink`);
//! - `.git` is a directory: a link (`symlinked-git-dir`) or a file (a gitfile pointing
//!   elsewhere, `gitfile`) is refused;
//! - no `commondir` (`commondir`), no `objects/info/alternates` or
//!   `objects/info/http-alternates` (`alternates`).
//!
//! The environment Git gets is cleared ([`crate::process`]), so
//! `GIT_ALTERNATE_OBJECT_DIRECTORIES` and `GIT_OBJECT_DIRECTORY` never reach it.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use sf_io::dir_fd::{DirFd, DirFdError, Entry, EntryKind};

/// The rule a foreign repository broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForeignRule {
    /// A directory above the repository that someone else can change.
    UnsafeParent,
    /// Owned by neither the caller nor root.
    DubiousOwnership,
    /// Writable by group or others.
    WritableByOthers,
    /// `.git` is a symbolic link.
    SymlinkedGitDir,
    /// `.git` is a file (a gitfile naming another Git directory).
    Gitfile,
    /// `objects/info/alternates` or `objects/info/http-alternates` exists.
    Alternates,
    /// `commondir` exists (a linked work tree's Git directory sharing another's objects).
    Commondir,
    /// `objects` or a directory in it is a symbolic link.
    SymlinkInRepository,
    /// A symbolic link in the path given.
    SymlinkInPath,
}

impl ForeignRule {
    /// The stable kebab-case code of the rule.
    pub fn code(self) -> &'static str {
        match self {
            Self::UnsafeParent => "unsafe-parent",
            Self::DubiousOwnership => "dubious-ownership",
            Self::WritableByOthers => "writable-by-others",
            Self::SymlinkedGitDir => "symlinked-git-dir",
            Self::Gitfile => "gitfile",
            Self::Alternates => "alternates",
            Self::Commondir => "commondir",
            Self::SymlinkInRepository => "symlink-in-repository",
            Self::SymlinkInPath => "symlink",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Self::UnsafeParent => {
                "a directory above the repository must be owned by root or you and writable by \
                 no group or others unless sticky, or someone else could swap the repository"
            }
            Self::DubiousOwnership => {
                "must be owned by you or root (Git's safe.directory rule, which sf applies \
                 itself because it names the Git directory explicitly)"
            }
            Self::WritableByOthers => "must not be writable by group or others",
            Self::SymlinkedGitDir => {
                ".git is a symbolic link; sf reads only the repository it is given: name the \
                 real Git directory"
            }
            Self::Gitfile => {
                ".git is a file naming another Git directory (a gitfile, as a submodule or \
                 linked work tree has); name that Git directory itself"
            }
            Self::Alternates => {
                "borrows objects from another repository (alternates); sf reads only the \
                 repository it is given: repack it without alternates (git repack -a -d, then \
                 remove the file)"
            }
            Self::Commondir => {
                "shares another repository's objects and refs (commondir, a linked work tree); \
                 name the main repository"
            }
            Self::SymlinkInRepository => {
                "is a symbolic link; sf reads only the repository it is given"
            }
            Self::SymlinkInPath => {
                "is a symbolic link; sf follows none on the way to a repository: name it by \
                 its real path"
            }
        }
    }
}

/// Why a foreign repository cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ForeignRepositoryError {
    /// It is not a directory holding a Git repository.
    #[error("{}: {detail}", path.display())]
    NotARepository {
        /// The path at fault.
        path: PathBuf,
        /// What the system or the check found.
        detail: String,
    },
    /// It breaks one of the rules.
    #[error("{}: {} ({})", path.display(), rule.describe(), rule.code())]
    Refused {
        /// The rule it breaks.
        rule: ForeignRule,
        /// The path at fault.
        path: PathBuf,
    },
}

impl ForeignRepositoryError {
    /// The stable kebab-case code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotARepository { .. } => "not-a-repository",
            Self::Refused { rule, .. } => rule.code(),
        }
    }
}

type Result<T> = std::result::Result<T, ForeignRepositoryError>;

/// The Git directory to read: `REPO/.git` of a work tree, or `REPO` itself when bare.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedRepository {
    /// The Git directory, named to Git explicitly.
    pub git_dir: PathBuf,
}

fn not_a_repository(error: DirFdError) -> ForeignRepositoryError {
    let path = error.path().to_owned();
    // A directory error names its path first; the variant names it once itself.
    let text = error.to_string();
    let detail = text
        .strip_prefix(&format!("{}: ", path.display()))
        .unwrap_or(&text)
        .to_owned();
    ForeignRepositoryError::NotARepository { path, detail }
}

fn refuse(rule: ForeignRule, path: PathBuf) -> ForeignRepositoryError {
    ForeignRepositoryError::Refused { rule, path }
}

/// Whose files sf reads: root's and the caller's.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// Checks owner and mode of the directory `dir` (a directory of the repository).
fn check_directory(dir: &DirFd) -> Result<()> {
    let stat = dir.stat().map_err(not_a_repository)?;
    if !trusted_owner(stat.st_uid) {
        return Err(refuse(ForeignRule::DubiousOwnership, dir.path().to_owned()));
    }
    if stat.st_mode & 0o022 != 0 {
        return Err(refuse(ForeignRule::WritableByOthers, dir.path().to_owned()));
    }
    Ok(())
}

/// Opens `path` from `/`, one directory at a time without following links, checking every
/// directory above the last one: owned by root or the caller, and not writable by group or
/// others unless sticky.
fn open_checked_path(path: &Path) -> Result<DirFd> {
    let absolute = if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .map_err(|error| ForeignRepositoryError::NotARepository {
                path: path.to_owned(),
                detail: format!("the working directory is unknown ({error})"),
            })?
            .join(path)
    };
    let mut dir = DirFd::open(Path::new("/")).map_err(not_a_repository)?;
    for component in absolute.components() {
        let name = match component {
            Component::RootDir | Component::CurDir => continue,
            Component::Normal(name) => name,
            Component::ParentDir | Component::Prefix(_) => {
                return Err(ForeignRepositoryError::NotARepository {
                    path: path.to_owned(),
                    detail: "holds `..`; name the repository by a path without it".into(),
                });
            }
        };
        let stat = dir.stat().map_err(not_a_repository)?;
        let sticky = stat.st_mode & 0o1000 != 0;
        if !trusted_owner(stat.st_uid) || (stat.st_mode & 0o022 != 0 && !sticky) {
            return Err(refuse(ForeignRule::UnsafeParent, dir.path().to_owned()));
        }
        let shown = dir.shown(name);
        dir = dir.open_dir_named(name).map_err(|error| match error {
            DirFdError::Symlink { .. } => refuse(ForeignRule::SymlinkInPath, shown.clone()),
            other => not_a_repository(other),
        })?;
    }
    Ok(dir)
}

/// The entry `name` of `dir`, if any.
fn entry(dir: &DirFd, name: &str) -> Result<Option<Entry>> {
    dir.entry(OsStr::new(name)).map_err(not_a_repository)
}

/// Opens the directory `name` of the repository, which must not be a link, and checks it.
fn open_repository_dir(dir: &DirFd, name: &str) -> Result<DirFd> {
    let path = dir.shown(OsStr::new(name));
    match entry(dir, name)? {
        Some(found) if found.kind == EntryKind::Directory => {
            let opened = dir.open_dir(&found).map_err(not_a_repository)?;
            check_directory(&opened)?;
            Ok(opened)
        }
        Some(found) if found.kind == EntryKind::Symlink => {
            Err(refuse(ForeignRule::SymlinkInRepository, path))
        }
        _ => Err(ForeignRepositoryError::NotARepository {
            path,
            detail: "is not a directory; this is not a Git repository".into(),
        }),
    }
}

/// Checks the repository at `repo` (a work tree holding `.git`, or a bare repository) and
/// returns its Git directory. Nothing is read but names, owners and modes.
pub fn check_repository(repo: &Path) -> Result<CheckedRepository> {
    let top = open_checked_path(repo)?;
    check_directory(&top)?;
    let git_dir = match entry(&top, ".git")? {
        None => top,
        Some(found) => match found.kind {
            EntryKind::Directory => {
                let git_dir = top.open_dir(&found).map_err(not_a_repository)?;
                check_directory(&git_dir)?;
                git_dir
            }
            EntryKind::Symlink => {
                return Err(refuse(
                    ForeignRule::SymlinkedGitDir,
                    top.shown(OsStr::new(".git")),
                ));
            }
            _ => {
                return Err(refuse(ForeignRule::Gitfile, top.shown(OsStr::new(".git"))));
            }
        },
    };
    if entry(&git_dir, "commondir")?.is_some() {
        return Err(refuse(
            ForeignRule::Commondir,
            git_dir.shown(OsStr::new("commondir")),
        ));
    }
    let objects = open_repository_dir(&git_dir, "objects")?;
    // Every directory Git reads objects from: the loose fan-out, pack and info.
    for inner in objects.entries(1024).map_err(not_a_repository)? {
        match inner.kind {
            EntryKind::Directory => {
                check_directory(&objects.open_dir(&inner).map_err(not_a_repository)?)?
            }
            EntryKind::Symlink => {
                return Err(refuse(
                    ForeignRule::SymlinkInRepository,
                    objects.shown(&inner.name),
                ));
            }
            _ => {}
        }
    }
    if let Some(info) = entry(&objects, "info")?
        && info.kind == EntryKind::Directory
    {
        let info = objects.open_dir(&info).map_err(not_a_repository)?;
        for name in ["alternates", "http-alternates"] {
            if entry(&info, name)?.is_some() {
                return Err(refuse(
                    ForeignRule::Alternates,
                    info.shown(OsStr::new(name)),
                ));
            }
        }
    }
    Ok(CheckedRepository {
        git_dir: git_dir.path().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt as _;

    /// A minimal bare repository layout (what these checks look at), mode 0755.
    fn bare(root: &Path) -> PathBuf {
        let repo = root.join("bare.git");
        for dir in ["objects/info", "objects/pack", "objects/ab", "refs/heads"] {
            fs::create_dir_all(repo.join(dir)).unwrap();
        }
        fs::write(repo.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        repo
    }

    fn private() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let root = dir.path().canonicalize().unwrap();
        (dir, root)
    }

    #[test]
    fn a_plain_repository_passes() {
        let (_dir, root) = private();
        let repo = bare(&root);
        assert_eq!(check_repository(&repo).unwrap().git_dir, repo);
        let work = root.join("work");
        fs::create_dir(&work).unwrap();
        fs::rename(&repo, work.join(".git")).unwrap();
        assert_eq!(check_repository(&work).unwrap().git_dir, work.join(".git"));
    }

    #[test]
    fn each_rule_is_named() {
        type Make = fn(&Path, &Path);
        let cases: [(&str, Make); 7] = [
            ("alternates", |_, repo| {
                fs::write(repo.join("objects/info/alternates"), "/elsewhere\n").unwrap()
            }),
            ("alternates", |_, repo| {
                fs::write(repo.join("objects/info/http-alternates"), "x\n").unwrap()
            }),
            ("commondir", |_, repo| {
                fs::write(repo.join("commondir"), "..\n").unwrap()
            }),
            ("writable-by-others", |_, repo| {
                fs::set_permissions(repo.join("objects/ab"), fs::Permissions::from_mode(0o777))
                    .unwrap()
            }),
            ("writable-by-others", |_, repo| {
                fs::set_permissions(repo, fs::Permissions::from_mode(0o775)).unwrap()
            }),
            ("symlink-in-repository", |root, repo| {
                fs::create_dir(root.join("elsewhere")).unwrap();
                fs::remove_dir(repo.join("objects/pack")).unwrap();
                std::os::unix::fs::symlink(root.join("elsewhere"), repo.join("objects/pack"))
                    .unwrap();
            }),
            ("unsafe-parent", |root, _| {
                fs::set_permissions(root, fs::Permissions::from_mode(0o777)).unwrap()
            }),
        ];
        for (code, make) in cases {
            let (_dir, root) = private();
            let repo = bare(&root);
            make(&root, &repo);
            let error = check_repository(&repo).unwrap_err();
            assert_eq!(error.code(), code, "{error}");
        }
        // A sticky, world-writable directory above (as /tmp) is allowed.
        let (_dir, root) = private();
        let repo = bare(&root);
        fs::set_permissions(&root, fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(check_repository(&repo).is_ok());
    }

    #[test]
    fn a_git_link_or_gitfile_is_refused() {
        let (_dir, root) = private();
        let repo = bare(&root);
        let linked = root.join("linked");
        fs::create_dir(&linked).unwrap();
        std::os::unix::fs::symlink(&repo, linked.join(".git")).unwrap();
        assert_eq!(
            check_repository(&linked).unwrap_err().code(),
            "symlinked-git-dir"
        );
        let gitfile = root.join("gitfile");
        fs::create_dir(&gitfile).unwrap();
        fs::write(
            gitfile.join(".git"),
            format!("gitdir: {}\n", repo.display()),
        )
        .unwrap();
        assert_eq!(check_repository(&gitfile).unwrap_err().code(), "gitfile");
        assert_eq!(
            check_repository(&root.join("missing")).unwrap_err().code(),
            "not-a-repository"
        );
    }
}
