//! The analysis: everything the server knows about one program, as plain functions
//! of byte offsets. No protocol types and no IO here: tests call it directly, and the
//! handlers only convert positions and results.

mod actions;
mod completion;
pub mod cursor;
mod flow;
mod hints;
mod hover;
pub mod keys;
mod symbols;

pub use actions::{Edit, Fix};
pub use completion::{Completion, CompletionKind};
pub use hints::Hint;
pub use symbols::Symbol;

use crate::line_index::LineIndex;
use jadpo_check::{Checked, Diagnostic, Lower, SourceFile, check};
use jadpo_syntax::ast::{Decl, Span};

/// One program: its files, as the editor sees them, and what the checker made of them.
pub struct Analysis {
    files: Vec<SourceFile>,
    lines: Vec<LineIndex>,
    checked: Checked,
}

impl Analysis {
    /// Checks the files of one program together, as `jadpoc check` does.
    pub fn new(files: Vec<SourceFile>) -> Analysis {
        let checked = check(&files, Lower::No);
        let lines = files.iter().map(|f| LineIndex::new(&f.text)).collect();
        Analysis { files, lines, checked }
    }

    pub fn files(&self) -> &[SourceFile] {
        &self.files
    }

    pub fn text(&self, file: usize) -> &str {
        self.files.get(file).map_or("", |f| f.text.as_str())
    }

    pub fn line_index(&self, file: usize) -> Option<&LineIndex> {
        self.lines.get(file)
    }

    /// Every diagnostic of the program, sorted by file, then offset.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.checked.diagnostics
    }

    /// The file in the canonical layout, by the formatter `jadpoc fmt` runs; `None`
    /// when it has syntax errors (it is then left as it is).
    pub fn format(&self, file: usize) -> Option<String> {
        jadpo_fmt::format(self.text(file)).ok()
    }

    /// The diagnostics of one file that touch `span`.
    pub(crate) fn diagnostics_at(&self, file: usize, span: Span) -> impl Iterator<Item = &Diagnostic> {
        self.checked
            .diagnostics
            .iter()
            .filter(move |d| d.file == file && d.span.start <= span.end && span.start <= d.span.end)
    }

    /// Calls `f` with the parsed tree of one file. Trees borrow their text and cost
    /// several times its size, so they are made per request rather than kept.
    pub(crate) fn with_decls<R>(&self, file: usize, f: impl FnOnce(&[Decl<'_>]) -> R) -> R {
        let parsed = jadpo_syntax::parse(self.text(file));
        f(&parsed.file.decls)
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use super::*;

    /// An analysis of files given as `(name, text)`, and the offset of the `|` in the
    /// first file that has one (removed from the text).
    pub fn analysis(files: &[(&str, &str)]) -> (Analysis, usize, usize) {
        let mut at = (0, 0);
        let mut sources = Vec::new();
        for (i, (name, text)) in files.iter().enumerate() {
            let mut text = text.to_string();
            if let Some(o) = text.find('|')
                && at == (0, 0)
            {
                at = (i, o);
                text.remove(o);
            }
            sources.push(SourceFile { name: name.to_string(), text });
        }
        (Analysis::new(sources), at.0, at.1)
    }
}
