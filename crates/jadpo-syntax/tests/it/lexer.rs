//! The lexer's edge cases: numbers, durations, strings, comments, recovery.

use jadpo_syntax::SyntaxErrorKind as K;
use jadpo_syntax::lexer::{Lexer, Tok};

fn lex(src: &str) -> (Vec<Tok<'_>>, Vec<(K, String)>) {
    let mut errors = Vec::new();
    let toks: Vec<Tok<'_>> =
        Lexer::new(src, &mut errors).map(|t| t.map(|(_, t, _)| t)).collect::<Result<_, _>>().unwrap_or_default();
    let errs = errors.iter().map(|e| (e.kind, src[e.span.range()].to_string())).collect();
    (toks, errs)
}

#[test]
fn durations_compound_in_decreasing_order() {
    assert_eq!(
        lex("500ms 30s 1h30m 3d 1d2h3m4s5ms").0,
        vec![
            Tok::Duration(500),
            Tok::Duration(30_000),
            Tok::Duration(5_400_000),
            Tok::Duration(259_200_000),
            Tok::Duration(93_784_005),
        ]
    );
    assert_eq!(lex("1_000ms").0, vec![Tok::Duration(1_000)]);
}

#[test]
fn bad_durations_are_one_error_each_and_keep_a_placeholder() {
    for bad in ["1m1h", "1h1h", "5x", "1h30", "1ms1s", "3D", "1h_30m"] {
        let (toks, errs) = lex(bad);
        assert_eq!(toks, vec![Tok::Duration(0)], "{bad}");
        assert_eq!(errs, vec![(K::InvalidDuration, bad.to_string())], "{bad}");
    }
}

#[test]
fn duration_overflow_past_i64_max_milliseconds() {
    // i64::MAX ms is 106751991167 days and a bit; a day more overflows.
    assert_eq!(lex("106751991167d").1, vec![]);
    assert_eq!(lex("106751991168d").1, vec![(K::InvalidDuration, "106751991168d".into())]);
    assert_eq!(lex("99999999999999999999s").1, vec![(K::InvalidDuration, "99999999999999999999s".into())]);
    assert_eq!(lex("106751991167d23h").1, vec![(K::InvalidDuration, "106751991167d23h".into())]);
}

#[test]
fn integers_with_separators_and_overflow() {
    assert_eq!(lex("1_000 0 9223372036854775807").0, vec![Tok::Int(1000), Tok::Int(0), Tok::Int(i64::MAX)]);
    let (toks, errs) = lex("9223372036854775808");
    assert_eq!(toks, vec![Tok::Int(0)]);
    assert_eq!(errs, vec![(K::InvalidNumber, "9223372036854775808".into())]);
}

#[test]
fn string_escapes_decode() {
    let (toks, errs) = lex(r#""a\"b\\c\n\t\r\u{1F600}\u{e9}""#);
    assert_eq!(errs, vec![]);
    assert_eq!(toks, vec![Tok::Str("a\"b\\c\n\t\r\u{1F600}\u{e9}".into())]);
}

#[test]
fn bad_escapes_point_at_the_escape_and_keep_the_string() {
    let (toks, errs) = lex(r#""ab\qc" "\u{110000}" "\u{}" "\u12""#);
    assert_eq!(toks.len(), 4);
    assert_eq!(toks[0], Tok::Str("abc".into()));
    assert_eq!(errs.iter().map(|e| e.0).collect::<Vec<_>>(), vec![K::InvalidEscape; 4]);
    assert_eq!(errs[0].1, r"\q");
}

#[test]
fn an_unterminated_string_ends_at_its_line() {
    let (toks, errs) = lex("\"abc\nnext");
    assert_eq!(toks, vec![Tok::Str("abc".into()), Tok::Ident("next")]);
    assert_eq!(errs, vec![(K::UnterminatedString, "\"".into())]);
    // A backslash at the end of a line does not join lines.
    let (toks, errs) = lex("\"abc\\\nnext");
    assert_eq!(toks.last(), Some(&Tok::Ident("next")));
    assert_eq!(errs[0].0, K::UnterminatedString);
}

#[test]
fn comments_of_both_forms() {
    let (toks, errs) = lex("a // line\n/* block\n over lines */ b /* a*b */ c");
    assert_eq!(errs, vec![]);
    assert_eq!(toks, vec![Tok::Ident("a"), Tok::Ident("b"), Tok::Ident("c")]);
    let (toks, errs) = lex("a /* never closed");
    assert_eq!(toks, vec![Tok::Ident("a")]);
    assert_eq!(errs, vec![(K::UnterminatedComment, "/*".into())]);
}

#[test]
fn invalid_characters_in_a_run_are_one_error() {
    let (toks, errs) = lex("a @#$ b ~ c");
    assert_eq!(toks, vec![Tok::Ident("a"), Tok::Ident("b"), Tok::Ident("c")]);
    assert_eq!(errs, vec![(K::InvalidToken, "@#$".into()), (K::InvalidToken, "~".into())]);
}

#[test]
fn event_before_a_dot_heads_a_path() {
    assert_eq!(lex("event E event.x").0, vec![Tok::Event, Tok::Ident("E"), Tok::EventRef, Tok::Dot, Tok::Ident("x")]);
}

#[test]
fn keywords_and_contextual_words() {
    assert_eq!(lex("retry retryable wait_for").0, vec![Tok::Retry, Tok::Ident("retryable"), Tok::Ident("wait_for")]);
}

#[test]
fn a_keyword_directly_after_a_dot_is_a_name() {
    assert_eq!(
        lex("event.event.connection").0,
        vec![Tok::EventRef, Tok::Dot, Tok::Ident("event"), Tok::Dot, Tok::Ident("connection")]
    );
    // After a space, a line break or a comment it is the keyword again.
    assert_eq!(lex("x. subscriber").0, vec![Tok::Ident("x"), Tok::Dot, Tok::Subscriber]);
    assert_eq!(lex("x./**/test").0, vec![Tok::Ident("x"), Tok::Dot, Tok::Test]);
}
