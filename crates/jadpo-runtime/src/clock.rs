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
