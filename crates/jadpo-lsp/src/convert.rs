//! Between the analysis and the protocol: URIs in one spelling, byte offsets as
//! the protocol's positions (in the encoding agreed with the client), and the
//! analysis's diagnostics and edits as the protocol carries them. The server and
//! its handlers both speak through these.

use crate::analysis::{Analysis, Edit};
use crate::line_index::{Encoding, LineCol};
use jadpo_check::{Code, Diagnostic, Severity};
use jadpo_syntax::ast::Span;
use lsp_types as lsp;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use url::Url;

/// A URI in one spelling: file URIs as the `url` crate writes a path, so that the
/// editor's and the disk's names of one file are equal.
pub(crate) fn normalize(uri: &str) -> String {
    match Url::parse(uri) {
        Ok(url) if url.scheme() == "file" => match url.to_file_path() {
            Ok(path) => Url::from_file_path(&path).map_or_else(|()| url.to_string(), |u| u.to_string()),
            Err(()) => url.to_string(),
        },
        Ok(url) => url.to_string(),
        Err(_) => uri.to_string(),
    }
}

/// The path of a `file:` URI.
pub(crate) fn path_of(uri: &str) -> Option<PathBuf> {
    Url::parse(uri).ok().filter(|u| u.scheme() == "file").and_then(|u| u.to_file_path().ok())
}

/// The `file:` URI of a path.
pub(crate) fn uri_of(path: &Path) -> String {
    Url::from_file_path(path).map_or_else(|()| path.display().to_string(), |u| u.to_string())
}

/// The offset of the protocol's position `p` in `file`.
pub(crate) fn offset(a: &Analysis, file: usize, p: lsp::Position, enc: Encoding) -> u32 {
    a.line_index(file).map_or(0, |i| i.offset(a.text(file), LineCol { line: p.line, col: p.character }, enc))
}

/// The protocol's position of `offset` in `file`.
pub(crate) fn position(a: &Analysis, file: usize, offset: u32, enc: Encoding) -> lsp::Position {
    let lc = a.line_index(file).map_or(LineCol { line: 0, col: 0 }, |i| i.line_col(a.text(file), offset, enc));
    lsp::Position { line: lc.line, character: lc.col }
}

/// The protocol's range of `span` in `file`.
pub(crate) fn range(a: &Analysis, file: usize, span: Span, enc: Encoding) -> lsp::Range {
    lsp::Range { start: position(a, file, span.start, enc), end: position(a, file, span.end, enc) }
}

/// `span` in `file` as a location: its file's URI and its range.
pub(crate) fn location(a: &Analysis, uris: &[String], file: usize, span: Span, enc: Encoding) -> Option<lsp::Location> {
    let uri = uris.get(file)?.parse::<lsp::Uri>().ok()?;
    Some(lsp::Location { uri, range: range(a, file, span, enc) })
}

/// Edits of the analysis's files as one workspace edit.
// lsp-types keys a workspace edit's changes by `Uri`, whose parsed form caches
// lazily; the keys are never changed once inserted.
#[allow(clippy::mutable_key_type)]
pub(crate) fn workspace_edit(a: &Analysis, uris: &[String], edits: &[Edit], enc: Encoding) -> lsp::WorkspaceEdit {
    let mut changes: HashMap<lsp::Uri, Vec<lsp::TextEdit>> = HashMap::new();
    for e in edits {
        let Some(uri) = uris.get(e.file).and_then(|u| u.parse::<lsp::Uri>().ok()) else { continue };
        changes
            .entry(uri)
            .or_default()
            .push(lsp::TextEdit { range: range(a, e.file, e.span, enc), new_text: e.text.clone() });
    }
    lsp::WorkspaceEdit { changes: Some(changes), ..Default::default() }
}

/// A checker diagnostic as the protocol carries it: the code, the help in the
/// message, the labels as related information, unused declarations tagged.
pub(crate) fn diagnostic(a: &Analysis, uris: &[String], enc: Encoding, d: &Diagnostic) -> lsp::Diagnostic {
    let mut message = d.message.clone();
    if let Some(help) = &d.help {
        message.push_str("\nhelp: ");
        message.push_str(help);
    }
    let related: Vec<lsp::DiagnosticRelatedInformation> = d
        .labels
        .iter()
        .filter_map(|l| {
            Some(lsp::DiagnosticRelatedInformation {
                location: location(a, uris, l.file, l.span, enc)?,
                message: l.message.clone(),
            })
        })
        .collect();
    let unused = matches!(d.code, Code::EventUnused | Code::ActionUnused | Code::ConnectionUnused);
    lsp::Diagnostic {
        range: range(a, d.file, d.span, enc),
        severity: Some(match d.severity() {
            Severity::Error => lsp::DiagnosticSeverity::ERROR,
            Severity::Warning => lsp::DiagnosticSeverity::WARNING,
        }),
        code: Some(lsp::NumberOrString::String(d.code.as_str().into())),
        code_description: None,
        source: Some("jadpo".into()),
        message,
        related_information: if related.is_empty() { None } else { Some(related) },
        tags: unused.then(|| vec![lsp::DiagnosticTag::UNNECESSARY]),
        data: None,
    }
}
