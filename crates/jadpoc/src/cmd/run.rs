//! `jadpoc run`: check the program, open the store, and run the outbox until
//! SIGINT or SIGTERM. Logs go to stderr, one line per attempt outcome. Each
//! connection calls its provider over HTTP unless `--fake` names it.

use jadpo_check::program::Program;
use jadpo_runtime::clock::{Clock, SystemClock};
use jadpo_runtime::config::{self, RuntimeConfig};
use jadpo_runtime::drivers::{Driver, FakeDriver, parse_answers};
use jadpo_runtime::events::{LogFormat, Logger};
use jadpo_runtime::http::{HttpClient, HttpDriver};
use jadpo_runtime::ingest::{Ingest, serve};
use jadpo_runtime::rng::RandomSource;
use jadpo_runtime::steps::Runtime;
use jadpo_runtime::store::{self, Location, OpenOptions, Store};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// The store used when `--db` is not given.
pub const DEFAULT_DB: &str = ".jadpo/outbox.db";

#[derive(clap::Args)]
pub struct RunArgs {
    /// The program's files or folders (`.` when none).
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The store (created with its folder if missing).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_DB)]
    db: PathBuf,
    /// Claim loops running deliveries.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_WORKERS as u16,
          value_parser = clap::value_parser!(u16).range(1..=config::MAX_WORKERS as i64))]
    workers: u16,
    /// Put the fake driver in place of a connection's: `--fake ledger='unavailable*5,ok'`.
    #[arg(long = "fake", value_name = "CONNECTION=ANSWERS")]
    fakes: Vec<String>,
    /// Also take events over HTTP at this address (`POST /events/NAME`); a bare port
    /// binds to loopback.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// How log lines are written (to stderr).
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormatArg,
    /// Most deliveries one claim takes (for benchmarks).
    #[arg(long, hide = true, default_value_t = config::DEFAULT_BATCH)]
    batch: usize,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

/// Open the store at `db`: read-write (created with its folder if missing) when
/// `create`, else read-only (the listing commands only read). A one-line message
/// and exit 2 when it cannot be.
pub fn open_store(db: &Path, create: bool) -> Result<Box<dyn Store>, ExitCode> {
    // `JADPO_DATABASE_URL` names the store when `--db` is left at its default.
    let given = db.to_string_lossy();
    let location = if given == DEFAULT_DB {
        Location::choose(None, std::env::var(store::DATABASE_URL_ENV).ok().as_deref())
    } else {
        Location::parse(&given)
    };
    let options = if create { OpenOptions::read_write() } else { OpenOptions::read_only() };
    store::open(&location, options).map_err(|e| {
        eprintln!("jadpoc: {e}");
        ExitCode::from(2)
    })
}

/// The drivers for each connection: the fake driver where a `--fake` flag names it,
/// the HTTP driver (one shared client, `env("NAME")` headers read now) elsewhere.
fn drivers(program: &Program, fakes: &[String]) -> Result<Vec<Arc<dyn Driver>>, String> {
    let mut faked: Vec<Option<Arc<dyn Driver>>> = vec![None; program.connections.len()];
    for flag in fakes {
        let Some((name, script)) = flag.split_once('=') else {
            return Err(format!("`--fake {flag}` must be CONNECTION=ANSWERS"));
        };
        let Some(i) = program.connection(name.trim()) else {
            let known: Vec<String> = program.connections.iter().map(|c| format!("`{}`", c.name)).collect();
            return Err(format!(
                "`--fake {flag}`: no connection `{}` (declared: {})",
                name.trim(),
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ));
        };
        let answers = parse_answers(script).map_err(|e| e.to_string())?;
        faked[i] = Some(Arc::new(FakeDriver::new(answers)));
    }
    // Made only when a connection calls out, so a run faking every connection
    // needs no TLS roots.
    let mut client: Option<HttpClient> = None;
    let env = |name: &str| std::env::var_os(name);
    let mut drivers = Vec::with_capacity(faked.len());
    for (i, fake) in faked.into_iter().enumerate() {
        let driver: Arc<dyn Driver> = match fake {
            Some(fake) => fake,
            None => {
                let client = match &client {
                    Some(c) => c.clone(),
                    None => client.insert(HttpClient::new().map_err(|e| e.to_string())?).clone(),
                };
                Arc::new(HttpDriver::new(program, i, client, &env).map_err(|e| e.to_string())?)
            }
        };
        drivers.push(driver);
    }
    Ok(drivers)
}

fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| format!("`--listen {s}` is not an address such as `127.0.0.1:7300`"))
}

pub fn run(args: RunArgs) -> ExitCode {
    let program = match crate::load::program_for_run(&args.files) {
        Ok(p) => Arc::new(p),
        Err(code) => return code,
    };
    let drivers = match drivers(&program, &args.fakes) {
        Ok(d) => d,
        Err(m) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let listen = match args.listen.as_deref().map(listen_addr).transpose() {
        Ok(a) => a,
        Err(m) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let store: Arc<dyn Store> = match open_store(&args.db, true) {
        Ok(s) => Arc::from(s),
        Err(code) => return code,
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let logger = Arc::new(Logger::new(match args.log_format {
        LogFormatArg::Text => LogFormat::Text,
        LogFormatArg::Json => LogFormat::Json,
    }));
    let config = RuntimeConfig {
        workers: usize::from(args.workers),
        batch: args.batch.clamp(1, config::MAX_BATCH),
        ..RuntimeConfig::default()
    };
    let random = RandomSource::from_system();
    let runtime =
        Arc::new(Runtime::new(program.clone(), store.clone(), clock.clone(), drivers, logger, random, config));
    let tokio = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("jadpoc: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    tokio.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut server = None;
        if let Some(addr) = listen {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => {
                    let shown = l.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| addr.to_string());
                    eprintln!("jadpoc: taking events at http://{shown}/events/NAME");
                    let ingest =
                        Ingest { program: program.clone(), store: store.clone(), clock, wake: runtime.waker() };
                    server = Some(tokio::spawn(serve(l, ingest, stop_rx.clone())));
                }
                Err(e) => {
                    eprintln!("jadpoc: cannot listen on `{addr}`: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        eprintln!(
            "jadpoc: running {} subscriber{} and {} schedule{} on `{}` with {} worker{} (stop with ctrl-c)",
            program.subscribers.len(),
            if program.subscribers.len() == 1 { "" } else { "s" },
            program.schedules.len(),
            if program.schedules.len() == 1 { "" } else { "s" },
            args.db.display(),
            args.workers,
            if args.workers == 1 { "" } else { "s" },
        );
        tokio::spawn(async move {
            wait_for_signal().await;
            let _ = stop_tx.send(true);
        });
        let result = runtime.run(stop_rx).await;
        if let Some(s) = server {
            s.abort();
        }
        match result {
            Ok(summary) => {
                if summary.abandoned > 0 {
                    eprintln!(
                        "jadpoc: stopped; {} call{} still running {} cut off (an attempt comes back when its \
                         lease ends)",
                        summary.abandoned,
                        if summary.abandoned == 1 { "" } else { "s" },
                        if summary.abandoned == 1 { "was" } else { "were" }
                    );
                } else {
                    eprintln!("jadpoc: stopped");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("jadpoc: {e}");
                ExitCode::from(2)
            }
        }
    })
}

/// SIGINT or SIGTERM.
async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
