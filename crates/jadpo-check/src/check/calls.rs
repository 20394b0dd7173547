//! Calls and arguments: a `run:` call's action, its arity, and each argument
//! against its parameter's type.

use super::values::{assignable, type_name};
use super::{Cx, Lower};
use crate::diagnostic::Diagnostic;
use crate::duration::format_duration;
use crate::program::{self as p, BaseType, Type};
use crate::registry::Code;
use crate::words::plural;
use jadpo_syntax::ast::{DeclKind, Name, Value, ValueKind};

impl<'a> Cx<'_, 'a> {
    /// Checks a `run:` call; returns it resolved when everything about it is right.
    pub(super) fn call(&mut self, file: usize, value: &Value<'a>, site: CallSite) -> Option<p::Call> {
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
                    "`{}` takes {}, but {} {} given",
                    name.text,
                    plural(params.len() as u64, "argument"),
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
    pub(super) fn argument(
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
                    self.unknown_field(file, event, field, &fields, Code::RunUnknownField);
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
        // A time is written as a string literal, checked here; a time field is
        // checked when its event arrives.
        if pty.base == BaseType::Time
            && let ValueKind::Str(s) = &arg.kind
        {
            return self.check_time(file, arg, s).then_some(lowered);
        }
        if !assignable(found, pty) {
            let why = if found.optional && !pty.optional && found.base == pty.base {
                format!("`{}` may be absent, but `{pname}` takes `{}`", source_text(arg), type_name(pty))
            } else {
                format!("`{pname}` takes `{}`, but `{}` is `{}`", type_name(pty), source_text(arg), type_name(found))
            };
            // Each help is a change that checks clean: only the optional mark differs,
            // or the parameter takes the field's own type.
            let required = |t: Type| Type { optional: false, ..t };
            let is_field = matches!(lowered, p::Arg::Field(_));
            let help = if assignable(required(found), required(pty)) {
                format!("declare the parameter `{pname}: {}?`, or make the field required", type_name(required(pty)))
            } else if is_field {
                format!(
                    "pass a field of type `{}`, or declare the parameter `{pname}: {}` to take this one",
                    type_name(pty),
                    type_name(found)
                )
            } else {
                format!("pass a value of type `{}`", type_name(pty))
            };
            self.push(Diagnostic::new(Code::RunTypeMismatch, file, arg.span, why).help(help));
            return None;
        }
        Some(lowered)
    }
}

/// Where a call is: a subscriber's (with its event, `None` when unknown) or a schedule's.
#[derive(Clone, Copy)]
pub(super) enum CallSite {
    Subscriber(Option<usize>),
    Schedule,
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
        ValueKind::Rate(r) => r.to_string(),
        ValueKind::Expr(_) => "a condition".into(),
    }
}
