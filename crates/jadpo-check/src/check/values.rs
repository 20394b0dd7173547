//! Values: types, value ranges and durations as the language writes them.

use super::Cx;
use crate::diagnostic::Diagnostic;
use crate::duration::format_duration;
use crate::program::{BaseType, Type, is_timestamp};
use crate::registry::Code;
use crate::suggest::did_you_mean;
use jadpo_syntax::ast::{Span, Value, ValueKind};

pub(super) const EVENT_TYPES: &str = "`string`, `int`, `float`, `bool` or `time`";

pub(super) fn base_type(name: &str) -> Option<BaseType> {
    Some(match name {
        "string" => BaseType::String,
        "int" => BaseType::Int,
        "float" => BaseType::Float,
        "bool" => BaseType::Bool,
        "time" => BaseType::Time,
        _ => return None,
    })
}

pub(super) fn type_name(t: Type) -> String {
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
pub(super) fn assignable(arg: Type, param: Type) -> bool {
    (arg.base == param.base || (arg.base == BaseType::Int && param.base == BaseType::Float))
        && (!arg.optional || param.optional)
}

impl<'a> Cx<'_, 'a> {
    /// A value's text as written, so a message echoes `0ms` as `0ms`, not `0s`.
    pub(super) fn written(&self, file: usize, span: Span) -> &'a str {
        self.files.get(file).and_then(|f| f.text.get(span.range())).unwrap_or_default()
    }

    /// Reports a string given for a `time` that is not an RFC 3339 timestamp.
    pub(super) fn check_time(&mut self, file: usize, value: &Value<'a>, text: &str) -> bool {
        if is_timestamp(text) {
            return true;
        }
        self.push(
            Diagnostic::new(
                Code::ValueInvalidTime,
                file,
                value.span,
                format!("`{}` is not a time: a time is an RFC 3339 timestamp", text.escape_debug()),
            )
            .help("write a date, a time and an offset, such as `\"2026-03-01T09:30:00Z\"` or `\"2026-03-01T10:30:00+01:00\"`"),
        );
        false
    }

    pub(super) fn invalid_value(&mut self, file: usize, value: &Value<'a>, message: String, help: &str) {
        self.push(Diagnostic::new(Code::DeclInvalidValue, file, value.span, message).help(help));
    }

    /// A field's or parameter's type, or `None` (reported) when it is not one.
    pub(super) fn field_type(&mut self, file: usize, value: &Value<'a>, code: Code) -> Option<Type> {
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

    pub(super) fn duration_in(
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

    pub(super) fn int_in<T: Into<i64> + Copy>(
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
    pub(super) fn ranged<T: PartialOrd + Copy>(
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
            Some(_) => format!("{what} must be {lo} to {hi}, found `{}`", self.written(file, value.span)),
            None => format!("{what} takes {kind}, found {}", value.kind.describe()),
        };
        self.push(
            Diagnostic::new(code, file, value.span, message).help(format!("{what} takes {kind} from {lo} to {hi}")),
        );
        None
    }
}
