//! Accepting connections: at most [`MAX_CONNECTIONS`] at a time (the next waits in the
//! kernel's backlog), a TLS handshake (when configured) within [`HANDSHAKE_TIMEOUT`], and
//! each request's head read within [`HEAD_TIMEOUT`], so that clients that connect and send
//! nothing, or send a byte a minute, cannot hold the server.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_rustls::TlsAcceptor;

/// The most connections served at once.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a request's head (its line and headers) may take to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client may take to complete its TLS handshake: a few round trips, so far less
/// than a request's head may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `router` on `listener` until the process ends, each connection inside TLS when
/// `tls` is given.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
) -> Result<(), String> {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        // The permit is taken before the accept and held until the connection ends, its
        // handshake included, so that the limit counts every connection the server holds.
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .map_err(|error| format!("the connection limit: {error}"))?;
        let stream = accept(&listener).await;
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(connection(stream, tls.clone(), service, permit));
    }
}

/// The next connection.
async fn accept(listener: &TcpListener) -> TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => return stream,
            // A connection reset before it was accepted, or too many open files: neither
            // stops the server.
            Err(error) => {
                eprintln!("sf-serve: accepting a connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serves one connection, inside TLS when `tls` is given, then gives its permit back.
async fn connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    service: TowerToHyperService<Router>,
    permit: OwnedSemaphorePermit,
) {
    match tls {
        None => http1(stream, service).await,
        // A handshake that fails or takes too long concerns that client only: its connection
        // is dropped. The handshake runs here, in the connection's own task, never in the
        // accept loop, so a client that stays silent holds up no one else.
        Some(acceptor) => {
            if let Ok(Ok(stream)) =
                tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
            {
                http1(stream, service).await;
            }
        }
    }
    drop(permit);
}

/// HTTP/1 over `stream`, with the head read bounded by [`HEAD_TIMEOUT`].
async fn http1<S>(stream: S, service: TowerToHyperService<Router>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT);
    // A connection that ends badly (a reset, a timed-out head) concerns that client only.
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}
