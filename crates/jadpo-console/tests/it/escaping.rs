//! Text that providers, producers and operators wrote (a failure's reason, a
//! payload, a subscriber's, a connection's or an event's name, a pause's
//! reason and author, a host's name) is shown escaped on every page the
//! console serves, and never as markup.

use crate::fixture::Fixture;
use crate::{T0, console, get, post_form};
use hyper::StatusCode;
use jadpo_check::program::FailureKind;
use jadpo_console::query::encode;
use jadpo_console::{ID, PAGES, Page};
use jadpo_core::rules::breaker::Pause;
use jadpo_core::rules::{self, CallFailure, Decision, FailedBecause, Outcome};
use jadpo_core::store::{Actions, NewDelivery, NewEvent, NoRaise, Recorded, Store};
use jadpo_core::version::{ProcessRow, ProgramVersion};
use std::sync::Arc;

/// What a hostile provider or producer writes.
const HOSTILE: &str = "<script>alert(1)</script>\"'&<>";
/// [`HOSTILE`] as a page shows it: escaped for text and double-quoted
/// attribute values alike.
const ESCAPED: &str = "&lt;script&gt;alert(1)&lt;/script&gt;&quot;'&amp;&lt;&gt;";
/// [`HOSTILE`] as a payload's string value shows it: JSON-quoted, then escaped.
const ESCAPED_IN_JSON: &str = "&quot;&lt;script&gt;alert(1)&lt;/script&gt;\\&quot;'&amp;&lt;&gt;&quot;";

/// The ids the hostile store's pages are reached by.
struct Ids {
    /// A delivery to the hostile subscriber through the hostile connection,
    /// failed with the hostile reason, of an event with the hostile payload.
    delivery: i64,
    /// A `Paid` whose `id` is hostile.
    event: i64,
    /// An event whose name is hostile (the program refuses to replay it).
    named: i64,
}

/// A store where every text a provider, a producer or an operator wrote is
/// [`HOSTILE`].
fn hostile_store(f: &Fixture) -> (Arc<dyn Store>, Ids) {
    let store = f.store.clone();
    let version = ProgramVersion {
        hash: HOSTILE.to_string(),
        sources: Vec::new(),
        subscribers: vec![HOSTILE.to_string()],
        created_at_ms: T0,
        accepted: vec![HOSTILE.to_string()],
    };
    store.record_version(&version, T0, true).expect("a version");
    let process =
        ProcessRow { id: "p1".into(), host: HOSTILE.into(), pid: 7, version: HOSTILE.into(), started_at_ms: T0 };
    store.heartbeat(&process, T0 + 60_000, T0).expect("a heartbeat");
    let hostile_delivery = || NewDelivery { subscriber: HOSTILE.into(), connection: HOSTILE.into(), order_key: None };
    let paid = NewEvent {
        name: "Paid".into(),
        payload: serde_json::json!({ "id": HOSTILE }).to_string(),
        deliveries: vec![
            NewDelivery { subscriber: "booking".into(), connection: "ledger".into(), order_key: None },
            hostile_delivery(),
        ],
    };
    let named = NewEvent {
        name: HOSTILE.into(),
        payload: serde_json::json!({ "note": HOSTILE }).to_string(),
        deliveries: vec![hostile_delivery()],
    };
    let events = store.emit(&[paid, named], T0).expect("emit");
    // Every delivery fails with the hostile reason, as a provider's answer
    // would give it.
    let budget = jadpo_check::program::Budget::default();
    let report = store
        .claim(
            T0,
            1_000,
            &mut |c| {
                let d = rules::decide_at_claim(&c.record, &budget, T0, c.handled, 1_000);
                rules::breaker::decide_at_claim(d, &c.breaker, c.id, T0)
            },
            &NoRaise,
        )
        .expect("claim");
    let records: Vec<Recorded> = report
        .run
        .iter()
        .map(|c| {
            let mut failure = CallFailure::new(FailureKind::Rejected, "http.422").with_reason(HOSTILE);
            failure.http_status = Some(422);
            let outcome = Outcome::Failed(failure);
            let failure = outcome.failure().expect("a failure");
            Recorded {
                id: c.id,
                connection: c.connection.clone(),
                attempt: c.attempt,
                started_at_ms: T0,
                ended_at_ms: T0 + 5,
                outcome,
                decision: Decision::Failed { failure, because: FailedBecause::NotRetryable },
            }
        })
        .collect();
    assert_eq!(records.len(), 3);
    store.record(&records, &[], &NoRaise).expect("record");
    // An operator paused the hostile connection, with a hostile reason.
    let pause = Pause { at_ms: T0, until_ms: Some(T0 + 3_600_000), by: HOSTILE.into(), reason: Some(HOSTILE.into()) };
    store.pause_connection(HOSTILE, &pause).expect("pause");
    let (event, named) = (events[0], events[1]);
    let delivery = store.event(event).expect("read").expect("the event").deliveries[1].id;
    (store, Ids { delivery, event, named })
}

/// `path` with `pairs` as its query string.
fn with_query(path: &str, pairs: &[(&str, &str)]) -> String {
    let pairs: Vec<(&str, String)> = pairs.iter().map(|(k, v)| (*k, v.to_string())).collect();
    format!("{path}?{}", encode(&pairs))
}

/// What each page is asked and must show of the hostile store: a path (the
/// page's pattern with its id given) and the escaped texts it shows there. A
/// page added to the router without a case here does not compile.
fn cases(page: Page, pattern: &str, ids: &Ids) -> Vec<(String, Vec<String>)> {
    let id = |n: i64| pattern.replace(ID, &n.to_string());
    let e = ESCAPED.to_string();
    match page {
        Page::Overview | Page::OverviewLive => vec![(
            pattern.to_string(),
            vec![
                // The subscriber, the connection paused and who paused it.
                format!(">{e}</a></th>"),
                format!("<th scope=\"row\">{e}</th>"),
                format!("paused by {e}"),
                // The program version's process and accepted codes.
                format!("pid 7 on {e} since"),
                format!("<td>{e}</td>"),
            ],
        )],
        Page::Deliveries => vec![
            (pattern.to_string(), vec![format!("<td>{e}</td><td>{e}</td>")]),
            // The filter's fields hold what the query said.
            (
                with_query(pattern, &[("subscriber", HOSTILE), ("event", HOSTILE), ("code", HOSTILE)]),
                vec![format!("name=\"subscriber\" value=\"{e}\""), format!("name=\"code\" value=\"{e}\"")],
            ),
        ],
        Page::BulkRetry => vec![(
            with_query(pattern, &[("subscriber", HOSTILE)]),
            vec![
                format!("<li>subscriber = <code>{e}</code></li>"),
                format!("name=\"subscriber\" value=\"{e}\""),
                "data-count=\"2\"".to_string(),
            ],
        )],
        Page::Delivery => vec![(
            id(ids.delivery),
            vec![
                // The last failure's reason, the attempt's, the payload.
                format!("rejected <code>http.422</code>: {e}"),
                format!("<td class=\"num\">422</td><td>{e}</td>"),
                ESCAPED_IN_JSON.to_string(),
                // The subscriber and the connection, each a link to its deliveries.
                format!(">{e}</a></dd><dt>Connection</dt><dd><a href=\"/deliveries?connection="),
                format!(">{e}</a></dd><dt>Attempts</dt>"),
            ],
        )],
        Page::Events => vec![
            (pattern.to_string(), vec![format!("<td>{e}</td>")]),
            (with_query(pattern, &[("name", HOSTILE)]), vec![format!("name=\"name\" value=\"{e}\"")]),
        ],
        Page::BulkReplay => vec![(
            pattern.to_string(),
            vec![
                // The event the program refuses, with why (its name).
                format!("#{}</a>: ", ids.named),
                format!("`{e}`"),
            ],
        )],
        Page::Event => vec![
            (
                id(ids.event),
                vec![ESCAPED_IN_JSON.to_string(), format!("<td>{e}</td><td>{e}</td>"), "Replay this event".into()],
            ),
            (id(ids.named), vec![format!("<dt>Name</dt><dd>{e}</dd>"), "It cannot be replayed: ".into()]),
        ],
        Page::Breakers => vec![(
            pattern.to_string(),
            vec![
                format!("data-connection=\"{e}\"><h2>{e}</h2>"),
                format!("paused by {e} at "),
                format!("</time>: {e}</dd>"),
                // Its history: the connection, who and why.
                format!("<td>{e}</td><td>pause</td><td>{e}</td><td>{e}</td>"),
                format!("Resume {e}"),
            ],
        )],
        Page::Login => vec![(
            with_query(pattern, &[("next", &format!("/{HOSTILE}"))]),
            vec![format!("name=\"next\" value=\"/{e}\"")],
        )],
    }
}

/// Neither [`HOSTILE`] nor any piece of it that would be markup is in `body`.
fn assert_no_markup_of_theirs(what: &str, body: &str) {
    for raw in ["<script>", "alert(1)</script>", "&<>", "\"'&"] {
        assert!(!body.contains(raw), "{what} shows {raw:?} unescaped:\n{body}");
    }
}

fn every_page_shows_what_others_wrote_escaped(f: &Fixture) {
    let (store, ids) = hostile_store(f);
    let (c, _) = console(store, true, None);
    for (pattern, page) in PAGES {
        let cases = cases(page, pattern, &ids);
        assert!(!cases.is_empty(), "{pattern} is asked nothing");
        for (path, needles) in cases {
            let got = get(&c, &path);
            assert_eq!(got.status, StatusCode::OK, "{path}: {}", got.body);
            assert!(got.header("content-type").starts_with("text/html"), "{path}");
            assert_no_markup_of_theirs(&path, &got.body);
            for needle in needles {
                assert!(got.body.contains(&needle), "{path} lacks {needle:?}:\n{}", got.body);
            }
        }
    }
    // A filter or a form that does not read names what it was given, escaped.
    for (path, needle) in [
        (with_query("/deliveries", &[("since", HOSTILE)]), format!("`--since {ESCAPED}` is not a time")),
        (with_query("/events", &[("until", HOSTILE)]), format!("`--until {ESCAPED}` is not a time")),
    ] {
        let got = get(&c, &path);
        assert_eq!(got.status, StatusCode::BAD_REQUEST, "{path}: {}", got.body);
        assert_no_markup_of_theirs(&path, &got.body);
        assert!(got.body.contains(&needle), "{path} lacks {needle:?}:\n{}", got.body);
    }
    let path = format!("/breakers/{}/pause", &encode(&[("c", HOSTILE.to_string())])[2..]);
    let got = post_form(&c, &path, &encode(&[("for", HOSTILE.to_string())]));
    assert_eq!(got.status, StatusCode::BAD_REQUEST, "{}", got.body);
    assert_no_markup_of_theirs(&path, &got.body);
    assert!(got.body.contains(&format!("`for={ESCAPED}` is not a duration")), "{}", got.body);
}

/// The console's sources never put text into a page unescaped: maud's
/// `PreEscaped` (its one way around escaping) is not used.
#[test]
fn the_console_never_writes_unescaped_html() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&src).expect("src/") {
        let path = entry.expect("an entry").path();
        let text = std::fs::read_to_string(&path).expect("a source file");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if code.contains("PreEscaped") {
                found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "unescaped HTML in the console's sources:\n{}", found.join("\n"));
}

jadpo_test_support::on_every_store!(crate::fixture;
    every_page_shows_what_others_wrote_escaped,
);
