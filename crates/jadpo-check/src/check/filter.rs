//! A subscriber's `where:` (which of its events it takes) and `order_by:` (which
//! of its deliveries run one at a time), both on the fields of its own event.

use super::values::type_name;
use super::{Cx, Lower};
use crate::diagnostic::Diagnostic;
use crate::program::{self as p, BaseType, Type};
use crate::registry::Code;
use crate::suggest::did_you_mean;
use jadpo_syntax::ast::{CompareOp, Expr, Name, Span, Value, ValueKind};

const WHERE_HELP: &str = "write a condition on the event's fields, such as \
`where: event.amount_cents >= 10000 and event.currency in [\"EUR\", \"USD\"]`";

/// A side of a comparison once checked: a field with its type, or a literal
/// with the value it was written as.
enum Side<'s, 'a> {
    Field(&'a str, Type),
    Literal(p::Literal, BaseType, &'s Value<'a>),
}

impl<'a> Cx<'_, 'a> {
    /// An event field named by `event.FIELD` (`value`), with its type; reported
    /// with `code` when `value` is no such path or the event has no such field.
    /// `None` when it is wrong, or when the event's fields are unknown.
    fn event_field(&mut self, file: usize, value: &Value<'a>, event: usize, code: Code) -> Option<(&'a str, Type)> {
        let segments = match &value.kind {
            ValueKind::Path(s) => &s[..],
            ValueKind::LongPath(s) => &s[..],
            _ => return None,
        };
        let [head, field] = segments else {
            let text = segments.iter().map(|s| s.text).collect::<Vec<_>>().join(".");
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`{text}` is not an event field: fields have no fields"),
                )
                .help("name a field of the subscriber's event: `event.FIELD`"),
            );
            return None;
        };
        if head.text != "event" {
            self.push(
                Diagnostic::new(code, file, head.span, format!("`{}.{}` is not an event field", head.text, field.text))
                    .help("name a field of the subscriber's event: `event.FIELD`"),
            );
            return None;
        }
        self.refer_field(file, Some(event), field.text, field.span);
        let fields = self.types[event].clone()?;
        match fields.iter().find(|(n, _)| *n == field.text) {
            Some((name, ty)) => Some((name, (*ty)?)),
            None => {
                self.unknown_field(file, event, *field, &fields, code);
                None
            }
        }
    }

    /// `field` is not a field of `event` (whose fields are `fields`): `code`
    /// at the field's span, with the closest name or the event's fields.
    pub(super) fn unknown_field(
        &mut self,
        file: usize,
        event: usize,
        field: Name<'a>,
        fields: &[(&'a str, Option<Type>)],
        code: Code,
    ) {
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
                code,
                file,
                field.span,
                format!("the event `{}` has no field `{}`", edecl.name.text, field.text),
            )
            .help(help),
        );
    }

    /// A subscriber's `order_by:`: a `string` or `int` field of its event.
    pub(super) fn order_by(&mut self, file: usize, value: &Value<'a>, event: Option<usize>) -> Option<String> {
        let code = Code::SubscriberOrderByInvalid;
        if !matches!(value.kind, ValueKind::Path(_) | ValueKind::LongPath(_)) {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`order_by:` takes an event field, found {}", value.kind.describe()),
                )
                .help("write `order_by: event.customer_id`, a `string` or `int` field"),
            );
            return None;
        }
        let (name, ty) = self.event_field(file, value, event?, code)?;
        if !matches!(ty.base, BaseType::String | BaseType::Int) {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`order_by:` takes a `string` or `int` field, but `event.{name}` is `{}`", type_name(ty)),
                )
                .help("order by a field that names what must stay in order, such as a customer's id"),
            );
            return None;
        }
        Some(self.owned(name))
    }

    /// A subscriber's `where:`, checked against its event's fields.
    pub(super) fn condition(&mut self, file: usize, value: &Value<'a>, event: Option<usize>) -> Option<p::Filter> {
        let Some(event) = event else {
            // The event is unknown: its fields cannot be checked, but their names are
            // still references the editor can follow.
            return None;
        };
        self.filter(file, value, event)
    }

    fn filter(&mut self, file: usize, value: &Value<'a>, event: usize) -> Option<p::Filter> {
        let code = Code::SubscriberWhereInvalid;
        let expr = match &value.kind {
            ValueKind::Expr(expr) => expr.as_ref(),
            ValueKind::Path(_) | ValueKind::LongPath(_) => {
                let (name, ty) = self.event_field(file, value, event, code)?;
                if ty.base != BaseType::Bool {
                    self.push(
                        Diagnostic::new(
                            code,
                            file,
                            value.span,
                            format!("`event.{name}` is `{}`, not a condition", type_name(ty)),
                        )
                        .help(format!(
                            "compare it: `event.{name} == ...`; a field alone is a condition when it is `bool`"
                        )),
                    );
                    return None;
                }
                return Some(p::Filter::True(self.owned(name)));
            }
            other => {
                self.push(
                    Diagnostic::new(
                        code,
                        file,
                        value.span,
                        format!("`where:` takes a condition, found {}", other.describe()),
                    )
                    .help(WHERE_HELP),
                );
                return None;
            }
        };
        match expr {
            Expr::And(operands) | Expr::Or(operands) => {
                // Every operand is checked, so that each mistake is reported at once.
                let checked: Vec<_> = operands.iter().map(|o| self.filter(file, o, event)).collect();
                let all: Option<Vec<_>> = checked.into_iter().collect();
                let all = all?;
                Some(if matches!(expr, Expr::And(_)) { p::Filter::All(all) } else { p::Filter::Any(all) })
            }
            Expr::Not { operand, .. } => Some(p::Filter::Not(Box::new(self.filter(file, operand, event)?))),
            Expr::Paren(inner) => self.filter(file, inner, event),
            Expr::Compare { op, op_span, left, right } => {
                let (l, r) = (self.side(file, left, event), self.side(file, right, event));
                let (l, r) = (l?, r?);
                self.compare(file, value.span, *op, *op_span, l, r)
            }
            Expr::In { left, list, negated, op_span } => {
                let (name, ty) = match self.side(file, left, event)? {
                    Side::Field(name, ty) => (name, ty),
                    Side::Literal(..) => {
                        self.push(
                            Diagnostic::new(code, file, left.span, "`in` tests an event field, not a literal")
                                .help("write `event.FIELD in [...]`"),
                        );
                        return None;
                    }
                };
                let ValueKind::List(items) = &list.kind else { return None };
                if items.is_empty() {
                    self.push(
                        Diagnostic::new(code, file, list.span, "the list after `in` is empty, so the test never holds")
                            .help("list the values the field may take"),
                    );
                    return None;
                }
                let mut values = Vec::with_capacity(items.len());
                let mut ok = true;
                for item in items.iter() {
                    if let Some((_, span)) = item.times {
                        self.push(
                            Diagnostic::new(code, file, span, "a list after `in` takes values, not repetitions")
                                .help("write each value once"),
                        );
                        ok = false;
                        continue;
                    }
                    match self.side(file, &item.value, event) {
                        Some(Side::Literal(lit, base, written)) if comparable(ty.base, base) => {
                            ok &= self.literal_fits(file, written, ty.base);
                            values.push(lit);
                        }
                        Some(Side::Literal(_, base, _)) => {
                            self.push(self.mismatch(file, item.value.span, name, ty, base));
                            ok = false;
                        }
                        Some(Side::Field(..)) => {
                            self.push(
                                Diagnostic::new(code, file, item.value.span, "a list after `in` takes literals")
                                    .help("compare two fields with `==`"),
                            );
                            ok = false;
                        }
                        None => ok = false,
                    }
                }
                if !matches!(ty.base, BaseType::String | BaseType::Int | BaseType::Bool) {
                    self.push(
                        Diagnostic::new(
                            code,
                            file,
                            *op_span,
                            format!(
                                "`in` tests a `string`, `int` or `bool` field, but `event.{name}` is `{}`",
                                type_name(ty)
                            ),
                        )
                        .help("compare it with `<`, `<=`, `>` or `>=`"),
                    );
                    return None;
                }
                (ok && self.lower == Lower::Yes).then(|| p::Filter::In {
                    field: name.to_string(),
                    values,
                    negated: *negated,
                    ty: ty.base,
                })
            }
        }
    }

    /// One side of a comparison: `event.FIELD` or a literal.
    fn side<'s>(&mut self, file: usize, value: &'s Value<'a>, event: usize) -> Option<Side<'s, 'a>> {
        let code = Code::SubscriberWhereInvalid;
        Some(match &value.kind {
            ValueKind::Path(_) | ValueKind::LongPath(_) => {
                let (name, ty) = self.event_field(file, value, event, code)?;
                Side::Field(name, ty)
            }
            ValueKind::Str(s) => Side::Literal(p::Literal::String(self.owned(s)), BaseType::String, value),
            ValueKind::Int(n) => Side::Literal(p::Literal::Int(*n), BaseType::Int, value),
            ValueKind::Bool(b) => Side::Literal(p::Literal::Bool(*b), BaseType::Bool, value),
            ValueKind::Expr(_) => {
                self.push(
                    Diagnostic::new(
                        code,
                        file,
                        value.span,
                        "a comparison's side is a field or a literal, not a condition",
                    )
                    .help("join conditions with `and` or `or`, in parentheses where they meet"),
                );
                return None;
            }
            other => {
                self.push(
                    Diagnostic::new(
                        code,
                        file,
                        value.span,
                        format!("a comparison takes `event.FIELD` or a literal, found {}", other.describe()),
                    )
                    .help("compare with a string, an integer, `true` or `false`"),
                );
                return None;
            }
        })
    }

    fn compare(
        &mut self,
        file: usize,
        span: Span,
        op: CompareOp,
        op_span: Span,
        left: Side<'_, 'a>,
        right: Side<'_, 'a>,
    ) -> Option<p::Filter> {
        let code = Code::SubscriberWhereInvalid;
        // The field on the left: `10 < event.n` is `event.n > 10`.
        let (field, other, op) = match (left, right) {
            (Side::Literal(..), Side::Literal(..)) => {
                self.push(
                    Diagnostic::new(code, file, span, "this compares two literals, so it is the same for every event")
                        .help("compare an event field: `event.FIELD == ...`"),
                );
                return None;
            }
            (f @ Side::Field(..), other) => (f, other, op),
            (other, f @ Side::Field(..)) => (f, other, op.flipped()),
        };
        let Side::Field(name, ty) = field else { return None };
        let (right, right_base) = match other {
            Side::Field(other_name, other_ty) => {
                if !comparable(ty.base, other_ty.base) {
                    self.push(
                        Diagnostic::new(
                            code,
                            file,
                            span,
                            format!(
                                "`event.{name}` is `{}` and `event.{other_name}` is `{}`: they cannot be compared",
                                type_name(ty),
                                type_name(other_ty)
                            ),
                        )
                        .help("compare fields of one type"),
                    );
                    return None;
                }
                (p::Operand::Field(self.owned(other_name)), other_ty.base)
            }
            Side::Literal(lit, base, written) => {
                if !comparable(ty.base, base) {
                    self.push(self.mismatch(file, span, name, ty, base));
                    return None;
                }
                if !self.literal_fits(file, written, ty.base) {
                    return None;
                }
                (p::Operand::Literal(lit), base)
            }
        };
        let ordered = matches!(ty.base, BaseType::Int | BaseType::Float | BaseType::Time);
        if !ordered && !matches!(op, CompareOp::Eq | CompareOp::Ne) {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    op_span,
                    format!("`event.{name}` is `{}`, which has no order: it takes `==` and `!=`", type_name(ty)),
                )
                .help("order comparisons (`<`, `<=`, `>`, `>=`) take `int`, `float` and `time` fields"),
            );
            return None;
        }
        let ty = if ty.base == BaseType::Float || right_base == BaseType::Float { BaseType::Float } else { ty.base };
        (self.lower == Lower::Yes).then(|| p::Filter::Compare {
            left: p::Operand::Field(name.to_string()),
            op,
            right,
            ty,
        })
    }

    /// A string literal beside a `time` field is a timestamp (`value.invalid_time`).
    fn literal_fits(&mut self, file: usize, written: &Value<'a>, base: BaseType) -> bool {
        match (&written.kind, base) {
            (ValueKind::Str(s), BaseType::Time) => self.check_time(file, written, s),
            _ => true,
        }
    }

    fn mismatch(&self, file: usize, span: Span, name: &str, ty: Type, found: BaseType) -> Diagnostic {
        let found = type_name(Type { base: found, optional: false });
        Diagnostic::new(
            Code::SubscriberWhereInvalid,
            file,
            span,
            format!("`event.{name}` is `{}`, but it is compared with {} `{found}`", type_name(ty), article(&found)),
        )
        .help(match ty.base {
            BaseType::String | BaseType::Time => "compare it with a string: `\"...\"`",
            BaseType::Int | BaseType::Float => "compare it with an integer",
            BaseType::Bool => "compare it with `true` or `false`, or write the field alone",
        })
    }
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" }
}

/// Whether a field of type `field` compares with a value of type `other`: one
/// type, an int beside a float, or a time beside a string (a timestamp).
fn comparable(field: BaseType, other: BaseType) -> bool {
    use BaseType::*;
    field == other || matches!((field, other), (Int, Float) | (Float, Int) | (Time, String))
}
