//! The analysis after an edit, which keeps each file's tree and reuses what the
//! last check found for the subscribers and schedules the edit did not touch, is
//! exactly a whole check's: the same diagnostics in the same order, and the same
//! symbol index.

use jadpo_check::SourceFile;
use jadpo_lsp::Analysis;
use jadpo_test_support::corpus;
use proptest::prelude::*;

/// A program of `n` subscribers over a few events, actions and connections, with
/// conditions, budgets, schedules, a test, and a few mistakes (an unknown event, an
/// argument of the wrong type, an unused action, a budget that does not fit).
fn program(n: usize) -> String {
    let mut out = String::new();
    for e in 0..4 {
        out.push_str(&format!("event E{e} {{\n    id: string\n    amount: int\n    note: string?\n}}\n\n"));
    }
    out.push_str("connection c {\n    url: \"http://127.0.0.1:9/hooks\"\n    timeout: 5s\n}\n\n");
    for a in 0..4 {
        out.push_str(&format!("action act{a}(id: string, amount: int) {{\n    via: c\n}}\n\n"));
    }
    out.push_str("action unused_one(id: string) {\n    via: c\n}\n\n");
    for i in 0..n {
        let e = i % 5; // E4 is unknown
        let a = i % 4;
        out.push_str(&format!("subscriber s{i} {{\n    on: E{e}\n"));
        match i % 4 {
            0 => out.push_str(&format!("    run: act{a}(event.id, event.amount)\n")),
            1 => out.push_str(&format!("    run: act{a}(event.amount, event.id)\n")),
            2 => out.push_str(&format!(
                "    run: act{a}(event.id, event.amount)\n    where: event.amount > {i} and event.note != \"x\"\n"
            )),
            _ => out.push_str(&format!("    run: act{a}(event.id, 7)\n    order_by: event.id\n")),
        }
        if i % 3 == 0 {
            out.push_str(&format!("    retry: {{ attempts: {}  within: {}h }}\n", 3 + i % 20, 1 + i % 3));
        }
        out.push_str("}\n\n");
    }
    out.push_str("schedule nightly {\n    every: 1d\n    run: act0(\"x\", 1)\n}\n\n");
    out.push_str("test \"s0 runs\" {\n    fake c: [ok]\n    emit E0 { id: \"a\"  amount: 1 }\n    expect s0 { attempts: 1 }\n}\n");
    out
}

/// The program in one file, or its events and actions in one and the rest in another.
fn program_files(n: usize, split: bool) -> Vec<SourceFile> {
    let text = program(n);
    if !split {
        return vec![SourceFile { name: "program.jadpo".into(), text }];
    }
    let cut = text.find("subscriber ").unwrap_or(text.len());
    vec![
        SourceFile { name: "a.jadpo".into(), text: text[..cut].to_string() },
        SourceFile { name: "b.jadpo".into(), text: text[cut..].to_string() },
    ]
}

/// The analysis after the edit is a whole check's.
fn same_as_whole(analysis: &Analysis) {
    let whole = Analysis::new(analysis.files().to_vec());
    assert_eq!(analysis.diagnostics(), whole.diagnostics());
    assert_eq!(analysis.checked().index, whole.checked().index);
}

#[test]
fn a_digit_typed_in_a_subscriber_checks_that_subscriber_alone() {
    let mut files = program_files(40, false);
    let mut analysis = Analysis::new(files.clone());
    let at = files[0].text.find("attempts: 3").expect("a budget") + "attempts: 3".len();
    files[0].text.insert(at, '0');
    analysis = Analysis::after(Some(analysis), files.clone());
    same_as_whole(&analysis);
    assert_eq!(analysis.checked().reused, 40, "39 subscribers and the schedule");
    // 30 attempts do not fit in an hour; the 3 before did.
    let unreachable =
        |a: &Analysis| a.diagnostics().iter().filter(|d| d.code.as_str() == "subscriber.retry_unreachable").count();
    assert_eq!(unreachable(&analysis), unreachable(&Analysis::new(program_files(40, false))) + 1);
    // Renamed: names are shared with other declarations, so everything is checked.
    files[0].text = files[0].text.replacen("subscriber s1 ", "subscriber s1x ", 1);
    analysis = Analysis::after(Some(analysis), files);
    same_as_whole(&analysis);
    assert_eq!(analysis.checked().reused, 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// A series of random edits, most of them inside subscribers: after each, the
    /// analysis is a whole check's.
    #[test]
    fn after_any_series_of_edits_the_analysis_is_a_whole_checks(
        split in any::<bool>(),
        edits in proptest::collection::vec(
            (any::<bool>(), 0.0f64..1.0, 0.0f64..1.0, 0usize..4, "[a-z0-9 :.\"\n(){}]{0,4}"),
            1..6,
        ),
    ) {
        let mut files = program_files(12, split);
        let mut analysis = Analysis::new(files.clone());
        for (anywhere, which, at, len, insert) in edits {
            let file = files.len() - 1;
            let text = &mut files[file].text;
            // Inside a subscriber: between its keyword and the next one.
            let starts: Vec<usize> = text.match_indices("subscriber ").map(|(i, _)| i).collect();
            let (lo, hi) = match (anywhere, starts.is_empty()) {
                (false, false) => {
                    let k = (which * starts.len() as f64) as usize % starts.len();
                    (starts[k], starts.get(k + 1).copied().unwrap_or(text.len()))
                }
                _ => (0, text.len()),
            };
            let mut start = lo + ((hi - lo) as f64 * at) as usize;
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            text.replace_range(start..end, &insert);
            analysis = Analysis::after(Some(analysis), files.clone());
            same_as_whole(&analysis);
        }
    }

    /// A series of edits that keep the text's syntax, as most typing in a value
    /// does, each in one subscriber: a digit, a field, an event or an action
    /// changed, a key added. After each, the analysis is a whole check's, and the
    /// other subscribers' findings were reused.
    #[test]
    fn after_edits_that_keep_the_syntax_the_analysis_is_a_whole_checks(
        split in any::<bool>(),
        edits in proptest::collection::vec((0.0f64..1.0, 0usize..6, 0.0f64..1.0), 1..8),
    ) {
        const SWAPS: [&[&str]; 4] = [
            &["event.id", "event.amount", "event.note", "event.nope"],
            &["on: E0", "on: E1", "on: E3", "on: E4", "on: Nope"],
            &["run: act0(", "run: act2(", "run: unused_one(", "run: nope("],
            &["0", "1", "5", "9"],
        ];
        const KEYS: [&str; 4] =
            ["    timeout: 3s\n", "    timeout: 99m\n", "    where: event.amount > 1\n", "    order_by: event.note\n"];
        let mut files = program_files(12, split);
        let mut analysis = Analysis::new(files.clone());
        for (which, kind, pick) in edits {
            let file = files.len() - 1;
            let text = &mut files[file].text;
            let starts: Vec<usize> = text.match_indices("subscriber ").map(|(i, _)| i).collect();
            let k = (which * starts.len() as f64) as usize % starts.len();
            let (lo, hi) = (starts[k], starts.get(k + 1).copied().unwrap_or(text.len()));
            let body = lo + text[lo..hi].find("{\n").map_or(0, |i| i + 2);
            match kind {
                0..=3 => {
                    let words = SWAPS[kind];
                    let found: Vec<(usize, &str)> = words
                        .iter()
                        .flat_map(|w| text[body..hi].match_indices(w).map(|(i, _)| (body + i, *w)).collect::<Vec<_>>())
                        .collect();
                    if let Some(&(at, word)) = found.get((pick * found.len() as f64) as usize) {
                        let by = words[(pick * 97.0) as usize % words.len()];
                        text.replace_range(at..at + word.len(), by);
                    }
                }
                _ => text.insert_str(body, KEYS[(pick * KEYS.len() as f64) as usize % KEYS.len()]),
            }
            analysis = Analysis::after(Some(analysis), files.clone());
            same_as_whole(&analysis);
        }
    }

    /// A series of random edits over a corpus file (a digit changed, a word's
    /// letter, a line break or a brace added or removed): after each, the analysis
    /// is a whole check's.
    #[test]
    fn after_edits_over_the_corpus_the_analysis_is_a_whole_checks(
        file in 0usize..1000,
        edits in proptest::collection::vec((0.0f64..1.0, 0usize..3, "[a-z0-9 \n{}]{0,2}"), 1..6),
    ) {
        let texts = corpus();
        let mut files = vec![SourceFile { name: "corpus.jadpo".into(), text: texts[file % texts.len()].clone() }];
        let mut analysis = Analysis::new(files.clone());
        for (at, len, insert) in edits {
            let text = &mut files[0].text;
            // Most often a digit, as typing in a value does; else anywhere.
            let digits: Vec<usize> = text.match_indices(|c: char| c.is_ascii_digit()).map(|(i, _)| i).collect();
            let mut start = match digits.is_empty() || len == 2 {
                true => (text.len() as f64 * at) as usize,
                false => digits[(digits.len() as f64 * at) as usize % digits.len()],
            };
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + len.min(1)).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            let insert = if len == 2 { insert } else { ((at * 1e6) as u64 % 10).to_string() };
            text.replace_range(start..end, &insert);
            analysis = Analysis::after(Some(analysis), files.clone());
            same_as_whole(&analysis);
        }
    }
}
