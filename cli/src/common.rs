//! What every subcommand shares: the context (the configured backends and the output mode),
//! the output and error types, and the JSON forms of records several commands print.

use std::path::PathBuf;

use sf_app::Backends;
use sf_host::canonical::Value;
use sf_host::contracts::LimitHit;

/// A command's failure: a stable kebab-case code and a message naming the input at fault and
/// the fix (the use cases' error, printed as it is).
pub use sf_app::AppError as CliError;

/// What every command knows besides its own arguments.
#[derive(Clone, Debug)]
pub struct Context {
    /// The backends `--config` names, with the fault hook tests set.
    pub backends: Backends,
    /// `--json`.
    pub json: bool,
}

impl Context {
    /// The context of a command line: `--config` and `--json`, no fault hook.
    pub fn new(config: Option<PathBuf>, json: bool) -> Self {
        Self {
            // The oats checks of a Slice are staged by the sf-oats program beside sf.
            backends: Backends::new(config)
                .with_capabilities(std::sync::Arc::new(sf_app::capabilities::SfOats)),
            json,
        }
    }
}

/// A command's successful output: the `--json` result and the text printed otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct Output {
    /// The `result` of the `--json` envelope.
    pub json: serde_json::Value,
    /// What is printed without `--json`.
    pub text: String,
}

/// A canonical record as a serde_json value.
pub fn json_value(value: &Value) -> serde_json::Value {
    match value {
        Value::Null => serde_json::Value::Null,
        Value::Bool(flag) => serde_json::Value::Bool(*flag),
        Value::Integer(number) => serde_json::Value::from(*number),
        Value::String(text) => serde_json::Value::String(text.clone()),
        Value::Array(items) => serde_json::Value::Array(items.iter().map(json_value).collect()),
        Value::Object(entries) => serde_json::Value::Object(
            entries
                .iter()
                .map(|(key, item)| (key.clone(), json_value(item)))
                .collect(),
        ),
    }
}

/// The limits a run hit, as `--json` shows them: `[{limit, value, detail, reason}]`, `reason`
/// the sentence a Verdict names the limit with.
pub fn limits_hit_json(hits: &[LimitHit]) -> serde_json::Value {
    hits.iter()
        .map(|hit| {
            serde_json::json!({
                "limit": hit.limit().as_str(),
                "value": hit.value(),
                "detail": hit.detail(),
                "reason": hit.to_string(),
            })
        })
        .collect()
}

/// One file of a listing as the JSON output shows it: its path, mode word (`file`,
/// `executable`, `symlink`), SHA-256 and size.
pub fn file_entry(
    path: &str,
    mode: sf_host::contracts::tree_path::EntryMode,
    sha256: &sf_host::canonical::Digest,
    bytes: u64,
) -> serde_json::Value {
    serde_json::json!({
        "path": path,
        "mode": mode.word(),
        "sha256": sha256.to_string(),
        "bytes": bytes,
    })
}
