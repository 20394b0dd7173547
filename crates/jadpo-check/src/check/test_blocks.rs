//! Checking and lowering `test "name" { ... }` blocks.

use super::Cx;
use super::values::{assignable, type_name};
use crate::diagnostic::Diagnostic;
use crate::program::{self as p, Answer, BaseType, FailureKind, Type};
use crate::registry::Code;
use crate::suggest::did_you_mean;
use jadpo_syntax::ast::{Block, Decl, DeclKind, Name, Step, StepKind, Value, ValueKind};

/// A test that checked clean; its steps name declarations by their index in the
/// checker's list until lowering maps them to the program's lists.
pub(super) struct PendingTest {
    pub(super) file: usize,
    pub(super) offset: u32,
    pub(super) name: String,
    pub(super) steps: Vec<p::Step>,
}

impl<'a> Cx<'_, 'a> {
    pub(super) fn test(&mut self, _index: usize, file: usize, decl: &Decl<'a>, title: &str, steps: &[Step<'a>]) {
        let errors_before = self.errors_if_lowering();
        let mut lowered = Vec::with_capacity(steps.len());
        let mut faked: Vec<usize> = Vec::new();
        let mut emitted: Vec<(usize, Name<'a>)> = Vec::new();
        for step in steps {
            match &step.kind {
                StepKind::Fake { connection, answers } => {
                    let conn = self.resolve(file, DeclKind::Connection, *connection, Code::TestUnknownConnection);
                    // A fake with a bad answer is still the connection's fake: no warning
                    // that it has none.
                    faked.extend(conn);
                    let answers = self.answers(file, answers);
                    if let (Some(c), Some(a)) = (conn, answers) {
                        lowered.push(p::Step::Fake { connection: c, answers: a });
                    }
                }
                StepKind::Emit { event, fields } => {
                    if let Some(e) = self.resolve(file, DeclKind::Event, *event, Code::TestUnknownEvent)
                        && let Some(values) = self.emit_fields(file, e, *event, fields)
                    {
                        emitted.push((e, *event));
                        lowered.push(p::Step::Emit { event: e, fields: values });
                    }
                }
                StepKind::Wait { ms, .. } => lowered.push(p::Step::Wait { ms: *ms }),
                StepKind::Retry { subscriber } => {
                    if let Some(s) = self.resolve(file, DeclKind::Subscriber, *subscriber, Code::TestUnknownSubscriber)
                    {
                        lowered.push(p::Step::Retry { subscriber: s });
                    }
                }
                StepKind::Expect { subscriber, block } => {
                    let s = self.resolve(file, DeclKind::Subscriber, *subscriber, Code::TestUnknownSubscriber);
                    let expect = self.delivery_expect(file, block);
                    if let (Some(subscriber), Some(expect)) = (s, expect) {
                        lowered.push(p::Step::Expect { subscriber, expect });
                    }
                }
                StepKind::ExpectBreaker { connection, block } => {
                    let c = self.resolve(file, DeclKind::Connection, *connection, Code::TestUnknownConnection);
                    let expect = self.breaker_expect(file, block);
                    if let (Some(connection), Some(expect)) = (c, expect) {
                        lowered.push(p::Step::ExpectBreaker { connection, expect });
                    }
                }
            }
        }
        self.missing_fakes(file, &faked, &emitted);
        if self.clean_since(errors_before) {
            self.tests.push(PendingTest { file, offset: decl.span.start, name: title.to_string(), steps: lowered });
        }
    }

    /// Warns once per emit whose subscribers call through a connection with no fake.
    pub(super) fn missing_fakes(&mut self, file: usize, faked: &[usize], emitted: &[(usize, Name<'a>)]) {
        for &(event, name) in emitted {
            let mut missing: Vec<&'a str> = Vec::new();
            for &(decl_file, decl) in self.decls.iter() {
                let Some(conn) = self.subscriber_connection(decl_file, decl, event) else { continue };
                let conn_name = self.decls[conn].1.name.text;
                if !faked.contains(&conn) && !missing.contains(&conn_name) {
                    missing.push(conn_name);
                }
            }
            if !missing.is_empty() {
                let list = missing.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>().join(", ");
                self.push(
                    Diagnostic::new(
                        Code::TestMissingFake,
                        file,
                        name.span,
                        format!("`{}` reaches {list}, which this test gives no fake: every call through it fails `unavailable`", name.text),
                    )
                    .help(format!("add `fake {}: [ok]` (or the answers you mean) before the emit", missing[0])),
                );
            }
        }
    }

    /// The connection a subscriber of `event` calls through, when `decl` (of `file`)
    /// is one.
    pub(super) fn subscriber_connection(&self, file: usize, decl: &Decl<'a>, event: usize) -> Option<usize> {
        use jadpo_syntax::ast::Body;
        if decl.kind != DeclKind::Subscriber {
            return None;
        }
        let Body::Block { block, .. } = &decl.body else { return None };
        let on = &block.get("on")?.value;
        let on = match on.kind {
            ValueKind::Ident { name, .. } => name,
            // One of jadpo's own events, looked up as written (as `on:` is checked).
            ValueKind::Path([ns, _]) if ns.text == "jadpo" => self.written(file, on.span),
            _ => return None,
        };
        if self.lookup(DeclKind::Event, on)? != event {
            return None;
        }
        let ValueKind::Call { name, .. } = &block.get("run")?.value.kind else { return None };
        let action = self.lookup(DeclKind::Action, name.text)?;
        let Body::Block { block: ablock, .. } = &self.decls[action].1.body else { return None };
        match ablock.get("via")?.value.kind {
            ValueKind::Ident { name, .. } => self.lookup(DeclKind::Connection, name),
            _ => None,
        }
    }

    pub(super) fn answers(&mut self, file: usize, list: &Value<'a>) -> Option<Vec<p::FakeAnswer>> {
        let ValueKind::List(items) = &list.kind else { return None };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        if items.is_empty() {
            self.push(
                Diagnostic::new(Code::TestInvalidAnswer, file, list.span, "a fake needs at least one answer")
                    .help("write `[ok]`, or `[unavailable * 5, ok]`"),
            );
            return None;
        }
        for item in items {
            let times = match item.times {
                Some((0, span)) => {
                    self.push(
                        Diagnostic::new(Code::TestInvalidAnswer, file, span, "an answer repeated 0 times is no answer")
                            .help("repeat it at least once, or leave it out"),
                    );
                    ok = false;
                    continue;
                }
                Some((n, _)) => u32::try_from(n).unwrap_or(u32::MAX),
                None => 1,
            };
            match answer(&item.value) {
                Ok(answer) => out.push(p::FakeAnswer { answer, times }),
                Err(why) => {
                    let word = match &item.value.kind {
                        ValueKind::Ident { name, .. } => Some(*name),
                        ValueKind::Call { name, .. } => Some(name.text),
                        _ => None,
                    };
                    let words = ["ok", "hang"]
                        .into_iter()
                        .chain(FailureKind::ALL.iter().filter(|k| k.is_fake_answer()).map(|k| k.as_str()));
                    let help = word.and_then(|w| did_you_mean(w, words)).unwrap_or_else(|| {
                        "an answer is `ok`, `hang`, a failure kind (`unavailable`, `rate_limited`, `not_found`, `conflict`, `rejected`, `outcome_unknown`, `internal_fault`), or `rate_limited(2m)` with a Retry-After".into()
                    });
                    self.push(Diagnostic::new(Code::TestInvalidAnswer, file, item.value.span, why).help(help));
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    pub(super) fn emit_fields(
        &mut self,
        file: usize,
        event: usize,
        name: Name<'a>,
        block: &Block<'a>,
    ) -> Option<Vec<(String, p::Literal)>> {
        for entry in &block.entries {
            self.refer_field(file, Some(event), &entry.key.text, entry.key.span);
        }
        // An event that did not parse has no fields to check against.
        let fields = self.types[event].clone()?;
        let mut ok = true;
        let mut out = Vec::with_capacity(block.entries.len());
        let mut seen: Vec<&str> = Vec::new();
        for entry in &block.entries {
            let key: &str = &entry.key.text;
            let Some((_, ty)) = fields.iter().find(|(n, _)| *n == key) else {
                let help = did_you_mean(key, fields.iter().map(|(n, _)| *n)).unwrap_or_else(|| {
                    format!(
                        "`{}` has the fields {}",
                        name.text,
                        fields.iter().map(|(n, _)| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                    )
                });
                self.push(
                    Diagnostic::new(
                        Code::TestUnknownField,
                        file,
                        entry.key.span,
                        format!("the event `{}` has no field `{key}`", name.text),
                    )
                    .help(help),
                );
                ok = false;
                continue;
            };
            if seen.contains(&key) {
                self.push(Diagnostic::new(
                    Code::TestInvalidEmit,
                    file,
                    entry.key.span,
                    format!("the field `{key}` is given twice"),
                ));
                ok = false;
                continue;
            }
            seen.push(key);
            let Some(ty) = *ty else {
                ok = false;
                continue;
            };
            let (found, literal) = match &entry.value.kind {
                ValueKind::Str(s) => (BaseType::String, p::Literal::String(self.owned(s))),
                ValueKind::Int(n) => (BaseType::Int, p::Literal::Int(*n)),
                ValueKind::Bool(b) => (BaseType::Bool, p::Literal::Bool(*b)),
                other => {
                    self.push(
                        Diagnostic::new(
                            Code::TestInvalidEmit,
                            file,
                            entry.value.span,
                            format!("`{key}` takes `{}`, found {}", type_name(ty), other.describe()),
                        )
                        .help("an emitted field is a string, an integer, `true` or `false`"),
                    );
                    ok = false;
                    continue;
                }
            };
            let found = Type { base: found, optional: false };
            if ty.base == BaseType::Time
                && let ValueKind::Str(s) = &entry.value.kind
            {
                if !self.check_time(file, &entry.value, s) {
                    ok = false;
                    continue;
                }
            } else if !assignable(found, ty) {
                self.push(
                    Diagnostic::new(
                        Code::TestInvalidEmit,
                        file,
                        entry.value.span,
                        format!("`{key}` takes `{}`, found `{}`", type_name(ty), type_name(found)),
                    )
                    .help(format!("give `{key}` a value of type `{}`", type_name(ty))),
                );
                ok = false;
                continue;
            }
            out.push((self.owned(key), literal));
        }
        let missing: Vec<&str> = fields
            .iter()
            .filter(|(n, t)| t.is_some_and(|t| !t.optional) && !seen.contains(n))
            // A field with a default may be left out, as from any event.
            .filter(|(n, _)| !self.defaults.iter().any(|(e, f, _)| *e == event && f == n))
            .map(|(n, _)| *n)
            .collect();
        if !missing.is_empty() && ok {
            let list = missing.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
            self.push(
                Diagnostic::new(
                    Code::TestInvalidEmit,
                    file,
                    name.span,
                    format!(
                        "this emit of `{}` misses the required {} {list}",
                        name.text,
                        crate::words::noun(missing.len() as u64, "field")
                    ),
                )
                .help("give every field that is not optional (`T?`) or defaulted a value"),
            );
            ok = false;
        }
        ok.then_some(out)
    }

    pub(super) fn delivery_expect(&mut self, file: usize, block: &Block<'a>) -> Option<p::DeliveryExpect> {
        let mut expect = p::DeliveryExpect::default();
        let keys = ["state", "attempts", "last_failure", "held"];
        let ok = self.expect_block(file, block, "expect", &keys, |key, v| {
            Some(match key {
                "state" => ident(v).and_then(p::DeliveryState::parse).map(|s| expect.state = Some(s)).ok_or(
                    "`state:` is one of `pending`, `running`, `held`, `succeeded`, `failed`, `parked`, `skipped`",
                ),
                "attempts" => count(v).map(|n| expect.attempts = Some(n)).ok_or("`attempts:` is a count from 0 to 100"),
                "last_failure" => ident(v)
                    .and_then(FailureKind::parse)
                    .map(|k| expect.last_failure = Some(k))
                    .ok_or("`last_failure:` is a failure kind, such as `unavailable` or `deadline_exceeded`"),
                "held" => match v.kind {
                    ValueKind::Bool(b) => {
                        expect.held = Some(b);
                        Ok(())
                    }
                    _ => Err("`held:` is `true` or `false`"),
                },
                _ => return None,
            })
        });
        ok.then_some(expect)
    }

    pub(super) fn breaker_expect(&mut self, file: usize, block: &Block<'a>) -> Option<p::BreakerExpect> {
        let mut expect = p::BreakerExpect::default();
        let ok = self.expect_block(file, block, "expect breaker", &["state", "alerts"], |key, v| {
            Some(match key {
                "state" => ident(v)
                    .and_then(p::BreakerState::parse)
                    .map(|s| expect.state = Some(s))
                    .ok_or("a breaker's `state:` is `closed`, `open` or `probing`"),
                "alerts" => count(v).map(|n| expect.alerts = Some(n)).ok_or("`alerts:` is a count"),
                _ => return None,
            })
        });
        ok.then_some(expect)
    }

    /// Walks an `expect` block. `set` takes a key and its value: `None` for a key it
    /// does not know, `Err(help)` for a value it cannot take. False when anything was
    /// reported.
    pub(super) fn expect_block(
        &mut self,
        file: usize,
        block: &Block<'a>,
        what: &str,
        keys: &[&str],
        mut set: impl FnMut(&str, &Value<'a>) -> Option<Result<(), &'static str>>,
    ) -> bool {
        let mut ok = true;
        for entry in &block.entries {
            let v = &entry.value;
            match set(&entry.key.text, v) {
                Some(Ok(())) => {}
                Some(Err(help)) => {
                    self.push(
                        Diagnostic::new(
                            Code::TestInvalidExpect,
                            file,
                            v.span,
                            format!("`{}` cannot be {}", entry.key.text, shown(v)),
                        )
                        .help(help),
                    );
                    ok = false;
                }
                None => {
                    let list = keys.iter().map(|k| format!("`{k}:`")).collect::<Vec<_>>().join(", ");
                    let help = did_you_mean(&entry.key.text, keys.iter().copied())
                        .unwrap_or_else(|| format!("`{what}` checks {list}"));
                    self.push(
                        Diagnostic::new(
                            Code::TestInvalidExpect,
                            file,
                            entry.key.span,
                            format!("`{}` is not something `{what}` checks", entry.key.text),
                        )
                        .help(help),
                    );
                    ok = false;
                }
            }
        }
        ok
    }
}

fn ident<'v>(v: &'v Value<'_>) -> Option<&'v str> {
    match v.kind {
        ValueKind::Ident { name, optional: false } => Some(name),
        _ => None,
    }
}

/// One fake answer: `ok`, `hang`, a kind, or `kind(DURATION)` for a Retry-After.
fn answer(v: &Value<'_>) -> Result<Answer, String> {
    match &v.kind {
        ValueKind::Ident { name: "ok", optional: false } => Ok(Answer::Ok),
        ValueKind::Ident { name: "hang", optional: false } => Ok(Answer::Hang),
        ValueKind::Ident { name, optional: false } => match FailureKind::parse(name).filter(|k| k.is_fake_answer()) {
            Some(kind) => Ok(Answer::Fail { kind, retry_after_ms: None }),
            None => Err(format!("`{name}` is not an answer")),
        },
        ValueKind::Call { name, args } => {
            let kind = FailureKind::parse(name.text)
                .filter(|k| k.is_fake_answer())
                .ok_or_else(|| format!("`{}` is not an answer", name.text))?;
            if !matches!(kind, FailureKind::Unavailable | FailureKind::RateLimited) {
                return Err(format!("only `unavailable` and `rate_limited` take a Retry-After, not `{kind}`"));
            }
            match args.as_slice() {
                [Value { kind: ValueKind::Duration(ms), .. }] => Ok(Answer::Fail { kind, retry_after_ms: Some(*ms) }),
                _ => Err(format!("`{kind}(...)` takes one duration, its Retry-After, such as `{kind}(2m)`")),
            }
        }
        other => Err(format!("{} is not an answer", other.describe())),
    }
}

/// The value as written when it is a word or number, else what kind it is.
fn shown(v: &Value<'_>) -> String {
    match &v.kind {
        ValueKind::Ident { name, .. } => format!("`{name}`"),
        ValueKind::Int(n) => format!("`{n}`"),
        ValueKind::Bool(b) => format!("`{b}`"),
        other => other.describe().to_string(),
    }
}

/// A non-negative integer that fits a count.
fn count(v: &Value<'_>) -> Option<u32> {
    match v.kind {
        ValueKind::Int(n) => u32::try_from(n).ok(),
        _ => None,
    }
}
