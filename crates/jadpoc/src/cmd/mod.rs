//! One module per subcommand: its clap arguments and its `run`.

pub mod breakers;
pub mod check;
pub mod console;
pub mod deliveries;
pub mod diff;
pub mod emit;
pub mod events;
pub mod explain;
pub mod fmt;
pub mod lsp;
pub mod migrate;
pub mod plan;
pub mod prune;
pub mod run;
pub mod status;
pub mod test;

/// The async runtime of a command that serves or runs (`run`, `console`), or
/// the exit code after saying why there is none.
pub(crate) fn async_runtime() -> Result<tokio::runtime::Runtime, std::process::ExitCode> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| {
        eprintln!("jadpoc: cannot start the async runtime: {e}");
        std::process::ExitCode::from(2)
    })
}

/// The address of `--FLAG S`: `HOST:PORT`, or a bare port on loopback.
pub(crate) fn listen_addr(flag: &str, s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    s.parse().map_err(|_| format!("`--{flag} {s}` is not an address such as `127.0.0.1:7300`"))
}

/// SIGINT or SIGTERM.
pub(crate) async fn wait_for_signal() {
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
