//! The canonical layout of jadpo source, for `jadpoc fmt` and the language server.
//!
//! [`format()`] parses the text and prints the tree again, putting every comment back
//! where it was relative to the code around it. The rules are in docs/fmt.md; in
//! short: 4-space indent, one blank line between declarations, one entry per line in
//! a declaration's block, a nested block, list or call of scalars on one line when it
//! fits in [`MAX_WIDTH`] columns, literals as written, blank lines between entries
//! kept (at most one), a single trailing newline.
//!
//! Comments are trivia in the syntax tree (`Parsed::comments`), attached to no node.
//! The printer walks the tree in source order with a cursor over the comments: a
//! comment is written above the entry (or declaration, step, list item, argument)
//! it precedes, after the one whose line it ends, or before the closing bracket when
//! nothing follows it. A comment written inside one entry's tokens (between a key and
//! its value, say) cannot stay there without splitting the entry, so it moves above
//! that entry.

use jadpo_syntax::ast::{
    Block, Body, Comment, CommentKind, Decl, DeclKind, Entry, Expr, File, Item, Param, Span, Step, StepKind, Value,
    ValueKind,
};
use jadpo_syntax::{Parsed, SyntaxError, parse};
use std::fmt;

/// A nested block, list or call stays on one line only if the line fits in this many
/// columns (characters, not bytes).
pub const MAX_WIDTH: usize = 100;

/// The indentation of one level.
const INDENT: &str = "    ";

/// Why a text was not formatted: it has syntax errors, which a formatter must not
/// guess its way around (as gofmt and rustfmt refuse too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    /// The parse's errors, sorted by position, as `jadpo_syntax` reports them.
    pub errors: Vec<SyntaxError>,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(f, "{n} syntax error{}: the text was not formatted", if n == 1 { "" } else { "s" })
    }
}

impl std::error::Error for FormatError {}

/// The text in the canonical layout, or the syntax errors that prevent formatting.
///
/// Idempotent (`format(format(x)) == format(x)`) and meaning-preserving: the
/// output parses to the same tree, spans aside, with the same comments. Editors call
/// this on a buffer's whole text.
pub fn format(source: &str) -> Result<String, FormatError> {
    format_parsed(source, &parse(source))
}

/// As [`format()`], for a text already parsed (the language server keeps each
/// buffer's parse). `parsed` must be `parse(source)`.
pub fn format_parsed(source: &str, parsed: &Parsed<'_>) -> Result<String, FormatError> {
    if !parsed.errors.is_empty() {
        return Err(FormatError { errors: parsed.errors.clone() });
    }
    let mut p = Printer {
        src: source,
        comments: &parsed.comments,
        next: 0,
        out: String::with_capacity(source.len() + source.len() / 8),
        indent: 0,
        hoisted: Vec::new(),
        inline: 0,
    };
    p.file(&parsed.file);
    Ok(p.out)
}

/// What the printer needs of the children of a bracketed list (a block's entries, a
/// list's items, a call's arguments, a test's steps, ...).
trait Child {
    /// From the child's first token to its last.
    fn span(&self) -> Span;
    /// Whether the child can sit on one line beside others: a literal, a name, a
    /// path, or a call whose arguments are all such.
    fn is_scalar(&self) -> bool;
}

impl Child for Entry<'_> {
    fn span(&self) -> Span {
        self.key.span.to(self.value.span)
    }
    fn is_scalar(&self) -> bool {
        is_scalar(&self.value)
    }
}

impl Child for Value<'_> {
    fn span(&self) -> Span {
        self.span
    }
    fn is_scalar(&self) -> bool {
        is_scalar(self)
    }
}

impl Child for Item<'_> {
    fn span(&self) -> Span {
        match self.times {
            Some((_, s)) => self.value.span.to(s),
            None => self.value.span,
        }
    }
    fn is_scalar(&self) -> bool {
        is_scalar(&self.value)
    }
}

impl Child for Param<'_> {
    fn span(&self) -> Span {
        self.name.span.to(self.ty.span)
    }
    fn is_scalar(&self) -> bool {
        true
    }
}

impl Child for Step<'_> {
    fn span(&self) -> Span {
        self.span
    }
    fn is_scalar(&self) -> bool {
        false
    }
}

fn is_scalar(v: &Value<'_>) -> bool {
    match &v.kind {
        ValueKind::Block(_) | ValueKind::List(_) => false,
        ValueKind::Call { args, .. } => args.iter().all(is_scalar),
        _ => true,
    }
}

/// How a bracketed list is written.
#[derive(Clone, Copy)]
struct Brackets {
    open: &'static str,
    close: &'static str,
    /// Written after each child when the list takes one child per line (`,` for
    /// lists, arguments and parameters; nothing for entries and steps).
    sep: &'static str,
    /// Spaces inside the brackets on one line: `{ a: 1 }` but `[a, b]`.
    pad: bool,
    /// Whether the list may sit on one line (when all its children are scalars, it
    /// holds no comment and it fits).
    may_inline: bool,
}

const BLOCK: Brackets = Brackets { open: "{", close: "}", sep: "", pad: true, may_inline: true };
const DECL_BLOCK: Brackets = Brackets { may_inline: false, ..BLOCK };
const LIST: Brackets = Brackets { open: "[", close: "]", sep: ",", pad: false, may_inline: true };
const ARGS: Brackets = Brackets { open: "(", close: ")", sep: ",", pad: false, may_inline: true };

struct Printer<'s> {
    src: &'s str,
    comments: &'s [Comment],
    /// The first comment not yet written.
    next: usize,
    out: String,
    indent: usize,
    /// Comments met inside an entry's tokens, to be written above that entry (see
    /// the module's documentation); a stack shared by nested entries.
    hoisted: Vec<usize>,
    /// Above zero while a list is being tried on one line: lists inside it are
    /// written on one line too, the outer one measures the whole line.
    inline: usize,
}

impl<'s> Printer<'s> {
    /// Moves the comments that start before `pos`, a token about to be written in
    /// the middle of a line, to the enclosing entry's hoisted comments.
    fn tok(&mut self, pos: u32) {
        while let Some(c) = self.comments.get(self.next) {
            if c.span.start >= pos {
                break;
            }
            self.hoisted.push(self.next);
            self.next += 1;
        }
    }

    /// Whether a comment not yet written starts before `pos`.
    fn comment_before(&self, pos: u32) -> bool {
        self.comments.get(self.next).is_some_and(|c| c.span.start < pos)
    }

    /// Whether the source has an empty line between two offsets.
    fn blank_between(&self, from: u32, to: u32) -> bool {
        let gap = self.src.get(from as usize..to as usize).unwrap_or("");
        gap.bytes().filter(|&b| b == b'\n').nth(1).is_some()
    }

    /// Ends the line (leaving one empty line if `blank`) and indents the next.
    fn line_break(&mut self, blank: bool) {
        if !self.out.is_empty() {
            self.out.push('\n');
            if blank {
                self.out.push('\n');
            }
        }
        for _ in 0..self.indent {
            self.out.push_str(INDENT);
        }
    }

    /// A comment's text as written; a line comment loses trailing whitespace.
    fn comment_text(&self, c: Comment) -> &'s str {
        let text = self.src.get(c.span.range()).unwrap_or("");
        match c.kind {
            CommentKind::Line => text.trim_end(),
            CommentKind::Block { .. } => text,
        }
    }

    /// Writes the comments that follow `last` on its line and start before `limit`,
    /// each after the whitespace written before it (so aligned comments stay
    /// aligned). Returns where the last of them ends, or `last`.
    fn trailing(&mut self, mut last: u32, limit: u32) -> u32 {
        while let Some(&c) = self.comments.get(self.next) {
            if c.span.start >= limit {
                break;
            }
            let before = self.src.get(last.min(c.span.start) as usize..c.span.start as usize).unwrap_or("");
            if before.contains('\n') {
                break;
            }
            let gap = before.bytes().rev().take_while(|&b| b == b' ' || b == b'\t').count().max(1);
            for _ in 0..gap {
                self.out.push(' ');
            }
            self.out.push_str(self.comment_text(c));
            self.next += 1;
            last = last.max(c.span.end);
            if c.kind == CommentKind::Line {
                break;
            }
        }
        last
    }

    /// Writes the comments that start before `limit`, each on its own line (with the
    /// comments that follow it on its line). `last` is where the previous code or
    /// comment ended; `first` says nothing was written yet in this list, where an
    /// empty line is never kept. Returns the new `last`.
    fn own_line_comments(&mut self, mut last: u32, limit: u32, first: &mut bool) -> u32 {
        while let Some(&c) = self.comments.get(self.next) {
            if c.span.start >= limit {
                break;
            }
            let blank = !*first && self.blank_between(last, c.span.start);
            self.line_break(blank);
            self.out.push_str(self.comment_text(c));
            self.next += 1;
            *first = false;
            last = self.trailing(c.span.end, limit);
        }
        last
    }

    /// Writes the comments hoisted since `from` above the line that starts at `mark`.
    fn place_hoisted(&mut self, mark: usize, from: usize) {
        if self.hoisted.len() == from {
            return;
        }
        let mut text = String::new();
        for &i in &self.hoisted[from..] {
            text.push_str(self.comment_text(self.comments[i]));
            text.push('\n');
            for _ in 0..self.indent {
                text.push_str(INDENT);
            }
        }
        self.hoisted.truncate(from);
        self.out.insert_str(mark, &text);
    }

    /// The width of the line being written, in characters.
    fn line_width(&self) -> usize {
        let start = self.out.rfind('\n').map_or(0, |i| i + 1);
        self.out[start..].chars().count()
    }

    /// The offset of the first `byte` at or after `from` outside comments; `from`
    /// when there is none (never, for a tree that parsed).
    fn find(&self, from: u32, byte: u8) -> u32 {
        let bytes = self.src.as_bytes();
        let mut i = from as usize;
        let mut c = self.comments.partition_point(|c| c.span.end as usize <= i);
        while i < bytes.len() {
            if let Some(comment) = self.comments.get(c)
                && comment.span.start as usize <= i
            {
                i = comment.span.end as usize;
                c += 1;
                continue;
            }
            if bytes[i] == byte {
                return i as u32;
            }
            i += 1;
        }
        from
    }

    fn file(&mut self, file: &File<'_>) {
        let mut last = 0;
        for (i, decl) in file.decls.iter().enumerate() {
            // One empty line after a declaration, before the comments above the next
            // one if it has any; elsewhere empty lines as written, at most one.
            let mut after_decl = i > 0;
            while let Some(&c) = self.comments.get(self.next) {
                if c.span.start >= decl.span.start {
                    break;
                }
                let blank = after_decl || (!self.out.is_empty() && self.blank_between(last, c.span.start));
                after_decl = false;
                self.line_break(blank);
                self.out.push_str(self.comment_text(c));
                self.next += 1;
                last = self.trailing(c.span.end, decl.span.start);
            }
            let blank = after_decl || (!self.out.is_empty() && self.blank_between(last, decl.span.start));
            self.line_break(blank);
            let (mark, from) = (self.out.len(), self.hoisted.len());
            self.decl(decl);
            self.place_hoisted(mark, from);
            last = self.trailing(decl.span.end, u32::MAX);
        }
        let mut first = self.out.is_empty();
        self.own_line_comments(last, u32::MAX, &mut first);
        if !self.out.is_empty() {
            self.out.push('\n');
        }
    }

    fn decl(&mut self, decl: &Decl<'_>) {
        self.tok(decl.span.start);
        self.out.push_str(decl.kind.keyword());
        self.out.push(' ');
        self.tok(decl.name.span.start);
        match &decl.body {
            Body::Block { params, block } => {
                self.out.push_str(decl.name.text);
                // Comments between the head and the `{` go to the `{` line: moved
                // above the declaration, they would come before the comments of
                // an action's parameters that precede them.
                let mut head_end = decl.name.span.end;
                if decl.kind == DeclKind::Action {
                    let open = self.find(decl.name.span.end, b'(');
                    let close = self.rfind(block.span.start, b')');
                    self.list(params, open, open, close, ARGS, 2, |p, param| p.param(param));
                    head_end = close + 1;
                }
                self.out.push(' ');
                let close = block.span.end.saturating_sub(1);
                self.list(&block.entries, head_end, block.span.start, close, DECL_BLOCK, 0, |p, e| p.entry(e));
            }
            Body::Steps { steps, .. } => {
                // A test's name is its string, quotes included in the span.
                self.out.push_str(self.src.get(decl.name.span.range()).unwrap_or(""));
                self.out.push(' ');
                let open = self.find(decl.name.span.end, b'{');
                let close = decl.span.end.saturating_sub(1);
                self.list(steps, decl.name.span.end, open, close, DECL_BLOCK, 0, |p, step| p.step(step));
            }
            // Only a text with syntax errors has broken declarations, and such a text
            // is not formatted; written as in the source should one ever get here.
            Body::Broken => {
                self.out.push_str(self.src.get(decl.name.span.start as usize..decl.span.end as usize).unwrap_or(""));
            }
        }
    }

    /// The offset of the last `byte` before `before` outside comments; `before` when
    /// there is none (never, for a tree that parsed).
    fn rfind(&self, before: u32, byte: u8) -> u32 {
        let bytes = self.src.as_bytes();
        let mut i = (before as usize).min(bytes.len());
        // The comments that start at or before `i`.
        let mut c = self.comments.partition_point(|c| c.span.start as usize <= i);
        while i > 0 {
            i -= 1;
            while c > 0 && self.comments[c - 1].span.start as usize > i {
                c -= 1;
            }
            if c > 0 && self.comments[c - 1].span.end as usize > i {
                i = self.comments[c - 1].span.start as usize;
                continue;
            }
            if bytes[i] == byte {
                return i as u32;
            }
        }
        before
    }

    fn param(&mut self, param: &Param<'_>) {
        self.tok(param.name.span.start);
        self.out.push_str(param.name.text);
        self.out.push_str(": ");
        self.tok(param.ty.span.start);
        self.out.push_str(param.ty.name.text);
        if param.ty.optional {
            self.out.push('?');
        }
    }

    fn step(&mut self, step: &Step<'_>) {
        self.tok(step.span.start);
        match &step.kind {
            StepKind::Fake { connection, answers } => {
                self.out.push_str("fake ");
                self.name(connection.text, connection.span);
                self.out.push_str(": ");
                self.value(answers, 0);
            }
            StepKind::Emit { event, fields } => {
                self.out.push_str("emit ");
                self.verbatim(event.span);
                self.out.push(' ');
                self.block(fields, BLOCK, 0);
            }
            StepKind::Wait { span, .. } => {
                self.out.push_str("wait ");
                self.tok(span.start);
                self.out.push_str(self.src.get(span.range()).unwrap_or(""));
            }
            StepKind::Retry { subscriber } => {
                self.out.push_str("retry ");
                self.name(subscriber.text, subscriber.span);
            }
            StepKind::Expect { subscriber, block } => {
                self.out.push_str("expect ");
                self.name(subscriber.text, subscriber.span);
                self.out.push(' ');
                self.block(block, BLOCK, 0);
            }
            StepKind::ExpectBreaker { connection, block } => {
                self.out.push_str("expect breaker ");
                self.name(connection.text, connection.span);
                self.out.push(' ');
                self.block(block, BLOCK, 0);
            }
        }
    }

    fn name(&mut self, text: &str, span: Span) {
        self.tok(span.start);
        self.out.push_str(text);
    }

    /// Writes the text of `span` as written, with the comments inside it: a name
    /// whose text is its source (`jadpo.delivery_failed`, where spaces or a comment
    /// around the `.` make it no event's name), kept so that its meaning is.
    fn verbatim(&mut self, span: Span) {
        self.tok(span.start);
        self.out.push_str(self.src.get(span.range()).unwrap_or(""));
        while self.comments.get(self.next).is_some_and(|c| c.span.start < span.end) {
            self.next += 1;
        }
    }

    fn block(&mut self, block: &Block<'_>, brackets: Brackets, reserve: usize) {
        let close = block.span.end.saturating_sub(1);
        self.list(&block.entries, block.span.start, block.span.start, close, brackets, reserve, |p, entry| {
            p.entry(entry)
        });
    }

    fn entry(&mut self, entry: &Entry<'_>) {
        self.tok(entry.key.span.start);
        if entry.key.quoted {
            self.out.push_str(self.src.get(entry.key.span.range()).unwrap_or(""));
        } else {
            self.out.push_str(&entry.key.text);
        }
        self.out.push_str(": ");
        self.value(&entry.value, 0);
    }

    fn item(&mut self, item: &Item<'_>, reserve: usize) {
        match item.times {
            Some((_, span)) => {
                let times = self.src.get(span.range()).unwrap_or("");
                self.value(&item.value, reserve + 3 + times.chars().count());
                self.tok(span.start);
                self.out.push_str(" * ");
                self.out.push_str(times);
            }
            None => self.value(&item.value, reserve),
        }
    }

    /// Writes a value; `reserve` columns follow it on its line.
    fn value(&mut self, value: &Value<'_>, reserve: usize) {
        self.tok(value.span.start);
        match &value.kind {
            ValueKind::Str(_)
            | ValueKind::Int(_)
            | ValueKind::Duration(_)
            | ValueKind::Bool(_)
            | ValueKind::Rate(_) => {
                // Literals as written: `1_250` stays `1_250`, `90m` stays `90m`.
                self.out.push_str(self.src.get(value.span.range()).unwrap_or(""));
            }
            ValueKind::Ident { name, optional } => {
                self.out.push_str(name);
                if *optional {
                    self.out.push('?');
                }
            }
            ValueKind::Path(segments) => self.path(segments),
            ValueKind::LongPath(segments) => self.path(segments),
            ValueKind::Call { name, args } => {
                self.out.push_str(name.text);
                let open = self.find(name.span.end, b'(');
                let close = value.span.end.saturating_sub(1);
                self.list(args, open, open, close, ARGS, reserve, |p, arg| p.value(arg, 1));
            }
            ValueKind::Block(block) => self.block(block, BLOCK, reserve),
            ValueKind::List(items) => {
                let close = value.span.end.saturating_sub(1);
                self.list(items, value.span.start, value.span.start, close, LIST, reserve, |p, item| p.item(item, 1));
            }
            ValueKind::Expr(expr) => self.condition(expr, value.span, reserve),
        }
    }

    /// Writes a condition on one line, one space around each operator; a list
    /// after `in` breaks as any list does.
    fn condition(&mut self, expr: &Expr<'_>, span: Span, reserve: usize) {
        match expr {
            Expr::And(operands) | Expr::Or(operands) => {
                let word = if matches!(expr, Expr::And(_)) { " and " } else { " or " };
                for (i, operand) in operands.iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(word);
                    }
                    self.value(operand, if i + 1 == operands.len() { reserve } else { 0 });
                }
            }
            Expr::Not { operand, span } => {
                self.tok(span.start);
                self.out.push_str("not ");
                self.value(operand, reserve);
            }
            Expr::Compare { op, op_span, left, right } => {
                self.value(left, 0);
                self.tok(op_span.start);
                self.out.push(' ');
                self.out.push_str(op.as_str());
                self.out.push(' ');
                self.value(right, reserve);
            }
            Expr::In { left, list, negated, op_span } => {
                self.value(left, 0);
                self.tok(op_span.start);
                self.out.push_str(if *negated { " not in " } else { " in " });
                self.value(list, reserve);
            }
            Expr::Paren(inner) => {
                self.out.push('(');
                self.value(inner, reserve + 1);
                self.tok(span.end.saturating_sub(1));
                self.out.push(')');
            }
        }
    }

    fn path(&mut self, segments: &[jadpo_syntax::ast::Name<'_>]) {
        for (i, segment) in segments.iter().enumerate() {
            if i > 0 {
                self.out.push('.');
            }
            self.name(segment.text, segment.span);
        }
    }

    /// Writes a bracketed list whose brackets are at `open` and `close` in the
    /// source: on one line when it may and fits, else one child per line. Comments
    /// from `lead` on (`open` or before it) are written inside the brackets.
    #[allow(clippy::too_many_arguments)]
    fn list<T: Child>(
        &mut self,
        children: &[T],
        lead: u32,
        open: u32,
        close: u32,
        brackets: Brackets,
        reserve: usize,
        write: impl Fn(&mut Self, &T),
    ) {
        self.tok(lead);
        self.out.push_str(brackets.open);
        let has_comment = self.comment_before(close);
        if children.is_empty() && !has_comment {
            self.out.push_str(brackets.close);
            return;
        }
        let inline_ok = brackets.may_inline && !has_comment && children.iter().all(Child::is_scalar);
        if inline_ok {
            let mark = self.out.len();
            self.inline += 1;
            if brackets.pad {
                self.out.push(' ');
            }
            for (i, child) in children.iter().enumerate() {
                if i > 0 {
                    self.out.push_str(", ");
                }
                write(self, child);
            }
            if brackets.pad {
                self.out.push(' ');
            }
            self.out.push_str(brackets.close);
            self.inline -= 1;
            if self.inline > 0 || self.line_width() + reserve <= MAX_WIDTH {
                return;
            }
            self.out.truncate(mark);
        }
        self.indent += 1;
        let mut first = true;
        let mut last = self.trailing(open + 1, children.first().map_or(close, |c| c.span().start));
        for (i, child) in children.iter().enumerate() {
            let span = child.span();
            last = self.own_line_comments(last, span.start, &mut first);
            let blank = !first && self.blank_between(last, span.start);
            self.line_break(blank);
            let (mark, from) = (self.out.len(), self.hoisted.len());
            write(self, child);
            self.out.push_str(brackets.sep);
            self.place_hoisted(mark, from);
            let limit = children.get(i + 1).map_or(close, |c| c.span().start);
            last = self.trailing(span.end, limit);
            first = false;
        }
        self.own_line_comments(last, close, &mut first);
        self.indent -= 1;
        self.line_break(false);
        self.out.push_str(brackets.close);
    }
}
