//! Prometheus's own parser of its text exposition format (`prometheus_client.parser`, from a
//! venv `.ci/prometheus-venv` makes), for the tests of what `sf serve` answers on `/metrics`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The venv (`<target>/prometheus-venv`), made once per test process.
fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| crate::py_venv::made("prometheus-venv", "prometheus-venv"))
}

/// Reads the text on stdin with `text_string_to_metric_families` (which raises on text it
/// cannot parse) and prints every family as JSON: name → {type, samples: [[name, labels,
/// value]]}.
const PARSER: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    families[family.name] = {
        "type": family.type,
        "samples": [[s.name, s.labels, s.value] for s in family.samples],
    }
print(json.dumps(families))
"#;

/// `text` parsed by Prometheus's parser: every metric family by name, with its type and
/// samples (`[name, labels, value]`). Panics, showing the parser's error, on text it refuses.
pub fn parse(text: &str) -> sf_sdk::serde_json::Value {
    let output = crate::py_venv::run(venv(), PARSER, &[], text.as_bytes());
    assert!(
        output.status.success(),
        "Prometheus's parser refused the metrics: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    sf_sdk::serde_json::from_slice(&output.stdout).expect("the parser's JSON")
}
