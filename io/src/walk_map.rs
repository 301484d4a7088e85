//! A walk of a large tree whose `fstatat` calls are spread over the machine's cores, each
//! entry mapped to a value and the values given back in walk order: how a tree of 100,000
//! entries is checked against recorded stamps in a fraction of the time of one thread, which
//! spends almost all of it waiting in the kernel for one entry at a time.
//!
//! The tree is walked as [`DirFd::walk`] walks it (through descriptors, every directory
//! opened relative to its parent and checked to be the listed one); the top levels are
//! listed first on the calling thread until there are enough subtrees to share, and those are
//! walked whole, each on whichever thread is free, their values put back in place.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::dir_fd::{DirFd, DirFdError, Entry, EntryKind, joined};

/// How many subtrees per thread the top levels are split into before they are shared: enough
/// that one deep subtree does not leave the other threads idle for long.
const SUBTREES_PER_THREAD: usize = 8;
/// How many levels are listed on the calling thread at most before the subtrees are shared.
const MAX_SPLIT_LEVELS: usize = 4;
/// The most threads a walk uses.
const MAX_THREADS: usize = 8;

/// What maps each entry: the directory holding it, its path, the entry.
type Each<'a, T> = dyn Fn(&DirFd, &str, &Entry) -> Result<T, DirFdError> + Sync + 'a;
/// A subtree's values in walk order, or why its walk stopped.
type Walked<T> = Result<Vec<T>, DirFdError>;

/// Part of a walk in walk order: an entry's value, or a subtree not yet walked (the listed
/// directory entry, below the directory `parent` of the walk's listed directories, `None` the
/// walk's own). A subtree is opened only when it is listed or walked, so a wide tree never
/// holds more descriptors open than the few directories listed first.
enum Part<T> {
    Value(T),
    Below {
        parent: Option<usize>,
        entry: Entry,
        path: String,
    },
}

impl DirFd {
    /// Every entry below this directory, in walk order ([`DirFd::walk`]: depth first, by
    /// name bytes, a directory before what it holds), mapped by `each` (the directory holding
    /// the entry, the entry's `/`-separated path from here, the entry); the subtrees are
    /// walked on up to as many threads as the machine has cores. The first error in walk
    /// order is the walk's; a directory of more than `limit` entries is
    /// [`DirFdError::TooLarge`].
    pub fn walk_map<T: Send>(&self, limit: usize, each: &Each<'_, T>) -> Walked<T> {
        let threads = std::thread::available_parallelism()
            .map_or(1, NonZeroUsize::get)
            .min(MAX_THREADS);
        self.walk_map_on(threads, limit, each)
    }

    /// [`Self::walk_map`] on up to `threads` threads.
    fn walk_map_on<T: Send>(&self, threads: usize, limit: usize, each: &Each<'_, T>) -> Walked<T> {
        // The directories listed on this thread, open: the parents of the subtrees.
        let mut listed: Vec<DirFd> = Vec::new();
        let mut parts = Vec::new();
        list(self, None, "", limit, each, &mut parts)?;
        for _ in 1..MAX_SPLIT_LEVELS {
            let below = parts
                .iter()
                .filter(|part| matches!(part, Part::Below { .. }))
                .count();
            if threads == 1 || below == 0 || below >= threads * SUBTREES_PER_THREAD {
                break;
            }
            let mut split = Vec::with_capacity(parts.len());
            for part in parts {
                match part {
                    Part::Below {
                        parent,
                        entry,
                        path,
                    } => {
                        let dir = parent_of(self, &listed, parent).open_dir(&entry)?;
                        listed.push(dir);
                        let at = listed.len() - 1;
                        list(&listed[at], Some(at), &path, limit, each, &mut split)?;
                    }
                    value => split.push(value),
                }
            }
            parts = split;
        }
        let subtrees: Vec<Subtree<'_>> = parts
            .iter()
            .filter_map(|part| match part {
                Part::Below {
                    parent,
                    entry,
                    path,
                } => Some((parent_of(self, &listed, *parent), entry, path.as_str())),
                Part::Value(_) => None,
            })
            .collect();
        let mut walked = walk_shared(&subtrees, threads, limit, each).into_iter();
        let mut values = Vec::new();
        for part in parts {
            match part {
                Part::Value(value) => values.push(value),
                // One result per subtree, in the subtrees' order.
                Part::Below { path, .. } => {
                    values.extend(walked.next().unwrap_or_else(|| Err(not_walked(&path)))?)
                }
            }
        }
        Ok(values)
    }
}

/// A subtree to walk: the directory holding it, its listed entry, its path.
type Subtree<'a> = (&'a DirFd, &'a Entry, &'a str);

/// The directory `parent` names: one of `listed`, or the walk's own (`None`).
fn parent_of<'a>(top: &'a DirFd, listed: &'a [DirFd], parent: Option<usize>) -> &'a DirFd {
    parent.and_then(|at| listed.get(at)).unwrap_or(top)
}

/// The entries of `dir` (at `path`; `index` among the listed directories) as parts: each
/// entry's value, and after a directory's, its subtree.
fn list<T>(
    dir: &DirFd,
    index: Option<usize>,
    path: &str,
    limit: usize,
    each: &Each<'_, T>,
    parts: &mut Vec<Part<T>>,
) -> Result<(), DirFdError> {
    for entry in dir.entries(limit)? {
        let at = joined(path, &entry.name.to_string_lossy());
        parts.push(Part::Value(each(dir, &at, &entry)?));
        if entry.kind == EntryKind::Directory {
            parts.push(Part::Below {
                parent: index,
                entry,
                path: at,
            });
        }
    }
    Ok(())
}

/// Each of `subtrees` opened (checked to be the listed directory) and walked whole, on up to
/// `threads` threads, the results in the same order.
fn walk_shared<T: Send>(
    subtrees: &[Subtree<'_>],
    threads: usize,
    limit: usize,
    each: &Each<'_, T>,
) -> Vec<Walked<T>> {
    let walk_one = |(parent, entry, path): Subtree<'_>| -> Walked<T> {
        let mut values = Vec::new();
        parent
            .open_dir(entry)?
            .walk_below(path, limit, &mut |holder, at, entry| {
                values.push(each(holder, at, entry)?);
                Ok(true)
            })
            .map(|_| values)
    };
    if threads <= 1 || subtrees.len() <= 1 {
        return subtrees.iter().copied().map(walk_one).collect();
    }
    let next = AtomicUsize::new(0);
    // Each thread's results with their subtrees' places, put back in order.
    let mut placed: Vec<(usize, Walked<T>)> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..threads.min(subtrees.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut walked = Vec::new();
                    loop {
                        let at = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&subtree) = subtrees.get(at) else {
                            return walked;
                        };
                        walked.push((at, walk_one(subtree)));
                    }
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| {
                thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    placed.sort_by_key(|(at, _)| *at);
    placed.into_iter().map(|(_, walked)| walked).collect()
}

/// A subtree whose result is missing; never given while every subtree is walked once.
fn not_walked(path: &str) -> DirFdError {
    DirFdError::Unreadable {
        path: path.into(),
        detail: "its subtree was not walked".into(),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    /// Every entry's path and kind, as the one-thread walk gives them.
    fn walked(dir: &DirFd) -> Vec<String> {
        let mut paths = Vec::new();
        dir.walk(1 << 20, &mut |_, path, entry| {
            paths.push(format!("{path} {:?} {}", entry.kind, entry.size));
            Ok(true)
        })
        .unwrap();
        paths
    }

    #[test]
    fn the_shared_walk_gives_what_the_one_thread_walk_gives_in_its_order() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Wide and deep: enough subtrees to be shared, directories between files, a lone
        // deep branch, links never followed, an empty directory.
        for a in 0..12 {
            for b in 0..5 {
                let at = root.join(format!("a{a:02}/b{b}"));
                fs::create_dir_all(&at).unwrap();
                for f in 0..(a + b) {
                    fs::write(at.join(format!("f{f}")), vec![b'x'; f]).unwrap();
                }
            }
            fs::write(root.join(format!("a{a:02}.txt")), "t").unwrap();
        }
        fs::create_dir_all(root.join("deep/1/2/3/4/5/6")).unwrap();
        fs::write(root.join("deep/1/2/3/4/5/6/leaf"), "leaf").unwrap();
        fs::create_dir(root.join("empty")).unwrap();
        symlink("a00", root.join("link")).unwrap();
        let top = DirFd::open(root).unwrap();
        let expected = walked(&top);
        assert!(expected.len() > 400, "{}", expected.len());
        for threads in [1, 2, 3, 16] {
            let shared = top
                .walk_map_on(threads, 1 << 20, &|_, path, entry| {
                    Ok(format!("{path} {:?} {}", entry.kind, entry.size))
                })
                .unwrap();
            assert_eq!(shared, expected, "{threads} threads");
        }
    }

    #[test]
    fn the_first_error_in_walk_order_is_the_walks() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a", "b", "c"] {
            fs::create_dir_all(dir.path().join(name).join("x")).unwrap();
            fs::write(dir.path().join(name).join("x/f"), name).unwrap();
        }
        let top = DirFd::open(dir.path()).unwrap();
        let error = top
            .walk_map_on(2, 1 << 20, &|_, path, _| {
                if path.ends_with("x/f") && !path.starts_with('a') {
                    Err(DirFdError::Unreadable {
                        path: path.into(),
                        detail: "refused".into(),
                    })
                } else {
                    Ok(())
                }
            })
            .unwrap_err();
        assert!(error.to_string().starts_with("b/x/f"), "{error}");
        // A directory beyond the limit is refused wherever it is.
        fs::create_dir(dir.path().join("c/wide")).unwrap();
        for n in 0..5 {
            fs::write(dir.path().join(format!("c/wide/{n}")), "").unwrap();
        }
        let error = top.walk_map_on(2, 4, &|_, _, _| Ok(())).unwrap_err();
        assert_eq!(error.code(), "too-large", "{error}");
    }

    #[test]
    fn a_wide_tree_is_shared_without_holding_its_directories_open() {
        // Three directories of 300 each: the split lists the three and would hold 900
        // subtrees; each is opened only when it is walked.
        let dir = tempfile::tempdir().unwrap();
        for top in ["a", "b", "c"] {
            for n in 0..300 {
                let at = dir.path().join(format!("{top}/{n:03}"));
                fs::create_dir_all(&at).unwrap();
                fs::write(at.join("f"), "").unwrap();
            }
        }
        let open_fds = || fs::read_dir("/proc/self/fd").unwrap().count();
        let before = open_fds();
        let most = AtomicUsize::new(0);
        let calls = AtomicUsize::new(0);
        let top = DirFd::open(dir.path()).unwrap();
        let walked = top
            .walk_map_on(2, 1 << 20, &|_, _, _| {
                if calls.fetch_add(1, Ordering::Relaxed).is_multiple_of(25) {
                    most.fetch_max(open_fds(), Ordering::Relaxed);
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(walked.len(), 3 + 900 * 2);
        // Other tests of this process may hold a few descriptors of their own meanwhile.
        let most = most.into_inner();
        assert!(
            most < before + 100,
            "{most} descriptors open, {before} before"
        );
    }
}
