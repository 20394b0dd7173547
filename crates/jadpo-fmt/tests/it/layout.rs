//! The layout, by example: files written every way a person may write them, with
//! comments in every position, and their formatted text as snapshots. Every case is
//! also formatted twice, to show the layout is a fixed point.

use jadpo_fmt::format;

/// Formats `src`, checking that formatting the result changes nothing.
fn fmt(src: &str) -> String {
    let out = format(src).unwrap_or_else(|e| panic!("{e}: {:?}", e.errors));
    assert_eq!(format(&out).as_deref(), Ok(out.as_str()), "not idempotent:\n{out}");
    out
}

#[test]
fn comments_in_every_position() {
    let src = r#"// The file's header.
// Second line of it.


// Above the event, after an empty line.
event PaymentReceived { // after the opening brace
    // above the first entry
    payment_id: string // trailing an entry
    amount_cents:int      // aligned by hand
    currency: string?     // stays aligned



    // after three empty lines, which become one
    note: string
    // dangling before the closing brace
} // after the closing brace
// directly below a declaration: above the next one
connection ledger {
    url: "http://127.0.0.1:8080/jadpo"
    retry: { attempts: 2, // inside a nested block
      within: 1m }
    headers: {
        /* a block comment above an entry */ "X-Client": "jadpo"
        "Authorization": env("LEDGER_TOKEN") /* trailing, in block form */
    }
}

action record_payment(payment_id: string, // a parameter's comment
   amount_cents: int) {
    via: ledger
}

subscriber record_payment_webhook {
    on: /* between key and value: moves above the entry */ PaymentReceived
    run: record_payment(
        event.payment_id, // the first argument
        // above the second argument
        event.amount_cents
    )
    retry: {
        attempts: 20
        /* dangling, in a nested block */
    }
}
/* a multi-line block comment
   at the end of the file,
     its lines kept as written */
// the very last line"#;
    insta::assert_snapshot!(fmt(src));
}

#[test]
fn nested_blocks_lists_and_calls_stay_on_one_line_when_scalar_and_short() {
    let src = r#"
event E {   id:string,n:int  }
connection c { url:"http://x" ,timeout:10s,retry:{attempts:3,within:1h},headers:{"A":env("A"),"B":"b"}
  max_in_flight : 8 }
action a(id:string,n:int?){via:c}
action long_parameters(first_parameter_name: string, second_parameter_name: int, third_one: bool?) {
    via: c
}
subscriber s {
    on: E
    run: a(event.id, event.n)
    retry: {
        attempts: 5
        within: 2h
    }
}
subscriber wide {
    on: E
    run: a("a string long enough to push this call well past one hundred columns on its line", event.n)
    retry: { attempts: 5, within: 2h, give_up_after: 90m, first_wait: 1_500ms, max_wait: 1h30m, x: 12 }
}
schedule nightly { every: 24h run: a("all", 1_250) }
"#;
    insta::assert_snapshot!(fmt(src));
}

#[test]
fn values_that_are_not_scalars_take_one_line_each() {
    let src = r#"connection c {
    url: "http://x"
    nested: { inner: { a: 1 }, b: [1, 2] }
    list_of_blocks: [{ a: 1 }, { a: 2 }]
    empty_block: {}
    empty_list: []
    path: a.b.c
    optional: string?
}
"#;
    insta::assert_snapshot!(fmt(src));
}

#[test]
fn tests_and_their_steps() {
    let src = r#"test "ledger down, then back" { fake ledger: [unavailable * 5, rate_limited(2m), ok]
    emit PaymentReceived { payment_id: "p\u{e9}1", amount_cents: 1_250, currency: "EUR" }
    // let three days pass
    wait 3d

    expect record_payment_webhook { state: succeeded attempts: 6 }
    retry record_payment_webhook
    expect breaker ledger { state: closed }
    expect breaker { state: failed } // `breaker` names a subscriber here
}
test "empty" {}
"#;
    insta::assert_snapshot!(fmt(src));
}

#[test]
fn an_emit_of_a_builtin_event_keeps_its_name_as_written() {
    let src = "test \"t\" { emit jadpo.delivery_failed { delivery: \"1\", \"event\": \"2\" }\n emit jadpo /* no event */ . delivery_parked {} }";
    // Written with a space or a comment around its `.`, the name is no event's: it
    // stays as written, so that the checker says so again, and the comment is
    // written once.
    assert_eq!(
        fmt(src),
        "test \"t\" {\n    emit jadpo.delivery_failed { delivery: \"1\", \"event\": \"2\" }\n    emit jadpo /* no event */ . delivery_parked {}\n}\n"
    );
}

#[test]
fn line_endings_tabs_and_trailing_whitespace_are_normalised() {
    let src =
        "event E {\r\n\tid: string   \r\n\tn: int\t// tabbed\r\n}\r\n\r\n\r\n\r\nevent F {\r\n\tid: string\r\n}   ";
    assert_eq!(fmt(src), "event E {\n    id: string\n    n: int // tabbed\n}\n\nevent F {\n    id: string\n}\n");
}

#[test]
fn declarations_are_separated_by_exactly_one_empty_line() {
    assert_eq!(
        fmt("event A { id: string } event B { id: string }"),
        "event A {\n    id: string\n}\n\nevent B {\n    id: string\n}\n"
    );
    assert_eq!(
        fmt("event A { id: string }\n\n\n\n// B\n\n\n\nevent B { id: string }\n"),
        "event A {\n    id: string\n}\n\n// B\n\nevent B {\n    id: string\n}\n"
    );
}

#[test]
fn keys_are_never_reordered_and_literals_stay_as_written() {
    let src = "subscriber s { timeout: 90m\n retry: { within: 1d12h, attempts: 1_000 }\n on: E\n run: f(\"a\\tb\\u{1F600}\", true, false, 00_7) }";
    assert_eq!(
        fmt(src),
        "subscriber s {\n    timeout: 90m\n    retry: { within: 1d12h, attempts: 1_000 }\n    on: E\n    run: f(\"a\\tb\\u{1F600}\", true, false, 00_7)\n}\n"
    );
}

#[test]
fn keywords_as_field_names_stay_field_names() {
    let src = "subscriber watch { on: jadpo.delivery_failed\n run: notify(event.event, event.subscriber, event\n .connection) }";
    assert_eq!(
        fmt(src),
        "subscriber watch {\n    on: jadpo.delivery_failed\n    run: notify(event.event, event.subscriber, event.connection)\n}\n"
    );
}

#[test]
fn empty_and_comment_only_files() {
    assert_eq!(fmt(""), "");
    assert_eq!(fmt("\n\n  \n"), "");
    assert_eq!(fmt("// only a comment"), "// only a comment\n");
    assert_eq!(fmt("\n\n// one\n\n\n/* two */   // three\n\n"), "// one\n\n/* two */   // three\n");
}

#[test]
fn a_file_with_syntax_errors_is_refused_with_its_errors() {
    let err = format("event A { id: }\nevent B { id: string }\n\"open").unwrap_err();
    let kinds: Vec<_> = err.errors.iter().map(|e| e.kind).collect();
    use jadpo_syntax::SyntaxErrorKind as K;
    assert_eq!(kinds, vec![K::UnexpectedToken, K::UnterminatedString, K::UnexpectedToken]);
    assert_eq!(err.to_string(), "3 syntax errors: the text was not formatted");
    // The same errors as the parser's, spans and all.
    assert_eq!(err.errors, jadpo_syntax::parse("event A { id: }\nevent B { id: string }\n\"open").errors);
}

#[test]
fn the_width_limit_counts_characters_and_the_indent() {
    // 100 columns exactly stays on one line; 101 does not.
    let fits = format!("connection c {{\n    retry: {{ a: \"{}\" }}\n}}\n", "é".repeat(100 - 20));
    assert_eq!(fmt(&fits), fits);
    let over = format!("connection c {{\n    retry: {{ a: \"{}\" }}\n}}\n", "é".repeat(100 - 19));
    assert_eq!(fmt(&over), format!("connection c {{\n    retry: {{\n        a: \"{}\"\n    }}\n}}\n", "é".repeat(81)));
}
