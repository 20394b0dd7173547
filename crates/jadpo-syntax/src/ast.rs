//! The syntax tree: one generic shape for every declaration, byte spans on every node.
//!
//! The tree borrows identifiers from the source text; strings own their text only
//! when escapes had to be decoded.

use std::borrow::Cow;

/// A byte range in one file. `u32` keeps the tree small; longer files are refused
/// ([`crate::MAX_SOURCE_LEN`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start: start as u32, end: end as u32 }
    }
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

/// A comment: trivia kept beside the tokens (the parser never sees it), so that the
/// formatter and the language server can put it back where it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comment {
    /// From `//` to the line's end (line break excluded), or from `/*` to `*/`.
    pub span: Span,
    pub kind: CommentKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommentKind {
    /// `// ...` to the end of the line.
    Line,
    /// `/* ... */`, which may span lines; `terminated` is false when the text ends
    /// first (a syntax error).
    Block { terminated: bool },
}

/// A name with its place in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Name<'a> {
    pub text: &'a str,
    pub span: Span,
}

/// One file's declarations, in source order.
#[derive(Debug, Clone, Default)]
pub struct File<'a> {
    pub decls: Vec<Decl<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeclKind {
    Event,
    Connection,
    Action,
    Subscriber,
    Schedule,
    Test,
}

impl DeclKind {
    /// The keyword that starts the declaration.
    pub fn keyword(self) -> &'static str {
        match self {
            DeclKind::Event => "event",
            DeclKind::Connection => "connection",
            DeclKind::Action => "action",
            DeclKind::Subscriber => "subscriber",
            DeclKind::Schedule => "schedule",
            DeclKind::Test => "test",
        }
    }
}

/// `KEYWORD NAME { ENTRY* }`, an action's `(params)`, or a test's steps.
#[derive(Debug, Clone)]
pub struct Decl<'a> {
    pub kind: DeclKind,
    /// The declaration's name; a test's name is its string (without quotes).
    pub name: Name<'a>,
    pub body: Body<'a>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub enum Body<'a> {
    /// `{ entries }`; an action's parameters are in `params`.
    Block { params: Vec<Param<'a>>, block: Block<'a> },
    /// A test's steps, and its name with escapes decoded.
    Steps { title: Cow<'a, str>, steps: Vec<Step<'a>> },
    /// The declaration has a syntax error after its name. It is known by name, so
    /// references to it are not reported, but its contents are not checked.
    Broken,
}

/// `name: type` in an action's parameter list.
#[derive(Debug, Clone)]
pub struct Param<'a> {
    pub name: Name<'a>,
    pub ty: TypeRef<'a>,
}

/// `string`, `int?`, ...
#[derive(Debug, Clone, Copy)]
pub struct TypeRef<'a> {
    pub name: Name<'a>,
    pub optional: bool,
    pub span: Span,
}

/// `{ entry, ... }`.
#[derive(Debug, Clone)]
pub struct Block<'a> {
    pub entries: Vec<Entry<'a>>,
    pub span: Span,
}

/// `KEY: VALUE`.
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub key: Key<'a>,
    pub value: Value<'a>,
}

/// An entry's key: an identifier, or a string where keys are free text.
#[derive(Debug, Clone)]
pub struct Key<'a> {
    pub text: Cow<'a, str>,
    pub quoted: bool,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Value<'a> {
    pub kind: ValueKind<'a>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub enum ValueKind<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    /// Milliseconds.
    Duration(u64),
    Bool(bool),
    /// An identifier, or a type when it ends in `?`.
    Ident {
        name: &'a str,
        optional: bool,
    },
    /// `event.field` or `a.b`: two segments, the usual path, kept without allocating.
    Path([Name<'a>; 2]),
    /// `a.b.c` and longer.
    LongPath(Vec<Name<'a>>),
    Call {
        name: Name<'a>,
        args: Vec<Value<'a>>,
    },
    Block(Block<'a>),
    List(Vec<Item<'a>>),
    /// `50/s` as written: a count over a unit, read by the checker.
    Rate(&'a str),
    /// A condition: comparisons joined by `and`, `or` and `not` (a subscriber's
    /// `where:`).
    Expr(Box<Expr<'a>>),
}

/// A condition's node. `and` and `or` keep their operands in one list, and `not`
/// takes a comparison or a parenthesised condition, so a condition nests only as
/// deep as its parentheses (which count towards [`crate::lexer::MAX_NESTING`]).
#[derive(Debug, Clone)]
pub enum Expr<'a> {
    /// `a and b and c`: two or more operands.
    And(Vec<Value<'a>>),
    /// `a or b or c`: two or more operands.
    Or(Vec<Value<'a>>),
    /// `not a`; `span` is the keyword's.
    Not { operand: Value<'a>, span: Span },
    /// `left OP right`.
    Compare { op: CompareOp, op_span: Span, left: Value<'a>, right: Value<'a> },
    /// `left in [a, b]`, or `not in` when `negated`.
    In { left: Value<'a>, list: Value<'a>, negated: bool, op_span: Span },
    /// `( condition )`, kept so that the text can be written back as it was.
    Paren(Value<'a>),
}

/// A comparison's operator: as written, and in the checked program (where it is
/// serialized by its name in lowercase, `eq` to `ge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    /// The operator as written.
    pub fn as_str(self) -> &'static str {
        match self {
            CompareOp::Eq => "==",
            CompareOp::Ne => "!=",
            CompareOp::Lt => "<",
            CompareOp::Le => "<=",
            CompareOp::Gt => ">",
            CompareOp::Ge => ">=",
        }
    }

    /// The operator with its sides swapped: `a < b` is `b > a`.
    pub fn flipped(self) -> CompareOp {
        match self {
            CompareOp::Lt => CompareOp::Gt,
            CompareOp::Le => CompareOp::Ge,
            CompareOp::Gt => CompareOp::Lt,
            CompareOp::Ge => CompareOp::Le,
            other => other,
        }
    }

    /// Whether `ordering` (left against right) satisfies the operator.
    pub fn holds(self, ordering: std::cmp::Ordering) -> bool {
        use std::cmp::Ordering::*;
        match self {
            CompareOp::Eq => ordering == Equal,
            CompareOp::Ne => ordering != Equal,
            CompareOp::Lt => ordering == Less,
            CompareOp::Le => ordering != Greater,
            CompareOp::Gt => ordering == Greater,
            CompareOp::Ge => ordering != Less,
        }
    }
}

/// A list item, with its repetition (`unavailable * 5`) if any.
#[derive(Debug, Clone)]
pub struct Item<'a> {
    pub value: Value<'a>,
    pub times: Option<(u64, Span)>,
}

/// A step of a test.
#[derive(Debug, Clone)]
pub struct Step<'a> {
    pub kind: StepKind<'a>,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub enum StepKind<'a> {
    /// `fake CONNECTION: [answers]`.
    Fake { connection: Name<'a>, answers: Value<'a> },
    /// `emit EVENT { fields }`.
    Emit { event: Name<'a>, fields: Block<'a> },
    /// `wait DURATION` (milliseconds).
    Wait { ms: u64, span: Span },
    /// `retry SUBSCRIBER`.
    Retry { subscriber: Name<'a> },
    /// `expect SUBSCRIBER { ... }`.
    Expect { subscriber: Name<'a>, block: Block<'a> },
    /// `expect breaker CONNECTION { ... }`.
    ExpectBreaker { connection: Name<'a>, block: Block<'a> },
}

impl<'a> Block<'a> {
    /// The first entry with this key.
    pub fn get(&self, key: &str) -> Option<&Entry<'a>> {
        self.entries.iter().find(|e| e.key.text == key)
    }
}

impl<'a> ValueKind<'a> {
    /// A path's segments, each with its span.
    pub fn segments(&self) -> Option<&[Name<'a>]> {
        match self {
            ValueKind::Path(s) => Some(s),
            ValueKind::LongPath(s) => Some(s),
            _ => None,
        }
    }

    /// What kind of value this is, in words, for messages.
    pub fn describe(&self) -> &'static str {
        match self {
            ValueKind::Str(_) => "a string",
            ValueKind::Int(_) => "an integer",
            ValueKind::Duration(_) => "a duration",
            ValueKind::Bool(_) => "a boolean",
            ValueKind::Ident { optional: false, .. } => "a name",
            ValueKind::Ident { optional: true, .. } => "an optional type",
            ValueKind::Path(_) | ValueKind::LongPath(_) => "a path",
            ValueKind::Call { .. } => "a call",
            ValueKind::Block(_) => "a block",
            ValueKind::List(_) => "a list",
            ValueKind::Rate(_) => "a rate",
            ValueKind::Expr(_) => "a condition",
        }
    }
}
