//! What speculative collection buys `sf serve`: three proposals A, B and C queued at once, B
//! rejected by the Slice's check, each check taking PAUSE seconds, landed by a server with
//! `jobs = 3` (each proposal sealed on the one ahead of it and collected at once; B's failure
//! seals C again on A) and `jobs = 5` (room for the alternatives too: B on the target, C on A,
//! collected at the same time), against the baseline `jobs = 1` (one after another: sealed,
//! collected, landed, then the next). The three alternate, each run on a fresh repository and
//! a fresh server; the program prints the median time from the first request to the third
//! proposal's end, and the ratios. A benchmark program that prints numbers, never a timed
//! test. It stops with an error unless A and C land and B fails, in every run.
//!
//! ```text
//! cargo build --release -p sf-cli -p sf-serve -p sf-sandbox-exec -p sf-sandbox-exec-plugin -p sf-git-cli
//! cargo run --release -p sf-examples --example serve_speculation -- [RUNS] [PAUSE] [SF]
//! ```
//!
//! RUNS defaults to 5, PAUSE to 1 (second), SF (the `sf` binary, with `sf-serve` beside it) to
//! the one beside this program's directory. Requests go through `curl`. The landings are not
//! delivered (`deliver = false`): a push is the same work, one at a time, on either side.

use std::error::Error;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sf_examples::work_slice::{self, harness_check, write};

const TOKEN: &str = "bench-token-0123456789abcdef";

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map(|n| n.parse()).transpose()?.unwrap_or(5);
    let pause: u32 = args.next().map(|n| n.parse()).transpose()?.unwrap_or(1);
    let sf = match args.next() {
        Some(path) => PathBuf::from(path),
        None => sf_examples::default_plugin_dir()?.join("sf"),
    };
    let sides = [1, 3, 5];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); sides.len()];
    for run in 0..runs {
        for (at, jobs) in sides.iter().enumerate() {
            let took = three_proposals(&sf, pause, *jobs)?;
            eprintln!(
                "run {}: jobs = {jobs}: {:.2} s",
                run + 1,
                took.as_secs_f64()
            );
            times[at].push(took);
        }
    }
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    println!("sf serve, A B C queued at once, B rejected, checks of {pause} s, {runs} runs each");
    for (jobs, median) in sides.iter().zip(&medians) {
        let how = match jobs {
            1 => "one after another (baseline)",
            3 => "speculative",
            _ => "speculative, with alternatives",
        };
        println!(
            "  jobs = {jobs}  {how:<31} median {:>6.2} s  ratio {:.2}",
            median.as_secs_f64(),
            median.as_secs_f64() / medians[0].as_secs_f64()
        );
    }
    Ok(())
}

/// A fresh repository and server with `jobs`: the time from queueing A, B and C to the last
/// one's end.
fn three_proposals(sf: &Path, pause: u32, jobs: usize) -> Result<Duration, Box<dyn Error>> {
    let work = tempfile::tempdir()?;
    let dir = work.path();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    set_up(sf, dir, pause)?;
    let config = configure(dir, jobs)?;
    let mut server = Serving::start(sf, &config)?;
    let started = Instant::now();
    let ids = ["a", "b", "c"]
        .iter()
        .map(|name| server.post(name, *name != "b"))
        .collect::<Result<Vec<_>, _>>()?;
    let ended = server.wait_final(&ids)?;
    let took = started.elapsed();
    server.stop();
    let states: Vec<&str> = ended
        .iter()
        .map(|entry| entry["state"].as_str().unwrap_or(""))
        .collect();
    if states != ["landed", "failed", "landed"] {
        return Err(format!("expected A and C landed, B failed: {ended:?}").into());
    }
    Ok(took)
}

/// The repository and a Slice over `notes` whose one check sleeps `pause` seconds, then
/// rejects any note holding REJECT.
fn set_up(sf: &Path, dir: &Path, pause: u32) -> Result<(), Box<dyn Error>> {
    let check = format!(
        "sleep {pause}\ncd /sf/program || exit 2\nfor f in notes/*; do\n  [ -f \"$f\" ] || \
         continue\n  while IFS= read -r line || [ -n \"$line\" ]; do\n    case \"$line\" in \
         *REJECT*) echo \"rejected: $f\"; exit 1;; esac\n  done < \"$f\"\ndone\necho ok\n"
    );
    let checks = vec![harness_check("no-reject", "candidate", "check.sh")];
    work_slice::set_up_scoped(sf, dir, &["notes"], &[("check.sh", check)], checks)
}

/// The tokens file and `serve.toml` for a server with `jobs`; its path.
fn configure(dir: &Path, jobs: usize) -> Result<PathBuf, Box<dyn Error>> {
    let tokens = dir.join("tokens");
    write(&tokens, &format!("bench {TOKEN}\n"))?;
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600))?;
    let config = dir.join("serve.toml");
    write(
        &config,
        &format!(
            "[serve]\nlisten = \"127.0.0.1:0\"\nstate = {:?}\ntokens = {:?}\n\
             [[serve.repository]]\nname = \"bench\"\nidentity = {:?}\nslices = [{:?}]\n\
             deliver = false\njobs = {jobs}\n",
            dir.join("state"),
            tokens,
            dir.join("identity.json"),
            dir.join("slice"),
        ),
    )?;
    Ok(config)
}

/// A running `sf serve` and where it listens.
struct Serving {
    child: Child,
    url: String,
}

impl Serving {
    fn start(sf: &Path, config: &Path) -> Result<Self, Box<dyn Error>> {
        let mut child = Command::new(sf)
            .arg("--config")
            .arg(config)
            .arg("serve")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let url = line
            .trim()
            .strip_prefix("sf serve: listening on ")
            .ok_or_else(|| format!("sf serve did not start: {line:?}"))?
            .to_owned();
        Ok(Self { child, url })
    }

    /// Queues the note `name` (rejected when `good` is false); its id.
    fn post(&self, name: &str, good: bool) -> Result<String, Box<dyn Error>> {
        let text = if good { "a note\n" } else { "REJECT\n" };
        let body = serde_json::json!({"slice": "bench", "proposal": {
            "edits": [{"path": format!("notes/{name}.txt"), "prior": null, "text": text}]}});
        let answer = self.curl(
            &["-X", "POST", "/v1/repositories/bench/proposals"],
            Some(&body),
        )?;
        Ok(answer["id"]
            .as_str()
            .ok_or_else(|| format!("not queued: {answer}"))?
            .to_owned())
    }

    /// Polls every 50 ms until each of `ids` is final; their answers.
    fn wait_final(&self, ids: &[String]) -> Result<Vec<serde_json::Value>, Box<dyn Error>> {
        let started = Instant::now();
        loop {
            let all = ids
                .iter()
                .map(|id| self.curl(&[&format!("/v1/proposals/{id}")], None))
                .collect::<Result<Vec<_>, _>>()?;
            let open = ["queued", "sealing", "collecting", "landing"];
            if all
                .iter()
                .all(|entry| !open.contains(&entry["state"].as_str().unwrap_or("")))
            {
                return Ok(all);
            }
            if started.elapsed() > Duration::from_secs(600) {
                return Err(format!("not final after 600 s: {all:?}").into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn curl(
        &self,
        args: &[&str],
        body: Option<&serde_json::Value>,
    ) -> Result<serde_json::Value, Box<dyn Error>> {
        let (route, options) = args.split_last().ok_or("no route")?;
        let mut command = Command::new("curl");
        command
            .args(["-sS", "-H", &format!("Authorization: Bearer {TOKEN}")])
            .args(options)
            .arg(format!("{}{route}", self.url))
            .stdout(Stdio::piped());
        if body.is_some() {
            command.args([
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                "@-",
            ]);
            command.stdin(Stdio::piped());
        }
        let mut child = command.spawn()?;
        if let (Some(body), Some(mut stdin)) = (body, child.stdin.take()) {
            stdin.write_all(body.to_string().as_bytes())?;
        }
        let output = child.wait_with_output()?;
        Ok(serde_json::from_slice(&output.stdout)?)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}
