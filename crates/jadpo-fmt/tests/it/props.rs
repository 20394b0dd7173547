//! The formatter's promises over every `.jadpo` file of the repository and over
//! generated programs: formatting is idempotent, keeps every comment (same number,
//! same text, same order) and keeps the meaning (the checked program and the
//! checker's diagnostic codes are those of the input).

use jadpo_check::{Lower, SourceFile, check};
use jadpo_fmt::format;
use jadpo_syntax::ast::CommentKind;
use jadpo_syntax::parse;
use proptest::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Keys of the checked program that say where something was written, not what.
const POSITION_KEYS: [&str; 5] = ["line", "column", "offset", "span", "file"];

fn without_positions(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(map) => {
                map.retain(|k, _| !POSITION_KEYS.contains(&k.as_str()));
                map.values_mut().for_each(strip);
            }
            Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut v);
    v
}

/// What the checker makes of one file: its diagnostics' codes and, when it checks
/// clean, its program without positions.
fn meaning(text: &str) -> (Vec<&'static str>, Option<Value>) {
    let checked = check(&[SourceFile { name: "f.jadpo".into(), text: text.into() }], Lower::Yes);
    let codes = checked.diagnostics.iter().map(|d| d.code.as_str()).collect();
    let program = checked.program.map(|p| without_positions(serde_json::to_value(&p).expect("a program serializes")));
    (codes, program)
}

/// Every comment's text, in order (a line comment's trailing whitespace aside).
fn comments(text: &str) -> Vec<String> {
    parse(text)
        .comments
        .iter()
        .map(|c| {
            let s = &text[c.span.range()];
            match c.kind {
                CommentKind::Line => s.trim_end().to_string(),
                CommentKind::Block { .. } => s.to_string(),
            }
        })
        .collect()
}

/// Checks every promise for one text; `Err` says which one broke.
fn promises(text: &str) -> Result<(), String> {
    let out = match format(text) {
        Ok(out) => out,
        Err(e) => {
            // Refused exactly when the parser finds errors, with those errors.
            return if e.errors == parse(text).errors && !e.errors.is_empty() {
                Ok(())
            } else {
                Err(format!("refused: {:?}", e.errors))
            };
        }
    };
    let again = format(&out).map_err(|e| format!("the output does not parse: {:?}\n{out}", e.errors))?;
    if again != out {
        return Err(format!("not idempotent:\n--- once\n{out}\n--- twice\n{again}"));
    }
    if comments(&out) != comments(text) {
        return Err(format!("comments changed:\n{:?}\n{:?}", comments(text), comments(&out)));
    }
    if meaning(&out) != meaning(text) {
        return Err(format!("meaning changed:\n{:?}\n{:?}\n{out}", meaning(text), meaning(&out)));
    }
    if !out.ends_with('\n') && !out.is_empty() || out.ends_with("\n\n") || out.lines().any(|l| l.ends_with([' ', '\t']))
    {
        return Err(format!("trailing whitespace or newlines:\n{out:?}"));
    }
    Ok(())
}

fn jadpo_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" && name != "node_modules" {
                jadpo_files(&path, out);
            }
        } else if name.ends_with(".jadpo") {
            out.push(path);
        }
    }
}

#[test]
fn every_file_of_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    jadpo_files(&root, &mut files);
    files.sort();
    // The corpus, the examples and the scenarios at least.
    assert!(files.len() > 90, "found only {} files", files.len());
    let mut formatted = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if let Err(why) = promises(&text) {
            panic!("{}: {why}", path.display());
        }
        formatted += usize::from(format(&text).is_ok());
    }
    assert!(formatted > 60, "only {formatted} files formatted");
}

// Generated programs: valid declarations written with random spacing, commas and
// comments between any two tokens.

/// Trivia that may stand between two tokens.
fn gap() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => Just(" ".to_string()),
        2 => Just("\n    ".to_string()),
        1 => Just("\n\n\n".to_string()),
        1 => Just("\t".to_string()),
        1 => (0..1000u32).prop_map(|n| format!(" /* b{n} */ ")),
        1 => (0..1000u32).prop_map(|n| format!(" // l{n}\n")),
        1 => (0..1000u32).prop_map(|n| format!("\n/* m{n}\n  line two */\n")),
    ]
}

/// A program's tokens, with `~` between any two that may be separated by trivia,
/// and `|` where a comma or trivia separates entries.
fn program_tokens(subscribers: usize, wide: bool) -> String {
    let mut t = String::new();
    t.push_str("event~E~{~id~:~string|n~:~int?|}~");
    t.push_str(r#"connection~c~{~url~:~"http://127.0.0.1:9/x"|timeout~:~1_500ms|"#);
    t.push_str(r#"retry~:~{~attempts~:~2|}|headers~:~{~"A"~:~env~(~"TOKEN"~)|"B"~:~"b"|}|}~"#);
    t.push_str("action~a~(~id~:~string~,~n~:~int~?~)~{~via~:~c|}~");
    for i in 0..subscribers {
        let arg = if wide {
            r#""a long literal argument that makes the call too wide for one line of the file""#
        } else {
            "event~.~id"
        };
        t.push_str(&format!("subscriber~s{i}~{{~on~:~E|run~:~a~(~{arg}~,~event~.~n~)|"));
        t.push_str(&format!("retry~:~{{~attempts~:~{}|within~:~1h30m|}}|}}~", i + 2));
    }
    t.push_str("test~\"t\"~{~fake~c~:~[~unavailable~*~3~,~rate_limited~(~2m~)~,~ok~]~");
    t.push_str("emit~E~{~id~:~\"x\"|}~wait~3d~expect~s0~{~state~:~succeeded|}~}~");
    t
}

fn program() -> impl Strategy<Value = String> {
    (1..4usize, any::<bool>())
        .prop_flat_map(|(n, wide)| {
            let tokens = program_tokens(n, wide);
            let gaps = tokens.matches(['~', '|']).count();
            (Just(tokens), prop::collection::vec((gap(), any::<bool>()), gaps))
        })
        .prop_map(|(tokens, gaps)| {
            let mut out = String::new();
            let mut gaps = gaps.into_iter();
            for c in tokens.chars() {
                match c {
                    '~' | '|' => {
                        let (gap, comma) = gaps.next().unwrap_or((" ".into(), false));
                        if c == '|' && comma {
                            out.push(',');
                        }
                        out.push_str(&gap);
                    }
                    c => out.push(c),
                }
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn generated_programs(text in program()) {
        // The generator writes valid programs; a syntax error would be its fault.
        prop_assert!(parse(&text).errors.is_empty(), "{:?}\n{text}", parse(&text).errors);
        if let Err(why) = promises(&text) {
            return Err(TestCaseError::fail(format!("{why}\n--- input\n{text}")));
        }
    }
}
