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

/// A module of a crate by its path from the crate's root (`[]` for `lib.rs` or
/// `main.rs`, `["a", "b"]` for `a/b.rs` or `a/b/mod.rs`).
type ModulePath = Vec<String>;

/// The module a source file of `src` is.
fn module_of(src: &Path, file: &Path) -> ModulePath {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut path: ModulePath = rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
    if path == ["lib"] || path == ["main"] || path.last().is_some_and(|s| s == "mod") {
        path.pop();
    }
    path
}

/// Whether one of the two modules is the other or holds it.
fn nested(a: &[String], b: &[String]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// A code line with its string and character literals emptied and its trailing
/// comment cut.
fn code_only(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '"' => break,
                        _ => {}
                    }
                }
                out.push_str("\"\"");
            }
            // A character literal (`'"'`, `'\''`); a lifetime's quote stays.
            '\'' => {
                let rest: String = chars.clone().take(12).collect();
                let len = if rest.starts_with('\\') {
                    // The escaped character, then the closing quote.
                    rest.get(2..).and_then(|r| r.find('\'')).map(|i| i + 3)
                } else {
                    rest.char_indices().nth(1).filter(|(_, q)| *q == '\'').map(|(i, _)| i + 1)
                };
                match len {
                    Some(len) => {
                        chars.by_ref().take(rest[..len].chars().count()).for_each(drop);
                        out.push_str("' '");
                    }
                    None => out.push(c),
                }
            }
            '/' if chars.peek() == Some(&'/') => break,
            _ => out.push(c),
        }
    }
    out
}

/// One path a file names from inside its crate.
struct Named {
    /// The module of the file that names it.
    from: ModulePath,
    /// `FILE:LINE: PATH`, to show.
    place: String,
    /// The path from the crate's root.
    path: ModulePath,
    /// The name it is brought in as: its last, or its `as` name.
    name: String,
    /// Whether it is re-exported (`pub use`, `pub(crate) use`).
    public: bool,
}

/// The paths a code line names: each `crate::`, `super::` or `self::` path, as far
/// as its last name (`crate::a::f(x)` gives `crate::a::f`), with that name; a
/// `use` line's paths from its tree, each with the name it is brought in as (`use
/// crate::a::B as C` gives `crate::a::B` and `C`) and whether it is re-exported.
/// A `use` of a path starting otherwise (`use x::Y`, naming a submodule `x` or
/// another crate) is given too: only its resolution tells which.
fn named_paths(line: &str) -> Vec<(String, String, bool)> {
    let trimmed = line.trim_start();
    let public = trimmed.starts_with("pub");
    if ["use ", "pub use ", "pub(crate) use ", "pub(super) use "].iter().any(|p| trimmed.starts_with(p)) {
        // `code_lines` gives the whole statement, then its paths.
        let statement = trimmed.split_once(';').map_or(trimmed, |(s, _)| s);
        let tree = statement.split_once("use ").map_or(statement, |(_, t)| t);
        // `as` cannot be a name, so an alias rides along as the path's last two.
        return use_paths(&tree.replace(" as ", "::as::"))
            .into_iter()
            .map(|p| {
                let (path, alias) = p.split_once("::as::").unwrap_or((&p, ""));
                let name = if alias.is_empty() { path.rsplit("::").next().unwrap_or(path) } else { alias };
                (path.trim().to_string(), name.trim().to_string(), public)
            })
            .collect();
    }
    let code = code_only(line);
    let mut found = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            // A path's start: not `$crate::`, `a::self::` or `my_crate::`.
            if code[..at].ends_with(|c: char| c == '$' || c == ':' || c == '_' || c.is_alphanumeric()) {
                continue;
            }
            let rest = &code[at..];
            let end = rest.find(|c: char| !(c == ':' || c == '_' || c.is_alphanumeric())).unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches(':');
            let name = path.rsplit("::").next().unwrap_or(path);
            found.push((path.to_string(), name.to_string(), false));
        }
    }
    found
}

/// Whether module `from` has a submodule `name`.
fn has_submodule(from: &[String], name: &str, modules: &[ModulePath]) -> bool {
    modules.iter().any(|m| m.len() == from.len() + 1 && m.starts_with(from) && m[from.len()] == name)
}

/// `path`, named in module `from`, as a path from the crate's root; `None` for a
/// path into another crate.
fn absolute(from: &[String], path: &str, modules: &[ModulePath]) -> Option<ModulePath> {
    let mut segments = path.split("::").filter(|s| !s.is_empty() && *s != "*").peekable();
    let mut out: ModulePath = match segments.peek().copied() {
        Some("crate") => {
            segments.next();
            Vec::new()
        }
        Some("super" | "self") => {
            let mut out = from.to_vec();
            while let Some(s @ ("super" | "self")) = segments.peek().copied() {
                if s == "super" {
                    out.pop();
                }
                segments.next();
            }
            out
        }
        // `use x::Y` in a module that has a submodule `x`.
        Some(first) if has_submodule(from, first, modules) => from.to_vec(),
        _ => return None,
    };
    out.extend(segments.filter(|s| *s != "self").map(str::to_string));
    Some(out)
}

/// The modules an absolute path names: the longest of its prefixes that is a
/// module and, when the name after it is one that module re-exports, the modules
/// the re-exported path names in turn. `reexports` holds each module's re-exported
/// names (`*` for a glob) and their paths.
fn modules_named(
    path: &[String],
    modules: &[ModulePath],
    reexports: &[(&ModulePath, &str, &ModulePath)],
) -> Vec<ModulePath> {
    let mut out: Vec<ModulePath> = Vec::new();
    let mut path = path.to_vec();
    // The longest prefix that is a module (the crate's root at least).
    while let Some(module) = (0..=path.len()).rev().map(|n| &path[..n]).find(|p| modules.iter().any(|m| m == p)) {
        // A re-export of a re-export is followed, and a ring of them stops.
        if out.iter().any(|m| m == module) {
            break;
        }
        let module = module.to_vec();
        let next = path.get(module.len()).and_then(|item| {
            let (_, name, target) =
                reexports.iter().find(|(m, name, _)| **m == module && (name == item || *name == "*"))?;
            let mut target = target.to_vec();
            if *name == "*" {
                target.push(item.clone());
            }
            Some(target)
        });
        out.push(module);
        match next {
            Some(target) => path = target,
            None => break,
        }
    }
    out
}

/// The import cycles among the modules of the crate whose source is `src` (its
/// non-test `files`), as [`tidy_no_module_imports_itself_through_others`] defines
/// them: each as `a -> b -> a`, then, for each step, the line that makes it.
fn import_cycles(src: &Path, files: &[PathBuf]) -> Vec<String> {
    let mut modules: Vec<ModulePath> = files.iter().map(|f| module_of(src, f)).collect();
    modules.sort();
    modules.dedup();
    let mut named: Vec<Named> = Vec::new();
    for file in files {
        let from = module_of(src, file);
        for (n, line) in code_lines(file) {
            for (path, name, public) in named_paths(&line) {
                if let Some(abs) = absolute(&from, &path, &modules) {
                    let place = format!("{}:{n}: {path}", shown(file));
                    named.push(Named { from: from.clone(), place, path: abs, name, public });
                }
            }
        }
    }
    let reexports: Vec<(&ModulePath, &str, &ModulePath)> =
        named.iter().filter(|n| n.public).map(|n| (&n.from, n.name.as_str(), &n.path)).collect();
    // The modules holding each end of each import, by index in `modules`, to the
    // first line that makes the step.
    let index = |m: &[String]| modules.iter().position(|x| x == m);
    let holders = |m: &[String]| (0..=m.len()).filter_map(|n| index(&m[..n])).collect::<Vec<usize>>();
    let mut edges: std::collections::BTreeMap<(usize, usize), &str> = std::collections::BTreeMap::new();
    for n in &named {
        for to in modules_named(&n.path, &modules, &reexports) {
            for a in holders(&n.from) {
                for b in holders(&to) {
                    if !nested(&modules[a], &modules[b]) {
                        edges.entry((a, b)).or_insert(&n.place);
                    }
                }
            }
        }
    }
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); modules.len()];
    for &(a, b) in edges.keys() {
        next[a].push(b);
    }
    // Each elementary cycle once, from its first module: every walk from `start`
    // through later modules only that comes back to it.
    fn walk(start: usize, path: &mut Vec<usize>, next: &[Vec<usize>], out: &mut Vec<Vec<usize>>) {
        let Some(&at) = path.last() else { return };
        for &to in &next[at] {
            if to == start {
                out.push(path.clone());
            } else if to > start && !path.contains(&to) && out.len() < 100 {
                path.push(to);
                walk(start, path, next, out);
                path.pop();
            }
        }
    }
    let mut cycles = Vec::new();
    for start in 0..modules.len() {
        walk(start, &mut vec![start], &next, &mut cycles);
    }
    let name = |i: usize| if modules[i].is_empty() { "crate".to_string() } else { modules[i].join("::") };
    cycles
        .iter()
        .map(|cycle| {
            let mut out = cycle.iter().chain(&cycle[..1]).map(|&m| name(m)).collect::<Vec<_>>().join(" -> ");
            for (i, &a) in cycle.iter().enumerate() {
                let b = cycle[(i + 1) % cycle.len()];
                out.push_str(&format!("\n    {} -> {}: {}", name(a), name(b), edges[&(a, b)]));
            }
            out
        })
        .collect()
}

/// No module of a crate imports itself through others, in a cycle of any length
/// (`a -> b -> a`, `a -> b -> c -> a`): a ring of files has no order to read or
/// change them in, and no part of it can be taken alone.
///
/// The rule, per crate:
/// - A file imports another when it names that file's module in a path: in a
///   `use`, or as a `crate::`, `super::` or `self::` path anywhere in its code
///   (`crate::a::f(x)`), each read up to the longest prefix that is a module of
///   the crate (`a.rs` or `a/mod.rs` is `a`, `a/b.rs` is `a::b`). When the name
///   after that prefix is one the module re-exports (`pub use`, `pub(crate) use`),
///   the path imports the module the re-export comes from too, through re-exports
///   of re-exports: `crate::Checked` names `lib.rs` and the module that declares
///   `Checked`. Comments, a line's string literals and `#[cfg(test)]` items name
///   nothing.
/// - A module is its file with its submodules, and one module imports another
///   when a file of the first imports a file of the second, neither module holding
///   the other. A module and its own submodules are one piece: the parent declares
///   them and presents their items, they use what it shares, so `check/values.rs`
///   naming `super::Cx` while `check/mod.rs` names `values::type_name` is no
///   cycle. But what a submodule imports, every module holding it imports, and
///   what imports a submodule imports every module holding it: `signing.rs`
///   naming `client::tls::pem_text` imports `client`, so `client.rs` naming
///   `signing::Signer` closes a cycle.
///
/// Every elementary cycle among those modules is named, from its first module in
/// name order, with the line that makes each step.
#[test]
fn tidy_no_module_imports_itself_through_others() {
    // The reading first, on a crate made for it: a three-step cycle through an
    // alias, an inline path and a re-export; one through a submodule and a glob
    // re-export; none from a parent and its submodule, a comment, a string or a
    // test module.
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    let crate_files = [
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod e;\nmod p;\npub use c::C;\n"),
        ("a.rs", "use crate::b::B as Bee;\npub struct A;\n"),
        ("b.rs", "pub struct B;\npub fn f() -> crate::C {\n    crate::C\n}\n"),
        (
            "c.rs",
            "pub struct C;\nuse super::a::A; // crate::e::E\nconst S: (char, char, &str) = ('\\'', '\"', \"crate::e::E\");\n\
             #[cfg(test)]\nmod tests {\n    use crate::e::E;\n}\n",
        ),
        ("e.rs", "pub struct E(crate::p::Q);\n"),
        ("p/mod.rs", "mod q;\npub use q::*;\nuse self::q::helper;\npub struct P;\n"),
        ("p/q.rs", "use super::P;\nuse crate::{a::A, e::E};\npub struct Q;\n"),
    ];
    for (name, text) in crate_files {
        let file = src.join(name);
        std::fs::create_dir_all(file.parent().expect("a folder")).expect("mkdir");
        std::fs::write(&file, text).expect("write");
    }
    let found = import_cycles(&src, &rust_files(&src));
    let heads: Vec<&str> = found.iter().map(|c| c.lines().next().unwrap_or_default()).collect();
    assert_eq!(heads, ["a -> b -> c -> a", "e -> p -> e", "e -> p::q -> e"], "{found:#?}");
    assert!(found[0].ends_with(&format!("c -> a: {}:2: super::a::A", shown(&src.join("c.rs")))), "{}", found[0]);

    let mut crates: Vec<(String, Vec<PathBuf>)> = Vec::new();
    for (name, file) in crate_sources() {
        match crates.last_mut() {
            Some((last, files)) if *last == name => files.push(file),
            _ => crates.push((name, vec![file])),
        }
    }
    assert!(crates.len() >= 10, "{crates:?}");
    let mut cycles = Vec::new();
    for (name, files) in &crates {
        let src = workspace().join("crates").join(name).join("src");
        cycles.extend(import_cycles(&src, files).into_iter().map(|c| format!("{name}: {c}")));
    }
    assert!(
        cycles.is_empty(),
        "modules that import themselves through others: move what both need to the module that owns it, or to \
         a small module of its own:\n{}",
        cycles.join("\n")
    );
}
