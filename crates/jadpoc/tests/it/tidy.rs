//! Tidy tests: the invariants docs/ARCHITECTURE.md states about where code may do
//! what, checked over the workspace's source so they stay true.
//!
//! Each check reads the non-test source of the crates (`crates/*/src`, without
//! `build.rs`, files named `tests.rs` and everything after a `#[cfg(test)]` line)
//! and skips comment lines.

use jadpo_check::program::BreakerState;
use jadpo_core::codes::{CodeKind, RuntimeCode};
use std::path::{Path, PathBuf};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    jadpo_test_support::files_under(dir, ".rs")
}

/// A source file's non-test lines, numbered from 1, comments left out. An item
/// under `#[cfg(test)]` (a `mod tests;` line or a `mod tests { ... }` block) is
/// left out, and what follows it is read on. A `use` of a group is read as its
/// paths whole (`use std::{fs, io};` as `std::fs` and `std::io`), so a group
/// cannot hide an import.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let trimmed = lines[i].trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            i = skip_item(&lines, i + 1);
            continue;
        }
        if trimmed.starts_with("//") {
            i += 1;
            continue;
        }
        if trimmed.starts_with("use ") || trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use ") {
            // The whole statement, however many lines it takes.
            let start = i;
            let mut statement = String::new();
            while i < lines.len() {
                statement.push_str(lines[i].trim());
                statement.push(' ');
                i += 1;
                if statement.trim_end().ends_with(';') {
                    break;
                }
            }
            let body = statement.trim().trim_end_matches(';');
            let body = body.split_once("use ").map(|(_, b)| b).unwrap_or(body);
            out.push((start + 1, format!("{statement} {}", use_paths(body).join(" "))));
            continue;
        }
        out.push((i + 1, lines[i].to_string()));
        i += 1;
    }
    out
}

/// The line after the item that starts at `from`: one line ending in `;`, or a
/// block to its closing brace.
fn skip_item(lines: &[&str], from: usize) -> usize {
    let mut depth = 0i32;
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(from) {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        if (opened && depth <= 0) || (!opened && line.trim_end().ends_with(';')) {
            return i + 1;
        }
    }
    lines.len()
}

/// The paths a `use` names: `std::{fs, io::Read}` gives `std::fs` and
/// `std::io::Read`.
fn use_paths(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or(tree).trim().to_string()];
    };
    let prefix = &tree[..open];
    let inner = tree[open + 1..].trim_end().strip_suffix('}').unwrap_or(&tree[open + 1..]);
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| use_paths(p).into_iter().map(|q| format!("{prefix}{q}")))
        .collect()
}

#[test]
fn tidy_a_group_or_a_test_module_hides_nothing_from_the_checks() {
    assert_eq!(use_paths("std::{fs, io::{Read, Write}}"), ["std::fs", "std::io::Read", "std::io::Write"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("x.rs");
    std::fs::write(
        &file,
        "use std::{\n    fs,\n    sync::Arc,\n};\n#[cfg(test)]\nmod tests {\n    use std::net;\n}\nuse std::env;\n",
    )
    .expect("write");
    let found = occurrences(&[file], &["std::fs", "std::env", "std::net"]);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains(":1: ") && found[0].contains("std::fs"), "{found:?}");
    assert!(found[1].contains(":9: ") && found[1].contains("std::env"), "{found:?}");
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

/// The crates of the runtime.
const RUNTIME_CRATES: [&str; 6] =
    ["jadpo-core", "jadpo-store-sqlite", "jadpo-store-postgres", "jadpo-http", "jadpo-runtime", "jadpo-console"];

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
    let dir = workspace().join("crates/jadpo-core/src/rules");
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
        "crate::steps",
        "crate::scenario",
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
    // The tests' shared helpers run only in tests, where a skip is said on stdout.
    let files: Vec<PathBuf> = crate_sources()
        .into_iter()
        .filter(|(c, _)| c != "jadpoc" && c != "jadpo-test-support")
        .map(|(_, f)| f)
        .collect();
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
    let registry = workspace().join("crates/jadpo-core/src/codes.rs");
    let runtime: Vec<PathBuf> = crate_sources()
        .into_iter()
        .filter(|(c, f)| RUNTIME_CRATES.contains(&c.as_str()) && *f != registry)
        .map(|(_, f)| f)
        .collect();
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
    let ingest: Vec<PathBuf> = ["crates/jadpo-http/src/ingest.rs", "crates/jadpo-core/src/payload.rs"]
        .iter()
        .map(|f| workspace().join(f))
        .collect();
    found.extend(occurrences(&ingest, &wire));
    assert!(
        found.is_empty(),
        "a runtime code is written once, in crates/jadpo-core/src/codes.rs; take it from `RuntimeCode`:\n{}",
        found.join("\n")
    );
}

/// Every file a reader may be pointed from: the crates' sources and tests, docs/
/// and the README.
fn text_files() -> Vec<PathBuf> {
    let root = workspace();
    let mut files = rust_files(&root.join("crates"));
    for dir in ["docs", "crates/jadpo-check/docs"] {
        files.extend(jadpo_test_support::files_under(&root.join(dir), ".md"));
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

/// The workspace's crates and what each may depend on (normal dependencies):
/// the workspace's own crates exactly, and outside crates it must never take.
/// docs/ARCHITECTURE.md draws the same graph.
const CRATE_GRAPH: &[(&str, &[&str], &[&str])] = &[
    ("jadpo-syntax", &[], &["tokio", "rusqlite", "postgres", "hyper"]),
    ("jadpo-check", &["jadpo-syntax"], &["tokio", "rusqlite", "postgres", "hyper"]),
    ("jadpo-fmt", &["jadpo-syntax"], &["tokio", "rusqlite", "postgres", "hyper"]),
    ("jadpo-lsp", &["jadpo-check", "jadpo-fmt", "jadpo-syntax"], &["tokio", "rusqlite", "postgres", "hyper"]),
    // The runtime's core: no async runtime, no SQL, no HTTP.
    ("jadpo-core", &["jadpo-check"], &["tokio", "rusqlite", "postgres", "hyper", "rustls", "prometheus-client"]),
    // Each store on its own driver alone.
    ("jadpo-store-sqlite", &["jadpo-check", "jadpo-core"], &["tokio", "postgres", "hyper"]),
    ("jadpo-store-postgres", &["jadpo-check", "jadpo-core"], &["tokio", "rusqlite", "hyper"]),
    ("jadpo-http", &["jadpo-check", "jadpo-core"], &["rusqlite", "postgres"]),
    // The live driver: loops over the core's steps; its SQL and HTTP are the
    // crates' above.
    (
        "jadpo-runtime",
        &["jadpo-check", "jadpo-core", "jadpo-http", "jadpo-store-postgres", "jadpo-store-sqlite"],
        &["rusqlite", "postgres", "hyper"],
    ),
    // The operator's console: pages and actions over the store's trait, on the
    // HTTP side's accept loop; no SQL of its own.
    ("jadpo-console", &["jadpo-check", "jadpo-core", "jadpo-http"], &["rusqlite", "postgres"]),
    (
        "jadpoc",
        &[
            "jadpo-check",
            "jadpo-console",
            "jadpo-core",
            "jadpo-fmt",
            "jadpo-http",
            "jadpo-lsp",
            "jadpo-runtime",
            "jadpo-store-postgres",
            "jadpo-store-sqlite",
            "jadpo-syntax",
        ],
        &[],
    ),
    // The browser playground's functions: the front end, the core and the SQLite
    // store only, all of which build for wasm32-unknown-unknown.
    (
        "jadpo-wasm",
        &["jadpo-check", "jadpo-core", "jadpo-fmt", "jadpo-store-sqlite", "jadpo-syntax"],
        &["tokio", "postgres", "hyper", "rustls"],
    ),
    // Tests' shared helpers: a dev-dependency only, so no crate above names it.
    ("jadpo-test-support", &["jadpo-check"], &["tokio", "rusqlite", "hyper"]),
    // The stores' conformance suite: both stores and the core's rules over
    // them; a dev-dependency only, with no driver, runtime or HTTP of its own.
    (
        "jadpo-store-conformance",
        &["jadpo-check", "jadpo-core", "jadpo-store-postgres", "jadpo-store-sqlite", "jadpo-test-support"],
        &["tokio", "hyper"],
    ),
];

/// Each workspace crate's normal dependencies, as `cargo metadata` reads the
/// manifests.
fn crate_dependencies() -> Vec<(String, Vec<String>)> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(workspace())
        .output()
        .expect("run cargo metadata");
    assert!(out.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let mut crates = Vec::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("a name").to_string();
        let mut deps: Vec<String> = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|d| d["kind"].is_null())
            .filter_map(|d| d["name"].as_str().map(str::to_string))
            .collect();
        deps.sort();
        crates.push((name, deps));
    }
    crates.sort();
    crates
}

#[test]
fn tidy_the_crates_depend_on_each_other_as_the_architecture_says() {
    let crates = crate_dependencies();
    let mut wrong = Vec::new();
    let names: Vec<&str> = CRATE_GRAPH.iter().map(|(n, _, _)| *n).collect();
    for (name, deps) in &crates {
        let Some((_, allowed, banned)) = CRATE_GRAPH.iter().find(|(n, _, _)| n == name) else {
            wrong.push(format!("`{name}` is not in the graph: add it to CRATE_GRAPH and docs/ARCHITECTURE.md"));
            continue;
        };
        let ours: Vec<&str> = deps.iter().map(String::as_str).filter(|d| names.contains(d)).collect();
        if ours != *allowed {
            wrong.push(format!("`{name}` depends on {ours:?}; the architecture says {allowed:?}"));
        }
        for d in deps.iter().filter(|d| banned.contains(&d.as_str())) {
            wrong.push(format!("`{name}` must not depend on `{d}`"));
        }
    }
    for (name, _, _) in CRATE_GRAPH {
        if !crates.iter().any(|(n, _)| n == name) {
            wrong.push(format!("`{name}` is in the graph but not in the workspace"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn tidy_the_stores_and_the_live_driver_decide_nothing() {
    // A claim's and an attempt's decisions are the core's (`jadpo_core::claim`,
    // the steps), as are an operator's retry and skip, a pause and a resume,
    // the tick's sweep and expansion (`jadpo_core::store::rows`); a store reads
    // and writes the rows, the live driver runs the steps when they are due.
    let files: Vec<PathBuf> = crate_sources()
        .into_iter()
        .filter(|(c, _)| ["jadpo-store-sqlite", "jadpo-store-postgres", "jadpo-runtime"].contains(&c.as_str()))
        .map(|(_, f)| f)
        .collect();
    assert!(files.len() >= 20, "{files:?}");
    let found = occurrences(
        &files,
        &[
            "ClaimDecision",
            "decide_at_claim",
            "decide_after_attempt",
            ".held()",
            "Decision::Retry",
            "Gate::",
            "operator_retry",
            "operator_skip",
            "retry_subject",
            "breaker::pause(",
            "breaker::resume(",
            "pause_ended",
            "alert_due",
            "tick_wake",
            "CHANGE_TRIES",
        ],
    );
    assert!(
        found.is_empty(),
        "a decision is made once, in jadpo-core (`claim::plan` for a claim, the steps for an attempt, \
         `store::rows` for what operators and the tick change):\n{}",
        found.join("\n")
    );
}

#[test]
fn tidy_every_state_word_the_stores_spell_is_one_of_the_enums_that_own_them() {
    // A statement that spells a state (`state = 'held'`, a migration's CHECK)
    // spells a word of `DeliveryState` or `BreakerState`: a state renamed in the
    // enum and not in the SQL fails here, not in a store that no longer finds
    // its rows. The other quoted words a statement may spell are listed.
    const NOT_STATES: &[&str] = &["table", "id"];
    let words: Vec<&str> = jadpo_check::program::DeliveryState::ALL
        .iter()
        .map(|s| s.as_str())
        .chain([BreakerState::Closed, BreakerState::Open, BreakerState::Probing].map(BreakerState::as_str))
        .collect();
    let files: Vec<PathBuf> = crate_sources()
        .into_iter()
        .filter(|(c, f)| c.starts_with("jadpo-store-") && !f.ends_with("tests.rs"))
        .map(|(_, f)| f)
        .collect();
    assert!(files.len() >= 20, "{files:?}");
    let mut wrong = Vec::new();
    let mut seen = 0;
    for file in &files {
        for (n, line) in code_lines(file) {
            for quoted in line.split('\'').skip(1).step_by(2) {
                let word = quoted.trim_end_matches('\\');
                if word.len() < 2 || !word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                    continue;
                }
                seen += 1;
                if !words.contains(&word) && !NOT_STATES.contains(&word) {
                    wrong.push(format!("{}:{n}: '{word}'", shown(file)));
                }
            }
        }
    }
    assert!(seen >= 50, "the stores spell {seen} state words: is the scan still finding them?");
    assert!(wrong.is_empty(), "not a state word of the enums:\n{}", wrong.join("\n"));
}

#[test]
fn tidy_the_checker_reads_no_files() {
    let files: Vec<PathBuf> = crate_sources()
        .into_iter()
        .filter(|(c, _)| ["jadpo-syntax", "jadpo-check", "jadpo-fmt"].contains(&c.as_str()))
        .map(|(_, f)| f)
        .collect();
    assert!(files.len() >= 5, "{files:?}");
    let found = occurrences(
        &files,
        &["std::fs", "fs::File", "File::open", "File::create", "read_to_string", "std::env", "std::net"],
    );
    assert!(
        found.is_empty(),
        "the checker is handed its files' text by `jadpoc`; it reads none:\n{}",
        found.join("\n")
    );
}

#[test]
fn tidy_every_random_draw_comes_from_the_one_seeded_source() {
    let source = workspace().join("crates/jadpo-core/src/rng.rs");
    let files: Vec<PathBuf> = crate_sources().into_iter().map(|(_, f)| f).filter(|f| *f != source).collect();
    let found = occurrences(
        &files,
        &[
            "thread_rng",
            "rand::rng(",
            "SeedableRng",
            "from_entropy",
            "OsRng",
            "StdRng",
            "SmallRng",
            "ChaCha",
            "getrandom",
            "fastrand",
            "RandomState::new",
        ],
    );
    assert!(
        found.is_empty(),
        "every random draw of a run comes from `RandomSource` (crates/jadpo-core/src/rng.rs):\n{}",
        found.join("\n")
    );
}
