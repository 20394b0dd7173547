//! The jadpo language's syntax: a logos lexer, a LALRPOP parser and a syntax tree with
//! byte spans on every node.
//!
//! Parsing never fails: [`parse`] returns the tree *and* the syntax errors it found,
//! resuming after each broken declaration at the next one. LALRPOP stays behind this
//! module's small API.

pub mod ast;
pub mod lexer;
mod pieces;
mod reparse;

pub use reparse::{Change, KeptParse, Reparsed};

use ast::Span;
use lalrpop_util::ParseError;
use lexer::{Lexer, Tok};

#[allow(clippy::all, clippy::pedantic, unused_parens, unused_qualifications)]
mod grammar {
    include!(concat!(env!("OUT_DIR"), "/jadpo.rs"));
}

/// Stacks on which the parser gathers the elements of the lists it is reading.
///
/// A parsed program keeps tens of thousands of small lists, and the spare capacity
/// left by growing each one would double the tree's size; growing and then shrinking
/// each one costs several allocations. Instead the elements of open lists (nested
/// lists open one inside the other, so they form a stack) are pushed here, and a
/// closed list's elements are moved out into a vector of exactly their number: one
/// allocation per list. After a syntax error, the elements of the lists left open
/// stay below the later ones, unused, until the parse ends.
#[derive(Default)]
pub(crate) struct Lists<'a> {
    /// The file's declarations, in order: the one list that is not a stack.
    pub decls: Vec<ast::Decl<'a>>,
    pub entries: Vec<ast::Entry<'a>>,
    pub values: Vec<ast::Value<'a>>,
    pub items: Vec<ast::Item<'a>>,
    pub params: Vec<ast::Param<'a>>,
}

impl Lists<'_> {
    /// The elements from `start` on, as a list of exactly their number.
    pub(crate) fn take<T>(stack: &mut Vec<T>, start: usize) -> Vec<T> {
        stack.drain(start.min(stack.len())..).collect()
    }
}

/// A mistake the grammar's own rules find, beside the tokens LALRPOP did not expect.
/// The lexer never yields one; it is its iterator's error type because LALRPOP
/// requires the two to be the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrammarError {
    /// A keyword where a declaration's name belongs: `event event { ... }`.
    KeywordAsName { span: Span },
}

/// The words a name cannot be.
pub const KEYWORDS: [&str; 12] =
    ["event", "connection", "action", "subscriber", "schedule", "test", "true", "false", "and", "or", "not", "in"];

/// What went wrong, lexically or syntactically; the checker maps each to its code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyntaxErrorKind {
    InvalidToken,
    UnterminatedString,
    InvalidEscape,
    UnterminatedComment,
    InvalidNumber,
    InvalidDuration,
    UnexpectedToken,
    UnexpectedEof,
    NestingTooDeep,
}

/// A syntax error with its place and a message in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    pub kind: SyntaxErrorKind,
    pub span: Span,
    pub message: String,
    pub help: Option<String>,
}

/// A parsed file: its tree, every syntax error, and its comments.
#[derive(Debug)]
pub struct Parsed<'a> {
    pub file: ast::File<'a>,
    /// Sorted by position.
    pub errors: Vec<SyntaxError>,
    /// Every comment of the text, line and block, in source order (trivia: no node
    /// of the tree refers to them; place them by their spans).
    pub comments: Vec<ast::Comment>,
}

/// The most bytes a file's text may have, since spans are `u32` byte offsets. The
/// tools refuse a longer text before parsing it.
pub const MAX_SOURCE_LEN: usize = u32::MAX as usize;

/// Parses one file. Never fails and never panics: a broken declaration becomes
/// [`ast::Body::Broken`] (or is skipped when not even its name was read) and an
/// error.
///
/// A long text is read in pieces at once, one per core, cut where a line starts
/// with a declaration's keyword. The pieces' trees are the whole text's tree when
/// every piece parsed without an error and no token crossed a cut: the grammar is
/// LR(1), so a text has one parse, and a file is a list of declarations, so the
/// pieces' parses joined are a parse of the whole. Otherwise (a syntax error, a
/// block comment across a cut) the text is parsed again in one piece, so errors
/// and their recovery are exactly those of one piece.
pub fn parse(src: &str) -> Parsed<'_> {
    let pieces = if src.len() < PIECE_MIN_LEN {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(src.len() / PIECE_MIN_LEN))
    };
    if pieces > 1
        && let Some(parsed) = pieces::parse_in_pieces(src, pieces)
    {
        return parsed;
    }
    parse_serial(src)
}

/// The shortest text read in more than one piece, and the shortest piece: below
/// this, starting a thread costs more than it saves.
pub const PIECE_MIN_LEN: usize = 1 << 20;

/// The text in one piece.
pub(crate) fn parse_serial(src: &str) -> Parsed<'_> {
    let mut errors = Vec::new();
    let mut recovered = Vec::new();
    let mut lists = Lists::default();
    let mut lexer = Lexer::new(src, &mut errors);
    let result = grammar::FileParser::new().parse(src, &mut recovered, &mut lists, &mut lexer);
    let comments = lexer.take_comments();
    let file = match result {
        Ok(()) => {
            let mut decls = lists.decls;
            // The list grew by doubling; the checker holds it beside everything it builds.
            decls.shrink_to_fit();
            ast::File { decls }
        }
        Err(e) => {
            recovered.push(lalrpop_util::ErrorRecovery { error: e, dropped_tokens: Vec::new() });
            ast::File::default()
        }
    };
    errors.extend(recovered.into_iter().map(|r| parse_error(src, r.error)));
    errors.sort_by_key(|e| (e.span.start, e.span.end));
    Parsed { file, errors, comments }
}

fn parse_error(src: &str, e: ParseError<usize, Tok<'_>, GrammarError>) -> SyntaxError {
    match e {
        ParseError::UnrecognizedToken { token: (l, tok, r), expected } => SyntaxError {
            kind: SyntaxErrorKind::UnexpectedToken,
            span: Span::new(l, r),
            message: unexpected(src, l, r, &tok),
            help: expected_help(&expected),
        },
        ParseError::ExtraToken { token: (l, tok, r) } => SyntaxError {
            kind: SyntaxErrorKind::UnexpectedToken,
            span: Span::new(l, r),
            message: unexpected(src, l, r, &tok),
            help: None,
        },
        ParseError::UnrecognizedEof { expected, .. } => SyntaxError {
            kind: SyntaxErrorKind::UnexpectedEof,
            span: last_char(src),
            message: "the file ends in the middle of a declaration".into(),
            help: expected_help(&expected),
        },
        // The lexer reports its own errors and never hands the parser one; should it
        // ever, the error still gets a place and a message rather than a panic.
        ParseError::InvalidToken { location } => SyntaxError {
            kind: SyntaxErrorKind::InvalidToken,
            span: Span::new(location, location),
            message: "a character or sequence that is no token".into(),
            help: None,
        },
        ParseError::User { error: GrammarError::KeywordAsName { span } } => SyntaxError {
            kind: SyntaxErrorKind::UnexpectedToken,
            span,
            message: format!("`{}` is a keyword and cannot name a declaration", src.get(span.range()).unwrap_or("")),
            help: Some(format!(
                "choose another name; the keywords are {}",
                KEYWORDS.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
            )),
        },
    }
}

/// "unexpected duration `5s`": what kind of token, and the token as written.
fn unexpected(src: &str, l: usize, r: usize, tok: &Tok<'_>) -> String {
    let text = src.get(l..r).unwrap_or("");
    let shown: String =
        if text.chars().count() > 40 { text.chars().take(37).chain("...".chars()).collect() } else { text.into() };
    match tok {
        Tok::Str(_) => format!("unexpected string `{shown}`"),
        Tok::Int(_) => format!("unexpected integer `{shown}`"),
        Tok::Duration(_) => format!("unexpected duration `{shown}`"),
        _ => format!("unexpected `{shown}`"),
    }
}

/// The span of the last character that is not whitespace, where an error about the
/// end of the file is best shown.
fn last_char(src: &str) -> Span {
    let trimmed = src.trim_end();
    match trimmed.chars().next_back() {
        Some(c) => Span::new(trimmed.len() - c.len_utf8(), trimmed.len()),
        None => Span::new(0, 0),
    }
}

/// "expected one of ..." from LALRPOP's terminal names, in the words of the language.
fn expected_help(expected: &[String]) -> Option<String> {
    let mut words: Vec<String> = expected
        .iter()
        .map(|t| {
            let t = t.trim_matches('"');
            match t {
                "identifier" => "a name".to_string(),
                "string" | "duration" => format!("a {t}"),
                "integer" => "an integer".to_string(),
                "rate" => "a rate".to_string(),
                "compare" => "a comparison".to_string(),
                "event." => "`event.`".to_string(),
                _ => format!("`{t}`"),
            }
        })
        .collect();
    words.dedup();
    // The contextual step words are names too; listing them beside "a name" only adds noise.
    if words.iter().any(|w| w == "a name") {
        words.retain(|w| !matches!(w.as_str(), "`fake`" | "`emit`" | "`wait`" | "`retry`" | "`expect`" | "`breaker`"));
    }
    // Where a value may end, a condition may go on; what a writer needs then is
    // how the entry ends, not every way a condition continues.
    if words.iter().any(|w| w == "`}`") {
        words.retain(|w| !matches!(w.as_str(), "a comparison" | "`and`" | "`or`" | "`not`" | "`in`"));
    }
    match words.len() {
        0 => None,
        1 => Some(format!("expected {}", words[0])),
        _ => {
            let last = words.pop().unwrap_or_default();
            Some(format!("expected {} or {last}", words.join(", ")))
        }
    }
}
