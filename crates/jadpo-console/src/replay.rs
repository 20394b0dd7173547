//! Choosing what to replay and when, for `jadpoc events` and the console alike:
//! a replay's plan under today's program, and the times a selection names.

use jadpo_check::program::Program;
use jadpo_core::clock::parse_rfc3339_ms;
use jadpo_core::payload::new_event;
use jadpo_core::store::{EventView, Replay};

/// A `--since` or `--until` value in milliseconds since the epoch: an RFC 3339
/// time, or a duration (as the language writes them) before `now_ms`.
pub fn parse_time(flag: &str, text: &str, now_ms: i64) -> Result<i64, String> {
    if let Some(ms) = parse_rfc3339_ms(text) {
        return Ok(ms);
    }
    match jadpo_check::parse_duration(text) {
        Ok(ago) => Ok(now_ms.saturating_sub(i64::try_from(ago).unwrap_or(i64::MAX))),
        Err(_) => Err(format!(
            "`--{flag} {text}` is not a time: give an RFC 3339 time (`2026-12-01T09:00:00Z`) or a duration \
             ago (`90m`, `2h`, `7d`)"
        )),
    }
}

/// The replay of `event` under today's `program`, to every subscriber or only
/// to `only`: its payload is checked again as `jadpoc emit` checks one.
pub fn plan(program: &Program, event: &EventView, only: Option<&str>) -> Result<Replay, String> {
    if !event.expanded {
        return Err(format!(
            "event {} is not expanded yet (a running `jadpoc run` makes its deliveries first)",
            event.id
        ));
    }
    let mut new = new_event(program, &event.name, &event.payload).map_err(|e| {
        let was = if event.invalid.is_some() { " (it was stored invalid)" } else { "" };
        format!("event {} cannot be replayed: its payload does not validate now{was}: {e}", event.id)
    })?;
    if let Some(s) = only {
        new.deliveries.retain(|d| d.subscriber == s);
    }
    if new.deliveries.is_empty() {
        return Err(match only {
            Some(s) => format!("event {}: `{s}` does not subscribe to `{}`", event.id, event.name),
            None => format!("event {}: no subscriber of the program subscribes to `{}`", event.id, event.name),
        });
    }
    Ok(Replay { of: event.id, event: new })
}

#[cfg(test)]
mod tests {
    use super::parse_time;

    /// 2023-11-14T22:13:20Z.
    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn a_time_is_rfc_3339_or_a_duration_ago() {
        assert_eq!(parse_time("since", "2023-11-14T22:13:20Z", NOW), Ok(NOW));
        assert_eq!(parse_time("since", "2023-11-14T23:13:20+01:00", NOW), Ok(NOW));
        assert_eq!(parse_time("since", "2h", NOW), Ok(NOW - 2 * 3_600_000));
        assert_eq!(parse_time("since", "7d", NOW), Ok(NOW - 7 * 86_400_000));
        assert_eq!(parse_time("until", "1h30m", NOW), Ok(NOW - 90 * 60_000));
        let err = parse_time("since", "yesterday", NOW).unwrap_err();
        assert!(err.starts_with("`--since yesterday` is not a time"), "{err}");
    }
}
