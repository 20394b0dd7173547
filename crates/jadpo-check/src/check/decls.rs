//! Per-declaration checks: events, actions, subscribers (with their budgets) and
//! schedules. Connections have their own module.

use super::calls::CallSite;
use super::values::{EVENT_TYPES, base_type};
use super::{Cx, Lower, Resolved};
use crate::budget::*;
use crate::diagnostic::Diagnostic;
use crate::duration::format_duration;
use crate::program::{self as p, Type};
use crate::registry::Code;
use crate::suggest::did_you_mean;
use jadpo_syntax::ast::{Block, Decl, DeclKind, Name, Span, Value, ValueKind};
use std::sync::Arc;

impl<'a> Cx<'_, 'a> {
    pub(super) fn event(&mut self, index: usize, file: usize, block: &Block<'a>) {
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
            let ty = match &entry.value.kind {
                ValueKind::Block(b) => self.field_block(index, file, name, entry.value.span, b),
                _ => self.field_type(file, &entry.value, Code::EventTypeUnknown),
            };
            let key = Name { text: name, span: entry.key.span };
            self.define_member(index, key, entry.key.span.to(entry.value.span), ty, true);
            fields.push((name, ty));
            spans.push(entry.key.span);
        }
        std::sync::Arc::make_mut(&mut self.types)[index] = Some(fields.into());
    }

    /// A field declared as a block, `{ type: int  default: 0 }`: its type, and its
    /// default kept for lowering when it is of that type.
    fn field_block(&mut self, event: usize, file: usize, name: &'a str, span: Span, block: &Block<'a>) -> Option<Type> {
        let (mut ty_value, mut default) = (None, None);
        for e in &block.entries {
            match e.key.text.as_ref() {
                "type" if !e.key.quoted => ty_value = Some(&e.value),
                "default" if !e.key.quoted => default = Some(&e.value),
                other => {
                    let message = format!("`{other}` is not a key of a field");
                    let help = "a field's block takes `type:` and `default:`, such as `{ type: int, default: 0 }`";
                    self.push(Diagnostic::new(Code::DeclUnknownKey, file, e.key.span, message).help(help));
                }
            }
        }
        let Some(ty_value) = ty_value else {
            let message = format!("the field `{name}` has no `type:`");
            let help = "a field's block takes `type:` and `default:`, such as `{ type: int, default: 0 }`";
            self.push(Diagnostic::new(Code::EventTypeUnknown, file, span, message).help(help));
            return None;
        };
        let ty = self.field_type(file, ty_value, Code::EventTypeUnknown)?;
        if let Some(d) = default {
            let literal = match (ty.base, &d.kind) {
                (p::BaseType::Int | p::BaseType::Float, ValueKind::Int(n)) => Some(p::Literal::Int(*n)),
                (p::BaseType::String, ValueKind::Str(s)) => Some(p::Literal::String(self.owned(s))),
                (p::BaseType::Time, ValueKind::Str(s)) if p::is_timestamp(s) => Some(p::Literal::String(self.owned(s))),
                (p::BaseType::Bool, ValueKind::Bool(b)) => Some(p::Literal::Bool(*b)),
                _ => None,
            };
            match literal {
                Some(l) => Arc::make_mut(&mut self.defaults).push((event, name, l)),
                None => self.invalid_value(
                    file,
                    d,
                    format!("the default of `{name}` is not a value of its type"),
                    "a default is a literal of the field's type: `default: 0` for an `int`, `default: \"\"` for a `string`",
                ),
            }
        }
        Some(ty)
    }

    pub(super) fn action(
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
        std::sync::Arc::make_mut(&mut self.types)[index] = (!duplicate).then(|| types.into());
        let keys = self.keys(file, decl, block, &["via", "path", "idempotent"], &[]);
        let via = match keys.get("via") {
            None => {
                self.push(
                    Diagnostic::new(
                        Code::ActionMissingVia,
                        file,
                        decl.name.span,
                        format!("the action `{}` has no `via:`", decl.name.text),
                    )
                    .help("add `via: CONNECTION`, the connection it calls through"),
                );
                None
            }
            Some(e) => match e.value.kind {
                ValueKind::Ident { name, optional: false } => {
                    let n = Name { text: name, span: e.value.span };
                    self.resolve(file, DeclKind::Connection, n, Code::ActionUnknownConnection)
                }
                _ => {
                    self.invalid_value(
                        file,
                        &e.value,
                        format!("`via:` takes a connection's name, found {}", e.value.kind.describe()),
                        "write `via: ledger`",
                    );
                    None
                }
            },
        };
        // The path appended to the connection's url: `/` and the action's name by default.
        let mut path = None;
        if let Some(e) = keys.get("path") {
            match &e.value.kind {
                ValueKind::Str(s) if s.starts_with('/') && !s.chars().any(char::is_whitespace) => {
                    path = Some(self.owned(s));
                }
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
        let mut idempotent = false;
        if let Some(e) = keys.get("idempotent") {
            match e.value.kind {
                ValueKind::Bool(b) => idempotent = b,
                _ => self.invalid_value(
                    file,
                    &e.value,
                    format!("`idempotent:` takes `true` or `false`, found {}", e.value.kind.describe()),
                    "write `idempotent: true` when repeating the call does no harm",
                ),
            }
        }
        if let Some(via) = via
            && self.lower == Lower::Yes
        {
            let path = path.unwrap_or_else(|| format!("/{}", decl.name.text));
            self.keep(index, Resolved::Action { via, path, idempotent });
        }
    }

    pub(super) fn subscriber(&mut self, index: usize, file: usize, decl: &Decl<'a>, block: &Block<'a>) {
        let keys = self.keys(file, decl, block, &["on", "run", "retry", "timeout", "where", "order_by", "was"], &[]);
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
                // jadpo's own events: `jadpo.NAME`, looked up as written.
                ValueKind::Path([ns, _]) if ns.text == "jadpo" => {
                    let text = self.written(file, e.value.span);
                    Some(self.resolve(
                        file,
                        DeclKind::Event,
                        Name { text, span: e.value.span },
                        Code::SubscriberUnknownEvent,
                    ))
                }
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
        let call = match keys.get("run") {
            None => {
                self.push(
                    Diagnostic::new(
                        Code::SubscriberMissingRun,
                        file,
                        decl.name.span,
                        format!("the subscriber `{}` has no `run:`", decl.name.text),
                    )
                    .help("add `run: ACTION(event.FIELD, ...)`, the action it runs"),
                );
                None
            }
            Some(e) => self.call(file, &e.value, CallSite::Subscriber(event)),
        };
        let budget = match keys.get("retry") {
            Some(e) => self.budget(file, &e.value),
            None => p::Budget::default(),
        };
        let timeout_ms = match keys.get("timeout") {
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
        let errors_before = self.errors_if_lowering();
        let filter = keys.get("where").and_then(|e| self.condition(file, &e.value, event));
        let order_by = keys.get("order_by").and_then(|e| self.order_by(file, &e.value, event));
        if let (Some(event), Some(call)) = (event, call)
            && self.clean_since(errors_before)
        {
            self.keep(index, Resolved::Subscriber { event, call, budget, timeout_ms, filter, order_by });
        }
    }

    pub(super) fn budget(&mut self, file: usize, value: &Value<'a>) -> p::Budget {
        let code = Code::SubscriberRetryInvalid;
        let mut budget = p::Budget::default();
        let Some(block) = self.block_of(code, file, "retry", value, "write `retry: { attempts: 20  within: 3d }`")
        else {
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
                        ValueKind::Duration(_) => {
                            self.push(
                                Diagnostic::new(
                                    code,
                                    file,
                                    entry.value.span,
                                    format!(
                                        "`within` must be more than 0 and at most 30d, found `{}`",
                                        self.written(file, entry.value.span)
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

    pub(super) fn schedule(&mut self, index: usize, file: usize, decl: &Decl<'a>, block: &Block<'a>) {
        let special =
            [("retry", Code::ScheduleRetryNotAllowed, "a schedule has no `retry:`: its next due time is its retry")];
        let keys = self.keys(file, decl, block, &["every", "run"], &special);
        let every_ms = match keys.get("every") {
            None => {
                self.push(
                    Diagnostic::new(
                        Code::ScheduleEveryInvalid,
                        file,
                        decl.name.span,
                        format!("the schedule `{}` has no `every:`", decl.name.text),
                    )
                    .help("add `every: 1h`; a schedule runs every 1s to 30d"),
                );
                None
            }
            Some(e) => self.duration_in(file, &e.value, EVERY_RANGE_MS, Code::ScheduleEveryInvalid, "`every:`"),
        };
        let call = match keys.get("run") {
            None => {
                self.push(
                    Diagnostic::new(
                        Code::ScheduleMissingRun,
                        file,
                        decl.name.span,
                        format!("the schedule `{}` has no `run:`", decl.name.text),
                    )
                    .help("add `run: ACTION(...)` with literal arguments"),
                );
                None
            }
            Some(e) => self.call(file, &e.value, CallSite::Schedule),
        };
        if let (Some(every_ms), Some(call)) = (every_ms, call) {
            self.keep(index, Resolved::Schedule { every_ms, call });
        }
    }
}
