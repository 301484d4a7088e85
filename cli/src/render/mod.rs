//! How the records several commands print are shown: as text (every value from outside
//! escaped for the terminal) and as the `--json` result.

mod candidate;
mod effects;
mod facts;
mod landing;
mod runs;
mod verdict;

pub use candidate::{content_field, listed_files, sealed};
pub use effects::{delivery, integration};
pub use facts::{change_word, deliveries_json, facts_json, integrations_json, verdict_words};
pub use landing::landed;
pub use runs::{command_line, results_lines, run_json_of, run_word, tail};
pub use verdict::{output_tails, verdict_json, verdict_text};
