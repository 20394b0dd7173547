//! The text shapes of `jadpoc deliveries`, `jadpoc events` and `jadpoc status`
//! for people; their JSON shapes are `jadpo_console::views`' (one definition for
//! the commands' `--format json` and the console's API), re-exported here.

use jadpo_check::plural;
use jadpo_check::program::DeliveryState;
use jadpo_core::clock::rfc3339;
use jadpo_core::rules::breaker::Pause;
use jadpo_core::store::{
    AttemptView, BreakerAction, BreakerView, DeliveryView, EventView, PauseAction, PruneCounts, StatusView,
};

pub use jadpo_console::views::*;

/// One line per delivery for people.
pub fn delivery_line(d: &DeliveryView) -> String {
    let mut line = format!(
        "{:>8}  {:<9}  {:>2} attempt{}  {}  ({} #{})",
        d.id,
        state_word(d),
        d.attempts,
        if d.attempts == 1 { " " } else { "s" },
        d.subscriber,
        d.event,
        d.event_id
    );
    if let Some(blocker) = d.waiting_on {
        line.push_str(&format!("  waiting on #{blocker}"));
    } else if let Some(due) = d.due_at_ms {
        line.push_str(&format!("  due {}", rfc3339(due)));
    }
    match d.held_since_ms {
        Some(since) if d.state == DeliveryState::Orphaned => {
            line.push_str(&format!("  orphaned since {}: {}", rfc3339(since), orphaned_because(&d.subscriber)));
        }
        Some(held) => line.push_str(&format!("  held since {} by `{}`'s breaker", rfc3339(held), d.connection)),
        None => {}
    }
    if let Some(f) = &d.last_failure {
        line.push_str(&format!("  last failure {} ({})", f.kind.as_str(), f.code));
    }
    line
}

/// A delivery's state for people: a pending delivery held back by an earlier one
/// of its key is `waiting`.
fn state_word(d: &DeliveryView) -> &'static str {
    if d.waiting_on.is_some() { "waiting" } else { d.state.as_str() }
}

/// A delivery and its history for people.
pub fn delivery_text(d: &DeliveryView, history: &[AttemptView]) -> String {
    let mut out = format!(
        "delivery {}\n  event       {} #{}\n  subscriber  {}\n  connection  {}\n  state       {}\n  attempts    {}\n",
        d.id,
        d.event,
        d.event_id,
        d.subscriber,
        d.connection,
        state_word(d),
        d.attempts
    );
    if let Some(key) = &d.order_key {
        out.push_str(&format!("  order key   {key:?}\n"));
    }
    if let Some(blocker) = d.waiting_on {
        out.push_str(&format!("  waiting on  delivery {blocker}, the earliest of its key not ended\n"));
    } else if let Some(due) = d.due_at_ms {
        out.push_str(&format!("  due at      {}\n", rfc3339(due)));
    }
    match d.held_since_ms {
        Some(since) if d.state == DeliveryState::Orphaned => {
            out.push_str(&format!("  orphaned    since {}: {}\n", rfc3339(since), orphaned_because(&d.subscriber)));
        }
        Some(h) => out.push_str(&format!("  held since  {}\n", rfc3339(h))),
        None => {}
    }
    if let Some(f) = &d.last_failure {
        out.push_str(&format!("  last failure {} ({})", f.kind.as_str(), f.code));
        if let Some(r) = &f.reason {
            out.push_str(&format!(": {r}"));
        }
        out.push('\n');
    }
    if let Some(why) = &d.end_reason {
        out.push_str(&format!("  ended       {why}\n"));
    }
    out.push_str("  history\n");
    if history.is_empty() {
        out.push_str("    (no attempts yet)\n");
    }
    for a in history {
        out.push_str(&format!("    #{} {} {}ms {}", a.attempt, rfc3339(a.started_at_ms), a.duration_ms, a.outcome));
        if let (Some(k), Some(c)) = (&a.kind, &a.code) {
            out.push_str(&format!(" {k} ({c})"));
        }
        if let Some(s) = a.http_status {
            out.push_str(&format!(" http {s}"));
        }
        if let Some(r) = &a.reason {
            out.push_str(&format!(": {r}"));
        }
        out.push('\n');
    }
    out
}

/// `jadpoc status` for people.
pub fn status_text(s: &StatusView) -> String {
    let counts = |c: &[(jadpo_check::program::DeliveryState, u64)]| {
        c.iter().map(|(st, n)| format!("{} {n}", st.as_str())).collect::<Vec<_>>().join(", ")
    };
    let mut out = format!("deliveries: {}\n", counts(&s.states));
    for (name, c) in &s.subscribers {
        out.push_str(&format!("  {name}: {}\n", counts(c)));
    }
    out.push_str(&format!("breakers open: {}\n", s.breakers_open));
    if s.breakers_paused > 0 {
        out.push_str(&format!("connections paused: {}\n", s.breakers_paused));
    }
    match s.oldest_pending_s {
        Some(age) => out.push_str(&format!("oldest pending: {age}s\n")),
        None => out.push_str("oldest pending: none\n"),
    }
    out.push_str(&format!("invalid events: {}\n", s.events.invalid));
    if s.events.unexpanded > 0 {
        out.push_str(&format!("events to expand: {}\n", s.events.unexpanded));
    }
    for (name, c) in &s.subscribers {
        if let Some((_, n)) = c.iter().find(|(st, n)| *st == DeliveryState::Orphaned && *n > 0) {
            out.push_str(&format!("orphaned: {n} of `{name}`: {}\n", orphaned_because(name)));
        }
    }
    for (newest, v) in jadpo_core::version::shown(&s.versions) {
        out.push_str(&format!(
            "version #{} {}{}: since {}, {} in flight\n",
            v.id,
            jadpo_core::version::short(&v.hash),
            if newest { " (newest)" } else { "" },
            rfc3339(v.created_at_ms),
            plural(v.in_flight, "delivery")
        ));
        for p in &v.processes {
            out.push_str(&format!("  running: pid {} on {} since {}\n", p.pid, p.host, rfc3339(p.started_at_ms)));
        }
        if !v.accepted.is_empty() {
            out.push_str(&format!("  accepted when it started: {}\n", v.accepted.join(", ")));
        }
    }
    out
}

/// An operator's pause for people: `paused by NAME at T until T: REASON`.
pub fn pause_text(p: &Pause) -> String {
    let mut out = format!("paused by {} at {} {}", p.by, rfc3339(p.at_ms), until_text(p.until_ms));
    if let Some(r) = &p.reason {
        out.push_str(&format!(": {r}"));
    }
    out
}

/// When a pause ends: `until T`, or `until resumed` for one with no end.
fn until_text(until_ms: Option<i64>) -> String {
    match until_ms {
        Some(until) => format!("until {}", rfc3339(until)),
        None => "until resumed".to_string(),
    }
}

/// One line per breaker for people.
pub fn breaker_line(b: &BreakerView) -> String {
    let r = &b.row;
    let mut line = format!(
        "{}  {}  {} in a row  {}  {} held",
        b.connection,
        r.state.as_str(),
        jadpo_check::plural(u64::from(r.failures_in_a_row), "failure"),
        jadpo_check::plural(u64::from(r.alerts), "alert"),
        b.held
    );
    if r.state != jadpo_check::program::BreakerState::Closed
        && let Some(opened) = r.opened_at_ms
    {
        line.push_str(&format!("  opened {}  pause {}", rfc3339(opened), jadpo_check::format_duration(r.pause_ms)));
    }
    if let Some(p) = &r.pause {
        line.push_str(&format!("  {}", pause_text(p)));
    }
    if let Some(us) = r.rate_tat_us {
        // The rate's (or a Retry-After's) next turn at the steady rate.
        line.push_str(&format!("  rate: next call at {}", rfc3339(us.div_euclid(1000))));
    }
    line
}

/// One line per operator's action for people: `T  CONN  paused by NAME until
/// T: REASON`, `T  CONN  resumed by NAME: REASON`, `T  CONN  pause by NAME ended`.
pub fn breaker_action_line(a: &BreakerAction) -> String {
    let mut line = format!("{}  {}  ", rfc3339(a.at_ms), a.connection);
    match a.action {
        PauseAction::Pause => line.push_str(&format!("paused by {} {}", a.by, until_text(a.until_ms))),
        PauseAction::Resume => line.push_str(&format!("resumed by {}", a.by)),
        PauseAction::Ended => line.push_str(&format!("pause by {} ended", a.by)),
    }
    if let Some(r) = &a.reason {
        line.push_str(&format!(": {r}"));
    }
    line
}

/// `jadpoc prune`'s counts for people.
pub fn prune_text(counts: &PruneCounts, cut_ms: i64, dry_run: bool) -> String {
    let deliveries = if counts.deliveries == 1 { "delivery" } else { "deliveries" };
    format!(
        "{} {} {deliveries}, {}, {}, {} (last active before {})\n",
        if dry_run { "would prune" } else { "pruned" },
        counts.deliveries,
        jadpo_check::plural(counts.attempts, "attempt"),
        jadpo_check::plural(counts.handled, "handled record"),
        jadpo_check::plural(counts.events, "event"),
        rfc3339(cut_ms)
    )
}

/// What became of an event, in words: its deliveries by state, invalid with the
/// reason, or waiting to be expanded.
fn event_fate(e: &EventView) -> String {
    if let Some((code, reason)) = &e.invalid {
        return format!("invalid ({code}): {reason}");
    }
    if !e.expanded {
        return "not expanded yet".to_string();
    }
    let total: u64 = e.deliveries.iter().map(|(_, n)| n).sum();
    if total == 0 {
        return "no deliveries".to_string();
    }
    let states: Vec<String> = e.deliveries.iter().map(|(st, n)| format!("{} {n}", st.as_str())).collect();
    format!("{total} deliver{}: {}", if total == 1 { "y" } else { "ies" }, states.join(", "))
}

/// One line per event for people.
pub fn event_line(e: &EventView) -> String {
    let mut line = format!("{:>8}  {}  {}  {}", e.id, rfc3339(e.emitted_at_ms), e.name, event_fate(e));
    if let Some(of) = e.replay_of {
        line.push_str(&format!("  (replay of #{of})"));
    }
    line
}

/// An event, its payload and its deliveries for people.
pub fn event_text(e: &EventView, deliveries: &[DeliveryView]) -> String {
    let mut out = format!("event {}\n  name        {}\n  emitted at  {}\n", e.id, e.name, rfc3339(e.emitted_at_ms));
    if let Some(v) = e.version {
        out.push_str(&format!("  version     #{v} (`jadpoc status` lists the versions)\n"));
    }
    if let Some(of) = e.replay_of {
        out.push_str(&format!("  replay of   #{of}\n"));
    }
    if let Some((code, reason)) = &e.invalid {
        out.push_str(&format!("  invalid     {code}: {reason}\n"));
    } else if !e.expanded {
        out.push_str("  expanded    not yet (a running `jadpoc run` makes its deliveries)\n");
    }
    out.push_str(&format!("  payload     {}\n  deliveries\n", e.payload));
    if deliveries.is_empty() {
        out.push_str("    (none)\n");
    }
    for d in deliveries {
        out.push_str(&format!("  {}\n", delivery_line(d)));
    }
    out
}

/// Why a delivery of `subscriber` is orphaned, for people.
pub(crate) fn orphaned_because(subscriber: &str) -> String {
    format!(
        "no running process's program has subscriber `{subscriber}` (a process whose program has it takes it back; \
         `jadpoc deliveries skip --subscriber {subscriber}` ends it)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use jadpo_check::program::{DeliveryState, FailureKind};
    use jadpo_core::rules::Failure;

    #[test]
    fn a_delivery_shows_why_it_ended_and_each_failures_reason() {
        let d = DeliveryView {
            id: 7,
            event_id: 3,
            event: "Paid".into(),
            subscriber: "book".into(),
            connection: "c".into(),
            state: DeliveryState::Failed,
            order_key: None,
            waiting_on: None,
            attempts: 1,
            due_at_ms: None,
            lease_until_ms: None,
            held_since_ms: None,
            held_ms: 0,
            budget_start_ms: 0,
            created_at_ms: 0,
            last_failure: Some(
                Failure::new("transport.connect", FailureKind::Unavailable).with_reason("connection refused"),
            ),
            end_reason: Some("attempts_used".into()),
        };
        let a = AttemptView {
            attempt: 1,
            started_at_ms: 0,
            duration_ms: 2,
            outcome: "failed".into(),
            code: Some("transport.connect".into()),
            kind: Some("unavailable".into()),
            http_status: None,
            reason: Some("connection refused".into()),
        };
        let text = delivery_text(&d, std::slice::from_ref(&a));
        assert!(text.contains("  last failure unavailable (transport.connect): connection refused\n"), "{text}");
        assert!(text.contains("  ended       attempts_used\n"), "{text}");
        assert!(text.contains("failed unavailable (transport.connect): connection refused\n"), "{text}");
        let json = delivery_with_history_json(&d, &[a]);
        assert_eq!(json["end_reason"], "attempts_used");
        assert_eq!(json["last_failure"]["reason"], "connection refused");
        assert_eq!(json["history"][0]["reason"], "connection refused");
    }
}
