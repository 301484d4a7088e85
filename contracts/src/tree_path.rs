//! Git's tree model as sf holds it, and the rules a tree must keep: the rules of one path
//! (Git's own, through `gix-validate`, plus the limits of the file systems sf writes to), and
//! the rules of a whole tree (no path twice, none beneath a file or a symbolic link, no case
//! collision involving a link, every link resolving inside the tree).
//!
//! Everything here is a pure function of the paths and link targets: nothing reads a disk.
//! The checks return every fault they find, in path order, so a refused tree can be reported
//! whole.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use gix_validate::path::component::{self, Mode, Options};

/// The longest segment accepted, in bytes: Linux's `NAME_MAX`. Git itself accepts segments up
/// to 4,096 bytes, but sf materialises every tree it holds, and no Linux file system can
/// store a longer name.
pub const MAX_SEGMENT_BYTES: usize = 255;
/// The longest path accepted, in bytes: Linux's `PATH_MAX`.
pub const MAX_PATH_BYTES: usize = 4096;
/// The longest symbolic link target accepted, in bytes: Linux's `PATH_MAX`.
pub const MAX_LINK_TARGET_BYTES: usize = 4096;
/// The most links one resolution follows: Linux's `MAXSYMLINKS`.
pub const MAX_LINK_HOPS: usize = 40;

/// Git's protections, all on: NTFS (`git~1`, trailing dots and spaces, `.git:stream`) and HFS
/// (ignorable code points) on every platform, as `git fsck` refuses them. The Windows-only
/// rules (device names, `:<>"|?*`) are off: they refuse names real Linux projects use.
const GIT_PROTECTIONS: Options = Options {
    protect_windows: false,
    protect_hfs: true,
    protect_ntfs: true,
};

/// What a leaf of a tree is: the three modes of Git's tree model that hold content.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EntryMode {
    /// A regular file, mode `100644`.
    Regular,
    /// An executable regular file, mode `100755`.
    Executable,
    /// A symbolic link, mode `120000`: the blob holds the target.
    Symlink,
}

impl EntryMode {
    /// The mode as a Git tree object writes it.
    pub fn octal(self) -> &'static str {
        match self {
            Self::Regular => "100644",
            Self::Executable => "100755",
            Self::Symlink => "120000",
        }
    }

    /// The mode a Git tree object writes as `text`; `None` for a directory (`40000`), a
    /// submodule (`160000`) or a mode Git does not write (`100664`, `040000`, …).
    pub fn from_octal(text: &[u8]) -> Option<Self> {
        match text {
            b"100644" => Some(Self::Regular),
            b"100755" => Some(Self::Executable),
            b"120000" => Some(Self::Symlink),
            _ => None,
        }
    }

    /// The word sf's records use: `file`, `executable` or `symlink`.
    pub fn word(self) -> &'static str {
        match self {
            Self::Regular => "file",
            Self::Executable => "executable",
            Self::Symlink => "symlink",
        }
    }
}

/// Which rule one path breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathRule {
    /// The path is empty.
    Empty,
    /// A segment is empty: a leading, trailing or doubled `/`.
    EmptySegment,
    /// A segment is `.` or `..` (also after a `\`, which Windows reads as a separator).
    DotSegment,
    /// A segment is a spelling of `.git` that Git refuses: any case, `git~1`, trailing dots
    /// or spaces, `.git:stream`, HFS's ignorable code points (also after a `\`).
    DotGit,
    /// A symbolic link is named `.gitmodules` in one of its spellings.
    SymlinkedGitModules,
    /// A segment holds a control character (U+0000–U+001F or U+007F).
    ControlCharacter,
    /// A segment is longer than [`MAX_SEGMENT_BYTES`].
    SegmentTooLong,
    /// The path is longer than [`MAX_PATH_BYTES`].
    PathTooLong,
}

impl PathRule {
    /// The stable kebab-case code of the rule.
    pub fn code(self) -> &'static str {
        match self {
            Self::Empty => "empty-path",
            Self::EmptySegment => "empty-segment",
            Self::DotSegment => "dot-segment",
            Self::DotGit => "git-segment",
            Self::SymlinkedGitModules => "symlinked-gitmodules",
            Self::ControlCharacter => "control-character",
            Self::SegmentTooLong => "segment-too-long",
            Self::PathTooLong => "path-too-long",
        }
    }

    /// What a path breaking the rule is, in words: the text of an error, so it states the
    /// violation (a rule read as an error says the opposite of what is wrong).
    pub fn describe(self) -> &'static str {
        match self {
            Self::Empty => "the path is empty",
            Self::EmptySegment => {
                "the path is absolute or has an empty segment (a leading, trailing or doubled /)"
            }
            Self::DotSegment => "a segment is . or ..",
            Self::DotGit => {
                "a segment is .git in a spelling Git refuses (any case, git~1, trailing dots or \
                 spaces, .git:stream, HFS-ignorable code points)"
            }
            Self::SymlinkedGitModules => ".gitmodules is a symbolic link",
            Self::ControlCharacter => "the path holds a control character",
            Self::SegmentTooLong => "a segment is longer than 255 bytes",
            Self::PathTooLong => "the path is longer than 4096 bytes",
        }
    }
}

impl fmt::Display for PathRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Checks one path of a tree whose leaf is `leaf` (`None` for a directory).
pub fn check_path(path: &str, leaf: Option<EntryMode>) -> Result<(), PathRule> {
    if path.is_empty() {
        return Err(PathRule::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathRule::PathTooLong);
    }
    let mut segments = path.split('/').peekable();
    while let Some(segment) = segments.next() {
        let is_leaf = segments.peek().is_none();
        let link = is_leaf && leaf == Some(EntryMode::Symlink);
        check_segment(segment, link)?;
    }
    Ok(())
}

/// Checks one segment; `link` when it names a symbolic link.
pub fn check_segment(segment: &str, link: bool) -> Result<(), PathRule> {
    if segment.is_empty() {
        return Err(PathRule::EmptySegment);
    }
    if segment.chars().any(|c| c < '\u{20}' || c == '\u{7f}') {
        return Err(PathRule::ControlCharacter);
    }
    if segment.len() > MAX_SEGMENT_BYTES {
        return Err(PathRule::SegmentTooLong);
    }
    let mode = link.then_some(Mode::Symlink);
    git_component(segment, mode)?;
    // Git reads the text after each `\` as a segment too (Windows and WSL take `\` as a
    // separator), so `a\.git` is `.git` there.
    for part in segment.split('\\').skip(1).filter(|part| !part.is_empty()) {
        git_component(part, mode)?;
    }
    Ok(())
}

fn git_component(segment: &str, mode: Option<Mode>) -> Result<(), PathRule> {
    match gix_validate::path::component(segment.into(), mode, GIT_PROTECTIONS) {
        Ok(_) => Ok(()),
        Err(component::Error::Empty) => Err(PathRule::EmptySegment),
        Err(component::Error::Relative) => Err(PathRule::DotSegment),
        Err(component::Error::SymlinkedGitModules) => Err(PathRule::SymlinkedGitModules),
        // `DotGitDir`, and anything a later gix-validate refuses: refused as Git's own rule.
        Err(_) => Err(PathRule::DotGit),
    }
}

/// Whether `segment` is `name` (a Git dot-file such as `gitattributes`, without its dot) in a
/// spelling that a case-insensitive, HFS or NTFS file system would open as that file: any
/// case, HFS-ignorable code points dropped, trailing dots and spaces or a `:stream` suffix.
pub fn is_dot_file(segment: &str, name: &str) -> bool {
    let visible: String = segment.chars().filter(|c| !is_hfs_ignorable(*c)).collect();
    let Some(rest) = visible.strip_prefix('.') else {
        return false;
    };
    let stem = rest.split(':').next().unwrap_or(rest);
    stem.trim_end_matches([' ', '.']).eq_ignore_ascii_case(name)
}

fn is_hfs_ignorable(c: char) -> bool {
    matches!(c as u32, 0x200c..=0x200f | 0x202a..=0x202e | 0x206a..=0x206f | 0xfeff)
}

/// One leaf of a tree as the tree rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf<'a> {
    /// A regular file, executable or not.
    File,
    /// A symbolic link and its target bytes.
    Symlink(&'a [u8]),
}

/// Which rule a symbolic link's target breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LinkRule {
    /// The target is empty.
    Empty,
    /// The target is longer than [`MAX_LINK_TARGET_BYTES`].
    TooLong,
    /// The target is not UTF-8.
    NotUtf8,
    /// The target holds a control character (NUL included).
    ControlCharacter,
    /// The target starts with `/`.
    Absolute,
    /// A segment of the target is a spelling of `.git`.
    DotGit,
    /// Resolved on the tree, following other links, the target leaves the tree.
    Escapes,
    /// Resolving the target follows more than [`MAX_LINK_HOPS`] links.
    TooManyHops,
}

impl LinkRule {
    /// The stable kebab-case code of the rule.
    pub fn code(self) -> &'static str {
        match self {
            Self::Empty => "empty-link",
            Self::TooLong => "link-too-long",
            Self::NotUtf8 => "link-not-utf8",
            Self::ControlCharacter => "link-control-character",
            Self::Absolute => "absolute-link",
            Self::DotGit => "link-into-git",
            Self::Escapes => "link-escapes",
            Self::TooManyHops => "link-loop",
        }
    }

    /// What a link breaking the rule is, in words (an error's text: the violation).
    pub fn describe(self) -> &'static str {
        match self {
            Self::Empty => "the link's target is empty",
            Self::TooLong => "the link's target is longer than 4096 bytes",
            Self::NotUtf8 => "the link's target is not UTF-8",
            Self::ControlCharacter => "the link's target holds a control character",
            Self::Absolute => "the link's target is absolute",
            Self::DotGit => "the link's target has a .git segment (in some spelling)",
            Self::Escapes => {
                "the link resolves outside the tree (following the tree's other links)"
            }
            Self::TooManyHops => {
                "the link does not resolve within 40 links (a loop or a long chain)"
            }
        }
    }
}

/// Which rule of a whole tree an entry breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TreeRule {
    /// The path itself breaks a rule.
    Path(PathRule),
    /// The path is listed twice.
    Duplicate,
    /// A proper prefix of the path is a file or a symbolic link (`with` names it): nothing is
    /// ever written beneath a link or a file.
    ThroughNonDirectory,
    /// The path equals another (`with`) when case is ignored, and one of them is a symbolic
    /// link: refused whatever the tree's policy.
    CaseCollisionWithLink,
    /// The path equals another (`with`) when case is ignored, in a tree whose policy refuses
    /// such pairs.
    CaseCollision,
    /// The path is a symbolic link whose target breaks a rule.
    Link(LinkRule),
}

impl TreeRule {
    /// The stable kebab-case code of the rule.
    pub fn code(self) -> &'static str {
        match self {
            Self::Path(rule) => rule.code(),
            Self::Duplicate => "duplicate-path",
            Self::ThroughNonDirectory => "file-directory-clash",
            Self::CaseCollisionWithLink => "case-collision-with-link",
            Self::CaseCollision => "case-collision",
            Self::Link(rule) => rule.code(),
        }
    }

    /// What an entry breaking the rule is, in words (an error's text: the violation).
    pub fn describe(self) -> &'static str {
        match self {
            Self::Path(rule) => rule.describe(),
            Self::Duplicate => "the path appears more than once",
            Self::ThroughNonDirectory => "the path lies beneath a file or a symbolic link",
            Self::CaseCollisionWithLink => {
                "the path differs only in case from another, and one of them is a symbolic link"
            }
            Self::CaseCollision => "the path differs only in case from another",
            Self::Link(rule) => rule.describe(),
        }
    }
}

/// One fault of a tree: the path at fault, the rule, and the other path the rule concerns.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TreeFault {
    /// The path at fault.
    pub path: String,
    /// The rule it breaks.
    pub rule: TreeRule,
    /// The other path of a collision or of a path beneath a non-directory.
    pub with: Option<String>,
}

impl fmt::Display for TreeFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.path, self.rule.describe())?;
        if let Some(with) = &self.with {
            write!(f, " ({with:?})")?;
        }
        Ok(())
    }
}

/// What a repository allows beyond the rules every tree keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreePolicy {
    /// Paths that differ only in case are allowed when neither is a symbolic link (trees made
    /// for Linux only, such as the kernel's, hold such pairs). Off by default: such a tree
    /// cannot be checked out on a case-insensitive file system.
    pub allow_case_collisions: bool,
}

/// Checks a whole tree given as its leaves (directories are the leaves' prefixes; an empty
/// directory cannot be held). Returns every fault, sorted; empty when the tree keeps every
/// rule.
pub fn check_tree<'a>(
    leaves: impl IntoIterator<Item = (&'a str, Leaf<'a>)>,
    policy: TreePolicy,
) -> Vec<TreeFault> {
    let mut faults = BTreeSet::new();
    let mut tree: BTreeMap<&'a str, Leaf<'a>> = BTreeMap::new();
    for (path, leaf) in leaves {
        let mode = match leaf {
            Leaf::File => EntryMode::Regular,
            Leaf::Symlink(_) => EntryMode::Symlink,
        };
        if let Err(rule) = check_path(path, Some(mode)) {
            // Named at the shallowest directory at fault (`.git`, not `.git/config`), so a
            // bad directory is one fault however many files it holds.
            let at = proper_prefixes(path)
                .find_map(|dir| check_path(dir, None).err().map(|rule| (dir, rule)))
                .unwrap_or((path, rule));
            faults.insert(fault(at.0, TreeRule::Path(at.1), None));
            continue;
        }
        if tree.insert(path, leaf).is_some() {
            faults.insert(fault(path, TreeRule::Duplicate, None));
        }
    }
    let view = TreeView { leaves: &tree };
    // The previous path's directories (each `/`'s offset) and whether a leaf has a
    // directory's path: the paths come sorted, so the directories one shares with the previous
    // path are its first ones, looked up once however many leaves they hold.
    let mut directories: Vec<(usize, bool)> = Vec::new();
    let mut previous = "";
    for (path, leaf) in &tree {
        let shared = common_prefix(previous, path);
        directories.retain(|&(at, _)| at < shared);
        for (at, _) in path.match_indices('/').skip(directories.len()) {
            directories.push((at, tree.contains_key(&path[..at])));
        }
        for &(at, leaf_there) in &directories {
            if leaf_there {
                faults.insert(fault(
                    path,
                    TreeRule::ThroughNonDirectory,
                    Some(&path[..at]),
                ));
            }
        }
        previous = path;
        if let Leaf::Symlink(target) = leaf
            && let Err(rule) = view.check_link(path, target)
        {
            faults.insert(fault(path, TreeRule::Link(rule), None));
        }
    }
    case_collisions(&tree, policy, &mut faults);
    faults.into_iter().collect()
}

fn fault(path: &str, rule: TreeRule, with: Option<&str>) -> TreeFault {
    TreeFault {
        path: path.to_owned(),
        rule,
        with: with.map(str::to_owned),
    }
}

/// The length of the longest common prefix of `a` and `b`, in bytes.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// `a`, `a/b` for `a/b/c`.
fn proper_prefixes(path: &str) -> impl Iterator<Item = &str> {
    path.match_indices('/').map(|(at, _)| &path[..at])
}

/// Groups every node (leaves and the directories above them) by its lowercase spelling; each
/// group of two or more spellings is a collision, refused always when a link is among them.
fn case_collisions(
    tree: &BTreeMap<&str, Leaf<'_>>,
    policy: TreePolicy,
    faults: &mut BTreeSet<TreeFault>,
) {
    // Each folded name's first spelling, and any others (rare: no allocation until then).
    let mut nodes: HashMap<Cow<'_, str>, (&str, Vec<&str>)> = HashMap::with_capacity(tree.len());
    let mut previous = "";
    for path in tree.keys() {
        // A directory the previous path (sorted before this one) shares is grouped already.
        let shared = common_prefix(previous, path);
        let new = proper_prefixes(path).filter(|dir| dir.len() >= shared);
        for node in new.chain(std::iter::once(*path)) {
            let folded = if node
                .bytes()
                .any(|byte| !byte.is_ascii() || byte.is_ascii_uppercase())
            {
                Cow::Owned(node.to_lowercase())
            } else {
                Cow::Borrowed(node)
            };
            match nodes.entry(folded) {
                Entry::Occupied(mut group) if group.get().0 != node => group.get_mut().1.push(node),
                Entry::Occupied(_) => {}
                Entry::Vacant(group) => {
                    group.insert((node, Vec::new()));
                }
            }
        }
        previous = path;
    }
    let groups = nodes
        .into_values()
        .filter(|(_, others)| !others.is_empty())
        .map(|(first, mut others)| {
            others.push(first);
            others
        });
    report_collisions(tree, groups, policy, faults);
}

/// The faults of each group of spellings that fold to one name (two or more of them).
fn report_collisions<'a>(
    tree: &BTreeMap<&str, Leaf<'_>>,
    groups: impl Iterator<Item = Vec<&'a str>>,
    policy: TreePolicy,
    faults: &mut BTreeSet<TreeFault>,
) {
    for mut spellings in groups {
        spellings.sort_unstable();
        spellings.dedup();
        if spellings.len() < 2 {
            continue;
        }
        let link = spellings
            .iter()
            .any(|node| matches!(tree.get(node), Some(Leaf::Symlink(_))));
        if !link && policy.allow_case_collisions {
            continue;
        }
        let rule = if link {
            TreeRule::CaseCollisionWithLink
        } else {
            TreeRule::CaseCollision
        };
        let mut spellings = spellings.iter();
        let first = spellings.next().copied().unwrap_or_default();
        for other in spellings {
            faults.insert(fault(other, rule, Some(first)));
        }
    }
}

/// A tree's leaves, for resolving links on it.
struct TreeView<'t, 'a> {
    leaves: &'t BTreeMap<&'a str, Leaf<'a>>,
}

impl TreeView<'_, '_> {
    /// Checks the target of the link at `path`: its own bytes, then its resolution on the
    /// tree, following other links as the kernel would.
    fn check_link(&self, path: &str, target: &[u8]) -> Result<(), LinkRule> {
        let target = check_target(target)?;
        let mut dir: Vec<&str> = proper_prefixes(path)
            .last()
            .map(|parent| parent.split('/').collect())
            .unwrap_or_default();
        let mut pending: Vec<&str> = target.split('/').rev().collect();
        let mut hops = 0;
        while let Some(segment) = pending.pop() {
            match segment {
                "" | "." => {}
                ".." => {
                    if dir.pop().is_none() {
                        return Err(LinkRule::Escapes);
                    }
                }
                name => {
                    dir.push(name);
                    match self.leaves.get(dir.join("/").as_str()) {
                        Some(Leaf::Symlink(next)) => {
                            hops += 1;
                            if hops > MAX_LINK_HOPS {
                                return Err(LinkRule::TooManyHops);
                            }
                            dir.pop();
                            // A link whose own target is bad is reported at that link; here
                            // it can only stop the resolution, never let it out.
                            let next = check_target(next).map_err(|_| LinkRule::Escapes)?;
                            pending.extend(next.split('/').rev());
                        }
                        // The kernel stops at a file (ENOTDIR) before anything is opened.
                        Some(Leaf::File) if !pending.is_empty() => return Ok(()),
                        // A directory, the link's final file, or a name the tree does not
                        // hold: a missing name is taken as a directory, so that a `..` after
                        // it is still counted (a run may create the name).
                        _ => {}
                    }
                }
            }
        }
        Ok(())
    }
}

/// The target's own rules: bytes, UTF-8, relative, no `.git` segment.
fn check_target(target: &[u8]) -> Result<&str, LinkRule> {
    if target.is_empty() {
        return Err(LinkRule::Empty);
    }
    if target.len() > MAX_LINK_TARGET_BYTES {
        return Err(LinkRule::TooLong);
    }
    let text = std::str::from_utf8(target).map_err(|_| LinkRule::NotUtf8)?;
    if text.chars().any(|c| c < '\u{20}' || c == '\u{7f}') {
        return Err(LinkRule::ControlCharacter);
    }
    if text.starts_with('/') {
        return Err(LinkRule::Absolute);
    }
    let dot_git = text
        .split('/')
        .filter(|segment| !matches!(*segment, "" | "." | ".."))
        .any(|segment| check_segment(segment, false) == Err(PathRule::DotGit));
    if dot_git {
        return Err(LinkRule::DotGit);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(faults: &[TreeFault]) -> Vec<(&str, &str)> {
        faults
            .iter()
            .map(|fault| (fault.path.as_str(), fault.rule.code()))
            .collect()
    }

    #[test]
    fn ordinary_content_of_real_repositories() {
        for path in [
            ".gitignore",
            ".gitattributes",
            ".github/workflows/ci.yml",
            ".gitlab-ci.yml",
            ".mailmap",
            ".gitmodules",
            ".gitkeep",
            ".git-blame-ignore-revs",
            ".gitu",
            ".git2",
            "node_modules/@scope/pkg/skills/a b.md",
            "docs/café.rst",
            "a\\b",
            "x.CON.zip",
            "CON",
            "gi~1",
            "gitu~1",
            "trailing.",
            "what?",
        ] {
            assert_eq!(check_path(path, Some(EntryMode::Regular)), Ok(()), "{path}");
        }
        for link in [".gitmodule", ".gitmodulesa", ".gitignore"] {
            assert_eq!(check_path(link, Some(EntryMode::Symlink)), Ok(()), "{link}");
        }
    }

    /// Git's and gix-validate's own dangerous names.
    #[test]
    fn dangerous_names() {
        let cases: &[(&str, Option<EntryMode>, PathRule)] = &[
            ("", None, PathRule::Empty),
            ("/a", None, PathRule::EmptySegment),
            ("a/", None, PathRule::EmptySegment),
            ("a//b", None, PathRule::EmptySegment),
            (".", None, PathRule::DotSegment),
            ("a/../b", None, PathRule::DotSegment),
            ("a\\..", None, PathRule::DotSegment),
            (".git", None, PathRule::DotGit),
            (".GIT", None, PathRule::DotGit),
            ("a/.gIt/config", None, PathRule::DotGit),
            ("git~1", None, PathRule::DotGit),
            ("GIT~1", None, PathRule::DotGit),
            (".git.", None, PathRule::DotGit),
            (".git ", None, PathRule::DotGit),
            (".git . .", None, PathRule::DotGit),
            (".git::$INDEX_ALLOCATION", None, PathRule::DotGit),
            (".git:foo", None, PathRule::DotGit),
            (".g\u{200c}it", None, PathRule::DotGit),
            (".GIT\u{200e}", None, PathRule::DotGit),
            ("\u{206e}.gIt", None, PathRule::DotGit),
            (".gi\u{feff}t/hooks", None, PathRule::DotGit),
            ("a\\.git", None, PathRule::DotGit),
            (
                ".gitmodules",
                Some(EntryMode::Symlink),
                PathRule::SymlinkedGitModules,
            ),
            (
                ".GitModules",
                Some(EntryMode::Symlink),
                PathRule::SymlinkedGitModules,
            ),
            (
                "gitmod~1",
                Some(EntryMode::Symlink),
                PathRule::SymlinkedGitModules,
            ),
            (
                ".gitmodules ",
                Some(EntryMode::Symlink),
                PathRule::SymlinkedGitModules,
            ),
            ("a\0b", None, PathRule::ControlCharacter),
            ("a\rb", None, PathRule::ControlCharacter),
            ("sub\r", None, PathRule::ControlCharacter),
            ("a\u{7f}", None, PathRule::ControlCharacter),
        ];
        for (path, leaf, rule) in cases {
            assert_eq!(check_path(path, *leaf), Err(*rule), "{path:?}");
        }
        assert_eq!(check_path(&"a".repeat(255), None), Ok(()));
        assert_eq!(
            check_path(&"a".repeat(256), None),
            Err(PathRule::SegmentTooLong)
        );
        let long = vec!["a"; 2049].join("/");
        assert_eq!(check_path(&long, None), Err(PathRule::PathTooLong));
    }

    #[test]
    fn dot_files_in_every_spelling() {
        for spelling in [
            ".gitattributes",
            ".GitAttributes",
            ".gitattributes. ",
            ".gitattributes:x",
        ] {
            assert!(is_dot_file(spelling, "gitattributes"), "{spelling}");
        }
        assert!(is_dot_file(".git\u{200d}ignore", "gitignore"));
        assert!(!is_dot_file(".gitattributesx", "gitattributes"));
        assert!(!is_dot_file("gitattributes", "gitattributes"));
    }

    #[test]
    fn links_resolve_inside_the_tree() {
        let tree = [
            ("a/file", Leaf::File),
            ("a/up", Leaf::Symlink(b"..")),
            ("a/self", Leaf::Symlink(b"./file")),
            ("top", Leaf::Symlink(b"a/up/a/file")),
            ("chain", Leaf::Symlink(b"top")),
            ("dangling", Leaf::Symlink(b"nowhere/x")),
            ("b/c/deep", Leaf::Symlink(b"../../a//file")),
            ("through-file", Leaf::Symlink(b"a/file/../../..")),
        ];
        assert_eq!(check_tree(tree, TreePolicy::default()), vec![]);
    }

    #[test]
    fn links_that_leave_the_tree_or_name_git() {
        type Case<'a> = (&'a [(&'a str, Leaf<'a>)], &'a str, &'a str);
        let cases: &[Case] = &[
            (&[("l", Leaf::Symlink(b".."))], "l", "link-escapes"),
            (&[("a/l", Leaf::Symlink(b"../.."))], "a/l", "link-escapes"),
            // Lexically `M -> a/L/..` is `a`; through the link it is the root's parent.
            (
                &[
                    ("a/L", Leaf::Symlink(b"..")),
                    ("M", Leaf::Symlink(b"a/L/..")),
                ],
                "M",
                "link-escapes",
            ),
            (
                &[("x", Leaf::Symlink(b"missing/../.."))],
                "x",
                "link-escapes",
            ),
            (
                &[("abs", Leaf::Symlink(b"/etc/passwd"))],
                "abs",
                "absolute-link",
            ),
            (&[("g", Leaf::Symlink(b".git/hooks"))], "g", "link-into-git"),
            (
                &[("g", Leaf::Symlink(b"a/GIT~1/config"))],
                "g",
                "link-into-git",
            ),
            (&[("e", Leaf::Symlink(b""))], "e", "empty-link"),
            (
                &[("n", Leaf::Symlink(b"a\0b"))],
                "n",
                "link-control-character",
            ),
            (&[("u", Leaf::Symlink(b"\xff"))], "u", "link-not-utf8"),
            (
                &[("p", Leaf::Symlink(b"q")), ("q", Leaf::Symlink(b"p"))],
                "p",
                "link-loop",
            ),
        ];
        for (tree, path, code) in cases {
            let faults = check_tree(tree.iter().copied(), TreePolicy::default());
            assert!(
                codes(&faults).contains(&(path, code)),
                "{path} {code}: {faults:?}"
            );
        }
        let long = vec![b'a'; MAX_LINK_TARGET_BYTES + 1];
        let faults = check_tree([("l", Leaf::Symlink(&long))], TreePolicy::default());
        assert_eq!(codes(&faults), [("l", "link-too-long")]);
    }

    #[test]
    fn nothing_beneath_a_file_or_a_link() {
        let faults = check_tree(
            [
                ("x", Leaf::Symlink(b"d")),
                ("x/config", Leaf::File),
                ("d/f", Leaf::File),
                ("f", Leaf::File),
                ("f/g/h", Leaf::File),
            ],
            TreePolicy::default(),
        );
        assert_eq!(
            codes(&faults),
            [
                ("f/g/h", "file-directory-clash"),
                ("x/config", "file-directory-clash")
            ]
        );
        assert_eq!(faults[1].with.as_deref(), Some("x"));
    }

    #[test]
    fn case_collisions_are_listed_and_a_link_is_never_allowed_in_one() {
        let tree = [
            ("README", Leaf::File),
            ("readme", Leaf::File),
            ("Dir/a", Leaf::File),
            ("dir/b", Leaf::File),
        ];
        let faults = check_tree(tree, TreePolicy::default());
        assert_eq!(
            codes(&faults),
            [("dir", "case-collision"), ("readme", "case-collision")]
        );
        assert_eq!(faults[0].with.as_deref(), Some("Dir"));
        let allowed = TreePolicy {
            allow_case_collisions: true,
        };
        assert_eq!(check_tree(tree, allowed), vec![]);
        // CVE-2021-21300's shape: a directory and a link that fold to one name.
        let linked = [
            ("A/post-checkout", Leaf::File),
            ("a", Leaf::Symlink(b"b")),
            ("b/x", Leaf::File),
        ];
        assert_eq!(
            codes(&check_tree(linked, allowed)),
            [("a", "case-collision-with-link")]
        );
    }

    /// The rules of the clash and case checks as first written: every directory of every
    /// path looked up and grouped again for each leaf beneath it.
    fn clashes_and_collisions_looked_up_per_leaf(
        paths: &[String],
        links: &BTreeSet<&str>,
        policy: TreePolicy,
    ) -> BTreeSet<TreeFault> {
        let tree: BTreeMap<&str, Leaf<'_>> = paths
            .iter()
            .map(|path| {
                let leaf = if links.contains(path.as_str()) {
                    Leaf::Symlink(b"x")
                } else {
                    Leaf::File
                };
                (path.as_str(), leaf)
            })
            .collect();
        let mut faults = BTreeSet::new();
        for path in tree.keys() {
            for prefix in proper_prefixes(path) {
                if tree.contains_key(prefix) {
                    faults.insert(fault(path, TreeRule::ThroughNonDirectory, Some(prefix)));
                }
            }
        }
        let mut nodes: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for path in tree.keys() {
            for node in proper_prefixes(path).chain(std::iter::once(*path)) {
                nodes.entry(node.to_lowercase()).or_default().insert(node);
            }
        }
        let groups = nodes.into_values().map(|group| group.into_iter().collect());
        report_collisions(&tree, groups, policy, &mut faults);
        faults
    }

    #[test]
    fn each_directory_looked_up_once_finds_what_a_lookup_per_leaf_finds() {
        // Deterministic trees of few names, so that clashes (a file where a directory is),
        // case collisions at every depth and links among them are common.
        let names = ["a", "A", "b", "ab", "a.b", "B", "\u{c4}", "\u{e4}", "z"];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut kinds = BTreeSet::new();
        for _ in 0..400 {
            let count = 1 + next(24);
            let paths: Vec<String> = (0..count)
                .map(|_| {
                    (0..1 + next(4))
                        .map(|_| names[next(names.len())])
                        .collect::<Vec<_>>()
                        .join("/")
                })
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let links: BTreeSet<&str> = paths
                .iter()
                .filter(|_| next(5) == 0)
                .map(String::as_str)
                .collect();
            for allow_case_collisions in [false, true] {
                let policy = TreePolicy {
                    allow_case_collisions,
                };
                let expected = clashes_and_collisions_looked_up_per_leaf(&paths, &links, policy);
                let leaves = paths.iter().map(|path| {
                    let leaf = if links.contains(path.as_str()) {
                        Leaf::Symlink(b"x")
                    } else {
                        Leaf::File
                    };
                    (path.as_str(), leaf)
                });
                let found: BTreeSet<TreeFault> = check_tree(leaves, policy)
                    .into_iter()
                    .filter(|fault| {
                        matches!(
                            fault.rule,
                            TreeRule::ThroughNonDirectory
                                | TreeRule::CaseCollision
                                | TreeRule::CaseCollisionWithLink
                        )
                    })
                    .collect();
                assert_eq!(found, expected, "{paths:?} links {links:?}");
                for fault in &expected {
                    kinds.insert(fault.rule.code());
                }
            }
        }
        // The trees were not all clean: the comparison saw faults of every kind.
        assert_eq!(
            kinds.into_iter().collect::<Vec<_>>(),
            [
                "case-collision",
                "case-collision-with-link",
                "file-directory-clash"
            ]
        );
    }

    #[test]
    fn every_fault_is_listed_not_only_the_first() {
        let faults = check_tree(
            [
                (".git/config", Leaf::File),
                ("ok", Leaf::File),
                ("a\rb", Leaf::File),
                ("l", Leaf::Symlink(b"/")),
            ],
            TreePolicy::default(),
        );
        assert_eq!(
            codes(&faults),
            [
                (".git", "git-segment"),
                ("a\rb", "control-character"),
                ("l", "absolute-link")
            ]
        );
    }

    #[test]
    fn modes() {
        for mode in [
            EntryMode::Regular,
            EntryMode::Executable,
            EntryMode::Symlink,
        ] {
            assert_eq!(EntryMode::from_octal(mode.octal().as_bytes()), Some(mode));
        }
        for other in ["40000", "160000", "100664", "040000", "100600"] {
            assert_eq!(EntryMode::from_octal(other.as_bytes()), None, "{other}");
        }
    }
}
