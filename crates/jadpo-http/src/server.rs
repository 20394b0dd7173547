//! The HTTP server under `--listen` and `--metrics`: one accept loop for both, on
//! hyper's HTTP/1.1 connections, with what jadpo adds around them.
//!
//! - **A cap on open connections.** A slot first, then the accept: past the cap,
//!   clients wait in the kernel's accept queue rather than being accepted and
//!   starved.
//! - **No descriptor left.** When the process (or the system) has no file
//!   descriptor for the next client, a spare one kept for this is given up, the
//!   waiting client accepted and its connection closed at once: it sees it now
//!   and can go elsewhere or try again, rather than waiting in the queue for an
//!   idle client to time out. Out of memory for a socket, accepting pauses a
//!   moment instead of spinning.
//! - **The drain at a stop.** The listener closes. Each connection finishes the
//!   request it is in and closes (hyper answers it with `Connection: close`);
//!   one with nothing read (idle, or not yet used) closes at once. The clients already waiting in
//!   the listener's queue are accepted still, as slots free, and each is served
//!   one request (the handler tells it the stop has come) rather than reset with
//!   the listener. [`serve`] returns once the last connection has closed.

use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;

/// How long accepting pauses when it cannot go on at once (no memory for a
/// socket, no spare descriptor): long enough not to spin, short enough to resume
/// soon after.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// `accept`'s errors (Linux and the BSDs alike) that mean no descriptor is left:
/// EMFILE for the process, ENFILE for the system.
const NO_DESCRIPTOR: [i32; 2] = [24, 23];
/// `accept`'s errors that mean no memory for a socket: ENOMEM, and ENOBUFS on
/// Linux and on the BSDs.
const NO_MEMORY: [i32; 3] = [12, 105, 55];

/// How long a client has to send a request's head; also how long an idle
/// keep-alive connection is kept open waiting for its next request (the ingest's
/// and the metrics' alike).
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Serve `listener` on connections made by `http`, at most `max_connections` at
/// once, each request answered by `handler` once its head is read, until `stop`
/// turns true; then drain (the module's doc) and return.
pub async fn serve<H, F>(
    listener: TcpListener,
    max_connections: usize,
    http: http1::Builder,
    mut stop: watch::Receiver<bool>,
    handler: H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(max_connections.clamp(1, Semaphore::MAX_PERMITS)));
    let mut spare = Spare::open();
    let mut connections = JoinSet::new();
    // Clients taken off the listener's queue once the stop has come: each is
    // served one request after the loop (see the drain below).
    let mut queued: Vec<TcpStream> = Vec::new();
    loop {
        // The stop first: a slot freed by the stop itself (an idle connection
        // closing) must not let the loop accept a client as if no stop had come,
        // whose connection would then be shut before its request was read.
        let slot = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            s = slots.clone().acquire_owned() => match s { Ok(s) => s, Err(_) => break },
        };
        let accepted = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) if *stop.borrow() => {
                queued.push(stream);
                break;
            }
            Ok((stream, _)) => connect(&mut connections, stream, slot, &http, Some(&stop), &handler),
            Err(e) => {
                let os = e.raw_os_error().unwrap_or(0);
                // No descriptor left: the client waiting is refused at once.
                let refused = NO_DESCRIPTOR.contains(&os) && spare.refuse_one(&listener);
                // With no spare to give up (another part of the process took the
                // descriptor freed last time), or no memory for a socket,
                // accepting again at once would fail again at once. Any other
                // error is one client's (gone before it was accepted).
                if !refused && (NO_DESCRIPTOR.contains(&os) || NO_MEMORY.contains(&os)) {
                    tokio::select! {
                        _ = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                        _ = stop.wait_for(|s| *s) => break,
                    }
                }
            }
        }
        // Reap finished connections so the set does not grow with every client.
        while connections.try_join_next().is_some() {}
    }
    // The clients already in the listener's queue are taken off it before it
    // closes, each served one request as slots free, rather than reset.
    if let Ok(queue) = listener.into_std() {
        while let Ok((stream, _)) = queue.accept() {
            if let Ok(stream) = stream.set_nonblocking(true).and_then(|()| TcpStream::from_std(stream)) {
                queued.push(stream);
            }
        }
    }
    let mut once = http;
    once.keep_alive(false);
    for stream in queued {
        let Ok(slot) = slots.clone().acquire_owned().await else { break };
        connect(&mut connections, stream, slot, &once, None, &handler);
    }
    while connections.join_next().await.is_some() {}
}

/// Serve one accepted connection as its own task, holding its slot, until the
/// end of the request it is in once `stop` turns true (with no `stop`, as long
/// as `http` keeps it). hyper answers with `Connection: close` from the stop on.
fn connect<H, F>(
    connections: &mut JoinSet<()>,
    stream: TcpStream,
    slot: OwnedSemaphorePermit,
    http: &http1::Builder,
    stop: Option<&watch::Receiver<bool>>,
    handler: &H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    // Answers are small and sent whole: no point delaying them.
    let _ = stream.set_nodelay(true);
    let handler = handler.clone();
    let service = service_fn(move |req| {
        let answer = handler(req);
        async move { Ok::<_, std::convert::Infallible>(answer.await) }
    });
    let conn = http.serve_connection(TokioIo::new(stream), service);
    let mut stop = stop.cloned();
    connections.spawn(async move {
        let _slot = slot;
        tokio::pin!(conn);
        if let Some(stop) = stop.as_mut() {
            tokio::select! {
                _ = conn.as_mut() => return,
                _ = stop.wait_for(|s| *s) => conn.as_mut().graceful_shutdown(),
            }
        }
        let _ = conn.await;
    });
}

/// A file descriptor kept open to be given up when none is left.
struct Spare(Option<std::fs::File>);

impl Spare {
    fn open() -> Spare {
        Spare(std::fs::File::open("/dev/null").ok())
    }

    /// With no descriptor left: close the spare, accept the client waiting first
    /// with the descriptor so freed and close its connection at once, then take
    /// the spare again. False when there was no spare to give up.
    fn refuse_one(&mut self, listener: &TcpListener) -> bool {
        if self.0.take().is_none() {
            *self = Spare::open();
            return false;
        }
        // Ready at once: the failed accept says a client is waiting.
        drop(listener.accept().now_or_never());
        *self = Spare::open();
        true
    }
}
