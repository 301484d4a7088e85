//! Shared set-up of the `sf serve` tests through the binary: the team's repository served by
//! `git daemon` on loopback, an owned repository created from it with that upstream, a Slice
//! whose one check rejects any note holding the word REJECT, a tokens file, and `sf serve`
//! itself, started on a port the kernel chose, with a small HTTP/1.1 client over std.

#![allow(dead_code)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::land_support::{Work, team_project, write};
use sf_test_support::git_servers::{BareRemote, GitDaemon};

/// The tokens of the three clients.
pub const TOKENS: [(&str, &str); 3] = [
    ("agent-a", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
    ("agent-b", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"),
    ("agent-c", "cccccccccccccccccccccccccccccccc"),
];

/// The Slice's id.
pub const SLICE_ID: &str = "notes";

/// The Slice's check: every note is read with the shell's builtins only, and one holding
/// REJECT fails the check.
const CHECK: &str = r#"cd /sf/program || exit 2
for f in notes/*; do
  [ -f "$f" ] || continue
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in *REJECT*) echo "rejected: $f"; exit 1;; esac
  done < "$f"
done
echo ok
"#;

/// A team's remote on `git daemon`, an owned repository of it, and a frozen Slice `slice`.
pub struct Team {
    /// The owned repository's working directory.
    pub work: Work,
    /// The team's bare repository.
    pub remote: BareRemote,
    /// Its daemon (stopped when dropped).
    pub daemon: GitDaemon,
    /// The directory of the team's work tree.
    _team: tempfile::TempDir,
}

impl Team {
    /// Sets everything up; pushes to the remote are counted from here on.
    pub fn new() -> Self {
        Self::checking_for(0)
    }

    /// [`Team::new`] with a check that first sleeps `seconds`: long enough for a proposal
    /// behind it to be sealed on top of it while it runs.
    pub fn checking_for(seconds: u32) -> Self {
        Self::checking_with_timeout(seconds, 20_000)
    }

    /// [`Team::checking_for`] with the recipe's timeout `timeout_ms`.
    pub fn checking_with_timeout(seconds: u32, timeout_ms: u64) -> Self {
        let (team_dir, dir) = sf_tests::private_dir();
        let team = team_project(&dir);
        let remote = BareRemote::from_repository(&team);
        let daemon = GitDaemon::start(remote.root());
        let url = daemon.url(remote.name());
        let source = remote.path().to_str().unwrap().to_owned();
        let work = Work::from_git_upstream_at(move |_| source, "main", Some(&url));
        let slice = work.dir.join("slice");
        write(
            &slice.join("slice.json"),
            &format!(r#"{{"id":"{SLICE_ID}","revision":1,"scope":["notes"],"protected":[]}}"#),
        );
        write(
            &slice.join("acceptance.json"),
            r#"{"protocol": "sf-repository-acceptance/2", "checks": [
  {"kind": "process", "id": "no-reject", "phase": "after", "stage": "candidate",
   "entry": {"from": "harness", "path": "check.sh"}, "entryInScope": false,
   "args": [], "expectation": {"exitCode": 0, "stdoutDigest": null}}]}"#,
        );
        write(
            &slice.join("recipe.json"),
            &format!(r#"{{"timeoutMs":{timeout_ms},"outputLimit":65536}}"#),
        );
        let pause = if seconds == 0 {
            String::new()
        } else {
            format!("sleep {seconds}\n")
        };
        write(&slice.join("harness/check.sh"), &format!("{pause}{CHECK}"));
        work.freeze("slice").result();
        remote.count_pushes();
        Self {
            work,
            remote,
            daemon,
            _team: team_dir,
        }
    }

    /// Writes the tokens file (mode `mode`) and `serve.toml` naming it, the state directory
    /// and the repository (delivered); returns the configuration's path.
    pub fn config(&self, mode: u32, listen: &str) -> PathBuf {
        self.config_delivering(mode, listen, true)
    }

    /// [`Team::config`] with `deliver` as given.
    pub fn config_delivering(&self, mode: u32, listen: &str, deliver: bool) -> PathBuf {
        self.config_with(mode, listen, deliver, "")
    }

    /// [`Team::config_delivering`] with `more` added to `[[serve.repository]]` (`jobs = 3`).
    pub fn config_with(&self, mode: u32, listen: &str, deliver: bool, more: &str) -> PathBuf {
        let dir = &self.work.dir;
        let tokens = dir.join("tokens");
        let lines: String = TOKENS
            .iter()
            .map(|(name, token)| format!("{name} {token}\n"))
            .collect();
        std::fs::write(&tokens, lines).unwrap();
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(mode)).unwrap();
        let config = dir.join("serve.toml");
        std::fs::write(
            &config,
            format!(
                "[serve]\nlisten = {listen:?}\nstate = {:?}\ntokens = {:?}\n\
                 [[serve.repository]]\nname = \"te\"\nidentity = {:?}\nslices = [{:?}]\n\
                 deliver = {deliver}\n{more}\n",
                dir.join("state"),
                tokens,
                dir.join("identity.json"),
                dir.join("slice"),
            ),
        )
        .unwrap();
        config
    }

    /// The team's branch `main` on the remote.
    pub fn main(&self) -> String {
        self.remote.read_ref("refs/heads/main").unwrap()
    }
}

/// A running `sf serve`, killed when dropped.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub address: SocketAddr,
}

impl Server {
    /// Starts `sf --config CONFIG serve` and waits for its "listening on" line; panics with
    /// what it printed if it does not start.
    pub fn start(work: &Work, config: &Path) -> Self {
        let mut command = sf_tests::plugins::sf();
        command.arg("--config").arg(config).arg("serve");
        Self::started(work, command)
    }

    /// Starts the test build of `sf-serve` that kills itself at the fault point `point`.
    pub fn start_faulty(work: &Work, config: &Path, point: &str) -> Self {
        let sf = &sf_tests::plugins::built().sf;
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_sf-serve-faulty"));
        command
            .env("SF_PLUGIN_PATH", sf.parent().unwrap())
            .env("SF_TEST_KILL_AT", point)
            .arg("--config")
            .arg(config);
        Self::started(work, command)
    }

    /// Runs `command` in the work's directory and waits for its "listening on" line.
    fn started(work: &Work, command: std::process::Command) -> Self {
        Self::started_as(work, command, "http")
    }

    /// [`Server::started`], for a line "listening on SCHEME://ADDRESS".
    fn started_as(work: &Work, mut command: std::process::Command, scheme: &str) -> Self {
        let mut child = command
            .current_dir(&work.dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = send.send(line);
        });
        let line = receive
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_default();
        let Some(address) = line
            .trim()
            .strip_prefix("sf serve: listening on ")
            .and_then(|url| url.strip_prefix(scheme))
            .and_then(|url| url.strip_prefix("://"))
            .and_then(|address| address.parse().ok())
        else {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "sf serve did not start: stdout {line:?}, stderr {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        // Its log is drained so that a full pipe never blocks it.
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[sf serve] {line}");
            }
        });
        Self { child, address }
    }

    /// Waits (at most `limit`) for it to kill itself at its fault point.
    pub fn wait_killed(mut self, limit: Duration) {
        use std::os::unix::process::ExitStatusExt as _;
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert_eq!(status.signal(), Some(9), "{status:?}");
                return;
            }
            assert!(
                started.elapsed() < limit,
                "it never reached its fault point"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILLs it and reaps it.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// One request; answers the status and the body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        request(self.address, method, path, token, body)
    }

    /// A JSON request; answers the status and the parsed body.
    pub fn json(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let body = if body.is_null() {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let (status, bytes) = self.request(method, path, token, &body);
        let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
            panic!(
                "{method} {path}: {status}, not JSON: {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        (status, value)
    }

    /// `GET /v1/proposals/ID` with the first client's token.
    pub fn proposal(&self, id: &str) -> serde_json::Value {
        let (status, value) = self.json(
            "GET",
            &format!("/v1/proposals/{id}"),
            Some(TOKENS[0].1),
            &serde_json::Value::Null,
        );
        assert_eq!(status, 200, "{value}");
        value
    }

    /// `GET /metrics`, as text.
    pub fn metrics(&self) -> String {
        let (status, body) = self.request("GET", "/metrics", None, b"");
        assert_eq!(status, 200);
        String::from_utf8(body).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 request to `address` (the connection closed after it).
pub fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(120)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Length: {}\r\n",
        body.len()
    );
    if !body.is_empty() {
        head.push_str("Content-Type: application/json\r\n");
    }
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    // A server may answer (413) before it has read a large body, and close.
    let _ = stream.write_all(body);
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    let end = response
        .windows(4)
        .position(|window| window == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head: {}", String::from_utf8_lossy(&response)));
    let head = String::from_utf8_lossy(&response[..end]).into_owned();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status: {head}"));
    let mut body = response[end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (status, body)
}

/// The bytes of a chunked body.
fn dechunk(mut chunked: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = chunked.windows(2).position(|window| window == b"\r\n") else {
            return body;
        };
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&chunked[..line_end])
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .unwrap();
        if size == 0 {
            return body;
        }
        let start = line_end + 2;
        body.extend_from_slice(&chunked[start..start + size]);
        chunked = &chunked[start + size + 2..];
    }
}

/// A proposal creating `notes/NAME` with `text`, as sf's proposal format.
pub fn note_proposal(name: &str, text: &str) -> serde_json::Value {
    serde_json::json!({
        "slice": SLICE_ID,
        "proposal": {
            "edits": [{"path": format!("notes/{name}"), "prior": null, "text": text}],
            "message": {"title": format!("Add the note {name}")},
        },
    })
}

/// A proposal creating `notes/NAME` with the one line `line`, as a Git diff.
pub fn note_diff(name: &str, line: &str) -> serde_json::Value {
    serde_json::json!({
        "slice": SLICE_ID,
        "diff": format!(
            "diff --git a/notes/{name} b/notes/{name}\nnew file mode 100644\n--- /dev/null\n\
             +++ b/notes/{name}\n@@ -0,0 +1 @@\n+{line}\n"
        ),
    })
}

/// Waits until every proposal of `ids` is in a final state (at most `limit`); answers them.
pub fn wait_final(server: &Server, ids: &[String], limit: Duration) -> Vec<serde_json::Value> {
    let started = Instant::now();
    loop {
        let all: Vec<serde_json::Value> = ids.iter().map(|id| server.proposal(id)).collect();
        if all.iter().all(|entry| is_final(&entry["state"])) {
            return all;
        }
        assert!(
            started.elapsed() < limit,
            "not final after {limit:?}: {all:#?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Whether `state` is final.
pub fn is_final(state: &serde_json::Value) -> bool {
    !matches!(
        state.as_str(),
        Some("queued" | "sealing" | "collecting" | "landing")
    )
}

impl Server {
    /// Starts `sf --config CONFIG serve` configured with TLS and waits for its "listening on
    /// https://" line; panics with what it printed if it does not start or says http://.
    pub fn start_tls(work: &Work, config: &Path) -> Self {
        let mut command = sf_tests::plugins::sf();
        command.arg("--config").arg(config).arg("serve");
        Self::started_as(work, command, "https")
    }
}

impl Server {
    /// The process id of the server (`sf serve`, which runs `sf-serve` in its place).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// The processes descended from `pid` (not `pid` itself), each with its command name, read
/// from /proc.
pub fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut children: Vec<(u32, u32, String)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().map_while(Result::ok) {
        let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "PID (COMM) STATE PPID …": the name may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        let parent = stat[close + 2..]
            .split(' ')
            .nth(1)
            .and_then(|ppid| ppid.parse().ok());
        if let Some(parent) = parent {
            children.push((id, parent, name));
        }
    }
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        for (id, _, name) in children.iter().filter(|(_, ppid, _)| *ppid == parent) {
            found.push((*id, name.clone()));
            frontier.push(*id);
        }
    }
    found
}

impl Team {
    /// [`Team::config`] with `[evidence_store] type = "postgres"`: `database` on the cluster
    /// at `port`, as `role` with its password in `password_file`; sf serve keeps its queue
    /// there too.
    pub fn config_postgres(
        &self,
        port: u16,
        database: &str,
        role: &str,
        password_file: &Path,
    ) -> PathBuf {
        let config = self.config(0o600, "127.0.0.1:0");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(&format!(
            "[evidence_store]\ntype = \"postgres\"\nhost = \"127.0.0.1\"\nport = {port}\n\
             database = {database:?}\nuser = {role:?}\npassword_file = {password_file:?}\n"
        ));
        std::fs::write(&config, text).unwrap();
        config
    }
}
