//! A program's version: what a store keeps of each program that wrote to it, so
//! that processes running different programs on one store (a rolling deploy)
//! leave each other's deliveries alone, and `jadpoc diff --db` and `jadpoc run`
//! can compare a new program with what the store holds.

use jadpo_check::program::DeliveryState;
use jadpo_check::program::Program;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How long a process that has not been seen is still counted as running: three
/// of its ticks' heartbeats missed (a killed process stops counting after this).
pub const PROCESS_LIVE_MS: u64 = 15_000;

/// How often a running process notes that it is alive (at most; its tick does).
pub const HEARTBEAT_EVERY_MS: u64 = 5_000;

/// One of a program's files as it was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceText {
    /// Its path, as given to the command.
    pub path: String,
    /// Its text.
    pub text: String,
}

/// A checked program as a store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramVersion {
    /// The SHA-256 of the program's canonical form (its checked `Program` as
    /// JSON, tests left out), in hex: the same for any layout, comments or file
    /// split of one program.
    pub hash: String,
    /// Its files, so that a later program can be compared with it.
    pub sources: Vec<SourceText>,
    /// The subscribers it runs, with the names they were called before (`was:`).
    pub subscribers: Vec<String>,
    /// When a store first kept it.
    pub created_at_ms: i64,
    /// The findings of `jadpoc diff` an operator accepted when this version
    /// started over another (their codes).
    pub accepted: Vec<String>,
}

impl ProgramVersion {
    /// The version of `program`, checked from `sources`.
    pub fn of(program: &Program, sources: Vec<SourceText>) -> ProgramVersion {
        ProgramVersion {
            hash: hash(program),
            sources,
            subscribers: program.subscribers.iter().flat_map(|s| s.was.iter().chain([&s.name]).cloned()).collect(),
            created_at_ms: 0,
            accepted: Vec::new(),
        }
    }

    /// The first 12 hex digits of the hash: how people see a version.
    pub fn short(&self) -> &str {
        short(&self.hash)
    }
}

/// The first 12 hex digits of a version's hash.
pub fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The content hash of a program's canonical form.
pub fn hash(program: &Program) -> String {
    let canonical = Program { tests: Vec::new(), ..program.clone() };
    // Serializing a program's plain data cannot fail; an empty text would still
    // hash to one value.
    let json = serde_json::to_vec(&canonical).unwrap_or_default();
    let digest = Sha256::digest(&json);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// A process that runs a program on a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRow {
    /// Its id: host, process id and start, unique among a store's processes.
    pub id: String,
    /// Its host's name.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The hash of the program it runs.
    pub version: String,
    /// When it started.
    pub started_at_ms: i64,
}

impl ProcessRow {
    /// This process, running `version`, started at `started_at_ms` on `host`.
    pub fn this(host: &str, version: &str, started_at_ms: i64) -> ProcessRow {
        let pid = std::process::id();
        ProcessRow {
            id: format!("{host}:{pid}:{started_at_ms}"),
            host: host.to_string(),
            pid,
            version: version.to_string(),
            started_at_ms,
        }
    }
}

/// A process as `jadpoc status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessView {
    /// Its id.
    pub id: String,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// When it started.
    pub started_at_ms: i64,
    /// When it was last seen alive.
    pub seen_at_ms: i64,
}

/// A program version as `jadpoc status` shows it: the processes running it now and
/// the deliveries its events made that are still to end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionView {
    /// Its number in the store (events carry it).
    pub id: i64,
    /// Its hash.
    pub hash: String,
    /// When the store first kept it.
    pub created_at_ms: i64,
    /// The diff codes accepted when it started.
    pub accepted: Vec<String>,
    /// The processes running it now (seen within [`PROCESS_LIVE_MS`]).
    pub processes: Vec<ProcessView>,
    /// Deliveries of its events not ended yet (pending, running, held, parked or
    /// orphaned).
    pub in_flight: u64,
}

/// Deliveries not ended of one subscriber, through one connection, in one state:
/// what a store holds that a new program inherits (`jadpoc diff --db`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BacklogRow {
    /// The subscriber.
    pub subscriber: String,
    /// The connection.
    pub connection: String,
    /// The state: one of a delivery not ended (those of
    /// [`crate::rules::BLOCKS_ITS_KEY`]).
    pub state: DeliveryState,
    /// How many.
    pub count: u64,
    /// When the oldest of them was created.
    pub oldest_created_ms: i64,
}

/// The cut of a budget check at `now_ms`: a delivery whose window started (with
/// its time held added) before it is past `within_ms`, as
/// [`crate::rules::Record::window_end_ms`] says.
pub fn window_cut_ms(now_ms: i64, within_ms: u64) -> i64 {
    now_ms.saturating_sub(crate::rules::ms_i64(within_ms))
}

/// The versions worth showing of `versions` (newest first, as
/// [`crate::store::Views::versions`] reads them): the newest, and every other
/// one running or with deliveries in flight.
pub fn shown(versions: &[VersionView]) -> impl Iterator<Item = (bool, &VersionView)> {
    versions
        .iter()
        .enumerate()
        .filter(|(i, v)| *i == 0 || !v.processes.is_empty() || v.in_flight > 0)
        .map(|(i, v)| (i == 0, v))
}

/// An orphaned delivery as the store read it, for a process whose program has its
/// subscriber to take back ([`crate::rules::held_when_adopted`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanRow {
    /// The delivery's id.
    pub id: i64,
    /// Its subscriber.
    pub subscriber: String,
    /// Its time held so far.
    pub held_ms: i64,
    /// When it was orphaned (its `held_since`).
    pub orphaned_at_ms: Option<i64>,
}
