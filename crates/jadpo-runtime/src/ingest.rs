//! `jadpoc run --listen`: events over HTTP. `POST /events/NAME` with a JSON object
//! answers 202 `{"id": N}`; an unknown event 404; a body that is not JSON or does not
//! match the event 422 naming the field; a body over 1 MiB 413.
//!
//! A small HTTP/1.1 server on tokio (one request per connection, `Content-Length`
//! bodies, `Expect: 100-continue` honoured) keeps the build free of a web stack; it
//! is only an ingest endpoint.

use crate::clock::Clock;
use crate::codes::RuntimeCode;
use crate::payload::{PayloadError, new_event};
use crate::store::Store;
use jadpo_check::program::Program;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};

/// The largest body accepted.
pub const MAX_BODY: usize = 1024 * 1024;
const MAX_HEAD: usize = 16 * 1024;
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// What the ingest endpoint needs.
#[derive(Clone)]
pub struct Ingest {
    /// The checked program.
    pub program: Arc<Program>,
    /// Where events go.
    pub store: Arc<dyn Store>,
    /// The time events are stamped with.
    pub clock: Arc<dyn Clock>,
    /// Woken after each stored event, so workers start at once.
    pub wake: Arc<Notify>,
}

/// Serve until `stop` turns true.
pub async fn serve(listener: TcpListener, ingest: Ingest, mut stop: watch::Receiver<bool>) {
    loop {
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let ingest = ingest.clone();
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(READ_TIMEOUT * 3, handle(stream, ingest)).await;
                    });
                }
            }
            _ = stop.changed() => {}
        }
    }
}

struct Response {
    status: u16,
    body: serde_json::Value,
}

fn reason(status: u16) -> &'static str {
    match status {
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Content Too Large",
        422 => "Unprocessable Content",
        431 => "Request Header Fields Too Large",
        _ => "Service Unavailable",
    }
}

fn error(code: RuntimeCode, message: String) -> Response {
    let status = code.status().unwrap_or(500);
    Response { status, body: json!({"error": {"code": code.wire(), "field": null, "message": message}}) }
}

async fn write_response(stream: &mut TcpStream, r: Response) {
    let body = r.body.to_string();
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        r.status,
        reason(r.status),
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn handle(mut stream: TcpStream, ingest: Ingest) {
    let r = match respond(&mut stream, &ingest).await {
        Ok(r) | Err(r) => r,
    };
    write_response(&mut stream, r).await;
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

async fn respond(stream: &mut TcpStream, ingest: &Ingest) -> Result<Response, Response> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(end) = find_head_end(&buf) {
            break end;
        }
        if buf.len() > MAX_HEAD {
            return Err(error(RuntimeCode::IngestHeadTooLarge, "the request head is over 16 KiB".into()));
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut chunk))
            .await
            .map_err(|_| error(RuntimeCode::IngestTimeout, "the request did not arrive in time".into()))?
            .map_err(|e| error(RuntimeCode::IngestBadRequest, e.to_string()))?;
        if n == 0 {
            return Err(error(RuntimeCode::IngestBadRequest, "the request ended early".into()));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let (method, path) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
    let mut length: Option<usize> = None;
    let mut chunked = false;
    let mut expect_continue = false;
    for line in lines {
        let Some((k, v)) = line.split_once(':') else { continue };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        match k.as_str() {
            "content-length" => {
                length = Some(v.parse().map_err(|_| {
                    error(RuntimeCode::IngestBadRequest, format!("`Content-Length: {v}` is not a length"))
                })?)
            }
            "transfer-encoding" => chunked = !v.eq_ignore_ascii_case("identity"),
            "expect" => expect_continue = v.eq_ignore_ascii_case("100-continue"),
            _ => {}
        }
    }
    let Some(name) = path.strip_prefix("/events/").filter(|n| !n.is_empty() && !n.contains('/')) else {
        return Err(error(RuntimeCode::IngestNotFound, format!("no route `{path}`; post to `/events/NAME`")));
    };
    if method != "POST" {
        return Err(error(RuntimeCode::IngestMethodNotAllowed, "events are taken by `POST`".into()));
    }
    if ingest.program.event(name).is_none() {
        return Err(Response { status: 404, body: PayloadError::UnknownEvent(name.to_string()).to_json() });
    }
    if chunked {
        return Err(error(RuntimeCode::IngestLengthRequired, "send the body with a `Content-Length`".into()));
    }
    let length = length.unwrap_or(0);
    if length > MAX_BODY {
        return Err(error(RuntimeCode::IngestTooLarge, "the body is over 1 MiB".into()));
    }
    if expect_continue {
        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
    }
    let mut body = buf.split_off(head_end);
    while body.len() < length {
        let mut chunk = vec![0u8; (length - body.len()).min(64 * 1024)];
        let n = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut chunk))
            .await
            .map_err(|_| error(RuntimeCode::IngestTimeout, "the body did not arrive in time".into()))?
            .map_err(|e| error(RuntimeCode::IngestBadRequest, e.to_string()))?;
        if n == 0 {
            return Err(error(RuntimeCode::IngestBadRequest, "the body ended early".into()));
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    let text = String::from_utf8(body)
        .map_err(|_| Response { status: 422, body: PayloadError::NotJson("the body is not UTF-8".into()).to_json() })?;
    let event = new_event(&ingest.program, name, &text).map_err(|e| Response { status: 422, body: e.to_json() })?;
    let store = ingest.store.clone();
    let now = ingest.clock.now_ms();
    let stored = tokio::task::spawn_blocking(move || store.emit(&[event], now)).await;
    match stored {
        Ok(Ok(ids)) => {
            ingest.wake.notify_waiters();
            Ok(Response { status: 202, body: json!({"id": ids.first()}) })
        }
        Ok(Err(e)) => Err(error(RuntimeCode::IngestStoreUnavailable, e.to_string())),
        Err(e) => Err(error(RuntimeCode::IngestStoreUnavailable, e.to_string())),
    }
}
