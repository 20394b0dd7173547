//! A scripted HTTP/1.1 provider on 127.0.0.1 for the HTTP driver's tests: plain
//! std threads (so both tokio and blocking tests can use it), keep-alive, every
//! request recorded, each answered by a script.

#![allow(dead_code)]

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the provider received it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names lowercased.
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    /// Which accepted connection carried it (0 for the first).
    pub connection: usize,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// How the provider answers one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Answer with this status, extra headers and body.
    Answer { status: u16, headers: Vec<(String, String)>, body: String },
    /// Wait, then answer.
    After(Duration, Box<Reply>),
    /// Read the request and never answer (the socket stays open).
    Hang,
    /// Read the request and close the connection without a word.
    Close,
    /// Read the request, write these bytes as they are, and close.
    Raw(String),
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply::Answer { status, headers: Vec::new(), body: String::new() }
    }

    pub fn with_header(status: u16, name: &str, value: &str) -> Reply {
        Reply::Answer { status, headers: vec![(name.into(), value.into())], body: String::new() }
    }

    pub fn json(status: u16, body: &str) -> Reply {
        Reply::Answer { status, headers: vec![("Content-Type".into(), "application/json".into())], body: body.into() }
    }
}

type Script = dyn Fn(usize, &Received) -> Reply + Send + Sync;

/// How the provider closes an idle connection. The last two stop reading first
/// and end the stream a moment later: on a network the provider's end of the
/// stream reaches the client that much after it stopped reading, and a request
/// sent meanwhile arrives unread.
#[derive(Debug, Clone, Copy)]
enum Close {
    /// Shuts both sides down, then closes.
    Both,
    /// Closes after `after`.
    Drop { after: Duration },
    /// Shuts its sending side down after `after` (the client sees the end of the
    /// stream), and closes `then` later (a request that came meanwhile unread), as
    /// Python's `socketserver` does.
    WriteThenDrop { after: Duration, then: Duration },
}

/// When the provider closes a keep-alive connection waiting for its next request.
#[derive(Debug, Clone, Copy)]
enum IdleClose {
    /// Never.
    Never,
    /// Once it has been idle this long, as nginx's `keepalive_timeout`.
    After(Duration),
    /// After an idle time drawn anew for each wait from `idle`, by a generator
    /// seeded with `seed` and the connection's number, closing in one of the ways
    /// of [`Close`], drawn too.
    AtRandom { seed: u64, idle: (Duration, Duration) },
}

/// A running provider; it lives until the test process ends.
#[derive(Clone)]
pub struct Provider {
    pub addr: std::net::SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
    connections: Arc<AtomicUsize>,
    busy: Arc<AtomicUsize>,
    max_busy: Arc<AtomicUsize>,
    idle_close: IdleClose,
    idle_closes: Arc<AtomicUsize>,
}

impl Provider {
    /// Start a provider answering request `n` (from 0) with `script(n, request)`.
    pub fn start(script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static) -> Provider {
        Provider::start_with(IdleClose::Never, script)
    }

    /// A provider that closes keep-alive connections left idle for `idle`, as
    /// nginx's `keepalive_timeout` does.
    pub fn closing_idle(
        idle: Duration,
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> Provider {
        Provider::start_with(IdleClose::After(idle), script)
    }

    /// A provider that closes keep-alive connections at random moments while they
    /// wait for a request, after an idle time drawn from `idle` for each wait
    /// (seeded: the same draws for the same seed and the same traffic), as
    /// servers and load balancers with short or varying idle timeouts do. It
    /// never closes a connection before its first request.
    pub fn closing_at_random(
        seed: u64,
        idle: std::ops::RangeInclusive<Duration>,
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> Provider {
        Provider::start_with(IdleClose::AtRandom { seed, idle: idle.into_inner() }, script)
    }

    fn start_with(
        idle_close: IdleClose,
        script: impl Fn(usize, &Received) -> Reply + Send + Sync + 'static,
    ) -> Provider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = Provider {
            addr: listener.local_addr().expect("addr"),
            received: Arc::default(),
            connections: Arc::default(),
            busy: Arc::default(),
            max_busy: Arc::default(),
            idle_close,
            idle_closes: Arc::default(),
        };
        let script: Arc<Script> = Arc::new(script);
        let shared = p.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let n = shared.connections.fetch_add(1, Ordering::SeqCst);
                let (p, script) = (shared.clone(), script.clone());
                std::thread::spawn(move || p.serve(stream, n, &*script));
            }
        });
        p
    }

    /// Always answer `reply`.
    pub fn always(reply: Reply) -> Provider {
        Provider::start(move |_, _| reply.clone())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().expect("lock").clone()
    }

    pub fn count(&self) -> usize {
        self.received.lock().expect("lock").len()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The most requests it was answering at one time.
    pub fn max_concurrent(&self) -> usize {
        self.max_busy.load(Ordering::SeqCst)
    }

    /// Connections it closed for being idle.
    pub fn idle_closes(&self) -> usize {
        self.idle_closes.load(Ordering::SeqCst)
    }

    fn serve(&self, stream: TcpStream, connection: usize, script: &Script) {
        let Ok(write_half) = stream.try_clone() else { return };
        let mut out = write_half;
        let mut reader = BufReader::new(stream);
        let mut first = true;
        let seed = match self.idle_close {
            IdleClose::AtRandom { seed, .. } => seed,
            _ => 0,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(connection as u64));
        loop {
            let mut line = String::new();
            let (idle, close) = match self.idle_close {
                _ if first => (None, Close::Both),
                IdleClose::Never => (None, Close::Both),
                IdleClose::After(idle) => (Some(idle), Close::Both),
                IdleClose::AtRandom { idle: (shortest, longest), .. } => {
                    let micros = |d: Duration| u64::try_from(d.as_micros()).expect("µs").max(1);
                    let idle = Duration::from_micros(rng.random_range(micros(shortest)..=micros(longest)));
                    let kind = rng.random_range(0..3);
                    let mut moment = || Duration::from_micros(rng.random_range(0..=3_000));
                    let close = match kind {
                        0 => Close::Both,
                        1 => Close::Drop { after: moment() },
                        _ => Close::WriteThenDrop { after: moment(), then: moment() },
                    };
                    (Some(idle), close)
                }
            };
            if let Some(idle) = idle {
                let _ = reader.get_ref().set_read_timeout(Some(idle));
            }
            first = false;
            match reader.read_line(&mut line) {
                Ok(0) => return,
                Ok(_) => {}
                Err(_) => {
                    // Idle too long: close, as a server with a keep-alive timeout
                    // does. Whatever arrived meanwhile was never read.
                    self.idle_closes.fetch_add(1, Ordering::SeqCst);
                    match close {
                        Close::Both => {
                            let _ = out.shutdown(std::net::Shutdown::Both);
                        }
                        Close::Drop { after } => std::thread::sleep(after),
                        Close::WriteThenDrop { after, then } => {
                            std::thread::sleep(after);
                            let _ = out.shutdown(std::net::Shutdown::Write);
                            std::thread::sleep(then);
                        }
                    }
                    return;
                }
            }
            let _ = reader.get_ref().set_read_timeout(None);
            let mut parts = line.split_whitespace();
            let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
            let mut headers = HashMap::new();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 {
                    return;
                }
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                }
            }
            let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            let mut body = vec![0; len];
            if reader.read_exact(&mut body).is_err() {
                return;
            }
            let req = Received { method, path, headers, body, connection };
            let n = {
                let mut all = self.received.lock().expect("lock");
                all.push(req.clone());
                all.len() - 1
            };
            let now = self.busy.fetch_add(1, Ordering::SeqCst) + 1;
            self.max_busy.fetch_max(now, Ordering::SeqCst);
            let mut reply = script(n, &req);
            let keep = loop {
                match reply {
                    Reply::After(d, r) => {
                        std::thread::sleep(d);
                        reply = *r;
                    }
                    Reply::Hang => {
                        self.busy.fetch_sub(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_secs(3600));
                        return;
                    }
                    Reply::Close => break false,
                    Reply::Raw(bytes) => {
                        let _ = out.write_all(bytes.as_bytes());
                        break false;
                    }
                    Reply::Answer { status, headers, body } => {
                        let mut text = format!("HTTP/1.1 {status} Whatever\r\nContent-Length: {}\r\n", body.len());
                        for (k, v) in headers {
                            text.push_str(&format!("{k}: {v}\r\n"));
                        }
                        text.push_str("\r\n");
                        text.push_str(&body);
                        break out.write_all(text.as_bytes()).is_ok();
                    }
                }
            };
            self.busy.fetch_sub(1, Ordering::SeqCst);
            if !keep {
                let _ = out.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
    }
}

/// A port on 127.0.0.1 nothing listens on (bound, then let go).
pub fn refused_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    drop(l);
    format!("http://{addr}")
}

/// The program both kinds of HTTP test use: one event `Paid`, connection `c` at `url`
/// with `conn` added to its block, action `record` with `action` added, and
/// subscriber `rec` whose run limit is `run_timeout`.
pub fn program_text(url: &str, conn: &str, action: &str, run_timeout: &str) -> String {
    format!(
        r#"event Paid {{
    id: string
    cents: int
}}

connection c {{
    url: "{url}"
    {conn}
}}

action record(id: string, cents: int) {{
    via: c
    {action}
}}

subscriber rec {{
    on: Paid
    run: record(event.id, event.cents)
    timeout: {run_timeout}
}}
"#
    )
}
