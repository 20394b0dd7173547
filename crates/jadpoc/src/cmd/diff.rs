//! `jadpoc diff OLD NEW`: what a new program does to what the old one left in a
//! store (deliveries in flight, stored events, receivers), as findings with
//! stable codes, for people, programs and CI. `--against git:REF` reads the old
//! program from a git revision of the new one's files.

use crate::args::ReportFormat;
use crate::load::{LoadError, find_files, read_sources};
use crate::render;
use crate::store::{DbArg, open_views};
use jadpo_check::diff::Subject;
use jadpo_check::diff::{DiffCategory, DiffCode, DiffSeverity, Finding, Place, Side, diff};
use jadpo_check::program::DeliveryState;
use jadpo_check::{Lower, SourceFile, check, plural};
use jadpo_core::store::{StoreError, Views};
use jadpo_core::version::{BacklogRow, window_cut_ms};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DiffArgs {
    /// OLD and NEW, each a file or a folder (searched recursively for `*.jadpo`);
    /// with `--against`, the new program's files and folders alone.
    #[arg(value_name = "PATHS")]
    paths: Vec<PathBuf>,
    /// Read the old program from a git revision: `git:REF` (such as `git:HEAD~1`
    /// or `git:origin/main`), the `*.jadpo` files of the new program's paths as
    /// they were at REF.
    #[arg(long, value_name = "git:REF")]
    against: Option<String>,
    /// `text` for people (or `human`), `json` for programs, `sarif` for code scanning.
    #[arg(long, value_enum, default_value_t = ReportFormat::Text)]
    format: ReportFormat,
    /// Read what a store holds for each finding (deliveries in flight by state,
    /// the oldest's age, those past a tightened budget), read only; with one
    /// path, OLD is the program the store ran last.
    #[command(flatten)]
    db: DbArg,
}

pub fn run(args: DiffArgs) -> ExitCode {
    // With `--db`, the store is opened read only; never migrated.
    let store = match args.db.db.is_some().then(|| open_views(&args.db)).transpose() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let pair = match (&store, args.paths.len(), &args.against) {
        (Some(store), 1, None) => stored_sources(&**store).and_then(|old| {
            let new = read_sources(&find_files(&args.paths)?)?;
            Ok((old, new))
        }),
        _ => sources(&args),
    };
    let (old, new) = match pair {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("jadpoc: {e}");
            return ExitCode::from(2);
        }
    };
    let old_checked = check(&old, Lower::Yes);
    let new_checked = check(&new, Lower::Yes);
    let mut refused = false;
    for (files, checked) in [(&old, &old_checked), (&new, &new_checked)] {
        if checked.program.is_none() {
            refused = true;
            eprint!("{}", render::human(files, checked, render::use_color(&std::io::stderr())));
        }
    }
    if refused {
        eprintln!("jadpoc: a program with errors cannot be compared");
        return ExitCode::from(2);
    }
    let findings = diff(Side { files: &old, checked: &old_checked }, Side { files: &new, checked: &new_checked });
    // One line a finding, or none: what the store holds for each finding's subject.
    let extra = match &store {
        Some(store) => match in_store(&**store, &findings, crate::store::clock_for(&**store).now_ms()) {
            Ok(lines) => Some(lines),
            Err(e) => {
                eprintln!("jadpoc: {e}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let extra = extra.as_deref();
    let out = match args.format {
        ReportFormat::Text => text(&old, &new, &findings, extra, render::use_color(&std::io::stdout())),
        ReportFormat::Json => json_report(&findings, extra).to_string() + "\n",
        ReportFormat::Sarif => sarif(&old, &new, &findings, extra).to_string() + "\n",
    };
    crate::print_stdout(&out);
    if findings.iter().any(|f| f.code.is_breaking()) { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// What `jadpoc run` does before it starts: when the store ran another version
/// last, compare the program with it; refuse (exit 1) on a breaking finding
/// that `accept` (codes) does not name, printing the findings with what the
/// store holds for each (an accepted start prints them without: the counts
/// read every delivery in flight). Returns the codes accepted, which the
/// version keeps.
pub fn check_before_run(
    store: &dyn Views,
    new: &crate::load::Loaded,
    accept: &[String],
    now_ms: i64,
) -> Result<Vec<String>, ExitCode> {
    let mut accepted_codes = Vec::new();
    for code in accept {
        match DiffCode::parse(code) {
            Some(c) => accepted_codes.push(c),
            None => {
                eprintln!("jadpoc: `--accept {code}` names no finding of `jadpoc diff` (`jadpoc explain` lists them)");
                return Err(ExitCode::from(2));
            }
        }
    }
    let fail = |e: StoreError| {
        eprintln!("jadpoc: {e}");
        ExitCode::from(2)
    };
    let Some(last) = store.latest_version().map_err(fail)? else { return Ok(Vec::new()) };
    let version = new.version();
    if last.hash == version.hash {
        return Ok(Vec::new());
    }
    let old: Vec<SourceFile> = last.sources.into_iter().map(|s| SourceFile { name: s.path, text: s.text }).collect();
    let old_checked = check(&old, Lower::Yes);
    if old_checked.program.is_none() {
        eprintln!(
            "jadpoc: the program the store ran last (version {}) no longer checks; it is not compared",
            jadpo_core::version::short(&last.hash)
        );
        return Ok(Vec::new());
    }
    let findings =
        diff(Side { files: &old, checked: &old_checked }, Side { files: &new.sources, checked: &new.checked });
    if findings.is_empty() {
        return Ok(Vec::new());
    }
    let refused: Vec<&Finding> =
        findings.iter().filter(|f| f.code.is_breaking() && !accepted_codes.contains(&f.code)).collect();
    // What the store holds is counted for a refusal, which the operator reads
    // before accepting; an accepted start does not wait for the counts.
    let lines = if refused.is_empty() { None } else { Some(in_store(store, &findings, now_ms).map_err(fail)?) };
    let color = render::use_color(&std::io::stderr());
    eprint!("{}", text(&old, &new.sources, &findings, lines.as_deref(), color));
    let last = jadpo_core::version::short(&last.hash).to_string();
    if !refused.is_empty() {
        let mut codes: Vec<&str> = refused.iter().map(|f| f.code.as_str()).collect();
        codes.dedup();
        eprintln!(
            "jadpoc: refusing to start: {} against version {last}, which the store ran last; \
             accept them with `--accept {}` once you have read them",
            plural(refused.len() as u64, "breaking finding"),
            codes.join(",")
        );
        return Err(ExitCode::from(1));
    }
    let mut kept: Vec<String> =
        findings.iter().filter(|f| f.code.is_breaking()).map(|f| f.code.as_str().to_string()).collect();
    kept.dedup();
    eprintln!("jadpoc: starting over version {last}, which the store ran last ({})", summary(&findings));
    Ok(kept)
}

/// The files of the program a store ran last (`jadpoc run` and `jadpoc emit`
/// keep each version's).
fn stored_sources(store: &dyn Views) -> Result<Vec<SourceFile>, LoadError> {
    match store.latest_version() {
        Ok(Some(v)) => Ok(v.sources.into_iter().map(|s| SourceFile { name: s.path, text: s.text }).collect()),
        Ok(None) => Err(LoadError(
            "the store keeps no program version yet (`jadpoc run` and `jadpoc emit` keep one): give OLD and NEW"
                .to_string(),
        )),
        Err(e) => Err(LoadError(e.to_string())),
    }
}

/// What `store` holds for each finding's subject, one line each (none when it
/// holds nothing for it): deliveries not ended by state with the oldest's age,
/// and for a tightened budget those a claim would give up.
pub fn in_store(store: &dyn Views, findings: &[Finding], now_ms: i64) -> Result<Vec<Option<String>>, StoreError> {
    let backlog = store.backlog()?;
    let line = |rows: Vec<&BacklogRow>, whose: String| -> Option<String> {
        let total: u64 = rows.iter().map(|r| r.count).sum();
        if total == 0 {
            return None;
        }
        let mut by_state: Vec<(DeliveryState, u64)> = Vec::new();
        for r in &rows {
            match by_state.iter_mut().find(|(s, _)| *s == r.state) {
                Some((_, n)) => *n += r.count,
                None => by_state.push((r.state, r.count)),
            }
        }
        let states: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {}", s.as_str())).collect();
        let oldest = rows.iter().map(|r| r.oldest_created_ms).min().unwrap_or(now_ms);
        let age = jadpo_check::format_duration(u64::try_from(now_ms.saturating_sub(oldest).max(0)).unwrap_or(0));
        Some(format!(
            "in the store: {} of {whose} not ended ({}); the oldest is {age} old",
            plural(total, "delivery"),
            states.join(", ")
        ))
    };
    let of = |names: &[&str]| backlog.iter().filter(|r| names.contains(&r.subscriber.as_str())).collect::<Vec<_>>();
    let quoted = |names: &[&str]| names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    findings
        .iter()
        .map(|f| {
            Ok(match &f.subject {
                Subject::Subscriber { name } => line(of(&[name]), format!("`{name}`")),
                Subject::Connection { name } => {
                    line(backlog.iter().filter(|r| r.connection == *name).collect(), format!("connection `{name}`"))
                }
                Subject::Field { readers, .. }
                | Subject::Action { subscribers: readers, .. }
                | Subject::Event { subscribers: readers, .. } => {
                    let names: Vec<&str> = readers.iter().map(String::as_str).collect();
                    line(of(&names), quoted(&names))
                }
                Subject::Budget { subscriber, attempts, within_ms } => {
                    let past = store.past_budget(subscriber, *attempts, window_cut_ms(now_ms, *within_ms))?;
                    let budget = format!("attempts: {attempts}  within: {}", jadpo_check::format_duration(*within_ms));
                    let waiting = line(of(&[subscriber]), format!("`{subscriber}`"));
                    match (past, waiting) {
                        (0, w) => w,
                        (n, w) => Some(format!(
                            "{}{} of `{subscriber}` waiting to run {} past `{budget}` and would give up at their \
                             next claim",
                            w.map(|w| format!("{w}; ")).unwrap_or_default(),
                            plural(n, "delivery"),
                            if n == 1 { "is" } else { "are" }
                        )),
                    }
                }
            })
        })
        .collect()
}

/// The old and the new program's files.
fn sources(args: &DiffArgs) -> Result<(Vec<SourceFile>, Vec<SourceFile>), LoadError> {
    match &args.against {
        Some(against) => {
            let Some(rev) = against.strip_prefix("git:").filter(|r| !r.is_empty()) else {
                return Err(LoadError(format!("`--against` takes `git:REF`, such as `git:HEAD~1`, found `{against}`")));
            };
            let new = read_sources(&find_files(&args.paths)?)?;
            let old = git_sources(Path::new("."), rev, &args.paths)?;
            Ok((old, new))
        }
        None => match args.paths.as_slice() {
            [old, new] => {
                let old = read_sources(&find_files(std::slice::from_ref(old))?)?;
                let new = read_sources(&find_files(std::slice::from_ref(new))?)?;
                Ok((old, new))
            }
            _ => Err(LoadError(format!(
                "`jadpoc diff` takes OLD and NEW, found {}; or `--against git:REF` with the new program's paths",
                plural(args.paths.len() as u64, "path")
            ))),
        },
    }
}

/// Runs `git` in `dir` and returns its output, or why it failed.
fn git(dir: &Path, args: &[&str]) -> Result<Vec<u8>, LoadError> {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .map_err(|e| LoadError(format!("cannot run `git`: {e}")))?;
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Err(LoadError(format!("`git {}` failed: {why}", args.join(" "))));
    }
    Ok(out.stdout)
}

/// The `*.jadpo` files under `paths` (relative to `dir`; `dir` itself when none
/// is given) as they were at `rev`, named `REV:PATH`, sorted by path, searched
/// as folders are on disk (hidden folders, `target` and `node_modules` skipped).
pub fn git_sources(dir: &Path, rev: &str, paths: &[PathBuf]) -> Result<Vec<SourceFile>, LoadError> {
    let default = [PathBuf::from(".")];
    let paths = if paths.is_empty() { &default[..] } else { paths };
    let mut names: Vec<String> = Vec::new();
    for path in paths {
        let spec = path.to_string_lossy().into_owned();
        let listed = git(dir, &["ls-tree", "-r", "-z", "--name-only", rev, "--", &spec])?;
        let before = names.len();
        for name in listed.split(|&b| b == 0).filter(|n| !n.is_empty()) {
            let name = String::from_utf8_lossy(name).into_owned();
            let skipped = Path::new(&name).parent().is_some_and(|dir| {
                dir.components().any(|c| {
                    let c = c.as_os_str().to_string_lossy();
                    c.starts_with('.') && c != "." && c != ".." || c == "target" || c == "node_modules"
                })
            });
            if name.ends_with(".jadpo") && !skipped {
                names.push(name);
            }
        }
        if names.len() == before {
            return Err(LoadError(format!("no `.jadpo` files in `{spec}` at `{rev}`")));
        }
    }
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|name| {
            let bytes = git(dir, &["show", &format!("{rev}:./{name}")])?;
            let what = format!("`{rev}:{name}`");
            let text = crate::load::read_text(bytes.as_slice(), Some(bytes.len() as u64), &what)?;
            Ok(SourceFile { name: format!("{rev}:{name}"), text })
        })
        .collect()
}

/// `2 breaking, 1 warning`.
fn summary(findings: &[Finding]) -> String {
    let breaking = findings.iter().filter(|f| f.code.is_breaking()).count();
    format!("{} breaking, {}", breaking, plural((findings.len() - breaking) as u64, "warning"))
}

/// The text for people: each finding drawn on the new program's source (or the
/// old one's, for what is gone), grouped by category, then the summary line.
/// `extra`, when given, holds one more line for each finding.
pub fn text(
    old: &[SourceFile],
    new: &[SourceFile],
    findings: &[Finding],
    extra: Option<&[Option<String>]>,
    color: bool,
) -> String {
    let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
    let mut out = String::new();
    for category in DiffCategory::ALL {
        let group: Vec<(usize, &Finding)> =
            findings.iter().enumerate().filter(|(_, f)| f.code.category() == category).collect();
        if group.is_empty() {
            continue;
        }
        out.push_str(&format!("── {} ──\n\n", category.as_str()));
        for (i, f) in group {
            let line = extra.and_then(|e| e.get(i)).and_then(|l| l.as_deref());
            out.push_str(&one(&handler, old, new, f, line));
            out.push('\n');
        }
    }
    out.push_str(&summary(findings));
    out.push('\n');
    out
}

fn one(
    handler: &GraphicalReportHandler,
    old: &[SourceFile],
    new: &[SourceFile],
    f: &Finding,
    extra: Option<&str>,
) -> String {
    let (files, at, label) = match (&f.new_at, &f.old_at) {
        (Some(at), _) => (new, Some(at), "now"),
        (None, Some(at)) => (old, Some(at), "in the old program"),
        (None, None) => (new, None, ""),
    };
    let mut notes: Vec<String> = Vec::new();
    if let Some(h) = &f.help {
        notes.push(h.clone());
    }
    if let (Some(_), Some(was)) = (&f.new_at, &f.old_at) {
        notes.push(format!("in the old program: {}:{}:{}", was.path, was.line, was.column));
    }
    if let Some(line) = extra {
        notes.push(line.to_string());
    }
    let severity = match f.code.severity() {
        DiffSeverity::Breaking => miette::Severity::Error,
        DiffSeverity::Warning => miette::Severity::Warning,
    };
    let mut diag = MietteDiagnostic::new(f.message.clone()).with_code(f.code.as_str()).with_severity(severity);
    if !notes.is_empty() {
        diag = diag.with_help(notes.join("\n"));
    }
    let file = at.and_then(|at| files.get(at.file).map(|file| (at, file)));
    let mut s = String::new();
    let drawn = match file {
        Some((at, file)) => {
            let span = at.start as usize..at.end as usize;
            let diag = diag.with_labels(vec![LabeledSpan::new_primary_with_span(Some(label.to_string()), span)]);
            let report = miette::Report::new(diag).with_source_code(NamedSource::new(&file.name, file.text.clone()));
            handler.render_report(&mut s, report.as_ref()).is_ok()
        }
        None => handler.render_report(&mut s, &diag).is_ok(),
    };
    if !drawn {
        s = format!("{} [{}]\n", f.message, f.code);
    }
    s
}

fn place_json(at: &Option<Place>) -> Value {
    serde_json::to_value(at).unwrap_or(Value::Null)
}

/// The JSON document: every finding with its code's category and severity, and
/// the counts.
pub fn json_report(findings: &[Finding], extra: Option<&[Option<String>]>) -> Value {
    let list: Vec<Value> = findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut v = json!({
                "code": f.code.as_str(),
                "category": f.code.category().as_str(),
                "severity": f.code.severity().as_str(),
                "message": f.message,
                "old_at": place_json(&f.old_at),
                "new_at": place_json(&f.new_at),
                "subject": serde_json::to_value(&f.subject).unwrap_or(Value::Null),
                "help": f.help,
            });
            if let Some(line) = extra.and_then(|e| e.get(i)).and_then(|l| l.as_deref()) {
                v["extra"] = json!(line);
            }
            v
        })
        .collect();
    let breaking = findings.iter().filter(|f| f.code.is_breaking()).count();
    json!({
        "findings": list,
        "breaking": breaking,
        "warnings": findings.len() - breaking,
    })
}

/// A code's help for SARIF: its documentation's first paragraph and what to do.
fn rule_help(code: DiffCode) -> String {
    let doc = code.doc();
    let first = doc.split("\n### ").next().unwrap_or(doc).trim();
    let todo = doc.split("### What to do").nth(1).unwrap_or("").trim();
    format!("{first}\n\n{todo}\n\n`jadpoc explain {code}` says more.")
}

/// SARIF 2.1.0: one run, a rule for each code its results use; each result is
/// placed in the new program, or in the old one for what is gone.
pub fn sarif(old: &[SourceFile], new: &[SourceFile], findings: &[Finding], extra: Option<&[Option<String>]>) -> Value {
    let level = |c: DiffCode| match c.severity() {
        DiffSeverity::Breaking => "error",
        DiffSeverity::Warning => "warning",
    };
    let used: Vec<DiffCode> = DiffCode::ALL.iter().copied().filter(|c| findings.iter().any(|f| f.code == *c)).collect();
    let rules: Vec<Value> = used
        .iter()
        .map(|&c| {
            let mut rule = render::sarif_rule(c.as_str(), c.summary(), &rule_help(c), level(c));
            rule["properties"] = json!({"category": c.category().as_str(), "severity": c.severity().as_str()});
            rule
        })
        .collect();
    let location = |files: &[SourceFile], at: &Place| {
        let end = files
            .get(at.file)
            .map(|f| jadpo_check::LineIndex::new(&f.text).position(at.end))
            .map_or((at.line, at.column), |p| (p.line, p.column));
        json!({"physicalLocation": {
            "artifactLocation": {"uri": at.path},
            "region": {"startLine": at.line, "startColumn": at.column, "endLine": end.0, "endColumn": end.1,
                       "byteOffset": at.start, "byteLength": at.end - at.start},
        }})
    };
    let results: Vec<Value> = findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut text = f.message.clone();
            if let Some(h) = &f.help {
                text.push_str(&format!("\nhelp: {h}"));
            }
            if let Some(line) = extra.and_then(|e| e.get(i)).and_then(|l| l.as_deref()) {
                text.push_str(&format!("\n{line}"));
            }
            let (locations, related) = match (&f.new_at, &f.old_at) {
                (Some(n), Some(o)) => {
                    let mut was = location(old, o);
                    was["id"] = json!(0);
                    was["message"] = json!({"text": "in the old program"});
                    (vec![location(new, n)], vec![was])
                }
                (Some(n), None) => (vec![location(new, n)], Vec::new()),
                (None, Some(o)) => (vec![location(old, o)], Vec::new()),
                (None, None) => (Vec::new(), Vec::new()),
            };
            json!({
                "ruleId": f.code.as_str(),
                "ruleIndex": used.iter().position(|c| *c == f.code),
                "level": level(f.code),
                "message": {"text": text},
                "locations": locations,
                "relatedLocations": related,
                "properties": {"subject": serde_json::to_value(&f.subject).unwrap_or(Value::Null)},
            })
        })
        .collect();
    let artifacts: Vec<Value> = new.iter().chain(old).map(|f| json!({"location": {"uri": f.name}})).collect();
    render::sarif_log(rules, artifacts, results)
}
