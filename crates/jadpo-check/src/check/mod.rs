//! The checker: resolves names across every file of one program, checks each
//! declaration's keys and values, and lowers a program without errors to a
//! [`Program`].
//!
//! Cascades are avoided by construction: a name that failed to resolve, or a
//! declaration that did not parse, is known as "unknown" and everything that would
//! only follow from it is skipped.

mod again;
mod calls;
mod connection;
mod decls;
mod filter;
mod lower;
mod names;
mod test_blocks;
mod values;

pub use again::Replacement;

use crate::diagnostic::{Diagnostic, SourceFile};
use crate::index::{DefId, SymbolIndex};
use crate::program::{self as p, Program, Type};
use crate::registry::{Code, Severity};
use crate::suggest::did_you_mean;
use jadpo_syntax::ast::{Block, Body, Decl, DeclKind, Entry, Span};
use jadpo_syntax::{Parsed, SyntaxErrorKind, parse};
use std::sync::Arc;

/// The outcome of checking a program.
#[derive(Debug)]
pub struct Checked {
    /// Every diagnostic, sorted by file, then offset.
    pub diagnostics: Vec<Diagnostic>,
    /// The checked program, when there are no errors and it was asked for.
    pub program: Option<Program>,
    /// Every declaration and reference, as resolved; built by every check, errors
    /// or not.
    pub index: SymbolIndex,
    /// What the check found for each subscriber and schedule, for
    /// [`check_again`] (kept by a check for [`Lower::No`]).
    memo: Option<again::Memo>,
    /// How many subscribers and schedules [`check_again`] did not check again,
    /// taking what the last check found for them.
    pub reused: usize,
}

impl Checked {
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity() == Severity::Error).count()
    }
    pub fn warnings(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity() == Severity::Warning).count()
    }
}

/// What a check builds beside its diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lower {
    /// The [`Program`], after a clean check (`jadpoc run`, `test`, `plan`, `diff`),
    /// and the whole symbol index.
    Yes,
    /// The whole symbol index and what [`check_again`] reuses after an edit, but
    /// no program: the language server. Nothing only lowering needs is made.
    No,
    /// The diagnostics alone (`jadpoc check`, the playground's check, `jadpoc
    /// fmt`'s syntax errors): the index is left empty. It is the checker's output,
    /// never read to decide a diagnostic, and a large program's holds hundreds of
    /// thousands of definitions and references.
    DiagnosticsOnly,
}

impl Lower {
    /// Whether the check fills the symbol index.
    fn indexes(self) -> bool {
        self != Lower::DiagnosticsOnly
    }
}

/// Checks the files of one program together.
pub fn check(files: &[SourceFile], lower: Lower) -> Checked {
    let parsed: Vec<_> = files.iter().map(|f| parse(&f.text)).collect();
    check_parsed(files, &parsed.iter().collect::<Vec<_>>(), lower)
}

/// Checks the files of one program together, each already parsed (`parsed[i]` is
/// the parse of `files[i]`'s text): a tree kept between edits
/// ([`jadpo_syntax::KeptParse`]) is checked without being read again.
pub fn check_parsed(files: &[SourceFile], parsed: &[&Parsed<'_>], lower: Lower) -> Checked {
    run(files, parsed, lower, None)
}

/// Checks the files of one program again after `edit` (for [`Lower::No`]):
/// `previous` is the check of the files before it, and `parsed` the trees after it.
/// The diagnostics and the index are a whole check's; when the edit replaced
/// subscribers and schedules alone, keeping their kinds and names, what the last
/// check found for every other subscriber and schedule is reused rather than found
/// again (see `again.rs`).
pub fn check_again(files: &[SourceFile], parsed: &[&Parsed<'_>], mut previous: Checked, edit: Replacement) -> Checked {
    let memo = previous.memo.take();
    let refs = previous.index.take_refs();
    let index = std::mem::take(&mut previous.index);
    // The last check's diagnostics go before this one makes its own.
    drop(previous);
    run(files, parsed, Lower::No, memo.map(|memo| again::Last { memo, refs, index, edit }))
}

fn run(files: &[SourceFile], parsed: &[&Parsed<'_>], lower: Lower, mut previous: Option<again::Last>) -> Checked {
    let mut diags = Vec::new();
    let mut broken = false;
    for (file, p) in parsed.iter().enumerate() {
        for e in &p.errors {
            broken = true;
            diags.push(Diagnostic::new(syntax_code(e.kind), file, e.span, e.message.clone()).help_opt(e.help.clone()));
        }
    }
    // jadpo's own events are declarations of no file, after the program's.
    let builtins = crate::builtin::decls();
    // Made at its size: collected from the files' lists it would grow by doubling.
    let mut decls: Vec<(usize, &Decl)> =
        Vec::with_capacity(parsed.iter().map(|p| p.file.decls.len()).sum::<usize>() + builtins.len());
    decls.extend(parsed.iter().enumerate().flat_map(|(i, p)| p.file.decls.iter().map(move |d| (i, d))));
    decls.extend(builtins.iter().map(|d| (BUILTIN_FILE, d)));
    let mut cx = Cx::new(&decls, files, broken, lower, previous.as_mut().map(again::Last::room));
    if lower == Lower::No {
        cx.keep_findings(previous.filter(|_| !broken));
    }
    cx.collect_names();
    cx.check_all();
    cx.reuse_refs();
    diags.append(&mut cx.diags);
    // A literal that failed to lex, or a region nested too deep, stands in as a
    // placeholder value so the parse goes on; it is reported once, by the lexer, not
    // again by whatever holds it.
    let placeholders: Vec<(usize, Span)> = diags
        .iter()
        .filter(|d| {
            matches!(d.code, Code::SyntaxInvalidNumber | Code::SyntaxInvalidDuration | Code::SyntaxNestingTooDeep)
        })
        .map(|d| (d.file, d.span))
        .collect();
    if !placeholders.is_empty() {
        diags.retain(|d| {
            d.code.as_str().starts_with("syntax.")
                || !placeholders.iter().any(|&(f, s)| f == d.file && d.span.start <= s.start && s.end <= d.span.end)
        });
    }
    let program = if lower == Lower::Yes && !diags.iter().any(|d| d.severity() == Severity::Error) {
        let program = cx.program(files);
        // Checking keeps every piece a clean program needs; a missing one is a
        // checker bug, and no program is better than a wrong one.
        debug_assert!(program.is_some(), "a program without errors did not lower");
        program
    } else {
        None
    };
    diags.sort_by_key(|d| (d.file, d.span.start, d.span.end));
    let mut index = std::mem::take(&mut cx.index);
    let names = index.finish();
    let reused = cx.reused;
    Checked { diagnostics: diags, program, index, memo: cx.take_memo(names), reused }
}

fn syntax_code(kind: SyntaxErrorKind) -> Code {
    match kind {
        SyntaxErrorKind::InvalidToken => Code::SyntaxInvalidToken,
        SyntaxErrorKind::UnterminatedString => Code::SyntaxUnterminatedString,
        SyntaxErrorKind::InvalidEscape => Code::SyntaxInvalidEscape,
        SyntaxErrorKind::UnterminatedComment => Code::SyntaxUnterminatedComment,
        SyntaxErrorKind::InvalidNumber => Code::SyntaxInvalidNumber,
        SyntaxErrorKind::InvalidDuration => Code::SyntaxInvalidDuration,
        SyntaxErrorKind::UnexpectedToken => Code::SyntaxUnexpectedToken,
        SyntaxErrorKind::UnexpectedEof => Code::SyntaxUnexpectedEof,
        SyntaxErrorKind::NestingTooDeep => Code::SyntaxNestingTooDeep,
    }
}

/// Whether declarations of `kind` are checked in the second pass, after the
/// events, connections and actions they name: subscribers and schedules, which
/// nothing names but by their names.
fn in_second_pass(kind: DeclKind) -> bool {
    matches!(kind, DeclKind::Subscriber | DeclKind::Schedule)
}

/// The fewest subscribers and schedules checked in two halves at once (for
/// diagnostics alone): below this, starting a thread costs more than it saves.
const SECOND_PASS_SPLIT_MIN: usize = 4096;

/// The file of jadpo's built-in events: none. They have no definition in the
/// index, no reference to them is recorded, and they are lowered only when used.
const BUILTIN_FILE: usize = usize::MAX;

/// What a declaration was checked to be, kept for lowering: only when a program
/// will be built, and only for a declaration whose names all resolved. Indices are
/// of declarations in the checker's list.
#[derive(Default)]
enum Resolved {
    #[default]
    Nothing,
    Connection(p::Connection),
    Action {
        via: usize,
        path: String,
        idempotent: bool,
    },
    Subscriber {
        event: usize,
        call: p::Call,
        budget: p::Budget,
        timeout_ms: u64,
        filter: Option<p::Filter>,
        order_by: Option<String>,
    },
    Schedule {
        every_ms: u64,
        call: p::Call,
    },
}

/// The checker's state for one program: its declarations, name tables, what each
/// declaration resolved to, and the diagnostics so far.
struct Cx<'d, 'a> {
    decls: &'d [(usize, &'d Decl<'a>)],
    /// The files: their text, to echo a value as written; their names, to resolve
    /// paths relative to the file that gives them.
    files: &'a [SourceFile],
    /// A syntax error somewhere: some names may be missing, so nothing is "unused".
    broken: bool,
    diags: Vec<Diagnostic>,
    /// Declarations of one kind share a namespace: (kind, name) to the index of the
    /// first declaration of that name in `decls`.
    /// Shared, read-only, with the second pass's other thread.
    names: Arc<names::NameTable>,
    used: Vec<bool>,
    /// Per declaration: the field or parameter types (events, actions).
    types: Arc<Vec<Option<Fields<'a>>>>,
    /// Events' fields' declared defaults: (event's declaration, field, default).
    /// Shared, read-only, with the second pass's other thread, as the types are.
    defaults: Arc<Vec<(usize, &'a str, crate::program::Literal)>>,
    resolved: Vec<Resolved>,
    lower: Lower,
    /// Tests that checked clean, their steps naming declarations by index.
    tests: Vec<test_blocks::PendingTest>,
    /// Definitions and references, filled as names are resolved.
    index: SymbolIndex,
    /// Per declaration: its definition in the index (none for a nameless one).
    decl_def: Vec<Option<DefId>>,
    /// Per declaration: the definitions of its fields or parameters, which follow
    /// one another in the index: from, to.
    member_defs: Vec<(u32, u32)>,
    /// What this check finds for each subscriber and schedule, kept for the next.
    memo: Option<again::Memo>,
    /// The last check's findings, reused where the edit since did not reach.
    previous: Option<again::Previous>,
    /// How many declarations' findings were reused.
    reused: usize,
    /// Each `was:` name of a subscriber or connection, by the index of its
    /// declaration, in order: what lowering copies into the program.
    was: Vec<(u32, &'a str)>,
}

/// How many definitions the index will hold at most: each declaration, each
/// event's entries and each action's parameters. Reserved at once, as a large
/// program's list would otherwise grow by doubling and, for the moment of its
/// last copy, take three times its size.
fn defs_upper_bound(decls: &[(usize, &Decl<'_>)]) -> usize {
    decls
        .iter()
        .map(|(_, d)| match (&d.body, d.kind) {
            (Body::Block { block, .. }, DeclKind::Event) => 1 + block.entries.len(),
            (Body::Block { params, .. }, DeclKind::Action) => 1 + params.len(),
            _ => 1,
        })
        .sum()
}

/// An event's fields or an action's parameters: shared, so checking a call clones
/// a pointer, not the list.
type Fields<'a> = Arc<[(&'a str, Option<Type>)]>;

impl<'d, 'a> Cx<'d, 'a> {
    /// `room`: the last check's index, whose lists this one fills again, and how
    /// many names it interned.
    fn new(
        decls: &'d [(usize, &'d Decl<'a>)],
        files: &'a [SourceFile],
        broken: bool,
        lower: Lower,
        room: Option<(SymbolIndex, usize)>,
    ) -> Self {
        let n = decls.len();
        let indexing = lower.indexes();
        let index = match (indexing, room) {
            (false, _) => SymbolIndex::default(),
            (true, Some((last, names))) => last.emptied(defs_upper_bound(decls), names),
            // At most as many names as definitions; references name what is
            // defined, but for the few unknown names.
            (true, None) => {
                let defs = defs_upper_bound(decls);
                SymbolIndex::with_room(defs, defs)
            }
        };
        Cx {
            decls,
            files,
            broken: broken || decls.iter().any(|(_, d)| matches!(d.body, Body::Broken)),
            diags: Vec::new(),
            names: Arc::new(names::NameTable::with_capacity(n)),
            used: vec![false; n],
            types: Arc::new(vec![None; n]),
            defaults: Arc::default(),
            // Only a program that will be lowered needs what each declaration resolved to.
            resolved: if lower == Lower::Yes {
                std::iter::repeat_with(Resolved::default).take(n).collect()
            } else {
                Vec::new()
            },
            tests: Vec::new(),
            lower,
            // The index and the two lists only it reads; a check for diagnostics
            // alone keeps none of them.
            index,
            decl_def: if indexing { vec![None; n] } else { Vec::new() },
            member_defs: if indexing { vec![(0, 0); n] } else { Vec::new() },
            memo: None,
            previous: None,
            reused: 0,
            was: Vec::new(),
        }
    }

    /// A name or string for the lowered program; nothing is copied when no program
    /// will be built, which keeps `jadpoc check` from copying every argument.
    fn owned(&self, s: &str) -> String {
        if self.lower == Lower::Yes { s.to_string() } else { String::new() }
    }

    /// Whether the symbol index is filled (not for [`Lower::DiagnosticsOnly`]).
    fn indexing(&self) -> bool {
        self.lower.indexes()
    }

    /// Keeps what a declaration resolved to, when a program will be built.
    fn keep(&mut self, index: usize, r: Resolved) {
        if let Some(slot) = self.resolved.get_mut(index) {
            *slot = r;
        }
    }

    fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// The block a `key:` entry must hold, or `code` at the value saying what was
    /// found, with `help` showing the block written right.
    fn block_of<'v>(
        &mut self,
        code: Code,
        file: usize,
        key: &str,
        value: &'v jadpo_syntax::ast::Value<'a>,
        help: &str,
    ) -> Option<&'v Block<'a>> {
        if let jadpo_syntax::ast::ValueKind::Block(block) = &value.kind {
            return Some(block);
        }
        self.push(
            Diagnostic::new(code, file, value.span, format!("`{key}:` takes a block, found {}", value.kind.describe()))
                .help(help),
        );
        None
    }

    fn error_count(&self) -> usize {
        self.diags.iter().filter(|d| d.severity() == Severity::Error).count()
    }

    /// The errors so far, when a program will be built: what a declaration
    /// resolved to is kept only when checking it added none. `None` otherwise, as
    /// counting reads every diagnostic so far and only lowering needs the count.
    fn errors_if_lowering(&self) -> Option<usize> {
        (self.lower == Lower::Yes).then(|| self.error_count())
    }

    /// Whether a program will be built and no error came since `before` (from
    /// [`Cx::errors_if_lowering`]).
    fn clean_since(&self, before: Option<usize>) -> bool {
        before.is_some_and(|n| n == self.error_count())
    }

    fn check_all(&mut self) {
        // Events and actions first: subscribers, schedules and tests need their types.
        for index in 0..self.decls.len() {
            let (file, decl) = self.decls[index];
            let Body::Block { params, block } = &decl.body else { continue };
            match decl.kind {
                DeclKind::Event => self.event(index, file, block),
                DeclKind::Connection => self.connection(index, file, decl, block),
                DeclKind::Action => self.action(index, file, decl, params, block),
                _ => {}
            }
        }
        self.forget_marks();
        // Read from every subscriber's and connection's text at each check, never
        // kept from the last one: a `was:` name is checked against the whole program.
        self.was_names();
        self.second_pass();
        for index in 0..self.decls.len() {
            let (file, decl) = self.decls[index];
            if let Body::Steps { title, steps } = &decl.body {
                self.test(index, file, decl, title, steps);
            }
        }
        if !self.broken {
            self.unused();
        }
    }

    /// Subscribers and schedules, in order. For diagnostics alone, a large
    /// program's are checked in two halves at once, the second on a thread of its
    /// own with its own diagnostics and marks, added after the first half's: each
    /// reads only the name tables and types the first pass made, so the result is
    /// the one-thread check's, in the same order.
    fn second_pass(&mut self) {
        let n = self.decls.len();
        let count = self.decls.iter().filter(|(_, d)| in_second_pass(d.kind)).count();
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        if self.lower != Lower::DiagnosticsOnly || count < SECOND_PASS_SPLIT_MIN || cores < 2 {
            self.second_pass_over(0..n);
            return;
        }
        // Where half of them are behind.
        let mut seen = 0;
        let mid = self
            .decls
            .iter()
            .position(|(_, d)| {
                seen += usize::from(in_second_pass(d.kind));
                seen > count / 2
            })
            .unwrap_or(n);
        let mut other = self.helper();
        let joined = std::thread::scope(|scope| {
            let handle = std::thread::Builder::new()
                .spawn_scoped(scope, move || {
                    other.second_pass_over(mid..n);
                    other
                })
                .ok();
            self.second_pass_over(0..mid);
            handle.and_then(|h| h.join().ok())
        });
        match joined {
            Some(other) => {
                self.diags.extend(other.diags);
                self.used.iter_mut().zip(other.used).for_each(|(u, o)| *u |= o);
            }
            // The system refused a thread: the second half here.
            None => self.second_pass_over(mid..n),
        }
    }

    fn second_pass_over(&mut self, range: std::ops::Range<usize>) {
        for index in range {
            let (file, decl) = self.decls[index];
            let Body::Block { block, .. } = &decl.body else { continue };
            match decl.kind {
                DeclKind::Subscriber => self.check_or_reuse(index, |cx| cx.subscriber(index, file, decl, block)),
                DeclKind::Schedule => self.check_or_reuse(index, |cx| cx.schedule(index, file, decl, block)),
                _ => {}
            }
        }
    }

    /// A checker for the second half of the second pass: the same declarations,
    /// name tables and types, no diagnostics or marks yet.
    fn helper(&self) -> Self {
        Cx {
            decls: self.decls,
            files: self.files,
            broken: self.broken,
            diags: Vec::new(),
            names: Arc::clone(&self.names),
            used: vec![false; self.used.len()],
            types: Arc::clone(&self.types),
            defaults: Arc::clone(&self.defaults),
            resolved: Vec::new(),
            lower: self.lower,
            tests: Vec::new(),
            index: SymbolIndex::default(),
            decl_def: Vec::new(),
            member_defs: Vec::new(),
            memo: None,
            previous: None,
            reused: 0,
            was: Vec::new(),
        }
    }

    /// Reports unknown and duplicate keys; returns the entries of known keys, each once.
    fn keys<'b>(
        &mut self,
        file: usize,
        decl: &Decl<'a>,
        block: &'b Block<'a>,
        allowed: &[&str],
        special: &[(&str, Code, &str)],
    ) -> Keys<'b, 'a> {
        let mut seen = Keys(Vec::with_capacity(block.entries.len()));
        for entry in &block.entries {
            let key: &'b str = &entry.key.text;
            if let Some((_, code, message)) = special.iter().find(|(k, _, _)| *k == key) {
                self.push(Diagnostic::new(*code, file, entry.key.span, *message));
                continue;
            }
            if !allowed.contains(&key) || entry.key.quoted {
                let list = allowed.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
                let mut help = format!(
                    "a{} {} takes {list}",
                    if matches!(decl.kind, DeclKind::Event | DeclKind::Action) { "n" } else { "" },
                    decl.kind.keyword()
                );
                if let Some(s) = did_you_mean(key, allowed.iter().copied()) {
                    help = format!("{s}; {help}");
                }
                let d = Diagnostic::new(
                    Code::DeclUnknownKey,
                    file,
                    entry.key.span,
                    format!("`{key}` is not a key of {} `{}`", decl.kind.keyword(), decl.name.text),
                )
                .help(help);
                self.push(d);
                continue;
            }
            if let Some(first) = seen.get(key) {
                let d =
                    Diagnostic::new(Code::DeclDuplicateKey, file, entry.key.span, format!("`{key}` is given twice"))
                        .label(file, first.key.span, "first given here")
                        .help("keep one of them");
                self.push(d);
                continue;
            }
            seen.0.push((key, entry));
        }
        seen
    }
}

/// A declaration's entries by key, each key once. A declaration has a handful of
/// keys, so a list beats a hash map.
struct Keys<'b, 'a>(Vec<(&'b str, &'b Entry<'a>)>);

impl<'b, 'a> Keys<'b, 'a> {
    fn get(&self, key: &str) -> Option<&'b Entry<'a>> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, e)| *e)
    }
}
