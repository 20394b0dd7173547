//! A tiny provider to point a jadpo connection at: it answers every `POST` with
//! `503 Service Unavailable` the first `--fail N` times (default 1), then `200 OK`,
//! and prints one line per call (`--quiet` prints none, for benchmarks).
//!
//! ```text
//! cargo run --example provider -p jadpo-http -- [--port 8080] [--fail 1] [--retry-after SECS] [--quiet]
//! ```
//!
//! HTTP/1.1 with keep-alive, on 127.0.0.1 only; no dependency beyond tokio.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Options {
    port: u16,
    fail: u64,
    retry_after: Option<u64>,
    quiet: bool,
}

fn options() -> Result<Options, String> {
    let mut o = Options { port: 8080, fail: 1, retry_after: None, quiet: false };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut number = |name: &str| -> Result<u64, String> {
            let v = args.next().ok_or_else(|| format!("`{name}` needs a number"))?;
            v.parse().map_err(|_| format!("`{name} {v}`: not a number"))
        };
        match a.as_str() {
            "--port" => o.port = u16::try_from(number("--port")?).map_err(|_| "`--port`: too large".to_string())?,
            "--fail" => o.fail = number("--fail")?,
            "--retry-after" => o.retry_after = Some(number("--retry-after")?),
            "--quiet" => o.quiet = true,
            other => {
                return Err(format!("unknown option `{other}` (try `--port`, `--fail`, `--retry-after`, `--quiet`)"));
            }
        }
    }
    Ok(o)
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let o = match options() {
        Ok(o) => Arc::new(o),
        Err(e) => {
            eprintln!("provider: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let listener = match TcpListener::bind(("127.0.0.1", o.port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("provider: cannot listen on 127.0.0.1:{}: {e}", o.port);
            return std::process::ExitCode::from(2);
        }
    };
    eprintln!("provider: listening on http://127.0.0.1:{}; the first {} call(s) get 503, then 200", o.port, o.fail);
    let calls = Arc::new(AtomicU64::new(0));
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let (o, calls) = (o.clone(), calls.clone());
        tokio::spawn(async move {
            let _ = serve(stream, &o, &calls).await;
        });
    }
}

/// Answer the requests of one connection until it closes.
async fn serve(mut stream: TcpStream, o: &Options, calls: &AtomicU64) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    loop {
        // Read a whole request: its head, then as much body as Content-Length says.
        let (head_end, body_len) = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                break (end + 4, len);
            }
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        while buf.len() < head_end + body_len {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let body = String::from_utf8_lossy(&buf[head_end..head_end + body_len]).into_owned();
        buf.drain(..head_end + body_len);

        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        let ok = n > o.fail;
        if !o.quiet {
            let line = head.lines().next().unwrap_or("");
            let key = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("idempotency-key:").map(|v| v.trim().to_string()))
                .unwrap_or_else(|| "-".into());
            let attempt = serde_json::from_str::<serde_json::Value>(&body).ok().map(|v| v["attempt"].to_string());
            println!(
                "provider: call #{n}: {line}, Idempotency-Key {key}, attempt {} -> {}",
                attempt.as_deref().unwrap_or("?"),
                if ok { "200 OK" } else { "503 Service Unavailable" }
            );
        }
        let answer = if ok {
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_string()
        } else {
            let retry = o.retry_after.map(|s| format!("Retry-After: {s}\r\n")).unwrap_or_default();
            format!("HTTP/1.1 503 Service Unavailable\r\n{retry}Content-Length: 0\r\n\r\n")
        };
        stream.write_all(answer.as_bytes()).await?;
    }
}
