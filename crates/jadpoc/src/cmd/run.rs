//! `jadpoc run`: check the program, open the store, and run the outbox until
//! SIGINT or SIGTERM. Logs go to stderr, one line per attempt outcome. Each
//! connection calls its provider over HTTP unless `--fake` names it.

use crate::args::{ProgramPaths, plural};
use crate::store::{DbArg, Open, open_store};
use jadpo_check::program::Program;
use jadpo_core::clock::Clock;
use jadpo_core::config::{self, RuntimeConfig};
use jadpo_core::drivers::{Driver, FakeDriver, parse_answers};
use jadpo_core::rng::RandomSource;
use jadpo_core::steps::{Observer, Runtime};
use jadpo_core::store::Store;
use jadpo_core::version::ProcessRow;
use jadpo_http::client::{HttpClient, HttpDriver};
use jadpo_http::ingest::{DEFAULT_MAX_CONNECTIONS, Ingest, IngestLimits, serve};
use jadpo_http::metrics::{METRICS_PATH, Metrics, MetricsSource};
use jadpo_http::signing::Verifier;
use jadpo_runtime::live::Live;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    program: ProgramPaths,
    #[command(flatten)]
    db: DbArg,
    /// Claim loops running deliveries.
    #[arg(long, value_name = "N", default_value_t = config::DEFAULT_WORKERS as u16,
          value_parser = clap::value_parser!(u16).range(1..=config::MAX_WORKERS as i64))]
    workers: u16,
    /// Start over a store that ran another program last although `jadpoc diff`
    /// finds these breaking changes (codes, repeated or comma-separated); kept
    /// with the program's version.
    #[arg(long, value_name = "CODE", value_delimiter = ',')]
    accept: Vec<String>,
    /// Put the fake driver in place of a connection's: `--fake ledger='unavailable*5,ok'`.
    #[arg(long = "fake", value_name = "CONNECTION=ANSWERS")]
    fakes: Vec<String>,
    /// Also take events over HTTP at this address (`POST /events/NAME`); a bare port
    /// binds to loopback.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Serve Prometheus metrics at `GET /metrics` on this address (and on `--listen`'s
    /// too); a bare port binds to loopback.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<String>,
    /// Serve the operator's web console on this address (read-only unless
    /// `--console-actions`); a bare port binds to loopback, and any other
    /// address needs `--console-token`.
    #[arg(long, value_name = "ADDR")]
    console: Option<String>,
    /// Turn on the console's actions (retry, replay, pause, resume).
    #[arg(long = "console-actions", requires = "console")]
    console_actions: bool,
    /// Ask every console request for this token, read from the environment:
    /// `--console-token env:NAME`.
    #[arg(long = "console-token", value_name = "env:NAME", requires = "console")]
    console_token: Option<String>,
    /// Take only events signed with this secret (Standard Webhooks, `whsec_...`),
    /// read from the environment: `--verify-secret env:NAME`; give it twice while a
    /// sender moves from one secret to the next. Others get `401`.
    #[arg(long = "verify-secret", value_name = "env:NAME", requires = "listen")]
    verify_secrets: Vec<String>,
    /// Most connections `--listen` serves at once; more wait to be accepted.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_connections: u32,
    /// How log lines are written (to stderr).
    #[arg(long, value_enum, default_value = "text")]
    log_format: crate::logging::LogFormat,
    /// Prune final deliveries older than this in the background (as `jadpoc prune
    /// --older-than`, failed and parked ones kept), every few minutes.
    #[arg(long, value_name = "DURATION", value_parser = crate::cmd::prune::duration)]
    retain: Option<u64>,
    /// Attempts in flight per claim loop; a claim takes up to half the
    /// process's (for benchmarks).
    #[arg(long, hide = true, default_value_t = config::DEFAULT_BATCH)]
    batch: usize,
    /// How often an idle claim loop looks for events other processes stored, in
    /// milliseconds (for tests of the wake-ups that make polling a fallback).
    #[arg(long, hide = true, value_name = "MS", default_value_t = config::DEFAULT_POLL_MS)]
    poll_ms: u64,
}

/// The drivers for each connection: the fake driver where a `--fake` flag names it,
/// the HTTP driver (one shared client, `env("NAME")` headers read now) elsewhere.
fn drivers(program: &Program, fakes: &[String], random: &RandomSource) -> Result<Vec<Arc<dyn Driver>>, String> {
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
                    None => {
                        client.insert(HttpClient::new().map_err(|e| e.to_string())?.with_random(random.clone())).clone()
                    }
                };
                Arc::new(HttpDriver::new(program, i, client, &env).map_err(|e| e.to_string())?)
            }
        };
        drivers.push(driver);
    }
    Ok(drivers)
}

/// The verifier of `--verify-secret env:NAME` flags, each secret read from its
/// variable now; none without the flag.
fn verifier(flags: &[String]) -> Result<Option<Arc<Verifier>>, String> {
    if flags.is_empty() {
        return Ok(None);
    }
    let mut secrets = Vec::with_capacity(flags.len());
    for flag in flags {
        let Some(name) = flag.strip_prefix("env:").filter(|n| !n.is_empty()) else {
            return Err(format!(
                "`--verify-secret {flag}` names where the secret is: `env:NAME`, a variable holding `whsec_...`"
            ));
        };
        let value = std::env::var(name)
            .map_err(|_| format!("`--verify-secret {flag}`: the environment variable `{name}` is not set"))?;
        secrets.push(value);
    }
    Verifier::new(&secrets)
        .map(|v| Some(Arc::new(v)))
        .map_err(|problem| format!("`--verify-secret`: a secret {problem}"))
}

pub fn run(args: RunArgs) -> ExitCode {
    let loaded = match crate::load::load_for_run(&args.program.paths) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    // One random source for the run: the waits between attempts and the drivers' re-sends.
    let random = RandomSource::from_system();
    let drivers = match drivers(&loaded.program, &args.fakes, &random) {
        Ok(d) => d,
        Err(m) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let verifier = match verifier(&args.verify_secrets) {
        Ok(v) => v,
        Err(m) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let listen = match args.listen.as_deref().map(|s| super::listen_addr("listen", s)).transpose() {
        Ok(a) => a,
        Err(m) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let metrics_addr = match args.metrics.as_deref().map(|s| super::listen_addr("metrics", s)).transpose() {
        Ok(a) => a,
        Err(m) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let console = match args.console.as_deref().map(|addr| {
        crate::cmd::console::token("console-token", args.console_token.as_deref())
            .and_then(|t| crate::cmd::console::Planned::new("console", addr, args.console_actions, t))
    }) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(m)) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let store: Arc<dyn Store> = match open_store(&args.db, Open::CreateIfMissing) {
        Ok(s) => Arc::from(s),
        Err(code) => return code,
    };
    // The store's clock on PostgreSQL (every host alike), the host's on SQLite.
    let clock: Arc<dyn Clock> = crate::store::clock_for(&*store);
    crate::logging::install(args.log_format);
    let config = RuntimeConfig {
        workers: usize::from(args.workers),
        batch: args.batch.clamp(1, config::MAX_BATCH),
        retain_ms: args.retain,
        poll_ms: args.poll_ms.max(1),
        ..RuntimeConfig::default()
    };
    // A program other than the one the store ran last is compared with it first.
    let mut version = loaded.version();
    version.accepted = match crate::cmd::diff::check_before_run(&*store, &loaded, &args.accept, clock.now_ms()) {
        Ok(accepted) => accepted,
        Err(code) => return code,
    };
    // The files and the checker's index are not needed past the comparison.
    let crate::load::Loaded { program, sources, checked } = loaded;
    drop((sources, checked));
    let program = Arc::new(program);
    let process = ProcessRow::this(&crate::load::host_name(), &version.hash, clock.now_ms());
    let runtime = Runtime::new(program.clone(), store.clone(), clock.clone(), drivers, random, config)
        .with_presence(version, process);
    let metrics = metrics_addr.map(|_| {
        let metrics = Arc::new(Metrics::new(&program));
        MetricsSource { metrics, store: store.clone(), clock: clock.clone() }
    });
    let observer = metrics.as_ref().map(|m| m.metrics.clone() as Arc<dyn Observer>);
    let runtime = Arc::new(Live::new(runtime, observer));
    let tokio = match super::async_runtime() {
        Ok(t) => t,
        Err(code) => return code,
    };
    tokio.block_on(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let mut server = None;
        let mut metrics_server = None;
        if let (Some(addr), Some(source)) = (metrics_addr, &metrics) {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => {
                    let shown = l.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| addr.to_string());
                    eprintln!("jadpoc: serving metrics at http://{shown}{METRICS_PATH}");
                    let serve = jadpo_http::metrics::serve(l, source.clone(), stop_rx.clone());
                    metrics_server = Some(tokio::spawn(serve));
                }
                Err(e) => {
                    eprintln!("jadpoc: cannot serve metrics on `{addr}`: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        let mut console_server = None;
        if let Some(planned) = console {
            match planned.start(store.clone(), clock.clone(), Some(program.clone()), stop_rx.clone()).await {
                Ok(s) => console_server = Some(s),
                Err(code) => return code,
            }
        }
        if let Some(addr) = listen {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => {
                    let shown = l.local_addr().map(|a| a.to_string()).unwrap_or_else(|_| addr.to_string());
                    eprintln!("jadpoc: taking events at http://{shown}/events/NAME");
                    let limits = IngestLimits { max_connections: args.max_connections, ..IngestLimits::default() };
                    let ingest = Ingest {
                        program: program.clone(),
                        store: store.clone(),
                        clock,
                        wake: runtime.waker(),
                        limits,
                        metrics: metrics.clone(),
                        verifier: verifier.clone(),
                    };
                    server = Some(tokio::spawn(serve(l, ingest, stop_rx.clone())));
                }
                Err(e) => {
                    eprintln!("jadpoc: cannot listen on `{addr}`: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        eprintln!(
            "jadpoc: running {} and {} on `{}` with {} (stop with ctrl-c)",
            plural(program.subscribers.len() as u64, "subscriber"),
            plural(program.schedules.len() as u64, "schedule"),
            crate::store::shown(&args.db.location()),
            plural(u64::from(args.workers), "worker"),
        );
        let signal = stop_tx.clone();
        tokio::spawn(async move {
            super::wait_for_signal().await;
            eprintln!("jadpoc: stopping: taking no more work, finishing what is under way");
            signal.send_replace(true);
        });
        let result = runtime.run(stop_rx).await;
        // A run stopped by a fault stops the servers too. Each drains: the
        // requests it read are answered before the process ends.
        stop_tx.send_replace(true);
        for s in [server, metrics_server, console_server].into_iter().flatten() {
            let _ = s.await;
        }
        match result {
            Ok(summary) => {
                if summary.abandoned > 0 {
                    eprintln!(
                        "jadpoc: stopped; {} still running {} cut off (an attempt comes back when its lease ends)",
                        plural(summary.abandoned, "call"),
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
