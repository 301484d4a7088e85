//! Headless Chromium (Debian's `chromium`, which .ci/run installs when it is missing): what
//! the tests render sf's pages with, a fresh profile each time. A missing browser fails the
//! test, naming the fix: nothing is skipped.

use std::path::Path;
use std::process::Command;

/// Where Debian installs Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Chromium on `url` with `flags` (`--dump-dom`: the DOM after load; `--screenshot=FILE`):
/// its stdout.
pub fn chromium(url: &str, flags: &[&str]) -> String {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: install Debian's chromium (`apt-get install chromium`; .ci/run \
         does it)"
    );
    let profile = tempfile::tempdir().expect("a browser profile directory");
    let output = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
        ])
        .args(flags)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .expect("running chromium");
    assert!(output.status.success(), "chromium: {output:?}");
    String::from_utf8(output.stdout).expect("chromium's output is UTF-8")
}
