//! Hostile Git servers: real TCP servers on loopback that speak git:// or smart HTTP badly,
//! for tests of what a client must bound.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;

use super::{LoopbackServer, drain};

/// The object id every hostile advertisement names (no such object exists anywhere).
const FAKE_OID: &str = "5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f5f";

/// The capabilities advertised for `git-upload-pack`.
const UPLOAD_CAPABILITIES: &str = "multi_ack thin-pack side-band side-band-64k ofs-delta \
     shallow no-progress include-tag multi_ack_detailed object-format=sha1 agent=git/2.47.3";

/// The capabilities advertised for `git-receive-pack`.
const RECEIVE_CAPABILITIES: &str = "report-status report-status-v2 delete-refs \
     side-band-64k quiet atomic ofs-delta object-format=sha1 agent=git/2.47.3";

/// Which protocol a [`HostileServer`] speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// git:// (`git://127.0.0.1:<port>/<name>.git`): pkt-lines over TCP, after the client's
    /// request line.
    Git,
    /// Smart HTTP (`http://127.0.0.1:<port>/<name>.git`): the same pkt-lines as the body of
    /// an HTTP/1.1 response (`Connection: close`, the body ends when the connection does).
    Http,
}

/// How a [`HostileServer`] misbehaves. Each variant records what the real client does
/// against it (git 2.47.3 and 2.39.5 alike; asserted by this crate's `git_servers` tests,
/// which give a run that hangs 3 seconds before killing it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hostility {
    /// Accepts the connection, reads what the client sends, never writes a byte.
    ///
    /// `git ls-remote` and `git push` hang (until killed), printing nothing, on both
    /// protocols. On HTTP, curl's low-speed limit (`http.lowSpeedLimit`,
    /// `http.lowSpeedTime`) ends the run if configured; Git has nothing like it for git://.
    Silent,
    /// Answers with bytes that are not pkt-lines (`this is not a pkt-line\n`; on HTTP as
    /// the body of a `200` with the smart content type), then closes.
    ///
    /// `git ls-remote` and `git push` exit 128 at once, stderr `fatal: protocol error: bad
    /// line length character: this`, on both protocols.
    Malformed,
    /// Pkt-lines whose length claims 0xffff bytes (more than the 65520 Git allows), one
    /// after another for ever.
    ///
    /// git://: exit 128 at once, `fatal: protocol error: bad line length 65531`. HTTP: the
    /// client reads the whole advertisement response into memory before parsing it, so it
    /// hangs (until killed) with its memory growing, printing nothing.
    OverlongPktLine,
    /// A valid advertisement of `refs` refs (`refs/heads/sf-0000000000` …, all at one
    /// fake object id) then a flush; then it reads and never answers, so a push that gets
    /// past the advertisement waits for ever for its report.
    ///
    /// `git ls-remote` takes any size and prints every ref (200,000 refs, 13 MB, in under
    /// a second), exit 0: Git puts no bound on an advertisement. `git push` takes it whole,
    /// then hangs.
    OversizedAdvertisement {
        /// How many refs it lists (besides the first line's).
        refs: u64,
    },
    /// A valid advertisement that never ends: ref lines for ever, never a flush.
    ///
    /// `git ls-remote` and `git push` read it for ever (until killed), keeping every ref:
    /// the client's memory grows without bound (a peak RSS of 170–280 MiB after 3 seconds,
    /// in `git` on git://, in `git-remote-http` on HTTP). Nothing is printed.
    EndlessAdvertisement,
    /// A small, valid `receive-pack` advertisement (`refs/heads/main` at the fake id); once
    /// the client sends its commands, progress messages on side band 2 for ever, never a
    /// report. (To `upload-pack` requests it gives a small valid advertisement and closes.)
    ///
    /// `git ls-remote` succeeds. `git push` of a new ref sends its pack, then hangs (until
    /// killed), writing `remote: sf-test: still working <n>` lines to stderr without end
    /// (5–10 MB a second), its memory flat.
    EndlessPushProgress,
}

/// A TCP server on 127.0.0.1 that misbehaves as its [`Hostility`] says, in the git:// or
/// HTTP [`Protocol`], on every connection (one thread each). Dropping it stops accepting,
/// shuts every connection down, and joins every thread.
pub struct HostileServer {
    server: LoopbackServer,
    protocol: Protocol,
}

impl HostileServer {
    /// Starts a server misbehaving as `hostility` says.
    pub fn start(hostility: Hostility, protocol: Protocol) -> Self {
        let handler = Arc::new(move |stream: TcpStream| {
            let _ = serve(&stream, hostility, protocol);
            let _ = stream.shutdown(Shutdown::Both);
        });
        Self {
            server: LoopbackServer::start(handler, Box::new(|| {})),
            protocol,
        }
    }

    /// [`Hostility::Silent`].
    pub fn silent(protocol: Protocol) -> Self {
        Self::start(Hostility::Silent, protocol)
    }

    /// [`Hostility::Malformed`].
    pub fn malformed_advertisement(protocol: Protocol) -> Self {
        Self::start(Hostility::Malformed, protocol)
    }

    /// [`Hostility::OversizedAdvertisement`] with `refs` refs.
    pub fn oversized_advertisement(protocol: Protocol, refs: u64) -> Self {
        Self::start(Hostility::OversizedAdvertisement { refs }, protocol)
    }

    /// [`Hostility::EndlessAdvertisement`].
    pub fn endless_output(protocol: Protocol) -> Self {
        Self::start(Hostility::EndlessAdvertisement, protocol)
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.server.port()
    }

    /// `git://127.0.0.1:<port>/<repo_name>.git` or `http://…`, as its protocol is.
    pub fn url(&self, repo_name: &str) -> String {
        let scheme = match self.protocol {
            Protocol::Git => "git",
            Protocol::Http => "http",
        };
        format!("{scheme}://127.0.0.1:{}/{repo_name}.git", self.port())
    }

    /// How many connections it has accepted: a test can tell that the client reached it.
    pub fn connections(&self) -> usize {
        self.server.accepted()
    }
}

/// A pkt-line holding `data`.
fn pkt(data: &[u8]) -> Vec<u8> {
    let mut line = format!("{:04x}", data.len() + 4).into_bytes();
    line.extend_from_slice(data);
    line
}

/// Which service the client asked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Service {
    Upload,
    Receive,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::Upload => "git-upload-pack",
            Service::Receive => "git-receive-pack",
        }
    }
}

/// What the client opened with.
enum Opening {
    /// git://'s request line, or HTTP's `GET …/info/refs?service=…`.
    Advertisement(Service),
    /// HTTP's `POST …/git-<service>`.
    Post(Service),
}

/// Reads git://'s request pkt-line (`git-upload-pack /x.git\0host=…\0`).
fn read_git_request(stream: &TcpStream) -> std::io::Result<Opening> {
    let mut reader = stream;
    let mut length = [0u8; 4];
    reader.read_exact(&mut length)?;
    let length = std::str::from_utf8(&length)
        .ok()
        .and_then(|hex| usize::from_str_radix(hex, 16).ok())
        .unwrap_or(4);
    let mut request = vec![0u8; length.saturating_sub(4)];
    reader.read_exact(&mut request)?;
    let service = if request.starts_with(b"git-receive-pack") {
        Service::Receive
    } else {
        Service::Upload
    };
    Ok(Opening::Advertisement(service))
}

/// Reads an HTTP request's head (up to 64 KiB) and tells what it asks for.
fn read_http_request(stream: &TcpStream) -> std::io::Result<Opening> {
    let mut reader = BufReader::new(stream.take(64 * 1024));
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
    }
    // Whatever the reader buffered past the head is body: nothing here needs it.
    let service = if request_line.contains("git-receive-pack") {
        Service::Receive
    } else {
        Service::Upload
    };
    Ok(if request_line.starts_with("POST") {
        Opening::Post(service)
    } else {
        Opening::Advertisement(service)
    })
}

/// The start of an HTTP response carrying `content_type`, closed-delimited.
fn http_head(content_type: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nCache-Control: no-cache\r\n\
         Connection: close\r\n\r\n"
    )
    .into_bytes()
}

/// What an HTTP advertisement starts with: the head, then `# service=…` and a flush.
fn http_advertisement_prefix(service: Service) -> Vec<u8> {
    let mut bytes = http_head(&format!("application/x-{}-advertisement", service.name()));
    bytes.extend(pkt(format!("# service={}\n", service.name()).as_bytes()));
    bytes.extend_from_slice(b"0000");
    bytes
}

/// The first line of an advertisement: `HEAD` (upload-pack) or `refs/heads/main`
/// (receive-pack) with the capabilities.
fn first_ref_line(service: Service) -> Vec<u8> {
    let line = match service {
        Service::Upload => format!("{FAKE_OID} HEAD\0{UPLOAD_CAPABILITIES}\n"),
        Service::Receive => format!("{FAKE_OID} refs/heads/main\0{RECEIVE_CAPABILITIES}\n"),
    };
    pkt(line.as_bytes())
}

/// `count` ref lines from `start`, as one buffer.
fn ref_lines(start: u64, count: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(count as usize * 64);
    for n in start..start + count {
        bytes.extend(pkt(format!("{FAKE_OID} refs/heads/sf-{n:010}\n").as_bytes()));
    }
    bytes
}

fn serve(stream: &TcpStream, hostility: Hostility, protocol: Protocol) -> std::io::Result<()> {
    let mut out = stream;
    let opening = match protocol {
        Protocol::Git => read_git_request(stream)?,
        Protocol::Http => read_http_request(stream)?,
    };
    let (service, post) = match opening {
        Opening::Advertisement(service) => (service, false),
        Opening::Post(service) => (service, true),
    };
    if hostility == Hostility::Silent {
        drain(stream);
        return Ok(());
    }
    if post {
        // A push's POST, once the client has taken the advertisement: only
        // `EndlessPushProgress` answers it; the others never do.
        if hostility == Hostility::EndlessPushProgress {
            return endless_progress(stream, protocol);
        }
        drain(stream);
        return Ok(());
    }
    if protocol == Protocol::Http && hostility != Hostility::Malformed {
        out.write_all(&http_advertisement_prefix(service))?;
    }
    match hostility {
        // Answered above.
        Hostility::Silent => {}
        Hostility::Malformed => {
            if protocol == Protocol::Http {
                out.write_all(&http_head(&format!(
                    "application/x-{}-advertisement",
                    service.name()
                )))?;
            }
            out.write_all(b"this is not a pkt-line\n")?;
        }
        Hostility::OverlongPktLine => {
            let mut line = b"ffff".to_vec();
            line.resize(0xffff, b'x');
            loop {
                out.write_all(&line)?;
            }
        }
        Hostility::OversizedAdvertisement { refs } => {
            out.write_all(&first_ref_line(service))?;
            let mut sent = 0;
            while sent < refs {
                let batch = (refs - sent).min(4096);
                out.write_all(&ref_lines(sent, batch))?;
                sent += batch;
            }
            out.write_all(b"0000")?;
            if protocol == Protocol::Git {
                // The client says what it wants (or a flush) and goes.
                drain(stream);
            }
        }
        Hostility::EndlessAdvertisement => {
            out.write_all(&first_ref_line(service))?;
            let mut sent = 0;
            loop {
                out.write_all(&ref_lines(sent, 4096))?;
                sent += 4096;
            }
        }
        Hostility::EndlessPushProgress => {
            out.write_all(&first_ref_line(service))?;
            out.write_all(b"0000")?;
            if service == Service::Receive && protocol == Protocol::Git {
                return endless_progress(stream, protocol);
            }
            if protocol == Protocol::Git {
                drain(stream);
            }
        }
    }
    Ok(())
}

/// Waits for the client's commands, then sends progress on side band 2 for ever (the rest
/// of what the client sends is read and dropped meanwhile, so it never blocks writing).
fn endless_progress(stream: &TcpStream, protocol: Protocol) -> std::io::Result<()> {
    let mut out = stream;
    if protocol == Protocol::Http {
        out.write_all(&http_head("application/x-git-receive-pack-result"))?;
    } else {
        // The client's first command line (it sends nothing if it has nothing to push).
        let mut first = [0u8; 1];
        (&mut out).read_exact(&mut first)?;
    }
    let reader = stream.try_clone()?;
    let sink = std::thread::spawn(move || drain(&reader));
    let mut result = Ok(());
    for n in 0u64.. {
        let mut message = b"\x02".to_vec();
        message.extend_from_slice(format!("sf-test: still working {n}\n").as_bytes());
        if let Err(error) = out.write_all(&pkt(&message)) {
            result = Err(error);
            break;
        }
    }
    let _ = stream.shutdown(Shutdown::Both);
    let _ = sink.join();
    result
}
