//! Where the configuration comes from when `--config` is not given, so that it need not be
//! repeated on every command: `SF_CONFIG`, then `./sf.toml`, then the `sf.toml` beside the
//! repository identity the command names (`--identity FILE`). One found this way is printed
//! on stderr, so that a command never runs on a configuration nobody sees; none found means
//! the embedded defaults, as before.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The configuration file's name that is looked for.
pub const CONFIG_FILE: &str = "sf.toml";
/// The variable naming a configuration file.
pub const CONFIG_VARIABLE: &str = "SF_CONFIG";

/// The configuration a command runs on: `explicit` (`--config`), else the first found by
/// convention, with a line saying where it was found; `None` for the embedded defaults.
pub fn resolve(explicit: Option<PathBuf>, args: &[OsString]) -> (Option<PathBuf>, Option<String>) {
    if explicit.is_some() {
        return (explicit, None);
    }
    if let Some(named) = std::env::var_os(CONFIG_VARIABLE).filter(|named| !named.is_empty()) {
        let path = PathBuf::from(named);
        let line = format!(
            "sf: configuration {} (from {CONFIG_VARIABLE})",
            path.display()
        );
        return (Some(path), Some(line));
    }
    let here = Path::new(CONFIG_FILE);
    if here.is_file() {
        let line = format!(
            "sf: configuration ./{CONFIG_FILE} (found in the working directory; --config names another)"
        );
        return (Some(here.to_owned()), Some(line));
    }
    let beside = identity_arg(args)
        .and_then(|identity| identity.parent().map(|dir| dir.join(CONFIG_FILE)))
        .filter(|path| path.is_file());
    match beside {
        Some(path) => {
            let line = format!(
                "sf: configuration {} (found beside the repository identity; --config names another)",
                path.display()
            );
            (Some(path), Some(line))
        }
        None => (None, None),
    }
}

/// The value of the first `--identity FILE` (or `--identity=FILE`) among `args`.
fn identity_arg(args: &[OsString]) -> Option<PathBuf> {
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--identity" {
            return rest.next().map(PathBuf::from);
        }
        if let Some(value) = arg.to_str().and_then(|arg| arg.strip_prefix("--identity=")) {
            return Some(PathBuf::from(value));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_identity_argument_is_found_in_either_spelling() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            identity_arg(&args(&["sf", "seal", "--identity", "w/id.json"])),
            Some(PathBuf::from("w/id.json"))
        );
        assert_eq!(
            identity_arg(&args(&["sf", "seal", "--identity=w/id.json"])),
            Some(PathBuf::from("w/id.json"))
        );
        assert_eq!(identity_arg(&args(&["sf", "plugins", "list"])), None);
    }
}
