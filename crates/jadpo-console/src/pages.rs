//! Each page's body, from what the store read: HTML that reads without
//! JavaScript, every value escaped.

use crate::html::{action_form, esc, hidden, state_badge, table};
use crate::query::{self, Deliveries, Events, Fields};
use crate::{LIVE_POLL_MS, RATES_WINDOW_MS};
use jadpo_check::program::{BreakerState, DeliveryState};
use jadpo_core::clock::rfc3339;
use jadpo_core::rules::breaker;
use jadpo_core::store::{
    AttemptRate, AttemptView, BreakerAction, BreakerView, DeliveryFilter, DeliveryView, EventView, RATE_MINUTE_MS,
    StatusView,
};
use std::fmt::Write;

fn time(ms: i64) -> String {
    format!("<time datetime=\"{0}\">{0}</time>", esc(&rfc3339(ms)))
}

fn deliveries_link(pairs: &[(&str, String)], label: &str) -> String {
    format!("<a href=\"/deliveries?{}\">{}</a>", esc(&query::encode(pairs)), esc(label))
}

/// The overview's part that refreshes itself: counts, rates, breakers.
pub fn overview_live(status: &StatusView, rates: &[AttemptRate], breakers: &[BreakerView], now: i64) -> String {
    let mut out = String::new();
    // Deliveries by state.
    out.push_str(
        "<section aria-labelledby=\"by-state\"><h2 id=\"by-state\">Deliveries by state</h2><ul class=\"counts\">",
    );
    for (state, n) in &status.states {
        let _ = write!(
            out,
            "<li>{}<a class=\"count\" href=\"/deliveries?state={}\" data-state=\"{}\">{n}</a></li>",
            state_badge(state.as_str()),
            state.as_str(),
            state.as_str()
        );
    }
    out.push_str("</ul>");
    let oldest = match status.oldest_pending_s {
        Some(s) => format!("{s}s"),
        None => "none".to_string(),
    };
    let _ = write!(
        out,
        "<p>Oldest pending: <strong>{oldest}</strong>. Invalid events: <strong>{}</strong>. Events to expand: \
         <strong>{}</strong>.</p></section>",
        status.events.invalid, status.events.unexpanded
    );
    // By subscriber.
    let states: Vec<DeliveryState> = DeliveryState::ALL.to_vec();
    let mut head: Vec<&str> = vec!["Subscriber"];
    head.extend(states.iter().map(|s| s.as_str()));
    let rows: Vec<String> = status
        .subscribers
        .iter()
        .map(|(name, counts)| {
            let mut row =
                format!("<tr><th scope=\"row\">{}</th>", deliveries_link(&[("subscriber", name.clone())], name));
            for s in &states {
                let n = counts.iter().find(|(st, _)| st == s).map_or(0, |(_, n)| *n);
                let cell = if n == 0 {
                    "0".to_string()
                } else {
                    deliveries_link(&[("state", s.as_str().to_string()), ("subscriber", name.clone())], &n.to_string())
                };
                let _ = write!(row, "<td class=\"num\">{cell}</td>");
            }
            row.push_str("</tr>");
            row
        })
        .collect();
    out.push_str("<section aria-labelledby=\"by-subscriber\"><h2 id=\"by-subscriber\">By subscriber</h2>");
    if rows.is_empty() {
        out.push_str("<p>No deliveries yet.</p>");
    } else {
        out.push_str(&table("Deliveries by subscriber and state", &head, &rows));
    }
    out.push_str("</section>");
    out.push_str(&versions_section(status));
    out.push_str(&rates_chart(rates, now));
    // Breakers.
    out.push_str("<section aria-labelledby=\"breakers\"><h2 id=\"breakers\">Breakers</h2>");
    if breakers.is_empty() {
        out.push_str("<p>Every connection's breaker is closed; none has failed.</p>");
    } else {
        let rows: Vec<String> = breakers.iter().map(|b| breaker_summary_row(b, now)).collect();
        out.push_str(&table("Breakers", &["Connection", "State", "Paused", "Held"], &rows));
    }
    let _ = write!(out, "<p><a href=\"/breakers\">Pause or resume a connection</a></p></section>");
    let _ = write!(out, "<p class=\"updated\">As of {}.</p>", time(now));
    out
}

fn breaker_summary_row(b: &BreakerView, now: i64) -> String {
    let paused = match &b.row.pause {
        Some(p) if breaker::paused(&b.row, now) => format!("paused by {}", esc(&p.by)),
        _ => "no".to_string(),
    };
    format!(
        "<tr><th scope=\"row\">{}</th><td>{}</td><td>{paused}</td><td class=\"num\">{}</td></tr>",
        esc(&b.connection),
        state_badge(b.row.state.as_str()),
        b.held
    )
}

/// Attempts per minute over the last hour: an SVG bar chart (succeeded and
/// failed stacked) with the same numbers in a table beside it.
fn rates_chart(rates: &[AttemptRate], now: i64) -> String {
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
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {w} {}\" role=\"img\" aria-labelledby=\"rates-title\" \
         preserveAspectRatio=\"none\"><title id=\"rates-title\">Attempts per minute over the last hour: {ok} \
         succeeded, {failed} failed</title>",
        h + 2
    );
    for (i, (s, f)) in slots.iter().enumerate() {
        let x = i as u64 * bar;
        let hs = s * h / max;
        let hf = f * h / max;
        let minute = rfc3339(first + i as i64 * RATE_MINUTE_MS);
        if *s > 0 {
            let _ = write!(
                svg,
                "<rect class=\"ok\" x=\"{x}\" y=\"{}\" width=\"{}\" height=\"{hs}\"><title>{minute}: {s} succeeded</title></rect>",
                h - hs,
                bar - 1
            );
        }
        if *f > 0 {
            let _ = write!(
                svg,
                "<rect class=\"fail\" x=\"{x}\" y=\"{}\" width=\"{}\" height=\"{hf}\"><title>{minute}: {f} failed</title></rect>",
                h - hs - hf,
                bar - 1
            );
        }
    }
    let _ = write!(svg, "<line class=\"axis\" x1=\"0\" y1=\"{h}\" x2=\"{w}\" y2=\"{h}\"></line></svg>");
    let rows: Vec<String> = slots
        .iter()
        .enumerate()
        .filter(|(_, (s, f))| s + f > 0)
        .map(|(i, (s, f))| {
            format!(
                "<tr><th scope=\"row\">{}</th><td class=\"num\">{s}</td><td class=\"num\">{f}</td></tr>",
                time(first + i as i64 * RATE_MINUTE_MS)
            )
        })
        .collect();
    let numbers = if rows.is_empty() {
        "<p>No attempts in the last hour.</p>".to_string()
    } else {
        format!(
            "<details><summary>The numbers</summary>{}</details>",
            table("Attempts per minute", &["Minute", "Succeeded", "Failed"], &rows)
        )
    };
    format!(
        "<section aria-labelledby=\"rates\"><h2 id=\"rates\">Attempts, last hour</h2>\
         <p><span class=\"key ok\"></span>{ok} succeeded <span class=\"key fail\"></span>{failed} failed</p>\
         <figure>{svg}<figcaption><span>60 min ago</span><span>now</span></figcaption></figure>{numbers}</section>"
    )
}

/// The overview page around its live part.
/// The program versions running now or with deliveries in flight, and the
/// newest: the processes running each and what its events left.
fn versions_section(status: &StatusView) -> String {
    let rows: Vec<String> = jadpo_core::version::shown(&status.versions)
        .map(|(_, v)| {
            let processes: Vec<String> = v
                .processes
                .iter()
                .map(|p| format!("pid {} on {} since {}", p.pid, esc(&p.host), rfc3339(p.started_at_ms)))
                .collect();
            let accepted = if v.accepted.is_empty() { "none".to_string() } else { esc(&v.accepted.join(", ")) };
            format!(
                "<tr><th scope=\"row\">#{} <code>{}</code></th><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
                v.id,
                esc(jadpo_core::version::short(&v.hash)),
                rfc3339(v.created_at_ms),
                v.in_flight,
                if processes.is_empty() { "none".to_string() } else { processes.join("<br>") },
                accepted
            )
        })
        .collect();
    let mut out = String::from("<section aria-labelledby=\"versions\"><h2 id=\"versions\">Program versions</h2>");
    let orphaned: u64 = status.states.iter().filter(|(s, _)| *s == DeliveryState::Orphaned).map(|(_, n)| *n).sum();
    if orphaned > 0 {
        let _ = write!(
            out,
            "<p><strong>{} orphaned</strong>: no running process's program has their subscriber \
             (<a href=\"/deliveries?state=orphaned\">list them</a>).</p>",
            orphaned
        );
    }
    if rows.is_empty() {
        out.push_str("<p>No program has run on this store yet.</p>");
    } else {
        let head = ["Version", "First kept", "In flight", "Running", "Accepted when it started"];
        out.push_str(&table("Program versions", &head, &rows));
    }
    out.push_str("</section>");
    out
}

pub fn overview(live: &str) -> String {
    format!("<div id=\"live\" data-live=\"/overview/live\" data-poll-ms=\"{LIVE_POLL_MS}\">{live}</div>")
}

/// The deliveries' filter form, filled with `fields`.
pub fn delivery_filters(fields: &Fields) -> String {
    let value = |k: &str| esc(fields.get(k).unwrap_or(""));
    let mut states = String::from("<option value=\"\">any</option>");
    for s in DeliveryState::ALL {
        let sel = if fields.get("state") == Some(s.as_str()) { " selected" } else { "" };
        let _ = write!(states, "<option{sel}>{}</option>", s.as_str());
    }
    let text = |name: &str, label: &str, hint: &str| {
        format!(
            "<label>{label}<input name=\"{name}\" value=\"{}\" placeholder=\"{hint}\" autocomplete=\"off\"></label>",
            value(name)
        )
    };
    format!(
        "<form method=\"get\" action=\"/deliveries\" class=\"filters\" role=\"search\" aria-label=\"Filter deliveries\">\
         <label>State<select name=\"state\">{states}</select></label>{}{}{}{}{}{}\
         <div class=\"buttons\"><button type=\"submit\">Filter</button> <a href=\"/deliveries\">Clear</a></div></form>",
        text("subscriber", "Subscriber", "name"),
        text("connection", "Connection", "name"),
        text("event", "Event", "name"),
        text("code", "Failure code", "a code, as in Last failure"),
        text("since", "Created since", "2h or 2026-12-01T09:00:00Z"),
        text("until", "Created before", "30m or a time"),
    )
}

fn failure_cell(d: &DeliveryView) -> String {
    match &d.last_failure {
        Some(f) => format!("{} <code>{}</code>", esc(f.kind.as_str()), esc(&f.code)),
        None => String::new(),
    }
}

/// A row of the deliveries' table.
fn delivery_row(d: &DeliveryView) -> String {
    format!(
        "<tr data-id=\"{id}\"><td><a href=\"/deliveries/{id}\">{id}</a></td><td>{}</td><td class=\"num\">{}</td>\
         <td>{}</td><td>{}</td><td><a href=\"/events/{}\">{} #{}</a></td><td>{}</td><td>{}</td></tr>",
        state_badge(d.state.as_str()),
        d.attempts,
        esc(&d.subscriber),
        esc(&d.connection),
        d.event_id,
        esc(&d.event),
        d.event_id,
        time(d.created_at_ms),
        failure_cell(d),
        id = d.id
    )
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
) -> String {
    let mut out = delivery_filters(fields);
    let filter_pairs = query::delivery_query(&selection.filter);
    let mut limit_pair = Vec::new();
    if selection.limit != query::DEFAULT_PAGE {
        limit_pair.push(("limit", selection.limit.to_string()));
    }
    if list.is_empty() {
        out.push_str("<p class=\"empty\">No deliveries match.</p>");
    } else {
        let rows: Vec<String> = list.iter().map(delivery_row).collect();
        out.push_str(&table(
            "Deliveries, newest first",
            &["Id", "State", "Attempts", "Subscriber", "Connection", "Event", "Created", "Last failure"],
            &rows,
        ));
    }
    out.push_str("<nav class=\"pager\" aria-label=\"Pages\">");
    if selection.before.is_some() {
        let mut first = filter_pairs.clone();
        first.extend(limit_pair.clone());
        let _ = write!(out, "<a href=\"/deliveries?{}\" rel=\"first\">Newest</a>", esc(&query::encode(&first)));
    }
    if more && let Some(last) = list.last() {
        let mut next = filter_pairs.clone();
        next.extend(limit_pair.clone());
        next.push(("before", last.id.to_string()));
        let _ = write!(out, "<a href=\"/deliveries?{}\" rel=\"next\">Older</a>", esc(&query::encode(&next)));
    }
    out.push_str("</nav>");
    let offers_retry = selection.filter.state.is_none_or(|s| retryable.contains(&s));
    if actions && offers_retry {
        let words: Vec<&str> = retryable.iter().map(|s| s.as_str()).collect();
        let _ = write!(
            out,
            "<p><a class=\"button\" href=\"/deliveries/retry?{}\">Retry every {} delivery this filter selects…</a></p>",
            esc(&query::encode(&filter_pairs)),
            esc(&match selection.filter.state {
                Some(s) => s.as_str().to_string(),
                None => words.join(" or "),
            })
        );
    }
    out
}

/// The confirmation of a bulk retry: how many first, then what selects them.
pub fn bulk_confirm(csrf: &str, filter: &DeliveryFilter, ids: &[i64], more: bool, actions: bool) -> String {
    let pairs = query::delivery_query(filter);
    let back = format!("/deliveries?{}", esc(&query::encode(&pairs)));
    let mut out = String::new();
    let described: Vec<String> =
        pairs.iter().map(|(k, v)| format!("<li>{} = <code>{}</code></li>", esc(k), esc(v))).collect();
    let _ = write!(
        out,
        "<p class=\"count\" data-count=\"{}\">{} {} selected{}.</p>",
        ids.len(),
        ids.len(),
        if ids.len() == 1 { "delivery is" } else { "deliveries are" },
        if more {
            format!(" (the newest {}; the filter selects more: retry again for the rest)", ids.len())
        } else {
            String::new()
        }
    );
    if described.is_empty() {
        out.push_str("<p>The filter: every failed or parked delivery.</p>");
    } else {
        let _ = write!(out, "<p>The filter:</p><ul>{}</ul>", described.join(""));
    }
    if ids.is_empty() {
        let _ = write!(out, "<p><a href=\"{back}\">Back to the deliveries</a></p>");
        return out;
    }
    out.push_str(
        "<p>Each goes back to pending, due now, with a fresh budget (its attempts counted from zero). Deliveries \
         that fail after this page was shown are not taken.</p>",
    );
    if actions {
        let mut fields: String = pairs.iter().map(|(k, v)| hidden(k, v)).collect();
        fields.push_str(&hidden("through", &ids.first().copied().unwrap_or(0).to_string()));
        fields.push_str(&hidden("expected", &ids.len().to_string()));
        let label = format!("Retry {} {}", ids.len(), if ids.len() == 1 { "delivery" } else { "deliveries" });
        out.push_str(&action_form("/deliveries/retry", csrf, &fields, &label, None));
    }
    let _ = write!(out, "<p><a href=\"{back}\">Cancel</a></p>");
    out
}

/// One delivery: its fields, its history, its event's payload, and (when it can
/// be) the retry button.
pub fn delivery(
    csrf: &str,
    d: &DeliveryView,
    history: &[AttemptView],
    event: Option<&EventView>,
    can_retry: bool,
) -> String {
    let mut out = String::from("<dl class=\"fields\">");
    let mut field = |k: &str, v: String| {
        let _ = write!(out, "<dt>{}</dt><dd>{v}</dd>", esc(k));
    };
    field("State", format!("<span id=\"state\">{}</span>", state_badge(d.state.as_str())));
    field("Event", format!("<a href=\"/events/{}\">{} #{}</a>", d.event_id, esc(&d.event), d.event_id));
    field("Subscriber", deliveries_link(&[("subscriber", d.subscriber.clone())], &d.subscriber));
    field("Connection", deliveries_link(&[("connection", d.connection.clone())], &d.connection));
    field("Attempts", d.attempts.to_string());
    field("Created", time(d.created_at_ms));
    field("Budget from", time(d.budget_start_ms));
    if let Some(t) = d.due_at_ms {
        field("Due", time(t));
    }
    if let Some(t) = d.lease_until_ms {
        field("Lease until", time(t));
    }
    if let Some(t) = d.held_since_ms {
        field("Held since", time(t));
    }
    if let Some(f) = &d.last_failure {
        let reason = f.reason.as_ref().map(|r| format!(": {}", esc(r))).unwrap_or_default();
        field("Last failure", format!("{} <code>{}</code>{reason}", esc(f.kind.as_str()), esc(&f.code)));
    }
    if let Some(why) = &d.end_reason {
        field("Ended", esc(why));
    }
    out.push_str("</dl>");
    if can_retry {
        out.push_str(&action_form(
            &format!("/deliveries/{}/retry", d.id),
            csrf,
            "",
            "Retry with a fresh budget",
            Some(&format!("Retry delivery {} with a fresh budget?", d.id)),
        ));
    }
    out.push_str("<h2>History</h2>");
    if history.is_empty() {
        out.push_str("<p>No attempts yet.</p>");
    } else {
        let rows: Vec<String> = history
            .iter()
            .map(|a| {
                let failure = match (&a.kind, &a.code) {
                    (Some(k), Some(c)) => format!("{} <code>{}</code>", esc(k), esc(c)),
                    _ => String::new(),
                };
                format!(
                    "<tr><td class=\"num\">{}</td><td>{}</td><td class=\"num\">{}ms</td><td>{}</td><td>{failure}</td>\
                     <td class=\"num\">{}</td><td>{}</td></tr>",
                    a.attempt,
                    time(a.started_at_ms),
                    a.duration_ms,
                    esc(&a.outcome),
                    a.http_status.map(|s| s.to_string()).unwrap_or_default(),
                    esc(a.reason.as_deref().unwrap_or(""))
                )
            })
            .collect();
        out.push_str(&table(
            "Attempts, oldest first",
            &["#", "Started", "Took", "Outcome", "Failure", "HTTP", "Reason"],
            &rows,
        ));
    }
    out.push_str("<h2>The event's payload</h2>");
    match event {
        Some(e) => {
            let _ = write!(out, "<pre class=\"payload\">{}</pre>", esc(&pretty(&e.payload)));
        }
        None => out.push_str("<p>The event is no longer in the store.</p>"),
    }
    out
}

/// A payload as indented JSON (as stored when it is not JSON).
fn pretty(payload: &str) -> String {
    serde_json::from_str::<serde_json::Value>(payload)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| payload.to_string())
}

fn fate(e: &EventView) -> String {
    if let Some((code, reason)) = &e.invalid {
        return format!("invalid <code>{}</code>: {}", esc(code), esc(reason));
    }
    if !e.expanded {
        return "not expanded yet".to_string();
    }
    if e.deliveries.is_empty() {
        return "no deliveries".to_string();
    }
    e.deliveries.iter().map(|(s, n)| format!("{} {n}", state_badge(s.as_str()))).collect::<Vec<_>>().join(" ")
}

/// The events page: the filters, a page of events, the link to the next.
pub fn events(selection: &Events, list: &[EventView], more: bool, replays: bool) -> String {
    let value = |v: Option<String>| esc(&v.unwrap_or_default());
    let mut out = format!(
        "<form method=\"get\" action=\"/events\" class=\"filters\" role=\"search\" aria-label=\"Filter events\">\
         <label>Name<input name=\"name\" value=\"{}\" autocomplete=\"off\"></label>\
         <label>Since<input name=\"since\" value=\"{}\" placeholder=\"2h or a time\" autocomplete=\"off\"></label>\
         <label>Until<input name=\"until\" value=\"{}\" placeholder=\"30m or a time\" autocomplete=\"off\"></label>\
         <div class=\"buttons\"><button type=\"submit\">Filter</button> <a href=\"/events\">Clear</a></div></form>",
        value(selection.filter.name.clone()),
        value(selection.filter.since_ms.map(rfc3339)),
        value(selection.filter.until_ms.map(rfc3339)),
    );
    if list.is_empty() {
        out.push_str("<p class=\"empty\">No events match.</p>");
    } else {
        let rows: Vec<String> = list
            .iter()
            .map(|e| {
                let replay = e
                    .replay_of
                    .map(|of| format!(" (replay of <a href=\"/events/{of}\">#{of}</a>)"))
                    .unwrap_or_default();
                format!(
                    "<tr><td><a href=\"/events/{id}\">{id}</a></td><td>{}</td><td>{}{replay}</td><td>{}</td></tr>",
                    time(e.emitted_at_ms),
                    esc(&e.name),
                    fate(e),
                    id = e.id
                )
            })
            .collect();
        out.push_str(&table("Events, newest first", &["Id", "Emitted", "Name", "Deliveries"], &rows));
    }
    out.push_str("<nav class=\"pager\" aria-label=\"Pages\">");
    let pairs = selection.query();
    if selection.before.is_some() {
        let _ = write!(out, "<a href=\"/events?{}\" rel=\"first\">Newest</a>", esc(&query::encode(&pairs)));
    }
    if more && let Some(last) = list.last() {
        let mut next = pairs.clone();
        next.push(("before", last.id.to_string()));
        next.push(("at", last.emitted_at_ms.to_string()));
        let _ = write!(out, "<a href=\"/events?{}\" rel=\"next\">Older</a>", esc(&query::encode(&next)));
    }
    out.push_str("</nav>");
    if replays {
        let _ = write!(
            out,
            "<p><a class=\"button\" href=\"/events/replay?{}\">Replay every event this filter selects…</a></p>",
            esc(&query::encode(&pairs))
        );
    }
    out
}

/// The confirmation of a replay by filter: how many first, then the filter,
/// then the events the program refuses (with why).
pub fn bulk_replay_confirm(
    csrf: &str,
    selection: &Events,
    planned: &[(i64, Result<usize, String>)],
    more: bool,
    actions: bool,
) -> String {
    let pairs = selection.query();
    let back = format!("/events?{}", esc(&query::encode(&pairs)));
    let n = planned.iter().filter(|(_, p)| p.is_ok()).count();
    let mut out = format!(
        "<p class=\"count\" data-count=\"{n}\">{n} event{} selected{}.</p>",
        if n == 1 { " is" } else { "s are" },
        if more { " (the newest of them; the filter selects more: replay again for the rest)" } else { "" }
    );
    let described: Vec<String> =
        pairs.iter().map(|(k, v)| format!("<li>{} = <code>{}</code></li>", esc(k), esc(v))).collect();
    if described.is_empty() {
        out.push_str("<p>The filter: every event (replays of events left out).</p>");
    } else {
        let _ = write!(out, "<p>The filter (replays of events left out):</p><ul>{}</ul>", described.join(""));
    }
    let refused: Vec<String> = planned
        .iter()
        .filter_map(|(id, p)| {
            p.as_ref().err().map(|why| format!("<li><a href=\"/events/{id}\">#{id}</a>: {}</li>", esc(why)))
        })
        .collect();
    if !refused.is_empty() {
        let _ = write!(out, "<p>Left out, as the program refuses them:</p><ul>{}</ul>", refused.join(""));
    }
    if n > 0 && actions {
        out.push_str(
            "<p>Each becomes a new event with the same payload, checked against today's program, delivered afresh \
             to every subscriber of it, oldest first.</p>",
        );
        let mut fields: String = pairs.iter().map(|(k, v)| hidden(k, v)).collect();
        let through = planned.iter().map(|(id, _)| *id).max().unwrap_or(0);
        fields.push_str(&hidden("through", &through.to_string()));
        let label = format!("Replay {n} event{}", if n == 1 { "" } else { "s" });
        out.push_str(&action_form("/events/replay", csrf, &fields, &label, None));
    }
    let _ = write!(out, "<p><a href=\"{back}\">Cancel</a></p>");
    out
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
pub fn event(csrf: &str, e: &EventView, deliveries: &[DeliveryView], replay: &Replayable) -> String {
    let mut out = String::from("<dl class=\"fields\">");
    let _ = write!(out, "<dt>Name</dt><dd>{}</dd><dt>Emitted</dt><dd>{}</dd>", esc(&e.name), time(e.emitted_at_ms));
    if let Some(of) = e.replay_of {
        let _ = write!(out, "<dt>Replay of</dt><dd><a href=\"/events/{of}\">#{of}</a></dd>");
    }
    let _ = write!(out, "<dt>Deliveries</dt><dd>{}</dd></dl>", fate(e));
    out.push_str("<h2>Payload</h2>");
    let _ = write!(out, "<pre class=\"payload\">{}</pre>", esc(&pretty(&e.payload)));
    out.push_str("<h2>Deliveries</h2>");
    if deliveries.is_empty() {
        out.push_str("<p>None.</p>");
    } else {
        let rows: Vec<String> = deliveries.iter().map(delivery_row).collect();
        out.push_str(&table(
            "The event's deliveries",
            &["Id", "State", "Attempts", "Subscriber", "Connection", "Event", "Created", "Last failure"],
            &rows,
        ));
    }
    out.push_str("<h2>Replay</h2>");
    match replay {
        Replayable::Refused(why) => {
            let _ = write!(out, "<p>It cannot be replayed: {}.</p>", esc(why));
        }
        Replayable::Yes(subscribers) => {
            let mut options = String::from("<option value=\"\">every subscriber</option>");
            for s in subscribers {
                let _ = write!(options, "<option>{}</option>", esc(s));
            }
            let fields = format!("<label>To<select name=\"subscriber\">{options}</select></label>");
            out.push_str(
                "<p>A replay is a new event with this payload, checked against today's program, delivered afresh.</p>",
            );
            out.push_str(&action_form(
                &format!("/events/{}/replay", e.id),
                csrf,
                &fields,
                "Replay this event",
                Some(&format!("Replay event {} as a new event?", e.id)),
            ));
        }
        Replayable::NoProgram => out.push_str(
            "<p>This console was started without the program, which a replay is checked against (`jadpoc console \
             --program PATH`).</p>",
        ),
        Replayable::ReadOnly => {
            out.push_str("<p>This console is read-only (`--console-actions` turns actions on).</p>")
        }
    }
    out
}

/// The breakers page: each connection's breaker with its pause, the pause and
/// resume forms, and the history of operators' actions.
pub fn breakers(
    csrf: &str,
    breakers: &[BreakerView],
    history: &[BreakerAction],
    declared: &[String],
    actions: bool,
    now: i64,
) -> String {
    let mut out = String::new();
    let mut names: Vec<String> = breakers.iter().map(|b| b.connection.clone()).collect();
    for d in declared {
        if !names.contains(d) {
            names.push(d.clone());
        }
    }
    if names.is_empty() {
        out.push_str("<p>No connection has a breaker yet: none has failed or been paused.</p>");
    }
    for name in &names {
        let b = breakers.iter().find(|b| &b.connection == name);
        let _ = write!(
            out,
            "<section class=\"breaker\" data-connection=\"{0}\"><h2>{0}</h2><dl class=\"fields\">",
            esc(name)
        );
        match b {
            Some(b) => {
                let r = &b.row;
                let _ = write!(
                    out,
                    "<dt>State</dt><dd class=\"breaker-state\">{}</dd><dt>Failures in a row</dt><dd>{}</dd>\
                     <dt>Held</dt><dd>{}</dd><dt>Alerts</dt><dd>{}</dd>",
                    state_badge(r.state.as_str()),
                    r.failures_in_a_row,
                    b.held,
                    r.alerts
                );
                if r.state != BreakerState::Closed
                    && let Some(t) = r.opened_at_ms
                {
                    let _ = write!(out, "<dt>Opened</dt><dd>{}</dd>", time(t));
                }
                let paused = match &r.pause {
                    Some(p) if breaker::paused(r, now) => {
                        let until = p.until_ms.map(time).unwrap_or_else(|| "resumed".to_string());
                        let reason = p.reason.as_ref().map(|r| format!(": {}", esc(r))).unwrap_or_default();
                        format!("paused by {} at {} until {until}{reason}", esc(&p.by), time(p.at_ms))
                    }
                    _ => "no".to_string(),
                };
                let _ = write!(out, "<dt>Paused</dt><dd class=\"paused\">{paused}</dd>");
            }
            None => out.push_str("<dt>State</dt><dd class=\"breaker-state\">closed (never failed)</dd><dt>Paused</dt><dd class=\"paused\">no</dd>"),
        }
        out.push_str("</dl>");
        let paused = b.is_some_and(|b| b.row.pause.is_some() && breaker::paused(&b.row, now));
        let path = esc(&query::encode(&[("c", name.clone())])[2..]);
        if actions && !paused {
            let fields = "<label>For<input name=\"for\" placeholder=\"2h (empty: until resumed)\" autocomplete=\"off\"></label>\
                          <label>Reason<input name=\"reason\" autocomplete=\"off\"></label>\
                          <label>By<input name=\"by\" placeholder=\"console\" autocomplete=\"off\"></label>";
            out.push_str(&action_form(
                &format!("/breakers/{path}/pause"),
                csrf,
                fields,
                &format!("Pause {name}"),
                Some(&format!("Pause {name}? Its deliveries are held until it is resumed.")),
            ));
        }
        if actions && b.is_some_and(|b| paused || b.row.state != BreakerState::Closed) {
            let fields = "<label>Reason<input name=\"reason\" autocomplete=\"off\"></label>\
                          <label>By<input name=\"by\" placeholder=\"console\" autocomplete=\"off\"></label>";
            out.push_str(&action_form(
                &format!("/breakers/{path}/resume"),
                csrf,
                fields,
                &format!("Resume {name}"),
                None,
            ));
        }
        out.push_str("</section>");
    }
    out.push_str("<h2>History</h2>");
    if history.is_empty() {
        out.push_str("<p>No connection has been paused or resumed.</p>");
    } else {
        let rows: Vec<String> = history
            .iter()
            .rev()
            .take(100)
            .map(|a| {
                format!(
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    time(a.at_ms),
                    esc(&a.connection),
                    esc(a.action.as_str()),
                    esc(&a.by),
                    esc(a.reason.as_deref().unwrap_or(""))
                )
            })
            .collect();
        out.push_str(&table(
            "Pauses and resumes, newest first",
            &["At", "Connection", "Action", "By", "Reason"],
            &rows,
        ));
    }
    if !actions {
        out.push_str("<p>This console is read-only (`--console-actions` turns actions on).</p>");
    }
    out
}

/// The login form of a console with a token.
pub fn login(csrf: &str, next: &str, error: Option<&str>) -> String {
    let error = error.map(|e| format!("<p class=\"error\" role=\"alert\">{}</p>", esc(e))).unwrap_or_default();
    let fields = format!(
        "{}<label>Token<input type=\"password\" name=\"token\" autocomplete=\"current-password\" required></label>",
        hidden("next", next)
    );
    format!(
        "{error}<p>This console asks for its token (the value of the variable <code>--token env:NAME</code> named).</p>{}",
        action_form("/login", csrf, &fields, "Log in", None)
    )
}
