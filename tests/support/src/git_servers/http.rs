//! Smart HTTP on loopback: a small HTTP/1.1 server that runs `git http-backend` as a CGI
//! program for each request.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Stdio};
use std::sync::{Arc, Mutex};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use super::{LoopbackServer, git_command, kill_group, server_git, wait_unreaped};

/// The most a request's line and headers may take.
const HEAD_LIMIT: u64 = 64 * 1024;

/// The most a request's body may take (a push of a large repository is a few hundred MiB).
const BODY_LIMIT: usize = 2 * 1024 * 1024 * 1024;

/// What [`HttpGit`] saw of one request, for tests that check which HTTP features a client
/// used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequestRecord {
    /// `GET` or `POST`.
    pub method: String,
    /// The request target (path and query).
    pub target: String,
    /// The `Content-Encoding` of the body (`gzip` when Git compressed it).
    pub content_encoding: Option<String>,
    /// Whether the body came chunked (`Transfer-Encoding: chunked`), as Git sends a body
    /// larger than `http.postBuffer`.
    pub chunked: bool,
    /// The body's length as received (after removing the chunked framing).
    pub body_len: usize,
    /// The status the response was given (from the CGI's `Status:`; 200 without one).
    pub status: u16,
}

/// Smart HTTP over a project root: `http://127.0.0.1:<port>/<name>.git` is
/// `<project_root>/<name>.git`, with push enabled.
///
/// One thread per connection, HTTP/1.1 with keep-alive. A request body is read whole,
/// whether sized (`Content-Length`) or chunked (decoded here), then handed to
/// `git http-backend` on stdin with its length in `CONTENT_LENGTH`; a gzipped body is passed
/// as it came, with `HTTP_CONTENT_ENCODING=gzip`, for the backend to inflate. Every request
/// header reaches the CGI as `HTTP_<NAME>` (so `Git-Protocol` does, for protocol v2), with
/// `GIT_PROJECT_ROOT`, `GIT_HTTP_EXPORT_ALL=1`, `REQUEST_METHOD`, `PATH_INFO`,
/// `QUERY_STRING`, `CONTENT_TYPE`, `REMOTE_USER`, `REMOTE_ADDR`, `GATEWAY_INTERFACE` and
/// `SERVER_PROTOCOL`. The CGI's `Status:` becomes the status line, and its output is sent
/// chunked as it comes (so a client sees progress, and a backend that stops writing is a
/// server that stops answering). When the CGI fails (exits non-zero or is killed, as
/// [`super::BareRemote::accept_then_drop`] makes `receive-pack` do) the response is cut off
/// without its last chunk and the connection closed, so the client sees a truncated
/// transfer rather than a complete response.
///
/// Each CGI runs in a process group of its own; dropping the guard stops accepting, closes
/// every connection, kills (SIGKILL) every CGI group still running, and joins every thread.
pub struct HttpGit {
    server: LoopbackServer,
    requests: Arc<Mutex<Vec<HttpRequestRecord>>>,
    log: Arc<Mutex<String>>,
}

#[derive(Default)]
struct Groups {
    /// Set when the server stops: no CGI is started after that.
    stopped: bool,
    /// The process group of each CGI started and not yet reaped.
    running: HashSet<i32>,
}

struct Context {
    project_root: PathBuf,
    port: Mutex<u16>,
    /// The CGIs started and not yet reaped.
    groups: Mutex<Groups>,
    requests: Arc<Mutex<Vec<HttpRequestRecord>>>,
    log: Arc<Mutex<String>>,
}

impl HttpGit {
    /// Serves every repository under `project_root`.
    pub fn start(project_root: &Path) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::new(Mutex::new(String::new()));
        let context = Arc::new(Context {
            project_root: project_root.to_path_buf(),
            port: Mutex::new(0),
            groups: Mutex::new(Groups::default()),
            requests: Arc::clone(&requests),
            log: Arc::clone(&log),
        });
        let handler = {
            let context = Arc::clone(&context);
            Arc::new(move |stream: TcpStream| serve_connection(stream, &context))
        };
        let on_stop = {
            let context = Arc::clone(&context);
            Box::new(move || {
                // Under the lock: a group is removed (under it too) before its leader is
                // reaped, so every id here is still a live group's; and once `stopped` is
                // set no handler starts another.
                let mut groups = context.groups.lock().expect("groups lock");
                groups.stopped = true;
                for group in groups.running.iter() {
                    let _ = killpg(Pid::from_raw(*group), Signal::SIGKILL);
                }
            })
        };
        let server = LoopbackServer::start(handler, on_stop);
        *context.port.lock().expect("port lock") = server.port();
        Self {
            server,
            requests,
            log,
        }
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// `http://127.0.0.1:<port>/<repo_name>.git`.
    pub fn url(&self, repo_name: &str) -> String {
        format!("http://127.0.0.1:{}/{repo_name}.git", self.port())
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<HttpRequestRecord> {
        self.requests.lock().expect("requests lock").clone()
    }

    /// Everything the CGIs wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log lock").clone()
    }
}

struct Request {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
    close: bool,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

fn serve_connection(stream: TcpStream, context: &Context) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut writer = stream;
    let peer = writer
        .peer_addr()
        .map(|addr| addr.ip().to_string())
        .unwrap_or_else(|_| "127.0.0.1".to_owned());
    loop {
        let request = match read_head(&mut reader) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(message) => {
                let _ = respond_plain(&mut writer, "400 Bad Request", &message);
                return;
            }
        };
        if request
            .header("Expect")
            .is_some_and(|value| value.eq_ignore_ascii_case("100-continue"))
            && writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").is_err()
        {
            return;
        }
        let chunked = request
            .header("Transfer-Encoding")
            .is_some_and(|value| value.to_ascii_lowercase().contains("chunked"));
        let body = match read_body(&mut reader, &request, chunked) {
            Ok(body) => body,
            Err(message) => {
                let _ = respond_plain(&mut writer, "400 Bad Request", &message);
                return;
            }
        };
        let (status, keep) = run_cgi(context, &request, &body, &peer, &mut writer);
        context
            .requests
            .lock()
            .expect("requests lock")
            .push(HttpRequestRecord {
                method: request.method.clone(),
                target: request.target.clone(),
                content_encoding: request.header("Content-Encoding").map(str::to_owned),
                chunked,
                body_len: body.len(),
                status,
            });
        if !keep || request.close {
            return;
        }
    }
}

/// One line, CRLF or LF, without its end; `None` at EOF before any byte.
fn read_line(reader: &mut impl BufRead, limit: u64) -> Result<Option<String>, String> {
    let mut line = Vec::new();
    reader
        .take(limit)
        .read_until(b'\n', &mut line)
        .map_err(|error| format!("reading: {error}"))?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err("a line too long or cut off".to_owned());
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| "a line that is not UTF-8".to_owned())
}

fn read_head(reader: &mut impl BufRead) -> Result<Option<Request>, String> {
    let Some(request_line) = read_line(reader, HEAD_LIMIT)? else {
        return Ok(None);
    };
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(format!("a bad request line: {request_line:?}"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(format!("an unsupported version: {version:?}"));
    }
    let mut headers = Vec::new();
    let mut taken = request_line.len() as u64;
    loop {
        let line = read_line(reader, HEAD_LIMIT.saturating_sub(taken).max(1))?
            .ok_or_else(|| "the head cut off".to_owned())?;
        taken += line.len() as u64 + 2;
        if taken > HEAD_LIMIT {
            return Err("a head too large".to_owned());
        }
        if line.is_empty() {
            break;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("a bad header: {line:?}"))?;
        headers.push((name.trim().to_owned(), value.trim().to_owned()));
    }
    let connection = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("Connection"))
        .map(|(_, value)| value.to_ascii_lowercase());
    let close = match connection.as_deref() {
        Some(value) if value.contains("close") => true,
        Some(value) if value.contains("keep-alive") => false,
        _ => version == "HTTP/1.0",
    };
    Ok(Some(Request {
        method: method.to_owned(),
        target: target.to_owned(),
        headers,
        close,
    }))
}

fn read_body(
    reader: &mut impl BufRead,
    request: &Request,
    chunked: bool,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    if chunked {
        loop {
            let line = read_line(reader, 1024)?.ok_or_else(|| "the body cut off".to_owned())?;
            let size = line.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size, 16)
                .map_err(|_| format!("a bad chunk size: {line:?}"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !read_line(reader, HEAD_LIMIT)?
                    .ok_or_else(|| "the trailers cut off".to_owned())?
                    .is_empty()
                {}
                return Ok(body);
            }
            if body.len() + size > BODY_LIMIT {
                return Err("a body too large".to_owned());
            }
            let start = body.len();
            body.resize(start + size, 0);
            reader
                .read_exact(&mut body[start..])
                .map_err(|error| format!("reading a chunk: {error}"))?;
            let end = read_line(reader, 2)?.unwrap_or_default();
            if !end.is_empty() {
                return Err("a chunk not ended by CRLF".to_owned());
            }
        }
    }
    if let Some(length) = request.header("Content-Length") {
        let length: usize = length
            .parse()
            .map_err(|_| format!("a bad Content-Length: {length:?}"))?;
        if length > BODY_LIMIT {
            return Err("a body too large".to_owned());
        }
        body.resize(length, 0);
        reader
            .read_exact(&mut body)
            .map_err(|error| format!("reading the body: {error}"))?;
    }
    Ok(body)
}

fn respond_plain(writer: &mut TcpStream, status: &str, message: &str) -> std::io::Result<()> {
    let body = format!("{message}\n");
    write!(
        writer,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// `%XX` sequences decoded (a malformed one is kept as it is).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%'
            && let Some(hex) = text.get(at + 1..at + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            at += 3;
            continue;
        }
        out.push(bytes[at]);
        at += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs the CGI for `request` and streams its response; returns the status sent and whether
/// the connection may carry another request.
fn run_cgi(
    context: &Context,
    request: &Request,
    body: &[u8],
    peer: &str,
    writer: &mut TcpStream,
) -> (u16, bool) {
    let (path, query) = request
        .target
        .split_once('?')
        .unwrap_or((request.target.as_str(), ""));
    let port = *context.port.lock().expect("port lock");
    let mut command = git_command(server_git());
    command
        .arg("http-backend")
        .current_dir(&context.project_root)
        .env("GIT_PROJECT_ROOT", &context.project_root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("SERVER_PROTOCOL", "HTTP/1.1")
        .env("SERVER_SOFTWARE", "sf-test-support")
        .env("SERVER_NAME", "127.0.0.1")
        .env("SERVER_PORT", port.to_string())
        .env("REQUEST_METHOD", &request.method)
        .env("REQUEST_URI", &request.target)
        .env("SCRIPT_NAME", "")
        .env("PATH_INFO", percent_decode(path))
        .env("QUERY_STRING", query)
        .env("REMOTE_USER", "sf-test")
        .env("REMOTE_ADDR", peer);
    if request.method != "GET" || !body.is_empty() {
        command.env("CONTENT_LENGTH", body.len().to_string());
    }
    for (name, value) in &request.headers {
        let lower = name.to_ascii_lowercase();
        match lower.as_str() {
            "content-type" => {
                command.env("CONTENT_TYPE", value);
            }
            // The body the CGI reads is whole and unchunked: these described the wire.
            "content-length" | "transfer-encoding" | "expect" | "connection" => {}
            _ => {
                let variable = format!("HTTP_{}", name.to_ascii_uppercase().replace('-', "_"));
                command.env(variable, value);
            }
        }
    }
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Registered before the spawn returns to anyone who could reap it.
    let mut groups = context.groups.lock().expect("groups lock");
    if groups.stopped {
        drop(groups);
        let _ = respond_plain(writer, "503 Service Unavailable", "the server is stopping");
        return (503, false);
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            drop(groups);
            let _ = respond_plain(
                writer,
                "500 Internal Server Error",
                &format!("spawning git http-backend: {error}"),
            );
            return (500, false);
        }
    };
    let pid = i32::try_from(child.id()).expect("a pid fits in i32");
    groups.running.insert(pid);
    drop(groups);

    let mut stdin = child.stdin.take().expect("the CGI's stdin");
    let input = body.to_vec();
    let feeder = std::thread::spawn(move || {
        // A CGI that exits without reading all of it is not an error here.
        let _ = stdin.write_all(&input);
    });
    let mut stderr = child.stderr.take().expect("the CGI's stderr");
    let log = Arc::clone(&context.log);
    let logger = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        log.lock()
            .expect("log lock")
            .push_str(&String::from_utf8_lossy(&text));
    });
    let stdout = child.stdout.take().expect("the CGI's stdout");
    let streamed = stream_response(BufReader::new(stdout), request, writer);
    if streamed.is_err() {
        // The client is gone (or the CGI wrote no valid head): stop the CGI.
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
    // Waits for the CGI's own exit (without reaping it), then kills and waits out what is
    // left of its group (nothing a CGI starts outlives its request), then forgets the
    // group, then reaps: a group id in `groups` is never a reaped (reusable) pid.
    wait_unreaped(Pid::from_raw(pid));
    kill_group(Pid::from_raw(pid));
    context
        .groups
        .lock()
        .expect("groups lock")
        .running
        .remove(&pid);
    let succeeded = child.wait().map(|status| status.success()).unwrap_or(false);
    let _ = feeder.join();
    let _ = logger.join();
    match streamed {
        Ok(status) if succeeded => {
            let keep = writer.write_all(b"0\r\n\r\n").is_ok();
            (status, keep)
        }
        // Cut off: no last chunk, and the connection is closed by the caller.
        Ok(status) => (status, false),
        Err(Some(status)) => (status, false),
        Err(None) => (0, false),
    }
}

/// Reads the CGI's head, sends the response's head, then sends its output chunked until
/// EOF (not the last chunk). `Err` when the CGI's head was bad (a 502 was sent) or the
/// client went away, with the status if one was sent.
fn stream_response(
    mut stdout: BufReader<ChildStdout>,
    request: &Request,
    writer: &mut TcpStream,
) -> Result<u16, Option<u16>> {
    let mut status = "200 OK".to_owned();
    let mut headers = String::new();
    loop {
        match read_line(&mut stdout, HEAD_LIMIT) {
            Ok(Some(line)) if line.is_empty() => break,
            Ok(Some(line)) => {
                let Some((name, value)) = line.split_once(':') else {
                    let _ = respond_plain(writer, "502 Bad Gateway", "a bad CGI header");
                    return Err(Some(502));
                };
                let value = value.trim();
                match name.trim().to_ascii_lowercase().as_str() {
                    "status" => status = value.to_owned(),
                    "content-length" | "transfer-encoding" | "connection" => {}
                    _ => headers.push_str(&format!("{}: {value}\r\n", name.trim())),
                }
            }
            _ => {
                let _ = respond_plain(writer, "502 Bad Gateway", "the CGI wrote no head");
                return Err(Some(502));
            }
        }
    }
    let code = status
        .split(' ')
        .next()
        .and_then(|code| code.parse::<u16>().ok())
        .unwrap_or(500);
    let connection = if request.close {
        "Connection: close\r\n"
    } else {
        ""
    };
    let head =
        format!("HTTP/1.1 {status}\r\n{headers}{connection}Transfer-Encoding: chunked\r\n\r\n");
    writer.write_all(head.as_bytes()).map_err(|_| Some(code))?;
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match stdout.read(&mut buffer) {
            Ok(0) | Err(_) => return Ok(code),
            Ok(n) => n,
        };
        let mut chunk = format!("{n:x}\r\n").into_bytes();
        chunk.extend_from_slice(&buffer[..n]);
        chunk.extend_from_slice(b"\r\n");
        writer.write_all(&chunk).map_err(|_| Some(code))?;
    }
}
