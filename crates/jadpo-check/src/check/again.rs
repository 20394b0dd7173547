//! Checking a program again after an edit, reusing what the last check found for
//! the declarations the edit did not touch.
//!
//! What a subscriber's or a schedule's check finds (its diagnostics, the names it
//! refers to, the declarations it marks as used) depends on its own text and on the
//! declarations it names (events, actions, connections), and nothing else depends
//! on it but by its name. So when an edit replaced subscribers and schedules alone,
//! by as many of the same kinds and names, every other subscriber and schedule is
//! not checked again: its diagnostics, references and marks are the last check's,
//! moved by the edit's length when they come after it. Names, events, connections,
//! actions and tests, and the warnings for what nothing uses, are checked anew; the
//! result is a whole check's, in the same order.

use super::{Cx, in_second_pass};
use crate::diagnostic::Diagnostic;
use crate::index::{Ref, SymbolIndex};
use jadpo_syntax::ast::{Decl, DeclKind, Span};

/// An edit to one file: the declarations `decls` of its list (by place in the
/// file) were replaced by as many, and every place at or after `from` (in the old
/// text) moved by `delta` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub file: usize,
    pub decls: std::ops::Range<usize>,
    pub from: u32,
    pub delta: i64,
}

impl Replacement {
    fn moved(&self, file: usize, span: Span) -> Span {
        let at = |p: u32| if p >= self.from { (p as i64 + self.delta) as u32 } else { p };
        if file == self.file { Span { start: at(span.start), end: at(span.end) } } else { span }
    }

    fn moved_diagnostic(&self, d: &Diagnostic) -> Diagnostic {
        let mut d = d.clone();
        d.span = self.moved(d.file, d.span);
        for l in &mut d.labels {
            l.span = self.moved(l.file, l.span);
        }
        d
    }
}

/// What a check found for each subscriber and schedule, kept for the next one.
#[derive(Debug, Default)]
pub(crate) struct Memo {
    /// Per declaration of the checker's list (default for other kinds).
    records: Vec<Record>,
    diags: Vec<Diagnostic>,
    /// The declarations each one marked as used, by index in the list.
    marks: Vec<u32>,
    /// How many names the check's index interned: the next one makes room for as
    /// many.
    names: usize,
}

/// Where one subscriber's or schedule's findings are in its [`Memo`].
/// One per declaration of a large program: its numbers are `u32`, as spans' are.
#[derive(Debug, Clone, Default)]
struct Record {
    /// Its kind and name, which the edit must leave as they were.
    kind: Option<DeclKind>,
    name: Option<std::sync::Arc<str>>,
    file: u32,
    span: Span,
    /// Its diagnostics and marks in the memo's lists: from, to.
    diags: (u32, u32),
    marks: (u32, u32),
}

fn range((from, to): (u32, u32)) -> std::ops::Range<usize> {
    from as usize..to as usize
}

/// What the last check leaves to the one after an edit.
pub(super) struct Last {
    pub memo: Memo,
    /// The last check's references, by place.
    pub refs: Vec<Ref>,
    /// The rest of its index, whose lists the check fills again.
    pub index: SymbolIndex,
    pub edit: Replacement,
}

impl Last {
    /// The last check's index, to fill again, and how many names it interned.
    pub(super) fn room(&mut self) -> (SymbolIndex, usize) {
        (std::mem::take(&mut self.index), self.memo.names)
    }
}

/// The last check's findings and the edit since, when the edit allows reusing them.
/// Its records are the new check's, rewritten in place as it goes.
pub(super) struct Previous {
    /// The last check's kept diagnostics and marks, as its records place them.
    diags: Vec<Diagnostic>,
    marks: Vec<u32>,
    edit: Replacement,
    /// The declarations the edit replaced, in the checker's list.
    replaced: std::ops::Range<usize>,
    /// The last check's references in the declarations whose findings are
    /// reused, moved by the edit.
    refs: Vec<Ref>,
}

/// Whether the last check's findings can be reused after `edit`: it replaced
/// subscribers and schedules alone, by as many of the same kinds and names, in a
/// list as long as the last check's (whose `records` are given). The declarations
/// the edit replaced, in the checker's list, when they can.
fn reusable(decls: &[(usize, &Decl<'_>)], records: &[Record], edit: &Replacement) -> Option<std::ops::Range<usize>> {
    if records.len() != decls.len() {
        return None;
    }
    // The file's first declaration in the list: files are in order, each one's
    // declarations in order of place.
    let first = decls.iter().position(|(f, _)| *f == edit.file).unwrap_or(decls.len());
    let replaced = first + edit.decls.start..first + edit.decls.end;
    let new = decls.get(replaced.clone())?;
    let same = new.iter().zip(&records[replaced.clone()]).all(|((f, d), old)| {
        *f == edit.file
            && in_second_pass(d.kind)
            && old.kind == Some(d.kind)
            && old.name.as_deref() == Some(d.name.text)
    });
    same.then_some(replaced)
}

/// The references of `refs` (in order of place) within the declarations whose
/// findings are reused (by `records`, before the check rewrites them), moved by the
/// edit; the others go.
fn reused_refs(
    records: &[Record],
    replaced: &std::ops::Range<usize>,
    edit: &Replacement,
    mut refs: Vec<Ref>,
) -> Vec<Ref> {
    // The reused declarations' places in the old text, in order of place, as the
    // references are.
    let mut spans: Vec<(u32, Span)> = (0..records.len())
        .filter(|i| !replaced.contains(i))
        .filter_map(|i| records[i].kind.map(|_| (records[i].file, records[i].span)))
        .collect();
    spans.sort_unstable_by_key(|(f, s)| (*f, s.start));
    let mut at = 0;
    refs.retain_mut(|r| {
        while spans.get(at).is_some_and(|&(f, s)| (f as usize, s.end) < (r.file, r.span.start)) {
            at += 1;
        }
        let inside =
            spans.get(at).is_some_and(|&(f, s)| f as usize == r.file && s.start <= r.span.start && r.span.end <= s.end);
        if inside {
            r.span = edit.moved(r.file, r.span);
        }
        inside
    });
    refs
}

impl Cx<'_, '_> {
    /// Starts keeping findings for the next check, and takes the last check's
    /// where `last`'s edit allows. The list of records is the last check's,
    /// rewritten in place, rather than a second one beside it.
    pub(super) fn keep_findings(&mut self, last: Option<Last>) {
        let n = self.decls.len();
        let Some(Last { memo, refs, index: _, edit }) = last else {
            self.memo = Some(Memo { records: vec![Record::default(); n], ..Memo::default() });
            return;
        };
        let Memo { mut records, diags, marks, names: _ } = memo;
        // As much room as the last check's findings took.
        let (diags_room, marks_room) = (diags.len(), marks.len());
        match reusable(self.decls, &records, &edit) {
            Some(replaced) => {
                let refs = reused_refs(&records, &replaced, &edit, refs);
                self.previous = Some(Previous { diags, marks, edit, replaced, refs });
            }
            None => {
                drop((diags, marks, refs));
                records.clear();
                records.resize(n, Record::default());
            }
        }
        self.memo = Some(Memo {
            records,
            diags: Vec::with_capacity(diags_room),
            marks: Vec::with_capacity(marks_room),
            names: 0,
        });
    }

    /// Marks declaration `i` as used, keeping the mark for the next check.
    pub(super) fn mark_used(&mut self, i: usize) {
        self.used[i] = true;
        if let Some(memo) = &mut self.memo {
            memo.marks.push(i as u32);
        }
    }

    /// Checks subscriber or schedule `index` with `check`, or takes the last check's
    /// findings for it when the edit did not touch it.
    pub(super) fn check_or_reuse(&mut self, index: usize, check: impl FnOnce(&mut Self)) {
        let (diags, marks) = (self.diags.len(), self.memo.as_ref().map_or(0, |m| m.marks.len()));
        match (&self.previous, &mut self.memo) {
            (Some(p), Some(memo)) if !p.replaced.contains(&index) => {
                self.reused += 1;
                // The last check's record, which this one's replaces below.
                let old = &memo.records[index];
                self.diags.extend(p.diags[range(old.diags)].iter().map(|d| p.edit.moved_diagnostic(d)));
                for &m in &p.marks[range(old.marks)] {
                    self.used[m as usize] = true;
                    memo.marks.push(m);
                }
            }
            _ => check(self),
        }
        if self.memo.is_none() {
            return;
        }
        let (file, decl) = self.decls[index];
        // The declaration's name as its definition shares it, without a lookup.
        let name = self.decl_def.get(index).copied().flatten().map(|id| self.index.def(id).name.clone());
        if let Some(memo) = &mut self.memo {
            let start = memo.diags.len();
            memo.diags.extend_from_slice(&self.diags[diags..]);
            memo.records[index] = Record {
                kind: Some(decl.kind),
                name,
                file: file as u32,
                span: decl.span,
                diags: (start as u32, memo.diags.len() as u32),
                marks: (marks as u32, memo.marks.len() as u32),
            };
        }
    }

    /// Pass 0 marks too; only the marks of subscribers and schedules are kept.
    pub(super) fn forget_marks(&mut self) {
        if let Some(memo) = &mut self.memo {
            memo.marks.clear();
        }
    }

    /// Adds the last check's references of the declarations whose findings were
    /// reused, moved by the edit.
    pub(super) fn reuse_refs(&mut self) {
        let Some(p) = self.previous.take() else { return };
        self.index.add_refs(p.refs);
    }

    /// The findings kept for the next check, whose index interned `names` names.
    pub(super) fn take_memo(&mut self, names: usize) -> Option<Memo> {
        self.memo.take().map(|m| Memo { names, ..m })
    }
}
