//! `git daemon` on loopback: git:// with push enabled, in a process group of its own.

use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use nix::unistd::Pid;

use super::{git_command, kill_group, path_str, server_git};

/// How long `git daemon` may take to say it listens.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// How many ports are tried when another process takes the one chosen first.
const PORT_ATTEMPTS: usize = 20;

/// `git daemon --reuseaddr --listen=127.0.0.1 --port=<port> --base-path=<dir> --export-all
/// --enable=receive-pack --informative-errors --log-destination=stderr --verbose`, started
/// in a process group of its own (every connection's `git daemon --serve`, `upload-pack`,
/// `receive-pack` and hook is in it too), and killed (the whole group, SIGKILL) when the
/// guard is dropped, which returns once every process of the group is dead and the daemon
/// reaped. (The daemon's children, orphaned by the kill, are reaped by init.)
///
/// The port is found by binding port 0 and releasing it; the daemon counts as started when
/// it logs `Ready to rumble` (it has bound and listens by then). If another process took
/// the port in between, the daemon says so and exits, and another port is tried.
pub struct GitDaemon {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
}

impl GitDaemon {
    /// Serves every repository under `base_path` (`git://127.0.0.1:<port>/<name>.git` is
    /// `<base_path>/<name>.git`). Panics, with the daemon's log, if it cannot start.
    pub fn start(base_path: &Path) -> Self {
        let mut logs = Vec::new();
        for _ in 0..PORT_ATTEMPTS {
            match Self::try_start(base_path) {
                Ok(daemon) => return daemon,
                Err(log) => logs.push(log),
            }
        }
        panic!("git daemon did not start on any of {PORT_ATTEMPTS} ports: {logs:#?}");
    }

    fn try_start(base_path: &Path) -> Result<Self, String> {
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").expect("binding 127.0.0.1:0");
            probe.local_addr().expect("the probe's address").port()
        };
        let mut command = git_command(server_git());
        command
            .arg("daemon")
            .arg("--reuseaddr")
            .arg("--listen=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg(format!("--base-path={}", path_str(base_path)))
            .arg("--export-all")
            .arg("--enable=receive-pack")
            .arg("--informative-errors")
            .arg("--log-destination=stderr")
            .arg("--verbose")
            .current_dir(base_path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = command.spawn().expect("spawning git daemon");
        let stderr = child.stderr.take().expect("the daemon's stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let (lines, said) = mpsc::channel();
        {
            let log = Arc::clone(&log);
            // Drains the log for as long as any process of the group holds it (so the
            // daemon never blocks on a full pipe); ends at EOF, when the group is gone.
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    let mut log = log.lock().expect("log lock");
                    log.push_str(&line);
                    log.push('\n');
                    drop(log);
                    let _ = lines.send(line);
                }
            });
        }
        let daemon = Self { child, port, log };
        loop {
            match said.recv_timeout(READY_WITHIN) {
                Ok(line) if line.contains("Ready to rumble") => return Ok(daemon),
                Ok(_) => {}
                // EOF (the daemon exited: the port was taken) or no word in time; dropping
                // the daemon kills and reaps it.
                Err(_) => return Err(daemon.log()),
            }
        }
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `git://127.0.0.1:<port>/<repo_name>.git`.
    pub fn url(&self, repo_name: &str) -> String {
        format!("git://127.0.0.1:{}/{repo_name}.git", self.port)
    }

    /// Everything the daemon and its children have logged so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        // The child is not reaped before this, so its pid is still the group's id. Every
        // process of the group is gone before the leader is reaped: the `--serve` children
        // hold the listening socket too, so the port is closed only then.
        let group = Pid::from_raw(i32::try_from(self.child.id()).expect("a pid fits in i32"));
        kill_group(group);
        let _ = self.child.wait();
    }
}
