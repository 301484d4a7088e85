//! A throwaway PostgreSQL cluster for tests: `initdb` into a private temporary directory,
//! `pg_ctl start` on 127.0.0.1 on a port the kernel chose, run as an unprivileged user
//! (`nobody` when the tests run as root: PostgreSQL refuses to run as root), a superuser
//! whose password only the test knows, and `pg_ctl stop -m immediate` when the guard drops.
//! It never skips: when the binaries are missing or the server does not start, it panics
//! with what failed.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Where Debian installs the server binaries, one directory per major version.
const POSTGRESQL_LIB: &str = "/usr/lib/postgresql";
/// The uid and gid the server runs as when the tests run as root.
const NOBODY: u32 = 65534;
/// How many free ports are tried before giving up (another process may take one between the
/// check and the server's bind).
const PORT_ATTEMPTS: usize = 5;

/// A running cluster. Dropping it stops the server (immediate shutdown) and removes its files.
pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    uid: Option<u32>,
    superuser_password: String,
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
        let mut cluster = Self {
            dir,
            bin,
            data,
            port: 0,
            uid,
            superuser_password,
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
}
