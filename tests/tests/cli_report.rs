//! `sf report` rendered by a real browser: headless Chromium (Debian's `chromium`, which
//! .ci/run installs when it is missing) loads the report of the demo's Verified Candidate and
//! of its Failed one, and the test reads the rendered DOM (`--dump-dom`) for the verdict,
//! each check and the diff, and writes a screenshot; a Candidate whose output and message hold
//! `<script>` and `</pre><img onerror=…>` shows them as text, and no element of theirs exists.

mod land_support;

use std::path::{Path, PathBuf};

use land_support::Work;
use sf_host::canonical::Digest;
use sf_tests::plugins::{run_json, sf};
use sf_tests::private_dir;

/// Headless Chromium on `page` with a fresh profile: `--dump-dom` (the DOM after load) or
/// `--screenshot=FILE`.
fn chromium(page: &Path, action: &str) -> String {
    chromium_with(page, &[action])
}

/// [`chromium`] with `flags`.
fn chromium_with(page: &Path, flags: &[&str]) -> String {
    sf_test_support::browser::chromium(&format!("file://{}", page.display()), flags)
}

/// `sf report --json` of `candidate` into `out`; its result.
fn report(
    dir: &Path,
    identity: &Path,
    slice: &Path,
    candidate: &str,
    out: &Path,
) -> serde_json::Value {
    run_json(
        sf().current_dir(dir)
            .args(["report", "--json", "--candidate", candidate])
            .arg("--identity")
            .arg(identity)
            .arg("--slice")
            .arg(slice)
            .arg("--out")
            .arg(out),
    )
    .result()
    .clone()
}

#[test]
fn the_demos_reports_render_in_a_browser_with_verdict_checks_and_diff() {
    let (_dir, root) = private_dir();
    let kept = root.join("demo");
    let output = sf().arg("demo").arg("--keep").arg(&kept).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let (identity, slice) = (kept.join("identity.json"), kept.join("slice"));
    let listed = run_json(
        sf().args(["list", "--json", "--identity"])
            .arg(&identity)
            .arg("--slice")
            .arg(&slice),
    );
    let rows = listed.result()["candidates"].as_array().unwrap().clone();
    for (outcome, landing) in [("verified", "delivered"), ("failed", "-")] {
        let row = rows
            .iter()
            .find(|row| row["verdict"]["outcome"] == outcome)
            .unwrap();
        let digest = row["digest"].as_str().unwrap();
        let out = root.join(format!("{outcome}.html"));
        let made = report(&root, &identity, &slice, digest, &out);
        assert_eq!(made["outcome"], outcome);
        let html = std::fs::read_to_string(&out).unwrap();
        // The page names its own digest: the SHA-256 of itself with that value zeroed.
        let named = made["digest"].as_str().unwrap();
        let zeroed = html.replace(named, &format!("sha256:{}", "0".repeat(64)));
        assert_eq!(Digest::of(zeroed.as_bytes()).to_string(), named);
        assert!(html.contains(&format!("content=\"{named}\"")));

        let dom = chromium(&out, "--dump-dom");
        assert!(
            dom.contains(&format!(
                "<span class=\"outcome {outcome}\">{outcome}</span>"
            )),
            "{dom}"
        );
        for check in ["bug-shown", "bug-fixed", "empty-sums-to-zero"] {
            assert!(dom.contains(&format!("<h3>{check}: ")), "{check}: {dom}");
        }
        assert!(dom.contains("<span class=\"del\">-first=1</span>"), "{dom}");
        assert!(
            dom.contains(&format!("<h2>Landing: {landing}</h2>")),
            "{dom}"
        );
        assert!(dom.contains(digest), "{dom}");
        let shot = root.join(format!("{outcome}.png"));
        chromium(&out, &format!("--screenshot={}", shot.display()));
        let png = std::fs::read(&shot).unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 1000,
            "a screenshot"
        );
    }
}

#[test]
fn everything_a_candidate_produced_is_shown_as_text_never_run() {
    let work = Work::new();
    let hostile_output =
        "<script>document.title='pwned'</script></pre><img src=x onerror=\"document.title='img'\">";
    let sum = format!("echo '{hostile_output}'\necho '<b>bold</b>' >&2\n");
    let proposal = work.proposal(
        "hostile",
        serde_json::json!({
            "edits": [{
                "path": "sum.sh",
                "prior": Digest::of(land_support::SUM_BUGGY.as_bytes()).to_string(),
                "text": sum,
            }],
            "message": {
                "title": "<script>document.title='title'</script>",
                "body": "</pre><img src=x onerror=\"document.title='body'\">",
            },
        }),
    );
    let sealed = work.sf(&[
        "seal",
        "--identity",
        "identity.json",
        "--slice",
        "slice",
        "--proposal",
        proposal.to_str().unwrap(),
    ]);
    let digest = sealed.result()["digest"].as_str().unwrap().to_owned();
    work.collect_and_judge(&digest, "slice");
    let out: PathBuf = work.dir.join("hostile.html");
    report(
        &work.dir,
        &work.dir.join("identity.json"),
        &work.dir.join("slice"),
        &digest,
        &out,
    );
    let html = std::fs::read_to_string(&out).unwrap();
    assert!(!html.contains("<script"), "raw: {html}");
    assert!(!html.contains("<img"), "raw: {html}");
    assert!(!html.contains("<b>"), "raw: {html}");
    assert!(html.contains("&lt;script&gt;"), "{html}");

    let dom = chromium(&out, "--dump-dom");
    // No element of the Candidate's exists, and no script ran (the title is sf's).
    assert!(!dom.contains("<script"), "{dom}");
    assert!(!dom.contains("<img"), "{dom}");
    assert!(!dom.contains("<b>"), "{dom}");
    assert!(dom.contains("<title>sf report: sha256:"), "{dom}");
    // Each is shown as text: in stdout, stderr, the message and the diff.
    assert!(
        dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;/pre&gt;&lt;img"),
        "{dom}"
    );
    assert!(dom.contains("&lt;b&gt;bold&lt;/b&gt;"), "{dom}");
    assert!(
        dom.contains("&lt;script&gt;document.title='title'&lt;/script&gt;"),
        "{dom}"
    );
    assert!(
        dom.contains("&lt;/pre&gt;&lt;img src=x onerror=\"document.title='body'\"&gt;"),
        "{dom}"
    );
}

/// The top of the first element `selector` matches, in CSS pixels from the top of the page,
/// as headless Chromium lays `page` out in a 1280×1000 window: measured by a copy of the page
/// with a script of the test's appended (the page itself forbids scripts; the copy drops that
/// policy only).
fn top_of(page: &Path, selector: &str) -> f64 {
    let html = std::fs::read_to_string(page).unwrap();
    let policy = html
        .lines()
        .find(|line| line.contains("Content-Security-Policy"))
        .unwrap();
    let measured = html.replacen(policy, "", 1).replacen(
        "</body>",
        &format!(
            "<script>document.title = 'top=' + (document.querySelector('{selector}')\
             .getBoundingClientRect().top + window.scrollY);</script></body>"
        ),
        1,
    );
    let copy = page.with_extension("measured.html");
    std::fs::write(&copy, measured).unwrap();
    let dom = chromium_with(&copy, &["--dump-dom", "--window-size=1280,1000"]);
    let title = dom.split("<title>top=").nth(1).expect("the script ran");
    title[..title.find('<').unwrap()].parse().unwrap()
}

#[test]
fn a_failed_page_shows_its_reasons_first_and_folds_long_output() {
    let work = Work::new();
    // A Candidate that leaves the bug in and talks a lot first.
    let noisy = format!("seq 1 400 >&2\n{}", land_support::SUM_NOT_FIXED);
    let digest = work.seal("slice", &noisy);
    let verdict = work.collect_and_judge(&digest, "slice");
    assert_eq!(verdict["outcome"], "failed", "{verdict}");
    let out = work.dir.join("failed.html");
    report(
        &work.dir,
        &work.dir.join("identity.json"),
        &work.dir.join("slice"),
        &digest,
        &out,
    );
    let dom = chromium(&out, "--dump-dom");
    // The Verdict comes first, then the diff, then the checks with what each expects.
    let at = |needle: &str| {
        dom.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {dom}"))
    };
    assert!(at("id=\"verdict\"") < at("id=\"diff\""));
    assert!(at("id=\"diff\"") < at("id=\"checks\""));
    assert!(at("id=\"checks\"") < at("id=\"candidate\""));
    assert!(
        dom.contains("<th>expects</th><td>exit code 0, stdout <span class=\"mono\">sha256:"),
        "{dom}"
    );
    // 400 lines of stderr: the first shown, the rest folded.
    assert!(dom.contains("<details class=\"stderr-rest\">"), "{dom}");
    assert!(
        dom.contains("<p class=\"reason\">bug-fixed missed: stdout hashes to sha256:"),
        "{dom}"
    );
    let top = top_of(&out, ".reason");
    assert!(top < 1000.0, "the first reason is {top} px down");
}
