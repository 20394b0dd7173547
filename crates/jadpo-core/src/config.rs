//! How the runtime runs, and the defaults the command line takes for its flags.
//!
//! Each default is written here once: `jadpoc run`'s `--workers` and `--batch`
//! defaults are these constants, and [`RuntimeConfig::default`] is built from them.

use jadpo_check::budget::SECOND_MS;

/// Workers when `--workers` is not given.
pub const DEFAULT_WORKERS: usize = 4;
/// The most workers `--workers` accepts (each adds a claim's worth of in-flight permits).
pub const MAX_WORKERS: usize = 256;
/// Most attempts one worker adds to its process's in flight when `--batch`
/// is not given: a process has `batch` x `workers` in flight, and one claim
/// takes up to half of them.
pub const DEFAULT_BATCH: usize = 256;
/// The largest batch accepted.
pub const MAX_BATCH: usize = 4096;
/// How often an idle run looks for work other processes added.
pub const DEFAULT_POLL_MS: u64 = 100;
/// How long running attempts and schedule runs may finish after a stop before they
/// are cut off (`abandoned`).
pub const DEFAULT_STOP_GRACE_MS: u64 = 10 * SECOND_MS;
/// How long, at most, a run on a store with one writer leaves an outcome for its
/// next claim to write in the claim's own transaction before writing it alone.
pub const LEFT_TO_CLAIMS: std::time::Duration = std::time::Duration::from_millis(10);
/// How long, at most, a claim on a store with one writer waits for a quarter of
/// its permits when most are in flight, rather than commit for the few free.
pub const CLAIM_GATHER: std::time::Duration = std::time::Duration::from_millis(2);
/// How often the tick runs (breaker sweeps, schedules).
pub const TICK_MS: u64 = SECOND_MS;
/// How often, at least, a process's claims on PostgreSQL read the due indexes
/// from their heads rather than on from where its last claim stopped (a row
/// another process let go of behind that point waits this long at most).
pub const CLAIM_FROM_HEAD_EVERY_MS: u64 = TICK_MS;
/// How often `jadpoc run --retain` prunes what is older than its cut.
pub const RETAIN_EVERY_MS: u64 = 5 * 60 * SECOND_MS;
/// Most deliveries retention deletes in one transaction, so that a running
/// `run` is never kept waiting long on the store.
pub const PRUNE_BATCH: usize = 1_000;
/// How long a loop waits after a store error before it tries again; the pause
/// doubles with each error in a row, up to [`STORE_ERROR_PAUSE_MAX_MS`].
pub const STORE_ERROR_PAUSE_MS: u64 = SECOND_MS;
/// The longest pause after store errors in a row (a database restarting, a
/// network down): `jadpoc run` never gives up on its store.
pub const STORE_ERROR_PAUSE_MAX_MS: u64 = 5 * SECOND_MS;
/// How old the store's figures served by `--metrics` (deliveries by state, the
/// breakers, the oldest pending delivery) may be before a scrape reads them again.
pub const METRICS_REFRESH_MS: u64 = 5 * SECOND_MS;
/// The connections the `--metrics` server serves at once; more wait to be accepted.
pub const METRICS_MAX_CONNECTIONS: usize = 16;

/// How the runtime runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Claim loops (`--workers`).
    pub workers: usize,
    /// Most attempts one worker adds to its process's in flight (see
    /// [`DEFAULT_BATCH`]).
    pub batch: usize,
    /// How often an idle loop looks for work other processes added.
    pub poll_ms: u64,
    /// How long running attempts and schedule runs may finish after a stop.
    pub stop_grace_ms: u64,
    /// With `--retain`: final deliveries older than this are pruned every
    /// [`RETAIN_EVERY_MS`].
    pub retain_ms: Option<u64>,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            workers: DEFAULT_WORKERS,
            batch: DEFAULT_BATCH,
            poll_ms: DEFAULT_POLL_MS,
            stop_grace_ms: DEFAULT_STOP_GRACE_MS,
            retain_ms: None,
        }
    }
}
