//! The pages: the queue as one HTML page (no script), a proposal's report (what `sf report`
//! renders, made by the `sf` program beside this one), and the metrics in Prometheus' text
//! format. Every value in a page is escaped by the template engine.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::{Path, State as Shared};
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};

use crate::api::{Server, client, entry};
use crate::envelope::ApiError;
use crate::state::{ALL, State};

/// The most proposals the queue page lists, newest first.
const PAGE_ROWS: usize = 500;

/// The queue page's template (an .html name: minijinja escapes every value).
const QUEUE_TEMPLATE: &str = r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sf serve: the queue</title>
<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}
.delivered,.landed{background:#e6ffe6}.failed,.refused,.not-dispatched{background:#ffe6e6}
.inconclusive{background:#fff6d6}</style></head>
<body><h1>The queue</h1>
<p>{% for count in counts %}{{ count.state }}: {{ count.n }}{% if not loop.last %} · {% endif %}{% endfor %}</p>
<table><thead><tr><th>id</th><th>repository</th><th>Slice</th><th>client</th><th>state</th><th>Candidate</th><th>Verdict</th><th>reasons</th></tr></thead>
<tbody>{% for row in rows %}<tr class="{{ row.state }}"><td>{{ row.id }}</td><td>{{ row.repository }}</td><td>{{ row.slice }}</td><td>{{ row.client }}</td><td>{{ row.state }}</td><td>{{ row.candidate or "" }}</td><td>{{ row.verdict.outcome if row.verdict else "" }}</td><td>{{ row.reasons | join("; ") }}{% if row.error %} {{ row.error.message }}{% endif %}</td></tr>
{% endfor %}</tbody></table></body></html>
"#;

/// The headers of every page: HTML that may run no script and load nothing.
fn html(body: String) -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
            ),
        ],
        body,
    )
        .into_response()
}

/// `GET /`.
pub async fn queue_page(Shared(server): Shared<Arc<Server>>) -> Result<Response, ApiError> {
    let (rows, counts) =
        server.with_queue(|queue| Ok((queue.list(PAGE_ROWS)?, queue.counts()?)))?;
    let rows: Vec<_> = rows.iter().map(crate::api::entry_json).collect();
    let counts: Vec<_> = ALL
        .iter()
        .map(|state| {
            let n = counts
                .iter()
                .find(|(word, _)| word == state.as_str())
                .map_or(0, |(_, n)| *n);
            serde_json::json!({"state": state.as_str(), "n": n})
        })
        .collect();
    let page = render_queue(&rows, &counts)
        .map_err(|error| ApiError::unavailable(format!("the queue page: {error}")))?;
    Ok(html(page))
}

/// The queue page of `rows` (the API's view of each proposal) and `counts` (`{state, n}`).
fn render_queue(
    rows: &[serde_json::Value],
    counts: &[serde_json::Value],
) -> Result<String, minijinja::Error> {
    let mut env = minijinja::Environment::new();
    env.add_template("queue.html", QUEUE_TEMPLATE)?;
    env.get_template("queue.html")?
        .render(minijinja::context! {rows, counts})
}

/// `GET /metrics`: Prometheus' text exposition format.
pub async fn metrics(Shared(server): Shared<Arc<Server>>) -> Result<Response, ApiError> {
    let (counts, verdicts, depths, times) = server.with_queue(|queue| {
        Ok((
            queue.counts()?,
            queue.verdicts()?,
            queue.depths()?,
            queue.times_in_queue()?,
        ))
    })?;
    let count = |state: State| {
        counts
            .iter()
            .find(|(word, _)| word == state.as_str())
            .map_or(0, |(_, n)| *n)
    };
    let mut text = String::new();
    text.push_str("# HELP sf_serve_proposals Proposals in the queue, by state.\n");
    text.push_str("# TYPE sf_serve_proposals gauge\n");
    for state in ALL {
        text.push_str(&format!(
            "sf_serve_proposals{{state=\"{}\"}} {}\n",
            state.as_str(),
            count(state)
        ));
    }
    let depth: u64 = ALL
        .iter()
        .filter(|state| !state.is_final())
        .map(|state| count(*state))
        .sum();
    text.push_str("# HELP sf_serve_queue_depth Proposals not yet in a final state.\n");
    text.push_str("# TYPE sf_serve_queue_depth gauge\n");
    text.push_str(&format!("sf_serve_queue_depth {depth}\n"));
    lane_depths(&mut text, &server.settings, &depths);
    time_in_queue(&mut text, &times);
    text.push_str("# HELP sf_serve_collections_running Landings collecting or moving now.\n");
    text.push_str("# TYPE sf_serve_collections_running gauge\n");
    text.push_str(&format!(
        "sf_serve_collections_running {}\n",
        server.activity.collecting.load(Ordering::SeqCst)
    ));
    text.push_str("# HELP sf_serve_verdicts_total Verdicts of finished landings, by outcome.\n");
    text.push_str("# TYPE sf_serve_verdicts_total counter\n");
    for outcome in ["verified", "failed", "inconclusive"] {
        let n = verdicts
            .iter()
            .find(|(word, _)| word == outcome)
            .map_or(0, |(_, n)| *n);
        text.push_str(&format!(
            "sf_serve_verdicts_total{{outcome=\"{outcome}\"}} {n}\n"
        ));
    }
    text.push_str("# HELP sf_serve_deliveries_total Landed commits delivered to the upstream.\n");
    text.push_str("# TYPE sf_serve_deliveries_total counter\n");
    text.push_str(&format!(
        "sf_serve_deliveries_total {}\n",
        count(State::Delivered)
    ));
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// `GET /v1/proposals/{id}/report`: the report `sf report` writes, once the proposal is
/// sealed.
pub async fn report(
    Shared(server): Shared<Arc<Server>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    client(&server, &headers)?;
    let entry = entry(&server, &id)?;
    let (Some(candidate), Some(slice)) = (entry.candidate, entry.frozen_slice) else {
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "not-sealed",
            format!(
                "proposal {id} is {} and has no Candidate to report on yet; ask again once it \
                 is collecting",
                entry.state.as_str()
            ),
        ));
    };
    let Some(identity) = server
        .settings
        .repository(&entry.repository)
        .map(|repo| repo.identity.clone())
    else {
        return Err(ApiError::unavailable(format!(
            "repository {:?} is no longer configured",
            entry.repository
        )));
    };
    let config = server.config.clone();
    let scratch = server
        .settings
        .state
        .join("reports")
        .join(crate::api::new_id()?);
    let page = tokio::task::spawn_blocking(move || {
        render_report(&identity, &candidate, &slice, config.as_deref(), &scratch)
    })
    .await
    .map_err(|error| ApiError::unavailable(format!("the report: {error}")))??;
    Ok(html(page))
}

/// Runs `sf report` (the program beside this one) into `dir`, a new directory of the private
/// state directory (never a shared temporary directory, where another user could place a
/// file first), reads the page back and removes `dir`.
fn render_report(
    identity: &std::path::Path,
    candidate: &str,
    slice: &str,
    config: Option<&std::path::Path>,
    dir: &std::path::Path,
) -> Result<String, ApiError> {
    let sf = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join("sf")))
        .filter(|sf| sf.is_file())
        .ok_or_else(|| ApiError::unavailable("the sf program is not beside sf-serve"))?;
    std::fs::create_dir_all(dir)
        .map_err(|error| ApiError::unavailable(format!("{}: {error}", dir.display())))?;
    let out = dir.join("report.html");
    let mut command = std::process::Command::new(sf);
    command.arg("report").arg("--identity").arg(identity);
    command.args(["--candidate", candidate, "--slice", slice, "--out"]);
    command.arg(&out);
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    let output = command
        .output()
        .map_err(|error| ApiError::unavailable(format!("sf report: {error}")))?;
    let page = std::fs::read_to_string(&out);
    let _ = std::fs::remove_dir_all(dir);
    match page {
        Ok(page) if output.status.success() => Ok(page),
        _ => Err(ApiError::unavailable(format!(
            "sf report failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))),
    }
}

/// `sf_serve_lane_depth`: the proposals not yet final of each lane (a repository: its queue
/// lands in one order on one target), every configured one listed.
fn lane_depths(
    text: &mut String,
    settings: &sf_host::plugin::serve_config::ServeSettings,
    depths: &[(String, u64)],
) {
    text.push_str("# HELP sf_serve_lane_depth Proposals not yet final, by lane (repository).\n");
    text.push_str("# TYPE sf_serve_lane_depth gauge\n");
    for repository in &settings.repositories {
        let n = depths
            .iter()
            .find(|(name, _)| *name == repository.name)
            .map_or(0, |(_, n)| *n);
        text.push_str(&format!(
            "sf_serve_lane_depth{{lane=\"{}\"}} {n}\n",
            repository.name
        ));
    }
}

/// The buckets of `sf_serve_time_in_queue_seconds`, in seconds.
const TIME_BUCKETS: [u64; 10] = [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600];

/// `sf_serve_time_in_queue_seconds`: how long the proposals that ended took from their
/// request to their end, as a histogram.
fn time_in_queue(text: &mut String, times: &[u64]) {
    text.push_str(
        "# HELP sf_serve_time_in_queue_seconds Time from a proposal's request to its end.\n",
    );
    text.push_str("# TYPE sf_serve_time_in_queue_seconds histogram\n");
    for bound in TIME_BUCKETS {
        let n = times.iter().filter(|time| **time <= bound).count();
        text.push_str(&format!(
            "sf_serve_time_in_queue_seconds_bucket{{le=\"{bound}\"}} {n}\n"
        ));
    }
    text.push_str(&format!(
        "sf_serve_time_in_queue_seconds_bucket{{le=\"+Inf\"}} {}\n",
        times.len()
    ));
    text.push_str(&format!(
        "sf_serve_time_in_queue_seconds_sum {}\n",
        times.iter().sum::<u64>()
    ));
    text.push_str(&format!(
        "sf_serve_time_in_queue_seconds_count {}\n",
        times.len()
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_of_the_queue_page_is_escaped() {
        let row = serde_json::json!({
            "id": "0a", "repository": "te", "slice": "notes", "client": "agent",
            "state": "refused", "candidate": null, "verdict": null,
            "reasons": ["<script>alert(1)</script>"],
            "error": {"code": "diff-refused", "message": "notes/<img src=x onerror=alert(1)>"},
        });
        let page =
            render_queue(&[row], &[serde_json::json!({"state": "refused", "n": 1})]).unwrap();
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(page.contains("&lt;script&gt;"), "{page}");
        assert!(page.contains("refused: 1"), "{page}");
    }
}
