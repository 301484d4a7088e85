//! An environment build's record: what was built from what, by which tools, reaching which
//! registries. Canonical JSON (sorted keys, no spaces), kept once per environment in the
//! store (`records/<hex>.json`):
//!
//! ```text
//! {"at":"/opt/sf-env/pip-…","commit":…,"differsFrom":null,"environment":"sha256:…",
//!  "extras":[],"groups":[],
//!  "inputs":{"requirements.txt":"sha256:…"},
//!  "lockfile":"requirements.txt","protocol":"sf-environment-build/1","recipe":"pip",
//!  "registries":["files.pythonhosted.org:443","pypi.org:443"],"toolchain":null,
//!  "tools":{"pip":"23.0.1",…}}
//! ```

use std::collections::BTreeMap;

use sf_host::canonical::{self, Digest, Value};

/// The protocol string of a build record.
pub const BUILD_RECORD_PROTOCOL: &str = "sf-environment-build/1";

/// The most tools a record names, and the longest name and version kept.
const MAX_TOOLS: usize = 16;
const MAX_TOOL_TEXT: usize = 64;

/// A build's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildRecord {
    /// The path the environment was built for.
    pub at: String,
    /// The factory commit whose lockfile was read (hex).
    pub commit: String,
    /// When an earlier build of the same inputs gave another environment: that environment
    /// and the first path at which the two differ (the build was not reproducible).
    pub differs_from: Option<(Digest, String)>,
    /// The environment built.
    pub environment: Digest,
    /// The extras installed (sorted).
    pub extras: Vec<String>,
    /// The dependency groups installed (sorted).
    pub groups: Vec<String>,
    /// Each file read from the commit's tree, by its path, with the digest of its bytes.
    pub inputs: BTreeMap<String, Digest>,
    /// The lockfile's path in the tree.
    pub lockfile: String,
    /// The recipe's name.
    pub recipe: String,
    /// Each registry reached, `host:port`, in the order first reached.
    pub registries: Vec<String>,
    /// Each tool the recipe used, with the version it reported.
    pub tools: BTreeMap<String, String>,
    /// The toolchain environment the build copied (cargo's).
    pub toolchain: Option<Digest>,
}

impl BuildRecord {
    /// A record with `options`' groups, extras and toolchain, and nothing else yet.
    pub(super) fn of_options(options: &super::Options) -> Self {
        Self {
            at: String::new(),
            commit: String::new(),
            differs_from: None,
            environment: Digest::of(b""),
            extras: options.extras.clone(),
            groups: options.groups.clone(),
            inputs: BTreeMap::new(),
            lockfile: String::new(),
            recipe: String::new(),
            registries: Vec::new(),
            tools: BTreeMap::new(),
            toolchain: options
                .toolchain
                .as_ref()
                .map(|toolchain| toolchain.digest.clone()),
        }
    }

    /// The canonical document.
    pub fn document(&self) -> Value {
        let strings = |map: &BTreeMap<String, String>| {
            Value::Object(
                map.iter()
                    .map(|(key, value)| (key.clone(), Value::from(value.as_str())))
                    .collect(),
            )
        };
        let inputs: BTreeMap<String, String> = self
            .inputs
            .iter()
            .map(|(path, digest)| (path.clone(), digest.to_string()))
            .collect();
        let list = |names: &[String]| {
            Value::Array(
                names
                    .iter()
                    .map(|name| Value::from(name.as_str()))
                    .collect(),
            )
        };
        let differs_from = match &self.differs_from {
            Some((environment, path)) => canonical::object([
                ("environment", Value::from(environment.to_string())),
                ("path", Value::from(path.as_str())),
            ]),
            None => Value::Null,
        };
        canonical::object([
            ("at", Value::from(self.at.as_str())),
            ("commit", Value::from(self.commit.as_str())),
            ("differsFrom", differs_from),
            ("environment", Value::from(self.environment.to_string())),
            ("extras", list(&self.extras)),
            ("groups", list(&self.groups)),
            ("inputs", strings(&inputs)),
            ("lockfile", Value::from(self.lockfile.as_str())),
            ("protocol", Value::from(BUILD_RECORD_PROTOCOL)),
            ("recipe", Value::from(self.recipe.as_str())),
            (
                "registries",
                Value::Array(
                    self.registries
                        .iter()
                        .map(|registry| Value::from(registry.as_str()))
                        .collect(),
                ),
            ),
            ("tools", strings(&self.tools)),
            (
                "toolchain",
                self.toolchain
                    .as_ref()
                    .map_or(Value::Null, |digest| Value::from(digest.to_string())),
            ),
        ])
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        // Strings and objects only: it always encodes; should it not, the error is kept.
        canonical::encode(&self.document())
            .unwrap_or_else(|error| format!("{{\"error\":{:?}}}", error.to_string()).into_bytes())
    }

    /// The path a stored record's environment was built for, if the bytes are a record.
    pub fn at_of(bytes: &[u8]) -> Option<String> {
        let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        if value.get("protocol")?.as_str()? != BUILD_RECORD_PROTOCOL {
            return None;
        }
        value.get("at")?.as_str().map(str::to_owned)
    }

    /// A stored record's fields shown by `sf env list` and `sf env show`: the recipe and the
    /// lockfile with its digest, or `None` when the bytes are not a record.
    pub fn summary(bytes: &[u8]) -> Option<(String, String, String)> {
        let value: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let text = |key: &str| value.get(key)?.as_str().map(str::to_owned);
        if text("protocol")? != BUILD_RECORD_PROTOCOL {
            return None;
        }
        let lockfile = text("lockfile")?;
        let digest = value.get("inputs")?.get(&lockfile)?.as_str()?.to_owned();
        Some((text("recipe")?, lockfile, digest))
    }
}

/// The tools a build's stdout names, one `sf-tool NAME VERSION` line each (the first of a
/// name counts; at most [`MAX_TOOLS`], each text cut to [`MAX_TOOL_TEXT`] characters of
/// printable ASCII): what the run says, kept as said, never trusted beyond that.
pub fn tools(stdout: &str) -> BTreeMap<String, String> {
    let mut tools = BTreeMap::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("sf-tool ") else {
            continue;
        };
        let (name, version) = rest.split_once(' ').unwrap_or((rest, ""));
        let clean = |text: &str| -> String {
            text.chars()
                .filter(|c| c.is_ascii_graphic())
                .take(MAX_TOOL_TEXT)
                .collect()
        };
        if tools.len() < MAX_TOOLS && !name.is_empty() {
            tools.entry(clean(name)).or_insert_with(|| clean(version));
        }
    }
    tools
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_read_from_their_lines_only_and_bounded() {
        let stdout = "noise\nsf-tool python3 3.11.2\nsf-tool pip 23.0.1\nsf-tool pip 99\n\
                      sf-tool evil \u{1b}[31mred\n";
        let tools = tools(stdout);
        assert_eq!(tools["python3"], "3.11.2");
        assert_eq!(tools["pip"], "23.0.1");
        assert_eq!(tools["evil"], "[31mred");
        assert_eq!(tools.len(), 3);
    }

    #[test]
    fn a_record_is_canonical_and_summarised() {
        let record = BuildRecord {
            at: "/opt/sf-env/pip-0".into(),
            differs_from: None,
            commit: "ab".repeat(20),
            environment: Digest::of(b"env"),
            extras: Vec::new(),
            groups: vec!["tests".into()],
            inputs: BTreeMap::from([("requirements.txt".to_owned(), Digest::of(b"lock"))]),
            lockfile: "requirements.txt".into(),
            recipe: "pip".into(),
            registries: vec!["pypi.org:443".into()],
            tools: BTreeMap::from([("pip".to_owned(), "23.0.1".to_owned())]),
            toolchain: None,
        };
        let bytes = record.encode();
        assert_eq!(
            canonical::parse_canonical(&bytes).map(|_| ()).ok(),
            Some(())
        );
        assert_eq!(
            BuildRecord::summary(&bytes),
            Some((
                "pip".into(),
                "requirements.txt".into(),
                Digest::of(b"lock").to_string()
            ))
        );
        assert_eq!(BuildRecord::summary(b"{}"), None);
        assert_eq!(
            BuildRecord::at_of(&bytes).as_deref(),
            Some("/opt/sf-env/pip-0")
        );
    }
}
