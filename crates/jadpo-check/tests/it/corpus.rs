//! The corpus under `tests/check/`: programs with the diagnostics they must raise.
//!
//! A case is `NAME.jadpo` with `NAME.expected` beside it, or a folder `NAME/` of
//! `.jadpo` files (one program) with `NAME/expected`. Each expected line is
//! `FILE:LINE:COL CODE`; an empty file means the program checks clean.

use jadpo_check::{LineIndex, Lower, SourceFile, check};
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/check")
}

fn read_program(files: &[PathBuf]) -> Vec<SourceFile> {
    files
        .iter()
        .map(|p| SourceFile {
            name: p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            text: std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
        })
        .collect()
}

/// The diagnostics as `FILE:LINE:COL CODE` lines, and the kinds of check (by
/// what they build beside the diagnostics) whose diagnostics are not exactly
/// those of the check that lowers: what a check builds changes none.
fn actual(sources: &[SourceFile]) -> (Vec<String>, Vec<Lower>) {
    let checked = check(sources, Lower::Yes);
    let differ = [Lower::No, Lower::DiagnosticsOnly]
        .into_iter()
        .filter(|&lower| check(sources, lower).diagnostics != checked.diagnostics)
        .collect();
    let lines = checked
        .diagnostics
        .iter()
        .map(|d| {
            let at = LineIndex::new(&sources[d.file].text).position(d.span.start);
            format!("{}:{}:{} {}", sources[d.file].name, at.line, at.column, d.code)
        })
        .collect();
    (lines, differ)
}

#[test]
fn corpus() {
    let mut cases: Vec<(String, Vec<PathBuf>, PathBuf)> = Vec::new();
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(corpus_dir()).expect("tests/check exists").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
                .expect("case folder")
                .map(|e| e.expect("entry").path())
                .filter(|p| p.extension().is_some_and(|x| x == "jadpo"))
                .collect();
            files.sort();
            cases.push((name, files, path.join("expected")));
        } else if path.extension().is_some_and(|x| x == "jadpo") {
            cases.push((name, vec![path.clone()], path.with_extension("expected")));
        }
    }
    assert!(cases.len() > 50, "the corpus holds {} cases", cases.len());
    let mut failures = Vec::new();
    for (name, files, expected_path) in &cases {
        let expected =
            std::fs::read_to_string(expected_path).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
        let expected: Vec<String> =
            expected.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect();
        let (found, differ) = actual(&read_program(files));
        if found != expected {
            failures.push(format!("{name}:\n  expected: {expected:?}\n  found:    {found:?}"));
        }
        if !differ.is_empty() {
            failures.push(format!("{name}: the checks for {differ:?} report otherwise than one that lowers"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// Every code of the registry is raised by at least one case of the corpus.
#[test]
fn corpus_covers_every_code() {
    let mut text = String::new();
    for entry in walk(&corpus_dir()) {
        if entry.file_name().is_some_and(|n| n == "expected") || entry.extension().is_some_and(|x| x == "expected") {
            text.push_str(&std::fs::read_to_string(&entry).unwrap_or_default());
        }
    }
    let missing: Vec<&str> = jadpo_check::Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !text.split_whitespace().any(|w| w == *c))
        .collect();
    assert!(missing.is_empty(), "no corpus case raises {missing:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
