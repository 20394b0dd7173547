//! Each page's body, from what the store read: HTML that reads without
//! JavaScript, built with maud's `html!` (every value spliced in is escaped).

use crate::html::{Markup, action_form, hidden, state_badge, table};
use crate::query::{self, Deliveries, Events, Fields};
use crate::{LIVE_POLL_MS, RATES_WINDOW_MS};
use jadpo_check::program::{BreakerState, DeliveryState};
use jadpo_core::clock::rfc3339;
use jadpo_core::rules::breaker::{self, BreakerRow};
use jadpo_core::store::{
    AttemptRate, AttemptView, BreakerAction, BreakerView, DeliveryFilter, DeliveryView, EventView, RATE_MINUTE_MS,
    StatusView,
};
use maud::html;

fn time(ms: i64) -> Markup {
    let t = rfc3339(ms);
    html! { time datetime=(t) { (t) } }
}

fn deliveries_link(pairs: &[(&str, String)], label: &str) -> Markup {
    html! { a href={ "/deliveries?" (query::encode(pairs)) } { (label) } }
}

/// Every connection's breaker: those the store has a row of, and each of
/// `declared` (the program's connections) without one, as the runtime reads a
/// missing row ([`BreakerRow::default`]: closed, never failed, holding
/// nothing); by connection name.
pub fn every_breaker(mut breakers: Vec<BreakerView>, declared: &[String]) -> Vec<BreakerView> {
    for name in declared {
        if !breakers.iter().any(|b| &b.connection == name) {
            breakers.push(BreakerView { connection: name.clone(), row: BreakerRow::default(), held: 0 });
        }
    }
    breakers.sort_by(|a, b| a.connection.cmp(&b.connection));
    breakers
}

/// The overview's part that refreshes itself: counts, rates, breakers (every
/// connection's, see [`every_breaker`]).
pub fn overview_live(status: &StatusView, rates: &[AttemptRate], breakers: &[BreakerView], now: i64) -> Markup {
    let states: Vec<DeliveryState> = DeliveryState::ALL.to_vec();
    let mut head: Vec<&str> = vec!["Subscriber"];
    head.extend(states.iter().map(|s| s.as_str()));
    let rows: Vec<Markup> = status
        .subscribers
        .iter()
        .map(|(name, counts)| {
            html! {
                tr {
                    th scope="row" { (deliveries_link(&[("subscriber", name.clone())], name)) }
                    @for s in &states {
                        @let n = counts.iter().find(|(st, _)| st == s).map_or(0, |(_, n)| *n);
                        td class="num" {
                            @if n == 0 {
                                "0"
                            } @else {
                                (deliveries_link(
                                    &[("state", s.as_str().to_string()), ("subscriber", name.clone())],
                                    &n.to_string(),
                                ))
                            }
                        }
                    }
                }
            }
        })
        .collect();
    let breaker_rows: Vec<Markup> = breakers.iter().map(|b| breaker_summary_row(b, now)).collect();
    html! {
        section aria-labelledby="by-state" {
            h2 id="by-state" { "Deliveries by state" }
            ul class="counts" {
                @for (state, n) in &status.states {
                    li {
                        (state_badge(state.as_str()))
                        a class="count" href={ "/deliveries?state=" (state.as_str()) } data-state=(state.as_str()) { (n) }
                    }
                }
            }
            p {
                "Oldest pending: "
                strong {
                    @match status.oldest_pending_s {
                        Some(s) => { (s) "s" },
                        None => { "none" },
                    }
                }
                ". Invalid events: " strong { (status.events.invalid) }
                ". Events to expand: " strong { (status.events.unexpanded) } "."
            }
        }
        section aria-labelledby="by-subscriber" {
            h2 id="by-subscriber" { "By subscriber" }
            @if rows.is_empty() {
                p { "No deliveries yet." }
            } @else {
                (table("Deliveries by subscriber and state", &head, &rows))
            }
        }
        (versions_section(status))
        (rates_chart(rates, now))
        section aria-labelledby="breakers" {
            h2 id="breakers" { "Breakers" }
            @if breaker_rows.is_empty() {
                p { "Every connection's breaker is closed; none has failed." }
            } @else {
                (table("Breakers", &["Connection", "State", "Paused", "Held"], &breaker_rows))
            }
            p { a href="/breakers" { "Pause or resume a connection" } }
        }
        p class="updated" { "As of " (time(now)) "." }
    }
}

fn breaker_summary_row(b: &BreakerView, now: i64) -> Markup {
    html! {
        tr data-connection=(b.connection) {
            th scope="row" { (b.connection) }
            td { (state_badge(b.row.state.as_str())) }
            td {
                @match &b.row.pause {
                    Some(p) if breaker::paused(&b.row, now) => { "paused by " (p.by) },
                    _ => { "no" },
                }
            }
            td class="num" { (b.held) }
        }
    }
}

/// Attempts per minute over the last hour: an SVG bar chart (succeeded and
/// failed stacked) with the same numbers in a table beside it.
fn rates_chart(rates: &[AttemptRate], now: i64) -> Markup {
    let minutes = usize::try_from(RATES_WINDOW_MS / RATE_MINUTE_MS).unwrap_or(60);
    let last = now.div_euclid(RATE_MINUTE_MS) * RATE_MINUTE_MS;
    let first = last - (minutes as i64 - 1) * RATE_MINUTE_MS;
    let mut slots = vec![(0u64, 0u64); minutes];
    for r in rates {
        if r.minute_ms >= first && r.minute_ms <= last {
            let i = usize::try_from((r.minute_ms - first) / RATE_MINUTE_MS).unwrap_or(0);
            if let Some(slot) = slots.get_mut(i) {
                slot.0 += r.succeeded;
                slot.1 += r.failed;
            }
        }
    }
    let (ok, failed): (u64, u64) = slots.iter().fold((0, 0), |(a, b), (s, f)| (a + s, b + f));
    let max = slots.iter().map(|(s, f)| s + f).max().unwrap_or(0).max(1);
    let (w, h, bar) = (600u64, 120u64, 10u64);
    let minute = |i: usize| first + i as i64 * RATE_MINUTE_MS;
    let svg = html! {
        svg class="chart" viewBox={ "0 0 " (w) " " (h + 2) } role="img" aria-labelledby="rates-title"
            preserveAspectRatio="none" {
            title id="rates-title" {
                "Attempts per minute over the last hour: " (ok) " succeeded, " (failed) " failed"
            }
            @for (i, (s, f)) in slots.iter().enumerate() {
                @let x = i as u64 * bar;
                @let hs = s * h / max;
                @let hf = f * h / max;
                @let at = rfc3339(minute(i));
                @if *s > 0 {
                    rect class="ok" x=(x) y=(h - hs) width=(bar - 1) height=(hs) { title { (at) ": " (s) " succeeded" } }
                }
                @if *f > 0 {
                    rect class="fail" x=(x) y=(h - hs - hf) width=(bar - 1) height=(hf) {
                        title { (at) ": " (f) " failed" }
                    }
                }
            }
            line class="axis" x1="0" y1=(h) x2=(w) y2=(h) {}
        }
    };
    let rows: Vec<Markup> = slots
        .iter()
        .enumerate()
        .filter(|(_, (s, f))| s + f > 0)
        .map(|(i, (s, f))| {
            html! { tr { th scope="row" { (time(minute(i))) } td class="num" { (s) } td class="num" { (f) } } }
        })
        .collect();
    html! {
        section aria-labelledby="rates" {
            h2 id="rates" { "Attempts, last hour" }
            p {
                span class="key ok" {} (ok) " succeeded "
                span class="key fail" {} (failed) " failed"
            }
            figure { (svg) figcaption { span { "60 min ago" } span { "now" } } }
            @if rows.is_empty() {
                p { "No attempts in the last hour." }
            } @else {
                details {
                    summary { "The numbers" }
                    (table("Attempts per minute", &["Minute", "Succeeded", "Failed"], &rows))
                }
            }
        }
    }
}

/// The program versions running now or with deliveries in flight, and the
/// newest: the processes running each and what its events left.
fn versions_section(status: &StatusView) -> Markup {
    let rows: Vec<Markup> = jadpo_core::version::shown(&status.versions)
        .map(|(_, v)| {
            html! {
                tr {
                    th scope="row" { "#" (v.id) " " code { (jadpo_core::version::short(&v.hash)) } }
                    td { (rfc3339(v.created_at_ms)) }
                    td class="num" { (v.in_flight) }
                    td {
                        @if v.processes.is_empty() {
                            "none"
                        }
                        @for (i, p) in v.processes.iter().enumerate() {
                            @if i > 0 { br; }
                            "pid " (p.pid) " on " (p.host) " since " (rfc3339(p.started_at_ms))
                        }
                    }
                    td {
                        @if v.accepted.is_empty() { "none" } @else { (v.accepted.join(", ")) }
                    }
                }
            }
        })
        .collect();
    let orphaned: u64 = status.states.iter().filter(|(s, _)| *s == DeliveryState::Orphaned).map(|(_, n)| *n).sum();
    html! {
        section aria-labelledby="versions" {
            h2 id="versions" { "Program versions" }
            @if orphaned > 0 {
                p {
                    strong { (orphaned) " orphaned" }
                    ": no running process's program has their subscriber ("
                    a href="/deliveries?state=orphaned" { "list them" } ")."
                }
            }
            @if rows.is_empty() {
                p { "No program has run on this store yet." }
            } @else {
                (table(
                    "Program versions",
                    &["Version", "First kept", "In flight", "Running", "Accepted when it started"],
                    &rows,
                ))
            }
        }
    }
}

/// The overview page around its live part.
pub fn overview(live: Markup) -> Markup {
    html! { div id="live" data-live="/overview/live" data-poll-ms=(LIVE_POLL_MS) { (live) } }
}

/// A labelled text field of a filter form, holding `value`.
fn filter_field(name: &str, label: &str, value: &str, hint: Option<&str>) -> Markup {
    html! { label { (label) input name=(name) value=(value) placeholder=[hint] autocomplete="off"; } }
}

/// The deliveries' filter form, filled with `fields`.
pub fn delivery_filters(fields: &Fields) -> Markup {
    let text =
        |name: &str, label: &str, hint: &str| filter_field(name, label, fields.get(name).unwrap_or(""), Some(hint));
    html! {
        form method="get" action="/deliveries" class="filters" role="search" aria-label="Filter deliveries" {
            label {
                "State"
                select name="state" {
                    option value="" { "any" }
                    @for s in DeliveryState::ALL {
                        option selected[fields.get("state") == Some(s.as_str())] { (s.as_str()) }
                    }
                }
            }
            (text("subscriber", "Subscriber", "name"))
            (text("connection", "Connection", "name"))
            (text("event", "Event", "name"))
            (text("code", "Failure code", "a code, as in Last failure"))
            (text("since", "Created since", "2h or 2026-12-01T09:00:00Z"))
            (text("until", "Created before", "30m or a time"))
            div class="buttons" { button type="submit" { "Filter" } " " a href="/deliveries" { "Clear" } }
        }
    }
}

fn failure_cell(d: &DeliveryView) -> Markup {
    html! {
        @if let Some(f) = &d.last_failure {
            (f.kind.as_str()) " " code { (f.code) }
        }
    }
}

/// The header of a table of deliveries.
const DELIVERY_HEAD: [&str; 8] =
    ["Id", "State", "Attempts", "Subscriber", "Connection", "Event", "Created", "Last failure"];

/// A row of the deliveries' table.
fn delivery_row(d: &DeliveryView) -> Markup {
    html! {
        tr data-id=(d.id) {
            td { a href={ "/deliveries/" (d.id) } { (d.id) } }
            td { (state_badge(d.state.as_str())) }
            td class="num" { (d.attempts) }
            td { (d.subscriber) }
            td { (d.connection) }
            td { a href={ "/events/" (d.event_id) } { (d.event) " #" (d.event_id) } }
            td { (time(d.created_at_ms)) }
            td { (failure_cell(d)) }
        }
    }
}

/// The deliveries page: the filters, a page of deliveries, the link to the
/// next, and (with actions) the bulk retry of what the filter selects.
pub fn deliveries(
    fields: &Fields,
    selection: &Deliveries,
    list: &[DeliveryView],
    more: bool,
    actions: bool,
    retryable: &[DeliveryState],
) -> Markup {
    let filter_pairs = query::delivery_query(&selection.filter);
    let mut with_limit = filter_pairs.clone();
    if selection.limit != query::DEFAULT_PAGE {
        with_limit.push(("limit", selection.limit.to_string()));
    }
    let next = list.last().filter(|_| more).map(|last| {
        let mut next = with_limit.clone();
        next.push(("before", last.id.to_string()));
        next
    });
    let rows: Vec<Markup> = list.iter().map(delivery_row).collect();
    let offers_retry = actions && selection.filter.state.is_none_or(|s| retryable.contains(&s));
    let retried = match selection.filter.state {
        Some(s) => s.as_str().to_string(),
        None => retryable.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" or "),
    };
    html! {
        (delivery_filters(fields))
        @if rows.is_empty() {
            p class="empty" { "No deliveries match." }
        } @else {
            (table("Deliveries, newest first", &DELIVERY_HEAD, &rows))
        }
        nav class="pager" aria-label="Pages" {
            @if selection.before.is_some() {
                a href={ "/deliveries?" (query::encode(&with_limit)) } rel="first" { "Newest" }
            }
            @if let Some(next) = &next {
                a href={ "/deliveries?" (query::encode(next)) } rel="next" { "Older" }
            }
        }
        @if offers_retry {
            p {
                a class="button" href={ "/deliveries/retry?" (query::encode(&filter_pairs)) } {
                    "Retry every " (retried) " delivery this filter selects…"
                }
            }
        }
    }
}

/// A filter's fields as a list: `name = value` each.
fn described(pairs: &[(&str, String)]) -> Markup {
    html! { ul { @for (k, v) in pairs { li { (k) " = " code { (v) } } } } }
}

/// The confirmation of a bulk retry: how many first, then what selects them.
pub fn bulk_confirm(csrf: &str, filter: &DeliveryFilter, ids: &[i64], more: bool, actions: bool) -> Markup {
    let pairs = query::delivery_query(filter);
    let back = format!("/deliveries?{}", query::encode(&pairs));
    let n = ids.len();
    let fields = html! {
        @for (k, v) in &pairs { (hidden(k, v)) }
        (hidden("through", ids.first().copied().unwrap_or(0)))
        (hidden("expected", n))
    };
    let label = format!("Retry {n} {}", if n == 1 { "delivery" } else { "deliveries" });
    html! {
        p class="count" data-count=(n) {
            (n) " " (if n == 1 { "delivery is" } else { "deliveries are" }) " selected"
            @if more { " (the newest " (n) "; the filter selects more: retry again for the rest)" }
            "."
        }
        @if pairs.is_empty() {
            p { "The filter: every failed or parked delivery." }
        } @else {
            p { "The filter:" }
            (described(&pairs))
        }
        @if ids.is_empty() {
            p { a href=(back) { "Back to the deliveries" } }
        } @else {
            p {
                "Each goes back to pending, due now, with a fresh budget (its attempts counted from zero). \
                 Deliveries that fail after this page was shown are not taken."
            }
            @if actions {
                (action_form("/deliveries/retry", csrf, fields, &label, None))
            }
            p { a href=(back) { "Cancel" } }
        }
    }
}

/// One delivery: its fields, its history, its event's payload, and (when it can
/// be) the retry button.
pub fn delivery(
    csrf: &str,
    d: &DeliveryView,
    history: &[AttemptView],
    event: Option<&EventView>,
    can_retry: bool,
) -> Markup {
    let rows: Vec<Markup> = history
        .iter()
        .map(|a| {
            html! {
                tr {
                    td class="num" { (a.attempt) }
                    td { (time(a.started_at_ms)) }
                    td class="num" { (a.duration_ms) "ms" }
                    td { (a.outcome) }
                    td {
                        @if let (Some(k), Some(c)) = (&a.kind, &a.code) {
                            (k) " " code { (c) }
                        }
                    }
                    td class="num" { @if let Some(s) = a.http_status { (s) } }
                    td { (a.reason.as_deref().unwrap_or("")) }
                }
            }
        })
        .collect();
    let retry = format!("/deliveries/{}/retry", d.id);
    let ask = format!("Retry delivery {} with a fresh budget?", d.id);
    html! {
        dl class="fields" {
            dt { "State" } dd { span id="state" { (state_badge(d.state.as_str())) } }
            dt { "Event" } dd { a href={ "/events/" (d.event_id) } { (d.event) " #" (d.event_id) } }
            dt { "Subscriber" } dd { (deliveries_link(&[("subscriber", d.subscriber.clone())], &d.subscriber)) }
            dt { "Connection" } dd { (deliveries_link(&[("connection", d.connection.clone())], &d.connection)) }
            dt { "Attempts" } dd { (d.attempts) }
            dt { "Created" } dd { (time(d.created_at_ms)) }
            dt { "Budget from" } dd { (time(d.budget_start_ms)) }
            @if let Some(t) = d.due_at_ms { dt { "Due" } dd { (time(t)) } }
            @if let Some(t) = d.lease_until_ms { dt { "Lease until" } dd { (time(t)) } }
            @if let Some(t) = d.held_since_ms { dt { "Held since" } dd { (time(t)) } }
            @if let Some(f) = &d.last_failure {
                dt { "Last failure" }
                dd {
                    (f.kind.as_str()) " " code { (f.code) }
                    @if let Some(r) = &f.reason { ": " (r) }
                }
            }
            @if let Some(why) = &d.end_reason { dt { "Ended" } dd { (why) } }
        }
        @if can_retry {
            (action_form(&retry, csrf, html! {}, "Retry with a fresh budget", Some(&ask)))
        }
        h2 { "History" }
        @if rows.is_empty() {
            p { "No attempts yet." }
        } @else {
            (table("Attempts, oldest first", &["#", "Started", "Took", "Outcome", "Failure", "HTTP", "Reason"], &rows))
        }
        h2 { "The event's payload" }
        @match event {
            Some(e) => { pre class="payload" { (pretty(&e.payload)) } },
            None => { p { "The event is no longer in the store." } },
        }
    }
}

/// A payload as indented JSON (as stored when it is not JSON).
fn pretty(payload: &str) -> String {
    serde_json::from_str::<serde_json::Value>(payload)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| payload.to_string())
}

fn fate(e: &EventView) -> Markup {
    html! {
        @if let Some((code, reason)) = &e.invalid {
            "invalid " code { (code) } ": " (reason)
        } @else if !e.expanded {
            "not expanded yet"
        } @else if e.deliveries.is_empty() {
            "no deliveries"
        } @else {
            @for (i, (s, n)) in e.deliveries.iter().enumerate() {
                @if i > 0 { " " }
                (state_badge(s.as_str())) " " (n)
            }
        }
    }
}

/// The events page: the filters, a page of events, the link to the next.
pub fn events(selection: &Events, list: &[EventView], more: bool, replays: bool) -> Markup {
    let since = selection.filter.since_ms.map(rfc3339).unwrap_or_default();
    let until = selection.filter.until_ms.map(rfc3339).unwrap_or_default();
    let rows: Vec<Markup> = list
        .iter()
        .map(|e| {
            html! {
                tr {
                    td { a href={ "/events/" (e.id) } { (e.id) } }
                    td { (time(e.emitted_at_ms)) }
                    td {
                        (e.name)
                        @if let Some(of) = e.replay_of {
                            " (replay of " a href={ "/events/" (of) } { "#" (of) } ")"
                        }
                    }
                    td { (fate(e)) }
                }
            }
        })
        .collect();
    let pairs = selection.query();
    let next = list.last().filter(|_| more).map(|last| {
        let mut next = pairs.clone();
        next.push(("before", last.id.to_string()));
        next.push(("at", last.emitted_at_ms.to_string()));
        next
    });
    html! {
        form method="get" action="/events" class="filters" role="search" aria-label="Filter events" {
            (filter_field("name", "Name", selection.filter.name.as_deref().unwrap_or(""), None))
            (filter_field("since", "Since", &since, Some("2h or a time")))
            (filter_field("until", "Until", &until, Some("30m or a time")))
            div class="buttons" { button type="submit" { "Filter" } " " a href="/events" { "Clear" } }
        }
        @if rows.is_empty() {
            p class="empty" { "No events match." }
        } @else {
            (table("Events, newest first", &["Id", "Emitted", "Name", "Deliveries"], &rows))
        }
        nav class="pager" aria-label="Pages" {
            @if selection.before.is_some() {
                a href={ "/events?" (query::encode(&pairs)) } rel="first" { "Newest" }
            }
            @if let Some(next) = &next {
                a href={ "/events?" (query::encode(next)) } rel="next" { "Older" }
            }
        }
        @if replays {
            p {
                a class="button" href={ "/events/replay?" (query::encode(&pairs)) } {
                    "Replay every event this filter selects…"
                }
            }
        }
    }
}

/// The confirmation of a replay by filter: how many first, then the filter,
/// then the events the program refuses (with why).
pub fn bulk_replay_confirm(
    csrf: &str,
    selection: &Events,
    planned: &[(i64, Result<usize, String>)],
    more: bool,
    actions: bool,
) -> Markup {
    let pairs = selection.query();
    let back = format!("/events?{}", query::encode(&pairs));
    let n = planned.iter().filter(|(_, p)| p.is_ok()).count();
    let refused: Vec<(i64, &str)> =
        planned.iter().filter_map(|(id, p)| p.as_ref().err().map(|why| (*id, why.as_str()))).collect();
    let through = planned.iter().map(|(id, _)| *id).max().unwrap_or(0);
    let fields = html! {
        @for (k, v) in &pairs { (hidden(k, v)) }
        (hidden("through", through))
    };
    let label = format!("Replay {n} event{}", if n == 1 { "" } else { "s" });
    html! {
        p class="count" data-count=(n) {
            (n) " event" (if n == 1 { " is" } else { "s are" }) " selected"
            @if more { " (the newest of them; the filter selects more: replay again for the rest)" }
            "."
        }
        @if pairs.is_empty() {
            p { "The filter: every event (replays of events left out)." }
        } @else {
            p { "The filter (replays of events left out):" }
            (described(&pairs))
        }
        @if !refused.is_empty() {
            p { "Left out, as the program refuses them:" }
            ul { @for (id, why) in &refused { li { a href={ "/events/" (id) } { "#" (id) } ": " (why) } } }
        }
        @if n > 0 && actions {
            p {
                "Each becomes a new event with the same payload, checked against today's program, delivered \
                 afresh to every subscriber of it, oldest first."
            }
            (action_form("/events/replay", csrf, fields, &label, None))
        }
        p { a href=(back) { "Cancel" } }
    }
}

/// Whether an event page offers a replay.
pub enum Replayable {
    /// Yes, to these subscribers of today's program.
    Yes(Vec<String>),
    /// The program refuses it (its payload does not validate now, or no
    /// subscriber takes it): why.
    Refused(String),
    /// Actions are on but the console has no program to check a replay against.
    NoProgram,
    /// The console is read-only.
    ReadOnly,
}

/// One event: its fields, its payload, its deliveries, and the replay form.
pub fn event(csrf: &str, e: &EventView, deliveries: &[DeliveryView], replay: &Replayable) -> Markup {
    let rows: Vec<Markup> = deliveries.iter().map(delivery_row).collect();
    let action = format!("/events/{}/replay", e.id);
    let ask = format!("Replay event {} as a new event?", e.id);
    html! {
        dl class="fields" {
            dt { "Name" } dd { (e.name) }
            dt { "Emitted" } dd { (time(e.emitted_at_ms)) }
            @if let Some(of) = e.replay_of {
                dt { "Replay of" } dd { a href={ "/events/" (of) } { "#" (of) } }
            }
            dt { "Deliveries" } dd { (fate(e)) }
        }
        h2 { "Payload" }
        pre class="payload" { (pretty(&e.payload)) }
        h2 { "Deliveries" }
        @if rows.is_empty() {
            p { "None." }
        } @else {
            (table("The event's deliveries", &DELIVERY_HEAD, &rows))
        }
        h2 { "Replay" }
        @match replay {
            Replayable::Refused(why) => { p { "It cannot be replayed: " (why) "." } },
            Replayable::Yes(subscribers) => {
                p { "A replay is a new event with this payload, checked against today's program, delivered afresh." }
                (action_form(
                    &action,
                    csrf,
                    html! {
                        label {
                            "To"
                            select name="subscriber" {
                                option value="" { "every subscriber" }
                                @for s in subscribers { option { (s) } }
                            }
                        }
                    },
                    "Replay this event",
                    Some(&ask),
                ))
            },
            Replayable::NoProgram => {
                p {
                    "This console was started without the program, which a replay is checked against (`jadpoc \
                     console --program PATH`)."
                }
            },
            Replayable::ReadOnly => { p { "This console is read-only (`--console-actions` turns actions on)." } },
        }
    }
}

/// The fields of the pause and resume forms.
fn operator_fields(pause: bool) -> Markup {
    html! {
        @if pause {
            label { "For" input name="for" placeholder="2h (empty: until resumed)" autocomplete="off"; }
        }
        label { "Reason" input name="reason" autocomplete="off"; }
        label { "By" input name="by" placeholder="console" autocomplete="off"; }
    }
}

/// One connection's breaker on the breakers page, with its pause and resume
/// forms.
fn breaker_section(csrf: &str, b: &BreakerView, actions: bool, now: i64) -> Markup {
    let (name, r) = (&b.connection, &b.row);
    let paused = r.pause.as_ref().filter(|_| breaker::paused(r, now));
    let path = query::encode(&[("c", name.clone())]).strip_prefix("c=").unwrap_or_default().to_string();
    let ask = format!("Pause {name}? Its deliveries are held until it is resumed.");
    html! {
        section class="breaker" data-connection=(name) {
            h2 { (name) }
            dl class="fields" {
                dt { "State" } dd class="breaker-state" { (state_badge(r.state.as_str())) }
                dt { "Failures in a row" } dd { (r.failures_in_a_row) }
                dt { "Held" } dd { (b.held) }
                dt { "Alerts" } dd { (r.alerts) }
                @if r.state != BreakerState::Closed {
                    @if let Some(t) = r.opened_at_ms { dt { "Opened" } dd { (time(t)) } }
                }
                dt { "Paused" }
                dd class="paused" {
                    @if let Some(p) = paused {
                        "paused by " (p.by) " at " (time(p.at_ms)) " until "
                        @if let Some(until) = p.until_ms { (time(until)) } @else { "resumed" }
                        @if let Some(reason) = &p.reason { ": " (reason) }
                    } @else {
                        "no"
                    }
                }
            }
            @if actions && paused.is_none() {
                (action_form(
                    &format!("/breakers/{path}/pause"),
                    csrf,
                    operator_fields(true),
                    &format!("Pause {name}"),
                    Some(&ask),
                ))
            }
            @if actions && (paused.is_some() || r.state != BreakerState::Closed) {
                (action_form(
                    &format!("/breakers/{path}/resume"),
                    csrf,
                    operator_fields(false),
                    &format!("Resume {name}"),
                    None,
                ))
            }
        }
    }
}

/// The breakers page: each connection's breaker (every connection's, see
/// [`every_breaker`]) with its pause, the pause and resume forms, and the
/// history of operators' actions.
pub fn breakers(csrf: &str, breakers: &[BreakerView], history: &[BreakerAction], actions: bool, now: i64) -> Markup {
    let rows: Vec<Markup> = history
        .iter()
        .rev()
        .take(100)
        .map(|a| {
            html! {
                tr {
                    td { (time(a.at_ms)) }
                    td { (a.connection) }
                    td { (a.action.as_str()) }
                    td { (a.by) }
                    td { (a.reason.as_deref().unwrap_or("")) }
                }
            }
        })
        .collect();
    html! {
        @if breakers.is_empty() {
            p { "No connection has a breaker yet: none has failed or been paused." }
        }
        @for b in breakers { (breaker_section(csrf, b, actions, now)) }
        h2 { "History" }
        @if rows.is_empty() {
            p { "No connection has been paused or resumed." }
        } @else {
            (table("Pauses and resumes, newest first", &["At", "Connection", "Action", "By", "Reason"], &rows))
        }
        @if !actions {
            p { "This console is read-only (`--console-actions` turns actions on)." }
        }
    }
}

/// The login form of a console with a token.
pub fn login(csrf: &str, next: &str, error: Option<&str>) -> Markup {
    let fields = html! {
        (hidden("next", next))
        label { "Token" input type="password" name="token" autocomplete="current-password" required; }
    };
    html! {
        @if let Some(e) = error { p class="error" role="alert" { (e) } }
        p { "This console asks for its token (the value of the variable " code { "--token env:NAME" } " named)." }
        (action_form("/login", csrf, fields, "Log in", None))
    }
}
