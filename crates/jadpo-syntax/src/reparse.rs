//! A file's tree kept between edits: after an edit, only the declarations it
//! touched are read again, when the text around them parses cleanly.
//!
//! A file is a list of declarations and the grammar is LR(1), so when the old text
//! parsed without an error, the new text is the old one with the stretch from the
//! start of the first touched declaration to the start of the first untouched one
//! replaced, and that stretch parses without an error and no token (a line comment
//! above all) runs past its end, then the new tree is the old declarations before
//! the stretch, the stretch's, and the old ones after it with their spans moved by
//! the edit's length: what [`pieces`](crate::pieces) proves of a text cut at a
//! declaration's start. Otherwise, the whole text is parsed again, so errors and
//! their recovery are exactly a whole parse's.

use crate::ast::{Block, Body, Decl, Entry, Expr, Item, Name, Param, Span, StepKind, Value, ValueKind};
use crate::{Parsed, parse, pieces};

/// One file's parse, kept between edits; see the module's documentation.
pub struct KeptParse {
    /// Declared before `texts`, so it is dropped first: its words borrow them.
    parsed: Parsed<'static>,
    /// The text of the last whole parse, then each stretch read again since. The
    /// words of the tree point into them; a boxed text never moves, and none is
    /// dropped or changed while the tree that borrows it lives.
    texts: Vec<Box<str>>,
    /// The bytes of the stretches, beside the whole text's.
    stretches: usize,
}

/// What [`KeptParse::update`] read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reparsed {
    /// The declarations in `old` of the old list were replaced by `new` ones, and
    /// every place at or after `from` in the old text moved by `delta` bytes.
    Declarations { old: std::ops::Range<usize>, new: usize, from: u32, delta: i64 },
    /// The whole text.
    Whole,
}

/// Where two versions of a text differ: the old one's bytes from `prefix` to
/// `old_end` were replaced by the new one's from `prefix` to `new_end`, the bytes
/// before and after in common (as many as there are at each end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub prefix: usize,
    pub old_end: usize,
    pub new_end: usize,
    pub old_len: usize,
}

impl Change {
    pub fn between(old: &str, new: &str) -> Change {
        let (old_bytes, new_bytes) = (old.as_bytes(), new.as_bytes());
        let prefix = common_prefix(old_bytes, new_bytes);
        let suffix = common_suffix(&old_bytes[prefix..], &new_bytes[prefix..]);
        Change { prefix, old_end: old.len() - suffix, new_end: new.len() - suffix, old_len: old.len() }
    }
}

impl KeptParse {
    /// Parses the whole of `text`.
    pub fn new(text: &str) -> KeptParse {
        let texts = vec![Box::<str>::from(text)];
        KeptParse { parsed: parse_kept(&texts[0]), texts, stretches: 0 }
    }

    /// The tree of the text last given.
    pub fn parsed(&self) -> &Parsed<'_> {
        &self.parsed
    }

    /// Moves the tree from `old`, the text it was made from, to `new`.
    pub fn update(&mut self, old: &str, new: &str) -> Reparsed {
        self.update_by(Change::between(old, new), new)
    }

    /// Moves the tree to `new`, which `change` made of the text the tree was made
    /// from ([`Change::between`] the two).
    pub fn update_by(&mut self, change: Change, new: &str) -> Reparsed {
        match self.declarations(change, new) {
            Some(r) => r,
            None => {
                // The old tree goes first: a large file's two trees at once would
                // double what the server holds while it parses.
                *self = KeptParse::new("");
                *self = KeptParse::new(new);
                Reparsed::Whole
            }
        }
    }

    /// The edit made by the declarations it touched, or `None` when the whole text
    /// must be read again.
    fn declarations(&mut self, change: Change, new: &str) -> Option<Reparsed> {
        if !self.parsed.errors.is_empty() {
            return None;
        }
        let Change { prefix, old_end, old_len, .. } = change;
        let decls = &self.parsed.file.decls;
        // From the last declaration that starts at or before the edit (or the text's
        // start) to the first that starts after it (or the text's end).
        let (first, start) = match decls.partition_point(|d| d.span.start as usize <= prefix).checked_sub(1) {
            Some(i) => (i, decls[i].span.start as usize),
            None => (0, 0),
        };
        let after = decls.partition_point(|d| (d.span.start as usize) <= old_end);
        let old_stop = decls.get(after).map_or(old_len, |d| d.span.start as usize);
        let new_stop = old_stop + new.len() - old_len;
        // Too much read again already: the whole text, once, frees the stretches.
        if self.stretches + (new_stop - start) > self.texts[0].len().max(1 << 16) {
            return None;
        }
        // The stretch and the first byte after it (a declaration's keyword, ASCII),
        // so a token that would run on past the stretch is seen to.
        let with_next = (new_stop + usize::from(new_stop < new.len())).min(new.len());
        let text: Box<str> = new.get(start..with_next)?.into();
        let (fresh, mut comments) = pieces::parse_piece(&text, (0, new_stop - start), 4)?;
        // SAFETY: `text` is boxed and pushed onto `self.texts` below, untouched, and
        // dropped only after `self.parsed`, whose words borrow it from then on.
        let mut fresh = unsafe { std::mem::transmute::<Vec<Decl<'_>>, Vec<Decl<'static>>>(fresh) };
        let by = start as i64;
        fresh.iter_mut().for_each(|d| shift_decl(d, by));
        comments.iter_mut().for_each(|c| c.span = moved(c.span, by));
        let delta = new.len() as i64 - old_len as i64;
        let parsed = &mut self.parsed;
        let count = fresh.len();
        parsed.file.decls[after..].iter_mut().for_each(|d| shift_decl(d, delta));
        parsed.file.decls.splice(first..after, fresh);
        let c_first = parsed.comments.partition_point(|c| (c.span.start as usize) < start);
        let c_after = parsed.comments.partition_point(|c| (c.span.start as usize) < old_stop);
        parsed.comments[c_after..].iter_mut().for_each(|c| c.span = moved(c.span, delta));
        parsed.comments.splice(c_first..c_after, comments.drain(..));
        self.stretches += text.len();
        self.texts.push(text);
        Some(Reparsed::Declarations { old: first..after, new: count, from: old_stop as u32, delta })
    }
}

/// Texts are compared a block at a time (a memory comparison), then byte by byte
/// in the block that differs.
const BLOCK: usize = 256;

/// How many bytes `a` and `b` start with in common.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let blocks = a.chunks(BLOCK).zip(b.chunks(BLOCK)).take_while(|(x, y)| x == y).count();
    let at = (blocks * BLOCK).min(a.len()).min(b.len());
    at + a[at..].iter().zip(&b[at..]).take_while(|(x, y)| x == y).count()
}

/// How many bytes `a` and `b` end with in common.
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let blocks = a.rchunks(BLOCK).zip(b.rchunks(BLOCK)).take_while(|(x, y)| x == y).count();
    let at = (blocks * BLOCK).min(a.len()).min(b.len());
    at + a[..a.len() - at].iter().rev().zip(b[..b.len() - at].iter().rev()).take_while(|(x, y)| x == y).count()
}

/// The whole parse of `text`, its lifetime that of the [`KeptParse`] holding `text`.
fn parse_kept(text: &str) -> Parsed<'static> {
    // SAFETY: every caller passes the text boxed in `KeptParse::texts`, which
    // outlives the tree (see the field's documentation).
    unsafe { std::mem::transmute::<Parsed<'_>, Parsed<'static>>(parse(text)) }
}

fn moved(span: Span, by: i64) -> Span {
    Span { start: (span.start as i64 + by) as u32, end: (span.end as i64 + by) as u32 }
}

fn shift_decl(d: &mut Decl<'_>, by: i64) {
    if by == 0 {
        return;
    }
    d.span = moved(d.span, by);
    shift_name(&mut d.name, by);
    match &mut d.body {
        Body::Block { params, block } => {
            params.iter_mut().for_each(|p| shift_param(p, by));
            shift_block(block, by);
        }
        Body::Steps { steps, .. } => {
            for step in steps {
                step.span = moved(step.span, by);
                match &mut step.kind {
                    StepKind::Fake { connection, answers } => {
                        shift_name(connection, by);
                        shift_value(answers, by);
                    }
                    StepKind::Emit { event: name, fields: block }
                    | StepKind::Expect { subscriber: name, block }
                    | StepKind::ExpectBreaker { connection: name, block } => {
                        shift_name(name, by);
                        shift_block(block, by);
                    }
                    StepKind::Wait { span, .. } => *span = moved(*span, by),
                    StepKind::Retry { subscriber } => shift_name(subscriber, by),
                }
            }
        }
        Body::Broken => {}
    }
}

fn shift_name(n: &mut Name<'_>, by: i64) {
    n.span = moved(n.span, by);
}

fn shift_param(p: &mut Param<'_>, by: i64) {
    shift_name(&mut p.name, by);
    shift_name(&mut p.ty.name, by);
    p.ty.span = moved(p.ty.span, by);
}

fn shift_block(b: &mut Block<'_>, by: i64) {
    b.span = moved(b.span, by);
    b.entries.iter_mut().for_each(|e| shift_entry(e, by));
}

fn shift_entry(e: &mut Entry<'_>, by: i64) {
    e.key.span = moved(e.key.span, by);
    shift_value(&mut e.value, by);
}

fn shift_item(i: &mut Item<'_>, by: i64) {
    shift_value(&mut i.value, by);
    if let Some((_, span)) = &mut i.times {
        *span = moved(*span, by);
    }
}

fn shift_value(v: &mut Value<'_>, by: i64) {
    v.span = moved(v.span, by);
    match &mut v.kind {
        ValueKind::Str(_)
        | ValueKind::Int(_)
        | ValueKind::Duration(_)
        | ValueKind::Bool(_)
        | ValueKind::Ident { .. }
        | ValueKind::Rate(_) => {}
        ValueKind::Path(names) => names.iter_mut().for_each(|n| shift_name(n, by)),
        ValueKind::LongPath(names) => names.iter_mut().for_each(|n| shift_name(n, by)),
        ValueKind::Call { name, args } => {
            shift_name(name, by);
            args.iter_mut().for_each(|a| shift_value(a, by));
        }
        ValueKind::Block(b) => shift_block(b, by),
        ValueKind::List(items) => items.iter_mut().for_each(|i| shift_item(i, by)),
        ValueKind::Expr(e) => match &mut **e {
            Expr::And(vs) | Expr::Or(vs) => vs.iter_mut().for_each(|v| shift_value(v, by)),
            Expr::Not { operand, span } => {
                *span = moved(*span, by);
                shift_value(operand, by);
            }
            Expr::Compare { op_span, left, right, .. } => {
                *op_span = moved(*op_span, by);
                shift_value(left, by);
                shift_value(right, by);
            }
            Expr::In { left, list, op_span, .. } => {
                *op_span = moved(*op_span, by);
                shift_value(left, by);
                shift_value(list, by);
            }
            Expr::Paren(v) => shift_value(v, by),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pieces::tests::edited;
    use jadpo_test_support::corpus;
    use proptest::prelude::*;

    /// The kept tree after moving it from `old` to `new` is the whole parse of
    /// `new`, to the last span; returns what was read again.
    fn same_as_whole(kept: &mut KeptParse, old: &str, new: &str) -> Reparsed {
        let reparsed = kept.update(old, new);
        let whole = parse(new);
        assert_eq!(
            format!("{:?}", kept.parsed().file),
            format!("{:?}", whole.file),
            "{reparsed:?}:\n{old}\n---\n{new}"
        );
        assert_eq!(kept.parsed().comments, whole.comments, "{reparsed:?}");
        assert_eq!(format!("{:?}", kept.parsed().errors), format!("{:?}", whole.errors));
        reparsed
    }

    #[test]
    fn texts_in_common_are_found_across_blocks() {
        let a = "x".repeat(3 * BLOCK + 7);
        for at in [0, 1, BLOCK - 1, BLOCK, 2 * BLOCK + 3, a.len() - 1] {
            let mut b = a.clone().into_bytes();
            b[at] = b'y';
            assert_eq!(common_prefix(a.as_bytes(), &b), at);
            assert_eq!(common_suffix(a.as_bytes(), &b), a.len() - 1 - at);
        }
        assert_eq!(common_prefix(a.as_bytes(), a.as_bytes()), a.len());
        assert_eq!(common_prefix(b"abc", b"abcdef"), 3);
        assert_eq!(common_suffix(b"def", b"abcdef"), 3);
    }

    #[test]
    fn an_edit_inside_a_declaration_reads_that_declaration_alone() {
        let old = "event A { x: int }\n\nevent B { y: int }\n// about C\nevent C { z: int }\n";
        let new = old.replace("y: int", "y: string  w: bool");
        let mut kept = KeptParse::new(old);
        assert!(
            matches!(same_as_whole(&mut kept, old, &new), Reparsed::Declarations { old, new: 1, .. } if old == (1..2))
        );
        // A declaration inserted: the text in common runs into `C`'s keyword, so
        // the edit is in `C`, read again with the new one.
        let newer = new.replace("event C", "event D { }\nevent C");
        assert!(
            matches!(same_as_whole(&mut kept, &new, &newer), Reparsed::Declarations { old, new: 2, .. } if old == (2..3))
        );
        // Before the first declaration.
        let newest = format!("// head\n{newer}");
        assert!(
            matches!(same_as_whole(&mut kept, &newer, &newest), Reparsed::Declarations { old, new: 1, .. } if old == (0..1))
        );
    }

    #[test]
    fn a_comment_running_on_past_the_stretch_or_an_error_reads_the_whole_text() {
        // A block comment turned into a line comment swallows the next keyword.
        let old = "event A { x: int } /* b */event B { y: int }\n";
        let new = old.replace("/* b", "// b");
        let mut kept = KeptParse::new(old);
        assert_eq!(same_as_whole(&mut kept, old, &new), Reparsed::Whole);
        assert_eq!(kept.parsed().file.decls.len(), 1);
        // A block comment opened and left open.
        let old = "event A { x: int }\nevent B { y: int }\n";
        let mut kept = KeptParse::new(old);
        let new = old.replace("x: int", "x: int /*");
        assert_eq!(same_as_whole(&mut kept, old, &new), Reparsed::Whole);
        // While the text has an error, every edit reads it whole.
        let fixed = new.replace(" /*", "");
        assert_eq!(same_as_whole(&mut kept, &new, &fixed), Reparsed::Whole);
        assert!(matches!(same_as_whole(&mut kept, &fixed, old), Reparsed::Declarations { .. }));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// A series of random edits to a corpus file: after each, the kept tree is
        /// the whole parse of the text.
        #[test]
        fn a_series_of_edits_keeps_the_whole_texts_tree(
            file in 0usize..1000,
            edits in proptest::collection::vec((0.0f64..1.0, 0usize..12, "[a-z0-9{}()\\[\\]:,.\"/* \n]{0,12}"), 1..8),
        ) {
            let texts = corpus();
            let mut text = texts[file % texts.len()].clone();
            let mut kept = KeptParse::new(&text);
            for (at, len, insert) in edits {
                let new = edited(&text, at, len, &insert);
                same_as_whole(&mut kept, &text, &new);
                text = new;
            }
        }

        /// Edits that keep a clean file clean, as most typing in a value does, are
        /// read a declaration at a time.
        #[test]
        fn a_digit_typed_in_a_clean_file_reads_one_declaration(file in 0usize..1000, at in 0.0f64..1.0) {
            let texts = corpus();
            let text = &texts[file % texts.len()];
            let mut kept = KeptParse::new(text);
            prop_assume!(kept.parsed().errors.is_empty());
            let digits: Vec<usize> = text.match_indices(|c: char| c.is_ascii_digit()).map(|(i, _)| i).collect();
            prop_assume!(!digits.is_empty());
            let i = digits[((digits.len() as f64) * at) as usize % digits.len()];
            let mut new = text.clone();
            new.insert(i, '7');
            let reparsed = same_as_whole(&mut kept, text, &new);
            // The digit is in a declaration, or in a comment between two.
            if parse(&new).errors.is_empty() {
                prop_assert!(
                    matches!(&reparsed, Reparsed::Declarations { old, new, .. } if old.len() <= 2 && *new <= 2),
                    "{reparsed:?}"
                );
            }
        }
    }
}
