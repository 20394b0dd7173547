//! Rendering diagnostics: miette's graphical reports for people, JSON for editors,
//! SARIF for CI code scanning.

use crate::args::plural;
use jadpo_check::{Checked, Code, Diagnostic, LineIndex, Severity, SourceFile};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteDiagnostic, NamedSource};
use serde_json::{Value, json};
use std::io::IsTerminal;

/// Colour only on a terminal, and never when `NO_COLOR` is set.
pub fn use_color(stream: &impl IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Every diagnostic as miette draws it, then the summary line.
pub fn human(files: &[SourceFile], checked: &Checked, color: bool) -> String {
    let theme = if color { GraphicalTheme::unicode() } else { GraphicalTheme::unicode_nocolor() };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
    let mut out = String::new();
    for d in &checked.diagnostics {
        render_one(&handler, files, d, &mut out);
    }
    out.push_str(&summary(checked, files.len()));
    out.push('\n');
    out
}

fn render_one(handler: &GraphicalReportHandler, files: &[SourceFile], d: &Diagnostic, out: &mut String) {
    let file = &files[d.file];
    let mut labels = vec![LabeledSpan::new_primary_with_span(None, d.span.range())];
    let mut notes = Vec::new();
    for l in &d.labels {
        if l.file == d.file {
            labels.push(LabeledSpan::new_with_span(Some(l.message.clone()), l.span.range()));
        } else {
            // miette draws one file per report; a label elsewhere becomes a note.
            let at = LineIndex::new(&files[l.file].text).position(l.span.start);
            notes.push(format!("{}: {}:{}:{}", l.message, files[l.file].name, at.line, at.column));
        }
    }
    let help = match (&d.help, notes.is_empty()) {
        (Some(h), true) => Some(h.clone()),
        (Some(h), false) => Some(format!("{h}\n{}", notes.join("\n"))),
        (None, false) => Some(notes.join("\n")),
        (None, true) => None,
    };
    let mut diag = MietteDiagnostic::new(d.message.clone())
        .with_code(d.code.as_str())
        .with_severity(match d.severity() {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
        .with_labels(labels);
    if let Some(h) = help {
        diag = diag.with_help(h);
    }
    let report = miette::Report::new(diag).with_source_code(NamedSource::new(&file.name, file.text.clone()));
    let mut s = String::new();
    if handler.render_report(&mut s, report.as_ref()).is_err() {
        s = format!("{}: {} [{}]\n", file.name, d.message, d.code);
    }
    out.push_str(&s);
    out.push('\n');
}

/// `N errors, M warnings in K files`.
pub fn summary(checked: &Checked, files: usize) -> String {
    format!(
        "{}, {} in {}",
        plural(checked.errors() as u64, "error"),
        plural(checked.warnings() as u64, "warning"),
        plural(files as u64, "file")
    )
}

/// The JSON document of language.md (its types are the checker's, shared with the
/// playground).
pub fn json(files: &[SourceFile], checked: &Checked) -> Value {
    serde_json::to_value(jadpo_check::report::check_report(files, checked)).unwrap_or_default()
}

/// A code's help for SARIF: its documentation's prose, without the examples
/// (`jadpoc explain` prints those), so that a report stays small.
fn rule_help(code: Code) -> String {
    let doc = code.doc();
    let prose = doc.split("\n### ").next().unwrap_or(doc).trim();
    format!("{prose}\n\n`jadpoc explain {code}` shows an example and its fix.")
}

/// SARIF 2.1.0: one run, with a rule for each code its results use.
pub fn sarif(files: &[SourceFile], checked: &Checked) -> Value {
    let index: Vec<LineIndex> = files.iter().map(|f| LineIndex::new(&f.text)).collect();
    let level = |s: Severity| match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    // In the registry's order, each code once.
    let used: Vec<Code> =
        Code::ALL.iter().copied().filter(|c| checked.diagnostics.iter().any(|d| d.code == *c)).collect();
    let rules: Vec<Value> =
        used.iter().map(|&c| sarif_rule(c.as_str(), c.summary(), &rule_help(c), level(c.severity()))).collect();
    let region = |file: usize, span: jadpo_syntax::ast::Span| {
        let (s, e) = (index[file].position(span.start), index[file].position(span.end));
        json!({"startLine": s.line, "startColumn": s.column, "endLine": e.line, "endColumn": e.column,
               "byteOffset": span.start, "byteLength": span.end - span.start})
    };
    let results: Vec<Value> = checked
        .diagnostics
        .iter()
        .map(|d| {
            let text = match &d.help {
                Some(h) => format!("{}\nhelp: {h}", d.message),
                None => d.message.clone(),
            };
            let related: Vec<Value> = d
                .labels
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    json!({"id": i, "message": {"text": l.message},
                           "physicalLocation": {"artifactLocation": {"uri": files[l.file].name}, "region": region(l.file, l.span)}})
                })
                .collect();
            json!({
                "ruleId": d.code.as_str(),
                "ruleIndex": used.iter().position(|c| *c == d.code),
                "level": level(d.severity()),
                "message": {"text": text},
                "locations": [{"physicalLocation": {
                    "artifactLocation": {"uri": files[d.file].name},
                    "region": region(d.file, d.span),
                }}],
                "relatedLocations": related,
            })
        })
        .collect();
    let artifacts = files.iter().map(|f| json!({"location": {"uri": f.name}})).collect();
    sarif_log(rules, artifacts, results)
}

/// A SARIF rule: its id, summary, help (text and Markdown) and level.
pub fn sarif_rule(id: &str, summary: &str, help: &str, level: &str) -> Value {
    json!({
        "id": id,
        "shortDescription": {"text": summary},
        "help": {"text": help, "markdown": help},
        "defaultConfiguration": {"level": level},
    })
}

/// A SARIF 2.1.0 log of one run of jadpoc: its rules, the files and the results.
pub fn sarif_log(rules: Vec<Value>, artifacts: Vec<Value>, results: Vec<Value>) -> Value {
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "jadpoc",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "artifacts": artifacts,
            "results": results,
        }],
    })
}
