//! Durations as the language writes them, and spaced for reading.

use crate::budget::{DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS};

/// Renders a duration in milliseconds the way the language writes it.
pub fn format_duration(ms: u64) -> String {
    duration_parts(ms).concat()
}

/// A duration for reading rather than writing back: `4h 15m 30s`.
pub fn format_duration_spaced(ms: u64) -> String {
    duration_parts(ms).join(" ")
}

fn duration_parts(ms: u64) -> Vec<String> {
    if ms == 0 {
        return vec!["0s".into()];
    }
    let mut parts = Vec::new();
    let mut rest = ms;
    for (unit, size) in [("d", DAY_MS), ("h", HOUR_MS), ("m", MINUTE_MS), ("s", SECOND_MS), ("ms", 1)] {
        if rest >= size {
            parts.push(format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    parts
}
