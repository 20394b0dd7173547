//! The clock behind the runtime: the system clock for `jadpoc run` on SQLite; the
//! database's clock, carried between readings by the host's monotonic time, for
//! `jadpoc run` on PostgreSQL (so that hosts whose clocks disagree behave as one);
//! a virtual clock for `jadpoc test`. All implement the same trait.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

/// A boxed future, so that the clock and the drivers stay object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where the runtime reads the time. Waiting is the driver's: the live driver
/// sleeps until a time on its async runtime's timer; the virtual-time driver moves
/// its clock instead.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// A reading of the store's own clock, `db_now_ms` as of `read_at`: a clock that
    /// follows the store's ([`AnchoredClock`]) takes it; the others ignore it.
    fn anchor(&self, _db_now_ms: i64, _read_at: Instant) {}
}

/// The environment variable that moves the host's wall clock by that many
/// milliseconds (negative: behind), for tests of hosts whose clocks disagree.
/// Test-only: `jadpoc` reads it; nothing else should set it.
pub const TEST_CLOCK_OFFSET_ENV: &str = "JADPO_TEST_CLOCK_OFFSET_MS";

/// The host's wall clock moved by a fixed offset (zero outside tests; see
/// [`TEST_CLOCK_OFFSET_ENV`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct HostClock {
    offset_ms: i64,
}

impl HostClock {
    /// The host's clock, moved by `offset_ms`.
    pub fn with_offset(offset_ms: i64) -> HostClock {
        HostClock { offset_ms }
    }
}

impl Clock for HostClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms().saturating_add(self.offset_ms)
    }
}

/// The store's clock between its readings: the last reading moved on by the
/// host's monotonic time since it was taken. The host's wall clock plays no part,
/// so every process reading one database's clock agrees on the time, however far
/// their hosts' clocks are apart; re-anchored at each reading (every tick), so the
/// host's monotonic drift never builds up. It never goes back.
#[derive(Debug)]
pub struct AnchoredClock {
    anchor: std::sync::Mutex<(i64, Instant)>,
    latest: std::sync::atomic::AtomicI64,
}

impl AnchoredClock {
    /// A clock reading `db_now_ms` as of `read_at`.
    pub fn new(db_now_ms: i64, read_at: Instant) -> AnchoredClock {
        AnchoredClock {
            anchor: std::sync::Mutex::new((db_now_ms, read_at)),
            latest: std::sync::atomic::AtomicI64::new(db_now_ms),
        }
    }
}

impl Clock for AnchoredClock {
    fn now_ms(&self) -> i64 {
        let (at, read_at) = *self.anchor.lock().unwrap_or_else(|e| e.into_inner());
        let since = i64::try_from(read_at.elapsed().as_millis()).unwrap_or(i64::MAX);
        let now = at.saturating_add(since);
        // A new reading a little behind the old one's projection must not move
        // the time back.
        let before = self.latest.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
        now.max(before)
    }

    fn anchor(&self, db_now_ms: i64, read_at: Instant) {
        *self.anchor.lock().unwrap_or_else(|e| e.into_inner()) = (db_now_ms, read_at);
    }
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }
}

/// A time in milliseconds as RFC 3339 UTC (`2026-01-02T03:04:05.678Z`).
pub fn rfc3339(ms: i64) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(t) => t.to_string(),
        Err(_) => ms.to_string(),
    }
}

/// An RFC 3339 time as milliseconds since the Unix epoch.
pub fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    s.parse::<jiff::Timestamp>().ok().map(|t| t.as_millisecond())
}

/// A virtual time as an offset from a test's start: `+0s`, `+1m30s`.
pub fn format_offset(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "+" };
    format!("{sign}{}", jadpo_check::format_duration(ms.unsigned_abs()))
}

/// Virtual time for `jadpoc test`: it stands still until the scenario driver moves
/// it, so a test's course depends on its steps and its seed alone.
#[derive(Debug, Default)]
pub struct VirtualClock {
    now: std::sync::atomic::AtomicI64,
}

impl VirtualClock {
    /// A virtual clock reading `start_ms`.
    pub fn new(start_ms: i64) -> VirtualClock {
        VirtualClock { now: std::sync::atomic::AtomicI64::new(start_ms) }
    }

    /// Move the clock to `at_ms`; it never goes back.
    pub fn advance_to(&self, at_ms: i64) {
        self.now.fetch_max(at_ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Clock for VirtualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_only_moves_forward() {
        let c = VirtualClock::new(5);
        c.advance_to(3);
        assert_eq!(c.now_ms(), 5);
        c.advance_to(1_000);
        assert_eq!(c.now_ms(), 1_000);
    }

    #[test]
    fn an_anchored_clock_follows_its_readings_and_never_goes_back() {
        let start = Instant::now();
        let c = AnchoredClock::new(1_000_000, start);
        assert!(c.now_ms() >= 1_000_000);
        c.anchor(5_000_000, start);
        assert!(c.now_ms() >= 5_000_000);
        c.anchor(2_000_000, Instant::now());
        assert!(c.now_ms() >= 5_000_000, "the time went back");
    }
}
