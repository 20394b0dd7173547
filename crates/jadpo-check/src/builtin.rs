//! jadpo's own events: what the runtime raises about deliveries and connections,
//! routed to subscribers like any declared event.
//!
//! Each is known to the checker as if declared (`on: jadpo.connection_unavailable`,
//! `event.since`), is lowered into [`Program::events`](crate::Program) only when
//! something uses it, and cannot be declared by a program: a declared event's name
//! has no dot.

use crate::program::BaseType;
use jadpo_syntax::ast::{Block, Body, Decl, DeclKind, Entry, Key, Name, Span, Value, ValueKind};
use std::borrow::Cow;

/// The prefix of every built-in event's name.
pub const PREFIX: &str = "jadpo.";

/// A delivery ended `failed`.
pub const DELIVERY_FAILED: &str = "jadpo.delivery_failed";
/// A delivery was parked.
pub const DELIVERY_PARKED: &str = "jadpo.delivery_parked";
/// A delivery was orphaned: no running process's program has its subscriber.
pub const DELIVERY_ORPHANED: &str = "jadpo.delivery_orphaned";
/// A connection's outage was noticed (once per outage).
pub const CONNECTION_UNAVAILABLE: &str = "jadpo.connection_unavailable";
/// A connection's breaker closed again.
pub const CONNECTION_RECOVERED: &str = "jadpo.connection_recovered";

/// A built-in event: its name and fields (name, type, optional).
#[derive(Debug, Clone, Copy)]
pub struct BuiltinEvent {
    pub name: &'static str,
    pub fields: &'static [(&'static str, BaseType, bool)],
    /// One line: when the runtime raises it.
    pub summary: &'static str,
}

/// The fields of `jadpo.delivery_failed` and `jadpo.delivery_parked`.
const DELIVERY_FIELDS: &[(&str, BaseType, bool)] = &[
    ("delivery", BaseType::String, false),
    ("event", BaseType::String, false),
    ("subscriber", BaseType::String, false),
    ("kind", BaseType::String, false),
    ("code", BaseType::String, true),
    ("attempts", BaseType::Int, false),
];

/// Every built-in event.
pub const BUILTIN_EVENTS: &[BuiltinEvent] = &[
    BuiltinEvent {
        name: DELIVERY_FAILED,
        fields: DELIVERY_FIELDS,
        summary: "a delivery ended `failed`: its budget is spent, its window passed, or its failure is not retried",
    },
    BuiltinEvent {
        name: DELIVERY_PARKED,
        fields: DELIVERY_FIELDS,
        summary: "a delivery was parked: its outcome is unknown and its action is not idempotent",
    },
    BuiltinEvent {
        name: DELIVERY_ORPHANED,
        fields: &[
            ("delivery", BaseType::String, false),
            ("event", BaseType::String, false),
            ("subscriber", BaseType::String, false),
            ("attempts", BaseType::Int, false),
        ],
        summary: "a delivery was orphaned: no running process's program has its subscriber (a removed or renamed \
                  subscriber, or a deploy that runs neither version)",
    },
    BuiltinEvent {
        name: CONNECTION_UNAVAILABLE,
        fields: &[
            ("connection", BaseType::String, false),
            ("since", BaseType::Time, false),
            ("held", BaseType::Int, false),
        ],
        summary: "a connection's breaker opened: deliveries through it are held",
    },
    BuiltinEvent {
        name: CONNECTION_RECOVERED,
        fields: &[("connection", BaseType::String, false), ("outage_ms", BaseType::Int, false)],
        summary: "a connection's breaker closed again after an outage of `outage_ms` milliseconds",
    },
];

/// Whether an event's name is one of jadpo's own (the runtime raises it; no
/// producer may emit it).
pub fn is_builtin_event(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// The built-in events as declarations, checked and lowered with the program's
/// own. They have no file: the checker gives them [`BUILTIN_FILE`](crate::check).
pub(crate) fn decls() -> Vec<Decl<'static>> {
    let at = Span::default();
    BUILTIN_EVENTS
        .iter()
        .map(|e| Decl {
            kind: DeclKind::Event,
            name: Name { text: e.name, span: at },
            body: Body::Block {
                params: Vec::new(),
                block: Block {
                    entries: e
                        .fields
                        .iter()
                        .map(|&(name, ty, optional)| Entry {
                            key: Key { text: Cow::Borrowed(name), quoted: false, span: at },
                            value: Value { kind: ValueKind::Ident { name: type_word(ty), optional }, span: at },
                        })
                        .collect(),
                    span: at,
                },
            },
            span: at,
        })
        .collect()
}

fn type_word(ty: BaseType) -> &'static str {
    match ty {
        BaseType::String => "string",
        BaseType::Int => "int",
        BaseType::Float => "float",
        BaseType::Bool => "bool",
        BaseType::Time => "time",
    }
}
