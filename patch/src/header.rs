//! The header of one file's patch: `diff --git a/X b/Y` and the extended lines after it
//! (modes, renames, copies, similarity, `index`, `---`/`+++`), read and then checked to
//! agree with each other, as `git apply` checks them.

use crate::lines::{Lines, trim_end};
use crate::path::{MAX_PATH, name_field, shown, strip_prefix, unquote, validate};
use crate::{Mode, Operation, PatchError};

/// The header lines of one file's patch, as read.
#[derive(Default)]
pub(crate) struct Header {
    line: usize,
    git_names: Option<(Vec<u8>, Vec<u8>)>,
    minus: Option<Side>,
    plus: Option<Side>,
    rename_from: Option<Vec<u8>>,
    rename_to: Option<Vec<u8>>,
    copy_from: Option<Vec<u8>>,
    copy_to: Option<Vec<u8>>,
    old_mode: Option<Mode>,
    new_mode: Option<Mode>,
    deleted_mode: Option<Mode>,
    new_file_mode: Option<Mode>,
    index: Option<Index>,
}

/// A `---` or `+++` name.
#[derive(PartialEq, Eq)]
enum Side {
    DevNull,
    Path(Vec<u8>),
}

struct Index {
    old: String,
    new: String,
    mode: Option<Mode>,
}

/// What the header says, once checked.
pub(crate) struct Resolved {
    pub(crate) operation: Operation,
    pub(crate) old_path: Option<String>,
    pub(crate) new_path: Option<String>,
    pub(crate) old_mode: Option<Mode>,
    pub(crate) new_mode: Option<Mode>,
    pub(crate) old_id: Option<String>,
    pub(crate) new_id: Option<String>,
    /// Whether `---`/`+++` lines were given (then hunks must follow).
    pub(crate) has_names: bool,
}

impl Header {
    /// Reads the `diff --git` line (the next line) and the extended header lines after it.
    pub(crate) fn parse(lines: &mut Lines) -> Result<Header, PatchError> {
        let line = lines.number();
        let first = lines.next_line().unwrap_or_default();
        let rest = first.strip_prefix(b"diff --git ").unwrap_or_default();
        let mut header = Header {
            line,
            git_names: git_names(trim_end(rest)),
            ..Header::default()
        };
        while let Some(next) = lines.peek() {
            let number = lines.number();
            if !header.extended(trim_end(next), number)? {
                break;
            }
            lines.next_line();
            // `+++` ends the header: hunks follow.
            if header.plus.is_some() {
                break;
            }
        }
        Ok(header)
    }

    /// Takes one extended header line; false when `text` is not one (the header has ended).
    fn extended(&mut self, text: &[u8], line: usize) -> Result<bool, PatchError> {
        let mut split = None;
        for (prefix, field) in FIELDS {
            if let Some(value) = text.strip_prefix(prefix.as_bytes()) {
                split = Some((*field, value));
                break;
            }
        }
        let Some((field, value)) = split else {
            return Ok(false);
        };
        let twice = || PatchError::Corrupt {
            line,
            what: format!("the header line {:?} appears twice", shown(text)),
        };
        let name = || {
            name_field(value).ok_or_else(|| PatchError::Corrupt {
                line,
                what: "a badly quoted file name".into(),
            })
        };
        match field {
            Field::OldMode => set(&mut self.old_mode, parse_mode(value, line)?, twice),
            Field::NewMode => set(&mut self.new_mode, parse_mode(value, line)?, twice),
            Field::DeletedMode => set(&mut self.deleted_mode, parse_mode(value, line)?, twice),
            Field::NewFileMode => set(&mut self.new_file_mode, parse_mode(value, line)?, twice),
            Field::RenameFrom => set(&mut self.rename_from, name()?, twice),
            Field::RenameTo => set(&mut self.rename_to, name()?, twice),
            Field::CopyFrom => set(&mut self.copy_from, name()?, twice),
            Field::CopyTo => set(&mut self.copy_to, name()?, twice),
            Field::Similarity => parse_percent(value, line),
            Field::Index => set(&mut self.index, parse_index(value, line)?, twice),
            Field::Minus => set(&mut self.minus, parse_side(value, line)?, twice),
            Field::Plus => set(&mut self.plus, parse_side(value, line)?, twice),
        }?;
        Ok(true)
    }
}

#[derive(Clone, Copy)]
enum Field {
    OldMode,
    NewMode,
    DeletedMode,
    NewFileMode,
    RenameFrom,
    RenameTo,
    CopyFrom,
    CopyTo,
    Similarity,
    Index,
    Minus,
    Plus,
}

const FIELDS: &[(&str, Field)] = &[
    ("old mode ", Field::OldMode),
    ("new mode ", Field::NewMode),
    ("deleted file mode ", Field::DeletedMode),
    ("new file mode ", Field::NewFileMode),
    ("rename from ", Field::RenameFrom),
    ("rename old ", Field::RenameFrom),
    ("rename to ", Field::RenameTo),
    ("rename new ", Field::RenameTo),
    ("copy from ", Field::CopyFrom),
    ("copy to ", Field::CopyTo),
    ("similarity index ", Field::Similarity),
    ("dissimilarity index ", Field::Similarity),
    ("index ", Field::Index),
    ("--- ", Field::Minus),
    ("+++ ", Field::Plus),
];

fn set<T>(
    slot: &mut Option<T>,
    value: T,
    twice: impl Fn() -> PatchError,
) -> Result<(), PatchError> {
    if slot.is_some() {
        return Err(twice());
    }
    *slot = Some(value);
    Ok(())
}

/// The two names of `diff --git a/X b/Y`, prefixes stripped, when they can be told apart:
/// quoted names always can; unquoted ones with spaces only when both are the same (Git's own
/// rule), else the `rename`/`copy`/`---`/`+++` lines must name the file.
fn git_names(rest: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    // No longer than two paths can be (quoted, a byte may take four characters).
    if rest.len() > 8 * MAX_PATH + 16 {
        return None;
    }
    let both = |a: &[u8], b: &[u8]| Some((strip_prefix(a)?.to_vec(), strip_prefix(b)?.to_vec()));
    if rest.first() == Some(&b'"') {
        let (a, used) = unquote(rest)?;
        let b = name_field(rest[used..].strip_prefix(b" ")?)?;
        return both(&a, &b);
    }
    // An unquoted first name is followed by a quoted second one at the first `"`, as Git reads it.
    if let Some(quote) = rest.iter().position(|&c| c == b'"') {
        let first = rest[..quote].strip_suffix(b" ")?;
        return both(first, &name_field(&rest[quote..])?);
    }
    unquoted_names(rest)
}

/// Two unquoted names: split at the space where both names (prefixes stripped) are the same,
/// or at the only space.
fn unquoted_names(rest: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    let spaces: Vec<usize> = (0..rest.len()).filter(|&i| rest[i] == b' ').collect();
    let first_slash = rest.iter().position(|&c| c == b'/')?;
    // next_slash[i]: the first `/` at or after i, so that each split is checked in O(1) unless
    // the two names have the same length.
    let mut next_slash = vec![usize::MAX; rest.len() + 1];
    for i in (0..rest.len()).rev() {
        next_slash[i] = if rest[i] == b'/' {
            i
        } else {
            next_slash[i + 1]
        };
    }
    for &i in &spaces {
        let b_slash = next_slash[i + 1];
        if first_slash >= i || b_slash == usize::MAX {
            continue;
        }
        let (a, b) = (&rest[first_slash + 1..i], &rest[b_slash + 1..]);
        if a == b {
            return Some((a.to_vec(), b.to_vec()));
        }
    }
    match spaces[..] {
        [i] => Some((
            strip_prefix(&rest[..i])?.to_vec(),
            strip_prefix(&rest[i + 1..])?.to_vec(),
        )),
        _ => None,
    }
}

fn parse_mode(value: &[u8], line: usize) -> Result<Mode, PatchError> {
    let text = String::from_utf8_lossy(value).into_owned();
    let unsupported = || PatchError::UnsupportedMode {
        line,
        mode: shown(value),
    };
    if value.is_empty() || value.len() > 7 || !value.iter().all(|c| (b'0'..=b'7').contains(c)) {
        return Err(unsupported());
    }
    let mode = u32::from_str_radix(&text, 8).map_err(|_| unsupported())?;
    match mode & 0o170000 {
        0o100000 if mode & 0o100 != 0 => Ok(Mode::Executable),
        0o100000 => Ok(Mode::Regular),
        0o120000 => Ok(Mode::Symlink),
        _ => Err(unsupported()),
    }
}

fn parse_percent(value: &[u8], line: usize) -> Result<(), PatchError> {
    let digits = value.strip_suffix(b"%").unwrap_or_default();
    if digits.is_empty() || digits.len() > 3 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(PatchError::Corrupt {
            line,
            what: format!("a bad similarity index {:?}", shown(value)),
        });
    }
    Ok(())
}

/// `index OLD..NEW[ MODE]`.
fn parse_index(value: &[u8], line: usize) -> Result<Index, PatchError> {
    let bad = || PatchError::Corrupt {
        line,
        what: format!("a bad index line {:?}", shown(value)),
    };
    let (ids, mode) = match value.iter().position(|&c| c == b' ') {
        Some(i) => (&value[..i], Some(parse_mode(&value[i + 1..], line)?)),
        None => (value, None),
    };
    let dots = ids.windows(2).position(|w| w == b"..").ok_or_else(bad)?;
    let id = |s: &[u8]| {
        let ok = (4..=64).contains(&s.len()) && s.iter().all(u8::is_ascii_hexdigit);
        ok.then(|| String::from_utf8_lossy(s).to_ascii_lowercase())
    };
    Ok(Index {
        old: id(&ids[..dots]).ok_or_else(bad)?,
        new: id(&ids[dots + 2..]).ok_or_else(bad)?,
        mode,
    })
}

/// A `---`/`+++` value: `/dev/null`, or a (possibly quoted) name with its prefix, which may be
/// followed by a tab (Git adds one after names with spaces; other tools a timestamp).
fn parse_side(value: &[u8], line: usize) -> Result<Side, PatchError> {
    let bad = || PatchError::Corrupt {
        line,
        what: format!("a bad file name {:?}", shown(value)),
    };
    let name = if value.first() == Some(&b'"') {
        let (name, used) = unquote(value).ok_or_else(bad)?;
        if !(value.len() == used || value[used] == b'\t') {
            return Err(bad());
        }
        name
    } else {
        value
            .split(|&c| c == b'\t')
            .next()
            .unwrap_or_default()
            .to_vec()
    };
    if name == b"/dev/null" {
        return Ok(Side::DevNull);
    }
    Ok(Side::Path(strip_prefix(&name).ok_or_else(bad)?.to_vec()))
}

impl Header {
    /// Checks that the lines agree and tells what the patch does.
    pub(crate) fn resolve(self) -> Result<Resolved, PatchError> {
        let line = self.line;
        let corrupt = |what: &str| PatchError::Corrupt {
            line,
            what: what.into(),
        };
        let create = self.new_file_mode.is_some() || self.minus == Some(Side::DevNull);
        let delete = self.deleted_mode.is_some() || self.plus == Some(Side::DevNull);
        let rename = self.rename_from.is_some() || self.rename_to.is_some();
        let copy = self.copy_from.is_some() || self.copy_to.is_some();
        if [create, delete, rename, copy]
            .iter()
            .filter(|&&x| x)
            .count()
            > 1
        {
            return Err(corrupt(
                "the header mixes creation, deletion, rename and copy",
            ));
        }
        if (rename && (self.rename_from.is_none() || self.rename_to.is_none()))
            || (copy && (self.copy_from.is_none() || self.copy_to.is_none()))
        {
            return Err(corrupt("a rename or copy names only one side"));
        }
        if self.old_mode.is_some() != self.new_mode.is_some()
            || (self.old_mode.is_some() && (create || delete))
        {
            return Err(corrupt(
                "`old mode` and `new mode` must come together, on a kept file",
            ));
        }
        if self.minus.is_some() != self.plus.is_some() {
            return Err(corrupt(
                "a `---` line without its `+++` line, or the reverse",
            ));
        }
        if (self.new_file_mode.is_some() && matches!(self.minus, Some(Side::Path(_))))
            || (self.deleted_mode.is_some() && matches!(self.plus, Some(Side::Path(_))))
        {
            return Err(corrupt(
                "a created or deleted file with a name on its missing side",
            ));
        }
        let (old, new) = self.names(create, delete)?;
        let operation = match () {
            _ if create => Operation::Create,
            _ if delete => Operation::Delete,
            _ if rename => Operation::Rename,
            _ if copy => Operation::Copy,
            _ => Operation::Modify,
        };
        if matches!(operation, Operation::Rename | Operation::Copy) && old == new {
            return Err(corrupt("a rename or copy onto the same path"));
        }
        let index_mode = self.index.as_ref().and_then(|i| i.mode);
        Ok(Resolved {
            operation,
            old_path: old.map(|p| validate(&p, line)).transpose()?,
            new_path: new.map(|p| validate(&p, line)).transpose()?,
            old_mode: self
                .old_mode
                .or(self.deleted_mode)
                .or(index_mode.filter(|_| !create)),
            new_mode: self
                .new_mode
                .or(self.new_file_mode)
                .or(index_mode.filter(|_| !delete)),
            old_id: self.index.as_ref().map(|i| i.old.clone()),
            new_id: self.index.as_ref().map(|i| i.new.clone()),
            has_names: self.minus.is_some(),
        })
    }

    /// The old and new names, from every line that gives one, which must all agree.
    #[allow(clippy::type_complexity)]
    fn names(
        &self,
        create: bool,
        delete: bool,
    ) -> Result<(Option<Vec<u8>>, Option<Vec<u8>>), PatchError> {
        let side = |s: &Option<Side>| match s {
            Some(Side::Path(p)) => Some(p.clone()),
            _ => None,
        };
        let (git_a, git_b) = match &self.git_names {
            Some((a, b)) => (Some(a.clone()), Some(b.clone())),
            None => (None, None),
        };
        let unnamed = || PatchError::Corrupt {
            line: self.line,
            what: "the file's name cannot be told from its header".into(),
        };
        let from = self.rename_from.clone().or(self.copy_from.clone());
        let to = self.rename_to.clone().or(self.copy_to.clone());
        // A created file's `diff --git` line names it on both sides, and so does a deleted one's.
        let old = if create {
            agree(self.line, [to.clone(), side(&self.plus), git_a])?;
            None
        } else {
            Some(agree(self.line, [from, side(&self.minus), git_a])?.ok_or_else(unnamed)?)
        };
        let new = if delete {
            agree(self.line, [old.clone(), git_b])?;
            None
        } else {
            Some(agree(self.line, [to, side(&self.plus), git_b])?.ok_or_else(unnamed)?)
        };
        if !create
            && !delete
            && self.rename_from.is_none()
            && self.copy_from.is_none()
            && old != new
        {
            return Err(PatchError::NameMismatch {
                line: self.line,
                first: shown(old.as_deref().unwrap_or_default()),
                second: shown(new.as_deref().unwrap_or_default()),
            });
        }
        Ok((old, new))
    }
}

/// The one name all the given ones agree on (None when none is given).
fn agree<const N: usize>(
    line: usize,
    names: [Option<Vec<u8>>; N],
) -> Result<Option<Vec<u8>>, PatchError> {
    let mut found: Option<Vec<u8>> = None;
    for name in names.into_iter().flatten() {
        match &found {
            None => found = Some(name),
            Some(first) if *first != name => {
                return Err(PatchError::NameMismatch {
                    line,
                    first: shown(first),
                    second: shown(&name),
                });
            }
            Some(_) => {}
        }
    }
    Ok(found)
}
