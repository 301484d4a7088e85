//! A throwaway PostgreSQL cluster for tests: `initdb` into a private temporary directory,
//! `pg_ctl start` on 127.0.0.1 on a port the kernel chose, run as an unprivileged user
//! (`nobody` when the tests run as root: PostgreSQL refuses to run as root), a superuser
//! whose password only the test knows, and `pg_ctl stop -m immediate` when the guard drops.
//! It never skips: when the binaries are missing or the server does not start, it panics
//! with what failed.
//!
//! A cluster is also stopped and its files removed when the process that started it ends
//! without dropping it: a cluster a test binary shares lives in a static, which is never
//! dropped, and a test the harness kills on a timeout runs no destructor at all. The server
//! (started by `pg_ctl`, which puts it in a session of its own) would otherwise outlive the
//! test with its few hundred megabytes of files. `Reaper` below says how.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// Where Debian installs the server binaries, one directory per major version.
const POSTGRESQL_LIB: &str = "/usr/lib/postgresql";
/// The uid and gid the server runs as when the tests run as root.
const NOBODY: u32 = 65534;
/// How many free ports are tried before giving up (another process may take one between the
/// check and the server's bind).
const PORT_ATTEMPTS: usize = 5;

/// A running cluster. Dropping it stops the server (immediate shutdown) and removes its files;
/// so does the end of the process, however it ends, when it is never dropped (held in a
/// static, or the process killed).
pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    uid: Option<u32>,
    superuser_password: String,
    // Declared last: fields drop in order, so on a drop the directory is already removed
    // (synchronously, by the TempDir) when the reaper is woken and finds nothing to do.
    _reaper: Reaper,
}

/// The superuser's name.
pub const SUPERUSER: &str = "sf_test_admin";

impl PgCluster {
    /// Creates and starts a cluster.
    pub fn start() -> Self {
        let bin = server_binaries();
        let dir = tempfile::Builder::new()
            .prefix("sf-pg-")
            .tempdir()
            .expect("temporary directory for a cluster");
        let uid = nix::unistd::geteuid().is_root().then_some(NOBODY);
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod the cluster's directory");
        if let Some(uid) = uid {
            nix::unistd::chown(
                dir.path(),
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(uid)),
            )
            .expect("chown the cluster's directory to nobody");
        }
        let superuser_password = format!("pw-{}", std::process::id());
        let password_file = dir.path().join("superuser-password");
        std::fs::write(&password_file, &superuser_password).expect("password file");
        if let Some(uid) = uid {
            nix::unistd::chown(&password_file, Some(nix::unistd::Uid::from_raw(uid)), None)
                .expect("chown the password file");
        }
        let data = dir.path().join("data");
        // Before initdb: a process killed while the cluster starts leaves nothing either.
        let reaper = Reaper::start(&bin, &data, dir.path(), uid);
        let mut cluster = Self {
            dir,
            bin,
            data,
            port: 0,
            uid,
            superuser_password,
            _reaper: reaper,
        };
        let initdb = cluster
            .server_command("initdb")
            .arg("-D")
            .arg(&cluster.data)
            .args(["-U", SUPERUSER, "-E", "UTF8", "--locale=C"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", password_file.display()))
            .output()
            .expect("running initdb");
        check(&initdb, "initdb");
        cluster.start_server();
        cluster
    }

    /// Starts the server of a stopped cluster on a fresh free port.
    fn start_server(&mut self) {
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            let port = free_port();
            let started = self
                .server_command("pg_ctl")
                .arg("-D")
                .arg(&self.data)
                .arg("-l")
                .arg(self.dir.path().join("server.log"))
                .args(["-w", "-t", "60", "-o"])
                .arg(format!(
                    "-c listen_addresses=127.0.0.1 -p {port} -k {} -c fsync=on \
                     -c synchronous_commit=on",
                    self.dir.path().display()
                ))
                .arg("start")
                .output()
                .expect("running pg_ctl start");
            if started.status.success() {
                self.port = port;
                return;
            }
            last = Some(started);
        }
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        panic!(
            "the PostgreSQL server did not start after {PORT_ATTEMPTS} ports: {:?}\nlog:\n{log}",
            last
        );
    }

    /// Stops the server at once (as a crash would) and starts it again on another port;
    /// what was committed before survives.
    pub fn restart(&mut self) {
        self.stop();
        self.start_server();
    }

    /// Stops the server at once (`-m immediate`), leaving it stopped.
    pub fn stop(&mut self) {
        let _ = self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }

    /// Makes the server speak TLS, with a new self-signed certificate for `127.0.0.1` (made
    /// by the `openssl` command), and refuse every TCP connection without it; restarts it
    /// (on another port). Returns a copy of the certificate: what a client trusts as its root.
    pub fn require_tls(&mut self) -> PathBuf {
        let (cert, key) = (self.data.join("server.crt"), self.data.join("server.key"));
        let made = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args([
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("running openssl");
        check(&made, "openssl req");
        for file in [&cert, &key] {
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
                .expect("chmod the server's certificate and key");
            if let Some(uid) = self.uid {
                nix::unistd::chown(
                    file,
                    Some(nix::unistd::Uid::from_raw(uid)),
                    Some(nix::unistd::Gid::from_raw(uid)),
                )
                .expect("chown the server's certificate and key");
            }
        }
        let append = |file: &str, text: &str, first: bool| {
            let path = self.data.join(file);
            let old = std::fs::read_to_string(&path).expect("a configuration file");
            let new = if first {
                format!("{text}{old}")
            } else {
                format!("{old}{text}")
            };
            std::fs::write(&path, new).expect("writing a configuration file");
        };
        append(
            "postgresql.conf",
            "\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n",
            false,
        );
        // First match wins: a TCP connection without TLS is refused before any other line.
        append("pg_hba.conf", "hostnossl all all all reject\n", true);
        let root = self.dir.path().join("root.pem");
        std::fs::copy(&cert, &root).expect("copying the certificate");
        self.restart();
        root
    }

    /// The TCP port the server listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's password.
    pub fn superuser_password(&self) -> &str {
        &self.superuser_password
    }

    /// The directory of the server's programs (`psql`, `pg_ctl`, …).
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The cluster's data directory (its `pg_hba.conf` among it).
    pub fn data(&self) -> &Path {
        &self.data
    }

    /// The directory the cluster's files are in (its data directory and its log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs `sql` with `psql` as the superuser on `database` over TCP; its output (tuples
    /// only, unaligned). Panics when psql fails.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let output = self.psql_as(SUPERUSER, &self.superuser_password, database, sql);
        check(&output, &format!("psql {sql}"));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Runs a script of any length with `psql` as the superuser on `database` over TCP, fed
    /// on its standard input (each statement its own transaction). Panics when psql fails.
    pub fn psql_script(&self, database: &str, script: &str) {
        use std::io::Write as _;
        let mut child = Command::new(self.bin.join("psql"))
            .env_clear()
            .env("PGPASSWORD", &self.superuser_password)
            .env("PATH", "/usr/bin:/bin")
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", SUPERUSER, "-d", database, "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("running psql");
        let mut stdin = child.stdin.take().expect("psql's stdin");
        let script = script.to_owned();
        let writer = std::thread::spawn(move || stdin.write_all(script.as_bytes()));
        let output = child.wait_with_output().expect("waiting for psql");
        writer
            .join()
            .expect("the writer")
            .expect("writing the script");
        check(&output, "psql script");
    }

    /// Runs `sql` with `psql` as `user` (with `password`) on `database` over TCP; the whole
    /// output, success or not.
    pub fn psql_as(&self, user: &str, password: &str, database: &str, sql: &str) -> Output {
        Command::new(self.bin.join("psql"))
            .env_clear()
            .env("PGPASSWORD", password)
            .env("PATH", "/usr/bin:/bin")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", user, "-d", database, "-c", sql])
            .output()
            .expect("running psql")
    }

    /// A server binary's command, run as the cluster's user with a clean environment.
    fn server_command(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        command
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LC_ALL", "C")
            .current_dir(self.dir.path());
        if let Some(uid) = self.uid {
            command.uid(uid).gid(uid);
        }
        command
    }
}

/// A database of a [`PgCluster`] with a schema the caller gives, made by the superuser, and a
/// role that logs in with a password kept in a private file (mode 0600): what sf connects as.
pub struct PgDatabase {
    /// The database's name.
    pub name: String,
    /// The role's name.
    pub role: String,
    /// The file holding the role's password.
    pub password_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl PgDatabase {
    /// The role's password.
    pub fn password(&self) -> String {
        std::fs::read_to_string(&self.password_file)
            .expect("the password file")
            .trim()
            .to_owned()
    }
}

impl PgCluster {
    /// A new database holding `schema` (SQL run by the superuser, in which `:"sf_role"` names
    /// the new role, as psql's `-v sf_role=…` would) and a new login role.
    pub fn database_with(&self, schema: &str) -> PgDatabase {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let name = format!("sf_{}_{n}", std::process::id());
        let role = format!("sf_writer_{}_{n}", std::process::id());
        let password = format!("secret-{n}-{}", std::process::id());
        self.psql("postgres", &format!("CREATE DATABASE {name}"));
        self.psql(
            "postgres",
            &format!("CREATE ROLE {role} LOGIN PASSWORD '{password}'"),
        );
        self.psql(
            &name,
            &schema.replace(":\"sf_role\"", &format!("\"{role}\"")),
        );
        let dir = tempfile::tempdir().expect("temporary directory");
        let password_file = dir.path().join("password");
        std::fs::write(&password_file, format!("{password}\n")).expect("password file");
        std::fs::set_permissions(&password_file, std::fs::Permissions::from_mode(0o600))
            .expect("chmod the password file");
        PgDatabase {
            name,
            role,
            password_file,
            _dir: dir,
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What stops a cluster and removes its directory once the process that started it has ended
/// (or its [`PgCluster`] is dropped): two detached shell processes, chained by pipes.
///
/// - The stopper, run as the cluster's user (as [`PgCluster::server_command`] runs the
///   server's programs: `pg_ctl` refuses root), reads its standard input until end of file,
///   then runs `pg_ctl stop -m immediate -w` on the data directory and exits. The write end
///   of its standard input is held by this process alone (close-on-exec, so no child of the
///   test inherits it): the kernel closes it when the process ends, however it ends, and
///   when the [`PgCluster`] drops. No polling of a pid, so no pid that could be reused.
/// - The remover, run as the test's user (who can remove whatever the TempDir could, root's
///   files included), reads the stopper's standard output until end of file, which comes
///   when the stopper exits, and then removes the directory.
///
/// Both start sessions of their own (`setsid`): a harness that kills the test's process
/// group on a timeout (nextest does) does not kill them. Their standard output and error
/// are /dev/null or their own pipe, never the test's: a harness waits for every holder of
/// the test's output pipes to close them.
///
/// A child made by `fork` without `exec` would hold the write end too, and the cluster
/// would be stopped only when that child also ended; the tests do not fork so.
struct Reaper {
    alarm: Option<std::io::PipeWriter>,
    processes: Vec<Child>,
}

/// The stopper's script: `$1` is `pg_ctl`, `$2` the data directory. Nothing is ever written
/// to its standard input: the loop ends at end of file. pg_ctl fails, harmlessly, when the
/// server is stopped already or its directory gone. The shell exits only after pg_ctl has,
/// and with it the last holder of the remover's pipe.
const STOPPER: &str = r#"while read -r line; do :; done
"$1" stop -D "$2" -m immediate -w -t 60 >/dev/null 2>&1
exit 0"#;

/// The remover's script: `$1` is the cluster's directory.
const REMOVER: &str = r#"while read -r line; do :; done
exec rm -rf -- "$1""#;

impl Reaper {
    fn start(bin: &Path, data: &Path, dir: &Path, uid: Option<u32>) -> Self {
        let (alarm_read, alarm) = std::io::pipe().expect("a pipe for the cluster's stopper");
        let (stopped_read, stopped) = std::io::pipe().expect("a pipe for the cluster's remover");
        let remover = detached_shell(REMOVER)
            .arg(dir)
            .stdin(stopped_read)
            .spawn()
            .expect("starting the cluster's remover");
        let mut command = detached_shell(STOPPER);
        command
            .arg(bin.join("pg_ctl"))
            .arg(data)
            .env("LC_ALL", "C")
            .stdin(alarm_read)
            .stdout(stopped);
        if let Some(uid) = uid {
            command.uid(uid).gid(uid);
        }
        let stopper = command.spawn().expect("starting the cluster's stopper");
        // The Command holds this process's copy of the remover's pipe: once it is gone, the
        // stopper holds the write end alone and its exit is the remover's end of file.
        drop(command);
        Self {
            alarm: Some(alarm),
            processes: vec![stopper, remover],
        }
    }
}

impl Drop for Reaper {
    /// Wakes the processes and reaps them (they find the cluster stopped and its directory
    /// removed, and end at once), so that no exited child lingers in the test process.
    fn drop(&mut self) {
        drop(self.alarm.take());
        for process in &mut self.processes {
            let _ = process.wait();
        }
    }
}

/// `sh -c script` in a session of its own, with a clean environment, `/` as its directory
/// and /dev/null as its input and output (the caller gives it its pipes).
fn detached_shell(script: &str) -> Command {
    let mut command = Command::new("/bin/sh");
    command
        .args(["-c", script, "sf-pg-reaper"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: setsid(2) is one, and turning its error into an
    // io::Error (an OS error code) does not allocate.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    command
}

/// The newest installed server's binaries (`/usr/lib/postgresql/<major>/bin`).
fn server_binaries() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(POSTGRESQL_LIB)
        .unwrap_or_else(|error| {
            panic!(
                "PostgreSQL's server binaries are not installed ({POSTGRESQL_LIB}: {error}); \
                 install Debian's postgresql package (.ci/run does)"
            )
        })
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let major = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((major, bin))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, bin)| bin)
        .unwrap_or_else(|| panic!("no PostgreSQL server binaries under {POSTGRESQL_LIB}"))
}

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port on 127.0.0.1")
}

fn check(output: &Output, what: &str) {
    assert!(
        output.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_starts_answers_survives_a_restart_and_refuses_a_wrong_password() {
        let mut cluster = PgCluster::start();
        assert_eq!(cluster.psql("postgres", "select 1 + 1"), "2");
        cluster.psql(
            "postgres",
            "create table kept (n int); insert into kept values (7)",
        );
        let before = cluster.port();
        cluster.restart();
        assert!(cluster.port() > 0 && before > 0);
        assert_eq!(cluster.psql("postgres", "select n from kept"), "7");
        let wrong = cluster.psql_as(SUPERUSER, "not-the-password", "postgres", "select 1");
        assert!(!wrong.status.success());
        assert!(
            String::from_utf8_lossy(&wrong.stderr).contains("password authentication failed"),
            "{wrong:?}"
        );
        let data = cluster.dir().join("data");
        drop(cluster);
        assert!(!data.exists(), "the cluster's files are removed");
    }

    /// Set in the environment of a run of this test binary as [`CHILD`].
    const CHILD_ENV: &str = "SF_TEST_PG_STATIC_CHILD";
    /// The child test's name.
    const CHILD: &str = "postgres::tests::a_static_cluster_in_a_child";

    /// The child: does nothing unless [`CHILD_ENV`] is set; then starts a cluster held in a
    /// static, as a test binary shares one, prints its postmaster's pid and its directory,
    /// waits for the end of its standard input (the parent has seen the server run) and
    /// returns: the process exits without dropping the static. Or it is killed waiting.
    #[test]
    fn a_static_cluster_in_a_child() {
        static CLUSTER: std::sync::OnceLock<PgCluster> = std::sync::OnceLock::new();
        if std::env::var_os(CHILD_ENV).is_none() {
            return;
        }
        let cluster = CLUSTER.get_or_init(PgCluster::start);
        let pid_file = std::fs::read_to_string(cluster.dir().join("data/postmaster.pid"))
            .expect("the running server's postmaster.pid");
        let pid = pid_file.lines().next().expect("the postmaster's pid");
        println!("CLUSTER {pid} {}", cluster.dir().display());
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    }

    /// A run of [`CHILD`] in a process group of its own, killed (the whole group) and reaped
    /// when dropped unless it was reaped already: a failing test leaves no child waiting.
    struct ChildRun(Option<std::process::Child>);

    impl ChildRun {
        /// Kills the child's group with SIGKILL unless `only_wait`, and reaps the child.
        fn end(&mut self, only_wait: bool) -> std::process::ExitStatus {
            let mut child = self.0.take().expect("a child not reaped yet");
            if !only_wait {
                // Before the reap, so the group's id cannot have been reused.
                let group = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("a pid"));
                let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
            }
            child.wait().expect("reaping the child")
        }
    }

    impl Drop for ChildRun {
        fn drop(&mut self) {
            if self.0.is_some() {
                self.end(false);
            }
        }
    }

    /// Runs [`CHILD`]; returns it and the postmaster's pid and the cluster's directory it
    /// printed. Dropping the child's standard input lets it exit.
    fn start_child() -> (ChildRun, std::process::ChildStdin, i32, PathBuf) {
        use std::io::BufRead as _;
        let mut run = ChildRun(Some(
            Command::new(std::env::current_exe().expect("the test binary"))
                .args(["--exact", CHILD, "--nocapture", "--test-threads", "1"])
                .env(CHILD_ENV, "1")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .process_group(0)
                .spawn()
                .expect("running the child"),
        ));
        let stdin = run.0.as_mut().and_then(|child| child.stdin.take());
        let stdin = stdin.expect("piped");
        let stdout = run.0.as_mut().and_then(|child| child.stdout.take());
        let mut stdout = std::io::BufReader::new(stdout.expect("piped"));
        let mut line = String::new();
        loop {
            line.clear();
            let read = stdout.read_line(&mut line).expect("the child's output");
            if read == 0 {
                panic!("the child printed no cluster: {}", run.end(true));
            }
            // libtest prints "test NAME ... " on the same line first.
            if let Some(at) = line.find("CLUSTER ") {
                let (pid, dir) = line[at + 8..]
                    .trim()
                    .split_once(' ')
                    .expect("CLUSTER <pid> <dir>");
                let pid = pid.parse().expect("a pid");
                // The rest of the output is drained so that the child never blocks on it.
                std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
                return (run, stdin, pid, PathBuf::from(dir));
            }
        }
    }

    /// The start time (in clock ticks since boot) of process `pid` while it runs: None when
    /// it is gone or a zombie (a zombie may never be reaped in a container whose init does
    /// not reap).
    fn running_since(pid: i32) -> Option<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command's name, in parentheses that it may itself contain: the state is
        // field 3 and the start time field 22.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        if matches!(fields.first(), Some(&("Z" | "X"))) {
            return None;
        }
        fields.get(19)?.parse().ok()
    }

    /// Waits (bounded) until the postmaster `pid`, which started at `since`, no longer runs
    /// and `dir` is gone; asserts both.
    fn assert_stopped_and_removed(pid: i32, since: u64, dir: &Path) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // A pid is compared with its start time: another process may take it after the
        // postmaster's end.
        let running = || running_since(pid) == Some(since);
        while (running() || dir.exists()) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert!(!running(), "the postmaster {pid} still runs");
        assert!(!dir.exists(), "{} is still there", dir.display());
    }

    #[test]
    fn a_static_cluster_is_stopped_and_removed_when_its_process_exits() {
        let (mut child, stdin, pid, dir) = start_child();
        let since = running_since(pid).expect("the postmaster runs while its process does");
        drop(stdin);
        let status = child.end(true);
        assert!(status.success(), "the child failed: {status}");
        assert_stopped_and_removed(pid, since, &dir);
    }

    /// As a harness ends a test on a timeout: SIGKILL to its whole process group, so no
    /// destructor and no exit handler runs.
    #[test]
    fn a_static_cluster_is_stopped_and_removed_when_its_process_group_is_killed() {
        let (mut child, _stdin, pid, dir) = start_child();
        let since = running_since(pid).expect("the postmaster runs while its process does");
        child.end(false);
        assert_stopped_and_removed(pid, since, &dir);
    }
}
