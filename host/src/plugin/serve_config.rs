//! `[serve]`: what `sf serve` listens on (and with which TLS certificate), where its queue
//! keeps its state, whose bearer tokens it accepts, and the repositories it lands proposals
//! into. Parsed with the rest of
//! `sf.toml`, so that a bad section is refused before anything starts, naming the key, what
//! is wrong with it and the fix.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// Where `sf serve` listens when `[serve] listen` is not set: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The longest repository name, in bytes.
pub const MAX_REPOSITORY_NAME: usize = 64;

/// How many proposals of one repository are collected at once when `jobs` is not set: the
/// one being landed and one sealed on top of it.
pub const DEFAULT_JOBS: usize = 2;

/// The most proposals of one repository collected at once.
pub const MAX_JOBS: usize = 64;

/// How many proposals one client may have in the queue, not yet final, when `in_flight` is
/// not set.
pub const DEFAULT_IN_FLIGHT: usize = 64;

/// The largest `in_flight`.
pub const MAX_IN_FLIGHT: usize = 100_000;

/// `[serve]`, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeSettings {
    /// The address and port the HTTP API listens on: loopback unless `tls` is set.
    pub listen: SocketAddr,
    /// The certificate and key it serves TLS with; `None` serves plain HTTP (on loopback).
    pub tls: Option<TlsFiles>,
    /// The directory of the queue's own durable state.
    pub state: PathBuf,
    /// The file of "NAME TOKEN" lines whose tokens the API accepts.
    pub tokens: PathBuf,
    /// How many proposals one client (one token's name) may have queued and not yet final;
    /// the next is answered 429.
    pub in_flight: usize,
    /// The repositories proposals are landed into, by name.
    pub repositories: Vec<ServeRepository>,
}

/// `[serve] tls_cert` and `tls_key`: the files `sf serve` serves TLS with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The PEM certificate chain, the server's own certificate first.
    pub cert: PathBuf,
    /// The PEM private key of that certificate (a file only this user may read).
    pub key: PathBuf,
}

/// One `[[serve.repository]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeRepository {
    /// The name the API addresses it by (`/v1/repositories/{name}/proposals`).
    pub name: String,
    /// Its identity file (from `sf repo create --identity-out`).
    pub identity: PathBuf,
    /// The frozen Slices a proposal may name, addressed by their id.
    pub slices: Vec<PathBuf>,
    /// Whether each landed commit is delivered to the base's upstream.
    pub deliver: bool,
    /// How many of its proposals are collected at once: the one at the head of its queue and
    /// those sealed speculatively on top of it.
    pub jobs: std::num::NonZeroUsize,
}

impl ServeSettings {
    /// The repository named `name`.
    pub fn repository(&self, name: &str) -> Option<&ServeRepository> {
        self.repositories.iter().find(|repo| repo.name == name)
    }
}

/// `[serve]` from its TOML value; the error names the key, the violation and the fix.
pub fn serve_settings(value: toml::Value) -> Result<ServeSettings, String> {
    let toml::Value::Table(mut fields) = value else {
        return Err(
            "[serve] must be a table (listen, tls_cert, tls_key, state, tokens, \
             [[serve.repository]])"
                .into(),
        );
    };
    let listen = match fields.remove("listen") {
        None => DEFAULT_LISTEN.parse().expect("the default address parses"),
        Some(toml::Value::String(text)) => listen(&text)?,
        Some(_) => {
            return Err(format!(
                "[serve] listen must be a string, an address and port such as \
                 \"{DEFAULT_LISTEN}\""
            ));
        }
    };
    let tls = tls(&mut fields)?;
    let state = absolute(
        &mut fields,
        "state",
        "the directory of the queue's state, such as \"/var/lib/sf/serve\"",
    )?;
    let tokens = absolute(
        &mut fields,
        "tokens",
        "the file of \"NAME TOKEN\" lines, mode 0600, such as \"/etc/sf/tokens\"",
    )?;
    let in_flight = count(
        fields.remove("in_flight"),
        "[serve] in_flight",
        DEFAULT_IN_FLIGHT,
        MAX_IN_FLIGHT,
        "how many proposals one client may have in the queue, not yet final",
    )?;
    let repositories = match fields.remove("repository") {
        Some(toml::Value::Array(items)) if !items.is_empty() => items
            .into_iter()
            .enumerate()
            .map(|(at, item)| repository(at, item))
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(
                "[serve] needs at least one [[serve.repository]] table (name, \
                        identity, slices, deliver)"
                    .into(),
            );
        }
    };
    let mut names = BTreeSet::new();
    for repo in &repositories {
        if !names.insert(repo.name.as_str()) {
            return Err(format!(
                "[[serve.repository]] name {:?} is given twice; give each repository its own \
                 name",
                repo.name
            ));
        }
    }
    if let Some(unknown) = fields.keys().next() {
        return Err(format!(
            "[serve] {unknown} is not a known key; the keys are listen, tls_cert, tls_key, \
             state, tokens, in_flight and [[serve.repository]]"
        ));
    }
    // After the unknown keys: a misspelt tls_cert is named as such, not as missing TLS.
    refuse_clear_text_beyond_loopback(listen, tls.as_ref())?;
    Ok(ServeSettings {
        listen,
        tls,
        state,
        tokens,
        in_flight,
        repositories,
    })
}

/// `listen`: an address and port.
fn listen(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!(
            "[serve] listen {text:?} is not an address and port; give one such as \
             \"{DEFAULT_LISTEN}\" or \"[::1]:8080\""
        )
    })
}

/// Refuses a `listen` beyond loopback without TLS: every `/v1` request carries a bearer
/// token, which must never cross a network in clear text.
fn refuse_clear_text_beyond_loopback(
    listen: SocketAddr,
    tls: Option<&TlsFiles>,
) -> Result<(), String> {
    if tls.is_none() && !listen.ip().is_loopback() {
        return Err(format!(
            "[serve] listen \"{listen}\" is not a loopback address and TLS is not configured: \
             bearer tokens would cross the network in clear text. Set tls_cert and tls_key \
             (PEM files of the certificate chain and its key), or listen on 127.0.0.1 or ::1"
        ));
    }
    Ok(())
}

/// `tls_cert` and `tls_key`: both or neither.
fn tls(fields: &mut toml::Table) -> Result<Option<TlsFiles>, String> {
    let cert = optional_absolute(
        fields,
        "tls_cert",
        "the PEM file of the certificate chain, such as \"/etc/sf/tls/cert.pem\"",
    )?;
    let key = optional_absolute(
        fields,
        "tls_key",
        "the PEM file of the certificate's private key, mode 0600, such as \
         \"/etc/sf/tls/key.pem\"",
    )?;
    match (cert, key) {
        (Some(cert), Some(key)) => Ok(Some(TlsFiles { cert, key })),
        (None, None) => Ok(None),
        (Some(_), None) => Err(
            "[serve] tls_key is missing while tls_cert is set: TLS needs \
             both; give tls_key, the PEM file of the certificate's private key, or remove \
             tls_cert"
                .into(),
        ),
        (None, Some(_)) => Err(
            "[serve] tls_cert is missing while tls_key is set: TLS needs \
             both; give tls_cert, the PEM file of the key's certificate chain, or remove \
             tls_key"
                .into(),
        ),
    }
}

/// The absolute path under `key` of `[serve]`; `what` says what it names.
fn absolute(fields: &mut toml::Table, key: &str, what: &str) -> Result<PathBuf, String> {
    optional_absolute(fields, key, what)?
        .ok_or_else(|| format!("[serve] {key} is missing: give {what}"))
}

/// [`absolute`], for a key that may be left out.
fn optional_absolute(
    fields: &mut toml::Table,
    key: &str,
    what: &str,
) -> Result<Option<PathBuf>, String> {
    match fields.remove(key) {
        Some(toml::Value::String(path)) if Path::new(&path).is_absolute() => Ok(Some(path.into())),
        Some(_) => Err(format!("[serve] {key} must be an absolute path: {what}")),
        None => Ok(None),
    }
}

/// Whether `name` may name a repository in a URL path: 1 to [`MAX_REPOSITORY_NAME`] bytes of
/// ASCII letters, digits, `.`, `_` and `-`, not starting with `.`.
pub fn repository_name_is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_REPOSITORY_NAME
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
}

/// The `at`th `[[serve.repository]]`.
fn repository(at: usize, value: toml::Value) -> Result<ServeRepository, String> {
    let here = format!("[[serve.repository]] #{}", at + 1);
    let toml::Value::Table(mut fields) = value else {
        return Err(format!(
            "{here} must be a table (name, identity, slices, deliver)"
        ));
    };
    let name = match fields.remove("name") {
        Some(toml::Value::String(name)) if repository_name_is_valid(&name) => name,
        _ => {
            return Err(format!(
                "{here} name must be 1 to {MAX_REPOSITORY_NAME} letters, digits, '.', '_' or \
                 '-' (not starting with '.'): the name in /v1/repositories/NAME/proposals"
            ));
        }
    };
    let here = format!("[[serve.repository]] {name:?}");
    let identity = match fields.remove("identity") {
        Some(toml::Value::String(path)) if Path::new(&path).is_absolute() => PathBuf::from(path),
        _ => {
            return Err(format!(
                "{here} identity must be the absolute path of the repository's identity file \
                 (from `sf repo create --identity-out`)"
            ));
        }
    };
    let slices = match fields.remove("slices") {
        Some(toml::Value::Array(items)) if !items.is_empty() => items
            .into_iter()
            .map(|item| match item {
                toml::Value::String(path) if Path::new(&path).is_absolute() => {
                    Ok(PathBuf::from(path))
                }
                _ => Err(()),
            })
            .collect::<Result<Vec<_>, ()>>()
            .ok(),
        _ => None,
    };
    let Some(slices) = slices else {
        return Err(format!(
            "{here} slices must be a non-empty list of absolute paths of frozen Slice \
             directories (from `sf slice freeze`)"
        ));
    };
    let deliver = match fields.remove("deliver") {
        None => false,
        Some(toml::Value::Boolean(deliver)) => deliver,
        Some(_) => {
            return Err(format!(
                "{here} deliver must be true (push each landed commit to the base's upstream) \
                 or false"
            ));
        }
    };
    let jobs = count(
        fields.remove("jobs"),
        &format!("{here} jobs"),
        DEFAULT_JOBS,
        MAX_JOBS,
        "how many of its proposals are collected at once",
    )?;
    if let Some(unknown) = fields.keys().next() {
        return Err(format!(
            "{here} {unknown} is not a known key; the keys are name, identity, slices, \
             deliver and jobs"
        ));
    }
    Ok(ServeRepository {
        name,
        identity,
        slices,
        deliver,
        jobs: std::num::NonZeroUsize::new(jobs).unwrap_or(std::num::NonZeroUsize::MIN),
    })
}

/// A whole number from 1 to `max` under `key` (`default` when absent); `what` says what it
/// counts.
fn count(
    value: Option<toml::Value>,
    key: &str,
    default: usize,
    max: usize,
    what: &str,
) -> Result<usize, String> {
    match value {
        None => Ok(default),
        Some(toml::Value::Integer(n)) if n >= 1 && (n as u64) <= max as u64 => Ok(n as usize),
        Some(other) => Err(format!(
            "{key} = {other} is not a whole number from 1 to {max}: it is {what} (default \
             {default})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServeSettings, String> {
        let mut table: toml::Table = text.parse().unwrap();
        serve_settings(table.remove("serve").unwrap())
    }

    const GOOD: &str = r#"
[serve]
state = "/var/lib/sf/serve"
tokens = "/etc/sf/tokens"
[[serve.repository]]
name = "te"
identity = "/srv/sf/te/identity.json"
slices = ["/srv/sf/te/slice"]
deliver = true
"#;

    #[test]
    fn a_whole_section_parses_and_listens_on_loopback_by_default() {
        let settings = parse(GOOD).unwrap();
        assert_eq!(settings.listen, DEFAULT_LISTEN.parse().unwrap());
        assert_eq!(settings.state, Path::new("/var/lib/sf/serve"));
        let repo = settings.repository("te").unwrap();
        assert!(repo.deliver);
        assert_eq!(repo.slices, vec![PathBuf::from("/srv/sf/te/slice")]);
        assert_eq!(repo.jobs.get(), DEFAULT_JOBS);
        assert_eq!(settings.in_flight, DEFAULT_IN_FLIGHT);
        assert!(settings.repository("other").is_none());
        let set = parse(
            &GOOD
                .replace("[serve]", "[serve]\nin_flight = 3")
                .replace("deliver = true", "deliver = true\njobs = 4"),
        )
        .unwrap();
        assert_eq!((set.in_flight, set.repositories[0].jobs.get()), (3, 4));
    }

    #[test]
    fn each_bad_key_is_named() {
        for (bad, named) in [
            (
                GOOD.replace("[serve]", "[serve]\nlisten = \"0.0.0.0:8080\""),
                "Set tls_cert and tls_key",
            ),
            (
                GOOD.replace("[serve]", "[serve]\nlisten = \"nowhere\""),
                "listen",
            ),
            (GOOD.replace("\"/etc/sf/tokens\"", "\"tokens\""), "tokens"),
            (
                GOOD.replace("state = \"/var/lib/sf/serve\"\n", ""),
                "state is missing",
            ),
            (GOOD.replace("name = \"te\"", "name = \"../x\""), "name"),
            (
                GOOD.replace("slices = [\"/srv/sf/te/slice\"]", "slices = []"),
                "slices",
            ),
            (
                GOOD.replace("deliver = true", "deliver = \"yes\""),
                "deliver",
            ),
            (
                GOOD.replace("deliver = true", "deliver = true\nlanes = 2"),
                "lanes",
            ),
            (
                GOOD.replace("deliver = true", "deliver = true\njobs = 0"),
                "jobs = 0 is not a whole number from 1 to 64",
            ),
            (
                GOOD.replace("deliver = true", "deliver = true\njobs = \"2\""),
                "jobs",
            ),
            (
                GOOD.replace("[serve]", "[serve]\nin_flight = -1"),
                "[serve] in_flight = -1",
            ),
            (
                format!(
                    "{GOOD}[[serve.repository]]\nname = \"te\"\nidentity = \"/i\"\nslices = [\"/s\"]\n"
                ),
                "twice",
            ),
            (
                "[serve]\nstate = \"/s\"\ntokens = \"/t\"\n".to_owned(),
                "at least one",
            ),
        ] {
            let error = parse(&bad).unwrap_err();
            assert!(error.contains(named), "{bad}: {error}");
        }
        assert!(parse(&GOOD.replace("[serve]", "[serve]\nlisten = \"[::1]:9\"")).is_ok());
    }

    const TLS: &str = "[serve]\ntls_cert = \"/etc/sf/tls/cert.pem\"\n\
                       tls_key = \"/etc/sf/tls/key.pem\"";

    fn tls_files() -> Option<TlsFiles> {
        Some(TlsFiles {
            cert: "/etc/sf/tls/cert.pem".into(),
            key: "/etc/sf/tls/key.pem".into(),
        })
    }

    #[test]
    fn without_tls_the_default_serves_plain_http_on_loopback() {
        let settings = parse(GOOD).unwrap();
        assert_eq!(settings.tls, None);
        assert!(settings.listen.ip().is_loopback());
    }

    #[test]
    fn an_address_beyond_loopback_needs_tls_and_the_error_names_the_fix() {
        for address in ["0.0.0.0:8080", "192.0.2.1:443", "[::]:8080"] {
            let bare = GOOD.replace("[serve]", &format!("[serve]\nlisten = {address:?}"));
            let error = parse(&bare).unwrap_err();
            for named in [
                "[serve] listen",
                "not a loopback address",
                "tls_cert",
                "tls_key",
            ] {
                assert!(error.contains(named), "{address}: {error}");
            }
            assert!(error.contains("127.0.0.1 or ::1"), "{error}");
            let with_tls = GOOD.replace("[serve]", &format!("{TLS}\nlisten = {address:?}"));
            let settings = parse(&with_tls).unwrap();
            assert_eq!(settings.listen, address.parse().unwrap());
            assert_eq!(settings.tls, tls_files());
        }
    }

    #[test]
    fn tls_on_loopback_is_allowed() {
        let settings = parse(&GOOD.replace("[serve]", TLS)).unwrap();
        assert_eq!(settings.listen, DEFAULT_LISTEN.parse().unwrap());
        assert_eq!(settings.tls, tls_files());
    }

    #[test]
    fn tls_needs_both_files() {
        let only_cert = GOOD.replace("[serve]", "[serve]\ntls_cert = \"/c.pem\"");
        let error = parse(&only_cert).unwrap_err();
        assert!(error.contains("tls_key is missing"), "{error}");
        assert!(error.contains("remove tls_cert"), "{error}");
        let only_key = GOOD.replace("[serve]", "[serve]\ntls_key = \"/k.pem\"");
        let error = parse(&only_key).unwrap_err();
        assert!(error.contains("tls_cert is missing"), "{error}");
        assert!(error.contains("remove tls_key"), "{error}");
        // Without the other, an address beyond loopback is still refused for the missing key,
        // not for the address.
        let public = only_cert.replace("[serve]", "[serve]\nlisten = \"0.0.0.0:1\"");
        assert!(parse(&public).unwrap_err().contains("tls_key is missing"));
    }

    #[test]
    fn tls_files_are_absolute_paths() {
        for (key, value) in [
            ("tls_cert", "\"cert.pem\""),
            ("tls_key", "\"tls/key.pem\""),
            ("tls_cert", "1"),
            ("tls_key", "[\"/k.pem\"]"),
        ] {
            let other = if key == "tls_cert" {
                "tls_key"
            } else {
                "tls_cert"
            };
            let bad = GOOD.replace(
                "[serve]",
                &format!("[serve]\n{key} = {value}\n{other} = \"/etc/sf/tls/x.pem\""),
            );
            let error = parse(&bad).unwrap_err();
            assert!(
                error.contains(&format!("[serve] {key} must be an absolute path")),
                "{bad}: {error}"
            );
            assert!(
                error.contains(".pem\""),
                "the fix gives an example: {error}"
            );
        }
    }

    #[test]
    fn an_unknown_key_is_still_refused_and_the_tls_keys_are_listed() {
        let bad = GOOD.replace("[serve]", &format!("{TLS}\ntls_ca = \"/ca.pem\""));
        let error = parse(&bad).unwrap_err();
        assert!(error.contains("tls_ca is not a known key"), "{error}");
        assert!(error.contains("tls_cert, tls_key"), "{error}");
        // A misspelt key beside a public address is named for what it is.
        let misspelt = GOOD.replace(
            "[serve]",
            "[serve]\nlisten = \"0.0.0.0:1\"\ntls_crt = \"/c.pem\"\ntls_key = \"/k.pem\"",
        );
        let error = parse(&misspelt).unwrap_err();
        assert!(error.contains("tls_cert is missing"), "{error}");
        let misspelt = GOOD.replace("[serve]", "[serve]\nlisten = \"0.0.0.0:1\"\ntls = true");
        let error = parse(&misspelt).unwrap_err();
        assert!(error.contains("tls is not a known key"), "{error}");
    }
}
