//! The checker never panics: whatever the parser makes of broken text, checking it
//! (and lowering it when it has no errors) ends in diagnostics, never a crash.

use jadpo_check::{Lower, SourceFile, check};
use proptest::prelude::*;

/// Every program of the corpus and the examples, as seeds for mutation.
fn seeds() -> Vec<String> {
    let mut out = jadpo_test_support::corpus().to_vec();
    out.sort();
    out
}

fn check_text(text: &str) {
    let files = [SourceFile { name: "fuzz.jadpo".into(), text: text.into() }];
    let checked = check(&files, Lower::Yes);
    for d in &checked.diagnostics {
        assert!(d.span.end as usize <= text.len(), "{d:?} points past the end");
        assert!(text.is_char_boundary(d.span.start as usize) && text.is_char_boundary(d.span.end as usize));
    }
    assert_eq!(checked.program.is_some(), checked.errors() == 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    /// Cut a seed program somewhere, insert a few tokens' worth of text, and delete a
    /// stretch: the checker still only reports.
    #[test]
    fn mutated_programs_check_without_panicking(
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        cut in 0usize..40,
        insert in prop::sample::select(vec![
            "", "}", "{", "(", ")", "[", "]", ":", ",", ".", "?", "*", "\"", "event", "event.", "action a() {}",
            "subscriber", "retry: { attempts: 0 }", "within: 31d", "1m1h", "99999999999999999999", "\\q", "/*",
            "test \"t\" { wait 1s }", "expect x { state: y }", "fake c: [ok * 0]", "emit E { a: 1 }", "é", "\n",
        ]),
    ) {
        let seeds = seeds();
        let base = which.get(&seeds);
        let mut i = at.index(base.len() + 1);
        while !base.is_char_boundary(i) { i -= 1; }
        let mut j = (i + cut).min(base.len());
        while !base.is_char_boundary(j) { j -= 1; }
        let text = format!("{}{}{}", &base[..i], insert, &base[j..]);
        check_text(&text);
    }

    /// Programs of random declarations built from the language's words.
    #[test]
    fn programs_of_random_words_check_without_panicking(words in prop::collection::vec(prop::sample::select(vec![
        "event", "connection", "action", "subscriber", "schedule", "test", "E", "c", "a", "s", "{", "}", "(", ")",
        "[", "]", ":", ",", ".", "?", "*", "on", "run", "retry", "via", "url", "every", "attempts", "within",
        "timeout", "headers", "env", "\"http://x\"", "\"s\"", "1", "3d", "true", "string", "int?", "fake", "emit",
        "wait", "expect", "breaker", "ok", "hang", "unavailable", "rate_limited", "state", "event.x", "x",
    ]), 0..120)) {
        check_text(&words.join(" "));
    }
}
