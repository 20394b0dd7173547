//! What diagnostics say: values echoed as written, and help that, applied, checks
//! clean.

use jadpo_check::{Code, Diagnostic, Lower, SourceFile, check};

fn diagnostics(text: &str) -> Vec<Diagnostic> {
    check(&[SourceFile { name: "m.jadpo".into(), text: text.into() }], Lower::No).diagnostics
}

const PROGRAM: &str = "event Parcel {
    id: string
    carrier: CARRIER_TYPE
}

connection post {
    url: \"http://127.0.0.1:8080\"
}

action ship(id: string, carrier: PARAM_TYPE) {
    via: post
}

subscriber send {
    on: Parcel
    run: ship(event.id, event.carrier)
}
";

/// Applies a `run.type_mismatch` help of the form "declare the parameter `NAME: TYPE`"
/// to the program and checks it again.
fn apply_declare_help(text: &str, param_decl: &str) -> Vec<Diagnostic> {
    let found = diagnostics(text);
    let [d] = found.as_slice() else { panic!("one diagnostic expected, found {found:?}") };
    assert_eq!(d.code, Code::RunTypeMismatch);
    let help = d.help.as_deref().expect("a help");
    let start = help.find("declare the parameter `").expect("a declaration to apply") + "declare the parameter `".len();
    let end = start + help[start..].find('`').expect("closing backtick");
    let proposed = &help[start..end];
    // The parameter list of `ship`, not the event's field of the same name.
    let (from, to) = (format!("id: string, {param_decl})"), format!("id: string, {proposed})"));
    assert!(text.contains(&from));
    diagnostics(&text.replacen(&from, &to, 1))
}

#[test]
fn help_for_an_optional_field_of_another_type_checks_clean_when_applied() {
    let text = PROGRAM.replace("CARRIER_TYPE", "string?").replace("PARAM_TYPE", "int");
    let after = apply_declare_help(&text, "carrier: int");
    assert!(after.is_empty(), "{after:?}");
}

#[test]
fn help_for_an_optional_field_of_the_same_type_checks_clean_when_applied() {
    let text = PROGRAM.replace("CARRIER_TYPE", "string?").replace("PARAM_TYPE", "string");
    let after = apply_declare_help(&text, "carrier: string");
    assert!(after.is_empty(), "{after:?}");
    // An int field where a float is taken: the parameter becomes `float?`.
    let text = PROGRAM.replace("CARRIER_TYPE", "int?").replace("PARAM_TYPE", "float");
    let after = apply_declare_help(&text, "carrier: float");
    assert!(after.is_empty(), "{after:?}");
}

#[test]
fn help_for_a_required_field_of_another_type_checks_clean_when_applied() {
    let text = PROGRAM.replace("CARRIER_TYPE", "bool").replace("PARAM_TYPE", "time");
    let after = apply_declare_help(&text, "carrier: time");
    assert!(after.is_empty(), "{after:?}");
}

#[test]
fn durations_out_of_range_are_echoed_as_written() {
    let text = "event E { a: string }
connection c { url: \"http://127.0.0.1:1\"  timeout: 0ms }
action act(a: string) { via: c }
subscriber s { on: E  run: act(event.a)  timeout: 0ms  retry: { within: 0ms } }
subscriber t { on: E  run: act(event.a)  timeout: 900s }
";
    let messages: Vec<(Code, String)> = diagnostics(text).into_iter().map(|d| (d.code, d.message)).collect();
    assert_eq!(
        messages,
        [
            (Code::ConnectionTimeoutInvalid, "a connection's `timeout:` must be 1ms to 5m, found `0ms`".to_string()),
            (Code::SubscriberTimeoutInvalid, "a subscriber's `timeout:` must be 1s to 15m, found `0ms`".to_string()),
            (Code::SubscriberRetryInvalid, "`within` must be more than 0 and at most 30d, found `0ms`".to_string()),
        ],
        "900s is 15m, in range"
    );
}

#[test]
fn a_time_literal_is_reported_at_the_literal() {
    let text = PROGRAM.replace("CARRIER_TYPE", "string").replace("PARAM_TYPE", "string").replace(
        "run: ship(event.id, event.carrier)",
        "run: ship(event.id, event.carrier)\n}\naction at(when: time) { via: post }\nschedule s { every: 1h  run: at(\"noon\")",
    );
    let found = diagnostics(&text);
    let [d] = found.as_slice() else { panic!("{found:?}") };
    assert_eq!(d.code, Code::ValueInvalidTime);
    assert_eq!(&text[d.span.range()], "\"noon\"");
}

#[test]
fn a_misspelt_builtin_event_gets_a_did_you_mean() {
    let text = "connection c { url: \"https://x.example.com\" }
action a(n: int) { via: c }
subscriber s { on: jadpo.conection_unavailable  run: a(event.held) }
";
    let found = diagnostics(text);
    let [d] = found.as_slice() else { panic!("{found:?}") };
    assert_eq!(d.code, Code::SubscriberUnknownEvent);
    assert_eq!(&text[d.span.range()], "jadpo.conection_unavailable");
    assert_eq!(d.help.as_deref(), Some("did you mean `jadpo.connection_unavailable`?"));
}

#[test]
fn an_emit_of_a_builtin_event_is_checked_against_its_fields() {
    let program = "connection c { url: \"https://x.example.com\" }
action a(n: int) { via: c }
subscriber s { on: jadpo.connection_recovered  run: a(event.outage_ms) }
";
    let says = |emit: &str| -> Vec<(Code, String, String)> {
        let text = format!("{program}test \"t\" {{\n    fake c: [ok]\n    {emit}\n}}\n");
        diagnostics(&text).into_iter().map(|d| (d.code, text[d.span.range()].to_string(), d.message)).collect()
    };
    let emit = "emit jadpo.connection_recovered";
    assert_eq!(says(&format!("{emit} {{ \"connection\": \"c\", outage_ms: 60000 }}")), []);
    assert_eq!(
        says(&format!("{emit} {{ \"connection\": \"c\", outage_ms: 1, since: \"x\" }}")),
        [(
            Code::TestUnknownField,
            "since".into(),
            "the event `jadpo.connection_recovered` has no field `since`".into()
        )]
    );
    assert_eq!(
        says(&format!("{emit} {{ \"connection\": \"c\", outage_ms: \"1m\" }}")),
        [(Code::TestInvalidEmit, "\"1m\"".into(), "`outage_ms` takes `int`, found `string`".into())]
    );
    assert_eq!(
        says(&format!("{emit} {{ outage_ms: 1 }}")),
        [(
            Code::TestInvalidEmit,
            "jadpo.connection_recovered".into(),
            "this emit of `jadpo.connection_recovered` misses the required field `connection`".into()
        )]
    );
}
