//! Tidy tests: the invariants docs/ARCHITECTURE.md states about where code may do
//! what, checked over the workspace's source so they stay true.
//!
//! Each check reads the non-test source of the crates (`crates/*/src`, without
//! `build.rs`, files named `tests.rs` and everything after a `#[cfg(test)]` line)
//! and skips comment lines.

use jadpo_runtime::codes::{CodeKind, RuntimeCode};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A source file's non-test lines, numbered from 1, comments left out.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        out.push((i + 1, line.to_string()));
    }
    out
}

/// The non-test source files of every crate (`crates/*/src`), with the crate's
/// folder name.
fn crate_sources() -> Vec<(String, PathBuf)> {
    let root = workspace().join("crates");
    let mut crates: Vec<PathBuf> = std::fs::read_dir(&root).expect("crates/").flatten().map(|e| e.path()).collect();
    crates.sort();
    let mut out = Vec::new();
    for dir in crates {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        for file in rust_files(&dir.join("src")) {
            if file.file_name().is_some_and(|n| n == "tests.rs" || n == "build.rs") {
                continue;
            }
            out.push((name.clone(), file));
        }
    }
    out
}

fn shown(path: &Path) -> String {
    path.strip_prefix(workspace()).unwrap_or(path).display().to_string()
}

/// Where any of `needles` occurs in the files' code lines: `path:line: text`.
fn occurrences<'a>(files: impl IntoIterator<Item = &'a PathBuf>, needles: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        for (n, line) in code_lines(file) {
            if needles.iter().any(|needle| line.contains(needle)) {
                found.push(format!("{}:{n}: {}", shown(file), line.trim()));
            }
        }
    }
    found
}

#[test]
fn tidy_the_runtime_rules_read_no_clock_do_no_io_and_own_no_rng() {
    let dir = workspace().join("crates/jadpo-runtime/src/rules");
    let files: Vec<PathBuf> =
        rust_files(&dir).into_iter().filter(|f| f.file_name().is_none_or(|n| n != "tests.rs")).collect();
    assert!(files.len() >= 2, "the rules' files: {files:?}");
    let banned = [
        // Clocks.
        "std::time",
        "SystemTime",
        "Instant",
        "jiff",
        "crate::clock",
        // IO: files, the network, the terminal, the environment, the store.
        "std::fs",
        "std::io",
        "std::net",
        "std::env",
        "std::thread",
        "tokio",
        "rusqlite",
        "hyper",
        "crate::store",
        "crate::drivers",
        "crate::http",
        "crate::ingest",
        "println!",
        "eprintln!",
        // Random sources of its own (a decision takes one as an argument).
        "rand::rng",
        "thread_rng",
        "rand::rngs",
        "SeedableRng",
        "getrandom",
        "crate::rng",
    ];
    let found = occurrences(&files, &banned);
    assert!(
        found.is_empty(),
        "the rules must take time and randomness as arguments and do no IO:\n{}",
        found.join("\n")
    );
}

#[test]
fn tidy_only_jadpoc_does_terminal_io() {
    let files: Vec<PathBuf> = crate_sources().into_iter().filter(|(c, _)| c != "jadpoc").map(|(_, f)| f).collect();
    assert!(!files.is_empty());
    let terminal = [
        "println!",
        "eprintln!",
        "print!(",
        "eprint!(",
        "dbg!(",
        "std::io::stdout",
        "std::io::stderr",
        "std::io::stdin",
        "io::stdout()",
        "io::stderr()",
        "io::stdin()",
    ];
    let found = occurrences(&files, &terminal);
    assert!(
        found.is_empty(),
        "only jadpoc touches the terminal (it hands a language server its stdio); emit tracing events or \
         return values instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn tidy_runtime_codes_are_written_only_in_the_registry() {
    let registry = workspace().join("crates/jadpo-runtime/src/codes.rs");
    let runtime: Vec<PathBuf> =
        crate_sources().into_iter().filter(|(c, f)| c == "jadpo-runtime" && *f != registry).map(|(_, f)| f).collect();
    let cli: Vec<PathBuf> = crate_sources().into_iter().filter(|(c, _)| c == "jadpoc").map(|(_, f)| f).collect();
    // A code's name, and a family's way of making one.
    let mut names: Vec<String> = vec!["\"http.{".into(), "\"fake.{".into()];
    for code in RuntimeCode::ALL {
        let name = code.as_str();
        if !name.ends_with("NNN") && !name.ends_with("KIND") {
            names.push(format!("\"{name}\""));
        }
    }
    let needles: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut found = occurrences(&runtime, &needles);
    found.extend(occurrences(&cli, &needles));
    // An ingest code answers on the wire without its prefix: where the ingest's
    // answers are made, that word too comes only from the registry.
    let wire: Vec<String> = RuntimeCode::ALL
        .iter()
        .filter(|c| matches!(c.kind(), CodeKind::Ingest(_)))
        .map(|c| format!("\"{}\"", c.wire()))
        .collect();
    let wire: Vec<&str> = wire.iter().map(String::as_str).collect();
    let ingest: Vec<PathBuf> =
        ["ingest.rs", "payload.rs"].iter().map(|f| workspace().join("crates/jadpo-runtime/src").join(f)).collect();
    found.extend(occurrences(&ingest, &wire));
    assert!(
        found.is_empty(),
        "a runtime code is written once, in crates/jadpo-runtime/src/codes.rs; take it from `RuntimeCode`:\n{}",
        found.join("\n")
    );
}

/// Every file a reader may be pointed from: the crates' sources and tests, docs/
/// and the README.
fn text_files() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = rust_files(&root.join("crates"));
    for dir in ["docs", "crates/jadpo-check/docs"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "md") {
                    files.push(path);
                }
            }
        }
    }
    files.push(root.join("README.md"));
    files
}

#[test]
fn tidy_every_cargo_test_command_named_in_the_tree_names_a_test_target_that_exists() {
    let mut stale = Vec::new();
    let mut seen = 0;
    for file in text_files() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("cargo test -p ") {
                rest = &rest[at + "cargo test -p ".len()..];
                let words: Vec<&str> = rest.split_whitespace().take(3).collect();
                let [krate, "--test", target] = words[..] else { continue };
                if !krate.chars().all(|c| c.is_ascii_lowercase() || c == '-') {
                    continue; // a placeholder, as in this test's own messages
                }
                let target = target.trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'));
                seen += 1;
                let tests = workspace().join("crates").join(krate).join("tests");
                if !tests.join(format!("{target}.rs")).is_file() && !tests.join(target).join("main.rs").is_file() {
                    stale.push(format!("{}:{}: `cargo test -p {krate} --test {target}`", shown(&file), n + 1));
                }
            }
        }
    }
    assert!(seen > 0, "no `cargo test -p CRATE --test TARGET` command found: the scan is broken");
    assert!(stale.is_empty(), "commands naming a test target that does not exist:\n{}", stale.join("\n"));
}
