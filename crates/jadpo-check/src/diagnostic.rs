//! Diagnostics and the source files they point into.

use crate::registry::{Code, Severity};
use jadpo_syntax::ast::Span;

/// One file of a program: its name as given to the command and its text.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
}

/// A problem found in a program, with one primary span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    pub message: String,
    pub help: Option<String>,
    /// Index of the file in the program's list.
    pub file: usize,
    pub span: Span,
    /// Secondary places that explain the primary one.
    pub labels: Vec<Label>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub file: usize,
    pub span: Span,
    pub message: String,
}

impl Diagnostic {
    pub fn new(code: Code, file: usize, span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic { code, message: message.into(), help: None, file, span, labels: Vec::new() }
    }

    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn help_opt(mut self, help: Option<String>) -> Diagnostic {
        self.help = help;
        self
    }

    pub fn label(mut self, file: usize, span: Span, message: impl Into<String>) -> Diagnostic {
        self.labels.push(Label { file, span, message: message.into() });
        self
    }

    pub fn severity(&self) -> Severity {
        self.code.severity()
    }
}

/// A 1-based line and column (in Unicode scalar values) and the byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Position {
    pub line: u32,
    pub column: u32,
    pub offset: u32,
}

/// Finds lines and columns for byte offsets in one file.
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<u32>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> LineIndex<'a> {
        let mut starts = vec![0];
        starts.extend(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i as u32 + 1));
        LineIndex { text, starts }
    }

    pub fn position(&self, offset: u32) -> Position {
        let offset = offset.min(self.text.len() as u32);
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let start = self.starts[line] as usize;
        // A span never starts inside a character, but a damaged one must not panic.
        let column = self.text.get(start..offset as usize).map_or(0, |s| s.chars().count());
        Position { line: line as u32 + 1, column: column as u32 + 1, offset }
    }
}
