//! The parser's recovery and robustness: it never fails, resumes at the next
//! declaration, and survives any input.

use jadpo_syntax::SyntaxErrorKind as K;
use jadpo_syntax::ast::{Body, CommentKind, DeclKind, StepKind, ValueKind};
use jadpo_syntax::parse;
use proptest::prelude::*;

#[test]
fn each_broken_declaration_is_reported_once_and_keeps_its_name() {
    let src = "event A { x: }\nevent B { y: string }\nsubscriber s { on: A run: f(( event.x ) }\nconnection c { url: \"http://x\" retry: { attempts 3 } }\n";
    let p = parse(src);
    let kinds: Vec<_> = p.errors.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![K::UnexpectedToken; 3]);
    let names: Vec<_> = p.file.decls.iter().map(|d| (d.kind, d.name.text, matches!(d.body, Body::Broken))).collect();
    assert_eq!(
        names,
        vec![
            (DeclKind::Event, "A", true),
            (DeclKind::Event, "B", false),
            (DeclKind::Subscriber, "s", true),
            (DeclKind::Connection, "c", true),
        ]
    );
}

#[test]
fn entries_separate_by_newlines_or_commas() {
    for src in [
        "subscriber s { retry: { attempts: 20  within: 3d } }",
        "subscriber s { retry: { attempts: 20, within: 3d, } }",
        "subscriber s {\n retry: {\n attempts: 20\n within: 3d\n }\n}",
    ] {
        let p = parse(src);
        assert!(p.errors.is_empty(), "{src}: {:?}", p.errors);
        let Body::Block { block, .. } = &p.file.decls[0].body else { panic!("{src}") };
        let ValueKind::Block(retry) = &block.entries[0].value.kind else { panic!("{src}") };
        assert_eq!(retry.entries.len(), 2, "{src}");
    }
}

#[test]
fn the_end_of_the_file_points_at_the_last_character() {
    let src = "subscriber s { on: E  \n\n";
    let p = parse(src);
    assert_eq!(p.errors.len(), 1);
    assert_eq!(p.errors[0].kind, K::UnexpectedEof);
    assert_eq!(&src[p.errors[0].span.range()], "E");
}

#[test]
fn test_blocks_parse_their_steps() {
    let src = r#"test "ledger down" {
        fake ledger: [unavailable * 5, rate_limited(2m), ok]
        emit PaymentReceived { payment_id: "p1" }
        wait 3d
        retry record
        expect record { state: succeeded attempts: 6 }
        expect breaker ledger { state: closed alerts: 1 }
        expect breaker { state: failed }
    }"#;
    let p = parse(src);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let Body::Steps { title, steps } = &p.file.decls[0].body else { panic!("steps") };
    assert_eq!(title, "ledger down");
    assert_eq!(steps.len(), 7);
}

#[test]
fn an_emit_names_a_declared_event_or_a_dotted_built_in_one() {
    let src = "test \"t\" {\n    emit jadpo.delivery_failed { delivery: \"1\" }\n    emit Paid { id: \"p1\" }\n    emit jadpo . delivery_parked {}\n}";
    let p = parse(src);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let Body::Steps { steps, .. } = &p.file.decls[0].body else { panic!("steps") };
    let names: Vec<_> = steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Emit { event, fields } => (event.text, &src[event.span.range()], fields.entries.len()),
            other => panic!("{other:?}"),
        })
        .collect();
    // The name is the text as written, as `on: jadpo.NAME` is looked up: written
    // with spaces, it names no event, which the checker reports.
    assert_eq!(
        names,
        [
            ("jadpo.delivery_failed", "jadpo.delivery_failed", 1),
            ("Paid", "Paid", 1),
            ("jadpo . delivery_parked", "jadpo . delivery_parked", 0)
        ]
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for (open, close) in [("[", "]"), ("{ a: ", "}"), ("f(", ")")] {
        let src = format!(
            "subscriber s {{ retry: {}{} }}\nevent E {{ a: string }}",
            open.repeat(100_000),
            close.repeat(100_000)
        );
        let p = parse(&src);
        assert_eq!(p.errors.len(), 1, "{open}: {:?}", p.errors.first());
        assert_eq!(p.errors[0].kind, K::NestingTooDeep);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let p = parse(&text);
        for e in &p.errors {
            prop_assert!(e.span.end as usize <= text.len());
            prop_assert!(text.is_char_boundary(e.span.start as usize) && text.is_char_boundary(e.span.end as usize));
        }
    }

    #[test]
    fn mutated_programs_never_panic(cut in 0usize..600, insert in "[{}()\\[\\]:,.?*\"/a-z0-9 \n\\\\]{0,8}") {
        let base = "event E { a: string\n b: int? }\nconnection c { url: \"http://x\" retry: { attempts: 3 } }\naction f(a: string) { via: c }\nsubscriber s { on: E run: f(event.a) retry: { attempts: 20 within: 3d } }\ntest \"t\" { fake c: [unavailable * 5, ok] emit E { a: \"x\" } wait 1h expect s { state: succeeded } }\n";
        let at = cut.min(base.len());
        let at = (0..=at).rev().find(|&i| base.is_char_boundary(i)).unwrap_or(0);
        let text = format!("{}{}{}", &base[..at], insert, &base[at..]);
        let _ = parse(&text);
    }
}

#[test]
fn comments_are_kept_as_trivia_in_source_order() {
    let src = "// head\r\nevent A { /* one\n two */ id: string // tail\n}\n/* open";
    let p = parse(src);
    let comments: Vec<_> = p.comments.iter().map(|c| (c.kind, &src[c.span.range()])).collect();
    assert_eq!(
        comments,
        vec![
            (CommentKind::Line, "// head"),
            (CommentKind::Block { terminated: true }, "/* one\n two */"),
            (CommentKind::Line, "// tail"),
            (CommentKind::Block { terminated: false }, "/* open"),
        ]
    );
    // The parser never sees them: the tree is the one without comments.
    assert_eq!(p.file.decls.len(), 1);
    assert_eq!(p.errors.iter().map(|e| e.kind).collect::<Vec<_>>(), vec![K::UnterminatedComment]);
}

#[test]
fn comments_nested_too_deep_are_still_kept() {
    let src = format!("event A {{ x: {}// deep\n{} }}", "[".repeat(80), "]".repeat(80));
    let p = parse(&src);
    assert_eq!(p.comments.len(), 1);
    assert_eq!(&src[p.comments[0].span.range()], "// deep");
}

#[test]
fn a_keyword_as_a_declaration_name_is_one_error_that_says_so() {
    for (src, keyword) in [
        ("event event { id: string }\nevent B { id: string }", "event"),
        ("connection action { url: \"http://x\" }", "action"),
        ("subscriber true { on: A }", "true"),
        ("action test(id: string) { via: c }", "test"),
        ("schedule schedule { every: 1h }", "schedule"),
    ] {
        let p = parse(src);
        assert_eq!(p.errors.len(), 1, "{src}: {:?}", p.errors);
        let e = &p.errors[0];
        assert_eq!(e.kind, K::UnexpectedToken, "{src}");
        assert_eq!(&src[e.span.range()], keyword, "{src}");
        assert_eq!(e.message, format!("`{keyword}` is a keyword and cannot name a declaration"));
        assert!(e.help.as_deref().is_some_and(|h| h.contains("choose another name")), "{src}");
        // The declaration is read on, so what follows it is not lost.
        assert!(!matches!(p.file.decls[0].body, Body::Broken), "{src}");
        assert_eq!(p.file.decls[0].name.text, keyword);
    }
}

#[test]
fn comments_between_event_and_its_dot_are_trivia_too() {
    for src in [
        "subscriber s { on: E run: f(event /* the id */ .id) }",
        "subscriber s { on: E run: f(event // the id\n  .id) }",
        "subscriber s { on: E run: f(event\n /* a */ /* b */\n .id) }",
    ] {
        let p = parse(src);
        assert!(p.errors.is_empty(), "{src}: {:?}", p.errors);
        let Body::Block { block, .. } = &p.file.decls[0].body else { panic!("{src}") };
        let ValueKind::Call { args, .. } = &block.entries[1].value.kind else { panic!("{src}") };
        let segments: Vec<_> = args[0].kind.segments().unwrap_or_default().iter().map(|n| n.text).collect();
        assert_eq!(segments, ["event", "id"], "{src}");
    }
    // A comment that never ends is not a path's dot.
    assert!(!parse("subscriber s { on: E run: f(event /* .id) }").errors.is_empty());
}

#[test]
fn a_keyword_directly_after_a_dot_is_a_field_name() {
    let src = "subscriber s {\n    on: jadpo.connection_unavailable\n    run: f(event.connection, event.event, event.subscriber, event.test.true, event\n        .action)\n}";
    let p = parse(src);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    let Body::Block { block, .. } = &p.file.decls[0].body else { panic!("the subscriber is broken") };
    let ValueKind::Call { args, .. } = &block.entries[1].value.kind else { panic!("`run:` is not a call") };
    let paths: Vec<Vec<&str>> =
        args.iter().map(|a| a.kind.segments().unwrap_or_default().iter().map(|n| n.text).collect()).collect();
    assert_eq!(
        paths,
        [
            vec!["event", "connection"],
            vec!["event", "event"],
            vec!["event", "subscriber"],
            vec!["event", "test", "true"],
            vec!["event", "action"],
        ]
    );
    // The field's span is the keyword's.
    let field = args[0].kind.segments().unwrap_or_default()[1];
    assert_eq!(&src[field.span.range()], "connection");
}

#[test]
fn a_path_left_unfinished_before_a_declaration_keeps_the_declaration() {
    // A keyword after `.` and a line break starts a declaration, as it reads.
    let src = "subscriber a { on: E run: f(event.\n}\nsubscriber b { on: event.\nsubscriber c { on: E }";
    let p = parse(src);
    let names: Vec<_> = p.file.decls.iter().map(|d| (d.kind, d.name.text)).collect();
    assert_eq!(names, [(DeclKind::Subscriber, "a"), (DeclKind::Subscriber, "b"), (DeclKind::Subscriber, "c")]);
    assert_eq!(p.errors.len(), 2, "{:?}", p.errors);
    assert!(!matches!(p.file.decls[2].body, Body::Broken));
}

#[test]
fn a_keyword_field_name_does_not_make_a_keyword_a_declaration_name() {
    let src = "subscriber event { on: jadpo.connection_recovered run: f(event.connection) }";
    let p = parse(src);
    assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
    assert_eq!(&src[p.errors[0].span.range()], "event");
    assert_eq!(p.errors[0].message, "`event` is a keyword and cannot name a declaration");
}
