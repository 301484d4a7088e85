//! The command line's modules stay apart: a command module parses its arguments, calls one use
//! case of sf-app and renders what it answers, and never uses another command module's types
//! or functions. What several commands share lives in the shared modules only (the context
//! and output, the shared clap arguments, the rendering of shared records, the progress bar,
//! the exit statuses, external programs), so that a command can be read, and changed, alone.

mod source_files;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use source_files::sources;

/// The modules of sf-cli every command may use.
const SHARED: &[&str] = &["args", "common", "exit", "external", "progress", "render"];

/// The directory of sf-cli's sources.
fn cli_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/src")
}

/// The modules `lib.rs` declares (`mod NAME;`).
fn declared_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .filter_map(|line| line.trim().strip_prefix("mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// The first identifier at the start of `text`.
fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The names of a brace group's first level (`{a, b::c, d as e}` gives a, b, d); `text`
/// starts after the opening brace.
fn group_names(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (at, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                names.push(identifier(text[start..at].trim_start()));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.push(identifier(text[start..at].trim_start()));
                start = at + 1;
            }
            _ => {}
        }
    }
    names.into_iter().filter(|name| !name.is_empty()).collect()
}

/// The modules of the crate root that `text` names through `prefix` (`super::` in a file
/// at the root, `crate::` anywhere): `prefix NAME::`, `prefix NAME;` and `prefix {NAME, …}`.
fn named_through<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut named = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        let after = &rest[at + prefix.len()..];
        match after.strip_prefix('{') {
            Some(group) => named.extend(group_names(group)),
            None => named.push(identifier(after)),
        }
        rest = after;
    }
    named
}

/// Each use of a command module from another file of `src`: (file, command named).
fn cross_uses(src: &Path, commands: &BTreeSet<String>) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for file in sources(src) {
        let relative = file
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if relative == "lib.rs" || relative == "main.rs" {
            // The root declares every command and dispatches to each: that is its job.
            continue;
        }
        let own = relative.split(['/', '.']).next().unwrap().to_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let at_root = !relative.contains('/');
        let mut named = named_through(&text, "crate::");
        named.extend(named_through(
            &text,
            if at_root { "super::" } else { "super::super::" },
        ));
        for name in named {
            if name != own && commands.contains(name) {
                found.push((relative.clone(), name.to_owned()));
            }
        }
    }
    found
}

#[test]
fn no_command_module_uses_another() {
    let src = cli_src();
    let modules = declared_modules(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    for shared in SHARED {
        assert!(
            modules.contains(*shared),
            "{shared} is not a module of sf-cli any more: update this test"
        );
    }
    let commands: BTreeSet<String> = modules
        .into_iter()
        .filter(|module| !SHARED.contains(&module.as_str()))
        .collect();
    assert!(
        ["land", "integrate", "deliver", "demo", "show", "report"]
            .iter()
            .all(|command| commands.contains(*command)),
        "{commands:?}"
    );
    let crossings = cross_uses(&src, &commands);
    assert!(
        crossings.is_empty(),
        "command modules use each other (file, command it names): {crossings:?}; move what \
         they share into a shared module ({SHARED:?}) or into sf-app"
    );
}

#[test]
fn the_scan_sees_every_form_of_a_path() {
    let text = "use super::land::LandArgs;\nuse super::{common::Output, deliver, render};\n\
                let x = crate::show::paint(t);\nuse super::exit;\n";
    assert_eq!(
        named_through(text, "super::"),
        ["land", "common", "deliver", "render", "exit"]
    );
    assert_eq!(named_through(text, "crate::"), ["show"]);
    assert_eq!(group_names("a::{b, c}, d as e, f}"), ["a", "d", "f"]);
}
