//! Completion: what may be written at the cursor, from the tokens around it and the
//! program's symbols.

use super::Analysis;
use super::cursor::{Cursor, cursor_at};
use super::keys::{BlockKind, keys_of};
use jadpo_check::program::FailureKind;
use jadpo_check::{Def, SymbolKind};
use jadpo_syntax::ast::{DeclKind, Span};

/// What a completion item is, for its icon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionKind {
    Keyword,
    Key,
    Symbol(SymbolKind),
    Value,
}

/// One completion item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub label: String,
    pub kind: CompletionKind,
    pub detail: Option<String>,
    /// A snippet (`$1` for the places to type) replacing the word being typed; the
    /// label when `None`.
    pub snippet: Option<String>,
    /// The span the item replaces: the word being typed.
    pub replace: Span,
}

/// A declaration keyword and the skeleton it completes to.
const DECLARATIONS: [(&str, &str); 6] = [
    ("event", "event ${1:Name} {\n    ${2:field}: ${3:string}\n}"),
    ("connection", "connection ${1:name} {\n    url: \"${2:https://}\"\n}"),
    ("action", "action ${1:name}(${2}) {\n    via: ${3:connection}\n}"),
    ("subscriber", "subscriber ${1:name} {\n    on: ${2:Event}\n    run: ${3:action}($4)\n}"),
    ("schedule", "schedule ${1:name} {\n    every: ${2:1h}\n    run: ${3:action}($4)\n}"),
    ("test", "test \"${1:what it shows}\" {\n    $0\n}"),
];

/// The steps of a test.
const STEPS: [(&str, &str); 6] = [
    ("fake", "fake ${1:connection}: [${2:ok}]"),
    ("emit", "emit ${1:Event} { $2 }"),
    ("wait", "wait ${1:1m}"),
    ("retry", "retry ${1:subscriber}"),
    ("expect", "expect ${1:subscriber} { state: ${2:succeeded} }"),
    ("expect breaker", "expect breaker ${1:connection} { state: ${2:closed} }"),
];

impl Analysis {
    /// The items that may be written at `offset` in `file`.
    pub fn completion(&self, file: usize, offset: u32) -> Vec<Completion> {
        let cur = cursor_at(self.text(file), offset as usize);
        let replace = cur.word;
        let item = |label: &str, kind, detail: Option<String>, snippet: Option<String>| Completion {
            label: label.to_string(),
            kind,
            detail,
            snippet,
            replace,
        };
        let names = |kind: SymbolKind| -> Vec<Completion> {
            self.primary_defs(kind)
                .map(|(_, d)| item(&d.name, CompletionKind::Symbol(kind), Some(self.detail(d)), None))
                .collect()
        };
        let decl = cur.decl_kind();
        let depth = cur.frames.len();

        if cur.after(&["event", "."]) {
            return self
                .event_fields(&cur)
                .map(|d| item(&d.name, CompletionKind::Symbol(SymbolKind::Field), Some(self.detail(d)), None))
                .collect();
        }
        // Where a condition's operand or `order_by:`'s field starts: `event.FIELD`.
        if decl == Some(DeclKind::Subscriber)
            && (cur.after(&["where", ":"])
                || cur.after(&["order_by", ":"])
                || cur.after(&["and"])
                || cur.after(&["or"])
                || cur.after(&["not"]))
        {
            return self
                .event_fields(&cur)
                .map(|d| {
                    let path = format!("event.{}", d.name);
                    item(&path, CompletionKind::Symbol(SymbolKind::Field), Some(self.detail(d)), Some(path.clone()))
                })
                .collect();
        }
        if depth == 1 {
            match decl {
                Some(DeclKind::Subscriber) if cur.after(&["on", ":"]) => return names(SymbolKind::Event),
                Some(DeclKind::Subscriber | DeclKind::Schedule) if cur.after(&["run", ":"]) => {
                    return self
                        .primary_defs(SymbolKind::Action)
                        .map(|(id, d)| {
                            let params: Vec<String> = self
                                .checked
                                .index
                                .children(id)
                                .enumerate()
                                .map(|(i, p)| {
                                    let p = self.checked.index.def(p);
                                    if decl == Some(DeclKind::Subscriber) {
                                        format!("${{{}:event.{}}}", i + 1, p.name)
                                    } else {
                                        format!("${{{}:{}}}", i + 1, p.name)
                                    }
                                })
                                .collect();
                            let snippet = format!("{}({})", d.name, params.join(", "));
                            item(
                                &d.name,
                                CompletionKind::Symbol(SymbolKind::Action),
                                Some(self.detail(d)),
                                Some(snippet),
                            )
                        })
                        .collect();
                }
                Some(DeclKind::Action) if cur.after(&["via", ":"]) => return names(SymbolKind::Connection),
                Some(DeclKind::Test) => {
                    if cur.after(&["expect"]) || cur.after(&["retry"]) {
                        let mut out = names(SymbolKind::Subscriber);
                        if cur.after(&["expect"]) {
                            out.push(item("breaker", CompletionKind::Keyword, None, None));
                        }
                        return out;
                    }
                    if cur.after(&["expect", "breaker"]) || cur.after(&["fake"]) {
                        return names(SymbolKind::Connection);
                    }
                    if cur.after(&["emit"]) {
                        return names(SymbolKind::Event);
                    }
                    if cur.line_start {
                        return STEPS
                            .iter()
                            .map(|(k, s)| item(k, CompletionKind::Keyword, None, Some(s.to_string())))
                            .collect();
                    }
                }
                _ => {}
            }
        }
        if let Some(frame) = cur.frame() {
            if frame.fake_list && (cur.after(&["["]) || cur.after(&[","])) {
                let mut out: Vec<Completion> = ["ok", "hang"]
                    .into_iter()
                    .map(|w| item(w, CompletionKind::Value, Some("fake answer".into()), None))
                    .collect();
                out.extend(
                    FailureKind::ALL
                        .into_iter()
                        .filter(|k| k.is_fake_answer())
                        .map(|k| item(k.as_str(), CompletionKind::Value, Some("failure kind".into()), None)),
                );
                return out;
            }
            if let Some(event) = &frame.emit_event
                && cur.line_start
            {
                let index = &self.checked.index;
                let Some(parent) = index.defs_named(SymbolKind::Event, event).next() else { return Vec::new() };
                return index
                    .children(parent)
                    .map(|id| index.def(id))
                    .filter(|d| !frame.keys.iter().any(|k| **k == *d.name))
                    .map(|d| {
                        let snippet = format!("{}: $1", d.name);
                        item(&d.name, CompletionKind::Symbol(SymbolKind::Field), Some(self.detail(d)), Some(snippet))
                    })
                    .collect();
            }
            if let Some(block) = frame.block
                && cur.line_start
                && block != BlockKind::Decl(DeclKind::Event)
            {
                return keys_of(block)
                    .into_iter()
                    .filter(|k| !frame.keys.iter().any(|w| w == k.key))
                    .map(|k| {
                        let snippet = format!("{}: {}", k.key, k.snippet);
                        let mut c = item(k.key, CompletionKind::Key, Some(k.doc.clone()), Some(snippet));
                        if k.required {
                            c.detail = Some(format!("required. {}", k.doc));
                        }
                        c
                    })
                    .collect();
            }
            return Vec::new();
        }
        if decl.is_none() && cur.line_start {
            return DECLARATIONS
                .iter()
                .map(|(k, s)| item(k, CompletionKind::Keyword, None, Some(s.to_string())))
                .collect();
        }
        Vec::new()
    }

    /// The fields of the subscriber's `on:` event at the cursor.
    fn event_fields(&self, cur: &Cursor) -> impl Iterator<Item = &Def> {
        let index = &self.checked.index;
        let parent = cur.on_event.as_deref().and_then(|event| index.defs_named(SymbolKind::Event, event).next());
        parent.into_iter().flat_map(move |p| index.children(p)).map(move |id| index.def(id))
    }

    /// The first definition of each name of `kind`.
    fn primary_defs(&self, kind: SymbolKind) -> impl Iterator<Item = (jadpo_check::DefId, &Def)> {
        self.checked.index.iter_defs().filter(move |(_, d)| d.kind == kind && d.primary)
    }

    /// A definition's first line, or a field's `name: type`.
    pub(crate) fn detail(&self, def: &Def) -> String {
        let text = self.text(def.file).get(def.span.range()).unwrap_or("");
        let line = text.lines().next().unwrap_or("").trim_end_matches('{').trim();
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::analysis;

    const DEFS: &str = "event PaymentReceived {\n    payment_id: string\n    amount: int\n}\n\nconnection ledger {\n    url: \"https://x.example\"\n}\n\naction record(id: string, amount: int) {\n    via: ledger\n}\n";

    fn labels(text: &str) -> Vec<String> {
        let (a, file, offset) = analysis(&[("b.jadpo", text), ("a.jadpo", DEFS)]);
        a.completion(file, offset as u32).into_iter().map(|c| c.label).collect()
    }

    #[test]
    fn keywords_at_top_level_and_missing_keys_in_a_block() {
        assert!(labels("|").contains(&"subscriber".to_string()));
        assert_eq!(
            labels("subscriber s {\n    on: PaymentReceived\n    |\n}\n"),
            vec!["run", "retry", "timeout", "where", "order_by", "was"]
        );
        assert_eq!(
            labels("connection c {\n    url: \"https://x.example\"\n    rate: 50/s\n    |\n}\n"),
            vec!["timeout", "retry", "headers", "max_in_flight", "tls", "signing", "burst", "was"]
        );
        assert_eq!(labels("subscriber s {\n    retry: { attempts: 3, | }\n}\n"), vec!["within"]);
    }

    #[test]
    fn names_after_on_run_via_and_event_dot() {
        assert_eq!(labels("subscriber s {\n    on: Pay|\n}\n"), vec!["PaymentReceived"]);
        assert_eq!(
            labels("subscriber s {\n    on: PaymentReceived\n    run: record(event.|)\n}\n"),
            vec!["payment_id", "amount"]
        );
        assert_eq!(labels("action b() {\n    via: |\n}\n"), vec!["ledger"]);
        let (a, file, offset) =
            analysis(&[("b.jadpo", "subscriber s {\n    on: PaymentReceived\n    run: |\n}\n"), ("a.jadpo", DEFS)]);
        let items = a.completion(file, offset as u32);
        assert_eq!(items[0].snippet.as_deref(), Some("record(${1:event.id}, ${2:event.amount})"));
    }

    #[test]
    fn fake_answers_and_subscribers_in_tests() {
        let answers = labels("test \"t\" {\n    fake ledger: [unavailable, |]\n}\n");
        assert!(answers.contains(&"ok".to_string()) && answers.contains(&"rate_limited".to_string()));
        assert!(!answers.contains(&"lease_expired".to_string()));
        let subs = labels(
            "subscriber s {\n    on: PaymentReceived\n    run: record(event.payment_id, event.amount)\n}\ntest \"t\" {\n    expect |\n}\n",
        );
        assert!(subs.contains(&"s".to_string()), "{subs:?}");
    }

    #[test]
    fn fields_in_a_condition_and_after_order_by() {
        let sub = |body: &str| {
            format!(
                "subscriber s {{\n    on: PaymentReceived\n    {body}\n    run: record(event.payment_id, event.amount)\n}}\n"
            )
        };
        for body in [
            "where: event.|",
            "where: event.amount > 1 and event.|",
            "where: event.amount > 1 or not event.|",
            "where: event.amount > 1 and (event.payment_id == \"p\" or event.|)",
            "where: event.| in [1, 2]",
        ] {
            assert_eq!(labels(&sub(body)), vec!["payment_id", "amount"], "{body}");
        }
        // Where an operand starts, the whole path.
        for body in [
            "where: |",
            "where: ev|",
            "where: event.amount > 1 and |",
            "where: (event.amount > 1 or |)",
            "where: not |",
        ] {
            assert_eq!(labels(&sub(body)), vec!["event.payment_id", "event.amount"], "{body}");
        }
        let (a, file, offset) = analysis(&[("b.jadpo", &sub("where: ev|")), ("a.jadpo", DEFS)]);
        let items = a.completion(file, offset as u32);
        assert_eq!(items[0].snippet.as_deref(), Some("event.payment_id"));
        assert_eq!(items[0].detail.as_deref(), Some("payment_id: string"));
        assert_eq!(items[0].replace.end - items[0].replace.start, 2);
    }

    #[test]
    fn order_by_offers_the_event_fields() {
        // Every field: which ones `order_by:` takes is the checker's to say (its
        // diagnostic names the types).
        let text = |body: &str| {
            format!(
                "event E {{\n    id: string\n    n: int\n    f: float\n}}\n\nsubscriber s {{\n    on: E\n    {body}\n}}\n"
            )
        };
        assert_eq!(labels(&text("order_by: event.|")), vec!["id", "n", "f"]);
        assert_eq!(labels(&text("order_by: |")), vec!["event.id", "event.n", "event.f"]);
    }
}
