//! The documentation's examples, run, so that they cannot drift from the tools.
//!
//! In README.md and docs/*.md (docs/diagnostics.md is generated from the registry,
//! whose own tests check each example and fix):
//!
//! - A ` ```jadpo ` block must check with no error, and no warning but `*.unused`
//!   (a snippet's declarations are seldom all used). It is checked together with
//!   the page's earlier blocks: a declaration replaces the earlier one of the same
//!   kind and name, so a page can build a program step by step. A block whose first
//!   line is `// NAME.jadpo` is that file of the page's program (others are
//!   `main.jadpo`). ` ```jadpo,warning ` must raise a warning, ` ```jadpo,error `
//!   an error (it does not join the program), and ` ```jadpo,fragment ` (entries
//!   that are no declaration) is not checked.
//! - A ` ```console ` or ` ```text ` block whose first line starts with `$ ` is a
//!   transcript: each command is run, in a folder holding the page's program and
//!   copies of `examples/` and `tests/check/`, and its standard output must be the
//!   lines that follow it, a line `...` standing for any number of lines.
//! - In a ` ```sh ` block, every `jadpoc` command of a subcommand that finishes on
//!   its own with no server ([`RUN_IN_SH`]; not `jadpoc run`) is run in the same
//!   kind of folder and must succeed. ` ```sh,no-run ` blocks are not run.

use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The subcommands of a ` ```sh ` block that are run: those that finish on their
/// own and need no server. (`run` runs until stopped; others are shown, not run.)
const RUN_IN_SH: [&str; 10] =
    ["check", "plan", "test", "emit", "deliveries", "events", "status", "breakers", "explain", "prune"];

/// How long one documented command may take (generous: the machine may be busy).
const COMMAND_DEADLINE: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fenced block of a page.
struct Block {
    info: String,
    /// The line of its first content line, for messages.
    line: usize,
    text: String,
}

fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut lines = page.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let Some(info) = line.strip_prefix("```") else { continue };
        let mut text = String::new();
        for (_, l) in lines.by_ref() {
            if l.starts_with("```") {
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        out.push(Block { info: info.trim().to_string(), line: i + 2, text });
    }
    out
}

/// The pages whose examples are run.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md") && !p.ends_with("diagnostics.md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// A page's program: its files' texts, and where each declaration is.
#[derive(Clone, Default)]
struct Program {
    files: Vec<(String, String)>,
    /// (kind, name) -> (file, text).
    decls: Vec<((String, String), String, String)>,
}

impl Program {
    fn file_mut(&mut self, name: &str) -> &mut String {
        match self.files.iter().position(|(f, _)| f == name) {
            Some(i) => &mut self.files[i].1,
            None => {
                self.files.push((name.to_string(), String::new()));
                &mut self.files.last_mut().expect("just pushed").1
            }
        }
    }

    /// Adds a block as a reader would: a new file is the block as written; in a
    /// file already there, a declaration takes the place of the one of the same
    /// kind and name, and a new one is added at the end. Returns where the block's
    /// declarations are (file, byte range).
    fn add(&mut self, block: &Block) -> Vec<(String, std::ops::Range<usize>)> {
        let file = file_of(block);
        let parsed = jadpo_syntax::parse(&block.text);
        let new_file = !self.files.iter().any(|(f, _)| *f == file);
        if new_file {
            self.file_mut(&file).push_str(&block.text);
        }
        let mut texts = Vec::new();
        for d in &parsed.file.decls {
            let key = (d.kind.keyword().to_string(), d.name.text.to_string());
            let text = block.text[d.span.start as usize..d.span.end as usize].to_string();
            if let Some(i) = self.decls.iter().position(|(k, _, _)| *k == key) {
                let (_, old_file, old_text) = self.decls.remove(i);
                let old_in = self.file_mut(&old_file);
                *old_in = old_in.replacen(&old_text, if old_file == file { &text } else { "" }, 1);
                if old_file != file && !new_file {
                    self.file_mut(&file).push_str(&format!("\n{text}\n"));
                }
            } else if !new_file {
                self.file_mut(&file).push_str(&format!("\n{text}\n"));
            }
            self.decls.push((key, file.clone(), text.clone()));
            texts.push(text);
        }
        let body = self.file_mut(&file).clone();
        texts.iter().filter_map(|t| body.find(t.as_str()).map(|at| (file.clone(), at..at + t.len()))).collect()
    }
}

/// Where a page's commands run: its program's files and copies of the examples and
/// the corpus, as in a clone of the repository.
struct Workspace {
    _dir: tempfile::TempDir,
    path: PathBuf,
    /// The file names of the page's program written so far.
    written: Vec<String>,
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy");
        }
    }
}

impl Workspace {
    /// A folder for a page's commands: the page's named files, or, for a page
    /// that names none, copies of `examples/` and `tests/check/` as in a clone of
    /// the repository (never both, so that `jadpoc test .` runs the page's tests
    /// alone).
    fn new(named_files: bool) -> Workspace {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_path_buf();
        if !named_files {
            copy_dir(&root().join("examples"), &path.join("examples"));
            copy_dir(&root().join("tests/check"), &path.join("tests/check"));
        }
        Workspace { _dir: dir, path, written: Vec::new() }
    }

    /// Writes the program's files (the named ones, unless `all`).
    fn write(&mut self, program: &Program, all: bool) {
        for f in self.written.drain(..) {
            let _ = std::fs::remove_file(self.path.join(f));
        }
        for (f, text) in &program.files {
            if all || f != MAIN {
                std::fs::write(self.path.join(f), text).expect("write program");
                self.written.push(f.clone());
            }
        }
    }

    fn sh(&self, command: &str) -> Output {
        let bin = Path::new(env!("CARGO_BIN_EXE_jadpoc")).parent().expect("bin dir").to_path_buf();
        let path = std::env::join_paths(
            std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
        )
        .expect("PATH");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(&self.path)
            .env("PATH", path)
            .env("NO_COLOR", "1")
            .env_remove("JADPO_DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh runs");
        // The output is read on threads so that a full pipe never stalls the child.
        let mut stdout = child.stdout.take().expect("stdout");
        let mut stderr = child.stderr.take().expect("stderr");
        let out = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = stdout.read_to_end(&mut v);
            v
        });
        let err = std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = stderr.read_to_end(&mut v);
            v
        });
        let deadline = Instant::now() + COMMAND_DEADLINE;
        let status = loop {
            match child.try_wait().expect("wait") {
                Some(status) => break status,
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                None => {
                    let _ = child.kill();
                    panic!("`{command}` did not finish within {COMMAND_DEADLINE:?}");
                }
            }
        };
        Output { status, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() }
    }
}

/// Whether `actual` is `expected`, where an `expected` line `...` stands for any
/// number of lines. Trailing spaces are not compared.
fn matches(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "..." => (0..=actual.len()).any(|skip| matches(rest, &actual[skip..])),
        Some((e, rest)) => {
            actual.split_first().is_some_and(|(a, more)| a.trim_end() == e.trim_end() && matches(rest, more))
        }
    }
}

/// The file of a page's unnamed blocks, which the page's commands do not see.
const MAIN: &str = ".main.jadpo";

/// The file a block belongs to: `NAME.jadpo` when its first line is
/// `// NAME.jadpo` (more words may follow), else [`MAIN`].
fn file_of(block: &Block) -> String {
    block
        .text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("// "))
        .and_then(|l| l.split_whitespace().next())
        .map(|w| w.trim_end_matches([',', ':']))
        .filter(|w| w.ends_with(".jadpo"))
        .map_or_else(|| MAIN.to_string(), str::to_string)
}

/// The diagnostics of `jadpoc check --format json` on the workspace's program
/// that fall in `ranges`.
fn diagnostics_in(ws: &Workspace, ranges: &[(String, std::ops::Range<usize>)]) -> Vec<Value> {
    let out = ws.sh(&format!("jadpoc check --format json {}", ws.written.join(" ")));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("check's json");
    doc["diagnostics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|d| {
            let offset = d["start"]["offset"].as_u64().unwrap_or(0) as usize;
            ranges.iter().any(|(f, r)| d["file"] == f.as_str() && r.contains(&offset))
        })
        .collect()
}

/// A block alone (one with no declaration, such as comments): its diagnostics.
fn diagnostics_alone(block: &Block) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("block.jadpo");
    std::fs::write(&file, &block.text).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_jadpoc"))
        .args(["check", "--format", "json"])
        .arg(&file)
        .output()
        .expect("jadpoc runs");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("check's json");
    doc["diagnostics"].as_array().cloned().unwrap_or_default()
}

fn describe(diagnostics: &[Value]) -> String {
    diagnostics.iter().map(|d| format!("  {} {}: {}\n", d["code"], d["start"]["line"], d["message"])).collect()
}

/// Every `jadpoc` command of a ` ```sh ` block, with its continuation lines
/// joined and its trailing comment removed.
fn sh_commands(text: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = without_comment(line);
        match line.trim_end().strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(&line);
                let command = std::mem::take(&mut current).trim().to_string();
                let sub = command.strip_prefix("jadpoc ").and_then(|rest| rest.split_whitespace().next());
                if sub.is_some_and(|sub| RUN_IN_SH.contains(&sub)) {
                    commands.push(command.replace("path/to/jadpo/", ""));
                }
            }
        }
    }
    commands
}

/// A shell line without its `# comment` (a `#` outside quotes, after a space).
fn without_comment(line: &str) -> String {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => return line[..i].to_string(),
            _ => {}
        }
        prev = c;
    }
    line.to_string()
}

#[test]
fn the_documentations_examples_are_true() {
    let mut failures = Vec::new();
    let (mut programs, mut transcripts, mut commands) = (0, 0, 0);
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read page");
        let name = page.strip_prefix(root()).unwrap_or(&page).display().to_string();
        let mut program = Program::default();
        let all = blocks(&text);
        let named = all.iter().any(|b| b.info.starts_with("jadpo") && file_of(b) != MAIN);
        let mut ws = Workspace::new(named);
        for block in all {
            let at = format!("{name}:{}", block.line);
            let mut info = block.info.split(',');
            let lang = info.next().unwrap_or_default();
            let attrs: Vec<&str> = info.collect();
            if lang == "jadpo" {
                if attrs.contains(&"fragment") {
                    continue;
                }
                programs += 1;
                let error_example = attrs.contains(&"error");
                let mut scratch = program.clone();
                let target = if error_example { &mut scratch } else { &mut program };
                let ranges = target.add(&block);
                let found = if ranges.is_empty() {
                    diagnostics_alone(&block)
                } else {
                    ws.write(target, true);
                    diagnostics_in(&ws, &ranges)
                };
                let errors: Vec<Value> = found.iter().filter(|d| d["severity"] == "error").cloned().collect();
                let warnings: Vec<Value> = found
                    .iter()
                    .filter(|d| {
                        d["severity"] == "warning" && !d["code"].as_str().is_some_and(|c| c.ends_with(".unused"))
                    })
                    .cloned()
                    .collect();
                if error_example {
                    if errors.is_empty() {
                        failures.push(format!("{at}: marked `error`, but checks with no error"));
                    }
                } else if !errors.is_empty() {
                    failures.push(format!("{at}: the example has errors:\n{}", describe(&errors)));
                } else if attrs.contains(&"warning") == warnings.is_empty() {
                    failures.push(format!(
                        "{at}: {} warnings:\n{}",
                        if warnings.is_empty() {
                            "marked `warning`, but raises no"
                        } else {
                            "not marked `warning`, but raises"
                        },
                        describe(&warnings)
                    ));
                }
            } else if (lang == "console" || lang == "text") && block.text.starts_with("$ ") {
                ws.write(&program, false);
                let mut lines = block.text.lines().peekable();
                while let Some(line) = lines.next() {
                    let Some(command) = line.strip_prefix("$ ") else { continue };
                    transcripts += 1;
                    let mut expected = Vec::new();
                    while let Some(l) = lines.next_if(|l| !l.starts_with("$ ")) {
                        expected.push(l);
                    }
                    let out = ws.sh(command);
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    let actual: Vec<&str> = stdout.lines().collect();
                    if !matches(&expected, &actual) {
                        failures.push(format!(
                            "{at}: `{command}` printed\n{stdout}\nwhere the page shows\n{}\n(stderr: {})",
                            expected.join("\n"),
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                }
            } else if lang == "sh" && !attrs.contains(&"no-run") {
                ws.write(&program, false);
                for command in sh_commands(&block.text) {
                    commands += 1;
                    let out = ws.sh(&command);
                    // An operator's retry depends on the run the page describes; it
                    // must at least be understood.
                    let ok = if command.starts_with("jadpoc deliveries retry") {
                        out.status.code() != Some(2)
                    } else {
                        out.status.success()
                    };
                    if !ok {
                        failures.push(format!(
                            "{at}: `{command}` exited {}: {}",
                            out.status,
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The pages do have examples of each kind: a parser that found none would pass.
    assert!(programs >= 10 && transcripts >= 5 && commands >= 10, "{programs} {transcripts} {commands}");
}

#[test]
fn the_license_files_match_the_manifest() {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    assert!(manifest.contains("license = \"MIT OR Apache-2.0\""));
    let mit = std::fs::read_to_string(root().join("LICENSE-MIT")).expect("LICENSE-MIT");
    assert!(mit.contains("Permission is hereby granted, free of charge"), "{mit}");
    let apache = std::fs::read_to_string(root().join("LICENSE-APACHE")).expect("LICENSE-APACHE");
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    assert!(apache.contains("END OF TERMS AND CONDITIONS"));
}

#[test]
fn the_transcript_matcher_takes_ellipses_for_any_lines() {
    assert!(matches(&["a", "...", "d"], &["a", "b", "c", "d"]));
    assert!(matches(&["a", "...", "b"], &["a", "b"]));
    assert!(!matches(&["a", "...", "d"], &["a", "b", "c"]));
    assert!(!matches(&["a"], &["a", "b"]));
    assert_eq!(
        sh_commands("jadpoc emit x E \\\n    '{\"a\": \"#1\"}'   # a comment\njadpoc run x\ncargo build"),
        ["jadpoc emit x E     '{\"a\": \"#1\"}'"]
    );
}

/// Paths named in the examples' comments and in the pages' links, each of which
/// must exist (relative to the repository, or to the file naming it).
#[test]
fn the_files_the_docs_and_examples_name_exist() {
    let mut missing = Vec::new();
    let mut named = 0;
    let mut sources: Vec<PathBuf> = std::fs::read_dir(root().join("examples"))
        .expect("examples/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    sources.extend(pages());
    for source in sources {
        let text = std::fs::read_to_string(&source).expect("read");
        let is_page = source.extension().is_some_and(|e| e == "md");
        let words: Vec<&str> = if is_page {
            // Markdown links: `](path)`.
            text.split("](").skip(1).filter_map(|rest| rest.split(')').next()).collect()
        } else {
            text.lines()
                .filter_map(|l| l.trim_start().strip_prefix("//"))
                .flat_map(|c| c.split(|ch: char| ch.is_whitespace() || "()`,;\"'".contains(ch)))
                .collect()
        };
        for word in words {
            let word = word.trim_end_matches([':', '.']).split('#').next().unwrap_or_default();
            let is_path =
                ["md", "jadpo", "rs"].iter().any(|ext| word.ends_with(&format!(".{ext}"))) && !word.contains("://");
            if !is_path {
                continue;
            }
            named += 1;
            let here = source.parent().expect("parent").join(word);
            if !root().join(word).exists() && !here.exists() {
                missing.push(format!("{}: `{word}`", source.display()));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    assert!(named >= 5, "{named}");
}
