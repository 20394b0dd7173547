//! The console's handlers on both stores: pages and their status codes, the
//! filters and the keyset cursor, the actions and their guards (read-only,
//! CSRF, Origin, Host, the token), and the live overview's ETag.

mod escaping;
mod fixture;
mod paging;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::{Request, StatusCode};
use jadpo_check::program::{Budget, DeliveryState, FailureKind};
use jadpo_console::{Console, READ_ONLY, Settings};
use jadpo_core::clock::{Clock, VirtualClock};
use jadpo_core::rules::{self, Decision, FailedBecause, Outcome, breaker};
use jadpo_core::store::{Actions, DeliveryDetail, EventDetail, NewDelivery, NewEvent, NoRaise, Recorded, Store};
use serde_json::Value;
use std::sync::Arc;

use fixture::Fixture;

/// The tests' "now" at the start: 2023-11-14T22:13:20Z.
pub const T0: i64 = 1_700_000_000_000;

/// The program the tests' events and connections come from.
pub const PROGRAM: &str = r#"
event Paid {
    id: string
}

connection ledger {
    url: "https://ledger.example/hooks"
}

connection mailer {
    url: "https://mail.example/hooks"
}

action book(id: string) {
    via: ledger
}

action mail(id: string) {
    via: mailer
}

subscriber booking {
    on: Paid
    run: book(event.id)
}

subscriber mailing {
    on: Paid
    run: mail(event.id)
}
"#;

/// Event `n`: a `Paid` with a delivery to `booking` (through `ledger`) and one
/// to `mailing` (through `mailer`).
pub fn paid(n: usize) -> NewEvent {
    NewEvent {
        name: "Paid".into(),
        payload: format!(r#"{{"id":"p{n}"}}"#),
        deliveries: vec![
            NewDelivery { subscriber: "booking".into(), connection: "ledger".into(), order_key: None },
            NewDelivery { subscriber: "mailing".into(), connection: "mailer".into(), order_key: None },
        ],
    }
}

/// Claim every due delivery at `now` and record each attempt: those of
/// `failing` fail for good with `code`, the others succeed.
pub fn attempt_all(store: &dyn Store, now: i64, failing: &str, code: &str) {
    let budget = Budget::default();
    let report = store
        .claim(
            now,
            1_000,
            &mut |c| {
                let d = rules::decide_at_claim(&c.record, &budget, now, c.handled, 1_000);
                breaker::decide_at_claim(d, &c.breaker, c.id, now)
            },
            &NoRaise,
        )
        .expect("claim");
    let records: Vec<Recorded> = report
        .run
        .iter()
        .map(|c| {
            let (outcome, decision) = if c.subscriber == failing {
                let outcome = Outcome::fail(FailureKind::Rejected, code);
                let failure = outcome.failure().expect("a failure");
                (outcome, Decision::Failed { failure, because: FailedBecause::NotRetryable })
            } else {
                (Outcome::ok(), Decision::Succeeded)
            };
            Recorded {
                id: c.id,
                connection: c.connection.clone(),
                attempt: c.attempt,
                started_at_ms: now,
                ended_at_ms: now + 5,
                outcome,
                decision,
            }
        })
        .collect();
    store.record(&records, &[], &NoRaise).expect("record");
}

/// A console over `store` at [`T0`]'s clock, with the tests' program.
pub fn console(store: Arc<dyn Store>, actions: bool, token: Option<&str>) -> (Arc<Console>, Arc<VirtualClock>) {
    let clock = Arc::new(VirtualClock::new(T0 + 60_000));
    let settings =
        Settings { actions, token: token.map(str::to_string), listen: "127.0.0.1:7400".parse().expect("an address") };
    let program = jadpo_test_support::program(PROGRAM);
    let console = Console::new(store, clock.clone() as Arc<dyn Clock>, Some(program), settings);
    (Arc::new(console), clock)
}

/// An answer, read whole.
pub struct Got {
    pub status: StatusCode,
    pub headers: hyper::HeaderMap,
    pub body: String,
}

impl Got {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("a runtime")
}

/// `method path` with `headers` (`host` is loopback's unless given) and `body`.
pub fn send(console: &Arc<Console>, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Got {
    let mut req = Request::builder().method(method).uri(path);
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req = req.header("host", "127.0.0.1:7400");
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Bytes::from(body.to_string())).expect("a request");
    let console = console.clone();
    runtime().block_on(async move {
        let answer = console.answer(req).await;
        let (parts, body) = answer.into_parts();
        let bytes = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        Got { status: parts.status, headers: parts.headers, body: String::from_utf8_lossy(&bytes).into_owned() }
    })
}

pub fn get(console: &Arc<Console>, path: &str) -> Got {
    send(console, "GET", path, &[], "")
}

/// A form POSTed as the console's own page sends it: its CSRF cookie and field.
pub fn post_form(console: &Arc<Console>, path: &str, form: &str) -> Got {
    let csrf = console.csrf().to_string();
    let cookie = format!("jadpo_csrf={csrf}");
    let body = if form.is_empty() { format!("csrf={csrf}") } else { format!("csrf={csrf}&{form}") };
    send(
        console,
        "POST",
        path,
        &[
            ("cookie", &cookie),
            ("origin", "http://127.0.0.1:7400"),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
        &body,
    )
}

/// Four events: deliveries 1..8, `mailing`'s (even ids) failed with
/// `fake.rejected`, `booking`'s succeeded.
pub fn four_events(f: &Fixture) -> Arc<dyn Store> {
    let store = f.store.clone();
    store.emit(&[paid(1), paid(2), paid(3), paid(4)], T0).expect("emit");
    attempt_all(&*store, T0, "mailing", "fake.rejected");
    store
}

fn state_of(store: &dyn Store, id: i64) -> DeliveryState {
    store.delivery(id).expect("read").expect("the delivery").delivery.state
}

fn ids(v: &Value) -> Vec<i64> {
    v["deliveries"].as_array().expect("a list").iter().map(|d| d["id"].as_i64().expect("an id")).collect()
}

fn every_page_answers(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store, false, None);
    for (path, needle) in [
        ("/", "Deliveries by state"),
        ("/overview/live", "By subscriber"),
        ("/deliveries", "Deliveries, newest first"),
        ("/deliveries?state=failed&subscriber=mailing", "fake.rejected"),
        ("/deliveries/2", "The event's payload"),
        ("/events", "Events, newest first"),
        ("/events/1", "&quot;id&quot;: &quot;p1&quot;"),
        ("/breakers", "Breakers"),
        ("/assets/console.css", "320px"),
        ("/assets/console.js", "If-None-Match"),
    ] {
        let got = get(&c, path);
        assert_eq!(got.status, StatusCode::OK, "{path}: {}", got.body);
        assert!(got.body.contains(needle), "{path} lacks {needle:?}:\n{}", got.body);
    }
    let page = get(&c, "/deliveries/2");
    assert!(page.header("set-cookie").starts_with("jadpo_csrf="), "{:?}", page.headers);
    assert!(page.header("set-cookie").contains("SameSite=Strict"));
    assert!(page.header("content-security-policy").contains("default-src 'self'"));
    // A read-only console offers no action.
    assert!(!page.body.contains("<form method=\"post\""), "{}", page.body);
    for (path, status) in [
        ("/deliveries/999", StatusCode::NOT_FOUND),
        ("/events/999", StatusCode::NOT_FOUND),
        ("/nowhere", StatusCode::NOT_FOUND),
        ("/deliveries?state=lost", StatusCode::BAD_REQUEST),
        ("/api/deliveries?limit=0", StatusCode::BAD_REQUEST),
        ("/api/deliveries/999", StatusCode::NOT_FOUND),
    ] {
        assert_eq!(get(&c, path).status, status, "{path}");
    }
    assert!(get(&c, "/deliveries?state=lost").body.contains("`state=lost` is not a state"));
    assert_eq!(get(&c, "/api/deliveries/999").json()["error"], "no delivery 999");
}

fn the_api_has_the_commands_shapes(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store.clone(), false, None);
    let status = get(&c, "/api/status").json();
    let view = store.status(T0 + 60_000).expect("status");
    assert_eq!(status, jadpo_console::views::status_json(&view));
    assert_eq!(status["states"]["failed"], 4);
    assert_eq!(status["states"]["succeeded"], 4);
    let DeliveryDetail { delivery: d, attempts: h } = store.delivery(2).expect("read").expect("delivery 2");
    assert_eq!(get(&c, "/api/deliveries/2").json(), jadpo_console::views::delivery_with_history_json(&d, &h));
    let EventDetail { event: e, deliveries: ds } = store.event(1).expect("read").expect("event 1");
    assert_eq!(get(&c, "/api/events/1").json(), jadpo_console::views::event_with_deliveries_json(&e, &ds));
    let rates = get(&c, "/api/rates").json();
    assert_eq!(rates, serde_json::json!([{"minute": "2023-11-14T22:13:00Z", "succeeded": 4, "failed": 4}]));
    assert_eq!(get(&c, "/api/breakers").json().as_array().map(Vec::len), Some(store.breakers().expect("b").len()));
}

fn filters_and_the_cursor_page_newest_first(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store, false, None);
    let page = get(&c, "/api/deliveries?state=failed&limit=3").json();
    assert_eq!(ids(&page), vec![8, 6, 4]);
    assert_eq!(page["next_before"], 4);
    let rest = get(&c, "/api/deliveries?state=failed&limit=3&before=4").json();
    assert_eq!(ids(&rest), vec![2]);
    assert_eq!(rest["next_before"], Value::Null);
    for (query, want) in [
        ("subscriber=booking", vec![7, 5, 3, 1]),
        ("connection=mailer", vec![8, 6, 4, 2]),
        ("event=Paid&before=3", vec![2, 1]),
        ("event=Refund", vec![]),
        ("code=fake.rejected&limit=2", vec![8, 6]),
        ("state=succeeded&connection=mailer", vec![]),
        ("since=2023-11-14T22:13:20Z&limit=1", vec![8]),
        ("until=2023-11-14T22:13:20Z", vec![]),
        ("until=2023-11-14T22:13:20.001Z&state=succeeded&before=5", vec![3, 1]),
    ] {
        assert_eq!(ids(&get(&c, &format!("/api/deliveries?{query}")).json()), want, "{query}");
    }
    // The HTML page links its next page by the same cursor.
    let html = get(&c, "/deliveries?state=failed&limit=3").body;
    assert!(html.contains("href=\"/deliveries?state=failed&amp;limit=3&amp;before=4\" rel=\"next\""), "{html}");
    let last = get(&c, "/deliveries?state=failed&limit=3&before=4").body;
    assert!(!last.contains("rel=\"next\""), "{last}");
    assert!(last.contains("rel=\"first\""), "{last}");
}

fn a_read_only_console_refuses_every_action(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store.clone(), false, None);
    for path in ["/deliveries/2/retry", "/deliveries/retry", "/events/1/replay", "/breakers/ledger/pause"] {
        let got = post_form(&c, path, "state=failed");
        assert_eq!(got.status, StatusCode::FORBIDDEN, "{path}");
        assert!(got.body.contains("this console is read-only"), "{path}: {}", got.body);
    }
    let api = send(&c, "POST", "/deliveries/2/retry", &[("accept", "application/json")], "");
    assert_eq!(api.status, StatusCode::FORBIDDEN);
    assert_eq!(api.json()["error"], READ_ONLY);
    assert_eq!(state_of(&*store, 2), DeliveryState::Failed);
}

fn an_action_without_the_csrf_token_or_from_another_site_is_refused(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store.clone(), true, None);
    let csrf = c.csrf().to_string();
    let cookie = format!("jadpo_csrf={csrf}");
    let form = format!("csrf={csrf}");
    let refused = [
        // No token at all.
        send(&c, "POST", "/deliveries/2/retry", &[], ""),
        // The field without the cookie.
        send(&c, "POST", "/deliveries/2/retry", &[], &form),
        // The cookie without the field.
        send(&c, "POST", "/deliveries/2/retry", &[("cookie", &cookie)], ""),
        // Another token.
        send(&c, "POST", "/deliveries/2/retry", &[("cookie", "jadpo_csrf=00")], "csrf=00"),
        // Both right, sent by another site.
        send(&c, "POST", "/deliveries/2/retry", &[("cookie", &cookie), ("origin", "http://evil.example")], &form),
        send(&c, "POST", "/deliveries/2/retry", &[("cookie", &cookie), ("sec-fetch-site", "cross-site")], &form),
    ];
    for (i, got) in refused.iter().enumerate() {
        assert_eq!(got.status, StatusCode::FORBIDDEN, "case {i}: {}", got.body);
        assert!(got.body.contains("CSRF check"), "case {i}: {}", got.body);
    }
    assert_eq!(state_of(&*store, 2), DeliveryState::Failed);
    // A page whose Host is not loopback's (a DNS rebinding page) is not served.
    let rebound = send(&c, "GET", "/", &[("host", "evil.example:7400")], "");
    assert_eq!(rebound.status, StatusCode::MISDIRECTED_REQUEST);
    // The console's own form.
    let got = post_form(&c, "/deliveries/2/retry", "");
    assert_eq!(got.status, StatusCode::SEE_OTHER, "{}", got.body);
    assert_eq!(got.header("location"), "/deliveries/2?done=retried");
    assert_eq!(state_of(&*store, 2), DeliveryState::Pending);
    assert!(get(&c, "/deliveries/2?done=retried").body.contains("Retried with a fresh budget"));
    // Again: it is pending now.
    let again = post_form(&c, "/deliveries/2/retry", "");
    assert_eq!(again.status, StatusCode::CONFLICT);
    assert!(again.body.contains("delivery 2 is pending; only failed or parked deliveries can be retried"));
}

fn a_bulk_retry_confirms_its_count_then_retries_what_the_filter_selects(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store.clone(), true, None);
    let confirm = get(&c, "/deliveries/retry?connection=mailer&until=2023-11-14T22:13:21Z");
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("<h1>Retry 4 deliveries?</h1>"), "{}", confirm.body);
    assert!(confirm.body.contains("data-count=\"4\""), "{}", confirm.body);
    assert!(confirm.body.contains("name=\"through\" value=\"8\""), "{}", confirm.body);
    // Nothing to retry among the succeeded.
    assert!(get(&c, "/deliveries/retry?state=succeeded").body.contains("<h1>Nothing to retry</h1>"));
    // A delivery failing after the confirmation is not taken.
    store.emit(&[paid(5)], T0 + 10).expect("emit");
    attempt_all(&*store, T0 + 10, "mailing", "fake.rejected");
    let done = post_form(&c, "/deliveries/retry", "connection=mailer&through=8&expected=4");
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.header("location"), "/deliveries?connection=mailer&done=bulk&n=4&of=4");
    for id in [2, 4, 6, 8] {
        assert_eq!(state_of(&*store, id), DeliveryState::Pending, "delivery {id}");
    }
    assert_eq!(state_of(&*store, 10), DeliveryState::Failed);
    assert!(get(&c, "/deliveries?connection=mailer&done=bulk&n=4&of=4").body.contains("Retried 4 deliveries"));
    // By the API (the token-less loopback console, with the CSRF token), as JSON.
    let csrf = c.csrf().to_string();
    let json = send(
        &c,
        "POST",
        "/deliveries/retry",
        &[("cookie", &format!("jadpo_csrf={csrf}")), ("accept", "application/json")],
        &format!("csrf={csrf}&state=failed"),
    );
    assert_eq!(json.json(), serde_json::json!([{"id": 10, "result": "retried"}]));
}

fn a_connection_is_paused_and_resumed(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store.clone(), true, None);
    let page = get(&c, "/breakers").body;
    assert!(page.contains("action=\"/breakers/ledger/pause\""), "{page}");
    let paused = post_form(&c, "/breakers/ledger/pause", "for=2h&reason=maintenance&by=ops");
    assert_eq!(paused.status, StatusCode::SEE_OTHER, "{}", paused.body);
    let row = store.breakers().expect("b").into_iter().find(|b| b.connection == "ledger").expect("ledger's breaker");
    let pause = row.row.pause.expect("a pause");
    assert_eq!((pause.by.as_str(), pause.reason.as_deref()), ("ops", Some("maintenance")));
    assert_eq!(pause.until_ms, Some(T0 + 60_000 + 7_200_000));
    let page = get(&c, "/breakers?done=paused").body;
    assert!(page.contains("paused by ops"), "{page}");
    assert!(page.contains("action=\"/breakers/ledger/resume\""), "{page}");
    assert_eq!(post_form(&c, "/breakers/nowhere/pause", "").status, StatusCode::NOT_FOUND);
    assert_eq!(post_form(&c, "/breakers/ledger/pause", "for=soon").status, StatusCode::BAD_REQUEST);
    let resumed = post_form(&c, "/breakers/ledger/resume", "");
    assert_eq!(resumed.status, StatusCode::SEE_OTHER);
    let row = store.breakers().expect("b").into_iter().find(|b| b.connection == "ledger").expect("ledger's breaker");
    assert!(row.row.pause.is_none());
    let history = get(&c, "/api/breakers/history").json();
    let actions: Vec<&str> = history.as_array().expect("a list").iter().filter_map(|a| a["action"].as_str()).collect();
    assert_eq!(actions, vec!["pause", "resume"]);
}

fn an_event_is_replayed(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store.clone(), true, None);
    let page = get(&c, "/events/1").body;
    assert!(page.contains("action=\"/events/1/replay\""), "{page}");
    let got = post_form(&c, "/events/1/replay", "subscriber=mailing");
    assert_eq!(got.status, StatusCode::SEE_OTHER, "{}", got.body);
    assert_eq!(got.header("location"), "/events/5?done=replay&of=1");
    let EventDetail { event: e, deliveries: ds } = store.event(5).expect("read").expect("the replay");
    assert_eq!(e.replay_of, Some(1));
    assert_eq!(ds.iter().map(|d| d.subscriber.as_str()).collect::<Vec<_>>(), vec!["mailing"]);
    assert!(get(&c, "/events/5?done=replay&of=1").body.contains("This event replays event #1."));
}

fn a_replay_by_filter_confirms_its_count_then_replays_oldest_first(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store.clone(), true, None);
    assert!(get(&c, "/events").body.contains("href=\"/events/replay?\""));
    let confirm = get(&c, "/events/replay?name=Paid");
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    assert!(confirm.body.contains("<h1>Replay 4 events?</h1>"), "{}", confirm.body);
    assert!(confirm.body.contains("name=\"through\" value=\"4\""), "{}", confirm.body);
    assert!(get(&c, "/events/replay?name=Refund").body.contains("<h1>Nothing to replay</h1>"));
    // An event stored after the confirmation is not taken.
    store.emit(&[paid(5)], T0 + 10).expect("emit");
    let done = post_form(&c, "/events/replay", "name=Paid&through=4");
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.header("location"), "/events?name=Paid&done=replayed&n=4");
    assert!(get(&c, "/events?name=Paid&done=replayed&n=4").body.contains("Replayed 4 events as new events."));
    let replays: Vec<(i64, Option<i64>)> = (6..=9)
        .map(|id| store.event(id).expect("read").map(|d| (d.event.id, d.event.replay_of)).expect("a replay"))
        .collect();
    assert_eq!(replays, vec![(6, Some(1)), (7, Some(2)), (8, Some(3)), (9, Some(4))]);
    assert!(store.event(10).expect("read").is_none());
    // Replays are left out of the next replay by filter.
    assert!(get(&c, "/events/replay?name=Paid").body.contains("<h1>Replay 5 events?</h1>"));
    // A read-only console confirms nothing.
    let (read_only, _) = console(store, false, None);
    assert_eq!(post_form(&read_only, "/events/replay", "name=Paid").status, StatusCode::FORBIDDEN);
}

fn a_console_with_a_token_asks_for_it(f: &Fixture) {
    let store = four_events(f);
    let (c, _) = console(store, true, Some("s3cret"));
    let page = get(&c, "/deliveries");
    assert_eq!(page.status, StatusCode::SEE_OTHER);
    assert_eq!(page.header("location"), "/login?next=%2Fdeliveries");
    assert_eq!(get(&c, "/api/status").status, StatusCode::UNAUTHORIZED);
    assert_eq!(get(&c, "/assets/console.css").status, StatusCode::OK);
    let bearer = send(&c, "GET", "/api/status", &[("authorization", "Bearer s3cret")], "");
    assert_eq!(bearer.status, StatusCode::OK);
    assert_eq!(
        send(&c, "GET", "/api/status", &[("authorization", "Bearer nope")], "").status,
        StatusCode::UNAUTHORIZED
    );
    // The login form: wrong, then right (its cookie then opens the pages).
    assert_eq!(post_form(&c, "/login", "token=nope&next=/deliveries").status, StatusCode::UNAUTHORIZED);
    let ok = post_form(&c, "/login", "token=s3cret&next=/deliveries");
    assert_eq!(ok.status, StatusCode::SEE_OTHER);
    assert_eq!(ok.header("location"), "/deliveries");
    let cookie = ok.header("set-cookie").split(';').next().unwrap_or("").to_string();
    assert_eq!(cookie, "jadpo_console_token=s3cret");
    let page = send(&c, "GET", "/deliveries", &[("cookie", &cookie)], "");
    assert_eq!(page.status, StatusCode::OK);
    // Never sent elsewhere after logging in.
    assert_eq!(post_form(&c, "/login", "token=s3cret&next=//evil.example").header("location"), "/");
    // An action with the Bearer header needs no CSRF token.
    let api = send(
        &c,
        "POST",
        "/deliveries/2/retry",
        &[("authorization", "Bearer s3cret"), ("accept", "application/json")],
        "",
    );
    assert_eq!(api.json(), serde_json::json!([{"id": 2, "result": "retried"}]));
}

fn the_live_overview_answers_304_while_nothing_changed(f: &Fixture) {
    let store = four_events(f);
    let (c, clock) = console(store.clone(), false, None);
    let first = get(&c, "/overview/live");
    let tag = first.header("etag").to_string();
    assert!(tag.starts_with('"') && tag.len() == 34, "{tag}");
    let same = send(&c, "GET", "/overview/live", &[("if-none-match", &tag)], "");
    assert_eq!(same.status, StatusCode::NOT_MODIFIED);
    assert_eq!(same.body, "");
    // A change in the store (past the rates' refresh) is a new overview.
    store.emit(&[paid(9)], T0 + 1).expect("emit");
    clock.advance_to(T0 + 120_000);
    let changed = send(&c, "GET", "/overview/live", &[("if-none-match", &tag)], "");
    assert_eq!(changed.status, StatusCode::OK);
    assert_ne!(changed.header("etag"), tag);
    assert!(changed.body.contains("data-state=\"pending\">2</a>"), "{}", changed.body);
}

/// The overview's row of a connection whose breaker is closed, unpaused,
/// holding nothing.
fn closed_row(connection: &str) -> String {
    format!(
        "<tr data-connection=\"{connection}\"><th scope=\"row\">{connection}</th><td><span class=\"state \
         state-closed\">closed</span></td><td>no</td><td class=\"num\">0</td></tr>"
    )
}

fn the_overview_lists_every_declared_connection(f: &Fixture) {
    // No breaker has a row yet: each connection the program declares is closed.
    let (c, _) = console(f.store.clone(), false, None);
    assert!(f.store.breakers().expect("breakers").is_empty());
    for path in ["/", "/overview/live"] {
        let page = get(&c, path).body;
        for connection in ["ledger", "mailer"] {
            assert!(page.contains(&closed_row(connection)), "{path} lacks {connection}:\n{page}");
        }
    }
    // One has a row (an operator paused it); the other is still listed, closed.
    let pause = breaker::Pause { at_ms: T0, until_ms: None, by: "ops".into(), reason: None };
    f.store.pause_connection("ledger", &pause).expect("pause");
    let page = get(&c, "/overview/live").body;
    assert!(
        page.contains(
            "<tr data-connection=\"ledger\"><th scope=\"row\">ledger</th><td><span class=\"state state-closed\">\
             closed</span></td><td>paused by ops</td><td class=\"num\">0</td></tr>"
        ),
        "{page}"
    );
    assert!(page.contains(&closed_row("mailer")), "{page}");
    // The breakers page shows it the same: closed, no failure, no pause.
    let breakers = get(&c, "/breakers").body;
    assert!(
        breakers.contains(
            "<section class=\"breaker\" data-connection=\"mailer\"><h2>mailer</h2><dl class=\"fields\"><dt>State</dt>\
             <dd class=\"breaker-state\"><span class=\"state state-closed\">closed</span></dd><dt>Failures in a row</dt>\
             <dd>0</dd><dt>Held</dt><dd>0</dd><dt>Alerts</dt><dd>0</dd><dt>Paused</dt><dd class=\"paused\">no</dd></dl>"
        ),
        "{breakers}"
    );
    // Without the program, only the connections with a row are known.
    let settings = Settings { actions: false, token: None, listen: "127.0.0.1:7400".parse().expect("an address") };
    let clock = Arc::new(jadpo_core::clock::VirtualClock::new(T0 + 60_000));
    let bare = Arc::new(Console::new(f.store.clone(), clock as Arc<dyn Clock>, None, settings));
    let page = get(&bare, "/overview/live").body;
    assert!(page.contains("<tr data-connection=\"ledger\">"), "{page}");
    assert!(!page.contains("mailer"), "{page}");
}

jadpo_test_support::on_every_store!(crate::fixture;
    the_overview_lists_every_declared_connection,
    every_page_answers,
    the_api_has_the_commands_shapes,
    filters_and_the_cursor_page_newest_first,
    a_read_only_console_refuses_every_action,
    an_action_without_the_csrf_token_or_from_another_site_is_refused,
    a_bulk_retry_confirms_its_count_then_retries_what_the_filter_selects,
    a_connection_is_paused_and_resumed,
    an_event_is_replayed,
    a_replay_by_filter_confirms_its_count_then_replays_oldest_first,
    a_console_with_a_token_asks_for_it,
    the_live_overview_answers_304_while_nothing_changed,
);
