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
use crate::index::Ref;
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

/// The last check's findings and the edit since, when the edit allows reusing them.
pub(super) struct Previous {
    memo: Memo,
    edit: Replacement,
    /// The declarations the edit replaced, in the checker's list.
    replaced: std::ops::Range<usize>,
    /// The last check's references, by place.
    refs: Vec<Ref>,
}

/// Whether the last check's findings can be reused after `edit`: it replaced
/// subscribers and schedules alone, by as many of the same kinds and names, in a
/// list as long as the last check's.
pub(super) fn reusable(
    decls: &[(usize, &Decl<'_>)],
    memo: Memo,
    refs: Vec<Ref>,
    edit: Replacement,
) -> Option<Previous> {
    if memo.records.len() != decls.len() {
        return None;
    }
    // The file's first declaration in the list: files are in order, each one's
    // declarations in order of place.
    let first = decls.iter().position(|(f, _)| *f == edit.file).unwrap_or(decls.len());
    let replaced = first + edit.decls.start..first + edit.decls.end;
    let new = decls.get(replaced.clone())?;
    let same = new.iter().zip(&memo.records[replaced.clone()]).all(|((f, d), old)| {
        *f == edit.file
            && in_second_pass(d.kind)
            && old.kind == Some(d.kind)
            && old.name.as_deref() == Some(d.name.text)
    });
    same.then_some(Previous { memo, edit, replaced, refs })
}

impl Cx<'_, '_> {
    /// Starts keeping findings for the next check.
    pub(super) fn keep_findings(&mut self) {
        self.memo = Some(Memo { records: vec![Record::default(); self.decls.len()], ..Memo::default() });
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
        match &self.previous {
            Some(p) if !p.replaced.contains(&index) => {
                self.reused += 1;
                let old = &p.memo.records[index];
                self.diags.extend(p.memo.diags[range(old.diags)].iter().map(|d| p.edit.moved_diagnostic(d)));
                for &m in &p.memo.marks[range(old.marks)] {
                    self.used[m as usize] = true;
                    if let Some(memo) = &mut self.memo {
                        memo.marks.push(m);
                    }
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
        let Previous { memo, edit, replaced, refs } = p;
        // The reused declarations' places in the old text, in order of place, as
        // the references are.
        let mut spans: Vec<(u32, Span)> = (0..memo.records.len())
            .filter(|i| !replaced.contains(i))
            .filter_map(|i| memo.records[i].kind.map(|_| (memo.records[i].file, memo.records[i].span)))
            .collect();
        spans.sort_unstable_by_key(|(f, s)| (*f, s.start));
        let mut refs = refs;
        let mut at = 0;
        refs.retain_mut(|r| {
            while spans.get(at).is_some_and(|&(f, s)| (f as usize, s.end) < (r.file, r.span.start)) {
                at += 1;
            }
            let inside = spans
                .get(at)
                .is_some_and(|&(f, s)| f as usize == r.file && s.start <= r.span.start && r.span.end <= s.end);
            if inside {
                r.span = edit.moved(r.file, r.span);
            }
            inside
        });
        self.index.add_refs(refs);
    }

    /// The findings kept for the next check.
    pub(super) fn take_memo(&mut self) -> Option<Memo> {
        self.memo.take()
    }
}
