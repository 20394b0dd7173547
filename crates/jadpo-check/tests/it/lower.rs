//! Lowering: the checked program names each declaration by its index in the
//! program's lists, as the checker resolved it, whatever the order of files and
//! declarations.

use jadpo_check::program::{Arg, Literal, Step};
use jadpo_check::{Lower, SourceFile, check};

const A: &str = "connection second { url: \"http://127.0.0.1:2\" }
event Late { id: string }
action late_call(id: string) { via: second  path: \"/l\" }
subscriber on_late { on: Late  run: late_call(event.id)  retry: { attempts: 3  within: 1h } }
";

const B: &str = "event Early { n: int }
connection first { url: \"http://127.0.0.1:1\"  timeout: 5s  retry: { attempts: 2 }  max_in_flight: 7 }
action early_call(n: int, tag: string) { via: first  idempotent: true }
subscriber on_early { on: Early  run: early_call(event.n, \"t\") }
schedule tick { every: 1m  run: late_call(\"x\") }
test \"both\" {
    fake first: [ok]
    fake second: [ok]
    emit Late { id: \"a\" }
    expect on_late { state: succeeded }
    expect breaker second { state: closed }
}
";

#[test]
fn indices_follow_the_resolution_across_files() {
    let files = [
        SourceFile { name: "dir/a.jadpo".into(), text: A.into() },
        SourceFile { name: "dir/b.jadpo".into(), text: B.into() },
    ];
    let checked = check(&files, Lower::Yes);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    let p = checked.program.expect("a program");
    let names = |v: Vec<&str>| v.join(",");
    assert_eq!(names(p.events.iter().map(|e| e.name.as_str()).collect()), "Late,Early");
    assert_eq!(names(p.connections.iter().map(|c| c.name.as_str()).collect()), "second,first");
    assert_eq!(names(p.actions.iter().map(|a| a.name.as_str()).collect()), "late_call,early_call");

    let first = &p.connections[1];
    assert_eq!((first.timeout_ms, first.attempts, first.max_in_flight), (5_000, 2, 7));
    assert_eq!(p.actions[0].connection, 0);
    assert_eq!(p.actions[1].connection, 1);
    assert_eq!(p.actions[0].path, "/l");
    assert_eq!(p.actions[1].path, "/early_call");
    assert!(p.actions[1].idempotent && !p.actions[0].idempotent);

    let early = &p.subscribers[p.subscriber("on_early").expect("on_early")];
    assert_eq!((early.event, early.call.action), (1, 1));
    assert_eq!(early.call.args, [Arg::Field("n".into()), Arg::Literal(Literal::String("t".into()))]);
    let late = &p.subscribers[p.subscriber("on_late").expect("on_late")];
    assert_eq!((late.event, late.call.action, late.budget.attempts), (0, 0, 3));
    assert_eq!(p.schedules[0].call.action, 0);
    assert_eq!(p.schedules[0].every_ms, 60_000);

    let test = &p.tests[0];
    assert_eq!((test.file.as_str(), test.line), ("dir/b.jadpo", 6));
    assert!(matches!(test.steps[0], Step::Fake { connection: 1, .. }));
    assert!(matches!(test.steps[1], Step::Fake { connection: 0, .. }));
    assert!(matches!(test.steps[2], Step::Emit { event: 0, .. }));
    let on_late = p.subscriber("on_late").expect("on_late");
    assert!(matches!(test.steps[3], Step::Expect { subscriber, .. } if subscriber == on_late));
    assert!(matches!(test.steps[4], Step::ExpectBreaker { connection: 0, .. }));

    // The same program checked twice lowers equal.
    assert_eq!(check(&files, Lower::Yes).program, Some(p));
}

#[test]
fn tls_paths_are_relative_to_the_declaring_file() {
    use jadpo_check::program::{ClientCert, Pem, Tls};
    use std::path::PathBuf;
    let conn = "connection ledger {
    url: \"https://ledger.internal:8443\"
    tls: { ca: \"certs/ca.pem\"  only_ca: true  client_cert: \"/etc/jadpo/cert.pem\"  client_key: env(\"KEY_PEM\") }
}
connection public { url: \"https://api.example.com\" }
";
    let uses = "event E { id: string }
action a(id: string) { via: ledger }
action b(id: string) { via: public }
subscriber s { on: E  run: a(event.id) }
subscriber t { on: E  run: b(event.id) }
";
    let files = [
        SourceFile { name: "deploy/prod/connections.jadpo".into(), text: conn.into() },
        SourceFile { name: "main.jadpo".into(), text: uses.into() },
    ];
    let checked = check(&files, Lower::Yes);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    let p = checked.program.expect("a program");
    assert_eq!(
        p.connections[0].tls,
        Some(Tls {
            ca: Some(Pem::File(PathBuf::from("deploy/prod/certs/ca.pem"))),
            only_ca: true,
            client: Some(ClientCert {
                cert: Pem::File(PathBuf::from("/etc/jadpo/cert.pem")),
                key: Pem::Env("KEY_PEM".into()),
            }),
        })
    );
    assert_eq!(p.connections[1].tls, None);

    // A file given without a directory: the path stays as written.
    let files = [SourceFile { name: "all.jadpo".into(), text: format!("{conn}{uses}") }];
    let p = check(&files, Lower::Yes).program.expect("a program");
    let ca = p.connections[0].tls.as_ref().and_then(|t| t.ca.clone());
    assert_eq!(ca, Some(Pem::File(PathBuf::from("certs/ca.pem"))));
}

#[test]
fn builtin_events_are_lowered_when_used() {
    use jadpo_check::builtin::{BUILTIN_EVENTS, is_builtin_event};
    let text = "event Paid { id: string }
connection pager { url: \"https://pager.example.com\" }
action page(what: string, held: int) { via: pager }
subscriber on_paid { on: Paid  run: page(event.id, 0) }
subscriber on_outage { on: jadpo.connection_unavailable  run: page(\"outage\", event.held) }
";
    let checked = check(&[SourceFile { name: "p.jadpo".into(), text: text.into() }], Lower::Yes);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    let p = checked.program.expect("a program");
    let names: Vec<&str> = p.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["Paid", "jadpo.connection_unavailable"], "only the built-in event in use");
    let outage = p.subscribers[p.subscriber("on_outage").expect("on_outage")].event;
    assert_eq!(p.events[outage].name, "jadpo.connection_unavailable");
    assert!(is_builtin_event(&p.events[outage].name) && !is_builtin_event("Paid"));
    let fields: Vec<&str> = p.events[outage].fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(fields, ["connection", "since", "held"]);
    assert_eq!(BUILTIN_EVENTS.len(), 5);

    // Built-in events have no definition or reference in the index, and are never unused.
    assert!(checked.index.defs().iter().all(|d| !d.name.starts_with("jadpo.")));
    assert!(checked.index.refs().iter().all(|r| !r.name.starts_with("jadpo.")));
    let plain = "event Paid { id: string }
connection pager { url: \"https://pager.example.com\" }
action page(what: string, held: int) { via: pager }
subscriber on_paid { on: Paid  run: page(event.id, 0) }
";
    let checked = check(&[SourceFile { name: "p.jadpo".into(), text: plain.into() }], Lower::Yes);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    assert_eq!(checked.program.expect("a program").events.len(), 1);
}

#[test]
fn keyword_fields_of_builtin_events_check_and_lower() {
    let program = |params: &str| {
        format!(
            "connection pager {{ url: \"https://pager.example.com\" }}
action notify({params}) {{ via: pager }}
subscriber on_outage {{
    on: jadpo.connection_unavailable
    run: notify(event.connection, event.since)
}}
"
        )
    };
    let text = program("name: string, since: time");
    let checked = check(&[SourceFile { name: "p.jadpo".into(), text }], Lower::Yes);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
    let p = checked.program.expect("a program");
    let s = &p.subscribers[p.subscriber("on_outage").expect("on_outage")];
    assert_eq!(s.call.args, [Arg::Field("connection".into()), Arg::Field("since".into())]);

    // The keyword field is typed like any other: a `time` parameter does not take it.
    let text = program("name: time, since: time");
    let checked = check(&[SourceFile { name: "p.jadpo".into(), text }], Lower::No);
    let codes: Vec<_> = checked.diagnostics.iter().map(|d| d.code).collect();
    assert_eq!(codes, [jadpo_check::Code::RunTypeMismatch], "{:?}", checked.diagnostics);
}
