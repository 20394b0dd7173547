//! The clock behind the runtime: the system clock for `jadpoc run`; a virtual clock
//! for `jadpoc test` implements the same trait.

use std::future::Future;
use std::pin::Pin;

/// A boxed future, so that the clock and the drivers stay object-safe.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Where the runtime reads the time and waits.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// Wait until `at_ms` (at once if it has passed).
    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'_, ()>;
}

/// The system's wall clock, with tokio's timer for waits.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        i64::try_from(now.as_millis()).unwrap_or(i64::MAX)
    }

    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'_, ()> {
        let wait = at_ms.saturating_sub(self.now_ms()).max(0);
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(wait as u64)))
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

    /// A sleep in virtual time is a jump: nothing else runs meanwhile (the scenario
    /// driver is sequential), so the clock moves to `at_ms` at once.
    fn sleep_until(&self, at_ms: i64) -> BoxFuture<'_, ()> {
        self.advance_to(at_ms);
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_time_only_moves_forward_and_sleeping_jumps() {
        let c = VirtualClock::new(5);
        c.advance_to(3);
        assert_eq!(c.now_ms(), 5);
        drop(c.sleep_until(1_000));
        assert_eq!(c.now_ms(), 1_000);
    }
}
