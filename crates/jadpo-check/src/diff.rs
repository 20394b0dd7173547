//! What a new program does to what the old one left: two checked programs
//! compared, each change that matters to the deliveries, events and receivers an
//! old program leaves in a store reported as a [`Finding`] with a stable
//! [`DiffCode`].
//!
//! Declarations are matched by kind and name; a subscriber or a connection whose
//! `was:` names an old one is compared with it (and reported as renamed, never as
//! removed). Places come from each side's [`SymbolIndex`](crate::SymbolIndex);
//! nothing is parsed again.

mod codes;

pub use codes::{DiffCategory, DiffCode, DiffSeverity};

use crate::builtin::is_builtin_event;
use crate::diagnostic::{LineIndex, SourceFile};
use crate::index::SymbolKind;
use crate::program::{self as p, Program};
use crate::{Checked, format_duration};
use serde::Serialize;

/// One side of a diff: a checked program without errors, with its files.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub files: &'a [SourceFile],
    pub checked: &'a Checked,
}

/// One change from the old program to the new one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub code: DiffCode,
    /// One sentence naming the declarations in backticks.
    pub message: String,
    /// Where in the old program (the removed subscriber, the field as it was).
    pub old_at: Option<Place>,
    /// Where in the new program.
    pub new_at: Option<Place>,
    pub subject: Subject,
    pub help: Option<String>,
}

impl Finding {
    /// The place shown first: the new program's, else the old one's.
    pub fn at(&self) -> Option<&Place> {
        self.new_at.as_ref().or(self.old_at.as_ref())
    }
}

impl Serialize for DiffCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A declaration's name in one file: the file's index in its side's list and its
/// path as given, 1-based line and column, and the name's byte span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Place {
    pub file: usize,
    pub path: String,
    pub line: u32,
    pub column: u32,
    pub start: u32,
    pub end: u32,
}

/// What a finding is about, typed, so that a store can count what it holds for
/// it. Subscribers, connections and actions are named as the OLD program names
/// them: the name their stored deliveries carry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Subject {
    /// Removed, renamed, or its event, `where:`, `order_by:` or call changed.
    Subscriber { name: String },
    /// Removed, renamed, or its url, signing or rate changed.
    Connection { name: String },
    /// A field of an event; `readers` are the subscribers of the NEW program that
    /// read it (in `run:` arguments, `where:` or `order_by:`).
    Field { event: String, field: String, readers: Vec<String> },
    /// A subscriber's budget, tightened: the NEW one.
    Budget { subscriber: String, attempts: u32, within_ms: u64 },
    /// An action whose parameters changed; `subscribers` are the OLD program's
    /// that run it, whose deliveries are sent with the new body.
    Action { name: String, subscribers: Vec<String> },
    /// A removed event; `subscribers` are the OLD program's that received it.
    Event { name: String, subscribers: Vec<String> },
}

impl Subject {
    /// The name findings are sorted by within their category.
    fn name(&self) -> &str {
        match self {
            Subject::Subscriber { name }
            | Subject::Connection { name }
            | Subject::Action { name, .. }
            | Subject::Event { name, .. } => name,
            Subject::Field { event, .. } => event,
            Subject::Budget { subscriber, .. } => subscriber,
        }
    }
}

/// Every change from `old` to `new` that matters to what `old` left, sorted by
/// category, name, code and place. A side whose check lowered no program (it has
/// errors) is compared as an empty program would not be: the diff is empty.
pub fn diff(old: Side<'_>, new: Side<'_>) -> Vec<Finding> {
    let (Some(o), Some(n)) = (old.checked.program.as_ref(), new.checked.program.as_ref()) else {
        return Vec::new();
    };
    let cx = Diff { old, new, o, n, out: Vec::new() };
    let mut out = cx.run();
    out.sort_by(|a, b| {
        let key = |f: &Finding| {
            let at = f.at().map(|p| (p.path.clone(), p.start));
            (f.code.category(), f.subject.name().to_string(), f.code, at)
        };
        key(a).cmp(&key(b))
    });
    out
}

struct Diff<'a> {
    old: Side<'a>,
    new: Side<'a>,
    o: &'a Program,
    n: &'a Program,
    out: Vec<Finding>,
}

/// Which side of the diff a place is on.
#[derive(Clone, Copy)]
enum Which {
    Old,
    New,
}

fn bt(name: &str) -> String {
    format!("`{name}`")
}

impl<'a> Diff<'a> {
    fn run(mut self) -> Vec<Finding> {
        self.subscribers();
        self.connections();
        self.actions();
        self.events();
        self.out
    }

    fn side(&self, which: Which) -> Side<'a> {
        match which {
            Which::Old => self.old,
            Which::New => self.new,
        }
    }

    /// The place of the declaration of `kind` named `name` (of the member `member`
    /// of it, for a field or a parameter).
    fn place(&self, which: Which, kind: SymbolKind, name: &str, member: Option<&str>) -> Option<Place> {
        let side = self.side(which);
        let index = &side.checked.index;
        let decl = index.defs_named(kind, name).find(|&id| index.def(id).primary)?;
        let id = match member {
            None => decl,
            Some(m) => index.children(decl).find(|&id| index.def(id).primary && *index.def(id).name == *m)?,
        };
        let def = index.def(id);
        let file = side.files.get(def.file)?;
        let at = LineIndex::new(&file.text).position(def.name_span.start);
        Some(Place {
            file: def.file,
            path: file.name.clone(),
            line: at.line,
            column: at.column,
            start: def.name_span.start,
            end: def.name_span.end,
        })
    }

    fn push(
        &mut self,
        code: DiffCode,
        message: String,
        old_at: Option<Place>,
        new_at: Option<Place>,
        subject: Subject,
        help: &str,
    ) {
        self.out.push(Finding { code, message, old_at, new_at, subject, help: Some(help.to_string()) });
    }

    fn subscribers(&mut self) {
        let (o, n) = (self.o, self.n);
        for s in &o.subscribers {
            let by_name = n.subscribers.iter().find(|t| t.name == s.name);
            let renamed = n.subscribers.iter().find(|t| t.was.contains(&s.name));
            let old_at = self.place(Which::Old, SymbolKind::Subscriber, &s.name, None);
            let subject = || Subject::Subscriber { name: s.name.clone() };
            let Some(t) = by_name.or(renamed) else {
                self.push(
                    DiffCode::SubscriberRemoved,
                    format!("the subscriber {} is removed", bt(&s.name)),
                    old_at,
                    None,
                    subject(),
                    "its deliveries not ended wait, orphaned, for a process whose program has it: let them end first, name it in the `was:` of the subscriber that takes its place, or skip them (`jadpoc deliveries skip --subscriber NAME`)",
                );
                continue;
            };
            let new_at = self.place(Which::New, SymbolKind::Subscriber, &t.name, None);
            let here = |d: &Diff<'_>| (d.place(Which::Old, SymbolKind::Subscriber, &s.name, None), new_at.clone());
            if by_name.is_none() {
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::SubscriberRenamed,
                    format!("the subscriber {} is renamed {}", bt(&s.name), bt(&t.name)),
                    old_at,
                    new_at,
                    subject(),
                    "its deliveries are taken on under the new name",
                );
            }
            let (old_event, new_event) = (&o.events[s.event].name, &n.events[t.event].name);
            if old_event != new_event {
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::SubscriberEventChanged,
                    format!("the subscriber {} is now on {}, not {}", bt(&t.name), bt(new_event), bt(old_event)),
                    old_at,
                    new_at,
                    subject(),
                    "its pending deliveries were made for the old event: let them end first, or add a new subscriber and remove the old one once they have",
                );
            }
            if s.filter != t.filter {
                let what = match (&s.filter, &t.filter) {
                    (None, _) => "now has a `where:`",
                    (_, None) => "no longer has a `where:`",
                    _ => "has another `where:`",
                };
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::SubscriberWhereChanged,
                    format!("the subscriber {} {what}", bt(&t.name)),
                    old_at,
                    new_at,
                    subject(),
                    "deliveries already made still run, whether the new condition takes their events or not; only new events are filtered anew",
                );
            }
            if s.order_by != t.order_by {
                let word = |o: &Option<String>| o.as_ref().map_or("no order".to_string(), |f| format!("`event.{f}`"));
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::SubscriberOrderByChanged,
                    format!(
                        "the subscriber {} is ordered by {}, not {}",
                        bt(&t.name),
                        word(&t.order_by),
                        word(&s.order_by)
                    ),
                    old_at,
                    new_at,
                    subject(),
                    "deliveries in flight were queued by the old key: ones that waited for each other may now run at once, or unrelated ones wait; let the subscriber's deliveries drain before deploying",
                );
            }
            let (b, c) = (s.budget, t.budget);
            if c.attempts < b.attempts || c.within_ms < b.within_ms {
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::SubscriberBudgetTightened,
                    format!(
                        "the budget of {} is {} attempts within {}, down from {} within {}",
                        bt(&t.name),
                        c.attempts,
                        format_duration(c.within_ms),
                        b.attempts,
                        format_duration(b.within_ms)
                    ),
                    old_at,
                    new_at,
                    Subject::Budget { subscriber: s.name.clone(), attempts: c.attempts, within_ms: c.within_ms },
                    "pending deliveries already past the new budget give up at their next claim",
                );
            }
            let (old_action, new_action) = (&o.actions[s.call.action].name, &n.actions[t.call.action].name);
            if old_action != new_action || s.call.args != t.call.args {
                let message = if old_action != new_action {
                    format!("the subscriber {} now runs {}, not {}", bt(&t.name), bt(new_action), bt(old_action))
                } else {
                    format!("the subscriber {} passes other arguments to {}", bt(&t.name), bt(new_action))
                };
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::SubscriberArgsChanged,
                    message,
                    old_at,
                    new_at,
                    subject(),
                    "pending deliveries run the new call, with arguments read from their stored events",
                );
            }
        }
    }

    fn connections(&mut self) {
        let (o, n) = (self.o, self.n);
        for c in &o.connections {
            let by_name = n.connections.iter().find(|d| d.name == c.name);
            let renamed = n.connections.iter().find(|d| d.was.contains(&c.name));
            let old_at = self.place(Which::Old, SymbolKind::Connection, &c.name, None);
            let subject = || Subject::Connection { name: c.name.clone() };
            let Some(d) = by_name.or(renamed) else {
                self.push(
                    DiffCode::ConnectionRemoved,
                    format!("the connection {} is removed", bt(&c.name)),
                    old_at,
                    None,
                    subject(),
                    "deliveries in flight through it, and its breaker's state, are left behind: let them end first, or name it in the `was:` of the connection that takes its place",
                );
                continue;
            };
            let new_at = self.place(Which::New, SymbolKind::Connection, &d.name, None);
            let here = |x: &Diff<'_>| (x.place(Which::Old, SymbolKind::Connection, &c.name, None), new_at.clone());
            if by_name.is_none() {
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::ConnectionRenamed,
                    format!("the connection {} is renamed {}", bt(&c.name), bt(&d.name)),
                    old_at,
                    new_at,
                    subject(),
                    "its deliveries and breaker are taken on under the new name",
                );
            }
            if c.url != d.url {
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::ConnectionUrlChanged,
                    format!("the connection {} calls {}, not {}", bt(&d.name), bt(&d.url), bt(&c.url)),
                    old_at,
                    new_at,
                    subject(),
                    "pending deliveries are sent to the new address: make sure it takes the calls the old one took",
                );
            }
            if c.signing != d.signing {
                let rotated = match (&c.signing, &d.signing) {
                    (Some(_), None) => true,
                    (None, Some(_)) => false,
                    (Some(p::Signing::Secrets(a)), Some(p::Signing::Secrets(b))) => !a.iter().any(|v| b.contains(v)),
                    _ => true,
                };
                let (old_at, new_at) = here(self);
                if rotated {
                    self.push(
                        DiffCode::ConnectionSigningRotated,
                        format!("the connection {} signs with nothing the old program signed with", bt(&d.name)),
                        old_at,
                        new_at,
                        subject(),
                        "receivers that verify the old signature refuse every call: sign with the old and the new secret (`secret: [env(\"OLD\"), env(\"NEW\")]`) until receivers take the new one",
                    );
                } else {
                    self.push(
                        DiffCode::ConnectionSigningChanged,
                        format!("the connection {} signs otherwise", bt(&d.name)),
                        old_at,
                        new_at,
                        subject(),
                        "a secret in common keeps receivers verifying; remove the old one once they take the new",
                    );
                }
            }
            if c.rate != d.rate {
                let word = |r: &Option<p::Rate>| {
                    r.map_or("no limit".to_string(), |r| format!("`{}` (burst {})", r.written(), r.burst))
                };
                let (old_at, new_at) = here(self);
                self.push(
                    DiffCode::ConnectionRateChanged,
                    format!("the rate of {} is {}, not {}", bt(&d.name), word(&d.rate), word(&c.rate)),
                    old_at,
                    new_at,
                    subject(),
                    "a backlog drains at the new rate: `jadpoc plan` says how long it takes",
                );
            }
        }
    }

    fn actions(&mut self) {
        let (o, n) = (self.o, self.n);
        for (i, a) in o.actions.iter().enumerate() {
            let Some(b) = n.actions.iter().find(|b| b.name == a.name) else { continue };
            let runs: Vec<String> =
                o.subscribers.iter().filter(|s| s.call.action == i).map(|s| s.name.clone()).collect();
            let subject = || Subject::Action { name: a.name.clone(), subscribers: runs.clone() };
            let old_at = self.place(Which::Old, SymbolKind::Action, &a.name, None);
            let new_at = self.place(Which::New, SymbolKind::Action, &b.name, None);
            // What a receiver can no longer rely on: a parameter gone (or renamed),
            // of another type, now required, or a new required one.
            let mut broken: Vec<String> = Vec::new();
            for x in &a.params {
                match b.params.iter().find(|y| y.name == x.name) {
                    None => broken.push(format!("{} is removed", bt(&x.name))),
                    Some(y) if y.ty.base != x.ty.base => {
                        broken.push(format!("{} is {}, not {}", bt(&x.name), type_word(y.ty), type_word(x.ty)))
                    }
                    Some(y) if x.ty.optional && !y.ty.optional => {
                        broken.push(format!("{} is now required", bt(&x.name)))
                    }
                    Some(_) => {}
                }
            }
            let added: Vec<&p::Field> =
                b.params.iter().filter(|y| !a.params.iter().any(|x| x.name == y.name)).collect();
            broken.extend(added.iter().filter(|y| !y.ty.optional).map(|y| format!("{} is added", bt(&y.name))));
            if !broken.is_empty() {
                self.push(
                    DiffCode::ActionParamsChanged,
                    format!("the parameters of {} changed: {}", bt(&b.name), broken.join(", ")),
                    old_at,
                    new_at,
                    subject(),
                    "receivers get another body, pending deliveries included: deploy a receiver that takes both bodies first, or add a new action beside the old one",
                );
                continue;
            }
            let optional: Vec<String> = added.iter().map(|y| bt(&y.name)).collect();
            if !optional.is_empty() {
                self.push(
                    DiffCode::ActionParamAdded,
                    format!("{} has the new optional parameter {}", bt(&b.name), optional.join(", ")),
                    old_at,
                    new_at,
                    subject(),
                    "receivers get a new key in the body, null when it is absent",
                );
            }
        }
    }

    fn events(&mut self) {
        let (o, n) = (self.o, self.n);
        for (i, e) in o.events.iter().enumerate() {
            if is_builtin_event(&e.name) {
                continue;
            }
            let Some((j, f)) = n.events.iter().enumerate().find(|(_, f)| f.name == e.name) else {
                let subscribers: Vec<String> =
                    o.subscribers.iter().filter(|s| s.event == i).map(|s| s.name.clone()).collect();
                let old_at = self.place(Which::Old, SymbolKind::Event, &e.name, None);
                let (code, help) = if subscribers.is_empty() {
                    (DiffCode::EventUnusedRemoved, "emitters that still send it are refused: stop them first")
                } else {
                    (
                        DiffCode::EventRemoved,
                        "its stored events and their pending deliveries are left with no declaration to read them by: let them end first, and stop the emitters that send it",
                    )
                };
                self.push(
                    code,
                    format!("the event {} is removed", bt(&e.name)),
                    old_at,
                    None,
                    Subject::Event { name: e.name.clone(), subscribers },
                    help,
                );
                continue;
            };
            let readers = |field: &str| -> Vec<String> {
                n.subscribers.iter().filter(|t| t.event == j && reads(t, field)).map(|t| t.name.clone()).collect()
            };
            for x in &e.fields {
                let subject =
                    |readers: Vec<String>| Subject::Field { event: e.name.clone(), field: x.name.clone(), readers };
                let Some(y) = f.fields.iter().find(|y| y.name == x.name) else {
                    let old_at = self.place(Which::Old, SymbolKind::Event, &e.name, Some(&x.name));
                    let new_at = self.place(Which::New, SymbolKind::Event, &f.name, None);
                    self.push(
                        DiffCode::EventFieldRemoved,
                        format!("the field {} of {} is removed", bt(&x.name), bt(&e.name)),
                        old_at,
                        new_at,
                        subject(Vec::new()),
                        "stored events keep it and the new program reads it nowhere; emitters that still send it are refused: stop them first",
                    );
                    continue;
                };
                let change = if y.ty.base != x.ty.base {
                    Some((DiffCode::EventFieldRetyped, format!("is {}, not {}", type_word(y.ty), type_word(x.ty))))
                } else if x.ty.optional && !y.ty.optional && y.default.is_none() {
                    Some((DiffCode::EventFieldNowRequired, "is now required".to_string()))
                } else {
                    None
                };
                if let Some((code, what)) = change {
                    let old_at = self.place(Which::Old, SymbolKind::Event, &e.name, Some(&x.name));
                    let new_at = self.place(Which::New, SymbolKind::Event, &f.name, Some(&y.name));
                    self.field(code, &e.name, &x.name, &what, old_at, new_at, readers(&y.name), subject);
                }
            }
            // A field added with a default is read as its default from stored events.
            let required = |y: &&crate::program::Field| !y.ty.optional && y.default.is_none();
            for y in f.fields.iter().filter(required).filter(|y| !e.fields.iter().any(|x| x.name == y.name)) {
                let subject =
                    |readers: Vec<String>| Subject::Field { event: e.name.clone(), field: y.name.clone(), readers };
                let old_at = self.place(Which::Old, SymbolKind::Event, &e.name, None);
                let new_at = self.place(Which::New, SymbolKind::Event, &f.name, Some(&y.name));
                let what = "is added, required".to_string();
                self.field(
                    DiffCode::EventFieldAddedRequired,
                    &e.name,
                    &y.name,
                    &what,
                    old_at,
                    new_at,
                    readers(&y.name),
                    subject,
                );
            }
        }
    }

    /// A field retyped, made required or added required: breaking when a
    /// subscriber of the new program reads it, for stored events were not written
    /// so.
    #[allow(clippy::too_many_arguments)]
    fn field(
        &mut self,
        code: DiffCode,
        event: &str,
        field: &str,
        what: &str,
        old_at: Option<Place>,
        new_at: Option<Place>,
        readers: Vec<String>,
        subject: impl Fn(Vec<String>) -> Subject,
    ) {
        let message = format!("the field {} of {} {what}", bt(field), bt(event));
        if readers.is_empty() {
            self.push(
                DiffCode::EventUnreadFieldChanged,
                message,
                old_at,
                new_at,
                subject(readers),
                "no subscriber reads it, so stored events are still run as before; emitters must send it as declared now",
            );
            return;
        }
        let names = readers.iter().map(|r| bt(r)).collect::<Vec<_>>().join(", ");
        let message = format!("{message}, and {names} read{} it", if readers.len() == 1 { "s" } else { "" });
        self.push(
            code,
            message,
            old_at,
            new_at,
            subject(readers),
            "events stored before the change were not written so, and their pending deliveries fail to read it: add a new optional field instead, or let them end first",
        );
    }
}

/// A type as written: `string`, `int?`.
fn type_word(ty: p::Type) -> String {
    let base = match ty.base {
        p::BaseType::String => "string",
        p::BaseType::Int => "int",
        p::BaseType::Float => "float",
        p::BaseType::Bool => "bool",
        p::BaseType::Time => "time",
    };
    format!("`{base}{}`", if ty.optional { "?" } else { "" })
}

/// Whether a subscriber reads `field` of its event: in its call's arguments, its
/// `where:` or its `order_by:`.
pub fn reads(s: &p::Subscriber, field: &str) -> bool {
    s.call.args.iter().any(|a| matches!(a, p::Arg::Field(f) if f == field))
        || s.order_by.as_deref() == Some(field)
        || s.filter.as_ref().is_some_and(|f| filter_reads(f, field))
}

fn filter_reads(filter: &p::Filter, field: &str) -> bool {
    let operand = |o: &p::Operand| matches!(o, p::Operand::Field(f) if f == field);
    match filter {
        p::Filter::All(list) | p::Filter::Any(list) => list.iter().any(|f| filter_reads(f, field)),
        p::Filter::Not(inner) => filter_reads(inner, field),
        p::Filter::Compare { left, right, .. } => operand(left) || operand(right),
        p::Filter::In { field: f, .. } | p::Filter::True(f) => f == field,
    }
}
