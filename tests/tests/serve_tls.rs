//! `sf serve` over TLS through the binary, with certificates made by the real `openssl` and
//! requests made by the real `curl`: with `tls_cert` and `tls_key` it says https://, answers
//! the API inside TLS to a client that trusts its certificate and to no other, and refuses
//! plain HTTP; an address beyond loopback is served with TLS and refused without it; a key
//! others can read, or a key that is not the certificate's, stops it before it listens; a
//! client that never says hello holds up no one else and is dropped after the handshake's
//! time limit.

mod land_support;
mod serve_support;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serve_support::{Server, TOKENS, Team};

/// The server's self-signed certificate (for 127.0.0.1) and its key, and an unrelated CA.
struct Certificates {
    _dir: tempfile::TempDir,
    /// The server's certificate, PEM.
    cert: PathBuf,
    /// Its private key, PEM, mode 0600.
    key: PathBuf,
    /// Another self-signed certificate, which signed nothing of the server's.
    other_ca: PathBuf,
    /// That certificate's key.
    other_key: PathBuf,
}

impl Certificates {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        let (cert, key) = (at("cert.pem"), at("key.pem"));
        let (other_ca, other_key) = (at("other-ca.pem"), at("other-ca-key.pem"));
        self_signed(&cert, &key, "sf serve test", "subjectAltName=IP:127.0.0.1");
        self_signed(
            &other_ca,
            &other_key,
            "another CA",
            "subjectAltName=IP:127.0.0.1",
        );
        for key in [&key, &other_key] {
            std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        Self {
            _dir: dir,
            cert,
            key,
            other_ca,
            other_key,
        }
    }
}

/// `openssl req -x509`: a self-signed P-256 certificate for `name` with the extension
/// `extension`, and its unencrypted key.
fn self_signed(cert: &Path, key: &Path, name: &str, extension: &str) {
    let output = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .arg("ec_paramgen_curve:prime256v1")
        .args(["-nodes", "-days", "2", "-subj"])
        .arg(format!("/CN={name}"))
        .arg("-addext")
        .arg(extension)
        .arg("-keyout")
        .arg(key)
        .arg("-out")
        .arg(cert)
        .output()
        .unwrap();
    assert!(output.status.success(), "openssl req: {output:?}");
}

/// The team's serve.toml (tokens mode 0600, listening on `listen`) with `tls_cert` and
/// `tls_key` set to `cert` and `key`.
fn config_with_tls(team: &Team, listen: &str, cert: &Path, key: &Path) -> PathBuf {
    let config = team.config(0o600, listen);
    let text = std::fs::read_to_string(&config).unwrap();
    let tls = format!("[serve]\ntls_cert = {cert:?}\ntls_key = {key:?}\n");
    std::fs::write(&config, text.replacen("[serve]\n", &tls, 1)).unwrap();
    config
}

/// `sf --config CONFIG serve`, expected to stop before it listens: answers its stderr.
fn refused(team: &Team, config: &Path) -> String {
    let output = sf_tests::plugins::sf()
        .current_dir(&team.work.dir)
        .arg("--config")
        .arg(config)
        .arg("serve")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(output.stdout.is_empty(), "it never listened: {output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
    stderr
}

/// What curl got.
#[derive(Debug)]
struct Answer {
    /// The HTTP status (0 when there was none).
    status: u16,
    /// The HTTP version spoken ("1.1").
    version: String,
    /// The body.
    body: String,
    /// curl's own output.
    output: Output,
}

/// `curl` of `https://127.0.0.1:PORT{path}` trusting only `ca`, with the first client's
/// token when `token`, and `extra` arguments.
fn curl(ca: &Path, port: u16, path: &str, token: bool, extra: &[&str]) -> Answer {
    curl_url(ca, &format!("https://127.0.0.1:{port}{path}"), token, extra)
}

/// [`curl`] of `url`.
fn curl_url(ca: &Path, url: &str, token: bool, extra: &[&str]) -> Answer {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    let mut command = Command::new("curl");
    // -q first: no ~/.curlrc; no proxy from the environment between curl and the server.
    command
        .args(["-q", "--silent", "--show-error", "--noproxy", "*"])
        .args(["--max-time", "30", "--cacert"])
        .arg(ca)
        .arg("--output")
        .arg(&body)
        .args(["--write-out", "%{http_code} %{http_version}"]);
    if token {
        command
            .arg("--header")
            .arg(format!("Authorization: Bearer {}", TOKENS[0].1));
    }
    let output = command.args(extra).arg(url).output().unwrap();
    let written = String::from_utf8_lossy(&output.stdout).into_owned();
    let (status, version) = written.split_once(' ').unwrap_or((&written, ""));
    Answer {
        status: status.parse().unwrap_or(0),
        version: version.to_owned(),
        body: std::fs::read_to_string(&body).unwrap_or_default(),
        output,
    }
}

/// Asserts that `body` is sf's error envelope with `code`.
fn assert_envelope(body: &str, code: &str) {
    let value: serde_json::Value =
        serde_json::from_str(body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    assert_eq!(value["ok"], false, "{value}");
    assert_eq!(value["error"]["code"], code, "{value}");
}

#[test]
fn with_a_certificate_it_serves_the_api_inside_tls_to_clients_that_trust_it_only() {
    let team = Team::new();
    let certificates = Certificates::new();
    let ca = &certificates.cert;
    let config = config_with_tls(&team, "127.0.0.1:0", ca, &certificates.key);
    let server = Server::start_tls(&team.work, &config);
    let port = server.address.port();
    assert!(server.address.ip().is_loopback(), "{}", server.address);

    let metrics = curl(ca, port, "/metrics", false, &[]);
    assert_eq!(metrics.status, 200, "{metrics:?}");
    assert_eq!(metrics.version, "1.1", "ALPN chose HTTP/1.1: {metrics:?}");
    assert!(metrics.body.contains("sf_serve_queue_depth"), "{metrics:?}");

    let proposals = "/v1/repositories/te/proposals";
    let bad = curl(ca, port, proposals, true, &["--data-binary", "not json"]);
    assert_eq!(bad.status, 400, "{bad:?}");
    assert_envelope(&bad.body, "invalid-input");
    let missing = curl(ca, port, "/v1/proposals/none", true, &[]);
    assert_eq!(missing.status, 404, "{missing:?}");
    assert_envelope(&missing.body, "not-found");
    let anonymous = curl(ca, port, "/v1/proposals/none", false, &[]);
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    assert_envelope(&anonymous.body, "unauthorized");

    // A client that trusts another CA refuses the server's certificate (curl's 60: the peer's
    // certificate cannot be verified), and so never sends its token.
    let untrusting = curl(&certificates.other_ca, port, "/metrics", true, &[]);
    assert_eq!(untrusting.output.status.code(), Some(60), "{untrusting:?}");
    assert_eq!(untrusting.status, 0, "{untrusting:?}");

    // Plain HTTP to the TLS port gets no HTTP answer at all.
    let plain = plain_http(server.address, "/metrics");
    assert!(
        !plain.starts_with(b"HTTP/"),
        "plain HTTP was answered: {}",
        String::from_utf8_lossy(&plain)
    );
    let plain = curl_url(ca, &format!("http://127.0.0.1:{port}/metrics"), false, &[]);
    assert_ne!(plain.status, 200, "{plain:?}");
    assert!(!plain.output.status.success(), "{plain:?}");

    // The refusals above did not stop it.
    assert_eq!(curl(ca, port, "/metrics", false, &[]).status, 200);
}

/// Sends a plain HTTP request to `address`; answers whatever came back before the server
/// closed the connection (or 30 seconds passed).
fn plain_http(address: SocketAddr, path: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    response
}

#[test]
fn an_address_beyond_loopback_is_served_with_tls_and_refused_without() {
    let team = Team::new();
    let certificates = Certificates::new();
    let config = team.config(0o600, "0.0.0.0:0");
    let stderr = refused(&team, &config);
    for named in [
        "[serve] listen",
        "not a loopback address",
        "tls_cert",
        "tls_key",
    ] {
        assert!(stderr.contains(named), "{named}: {stderr}");
    }

    let config = config_with_tls(&team, "0.0.0.0:0", &certificates.cert, &certificates.key);
    let server = Server::start_tls(&team.work, &config);
    assert!(server.address.ip().is_unspecified(), "{}", server.address);
    let port = server.address.port();
    let metrics = curl(&certificates.cert, port, "/metrics", false, &[]);
    assert_eq!(metrics.status, 200, "{metrics:?}");
    let anonymous = curl(&certificates.cert, port, "/v1/proposals/none", false, &[]);
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
}

#[test]
fn a_key_others_can_read_or_a_key_of_another_certificate_stops_it_before_it_listens() {
    let team = Team::new();
    let certificates = Certificates::new();
    let (cert, key) = (&certificates.cert, &certificates.key);

    std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let stderr = refused(&team, &config_with_tls(&team, "127.0.0.1:0", cert, key));
    assert!(stderr.contains("[serve] tls_key"), "{stderr}");
    assert!(stderr.contains("mode 644"), "{stderr}");
    assert!(
        stderr.contains(&format!("chmod 600 {}", key.display())),
        "{stderr}"
    );
    std::fs::set_permissions(key, std::fs::Permissions::from_mode(0o600)).unwrap();

    // A symbolic link to the key: whoever can change the link chooses the key.
    let link = team.work.dir.join("key-link.pem");
    std::os::unix::fs::symlink(key, &link).unwrap();
    let stderr = refused(&team, &config_with_tls(&team, "127.0.0.1:0", cert, &link));
    assert!(stderr.contains("symbolic link"), "{stderr}");

    let other_key = &certificates.other_key;
    let stderr = refused(
        &team,
        &config_with_tls(&team, "127.0.0.1:0", cert, other_key),
    );
    assert!(
        stderr.contains("is not the key of tls_cert"),
        "a mismatch is named: {stderr}"
    );

    // The key given as the certificate: a file without a certificate.
    let stderr = refused(&team, &config_with_tls(&team, "127.0.0.1:0", key, key));
    assert!(stderr.contains("holds no certificate"), "{stderr}");

    let missing = team.work.dir.join("missing.pem");
    let stderr = refused(
        &team,
        &config_with_tls(&team, "127.0.0.1:0", cert, &missing),
    );
    assert!(stderr.contains("[serve] tls_key"), "{stderr}");
    assert!(stderr.contains("cannot be read"), "{stderr}");

    assert!(!team.work.dir.join("state").exists(), "no state was made");
}

#[test]
fn a_client_that_never_says_hello_holds_up_no_one_and_is_dropped_after_the_time_limit() {
    let team = Team::new();
    let certificates = Certificates::new();
    let config = config_with_tls(&team, "127.0.0.1:0", &certificates.cert, &certificates.key);
    let server = Server::start_tls(&team.work, &config);

    let connected = Instant::now();
    let mut silent = TcpStream::connect(server.address).unwrap();
    let metrics = curl(
        &certificates.cert,
        server.address.port(),
        "/metrics",
        false,
        &[],
    );
    assert_eq!(metrics.status, 200, "{metrics:?}");

    // The silent client was still connected while the other was served...
    silent.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let open = silent.read(&mut byte);
    assert!(
        matches!(&open, Err(error) if error.kind() == std::io::ErrorKind::WouldBlock),
        "still open, nothing sent: {open:?}"
    );

    // ...and is dropped once the handshake's time limit (10 s) has passed, well before the
    // 30 s a request's head may take.
    silent.set_nonblocking(false).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(25)))
        .unwrap();
    let closed = silent.read(&mut byte);
    let after = connected.elapsed();
    assert!(matches!(closed, Ok(0)), "closed by the server: {closed:?}");
    assert!(
        after >= Duration::from_secs(9) && after < Duration::from_secs(25),
        "dropped after {after:?}"
    );
}
