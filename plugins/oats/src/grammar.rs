//! The grammars of the 0.24.0 contract: capability ids, command and operation names,
//! environment names and namespaces, and the lexical rules for declared paths.
//! Patterns are written out by hand (no regex engine), each next to the pattern it implements.

/// Launch names owned by the oats core.
pub const CORE_NAMES: &[&str] = &[
    "OATS_INSTANCE",
    "OATS_INSTANCE_HOME",
    "PI_AGENT_INSTANCE",
    "PI_AGENT_HOME",
];
/// Prefixes owned by the oats core.
pub const CORE_PREFIXES: &[&str] = &["OATS_", "PI_AGENT_"];
/// Names that change how a process starts (the bootstrap denylist).
pub const BOOTSTRAP_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "SHELL",
    "TMPDIR",
    "TMP",
    "TEMP",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "ENV",
    "BASH_ENV",
    "BASHOPTS",
    "SHELLOPTS",
    "CDPATH",
    "IFS",
    "PROMPT_COMMAND",
    "PS4",
    "ZDOTDIR",
    "NODE_OPTIONS",
    "NODE_PATH",
    "_JAVA_OPTIONS",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "ELECTRON_RUN_AS_NODE",
];
/// Prefixes that change how a runtime starts.
pub const BOOTSTRAP_PREFIXES: &[&str] = &[
    "NODE_",
    "LD_",
    "DYLD_",
    "PYTHON",
    "PERL",
    "RUBY",
    "JAVA_",
    "JDK_JAVA_",
    "DOTNET_",
    "COMPlus_",
    "COREHOST_",
    "LUA_",
    "PHP_",
    "ELECTRON_",
    "GLIBC_",
];

fn lower_digit(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// `^(?:@?[a-z0-9][a-z0-9._-]*[./])[a-z0-9][a-z0-9._/-]*$`: the schema's namespaced id.
pub fn is_capability_id(id: &str) -> bool {
    let text = id.strip_prefix('@').unwrap_or(id).as_bytes();
    if text.is_empty() || !lower_digit(text[0]) {
        return false;
    }
    // Some separator `.` or `/` at i ≥ 1 with only [a-z0-9._-] before it and
    // [a-z0-9][a-z0-9._/-]* after it.
    for i in 1..text.len() {
        let b = text[i];
        if b == b'/' || b == b'.' {
            let rest = &text[i + 1..];
            if !rest.is_empty()
                && lower_digit(rest[0])
                && rest
                    .iter()
                    .all(|&c| lower_digit(c) || matches!(c, b'.' | b'_' | b'/' | b'-'))
            {
                return true;
            }
        }
        if b == b'/' || !(lower_digit(b) || matches!(b, b'.' | b'_' | b'-')) {
            return false;
        }
    }
    false
}

/// `^[a-z][a-z0-9]*\.[a-z0-9]+(?:[.-][a-z0-9]+)*$`: the id a capability needs to declare
/// launch environment.
pub fn is_environment_id(id: &str) -> bool {
    let Some((vendor, rest)) = id.split_once('.') else {
        return false;
    };
    if !is_vendor(vendor) || rest.is_empty() {
        return false;
    }
    // [a-z0-9]+ then groups of [.-][a-z0-9]+
    rest.split(['.', '-'])
        .all(|part| !part.is_empty() && part.bytes().all(lower_digit))
}

/// `^[a-z][a-z0-9]*$`: a vendor (the text before an id's first `.`).
pub fn is_vendor(vendor: &str) -> bool {
    let bytes = vendor.as_bytes();
    !bytes.is_empty() && bytes[0].is_ascii_lowercase() && bytes.iter().all(|&b| lower_digit(b))
}

/// The vendor of an id that has one: the text before the first `.`, when it matches
/// [`is_vendor`].
pub fn vendor_of(id: &str) -> Option<&str> {
    id.split_once('.')
        .map(|(vendor, _)| vendor)
        .filter(|vendor| is_vendor(vendor))
}

/// `^[a-z0-9][a-z0-9-]*$`: command names, the `command` namespace and binding phase values.
pub fn is_command_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty() && lower_digit(bytes[0]) && bytes.iter().all(|&b| lower_digit(b) || b == b'-')
}

/// `^[a-z][a-z0-9-]*$`: operation and operation argument names.
pub fn is_operation_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|&b| lower_digit(b) || b == b'-')
}

/// `^--[a-z][a-z0-9-]*$`: an operation argument's flag.
pub fn is_flag(flag: &str) -> bool {
    flag.strip_prefix("--").is_some_and(is_operation_name)
}

/// `^[A-Za-z_][A-Za-z0-9_]{0,127}$`: the portable environment name grammar.
pub fn is_environment_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphabetic() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `^[A-Z][A-Z0-9]*_$`: an environment namespace.
pub fn is_namespace(prefix: &str) -> bool {
    let Some(body) = prefix.strip_suffix('_') else {
        return false;
    };
    let bytes = body.as_bytes();
    !bytes.is_empty()
        && bytes[0].is_ascii_uppercase()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

/// Why an environment name is refused, or `None` when it is not a core or bootstrap name.
pub fn reserved_environment_name(name: &str) -> Option<&'static str> {
    if CORE_NAMES.contains(&name) || CORE_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Some("is a core launch name owned by oats");
    }
    if BOOTSTRAP_NAMES.contains(&name) {
        return Some("is a bootstrap name that changes how processes start");
    }
    if BOOTSTRAP_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Some("starts with a bootstrap prefix that changes how a runtime starts");
    }
    None
}

/// Why a namespace is refused beyond its grammar, or `None`.
pub fn reserved_namespace(prefix: &str) -> Option<&'static str> {
    if CORE_PREFIXES.contains(&prefix) {
        return Some("is owned by the oats core");
    }
    if BOOTSTRAP_PREFIXES
        .iter()
        .any(|p| prefix.starts_with(p) || p.starts_with(prefix))
    {
        return Some("overlaps a bootstrap prefix");
    }
    None
}

/// Why a declared relative path escapes lexically (absolute, `..`, drive letter, `~`,
/// backslash, NUL, empty), or `None`. `.` and empty segments are tolerated here.
pub fn lexical_escape(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        return Some("is empty");
    }
    if path.contains('\0') {
        return Some("holds a NUL byte");
    }
    if path.contains('\\') {
        return Some("holds a backslash; paths are POSIX and relative");
    }
    if path.starts_with('/') {
        return Some("is absolute; declared paths are relative to the capability root");
    }
    if path.starts_with('~') {
        return Some("starts with ~; declared paths are relative to the capability root");
    }
    let bytes = path.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Some("starts with a drive letter");
    }
    if path.split('/').any(|segment| segment == "..") {
        return Some("has a .. segment that leaves the capability root");
    }
    None
}

/// The normalized segments of a path [`lexical_escape`] accepted (`.` and empty segments
/// dropped). Empty for the root itself.
pub fn segments(path: &str) -> Vec<&str> {
    path.split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect()
}

/// Why a path is not a normalized relative POSIX path (no `..`, `.`, empty segment,
/// backslash, NUL or drive letter), as `helperInjection.path` must be; or `None`.
pub fn strict_relative_problem(path: &str) -> Option<&'static str> {
    if let Some(problem) = lexical_escape(path) {
        return Some(problem);
    }
    if path.split('/').any(|segment| segment.is_empty()) {
        return Some("has an empty segment");
    }
    if path.split('/').any(|segment| segment == ".") {
        return Some("has a . segment");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_ids() {
        for good in [
            "oats.okf",
            "acme.tool",
            "@acme/tool",
            "acme/tool",
            "aweb.evil/other",
            "a.b",
            "a-b.c_d",
            "0x.y",
            "acme.tool/sub.x",
        ] {
            assert!(is_capability_id(good), "{good}");
        }
        for bad in [
            "",
            "okf",
            "Acme.tool",
            "acme.",
            ".acme",
            "@",
            "acme..",
            "acme.Tool",
            "acme tool.x",
            "acme/.x",
            "@/x",
            "acme.tool\0",
        ] {
            assert!(!is_capability_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn environment_ids() {
        for good in ["oats.okf", "acme.tool-x", "aweb.identity", "a1.b.c-d"] {
            assert!(is_environment_id(good), "{good}");
        }
        for bad in [
            "aweb@evil",
            "aweb/evil",
            "aweb.evil@other",
            "aweb.evil/other",
            "Aweb.evil",
            "aweb-evil.identity",
            "1aweb.x",
            "aweb.",
            "aweb.x-",
            "aweb.x..y",
        ] {
            assert!(!is_environment_id(bad), "{bad}");
        }
    }

    #[test]
    fn names_and_namespaces() {
        assert!(is_environment_name("ACME_TOKEN"));
        assert!(is_environment_name("_x"));
        assert!(!is_environment_name("1X"));
        assert!(!is_environment_name("A-B"));
        assert!(!is_environment_name(&"A".repeat(129)));
        assert!(reserved_environment_name("OATS_ANY").is_some());
        assert!(reserved_environment_name("PATH").is_some());
        assert!(reserved_environment_name("NODE_EXTRA").is_some());
        assert!(reserved_environment_name("PYTHONHOME").is_some());
        assert!(reserved_environment_name("ACME_X").is_none());
        assert!(is_namespace("EXTRA_"));
        assert!(!is_namespace("extra_"));
        assert!(!is_namespace("EXTRA"));
        assert!(!is_namespace("_"));
        assert!(reserved_namespace("OATS_").is_some());
        assert!(reserved_namespace("NODE_").is_some());
        assert!(reserved_namespace("PYTHONX_").is_some());
        assert!(reserved_namespace("LUA_").is_some());
        assert!(reserved_namespace("ACME_").is_none());
    }

    #[test]
    fn paths() {
        for (bad, _) in [
            ("", ""),
            ("/abs", ""),
            ("../x", ""),
            ("a/../x", ""),
            ("C:/abs", ""),
            ("a\\b", ""),
            ("a\0b", ""),
            ("~/x", ""),
        ] {
            assert!(lexical_escape(bad).is_some(), "{bad:?}");
        }
        assert!(lexical_escape("a/./b").is_none());
        assert_eq!(segments("./a//b/"), vec!["a", "b"]);
        for bad in ["a//b", "a/./b", ".", "a/"] {
            assert!(strict_relative_problem(bad).is_some(), "{bad:?}");
        }
        assert!(strict_relative_problem("helpers/inject.md").is_none());
        assert!(is_flag("--native-request"));
        assert!(!is_flag("-x"));
        assert!(is_command_name("binding-check"));
        assert!(!is_command_name("-x"));
        assert!(is_operation_name("inspect"));
        assert!(!is_operation_name("1x"));
    }
}
