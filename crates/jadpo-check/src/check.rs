//! The checker: resolves names across every file of one program, checks each
//! declaration's keys and values, and lowers a program without errors to a
//! [`Program`].
//!
//! Cascades are avoided by construction: a name that failed to resolve, or a
//! declaration that did not parse, is known as "unknown" and everything that would
//! only follow from it is skipped.

use crate::budget::*;
use crate::diagnostic::{Diagnostic, SourceFile};
use crate::index::{Def, DefId, SymbolIndex, SymbolKind};
use crate::program::{self as p, BaseType, Program, Type};
use crate::registry::{Code, Severity};
use crate::suggest::did_you_mean;
use jadpo_syntax::ast::{Block, Body, Decl, DeclKind, Entry, Name, Span, Value, ValueKind};
use jadpo_syntax::{SyntaxErrorKind, parse};
use rustc_hash::FxHashMap;
use std::collections::HashMap;

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
}

impl Checked {
    pub fn errors(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity() == Severity::Error).count()
    }
    pub fn warnings(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.severity() == Severity::Warning).count()
    }
}

/// Whether to build the [`Program`] after a clean check (`jadpoc check` does not need it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lower {
    Yes,
    No,
}

/// Checks the files of one program together.
pub fn check(files: &[SourceFile], lower: Lower) -> Checked {
    let parsed: Vec<_> = files.iter().map(|f| parse(&f.text)).collect();
    let mut diags = Vec::new();
    let mut broken = false;
    for (file, p) in parsed.iter().enumerate() {
        for e in &p.errors {
            broken = true;
            diags.push(Diagnostic::new(syntax_code(e.kind), file, e.span, e.message.clone()).help_opt(e.help.clone()));
        }
    }
    let decls: Vec<(usize, &Decl)> =
        parsed.iter().enumerate().flat_map(|(i, p)| p.file.decls.iter().map(move |d| (i, d))).collect();
    let mut cx = Cx::new(&decls, broken, lower);
    cx.collect_names();
    cx.check_all();
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
        Some(cx.program(files))
    } else {
        None
    };
    diags.sort_by_key(|d| (d.file, d.span.start, d.span.end));
    let mut index = std::mem::take(&mut cx.index);
    index.finish();
    Checked { diagnostics: diags, program, index }
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

/// What a subscriber's or schedule's call was checked to be, for lowering.
#[derive(Default, Clone)]
struct Resolved {
    event: Option<usize>,
    call: Option<p::Call>,
    budget: p::Budget,
    timeout_ms: u64,
    every_ms: u64,
}

pub(crate) struct Cx<'d, 'a> {
    pub(crate) decls: &'d [(usize, &'d Decl<'a>)],
    /// A syntax error somewhere: some names may be missing, so nothing is "unused".
    broken: bool,
    pub(crate) diags: Vec<Diagnostic>,
    /// Declarations of one kind share a namespace: (kind, name) to the index of the
    /// first declaration of that name in `decls`.
    names: FxHashMap<(DeclKind, &'a str), usize>,
    used: Vec<bool>,
    /// Per declaration: the field or parameter types (events, actions).
    pub(crate) types: Vec<Option<Fields<'a>>>,
    resolved: Vec<Resolved>,
    lower: Lower,
    /// Tests that checked clean, their steps naming declarations by index.
    pub(crate) tests: Vec<crate::tests::PendingTest>,
    /// Definitions and references, filled as names are resolved.
    pub(crate) index: SymbolIndex,
    /// Per declaration: its definition in the index (none for a nameless one).
    decl_def: Vec<Option<DefId>>,
    /// Per declaration: the definitions of its fields or parameters, in order.
    member_defs: Vec<Vec<DefId>>,
}

/// An event's fields or an action's parameters: shared, so checking a call clones
/// a pointer, not the list.
pub(crate) type Fields<'a> = std::rc::Rc<[(&'a str, Option<Type>)]>;

const EVENT_TYPES: &str = "`string`, `int`, `float`, `bool` or `time`";

fn base_type(name: &str) -> Option<BaseType> {
    Some(match name {
        "string" => BaseType::String,
        "int" => BaseType::Int,
        "float" => BaseType::Float,
        "bool" => BaseType::Bool,
        "time" => BaseType::Time,
        _ => return None,
    })
}

pub(crate) fn type_name(t: Type) -> String {
    let base = match t.base {
        BaseType::String => "string",
        BaseType::Int => "int",
        BaseType::Float => "float",
        BaseType::Bool => "bool",
        BaseType::Time => "time",
    };
    if t.optional { format!("{base}?") } else { base.to_string() }
}

/// Whether a value of type `arg` may be passed where `param` is expected.
pub(crate) fn assignable(arg: Type, param: Type) -> bool {
    (arg.base == param.base || (arg.base == BaseType::Int && param.base == BaseType::Float))
        && (!arg.optional || param.optional)
}

/// Renders a duration in milliseconds the way the language writes it.
pub fn format_duration(ms: u64) -> String {
    duration_parts(ms).concat()
}

/// A duration for reading rather than writing back: `4h 15m 30s`.
pub fn format_duration_spaced(ms: u64) -> String {
    duration_parts(ms).join(" ")
}

fn duration_parts(ms: u64) -> Vec<String> {
    if ms == 0 {
        return vec!["0s".into()];
    }
    let mut parts = Vec::new();
    let mut rest = ms;
    for (unit, size) in [("d", DAY_MS), ("h", HOUR_MS), ("m", MINUTE_MS), ("s", SECOND_MS), ("ms", 1)] {
        if rest >= size {
            parts.push(format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    parts
}

impl<'d, 'a> Cx<'d, 'a> {
    fn new(decls: &'d [(usize, &'d Decl<'a>)], broken: bool, lower: Lower) -> Self {
        let n = decls.len();
        Cx {
            decls,
            broken: broken || decls.iter().any(|(_, d)| matches!(d.body, Body::Broken)),
            diags: Vec::new(),
            names: FxHashMap::with_capacity_and_hasher(n, Default::default()),
            used: vec![false; n],
            types: vec![None; n],
            // Only a program that will be lowered needs what each declaration resolved to.
            resolved: if lower == Lower::Yes { vec![Resolved::default(); n] } else { Vec::new() },
            tests: Vec::new(),
            lower,
            index: SymbolIndex::default(),
            decl_def: vec![None; n],
            member_defs: vec![Vec::new(); n],
        }
    }

    /// A name or string for the lowered program; nothing is copied when no program
    /// will be built, which keeps `jadpoc check` from copying every argument.
    fn owned(&self, s: &str) -> String {
        if self.lower == Lower::Yes { s.to_string() } else { String::new() }
    }

    /// Keeps what a subscriber or schedule resolved to, when a program will be built.
    fn keep(&mut self, index: usize, r: Resolved) {
        if let Some(slot) = self.resolved.get_mut(index) {
            *slot = r;
        }
    }

    pub(crate) fn push(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn collect_names(&mut self) {
        for (index, &(file, decl)) in self.decls.iter().enumerate() {
            if decl.name.text.is_empty() && matches!(decl.body, Body::Broken) {
                continue;
            }
            let key = (decl.kind, decl.name.text);
            let name = match &decl.body {
                Body::Steps { title, .. } => title.to_string(),
                _ => decl.name.text.to_string(),
            };
            self.decl_def[index] = Some(self.index.define(Def {
                name,
                kind: SymbolKind::of_decl(decl.kind),
                file,
                name_span: decl.name.span,
                span: decl.span,
                parent: None,
                ty: None,
                primary: !self.names.contains_key(&key),
            }));
            if let Some(first) = self.names.get(&key) {
                let (ffile, fdecl) = self.decls[*first];
                let what = if decl.kind == DeclKind::Test { "test" } else { decl.kind.keyword() };
                let d = Diagnostic::new(
                    Code::NameDuplicate,
                    file,
                    decl.name.span,
                    format!("the {what} `{}` is declared twice", decl.name.text),
                )
                .label(ffile, fdecl.name.span, "first declared here")
                .help(format!("rename one of them; {} names are shared by every file of the program", what));
                self.push(d);
            } else {
                self.names.insert(key, index);
            }
        }
    }

    pub(crate) fn lookup(&self, kind: DeclKind, name: &str) -> Option<usize> {
        self.names.get(&(kind, name)).copied()
    }

    fn candidates(&self, kind: DeclKind) -> impl Iterator<Item = &'a str> + '_ {
        self.decls.iter().filter(move |(_, d)| d.kind == kind && !d.name.text.is_empty()).map(|(_, d)| d.name.text)
    }

    /// Resolves a reference to a declaration, reporting it when unknown.
    pub(crate) fn resolve(&mut self, file: usize, kind: DeclKind, name: Name<'a>, code: Code) -> Option<usize> {
        let found = self.lookup(kind, name.text);
        let target = found.and_then(|i| self.decl_def[i]);
        self.index.refer(SymbolKind::of_decl(kind), file, name.span, name.text, target);
        match found {
            Some(i) => {
                self.used[i] = true;
                Some(i)
            }
            None => {
                let help = did_you_mean(name.text, self.candidates(kind));
                let d =
                    Diagnostic::new(code, file, name.span, format!("no {} is named `{}`", kind.keyword(), name.text))
                        .help_opt(help);
                self.push(d);
                None
            }
        }
    }

    /// Records a field of an event or a parameter of an action (`owner`).
    fn define_member(&mut self, owner: usize, name: Name<'a>, span: Span, ty: Option<Type>, primary: bool) {
        let (file, decl) = self.decls[owner];
        let kind = if decl.kind == DeclKind::Action { SymbolKind::Param } else { SymbolKind::Field };
        let def = Def {
            name: name.text.to_string(),
            kind,
            file,
            name_span: name.span,
            span,
            parent: self.decl_def[owner],
            ty,
            primary,
        };
        let id = self.index.define(def);
        self.member_defs[owner].push(id);
    }

    /// Records a use of a field of event `event` (`None` when the event is unknown).
    pub(crate) fn refer_field(&mut self, file: usize, event: Option<usize>, name: &str, span: Span) {
        let target = event.and_then(|e| {
            self.member_defs[e].iter().copied().find(|&id| {
                let d = self.index.def(id);
                d.primary && d.name == name
            })
        });
        self.index.refer(SymbolKind::Field, file, span, name, target);
    }

    fn check_all(&mut self) {
        // Events and actions first: subscribers, schedules and tests need their types.
        for pass in [0, 1] {
            for index in 0..self.decls.len() {
                let (file, decl) = self.decls[index];
                let Body::Block { params, block } = &decl.body else { continue };
                match (pass, decl.kind) {
                    (0, DeclKind::Event) => self.event(index, file, block),
                    (0, DeclKind::Connection) => self.connection(file, decl, block),
                    (0, DeclKind::Action) => self.action(index, file, decl, params, block),
                    (1, DeclKind::Subscriber) => self.subscriber(index, file, decl, block),
                    (1, DeclKind::Schedule) => self.schedule(index, file, decl, block),
                    _ => {}
                }
            }
        }
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

    fn unused(&mut self) {
        for index in 0..self.decls.len() {
            let (file, decl) = self.decls[index];
            let code = match decl.kind {
                DeclKind::Event => Code::EventUnused,
                DeclKind::Action => Code::ActionUnused,
                DeclKind::Connection => Code::ConnectionUnused,
                _ => continue,
            };
            // A duplicate is reported as such, not also as unused.
            let first = self.lookup(decl.kind, decl.name.text) == Some(index);
            if !self.used[index] && first {
                let by = match decl.kind {
                    DeclKind::Event => "no subscriber or test uses it",
                    DeclKind::Action => "no subscriber or schedule runs it",
                    _ => "no action calls through it",
                };
                let d = Diagnostic::new(
                    code,
                    file,
                    decl.name.span,
                    format!("the {} `{}` is never used: {by}", decl.kind.keyword(), decl.name.text),
                )
                .help("remove it, or use it");
                self.push(d);
            }
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

    pub(crate) fn invalid_value(&mut self, file: usize, value: &Value<'a>, message: String, help: &str) {
        self.push(Diagnostic::new(Code::DeclInvalidValue, file, value.span, message).help(help));
    }

    fn event(&mut self, index: usize, file: usize, block: &Block<'a>) {
        let mut fields: Vec<(&'a str, Option<Type>)> = Vec::with_capacity(block.entries.len());
        let mut spans: Vec<Span> = Vec::new();
        for entry in &block.entries {
            let name = match &entry.key.text {
                std::borrow::Cow::Borrowed(s) if !entry.key.quoted => *s,
                _ => {
                    self.push(
                        Diagnostic::new(
                            Code::DeclUnknownKey,
                            file,
                            entry.key.span,
                            format!("`{}` is not a field name", entry.key.text),
                        )
                        .help("an event's fields are named by identifiers, such as `payment_id: string`"),
                    );
                    continue;
                }
            };
            if let Some(i) = fields.iter().position(|(n, _)| *n == name) {
                let d = Diagnostic::new(
                    Code::EventDuplicateField,
                    file,
                    entry.key.span,
                    format!("the field `{name}` is declared twice"),
                )
                .label(file, spans[i], "first declared here");
                self.push(d);
                let key = Name { text: name, span: entry.key.span };
                self.define_member(index, key, entry.key.span.to(entry.value.span), None, false);
                continue;
            }
            let ty = self.field_type(file, &entry.value, Code::EventTypeUnknown);
            let key = Name { text: name, span: entry.key.span };
            self.define_member(index, key, entry.key.span.to(entry.value.span), ty, true);
            fields.push((name, ty));
            spans.push(entry.key.span);
        }
        self.types[index] = Some(fields.into());
    }

    /// A field's or parameter's type, or `None` (reported) when it is not one.
    fn field_type(&mut self, file: usize, value: &Value<'a>, code: Code) -> Option<Type> {
        if let ValueKind::Ident { name, optional } = value.kind {
            if let Some(base) = base_type(name) {
                return Some(Type { base, optional });
            }
            let help = did_you_mean(name, ["string", "int", "float", "bool", "time"].into_iter())
                .unwrap_or_else(|| format!("a type is {EVENT_TYPES}, with `?` when it may be absent"));
            self.push(Diagnostic::new(code, file, value.span, format!("`{name}` is not a type")).help(help));
            return None;
        }
        self.push(
            Diagnostic::new(code, file, value.span, format!("expected a type, found {}", value.kind.describe()))
                .help(format!("a type is {EVENT_TYPES}, with `?` when it may be absent")),
        );
        None
    }

    fn connection(&mut self, file: usize, decl: &Decl<'a>, block: &Block<'a>) {
        let keys = self.keys(file, decl, block, &["url", "timeout", "retry", "headers", "max_in_flight"], &[]);
        match keys.get("url") {
            None => self.push(
                Diagnostic::new(
                    Code::ConnectionUrlInvalid,
                    file,
                    decl.name.span,
                    format!("the connection `{}` has no `url:`", decl.name.text),
                )
                .help("add `url: \"https://...\"`, the provider's address"),
            ),
            Some(e) => {
                if let Err(why) = match &e.value.kind {
                    ValueKind::Str(s) => check_url(s),
                    other => Err(format!("expected a string, found {}", other.describe())),
                } {
                    self.push(
                        Diagnostic::new(Code::ConnectionUrlInvalid, file, e.value.span, why)
                            .help("a url is an http or https address, such as `\"https://ledger.example.com/jadpo\"`"),
                    );
                }
            }
        }
        if let Some(e) = keys.get("timeout") {
            self.duration_in(
                file,
                &e.value,
                CALL_TIMEOUT_RANGE_MS,
                Code::ConnectionTimeoutInvalid,
                "a connection's `timeout:`",
            );
        }
        if let Some(e) = keys.get("retry") {
            self.connection_retry(file, &e.value);
        }
        if let Some(e) = keys.get("headers") {
            self.headers(file, &e.value);
        }
        if let Some(e) = keys.get("max_in_flight") {
            self.int_in(file, &e.value, MAX_IN_FLIGHT_RANGE, Code::ConnectionMaxInFlightInvalid, "`max_in_flight:`");
        }
    }

    fn connection_retry(&mut self, file: usize, value: &Value<'a>) {
        let code = Code::ConnectionRetryInvalid;
        let ValueKind::Block(block) = &value.kind else {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`retry:` takes a block, found {}", value.kind.describe()),
                )
                .help("write `retry: { attempts: 3 }`"),
            );
            return;
        };
        let mut seen = false;
        for entry in &block.entries {
            if entry.key.text != "attempts" || entry.key.quoted {
                self.push(
                    Diagnostic::new(
                        code,
                        file,
                        entry.key.span,
                        format!("`{}` is not a key of a connection's `retry:`", entry.key.text),
                    )
                    .help("a connection's `retry:` takes only `attempts:`"),
                );
            } else if seen {
                self.push(
                    Diagnostic::new(code, file, entry.key.span, "`attempts` is given twice").help("keep one of them"),
                );
            } else {
                seen = true;
                self.int_in(file, &entry.value, CONNECTION_ATTEMPTS_RANGE, code, "a connection's `attempts:`");
            }
        }
    }

    fn headers(&mut self, file: usize, value: &Value<'a>) {
        let code = Code::ConnectionHeaderInvalid;
        let help =
            "write `headers: { \"Authorization\": env(\"LEDGER_TOKEN\") }`; values are strings or `env(\"NAME\")`";
        let ValueKind::Block(block) = &value.kind else {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`headers:` takes a block, found {}", value.kind.describe()),
                )
                .help(help),
            );
            return;
        };
        let mut names: Vec<String> = Vec::new();
        for entry in &block.entries {
            let lower = entry.key.text.to_ascii_lowercase();
            if !is_header_name(&entry.key.text) {
                self.push(
                    Diagnostic::new(code, file, entry.key.span, format!("`{}` is not a header name", entry.key.text))
                        .help("a header name is ASCII letters, digits and `-`, such as `\"X-Request-Source\"`"),
                );
            } else if names.contains(&lower) {
                self.push(Diagnostic::new(
                    code,
                    file,
                    entry.key.span,
                    format!("the header `{}` is given twice", entry.key.text),
                ));
            }
            names.push(lower);
            if header_value(&entry.value).is_none() {
                self.push(
                    Diagnostic::new(
                        code,
                        file,
                        entry.value.span,
                        format!(
                            "a header's value is a string or `env(\"NAME\")`, found {}",
                            entry.value.kind.describe()
                        ),
                    )
                    .help(help),
                );
            }
        }
    }

    fn duration_in(
        &mut self,
        file: usize,
        value: &Value<'a>,
        range: (u64, u64),
        code: Code,
        what: &str,
    ) -> Option<u64> {
        let duration = |k: &ValueKind<'_>| if let ValueKind::Duration(ms) = *k { Some(ms) } else { None };
        self.ranged(file, value, range, code, what, "a duration", duration, format_duration)
    }

    fn int_in<T: Into<i64> + Copy>(
        &mut self,
        file: usize,
        value: &Value<'a>,
        range: (T, T),
        code: Code,
        what: &str,
    ) -> Option<u32> {
        let int = |k: &ValueKind<'_>| if let ValueKind::Int(n) = *k { Some(n) } else { None };
        let range = (range.0.into(), range.1.into());
        // Every integer range the language has lies within `u32`.
        self.ranged(file, value, range, code, what, "an integer", int, |n| n.to_string()).map(|n| n as u32)
    }

    /// A value of one kind (`get` finds it) within `range`; anything else is reported
    /// with `code`, saying what `what` takes.
    #[allow(clippy::too_many_arguments)]
    fn ranged<T: PartialOrd + Copy>(
        &mut self,
        file: usize,
        value: &Value<'a>,
        range: (T, T),
        code: Code,
        what: &str,
        kind: &str,
        get: impl Fn(&ValueKind<'a>) -> Option<T>,
        show: impl Fn(T) -> String,
    ) -> Option<T> {
        let (lo, hi) = (show(range.0), show(range.1));
        let message = match get(&value.kind) {
            Some(v) if v >= range.0 && v <= range.1 => return Some(v),
            Some(v) => format!("{what} must be {lo} to {hi}, found `{}`", show(v)),
            None => format!("{what} takes {kind}, found {}", value.kind.describe()),
        };
        self.push(
            Diagnostic::new(code, file, value.span, message).help(format!("{what} takes {kind} from {lo} to {hi}")),
        );
        None
    }

    fn action(
        &mut self,
        index: usize,
        file: usize,
        decl: &Decl<'a>,
        params: &[jadpo_syntax::ast::Param<'a>],
        block: &Block<'a>,
    ) {
        let mut types: Vec<(&'a str, Option<Type>)> = Vec::with_capacity(params.len());
        let mut spans: Vec<Span> = Vec::new();
        let mut duplicate = false;
        for param in params {
            if let Some(i) = types.iter().position(|(n, _)| *n == param.name.text) {
                let d = Diagnostic::new(
                    Code::ActionDuplicateParam,
                    file,
                    param.name.span,
                    format!("the parameter `{}` is declared twice", param.name.text),
                )
                .label(file, spans[i], "first declared here");
                self.push(d);
                duplicate = true;
                self.define_member(index, param.name, param.name.span.to(param.ty.span), None, false);
                continue;
            }
            let ty = match base_type(param.ty.name.text) {
                Some(base) => Some(Type { base, optional: param.ty.optional }),
                None => {
                    let help = did_you_mean(param.ty.name.text, ["string", "int", "float", "bool", "time"].into_iter())
                        .unwrap_or_else(|| format!("a type is {EVENT_TYPES}, with `?` when it may be absent"));
                    self.push(
                        Diagnostic::new(
                            Code::ActionParamTypeUnknown,
                            file,
                            param.ty.name.span,
                            format!("`{}` is not a type", param.ty.name.text),
                        )
                        .help(help),
                    );
                    None
                }
            };
            self.define_member(index, param.name, param.name.span.to(param.ty.span), ty, true);
            types.push((param.name.text, ty));
            spans.push(param.name.span);
        }
        // With a parameter declared twice, calls cannot be checked against the list.
        self.types[index] = (!duplicate).then(|| types.into());
        let keys = self.keys(file, decl, block, &["via", "path", "idempotent"], &[]);
        match keys.get("via") {
            None => self.push(
                Diagnostic::new(
                    Code::ActionMissingVia,
                    file,
                    decl.name.span,
                    format!("the action `{}` has no `via:`", decl.name.text),
                )
                .help("add `via: CONNECTION`, the connection it calls through"),
            ),
            Some(e) => match e.value.kind {
                ValueKind::Ident { name, optional: false } => {
                    let n = Name { text: name, span: e.value.span };
                    self.resolve(file, DeclKind::Connection, n, Code::ActionUnknownConnection);
                }
                _ => self.invalid_value(
                    file,
                    &e.value,
                    format!("`via:` takes a connection's name, found {}", e.value.kind.describe()),
                    "write `via: ledger`",
                ),
            },
        }
        if let Some(e) = keys.get("path") {
            match &e.value.kind {
                ValueKind::Str(s) if s.starts_with('/') && !s.chars().any(char::is_whitespace) => {}
                ValueKind::Str(s) => self.invalid_value(
                    file,
                    &e.value,
                    format!("`path:` must start with `/` and hold no spaces, found `{s}`"),
                    "write `path: \"/payments\"`",
                ),
                other => self.invalid_value(
                    file,
                    &e.value,
                    format!("`path:` takes a string, found {}", other.describe()),
                    "write `path: \"/payments\"`",
                ),
            }
        }
        if let Some(e) = keys.get("idempotent")
            && !matches!(e.value.kind, ValueKind::Bool(_))
        {
            self.invalid_value(
                file,
                &e.value,
                format!("`idempotent:` takes `true` or `false`, found {}", e.value.kind.describe()),
                "write `idempotent: true` when repeating the call does no harm",
            );
        }
    }

    fn subscriber(&mut self, index: usize, file: usize, decl: &Decl<'a>, block: &Block<'a>) {
        let mut r = Resolved::default();
        let keys = self.keys(file, decl, block, &["on", "run", "retry", "timeout"], &[]);
        // `Some(None)`: the event is unknown or did not parse; its fields are not checked.
        let event: Option<Option<usize>> = match keys.get("on") {
            None => {
                self.push(
                    Diagnostic::new(
                        Code::SubscriberMissingOn,
                        file,
                        decl.name.span,
                        format!("the subscriber `{}` has no `on:`", decl.name.text),
                    )
                    .help("add `on: EVENT`, the event it subscribes to"),
                );
                Some(None)
            }
            Some(e) => match e.value.kind {
                ValueKind::Ident { name, optional: false } => Some(self.resolve(
                    file,
                    DeclKind::Event,
                    Name { text: name, span: e.value.span },
                    Code::SubscriberUnknownEvent,
                )),
                _ => {
                    self.invalid_value(
                        file,
                        &e.value,
                        format!("`on:` takes an event's name, found {}", e.value.kind.describe()),
                        "write `on: PaymentReceived`",
                    );
                    Some(None)
                }
            },
        };
        let event = event.flatten();
        match keys.get("run") {
            None => self.push(
                Diagnostic::new(
                    Code::SubscriberMissingRun,
                    file,
                    decl.name.span,
                    format!("the subscriber `{}` has no `run:`", decl.name.text),
                )
                .help("add `run: ACTION(event.FIELD, ...)`, the action it runs"),
            ),
            Some(e) => {
                let call = self.call(file, &e.value, CallSite::Subscriber(event));
                r.call = call;
            }
        }
        r.event = event;
        r.budget = match keys.get("retry") {
            Some(e) => self.budget(file, &e.value),
            None => p::Budget::default(),
        };
        r.timeout_ms = match keys.get("timeout") {
            Some(e) => self
                .duration_in(
                    file,
                    &e.value,
                    RUN_TIMEOUT_RANGE_MS,
                    Code::SubscriberTimeoutInvalid,
                    "a subscriber's `timeout:`",
                )
                .unwrap_or(DEFAULT_RUN_TIMEOUT_MS),
            None => DEFAULT_RUN_TIMEOUT_MS,
        };
        self.keep(index, r);
    }

    fn budget(&mut self, file: usize, value: &Value<'a>) -> p::Budget {
        let code = Code::SubscriberRetryInvalid;
        let mut budget = p::Budget::default();
        let ValueKind::Block(block) = &value.kind else {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`retry:` takes a block, found {}", value.kind.describe()),
                )
                .help("write `retry: { attempts: 20  within: 3d }`"),
            );
            return budget;
        };
        let mut valid = true;
        let mut seen: Vec<(&str, Span)> = Vec::new();
        for entry in &block.entries {
            let key: &str = &entry.key.text;
            if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
                self.push(
                    Diagnostic::new(code, file, entry.key.span, format!("`{key}` is given twice in `retry:`"))
                        .label(file, *first, "first given here")
                        .help("keep one of them"),
                );
                valid = false;
                continue;
            }
            match key {
                "attempts" if !entry.key.quoted => {
                    seen.push((key, entry.key.span));
                    match self.int_in(file, &entry.value, ATTEMPTS_RANGE, code, "`attempts:`") {
                        Some(n) => {
                            budget.attempts = n;
                            budget.default_attempts = false;
                        }
                        None => valid = false,
                    }
                }
                "within" if !entry.key.quoted => {
                    seen.push((key, entry.key.span));
                    let ok = match entry.value.kind {
                        ValueKind::Duration(ms) if ms > 0 && ms <= MAX_WITHIN_MS => Some(ms),
                        ValueKind::Duration(ms) => {
                            self.push(
                                Diagnostic::new(
                                    code,
                                    file,
                                    entry.value.span,
                                    format!(
                                        "`within` must be more than 0 and at most 30d, found `{}`",
                                        format_duration(ms)
                                    ),
                                )
                                .help("`within:` takes a duration more than 0 and at most 30d"),
                            );
                            None
                        }
                        _ => {
                            self.push(
                                Diagnostic::new(
                                    code,
                                    file,
                                    entry.value.span,
                                    format!("`within:` takes a duration, found {}", entry.value.kind.describe()),
                                )
                                .help("`within:` takes a duration more than 0 and at most 30d, such as `3d`"),
                            );
                            None
                        }
                    };
                    match ok {
                        Some(ms) => {
                            budget.within_ms = ms;
                            budget.default_within = false;
                        }
                        None => valid = false,
                    }
                }
                _ => {
                    let help = match did_you_mean(key, ["attempts", "within"].into_iter()) {
                        Some(s) => format!("{s}; `retry:` takes `attempts:` and `within:`"),
                        None => "`retry:` takes `attempts:` and `within:`".to_string(),
                    };
                    self.push(
                        Diagnostic::new(code, file, entry.key.span, format!("`{key}` is not a key of `retry:`"))
                            .help(help),
                    );
                    valid = false;
                }
            }
        }
        if valid {
            let fit = attempts_that_fit(budget.attempts, budget.within_ms);
            if fit < budget.attempts {
                let need = average_start_ms(budget.attempts);
                self.push(
                    Diagnostic::new(
                        Code::SubscriberRetryUnreachable,
                        file,
                        Span::new(block.span.start as usize, block.span.start as usize + 1),
                        format!(
                            "{} attempts cannot fit in {} on average: only {fit} do",
                            budget.attempts,
                            format_duration(budget.within_ms)
                        ),
                    )
                    .help(format!(
                        "attempt {} starts on average {} after the event; raise `within:` to at least {}, or lower `attempts:` to {fit}",
                        budget.attempts,
                        format_duration(need),
                        format_duration(need)
                    )),
                );
            }
        }
        budget
    }

    fn schedule(&mut self, index: usize, file: usize, decl: &Decl<'a>, block: &Block<'a>) {
        let mut r = Resolved::default();
        let special =
            [("retry", Code::ScheduleRetryNotAllowed, "a schedule has no `retry:`: its next due time is its retry")];
        let keys = self.keys(file, decl, block, &["every", "run"], &special);
        match keys.get("every") {
            None => self.push(
                Diagnostic::new(
                    Code::ScheduleEveryInvalid,
                    file,
                    decl.name.span,
                    format!("the schedule `{}` has no `every:`", decl.name.text),
                )
                .help("add `every: 1h`; a schedule runs every 1s to 30d"),
            ),
            Some(e) => {
                r.every_ms = self
                    .duration_in(file, &e.value, EVERY_RANGE_MS, Code::ScheduleEveryInvalid, "`every:`")
                    .unwrap_or(0);
            }
        }
        match keys.get("run") {
            None => self.push(
                Diagnostic::new(
                    Code::ScheduleMissingRun,
                    file,
                    decl.name.span,
                    format!("the schedule `{}` has no `run:`", decl.name.text),
                )
                .help("add `run: ACTION(...)` with literal arguments"),
            ),
            Some(e) => {
                let call = self.call(file, &e.value, CallSite::Schedule);
                r.call = call;
            }
        }
        r.timeout_ms = DEFAULT_RUN_TIMEOUT_MS;
        self.keep(index, r);
    }

    /// Checks a `run:` call; returns it resolved when everything about it is right.
    fn call(&mut self, file: usize, value: &Value<'a>, site: CallSite) -> Option<p::Call> {
        let ValueKind::Call { name, args } = &value.kind else {
            self.invalid_value(
                file,
                value,
                format!("`run:` takes one action call, found {}", value.kind.describe()),
                "write `run: record_payment(event.payment_id)`",
            );
            return None;
        };
        let action = self.resolve(file, DeclKind::Action, *name, Code::RunUnknownAction)?;
        // An action that did not parse has no parameters to check against.
        let params = self.types[action].clone()?;
        let (afile, adecl) = self.decls[action];
        let mut ok = true;
        if args.len() != params.len() {
            ok = false;
            let d = Diagnostic::new(
                Code::RunArityMismatch,
                file,
                name.span,
                format!(
                    "`{}` takes {} argument{}, but {} {} given",
                    name.text,
                    params.len(),
                    plural(params.len()),
                    args.len(),
                    if args.len() == 1 { "is" } else { "are" }
                ),
            )
            .label(afile, adecl.name.span, format!("`{}` is declared here", name.text));
            self.push(d);
        }
        let mut lowered = Vec::with_capacity(args.len());
        for (i, arg) in args.iter().enumerate() {
            let param = params.get(i).copied();
            match self.argument(file, arg, site, param) {
                Some(a) if self.lower == Lower::Yes => lowered.push(a),
                Some(_) => {}
                None => ok = false,
            }
        }
        ok.then_some(p::Call { action, args: lowered })
    }

    /// Checks one argument against its parameter (when there is one).
    fn argument(
        &mut self,
        file: usize,
        arg: &Value<'a>,
        site: CallSite,
        param: Option<(&'a str, Option<Type>)>,
    ) -> Option<p::Arg> {
        let (found, lowered): (Type, p::Arg) = match (&arg.kind, arg.kind.segments()) {
            (_, Some(segments))
                if segments[0].text == "event" && segments[0].span.end - segments[0].span.start == 5 =>
            {
                let event = match site {
                    CallSite::Schedule => {
                        self.push(
                            Diagnostic::new(
                                Code::ScheduleEventReference,
                                file,
                                arg.span,
                                format!("a schedule has no event, so `{}` means nothing here", path_text(segments)),
                            )
                            .help("pass literals to a schedule's action"),
                        );
                        return None;
                    }
                    CallSite::Subscriber(None) => {
                        if let [_, field] = segments {
                            self.refer_field(file, None, field.text, field.span);
                        }
                        return None;
                    }
                    CallSite::Subscriber(Some(e)) => e,
                };
                if segments.len() != 2 {
                    self.push(
                        Diagnostic::new(
                            Code::RunInvalidArgument,
                            file,
                            arg.span,
                            format!("`{}` is not an event field: fields have no fields", path_text(segments)),
                        )
                        .help("pass `event.FIELD`"),
                    );
                    return None;
                }
                let field = segments[1];
                self.refer_field(file, Some(event), field.text, field.span);
                let fields = self.types[event].clone()?;
                let Some((_, ty)) = fields.iter().find(|(n, _)| *n == field.text) else {
                    let (_, edecl) = self.decls[event];
                    let help = did_you_mean(field.text, fields.iter().map(|(n, _)| *n)).unwrap_or_else(|| {
                        format!(
                            "`{}` has the fields {}",
                            edecl.name.text,
                            fields.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                        )
                    });
                    self.push(
                        Diagnostic::new(
                            Code::RunUnknownField,
                            file,
                            field.span,
                            format!("the event `{}` has no field `{}`", edecl.name.text, field.text),
                        )
                        .help(help),
                    );
                    return None;
                };
                ((*ty)?, p::Arg::Field(self.owned(field.text)))
            }
            (ValueKind::Str(s), _) => {
                (Type { base: BaseType::String, optional: false }, p::Arg::Literal(p::Literal::String(self.owned(s))))
            }
            (ValueKind::Int(n), _) => {
                (Type { base: BaseType::Int, optional: false }, p::Arg::Literal(p::Literal::Int(*n)))
            }
            (ValueKind::Bool(b), _) => {
                (Type { base: BaseType::Bool, optional: false }, p::Arg::Literal(p::Literal::Bool(*b)))
            }
            (other, _) => {
                let help = match site {
                    CallSite::Schedule => "a schedule's arguments are literals: strings, integers, `true` or `false`",
                    CallSite::Subscriber(_) => {
                        "an argument is `event.FIELD` or a literal: a string, an integer, `true` or `false`"
                    }
                };
                self.push(
                    Diagnostic::new(
                        Code::RunInvalidArgument,
                        file,
                        arg.span,
                        format!("`{}` cannot be an argument: it is {}", source_text(arg), other.describe()),
                    )
                    .help(help),
                );
                return None;
            }
        };
        let (pname, Some(pty)) = param? else { return None };
        // A time is written as a string; its format is checked when the event arrives.
        let found_ok = assignable(found, pty)
            || (found.base == BaseType::String
                && pty.base == BaseType::Time
                && !found.optional
                && matches!(arg.kind, ValueKind::Str(_)));
        if !found_ok {
            let why = if found.optional && !pty.optional && found.base == pty.base {
                format!("`{}` may be absent, but `{pname}` takes `{}`", source_text(arg), type_name(pty))
            } else {
                format!("`{pname}` takes `{}`, but `{}` is `{}`", type_name(pty), source_text(arg), type_name(found))
            };
            let help = if found.optional && !pty.optional {
                format!(
                    "declare the parameter `{pname}: {}?`, or make the field required",
                    type_name(Type { optional: false, ..pty })
                )
            } else {
                format!("pass a value of type `{}`", type_name(pty))
            };
            self.push(Diagnostic::new(Code::RunTypeMismatch, file, arg.span, why).help(help));
            return None;
        }
        Some(lowered)
    }

    fn program(&self, files: &[SourceFile]) -> Program {
        let mut prog = Program::default();
        let mut index_of: HashMap<usize, usize> = HashMap::new();
        let lower_fields = |i: usize| -> Vec<p::Field> {
            self.types[i]
                .iter()
                .flat_map(|f| f.iter())
                .filter_map(|(n, t)| t.map(|ty| p::Field { name: n.to_string(), ty }))
                .collect()
        };
        // Declarations in order of kind, so indices are stable within each list.
        for (i, &(_, decl)) in self.decls.iter().enumerate() {
            match decl.kind {
                DeclKind::Event => {
                    index_of.insert(i, prog.events.len());
                    prog.events.push(p::Event { name: decl.name.text.to_string(), fields: lower_fields(i) });
                }
                DeclKind::Connection => {
                    if let Body::Block { block, .. } = &decl.body {
                        index_of.insert(i, prog.connections.len());
                        prog.connections.push(lower_connection(decl.name.text, block));
                    }
                }
                _ => {}
            }
        }
        for (i, &(_, decl)) in self.decls.iter().enumerate() {
            if decl.kind == DeclKind::Action {
                let Body::Block { block, .. } = &decl.body else { continue };
                let via = match block.get("via").map(|e| &e.value.kind) {
                    Some(ValueKind::Ident { name, .. }) => {
                        self.lookup(DeclKind::Connection, name).and_then(|c| index_of.get(&c).copied())
                    }
                    _ => None,
                };
                index_of.insert(i, prog.actions.len());
                prog.actions.push(p::Action {
                    name: decl.name.text.to_string(),
                    params: lower_fields(i),
                    connection: via.unwrap_or(0),
                    path: match block.get("path").map(|e| &e.value.kind) {
                        Some(ValueKind::Str(s)) => s.to_string(),
                        _ => format!("/{}", decl.name.text),
                    },
                    idempotent: matches!(block.get("idempotent").map(|e| &e.value.kind), Some(ValueKind::Bool(true))),
                });
            }
        }
        let remap = |call: &Option<p::Call>| -> p::Call {
            let call = call.clone().unwrap_or(p::Call { action: 0, args: Vec::new() });
            p::Call { action: index_of.get(&call.action).copied().unwrap_or(0), args: call.args }
        };
        let mut subscriber_index: HashMap<usize, usize> = HashMap::new();
        for (i, &(_, decl)) in self.decls.iter().enumerate() {
            let r = &self.resolved[i];
            match decl.kind {
                DeclKind::Subscriber => {
                    subscriber_index.insert(i, prog.subscribers.len());
                    prog.subscribers.push(p::Subscriber {
                        name: decl.name.text.to_string(),
                        event: r.event.and_then(|e| index_of.get(&e).copied()).unwrap_or(0),
                        call: remap(&r.call),
                        budget: r.budget,
                        timeout_ms: r.timeout_ms,
                    });
                }
                DeclKind::Schedule => prog.schedules.push(p::Schedule {
                    name: decl.name.text.to_string(),
                    every_ms: r.every_ms,
                    call: remap(&r.call),
                    timeout_ms: r.timeout_ms,
                }),
                _ => {}
            }
        }
        index_of.extend(subscriber_index);
        prog.tests = self.lower_tests(files, &index_of);
        prog
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

/// Where a call is: a subscriber's (with its event, `None` when unknown) or a schedule's.
#[derive(Clone, Copy)]
enum CallSite {
    Subscriber(Option<usize>),
    Schedule,
}

fn lower_connection(name: &str, block: &Block<'_>) -> p::Connection {
    let get = |k: &str| block.get(k).map(|e| &e.value.kind);
    p::Connection {
        name: name.to_string(),
        url: match get("url") {
            Some(ValueKind::Str(s)) => s.to_string(),
            _ => String::new(),
        },
        timeout_ms: match get("timeout") {
            Some(ValueKind::Duration(ms)) => *ms,
            _ => DEFAULT_CALL_TIMEOUT_MS,
        },
        attempts: match get("retry") {
            Some(ValueKind::Block(b)) => match b.get("attempts").map(|e| &e.value.kind) {
                Some(ValueKind::Int(n)) => *n as u32,
                _ => DEFAULT_CONNECTION_ATTEMPTS,
            },
            _ => DEFAULT_CONNECTION_ATTEMPTS,
        },
        headers: match get("headers") {
            Some(ValueKind::Block(b)) => {
                b.entries.iter().filter_map(|e| header_value(&e.value).map(|v| (e.key.text.to_string(), v))).collect()
            }
            _ => Vec::new(),
        },
        max_in_flight: match get("max_in_flight") {
            Some(ValueKind::Int(n)) => *n as u32,
            _ => DEFAULT_MAX_IN_FLIGHT,
        },
    }
}

fn header_value(value: &Value<'_>) -> Option<p::HeaderValue> {
    match &value.kind {
        ValueKind::Str(s) => Some(p::HeaderValue::Literal(s.to_string())),
        ValueKind::Call { name, args } if name.text == "env" && args.len() == 1 => match &args[0].kind {
            ValueKind::Str(var) if !var.is_empty() => Some(p::HeaderValue::Env(var.to_string())),
            _ => None,
        },
        _ => None,
    }
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Accepts `http://HOST...` and `https://HOST...`, with a host and no spaces.
fn check_url(url: &str) -> Result<(), String> {
    let rest = if let Some(r) = url.strip_prefix("https://") {
        r
    } else if let Some(r) = url.strip_prefix("http://") {
        r
    } else if let Some((scheme, _)) = url.split_once("://") {
        return Err(format!("`{url}` uses `{scheme}`; a connection's url is http or https"));
    } else {
        return Err(format!("`{url}` is not a url"));
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{}` holds spaces", url.escape_debug()));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host_only =
        if host.starts_with('[') { host.split(']').next().unwrap_or("") } else { host.split(':').next().unwrap_or("") };
    if host_only.trim_start_matches('[').is_empty() {
        return Err(format!("`{url}` has no host"));
    }
    if let Some(port) = host.strip_prefix(host_only).and_then(|p| p.trim_start_matches(']').strip_prefix(':'))
        && port.parse::<u16>().is_err()
    {
        return Err(format!("`{url}` has an invalid port `{port}`"));
    }
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn path_text(segments: &[Name<'_>]) -> String {
    segments.iter().map(|s| s.text).collect::<Vec<_>>().join(".")
}

/// A value as written, shortened for a message.
fn source_text(value: &Value<'_>) -> String {
    match &value.kind {
        ValueKind::Ident { name, optional } => format!("{name}{}", if *optional { "?" } else { "" }),
        ValueKind::Path(s) => path_text(s),
        ValueKind::LongPath(s) => path_text(s),
        ValueKind::Call { name, .. } => format!("{}(...)", name.text),
        ValueKind::Duration(ms) => format_duration(*ms),
        ValueKind::Block(_) => "{ ... }".into(),
        ValueKind::List(_) => "[ ... ]".into(),
        ValueKind::Str(s) => format!("\"{s}\""),
        ValueKind::Int(n) => n.to_string(),
        ValueKind::Bool(b) => b.to_string(),
    }
}
