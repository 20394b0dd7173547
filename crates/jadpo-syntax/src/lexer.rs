//! The lexer: logos finds the tokens, this module gives them their values and turns
//! every lexical mistake into a [`SyntaxError`] without stopping.
//!
//! Bad literals keep a placeholder value (an invalid duration lexes as a duration of
//! zero) and unknown characters are dropped, so the parser sees a well-formed stream
//! and one mistake yields one diagnostic.

use crate::{
    SyntaxError, SyntaxErrorKind,
    ast::{Comment, CommentKind, CompareOp, Span},
};
use logos::Logos;
use std::borrow::Cow;
use std::fmt;

/// Blocks, lists, calls and parameter lists nest at most this deep. The limit keeps
/// every later phase, which walks the tree recursively, far from the stack's end.
pub const MAX_NESTING: usize = 64;

/// The tokens logos recognises. Values are computed afterwards, in [`Lexer`].
#[derive(Logos, Debug, Clone, Copy, PartialEq, Eq)]
#[logos(skip r"[ \t\r\n\f]+")]
enum Raw {
    #[regex(r"//[^\n]*", allow_greedy = true)]
    LineComment,
    #[token("/*", block_comment)]
    BlockComment(bool),
    #[token("\"", string)]
    Str(bool),
    #[regex(r"[0-9][0-9A-Za-z_]*")]
    Number,
    /// `50/s`: a count over a unit, one token as a duration is.
    #[regex(r"[0-9][0-9_]*/[A-Za-z]+")]
    Rate,
    /// A name or a keyword: logos finds the word, [`keyword`] tells which (one
    /// tight loop over the word's bytes, rather than a state per keyword letter).
    #[regex(r"[A-Za-z_][A-Za-z0-9_]*")]
    Ident,
    Event,
    Connection,
    Action,
    Subscriber,
    Schedule,
    Test,
    True,
    False,
    Fake,
    Emit,
    Wait,
    Retry,
    Expect,
    Breaker,
    And,
    Or,
    Not,
    In,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("<")]
    Lt,
    #[token("<=")]
    LtEq,
    #[token(">")]
    Gt,
    #[token(">=")]
    GtEq,
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(":")]
    Colon,
    #[token(",")]
    Comma,
    #[token(".")]
    Dot,
    #[token("?")]
    Question,
    #[token("*")]
    Star,
}

/// The keyword a word spells, if it is one.
fn keyword(word: &str) -> Option<Raw> {
    Some(match word {
        "event" => Raw::Event,
        "connection" => Raw::Connection,
        "action" => Raw::Action,
        "subscriber" => Raw::Subscriber,
        "schedule" => Raw::Schedule,
        "test" => Raw::Test,
        "true" => Raw::True,
        "false" => Raw::False,
        "fake" => Raw::Fake,
        "emit" => Raw::Emit,
        "wait" => Raw::Wait,
        "retry" => Raw::Retry,
        "expect" => Raw::Expect,
        "breaker" => Raw::Breaker,
        "and" => Raw::And,
        "or" => Raw::Or,
        "not" => Raw::Not,
        "in" => Raw::In,
        _ => return None,
    })
}

/// Consumes a block comment; false when it never ends.
fn block_comment(lex: &mut logos::Lexer<Raw>) -> bool {
    match lex.remainder().find("*/") {
        Some(i) => {
            lex.bump(i + 2);
            true
        }
        None => {
            lex.bump(lex.remainder().len());
            false
        }
    }
}

/// Consumes a string up to its closing quote; false when the line ends first.
fn string(lex: &mut logos::Lexer<Raw>) -> bool {
    let rest = lex.remainder().as_bytes();
    let mut i = 0;
    while i < rest.len() {
        match rest[i] {
            b'"' => {
                lex.bump(i + 1);
                return true;
            }
            b'\n' => break,
            // An escaped character cannot close the string; a newline still ends it.
            b'\\' if rest.get(i + 1).is_some_and(|&b| b != b'\n') => i += 2,
            _ => i += 1,
        }
    }
    // The loop stops at a newline or at the end of the text, both character boundaries.
    lex.bump(i.min(rest.len()));
    false
}

/// Whether the next token of `rest` is `.`, past whitespace and comments (which are
/// trivia here as everywhere: `event /* the payment */ .id` is a path).
fn dot_follows(rest: &str) -> bool {
    let mut rest = rest;
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("//") {
            match after.find('\n') {
                Some(i) => rest = &after[i..],
                None => return false,
            }
        } else if let Some(after) = rest.strip_prefix("/*") {
            match after.find("*/") {
                Some(i) => rest = &after[i + 2..],
                None => return false,
            }
        } else {
            return rest.starts_with('.');
        }
    }
}

/// A token with its value, as the parser sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok<'a> {
    Ident(&'a str),
    Str(Cow<'a, str>),
    Int(i64),
    /// Milliseconds.
    Duration(u64),
    /// `50/s` as written; the checker reads the count and the unit.
    Rate(&'a str),
    Event,
    /// `event` directly followed by `.`: the head of a path such as `event.id`, never
    /// the start of a declaration. Telling the two apart here keeps error recovery
    /// from restarting inside a broken declaration's arguments.
    EventRef,
    Connection,
    Action,
    Subscriber,
    Schedule,
    Test,
    True,
    False,
    Fake,
    Emit,
    Wait,
    Retry,
    Expect,
    Breaker,
    And,
    Or,
    Not,
    In,
    /// A comparison: `==`, `!=`, `<`, `<=`, `>`, `>=`.
    Compare(CompareOp),
    LBrace,
    RBrace,
    LParen,
    RParen,
    LBracket,
    RBracket,
    Colon,
    Comma,
    Dot,
    Question,
    Star,
}

impl fmt::Display for Tok<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Tok::Ident(s) => return write!(f, "`{s}`"),
            Tok::Str(_) => "a string",
            Tok::Int(_) => "an integer",
            Tok::Duration(_) => "a duration",
            Tok::Rate(_) => "a rate",
            Tok::Event | Tok::EventRef => "`event`",
            Tok::Connection => "`connection`",
            Tok::Action => "`action`",
            Tok::Subscriber => "`subscriber`",
            Tok::Schedule => "`schedule`",
            Tok::Test => "`test`",
            Tok::True => "`true`",
            Tok::False => "`false`",
            Tok::Fake => "`fake`",
            Tok::Emit => "`emit`",
            Tok::Wait => "`wait`",
            Tok::Retry => "`retry`",
            Tok::Expect => "`expect`",
            Tok::Breaker => "`breaker`",
            Tok::And => "`and`",
            Tok::Or => "`or`",
            Tok::Not => "`not`",
            Tok::In => "`in`",
            Tok::Compare(op) => return write!(f, "`{}`", op.as_str()),
            Tok::LBrace => "`{`",
            Tok::RBrace => "`}`",
            Tok::LParen => "`(`",
            Tok::RParen => "`)`",
            Tok::LBracket => "`[`",
            Tok::RBracket => "`]`",
            Tok::Colon => "`:`",
            Tok::Comma => "`,`",
            Tok::Dot => "`.`",
            Tok::Question => "`?`",
            Tok::Star => "`*`",
        };
        f.write_str(s)
    }
}

/// The parser's view of the token stream.
pub type Spanned<'a> = (usize, Tok<'a>, usize);

/// Turns source text into tokens with values, collecting lexical errors as it goes.
pub struct Lexer<'a, 'e> {
    src: &'a str,
    inner: logos::Lexer<'a, Raw>,
    errors: &'e mut Vec<SyntaxError>,
    /// The previous invalid character's span, so that a run of them is one error.
    invalid_run: Option<Span>,
    depth: usize,
    /// Nesting went past [`MAX_NESTING`] once already: reported once per file.
    too_deep: bool,
    /// The comments passed so far, in source order: trivia the parser never sees.
    comments: Vec<Comment>,
    /// Where the last token ended when it was a `.`, else `usize::MAX`: a word that
    /// starts right there is a field name, whatever it spells.
    dot_end: usize,
    /// Where the tokens end: the text's end, or the end of the piece being read
    /// ([`Lexer::piece`]); a token that starts there or later is not read.
    end: usize,
    /// A token began before `end` and ended after it.
    crossed: bool,
}

impl<'a, 'e> Lexer<'a, 'e> {
    pub fn new(src: &'a str, errors: &'e mut Vec<SyntaxError>) -> Self {
        Lexer {
            src,
            inner: Raw::lexer(src),
            errors,
            invalid_run: None,
            depth: 0,
            too_deep: false,
            comments: Vec::new(),
            dot_end: usize::MAX,
            end: src.len(),
            crossed: false,
        }
    }

    /// The tokens of `src[start..end]`, with their places in the whole of `src`, as
    /// the whole text's lexer would see them: its lookahead may read past `end`.
    /// `start` must be a character boundary.
    pub(crate) fn piece(src: &'a str, start: usize, end: usize, errors: &'e mut Vec<SyntaxError>) -> Self {
        let mut lexer = Lexer::new(src, errors);
        lexer.inner.bump(start);
        lexer.end = end;
        lexer
    }

    /// Whether a token began inside the piece and ended past it.
    pub(crate) fn crossed_end(&self) -> bool {
        self.crossed
    }

    /// The comments passed so far, in source order; after the last token, every
    /// comment of the text.
    pub fn take_comments(&mut self) -> Vec<Comment> {
        std::mem::take(&mut self.comments)
    }

    fn error(&mut self, kind: SyntaxErrorKind, span: Span, message: String, help: Option<&str>) {
        self.errors.push(SyntaxError { kind, span, message, help: help.map(str::to_string) });
    }

    #[cold]
    fn flush_invalid(&mut self) {
        if let Some(span) = self.invalid_run.take() {
            let text = &self.src[span.range()];
            self.error(
                SyntaxErrorKind::InvalidToken,
                span,
                format!("`{}` is not a token of the language", text.escape_debug()),
                None,
            );
        }
    }

    fn next_token(&mut self) -> Option<Spanned<'a>> {
        loop {
            let mut raw = self.inner.next();
            let range = self.inner.span();
            if range.start >= self.end {
                raw = None;
            } else if range.end > self.end {
                self.crossed = true;
            }
            let span = Span::new(range.start, range.end);
            let raw = match raw {
                None => {
                    self.flush_invalid();
                    return None;
                }
                Some(Err(())) => {
                    self.invalid_run = Some(match self.invalid_run {
                        Some(run) if run.end == span.start => run.to(span),
                        Some(_) => {
                            self.flush_invalid();
                            span
                        }
                        None => span,
                    });
                    continue;
                }
                Some(Ok(raw)) => raw,
            };
            // Checked here so that the common case, no pending invalid run, costs no call.
            if self.invalid_run.is_some() {
                self.flush_invalid();
            }
            // Comments are kept as trivia, even where nesting is too deep: whoever
            // rewrites the text must be able to account for every one.
            match raw {
                Raw::LineComment => {
                    // A CRLF line's `\r` belongs to the line break, not the comment.
                    let end = span.end - u32::from(self.inner.slice().ends_with('\r'));
                    self.comments.push(Comment { span: Span { start: span.start, end }, kind: CommentKind::Line });
                    continue;
                }
                Raw::BlockComment(terminated) => {
                    self.comments.push(Comment { span, kind: CommentKind::Block { terminated } });
                }
                _ => {}
            }
            let bracket =
                matches!(raw, Raw::LBrace | Raw::LParen | Raw::LBracket | Raw::RBrace | Raw::RParen | Raw::RBracket);
            if self.depth > MAX_NESTING && !bracket {
                // The bracket that passes the nesting limit is kept with nothing inside
                // it, so it still closes: one error, and the rest of the file parses.
                continue;
            }
            let text = self.inner.slice();
            let raw = if raw == Raw::Ident { keyword(text).unwrap_or(Raw::Ident) } else { raw };
            // A keyword written directly after `.` names a field (`event.connection`,
            // `event.event`). Only directly: a keyword after `.` and a space or a line
            // break still starts a declaration, so that a path left unfinished
            // (`on: event.` before `subscriber next {`) costs one error, not the next
            // declaration.
            let field_name = self.dot_end == range.start;
            let tok = match raw {
                Raw::LineComment | Raw::BlockComment(true) => continue,
                Raw::Event
                | Raw::Connection
                | Raw::Action
                | Raw::Subscriber
                | Raw::Schedule
                | Raw::Test
                | Raw::True
                | Raw::False
                | Raw::Fake
                | Raw::Emit
                | Raw::Wait
                | Raw::Retry
                | Raw::Expect
                | Raw::Breaker
                | Raw::And
                | Raw::Or
                | Raw::Not
                | Raw::In
                    if field_name =>
                {
                    Tok::Ident(text)
                }
                Raw::BlockComment(false) => {
                    self.error(
                        SyntaxErrorKind::UnterminatedComment,
                        Span::new(range.start, range.start + 2),
                        "this block comment is never closed".into(),
                        Some("end it with `*/`; block comments do not nest"),
                    );
                    continue;
                }
                Raw::Str(terminated) => {
                    if !terminated {
                        self.error(
                            SyntaxErrorKind::UnterminatedString,
                            Span::new(range.start, range.start + 1),
                            "this string is never closed".into(),
                            Some("close it with `\"` on the same line; write a newline in a string as `\\n`"),
                        );
                    }
                    let inner = if terminated { &text[1..text.len() - 1] } else { &text[1..] };
                    Tok::Str(self.unescape(inner, range.start + 1))
                }
                Raw::Number => self.number(text, span),
                Raw::Ident => Tok::Ident(text),
                Raw::Event => {
                    if dot_follows(self.inner.remainder()) {
                        Tok::EventRef
                    } else {
                        Tok::Event
                    }
                }
                Raw::Connection => Tok::Connection,
                Raw::Action => Tok::Action,
                Raw::Subscriber => Tok::Subscriber,
                Raw::Schedule => Tok::Schedule,
                Raw::Test => Tok::Test,
                Raw::True => Tok::True,
                Raw::False => Tok::False,
                Raw::Fake => Tok::Fake,
                Raw::Emit => Tok::Emit,
                Raw::Wait => Tok::Wait,
                Raw::Retry => Tok::Retry,
                Raw::Expect => Tok::Expect,
                Raw::Breaker => Tok::Breaker,
                Raw::And => Tok::And,
                Raw::Or => Tok::Or,
                Raw::Not => Tok::Not,
                Raw::In => Tok::In,
                Raw::EqEq => Tok::Compare(CompareOp::Eq),
                Raw::NotEq => Tok::Compare(CompareOp::Ne),
                Raw::Lt => Tok::Compare(CompareOp::Lt),
                Raw::LtEq => Tok::Compare(CompareOp::Le),
                Raw::Gt => Tok::Compare(CompareOp::Gt),
                Raw::GtEq => Tok::Compare(CompareOp::Ge),
                Raw::Rate => Tok::Rate(text),
                Raw::LBrace | Raw::LParen | Raw::LBracket => {
                    self.depth += 1;
                    if self.depth > MAX_NESTING + 1 {
                        continue;
                    }
                    if self.depth == MAX_NESTING + 1 && !self.too_deep {
                        self.too_deep = true;
                        self.error(
                            SyntaxErrorKind::NestingTooDeep,
                            span,
                            format!("blocks, lists and calls nest at most {MAX_NESTING} deep"),
                            None,
                        );
                    }
                    match raw {
                        Raw::LBrace => Tok::LBrace,
                        Raw::LParen => Tok::LParen,
                        _ => Tok::LBracket,
                    }
                }
                Raw::RBrace | Raw::RParen | Raw::RBracket => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth > MAX_NESTING {
                        continue;
                    }
                    match raw {
                        Raw::RBrace => Tok::RBrace,
                        Raw::RParen => Tok::RParen,
                        _ => Tok::RBracket,
                    }
                }
                Raw::Colon => Tok::Colon,
                Raw::Comma => Tok::Comma,
                Raw::Dot => Tok::Dot,
                Raw::Question => Tok::Question,
                Raw::Star => Tok::Star,
            };
            self.dot_end = if matches!(tok, Tok::Dot) { range.end } else { usize::MAX };
            return Some((range.start, tok, range.end));
        }
    }

    /// An integer, or a duration when letters follow the digits.
    fn number(&mut self, text: &str, span: Span) -> Tok<'a> {
        if text.bytes().all(|b| b.is_ascii_digit() || b == b'_') {
            return match parse_int(text) {
                Some(n) => Tok::Int(n),
                None => {
                    self.error(
                        SyntaxErrorKind::InvalidNumber,
                        span,
                        format!("`{text}` is larger than the largest integer, {}", i64::MAX),
                        None,
                    );
                    Tok::Int(0)
                }
            };
        }
        match parse_duration(text) {
            Ok(ms) => Tok::Duration(ms),
            Err(why) => {
                self.error(
                    SyntaxErrorKind::InvalidDuration,
                    span,
                    format!("`{text}` is not a valid duration: {why}"),
                    Some("a duration is an integer and a unit (`ms`, `s`, `m`, `h`, `d`), compound units in decreasing order: `500ms`, `1h30m`, `3d`"),
                );
                Tok::Duration(0)
            }
        }
    }

    /// Decodes a string's escapes; `base` is the byte offset of `text` in the source.
    fn unescape(&mut self, text: &'a str, base: usize) -> Cow<'a, str> {
        if !text.contains('\\') {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len());
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if c != '\\' {
                out.push(c);
                continue;
            }
            let decoded = match chars.next() {
                Some((_, '"')) => Some('"'),
                Some((_, '\\')) => Some('\\'),
                Some((_, 'n')) => Some('\n'),
                Some((_, 't')) => Some('\t'),
                Some((_, 'r')) => Some('\r'),
                Some((_, 'u')) => {
                    // `\u{HEX}`: 1 to 6 hex digits naming a Unicode scalar value.
                    let rest = &text[i + 2..];
                    let value = rest
                        .strip_prefix('{')
                        .and_then(|r| r.find('}').map(|end| &r[..end]))
                        .filter(|hex| (1..=6).contains(&hex.len()))
                        .and_then(|hex| u32::from_str_radix(hex, 16).ok().map(|v| (hex.len(), v)));
                    match value.and_then(|(len, v)| char::from_u32(v).map(|c| (len, c))) {
                        Some((len, c)) => {
                            for _ in 0..len + 2 {
                                chars.next();
                            }
                            Some(c)
                        }
                        None => None,
                    }
                }
                _ => None,
            };
            match decoded {
                Some(c) => out.push(c),
                None => {
                    let end = chars.peek().map_or(text.len(), |&(j, _)| j);
                    let end = if text[i..].starts_with("\\u") { i + 2 } else { end.max(i + 1) };
                    let seq = &text[i..end];
                    self.error(
                        SyntaxErrorKind::InvalidEscape,
                        Span::new(base + i, base + end),
                        format!("`{seq}` is not an escape a string takes"),
                        Some("the escapes are `\\\"`, `\\\\`, `\\n`, `\\t`, `\\r` and `\\u{1F600}`"),
                    );
                }
            }
        }
        Cow::Owned(out)
    }
}

impl<'a> Iterator for Lexer<'a, '_> {
    type Item = Result<Spanned<'a>, crate::GrammarError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_token().map(Ok)
    }
}

/// An unsigned integer with `_` separators; `None` past `i64::MAX`.
pub fn parse_int(text: &str) -> Option<i64> {
    let mut n: i64 = 0;
    for b in text.bytes() {
        if b == b'_' {
            continue;
        }
        n = n.checked_mul(10)?.checked_add(i64::from(b - b'0'))?;
    }
    Some(n)
}

/// A duration such as `500ms`, `1h30m` or `3d` in milliseconds, or why it is not one.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    const UNITS: [(&str, u64); 5] = [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut total: u64 = 0;
    let mut last_rank: Option<usize> = None;
    while i < bytes.len() {
        let start = i;
        if !bytes[i].is_ascii_digit() {
            return Err(format!("expected digits at `{}`", &text[i..]));
        }
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
            i += 1;
        }
        let digits = &text[start..i];
        let unit_start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let unit = &text[unit_start..i];
        if unit.is_empty() {
            return Err(if i < bytes.len() {
                format!("`{}` is not a unit", &text[i..])
            } else {
                format!("`{digits}` has no unit")
            });
        }
        let Some(rank) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(format!("`{unit}` is not a unit"));
        };
        if let Some(last) = last_rank {
            if rank == last {
                return Err(format!("the unit `{unit}` appears twice"));
            }
            if rank < last {
                return Err(format!("`{unit}` comes after a smaller unit; write units in decreasing order"));
            }
        }
        last_rank = Some(rank);
        let n = parse_int(digits).ok_or_else(|| "it is too large".to_string())? as u64;
        total = n
            .checked_mul(UNITS[rank].1)
            .and_then(|ms| total.checked_add(ms))
            .filter(|&ms| ms <= i64::MAX as u64)
            .ok_or_else(|| "it is too large".to_string())?;
    }
    Ok(total)
}
