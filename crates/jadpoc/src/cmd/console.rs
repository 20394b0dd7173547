//! `jadpoc console`: serve the operator's web console on a store (SQLite or
//! PostgreSQL) that any number of `jadpoc run` processes write; and what `jadpoc
//! run --console` starts beside its run.

use crate::store::{DbArg, Open, open_store};
use jadpo_check::program::Program;
use jadpo_console::{Console, DEFAULT_LISTEN, Settings};
use jadpo_core::clock::Clock;
use jadpo_core::store::Store;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::sync::watch;

#[derive(clap::Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    db: DbArg,
    /// The address to serve the console on; a bare port binds to loopback. Any
    /// address but loopback needs `--token`.
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    listen: String,
    /// Turn on the actions (retry, replay, pause, resume); without it the console
    /// only reads.
    #[arg(long = "console-actions")]
    actions: bool,
    /// Ask every request for this token, read from the environment: `--token
    /// env:NAME` (a `Bearer` header, or the login form's cookie).
    #[arg(long, value_name = "env:NAME")]
    token: Option<String>,
    /// The program's files and folders, for replays (checked against it) and for
    /// pausing a connection that has no breaker yet; repeat for more.
    #[arg(long, value_name = "PATH")]
    program: Vec<PathBuf>,
}

/// The value of `--FLAG env:NAME`, read now.
pub fn token(flag: &str, spec: Option<&str>) -> Result<Option<String>, String> {
    let Some(spec) = spec else { return Ok(None) };
    let Some(name) = spec.strip_prefix("env:").filter(|n| !n.is_empty()) else {
        return Err(format!("`--{flag} {spec}` names where the token is: `env:NAME`, a variable holding it"));
    };
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().to_string())),
        Ok(_) => Err(format!("`--{flag} {spec}`: the environment variable `{name}` is empty")),
        Err(_) => Err(format!("`--{flag} {spec}`: the environment variable `{name}` is not set")),
    }
}

/// What a console needs before it starts: checked so that a refused address
/// or a missing token stops the command before anything runs.
pub struct Planned {
    pub addr: SocketAddr,
    pub actions: bool,
    pub token: Option<String>,
}

impl Planned {
    /// `--FLAG ADDR` with its actions and token, or why not.
    pub fn new(flag: &str, addr: &str, actions: bool, token: Option<String>) -> Result<Planned, String> {
        let addr = crate::cmd::listen_addr(flag, addr)?;
        jadpo_console::check_listen(&addr, token.is_some())?;
        Ok(Planned { addr, actions, token })
    }

    /// Bind and serve the console until `stop`; the task that drains it at the stop.
    pub async fn start(
        self,
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        program: Option<Arc<Program>>,
        stop: watch::Receiver<bool>,
    ) -> Result<tokio::task::JoinHandle<()>, ExitCode> {
        let listener = match tokio::net::TcpListener::bind(self.addr).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("jadpoc: cannot serve the console on `{}`: {e}", self.addr);
                return Err(ExitCode::from(2));
            }
        };
        let addr = listener.local_addr().unwrap_or(self.addr);
        eprintln!(
            "jadpoc: serving the console at http://{addr}/ ({}{})",
            if self.actions { "actions on" } else { "read-only" },
            if self.token.is_some() { ", token required" } else { "" }
        );
        let settings = Settings { actions: self.actions, token: self.token, listen: addr };
        let console = Arc::new(Console::new(store, clock, program, settings));
        Ok(tokio::spawn(jadpo_console::serve(listener, console, stop)))
    }
}

pub fn run(args: ConsoleArgs) -> ExitCode {
    let planned = match token("token", args.token.as_deref())
        .and_then(|t| Planned::new("listen", &args.listen, args.actions, t))
    {
        Ok(p) => p,
        Err(m) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let program = if args.program.is_empty() {
        None
    } else {
        match crate::load::program_for_run(&args.program) {
            Ok(p) => Some(Arc::new(p)),
            Err(code) => return code,
        }
    };
    // Read-only unless it acts: then nothing is created, migrated or locked.
    let how = if args.actions { Open::Existing } else { Open::ReadOnly };
    let store: Arc<dyn Store> = match open_store(&args.db, how) {
        Ok(s) => Arc::from(s),
        Err(code) => return code,
    };
    let clock = crate::store::clock_for(&*store);
    let tokio = match super::async_runtime() {
        Ok(t) => t,
        Err(code) => return code,
    };
    tokio.block_on(async move {
        let (stop_tx, stop_rx) = watch::channel(false);
        let server = match planned.start(store, clock, program, stop_rx).await {
            Ok(s) => s,
            Err(code) => return code,
        };
        eprintln!("jadpoc: console on `{}` (stop with ctrl-c)", crate::store::shown(&args.db.location()));
        crate::cmd::wait_for_signal().await;
        stop_tx.send_replace(true);
        let _ = server.await;
        eprintln!("jadpoc: stopped");
        ExitCode::SUCCESS
    })
}
