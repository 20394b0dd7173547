//! The connector under the HTTP client: hyper's TCP connector, with each failure to
//! connect named (`transport.dns`, `transport.refused`) and each connection watched
//! closely enough to tell a call the provider never received from one it may have.
//!
//! Providers close keep-alive connections that sat idle (nginx's
//! `keepalive_timeout`, load balancers). A request written to a pooled connection
//! just as the provider closes it fails with no answer, though the provider never
//! read it. Two things tell that case apart, as mature HTTP clients do, and only on a
//! connection that already carried an exchange (a reused one):
//! - before a request is written, the socket is peeked: an end of stream means the
//!   provider closed it while idle, and the request is not written at all;
//! - when the request was written and the stream ends before any byte of an
//!   answer, a reset on the socket (the provider's system refusing data for a
//!   socket already closed) shows the request was never read. That reset comes a
//!   round trip after the request, and the provider's end of the stream usually
//!   before it: so the end is held back from hyper for up to [`RESET_WAIT_MS`],
//!   looking for the reset every [`RESET_CHECK_MS`].
//!
//! A stream that just ends, with no reset within that wait, is a provider that read
//! the request and closed: the call may have happened, and it stays
//! `outcome_unknown`.

use hyper::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

/// The longest wait, once a reused connection's stream ended before any byte of
/// an answer, for the reset by which the provider's system refuses a request its
/// server never read. The reset comes about a round trip after the request went
/// out, plus the moment a server takes between ending its side of the stream and
/// closing it: a second covers the longest round trips with room for a busy
/// server. Only a call that gets no reset waits it all, and that call ends
/// `outcome_unknown` (the delivery parked) either way; a call answered, or on a
/// fresh connection, never waits.
pub const RESET_WAIT_MS: u64 = 1_000;
/// How often the socket is looked at for that reset while waiting.
pub const RESET_CHECK_MS: u64 = 1;

/// A failure to connect, named: the error the connector gives in place of hyper's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ConnectFailure {
    /// The code: [`super::CODE_DNS`] or [`super::CODE_REFUSED`].
    pub code: &'static str,
    /// The underlying error's text.
    pub reason: String,
}

/// What one connection has seen, shared between it and the driver that reads it
/// after a failure (through the client's captured connection).
#[derive(Debug, Default)]
pub struct Watch {
    /// Requests begun on it (the first write after an answer, or the first ever).
    pub exchanges: u32,
    /// Whether a request is out and its answer not fully read yet: set at its first
    /// write, cleared at the next request's.
    awaiting: bool,
    /// Bytes of answer read since the current request was written.
    pub answer_bytes: u64,
    /// The peek before a request found the stream ended: nothing was written.
    pub closed_while_idle: bool,
    /// The stream ended before any answer, with a reset pending on the socket.
    pub reset_unanswered: bool,
}

/// A connection's [`Watch`], as the client's connection metadata carries it.
#[derive(Debug, Clone, Default)]
pub struct Watched(pub Arc<Mutex<Watch>>);

impl Watched {
    /// A copy of what the connection has seen.
    pub fn snapshot(&self) -> WatchSnapshot {
        let w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        WatchSnapshot {
            reused: w.exchanges > 1,
            answer_bytes: w.answer_bytes,
            closed_while_idle: w.closed_while_idle,
            reset_unanswered: w.reset_unanswered,
        }
    }
}

/// What `Watched::snapshot` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchSnapshot {
    /// The failed request was not the connection's first.
    pub reused: bool,
    /// Bytes of answer read for it.
    pub answer_bytes: u64,
    /// It was never written: the provider had closed the connection while idle.
    pub closed_while_idle: bool,
    /// It was written, and refused unread by a provider that had closed.
    pub reset_unanswered: bool,
}

impl WatchSnapshot {
    /// Whether the provider surely never received the request: sending it again
    /// on a fresh connection cannot make the call twice.
    pub fn never_received(&self) -> bool {
        self.reused && self.answer_bytes == 0 && (self.closed_while_idle || self.reset_unanswered)
    }
}

/// The TCP connector with named failures and watched connections.
#[derive(Clone)]
pub struct WatchingConnector {
    inner: HttpConnector,
}

impl WatchingConnector {
    /// Wraps `inner`.
    pub fn new(inner: HttpConnector) -> WatchingConnector {
        WatchingConnector { inner }
    }
}

/// The code and text of a failure to connect.
fn name_connect_failure(e: &(dyn std::error::Error + 'static)) -> ConnectFailure {
    // hyper's connector says "dns error" for a name that did not resolve; its
    // cause is the resolver's text.
    let dns = e.to_string() == "dns error";
    let reason = super::deepest_text(e);
    let code = if dns { super::CODE_DNS } else { super::CODE_REFUSED };
    ConnectFailure { code, reason }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Uri> for WatchingConnector {
    type Response = WatchedStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<WatchedStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(|e| Box::new(name_connect_failure(&e)) as BoxError)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let connecting = self.inner.call(uri);
        Box::pin(async move {
            match connecting.await {
                Ok(io) => Ok(WatchedStream { io, watch: Watched::default(), end: End::Open }),
                Err(e) => Err(Box::new(name_connect_failure(&e)) as BoxError),
            }
        })
    }
}

/// A TCP stream that keeps its [`Watch`].
pub struct WatchedStream {
    io: TokioIo<TcpStream>,
    watch: Watched,
    end: End,
}

/// Where the stream is with the end of a reused connection's unanswered request.
enum End {
    /// The stream has not ended before an answer.
    Open,
    /// It ended: the end is held back from hyper until a reset shows or `until`.
    Waiting { until: Instant, check: Pin<Box<Sleep>> },
    /// The wait is over: the end is hyper's.
    Told,
}

impl WatchedStream {
    fn tcp(&self) -> &TcpStream {
        self.io.inner()
    }

    /// Whether the peer has ended the stream (a peek finds its end), without waiting.
    fn peer_closed(&self) -> bool {
        let mut buf = [MaybeUninit::<u8>::uninit(); 1];
        // The socket is non-blocking: no data is `WouldBlock`, an end is `Ok(0)`.
        matches!(socket2::SockRef::from(self.tcp()).peek(&mut buf), Ok(0))
    }

    /// Whether a reset is pending on the socket (taking it).
    fn reset_pending(&self) -> bool {
        match socket2::SockRef::from(self.tcp()).take_error() {
            Ok(Some(e)) => is_reset(&e),
            _ => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watch> {
        self.watch.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The stream ended: on a reused connection whose request has no byte of
    /// answer, hold the end back from hyper until a reset shows (the request was
    /// refused unread) or [`RESET_WAIT_MS`] has passed.
    fn poll_end(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if matches!(self.end, End::Open) {
            let unanswered = {
                let w = self.lock();
                w.exchanges > 1 && w.awaiting && w.answer_bytes == 0 && !w.reset_unanswered
            };
            let now = Instant::now();
            self.end = if unanswered {
                let until = now + Duration::from_millis(RESET_WAIT_MS);
                End::Waiting { until, check: Box::pin(tokio::time::sleep_until(now)) }
            } else {
                End::Told
            };
        }
        while let End::Waiting { until, check } = &mut self.end {
            ready!(check.as_mut().poll(cx));
            let until = *until;
            let now = Instant::now();
            if self.reset_pending() {
                self.lock().reset_unanswered = true;
                self.end = End::Told;
            } else if now >= until {
                self.end = End::Told;
            } else if let End::Waiting { check, .. } = &mut self.end {
                check.as_mut().reset((now + Duration::from_millis(RESET_CHECK_MS)).min(until));
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// A reset, or a write to a peer that had reset.
fn is_reset(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionAborted)
}

impl Connection for WatchedStream {
    fn connected(&self) -> Connected {
        self.tcp().connected().extra(self.watch.clone())
    }
}

impl Read for WatchedStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, mut buf: ReadBufCursor<'_>) -> Poll<io::Result<()>> {
        if !matches!(self.end, End::Open) {
            return self.poll_end(cx);
        }
        // hyper's cursor does not say how much a read filled, so the inner stream
        // reads into a local buffer, counted, then copied into the cursor.
        let mut local = [MaybeUninit::<u8>::uninit(); 8192];
        let want = buf.remaining().min(local.len());
        let mut rb = hyper::rt::ReadBuf::uninit(&mut local[..want]);
        let polled = Pin::new(&mut self.io).poll_read(cx, rb.unfilled());
        let filled = rb.filled();
        match polled {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(())) if filled.is_empty() && want > 0 => self.poll_end(cx),
            Poll::Ready(Ok(())) => {
                let n = filled.len();
                buf.put_slice(filled);
                let mut w = self.lock();
                w.answer_bytes = w.answer_bytes.saturating_add(n as u64);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => {
                let mut w = self.lock();
                if w.awaiting && w.answer_bytes == 0 && is_reset(&e) {
                    w.reset_unanswered = true;
                }
                Poll::Ready(Err(e))
            }
        }
    }
}

impl WatchedStream {
    /// Called before each write: the first write of a new request counts an
    /// exchange and, on a reused connection, peeks for the provider's close.
    fn before_write(&self) -> io::Result<()> {
        let mut w = self.lock();
        let new_request = !w.awaiting || w.answer_bytes > 0;
        if !new_request {
            return Ok(());
        }
        w.exchanges = w.exchanges.saturating_add(1);
        w.awaiting = true;
        w.answer_bytes = 0;
        w.reset_unanswered = false;
        if w.exchanges > 1 {
            drop(w);
            if self.peer_closed() {
                self.lock().closed_while_idle = true;
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "the provider closed the idle connection",
                ));
            }
        }
        Ok(())
    }
}

impl Write for WatchedStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if let Err(e) = self.before_write() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Err(e) = self.before_write() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
}
