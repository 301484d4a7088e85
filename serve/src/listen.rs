//! Accepting connections: at most [`MAX_CONNECTIONS`] at a time (the next waits in the
//! kernel's backlog), and each request's head read within [`HEAD_TIMEOUT`], so that clients
//! that connect and send nothing, or send a byte a minute, cannot hold the server.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// The most connections served at once.
pub const MAX_CONNECTIONS: usize = 256;

/// How long a request's head (its line and headers) may take to arrive.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `router` on `listener` until the process ends.
pub async fn serve(listener: TcpListener, router: Router) -> Result<(), String> {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let permit = Arc::clone(&permits)
            .acquire_owned()
            .await
            .map_err(|error| format!("the connection limit: {error}"))?;
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // A connection reset before it was accepted, or too many open files: neither
            // stops the server.
            Err(error) => {
                eprintln!("sf-serve: accepting a connection: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_TIMEOUT);
            // A connection that ends badly (a reset, a timed-out head) concerns that client only.
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
            drop(permit);
        });
    }
}
