//! The corpus under `tests/diff/`: pairs of programs with the findings `diff`
//! must give.
//!
//! A case is a folder with `old.jadpo`, `new.jadpo` and `expected`, whose lines
//! are `CODE new:LINE:COL` (or `old:` when the finding has no place in the new
//! program), in the order `diff` gives them; an empty file means no finding.
//! `JADPO_BLESS=1` writes what was found, to be read before it is kept.

use jadpo_check::diff::{DiffCode, Finding, Side, diff};
use jadpo_check::{Checked, Lower, SourceFile, check};
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/diff")
}

fn checked(name: &str, text: &str) -> (Vec<SourceFile>, Checked) {
    let files = vec![SourceFile { name: name.into(), text: text.into() }];
    let checked = check(&files, Lower::Yes);
    assert_eq!(checked.errors(), 0, "{name}: {:?}", checked.diagnostics);
    (files, checked)
}

fn findings(old: &str, new: &str) -> Vec<Finding> {
    let (old_files, old_checked) = checked("old.jadpo", old);
    let (new_files, new_checked) = checked("new.jadpo", new);
    diff(Side { files: &old_files, checked: &old_checked }, Side { files: &new_files, checked: &new_checked })
}

fn line(f: &Finding) -> String {
    let (side, at) = match (&f.new_at, &f.old_at) {
        (Some(at), _) => ("new", Some(at)),
        (None, at) => ("old", at.as_ref()),
    };
    match at {
        Some(at) => format!("{} {side}:{}:{}", f.code, at.line, at.column),
        None => format!("{} nowhere", f.code),
    }
}

fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus_dir())
        .expect("tests/diff exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn diff_corpus() {
    let cases = cases();
    assert!(cases.len() >= 5, "the corpus holds {} cases", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let found: Vec<String> =
            findings(&read(&case.join("old.jadpo")), &read(&case.join("new.jadpo"))).iter().map(line).collect();
        if std::env::var_os("JADPO_BLESS").is_some() {
            let text: String = found.iter().map(|l| format!("{l}\n")).collect();
            std::fs::write(case.join("expected"), text).expect("write expected");
        }
        let expected: Vec<String> =
            read(&case.join("expected")).lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
        if found != expected {
            let name = case.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            failures.push(format!("{name}:\n  expected: {expected:?}\n  found:    {found:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// Every code is raised by at least one case, and has its documentation.
#[test]
fn every_diff_code_has_a_doc_and_a_case() {
    let mut text = String::new();
    for case in cases() {
        text.push_str(&read(&case.join("expected")));
    }
    let mut failures = Vec::new();
    for &code in DiffCode::ALL {
        if !text.split_whitespace().any(|w| w == code.as_str()) {
            failures.push(format!("{code}: no case of tests/diff raises it"));
        }
        let doc = code.doc();
        if !doc.contains("### What to do") || doc.len() < 200 {
            failures.push(format!("{code}: its doc has no `### What to do`"));
        }
        assert_eq!(DiffCode::parse(code.as_str()), Some(code));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A program compared with itself gives nothing, whatever it holds.
#[test]
fn a_program_against_itself_gives_nothing() {
    for case in cases() {
        for side in ["old.jadpo", "new.jadpo"] {
            let text = read(&case.join(side));
            assert_eq!(findings(&text, &text), Vec::new(), "{}", case.join(side).display());
        }
    }
}

/// The typed subjects a store counts by: old names, new budgets, new readers.
#[test]
fn subjects_name_what_the_store_holds() {
    let dir = corpus_dir();
    let found =
        findings(&read(&dir.join("subscriber_changes/old.jadpo")), &read(&dir.join("subscriber_changes/new.jadpo")));
    let budget = found.iter().find(|f| f.code == DiffCode::SubscriberBudgetTightened).map(|f| f.subject.clone());
    assert_eq!(
        budget,
        Some(jadpo_check::diff::Subject::Budget {
            subscriber: "record_payment_hook".into(),
            attempts: 5,
            within_ms: 86_400_000
        })
    );
    let renamed = found.iter().find(|f| f.code == DiffCode::SubscriberRenamed).cloned();
    let renamed = renamed.expect("a rename");
    assert_eq!(renamed.message, "the subscriber `record_payment_hook` is renamed `record_payment_webhook`");
    assert_eq!(renamed.old_at.map(|p| (p.line, p.column)), Some((19, 12)));
    assert_eq!(
        renamed.new_at.map(|p| (p.path, p.line, p.column, p.end - p.start)),
        Some(("new.jadpo".into(), 19, 12, 22))
    );
    let found = findings(&read(&dir.join("event_changes/old.jadpo")), &read(&dir.join("event_changes/new.jadpo")));
    let readers: Vec<_> = found
        .iter()
        .filter_map(|f| match &f.subject {
            jadpo_check::diff::Subject::Field { field, readers, .. } => Some((f.code, field.as_str(), readers.len())),
            _ => None,
        })
        .collect();
    assert!(readers.contains(&(DiffCode::EventFieldAddedRequired, "region", 1)), "{readers:?}");
    assert!(readers.contains(&(DiffCode::EventUnreadFieldChanged, "extra", 0)), "{readers:?}");
}

/// docs/diff.md's tables name every code with its severity.
#[test]
fn diff_md_lists_every_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/diff.md");
    let text = read(&path);
    for &code in DiffCode::ALL {
        let row = format!("| `{code}` | {} |", code.severity().as_str());
        assert!(text.contains(&row), "docs/diff.md has no row `{row}`");
    }
}
