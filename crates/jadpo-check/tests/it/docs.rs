//! Every code's documentation is real: its example raises the code, its fix checks
//! clean, and docs/diagnostics.md is the registry's current rendering.

use jadpo_check::registry::reference_markdown;
use jadpo_check::{Code, Lower, Severity, SourceFile, check};
use std::path::Path;

/// The ```jadpo blocks after `### Example` and `### Fix`.
fn examples(doc: &str) -> Option<(String, String)> {
    let block_after = |heading: &str| -> Option<String> {
        let rest = &doc[doc.find(heading)? + heading.len()..];
        let start = rest.find("```jadpo\n")? + "```jadpo\n".len();
        let end = rest[start..].find("\n```")?;
        Some(rest[start..start + end].to_string() + "\n")
    };
    Some((block_after("### Example")?, block_after("### Fix")?))
}

fn codes_of(text: &str) -> Vec<(Code, String)> {
    let checked = check(&[SourceFile { name: "example.jadpo".into(), text: text.into() }], Lower::No);
    checked.diagnostics.iter().map(|d| (d.code, d.message.clone())).collect()
}

#[test]
fn every_code_has_an_example_that_raises_it_and_a_fix_that_does_not() {
    let mut failures = Vec::new();
    for &code in Code::ALL {
        let Some((wrong, right)) = examples(code.doc()) else {
            failures.push(format!("{code}: no `### Example` and `### Fix` jadpo blocks"));
            continue;
        };
        let found = codes_of(&wrong);
        if !found.iter().any(|(c, _)| *c == code) {
            failures.push(format!("{code}: the example raises {found:?}"));
        }
        let fixed = codes_of(&right);
        let bad: Vec<_> = fixed
            .iter()
            .filter(|(c, _)| *c == code || c.severity() == Severity::Error || code.severity() == Severity::Warning)
            .collect();
        if !bad.is_empty() {
            failures.push(format!("{code}: the fix raises {bad:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn diagnostics_md_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/diagnostics.md");
    let want = reference_markdown();
    if std::env::var_os("JADPO_BLESS").is_some() {
        std::fs::write(&path, &want).expect("write docs/diagnostics.md");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/diagnostics.md is out of date: run `JADPO_BLESS=1 cargo test -p jadpo-check --test it docs`"
    );
    for code in Code::ALL {
        assert!(have.contains(&format!("\n## {code}\n")), "docs/diagnostics.md has no entry for {code}");
    }
}
