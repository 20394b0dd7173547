//! A workspace folder's program compared with a baseline (`git:REF` or another
//! copy of the program), as `jadpoc diff` compares them: each finding a
//! diagnostic, breaking ones as warnings and the others as information. The
//! comparison is `jadpo_check::diff`'s, made when the folder is first checked and
//! again after each save (it checks the program whole, lowered, which a check
//! after an edit does not), so typing costs nothing more.

use crate::analysis::Analysis;
use crate::convert;
use crate::line_index::Encoding;
use jadpo_check::diff::{DiffSeverity, Finding, Side, diff};
use jadpo_check::{Checked, Lower, Severity, SourceFile, check};
use jadpo_syntax::ast::Span;
use lsp_types as lsp;
use std::path::Path;

/// Reads a baseline program for a workspace folder: `git:REF` (the folder's
/// files at that revision) or a file or folder (relative to the workspace
/// folder); the files, or why they could not be read.
pub type ReadBaseline = Box<ReadBaselineFn>;

/// What [`ReadBaseline`] boxes.
pub type ReadBaselineFn = dyn Fn(&Path, &str) -> Result<Vec<SourceFile>, String> + Send;

/// Where diagnostics of the comparison come from, for editors to tell them apart.
const SOURCE: &str = "jadpo diff";

/// A baseline, read and checked once.
pub(crate) struct Baseline {
    /// Its files and their check, or why they could not be read or do not check.
    old: Result<(Vec<SourceFile>, Checked), String>,
    /// Compare again at the next check: at first, and after a save.
    pub due: bool,
    /// The last comparison's diagnostics, by URI.
    last: Vec<(String, lsp::Diagnostic)>,
}

impl Baseline {
    /// The baseline `spec` of the folder `root`, read by `read`.
    pub fn read(read: &ReadBaselineFn, root: &Path, spec: &str) -> Baseline {
        let old = read(root, spec).and_then(|files| {
            let checked = check(&files, Lower::Yes);
            if checked.program.is_some() {
                Ok((files, checked))
            } else {
                Err(format!("the baseline `{spec}` has errors (`jadpoc check` shows them); it is not compared"))
            }
        });
        Baseline { old, due: true, last: Vec::new() }
    }

    /// The comparison's diagnostics for the program `a` (its files' URIs
    /// `uris`): made again when due and the program has no error; none while it
    /// has one (its findings would not be `jadpoc diff`'s).
    pub fn findings(&mut self, a: &Analysis, uris: &[String], enc: Encoding) -> Vec<(String, lsp::Diagnostic)> {
        let Some(first) = uris.first() else { return Vec::new() };
        let (files, old) = match &self.old {
            Ok(old) => old,
            Err(why) => return vec![(first.clone(), note(why.clone(), lsp::DiagnosticSeverity::INFORMATION, None))],
        };
        if a.diagnostics().iter().any(|d| d.severity() == Severity::Error) {
            self.last.clear();
            self.due = true;
            return Vec::new();
        }
        if self.due {
            let new = check(a.files(), Lower::Yes);
            let found = diff(Side { files, checked: old }, Side { files: a.files(), checked: &new });
            self.last = found.iter().filter_map(|f| diagnostic(a, uris, enc, f)).collect();
            self.due = false;
        }
        self.last.clone()
    }
}

/// A diagnostic at the start of a file.
fn note(message: String, severity: lsp::DiagnosticSeverity, code: Option<&str>) -> lsp::Diagnostic {
    lsp::Diagnostic {
        severity: Some(severity),
        code: code.map(|c| lsp::NumberOrString::String(c.to_string())),
        source: Some(SOURCE.into()),
        message,
        ..Default::default()
    }
}

/// A finding as a diagnostic: where the new program has its place, else at the
/// start of the program's first file, naming the baseline's place.
fn diagnostic(a: &Analysis, uris: &[String], enc: Encoding, f: &Finding) -> Option<(String, lsp::Diagnostic)> {
    let severity = match f.code.severity() {
        DiffSeverity::Breaking => lsp::DiagnosticSeverity::WARNING,
        DiffSeverity::Warning => lsp::DiagnosticSeverity::INFORMATION,
    };
    let mut message = f.message.clone();
    if let Some(help) = &f.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    match (&f.new_at, &f.old_at) {
        (Some(at), _) => {
            let mut d = note(message, severity, Some(f.code.as_str()));
            d.range = convert::range(a, at.file, Span { start: at.start, end: at.end }, enc);
            Some((uris.get(at.file)?.clone(), d))
        }
        (None, Some(old)) => {
            // In the file of the same name, where it was, else the first.
            let name = Path::new(old.path.rsplit(':').next().unwrap_or(&old.path)).file_name();
            let file = a.files().iter().position(|f| Path::new(&f.name).file_name() == name).unwrap_or(0);
            let shown = name.map_or(old.path.as_str().into(), |n| n.to_string_lossy());
            message.push_str(&format!("\n(in the baseline at {shown}:{}:{})", old.line, old.column));
            Some((uris.get(file)?.clone(), note(message, severity, Some(f.code.as_str()))))
        }
        (None, None) => Some((uris.first()?.clone(), note(message, severity, Some(f.code.as_str())))),
    }
}
