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
use jadpo_check::{Checked, Diagnostic, Lower, Replacement, SourceFile, check_again, check_parsed};
use jadpo_syntax::ast::{Decl, Span};
use jadpo_syntax::{Change, KeptParse, Reparsed};
use std::borrow::Cow;
use std::collections::HashMap;

/// One program: its files, as the editor sees them, their trees, and what the
/// checker made of them.
pub struct Analysis {
    files: Vec<SourceFile>,
    /// Per file, its tree, kept so the next edit reads again only the
    /// declarations it touched.
    trees: Vec<KeptParse>,
    lines: Vec<LineIndex>,
    checked: Checked,
    /// Checked whole rather than again after an edit.
    whole: bool,
}

impl Analysis {
    /// Checks the files of one program together, as `jadpoc check` does.
    pub fn new(files: Vec<SourceFile>) -> Analysis {
        Analysis::after(None, files)
    }

    /// Checks the files of one program together after an edit: a file that was in
    /// `before` (by name) keeps its tree, read again where its text changed (see
    /// [`KeptParse`]), and an unchanged file its line index. The diagnostics are
    /// those of a check of the whole text, as `jadpoc check` gives them.
    pub fn after(before: Option<Analysis>, files: Vec<SourceFile>) -> Analysis {
        Analysis::after_texts(before, files.into_iter().map(|f| (f.name, Cow::Owned(f.text))).collect())
    }

    /// [`Analysis::after`] for texts that may be borrowed (an editor's buffers): a
    /// file's text is copied only when it changed, into the room of its last
    /// version, so a large file is not held twice while it is checked.
    pub fn after_texts(before: Option<Analysis>, texts: Vec<(String, Cow<'_, str>)>) -> Analysis {
        let mut kept: HashMap<String, (SourceFile, KeptParse, LineIndex)> = HashMap::new();
        let mut last = None;
        if let Some(before) = before {
            // The last check is reused only for the same files in the same order.
            let same_files = before.files.iter().map(|f| &f.name).eq(texts.iter().map(|(name, _)| name));
            last = same_files.then_some(before.checked);
            let old = before.files.into_iter().zip(before.trees).zip(before.lines);
            kept.extend(old.map(|((file, tree), lines)| (file.name.clone(), (file, tree, lines))));
        }
        let mut files = Vec::with_capacity(texts.len());
        let mut trees = Vec::with_capacity(texts.len());
        let mut lines = Vec::with_capacity(texts.len());
        // The one edit since the last check, when it replaced declarations by as
        // many in one file.
        let mut edits = Vec::new();
        for (i, (name, text)) in texts.into_iter().enumerate() {
            let (file, tree, index) = match kept.remove(&name) {
                Some((old, tree, index)) if old.text == *text => (old, tree, index),
                Some((mut old, mut tree, mut index)) => {
                    let change = Change::between(&old.text, &text);
                    edits.push(match tree.update_by(change, &text) {
                        Reparsed::Declarations { old, new, from, delta } if old.len() == new => {
                            Some(Replacement { file: i, decls: old, from, delta })
                        }
                        _ => None,
                    });
                    index.edit(&text, change.prefix, change.old_end, change.new_end);
                    old.text = replace_text(old.text, text);
                    (old, tree, index)
                }
                None => {
                    let (tree, index) = (KeptParse::new(&text), LineIndex::new(&text));
                    (SourceFile { name, text: text.into_owned() }, tree, index)
                }
            };
            files.push(file);
            trees.push(tree);
            lines.push(index);
        }
        drop(kept);
        let parsed: Vec<_> = trees.iter().map(KeptParse::parsed).collect();
        let mut whole = false;
        let checked = match (last, <[_; 1]>::try_from(edits)) {
            // The same texts: the check is the last one.
            (Some(last), Err(edits)) if edits.is_empty() => last,
            (Some(last), Ok([Some(edit)])) => check_again(&files, &parsed, last, edit),
            (last, _) => {
                // The old index and diagnostics go before the check makes new ones.
                drop(last);
                whole = true;
                check_parsed(&files, &parsed, Lower::No)
            }
        };
        Analysis { files, trees, lines, checked, whole }
    }

    /// Whether the program was checked whole (its first check, or after an edit
    /// the last check's findings could not be reused for), rather than again.
    pub fn checked_whole(&self) -> bool {
        self.whole
    }

    /// The bytes of the program's text.
    pub fn text_len(&self) -> usize {
        self.files.iter().map(|f| f.text.len()).sum()
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

    /// What the checker made of the program.
    pub fn checked(&self) -> &Checked {
        &self.checked
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

    /// Calls `f` with the tree of one file (none for a file not in the program).
    pub(crate) fn with_decls<R>(&self, file: usize, f: impl FnOnce(&[Decl<'_>]) -> R) -> R {
        f(self.trees.get(file).map_or(&[], |t| t.parsed().file.decls.as_slice()))
    }
}

/// A file's next text in the room of its last one (`old`) when that is large
/// enough: the memory freed by one version is the next one's, rather than a new
/// copy made beside the old one after each edit.
fn replace_text(mut old: String, new: Cow<'_, str>) -> String {
    match new {
        Cow::Owned(new) => new,
        Cow::Borrowed(new) if new.len() <= old.capacity() => {
            old.clear();
            old.push_str(new);
            old
        }
        Cow::Borrowed(new) => {
            drop(old);
            // Some room for the next edits, which mostly add a character or two.
            let mut text = String::with_capacity(new.len() + new.len() / TEXT_SLACK);
            text.push_str(new);
            text
        }
    }
}

/// A text given new room gets this fraction of its length more, for the next
/// edits, which mostly add a character or two (an editor's buffer and the
/// analysis's copy alike): doubling would hold twice a large file's text.
pub(crate) const TEXT_SLACK: usize = 64;

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
