//! An event's JSON payload checked against its declaration, and the arguments of a
//! call built from it. Used by `jadpoc emit`, `--ndjson` and `--listen` alike.

use crate::codes::RuntimeCode;
use crate::store::{NewDelivery, NewEvent};
use jadpo_check::builtin::is_builtin_event;
use jadpo_check::program::{Arg, BaseType, Call, CompareOp, Event, Filter, Literal, Operand, Program};
use serde_json::{Map, Value};
use std::cmp::Ordering;

/// Why a payload was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    /// No event of that name is declared.
    #[error("no event `{0}` is declared")]
    UnknownEvent(String),
    /// One of jadpo's own events, which only the runtime raises.
    #[error("`{0}` is one of jadpo's own events: only the runtime raises it")]
    BuiltinEvent(String),
    /// The body is not JSON.
    #[error("the payload is not JSON: {0}")]
    NotJson(String),
    /// The payload is not a JSON object.
    #[error("the payload must be a JSON object")]
    NotAnObject,
    /// A field the event does not declare.
    #[error("`{event}` has no field `{field}`")]
    UnknownField {
        /// The event.
        event: String,
        /// The field.
        field: String,
    },
    /// A required field is absent or null.
    #[error("field `{field}` of `{event}` is required")]
    MissingField {
        /// The event.
        event: String,
        /// The field.
        field: String,
    },
    /// A field of the wrong type.
    #[error("field `{field}` must be {expected}")]
    WrongType {
        /// The field.
        field: String,
        /// What it must be, in words.
        expected: &'static str,
    },
}

impl PayloadError {
    /// The field the error is about, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            PayloadError::UnknownField { field, .. }
            | PayloadError::MissingField { field, .. }
            | PayloadError::WrongType { field, .. } => Some(field),
            _ => None,
        }
    }

    /// A short machine-readable code.
    pub fn code(&self) -> &'static str {
        self.registered().wire()
    }

    /// The code's registry entry.
    pub fn registered(&self) -> RuntimeCode {
        match self {
            PayloadError::UnknownEvent(_) | PayloadError::BuiltinEvent(_) => RuntimeCode::IngestUnknownEvent,
            PayloadError::NotJson(_) => RuntimeCode::IngestNotJson,
            PayloadError::NotAnObject => RuntimeCode::IngestNotAnObject,
            PayloadError::UnknownField { .. } => RuntimeCode::IngestUnknownField,
            PayloadError::MissingField { .. } => RuntimeCode::IngestMissingField,
            PayloadError::WrongType { .. } => RuntimeCode::IngestWrongType,
        }
    }

    /// The JSON error body `--listen` answers with.
    pub fn to_json(&self) -> Value {
        serde_json::json!({"error": {
            "code": self.code(),
            "field": self.field(),
            "message": self.to_string(),
        }})
    }
}

fn type_words(base: BaseType) -> &'static str {
    match base {
        BaseType::String => "a string",
        BaseType::Int => "an integer",
        BaseType::Float => "a number",
        BaseType::Bool => "true or false",
        BaseType::Time => "an RFC 3339 timestamp string",
    }
}

/// Whether a present, non-null JSON value is of `base`.
fn fits(base: BaseType, v: &Value) -> bool {
    match base {
        BaseType::String => v.is_string(),
        BaseType::Int => v.is_i64() || v.is_u64() && v.as_u64().is_some_and(|n| n <= i64::MAX as u64),
        BaseType::Float => v.is_number(),
        BaseType::Bool => v.is_boolean(),
        BaseType::Time => v.as_str().is_some_and(|s| s.parse::<jiff::Timestamp>().is_ok()),
    }
}

/// A field a call reads that a stored event does not hold as the running
/// program declares it (the event was stored under another program).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeMismatch {
    /// The field.
    pub field: String,
    /// What the program declares it to be, in words.
    pub expected: &'static str,
    /// Whether it is missing (or null) rather than of another type.
    pub missing: bool,
}

/// The first field of `event` that `call` reads and `payload` does not hold as
/// declared: a required field missing or null, or any field of another type.
/// A call never sends `null` for a field its program declares required.
pub fn shape_mismatch(event: &Event, call: &Call, payload: &Value) -> Option<ShapeMismatch> {
    call.args.iter().find_map(|arg| {
        let Arg::Field(name) = arg else { return None };
        let field = event.fields.iter().find(|f| f.name == *name)?;
        let value = payload.get(name).filter(|v| !v.is_null());
        let mismatch = |missing| ShapeMismatch { field: name.clone(), expected: type_words(field.ty.base), missing };
        match value {
            None if field.ty.optional || field.default.is_some() => None,
            None => Some(mismatch(true)),
            Some(v) if fits(field.ty.base, v) => None,
            Some(_) => Some(mismatch(false)),
        }
    })
}

/// `payload` with each field of `event` it lacks (or holds as null) that declares
/// a default set to that default: what a call reads of an event stored by an
/// earlier program.
pub fn with_defaults(event: &Event, mut payload: Value) -> Value {
    if let Value::Object(obj) = &mut payload {
        for f in &event.fields {
            if let Some(d) = &f.default
                && obj.get(&f.name).is_none_or(Value::is_null)
            {
                obj.insert(f.name.clone(), literal(d));
            }
        }
    }
    payload
}

/// Check a payload against its event's declaration.
pub fn validate(event: &Event, payload: &Value) -> Result<(), PayloadError> {
    let Value::Object(obj) = payload else {
        return Err(PayloadError::NotAnObject);
    };
    for key in obj.keys() {
        if !event.fields.iter().any(|f| f.name == *key) {
            return Err(PayloadError::UnknownField { event: event.name.clone(), field: key.clone() });
        }
    }
    for f in &event.fields {
        let v = obj.get(&f.name).unwrap_or(&Value::Null);
        if v.is_null() {
            if f.ty.optional || f.default.is_some() {
                continue;
            }
            return Err(PayloadError::MissingField { event: event.name.clone(), field: f.name.clone() });
        }
        if !fits(f.ty.base, v) {
            return Err(PayloadError::WrongType { field: f.name.clone(), expected: type_words(f.ty.base) });
        }
    }
    Ok(())
}

/// Parse and check a payload for the event named `name`, and make the event to
/// store with one delivery per subscriber of it. A producer's entry point: one of
/// jadpo's own events is refused (only the runtime raises those, through
/// [`new_event_from_value`]).
pub fn new_event(program: &Program, name: &str, json: &str) -> Result<NewEvent, PayloadError> {
    if is_builtin_event(name) {
        return Err(PayloadError::BuiltinEvent(name.to_string()));
    }
    let value: Value = serde_json::from_str(json).map_err(|e| PayloadError::NotJson(e.to_string()))?;
    new_event_from_value(program, name, &value)
}

/// As [`new_event`], from a parsed value.
pub fn new_event_from_value(program: &Program, name: &str, value: &Value) -> Result<NewEvent, PayloadError> {
    let index = program.event(name).ok_or_else(|| PayloadError::UnknownEvent(name.to_string()))?;
    validate(&program.events[index], value)?;
    let deliveries = program
        .subscribers
        .iter()
        .enumerate()
        .filter(|(_, s)| s.event == index && s.filter.as_ref().is_none_or(|f| holds(f, value)))
        .map(|(i, s)| NewDelivery {
            subscriber: s.name.clone(),
            connection: program
                .connections
                .get(program.subscriber_connection(i))
                .map(|c| c.name.clone())
                .unwrap_or_default(),
            order_key: s.order_by.as_deref().and_then(|f| order_key(value.get(f)?)),
        })
        .collect();
    Ok(NewEvent { name: name.to_string(), payload: value.to_string(), deliveries })
}

/// Whether a validated payload passes a subscriber's `where:`. A field left out
/// (an optional one) is unequal to every value: a comparison with it holds only
/// for `!=`, and `in` only when negated.
pub fn holds(filter: &Filter, payload: &Value) -> bool {
    match filter {
        Filter::All(all) => all.iter().all(|f| holds(f, payload)),
        Filter::Any(any) => any.iter().any(|f| holds(f, payload)),
        Filter::Not(f) => !holds(f, payload),
        Filter::True(field) => payload.get(field).and_then(Value::as_bool) == Some(true),
        Filter::Compare { left, op, right, ty } => {
            let side = |o: &Operand| match o {
                Operand::Field(f) => payload.get(f).filter(|v| !v.is_null()).cloned(),
                Operand::Literal(l) => Some(literal(l)),
            };
            match (side(left), side(right)) {
                (Some(l), Some(r)) => compare(&l, &r, *ty).is_some_and(|o| op.holds(o)),
                _ => *op == CompareOp::Ne,
            }
        }
        Filter::In { field, values, negated, ty } => {
            let found = payload
                .get(field)
                .filter(|v| !v.is_null())
                .is_some_and(|v| values.iter().any(|l| compare(v, &literal(l), *ty) == Some(Ordering::Equal)));
            found != *negated
        }
    }
}

/// Two JSON values of a filter's type, ordered; `None` when either is not of it.
fn compare(l: &Value, r: &Value, ty: BaseType) -> Option<Ordering> {
    match ty {
        BaseType::Int => Some(l.as_i64()?.cmp(&r.as_i64()?)),
        BaseType::Float => l.as_f64()?.partial_cmp(&r.as_f64()?),
        BaseType::String => Some(l.as_str()?.cmp(r.as_str()?)),
        BaseType::Bool => Some(l.as_bool()?.cmp(&r.as_bool()?)),
        BaseType::Time => {
            let t = |v: &Value| v.as_str()?.parse::<jiff::Timestamp>().ok();
            Some(t(l)?.cmp(&t(r)?))
        }
    }
}

/// A delivery's ordering key from its `order_by:` field's value: the string, or
/// the integer written in decimal; none when the field was left out.
pub fn order_key(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A literal of the language as JSON.
pub fn literal(l: &Literal) -> Value {
    match l {
        Literal::String(s) => Value::String(s.clone()),
        Literal::Int(n) => Value::from(*n),
        Literal::Bool(b) => Value::Bool(*b),
    }
}

/// The arguments of `call`, by parameter name, from an event's payload (`event.F`
/// of a field left out is `null`).
pub fn call_args(program: &Program, call: &Call, payload: &Value) -> Value {
    let params = program.actions.get(call.action).map(|a| &a.params[..]).unwrap_or(&[]);
    let mut args = Map::new();
    for (i, arg) in call.args.iter().enumerate() {
        let name = params.get(i).map(|p| p.name.clone()).unwrap_or_else(|| format!("arg{i}"));
        let v = match arg {
            Arg::Field(f) => payload.get(f).cloned().unwrap_or(Value::Null),
            Arg::Literal(l) => literal(l),
        };
        args.insert(name, v);
    }
    Value::Object(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jadpo_check::program::{Field, Type};
    use serde_json::json;

    fn event() -> Event {
        let f = |name: &str, base, optional| Field { name: name.into(), ty: Type { base, optional }, default: None };
        Event {
            name: "Paid".into(),
            fields: vec![
                f("id", BaseType::String, false),
                f("cents", BaseType::Int, false),
                f("rate", BaseType::Float, true),
                f("ok", BaseType::Bool, true),
                f("at", BaseType::Time, true),
                f("note", BaseType::String, true),
            ],
        }
    }

    #[test]
    fn accepts_a_good_payload() {
        let e = event();
        assert_eq!(validate(&e, &json!({"id": "p1", "cents": 5})), Ok(()));
        assert_eq!(
            validate(
                &e,
                &json!({"id": "p1", "cents": 5, "rate": 2, "ok": true,
                        "at": "2026-01-02T03:04:05Z", "note": null})
            ),
            Ok(())
        );
        assert_eq!(validate(&e, &json!({"id": "p1", "cents": 5, "rate": 2.5})), Ok(()));
    }

    #[test]
    fn refuses_bad_payloads_naming_the_field() {
        let e = event();
        let cases = [
            (json!([1]), None),
            (json!({"cents": 5}), Some("id")),
            (json!({"id": null, "cents": 5}), Some("id")),
            (json!({"id": "p", "cents": 5, "extra": 1}), Some("extra")),
            (json!({"id": "p", "cents": 5.5}), Some("cents")),
            (json!({"id": "p", "cents": "5"}), Some("cents")),
            (json!({"id": 1, "cents": 5}), Some("id")),
            (json!({"id": "p", "cents": 5, "at": "yesterday"}), Some("at")),
            (json!({"id": "p", "cents": 5, "ok": 1}), Some("ok")),
        ];
        for (payload, field) in cases {
            let err = validate(&e, &payload).unwrap_err();
            assert_eq!(err.field(), field, "{payload}: {err}");
        }
    }

    /// The deliveries an event makes under a program whose subscriber `s` has
    /// `clauses` (its `where:` and `order_by:`).
    fn deliveries(clauses: &str, payload: &str) -> Vec<NewDelivery> {
        let text = format!(
            r#"
event Paid {{ id: string  cents: int  rate: float?  currency: string  at: time  ok: bool? }}
connection c {{ url: "https://ledger.internal" }}
action record(id: string) {{ via: c }}
subscriber s {{ on: Paid  run: record(event.id)  {clauses} }}
subscriber other {{ on: Paid  run: record(event.id) }}
"#
        );
        let checked =
            jadpo_check::check(&[jadpo_check::SourceFile { name: "t.jadpo".into(), text }], jadpo_check::Lower::Yes);
        let program = checked.program.expect("the program checks");
        new_event(&program, "Paid", payload).expect("a valid payload").deliveries
    }

    fn taken(clauses: &str, payload: &str) -> bool {
        deliveries(clauses, payload).iter().any(|d| d.subscriber == "s")
    }

    #[test]
    fn a_filter_decides_which_subscribers_take_an_event() {
        let p = r#"{"id": "p1", "cents": 12000, "currency": "EUR", "at": "2026-03-01T10:00:00+01:00"}"#;
        for (clause, expected) in [
            ("where: event.cents >= 10000 and event.currency == \"EUR\"", true),
            ("where: event.cents > 12000", false),
            ("where: 12000 <= event.cents", true),
            ("where: event.currency in [\"USD\", \"EUR\"]", true),
            ("where: event.currency not in [\"USD\", \"EUR\"]", false),
            ("where: not (event.cents < 100 or event.currency == \"USD\")", true),
            // Times compare as instants: 10:00+01:00 is 09:00Z.
            ("where: event.at < \"2026-03-01T09:30:00Z\"", true),
            ("where: event.cents == event.cents", true),
            // An optional field left out equals nothing.
            ("where: event.rate > 1", false),
            ("where: event.rate != 1", true),
            ("where: event.ok", false),
            ("where: not event.ok", true),
            // A float field beside an integer literal.
            ("where: event.rate <= 2", false),
        ] {
            assert_eq!(taken(clause, p), expected, "{clause}");
        }
        let with_rate =
            r#"{"id": "p1", "cents": 1, "rate": 1.5, "currency": "EUR", "at": "2026-03-01T10:00:00Z", "ok": true}"#;
        assert!(taken("where: event.rate <= 2 and event.rate > 1", with_rate));
        assert!(taken("where: event.ok", with_rate));
        // A subscriber without a filter takes every event.
        assert!(deliveries("where: event.cents > 1000000", p).iter().any(|d| d.subscriber == "other"));
    }

    #[test]
    fn an_ordered_subscriber_keys_its_deliveries_by_the_field() {
        let p = r#"{"id": "p1", "cents": 42, "currency": "EUR", "at": "2026-03-01T10:00:00Z"}"#;
        let key =
            |clause: &str| deliveries(clause, p).into_iter().find(|d| d.subscriber == "s").and_then(|d| d.order_key);
        assert_eq!(key("order_by: event.id").as_deref(), Some("p1"));
        assert_eq!(key("order_by: event.cents").as_deref(), Some("42"));
        assert_eq!(key("").as_deref(), None);
        assert!(deliveries("order_by: event.id", p).iter().all(|d| d.subscriber == "s" || d.order_key.is_none()));
    }
}
