//! The symbol index: every declaration and reference, at the places an editor asks
//! about, resolved as the checker resolves them.

use jadpo_check::{DefId, Lower, SourceFile, SymbolIndex, SymbolKind, check};

const EVENTS: &str = "event PaymentReceived {
    payment_id: string
    amount_cents: int?
}

connection ledger {
    url: \"http://127.0.0.1:8080/jadpo\"
}

action record_payment(payment_id: string, amount_cents: int?) {
    via: ledger
}
";

const USES: &str = "subscriber record {
    on: PaymentReceived
    run: record_payment(event.payment_id, event.amount_cents)
}

schedule nightly {
    every: 1d
    run: record_payment(\"all\", 0)
}

test \"ledger down, then back\" {
    fake ledger: [unavailable, ok]
    emit PaymentReceived { payment_id: \"p1\" }
    wait 1m
    retry record
    expect record { state: succeeded }
    expect breaker ledger { state: closed }
}
";

fn files(texts: &[&str]) -> Vec<SourceFile> {
    texts.iter().enumerate().map(|(i, t)| SourceFile { name: format!("f{i}.jadpo"), text: t.to_string() }).collect()
}

fn index_of(texts: &[&str], lower: Lower) -> SymbolIndex {
    check(&files(texts), lower).index
}

/// The byte offset of the `nth` (0-based) occurrence of `needle` in `text`.
fn at(text: &str, needle: &str, nth: usize) -> u32 {
    text.match_indices(needle).nth(nth).unwrap_or_else(|| panic!("no {nth}th `{needle}`")).0 as u32
}

fn one(index: &SymbolIndex, kind: SymbolKind, name: &str) -> DefId {
    let found: Vec<DefId> = index.defs_named(kind, name).collect();
    assert_eq!(found.len(), 1, "{kind:?} `{name}`: {found:?}");
    found[0]
}

#[test]
fn every_declaration_is_a_definition_with_its_spans() {
    let index = index_of(&[EVENTS, USES], Lower::No);
    let kinds: Vec<(SymbolKind, &str, usize)> =
        index.defs().iter().map(|d| (d.kind, d.name.as_ref(), d.file)).collect();
    for want in [
        (SymbolKind::Event, "PaymentReceived", 0),
        (SymbolKind::Field, "payment_id", 0),
        (SymbolKind::Field, "amount_cents", 0),
        (SymbolKind::Connection, "ledger", 0),
        (SymbolKind::Action, "record_payment", 0),
        (SymbolKind::Param, "payment_id", 0),
        (SymbolKind::Param, "amount_cents", 0),
        (SymbolKind::Subscriber, "record", 1),
        (SymbolKind::Schedule, "nightly", 1),
        (SymbolKind::Test, "ledger down, then back", 1),
    ] {
        assert!(kinds.contains(&want), "{want:?} missing from {kinds:?}");
    }
    assert_eq!(index.defs().len(), 10);

    let event = one(&index, SymbolKind::Event, "PaymentReceived");
    let d = index.def(event);
    assert_eq!(&EVENTS[d.name_span.range()], "PaymentReceived");
    assert_eq!(d.span.start, 0);
    assert_eq!(&EVENTS[d.span.range()][d.span.range().len() - 1..], "}");
    assert!(d.primary);

    let fields: Vec<&str> = index.children(event).map(|f| index.def(f).name.as_ref()).collect();
    assert_eq!(fields, ["payment_id", "amount_cents"]);
    let amount = index.children(event).nth(1).expect("second field");
    let f = index.def(amount);
    assert_eq!(&EVENTS[f.span.range()], "amount_cents: int?");
    assert_eq!(f.parent, Some(event));
    assert_eq!(f.ty.map(|t| (t.base, t.optional)), Some((jadpo_check::program::BaseType::Int, true)));

    let action = one(&index, SymbolKind::Action, "record_payment");
    let params: Vec<&str> = index.children(action).map(|p| &EVENTS[index.def(p).span.range()]).collect();
    assert_eq!(params, ["payment_id: string", "amount_cents: int?"]);

    let test = one(&index, SymbolKind::Test, "ledger down, then back");
    assert_eq!(index.def(test).file, 1);
    assert_eq!(index.def(test).span.start, at(USES, "test", 0));
}

#[test]
fn references_resolve_to_their_definitions() {
    let index = index_of(&[EVENTS, USES], Lower::Yes);
    let event = one(&index, SymbolKind::Event, "PaymentReceived");
    let spans =
        |def: DefId| -> Vec<(usize, u32)> { index.references_of(def).map(|r| (r.file, r.span.start)).collect() };
    // `on:` and the test's `emit`.
    assert_eq!(spans(event), [(1, at(USES, "PaymentReceived", 0)), (1, at(USES, "PaymentReceived", 1))]);

    let ledger = one(&index, SymbolKind::Connection, "ledger");
    // `via:` in the first file; `fake` and `expect breaker` in the test.
    assert_eq!(spans(ledger), [(0, at(EVENTS, "ledger", 1)), (1, at(USES, "ledger", 1)), (1, at(USES, "ledger", 2))]);

    let action = one(&index, SymbolKind::Action, "record_payment");
    assert_eq!(spans(action), [(1, at(USES, "record_payment", 0)), (1, at(USES, "record_payment", 1))]);

    let record = one(&index, SymbolKind::Subscriber, "record");
    // `retry record` and `expect record`, not `record_payment`.
    assert_eq!(spans(record), [(1, at(USES, "retry record", 0) + 6), (1, at(USES, "expect record", 0) + 7)]);

    let fields: Vec<DefId> = index.children(event).collect();
    // `event.payment_id` and the emit's `payment_id:`.
    assert_eq!(spans(fields[0]), [(1, at(USES, "payment_id", 0)), (1, at(USES, "payment_id", 1))]);
    assert_eq!(spans(fields[1]), [(1, at(USES, "amount_cents", 0))]);
    for r in index.refs() {
        assert!(r.target.is_some(), "{r:?} did not resolve");
        let text = [EVENTS, USES][r.file];
        assert_eq!(&text[r.span.range()], &*r.name);
        assert_eq!(index.def(r.target.expect("resolved")).name, r.name);
    }
    assert_eq!(index.refs().len(), 12);
}

#[test]
fn lookups_by_place() {
    let index = index_of(&[EVENTS, USES], Lower::No);
    let event = one(&index, SymbolKind::Event, "PaymentReceived");
    let name = at(EVENTS, "PaymentReceived", 0);
    // On the name, inside it and just after it; not on the keyword before it.
    assert_eq!(index.def_at(0, name), Some(event));
    assert_eq!(index.def_at(0, name + 4), Some(event));
    assert_eq!(index.def_at(0, name + "PaymentReceived".len() as u32), Some(event));
    assert_eq!(index.def_at(0, 2), None);
    assert_eq!(index.def_at(1, name), None, "files are told apart");

    let on = at(USES, "PaymentReceived", 0);
    let r = index.ref_at(1, on + 3).expect("a reference");
    assert_eq!((r.kind, r.target), (SymbolKind::Event, Some(event)));
    assert_eq!(index.symbol_at(1, on), Some(event));
    assert_eq!(index.symbol_at(0, name), Some(event));
    assert!(index.ref_at(1, at(USES, "run:", 0)).is_none());

    let field = index.symbol_at(1, at(USES, "event.amount_cents", 0) + 8).expect("a field");
    assert_eq!(index.def(field).kind, SymbolKind::Field);
    assert_eq!(index.def(field).parent, Some(event));

    let outline: Vec<&str> = index.defs_in(1).map(|d| index.def(d).name.as_ref()).collect();
    assert_eq!(outline, ["record", "nightly", "ledger down, then back"]);
}

#[test]
fn unknown_names_are_references_to_nothing() {
    let text = "event E { a: string }

subscriber s {
    on: Ee
    run: act(event.a)
}

subscriber t {
    on: E
    run: nope(event.b)
}
";
    let checked = check(&files(&[text]), Lower::No);
    assert!(checked.errors() >= 2);
    let index = &checked.index;
    let unresolved: Vec<(SymbolKind, &str)> =
        index.refs().iter().filter(|r| r.target.is_none()).map(|r| (r.kind, r.name.as_ref())).collect();
    assert_eq!(
        unresolved,
        [(SymbolKind::Event, "Ee"), (SymbolKind::Action, "act"), (SymbolKind::Action, "nope")],
        "{:?}",
        index.refs()
    );
    let e = one(index, SymbolKind::Event, "E");
    assert_eq!(index.references_of(e).count(), 1);
}

#[test]
fn a_field_of_an_unknown_event_and_an_unknown_field_resolve_to_nothing() {
    let text = "event E { a: string }
connection c { url: \"http://x\" }
action act(a: string) { via: c }
subscriber s { on: Nope  run: act(event.a) }
subscriber t { on: E  run: act(event.b) }
";
    let index = index_of(&[text], Lower::No);
    let fields: Vec<(&str, bool)> = index
        .refs()
        .iter()
        .filter(|r| r.kind == SymbolKind::Field)
        .map(|r| (r.name.as_ref(), r.target.is_some()))
        .collect();
    assert_eq!(fields, [("a", false), ("b", false)]);
}

#[test]
fn a_second_declaration_is_a_definition_but_not_the_target() {
    let first = "event E { a: string }\nconnection c { url: \"http://x\" }\naction act(a: string) { via: c }\n";
    let second = "event E { a: string }\nsubscriber s { on: E  run: act(event.a) }\n";
    let index = index_of(&[first, second], Lower::No);
    let defs: Vec<DefId> = index.defs_named(SymbolKind::Event, "E").collect();
    assert_eq!(defs.len(), 2);
    assert!(index.def(defs[0]).primary && !index.def(defs[1]).primary);
    assert_eq!(index.references_of(defs[0]).count(), 1);
    assert_eq!(index.references_of(defs[1]).count(), 0);
}

#[test]
fn a_program_with_syntax_errors_still_has_its_index() {
    let text = "event E { a: string }\nconnection c { url: \"http://x\" }\naction act(a: string) { via: c }\nsubscriber s { on: E  run: act(event.a) }\nsubscriber broken { on: ";
    let checked = check(&files(&[text]), Lower::No);
    assert!(checked.errors() > 0);
    let e = one(&checked.index, SymbolKind::Event, "E");
    assert_eq!(checked.index.references_of(e).count(), 1);
    assert!(checked.index.defs_named(SymbolKind::Subscriber, "broken").next().is_some());
}

#[test]
fn every_use_of_a_name_shares_one_copy_of_it() {
    let index = index_of(&[EVENTS, USES], Lower::No);
    let event = index.def(one(&index, SymbolKind::Event, "PaymentReceived"));
    let uses: Vec<_> = index.refs().iter().filter(|r| r.kind == SymbolKind::Event).collect();
    assert_eq!(uses.len(), 2, "{uses:?}");
    assert!(uses.iter().all(|r| std::sync::Arc::ptr_eq(&r.name, &event.name)));
    let field = index.def(index.children(one(&index, SymbolKind::Event, "PaymentReceived")).next().expect("a field"));
    let param = index.def(index.children(one(&index, SymbolKind::Action, "record_payment")).next().expect("a param"));
    assert_eq!(&*field.name, "payment_id");
    assert!(std::sync::Arc::ptr_eq(&field.name, &param.name));
}

#[test]
fn a_check_for_diagnostics_only_reports_the_same_and_leaves_the_index_empty() {
    let broken =
        "event E { a: string }\nsubscriber s { on: F  run: act(event.b) }\nsubscriber t { on: E  run: nothing() }\n";
    for texts in [&[EVENTS, USES][..], &[broken][..]] {
        let full = check(&files(texts), Lower::No);
        let only = check(&files(texts), Lower::DiagnosticsOnly);
        assert_eq!(only.diagnostics, full.diagnostics);
        assert!(!full.index.refs().is_empty() && !full.index.defs().is_empty());
        assert_eq!(only.index, jadpo_check::SymbolIndex::default());
    }
}

/// A program of `n` subscribers over a few events and actions, with every kind
/// of mistake a subscriber can make somewhere, and schedules among them.
fn many_subscribers(n: usize) -> String {
    let mut out = String::from(
        "event E0 { id: string  amount: int }\nevent E1 { id: string  note: string? }\n\
         connection c { url: \"http://127.0.0.1:9/hooks\" }\n\
         action a0(id: string, amount: int) { via: c }\naction a1(id: string) { via: c }\n\
         action unused_one(id: string) { via: c }\naction late(id: string) { via: c }\n",
    );
    for i in 0..n {
        let body = match i % 9 {
            0 => "on: E0  run: a0(event.id, event.amount)".to_string(),
            1 => "on: E0  run: a0(event.amount, event.id)".to_string(),
            2 => "on: E9  run: a1(event.id)".to_string(),
            3 => "on: E1  run: a9(event.id)".to_string(),
            4 => format!("on: E1  run: a1(event.id)  retry: {{ attempts: {}  within: 1h }}", 3 + i % 40),
            5 => "on: E0  run: a1(event.nope)  where: event.amount > \"x\"".to_string(),
            6 => "on: E1  run: a1(event.id)  order_by: event.note  timeout: 99m".to_string(),
            7 => "run: a1(\"x\")".to_string(),
            _ => "on: E0  run: a0(event.id, 7)  where: event.amount > 5 and event.id != \"x\"".to_string(),
        };
        out.push_str(&format!("subscriber s{i} {{ {body} }}\n"));
        if i % 1000 == 0 {
            out.push_str(&format!("schedule sch{i} {{ every: {}  run: a1(\"x\") }}\n", ["1h", "0s", "2d"][i % 3]));
        }
    }
    // A duplicate name, and an action only the last subscriber runs: its use is
    // seen by the second half.
    out.push_str("subscriber s0 { on: E0  run: a1(event.id) }\nsubscriber last { on: E1  run: late(event.id) }\n");
    out
}

#[test]
fn a_large_program_checked_in_two_halves_reports_as_one_check_in_order() {
    // Enough subscribers that a check for diagnostics alone splits the second
    // pass; a check that fills the index does not.
    let text = many_subscribers(9_000);
    let halves = check(&files(&[&text]), Lower::DiagnosticsOnly);
    let one = check(&files(&[&text]), Lower::No);
    assert!(halves.diagnostics.len() > 8_000, "{}", halves.diagnostics.len());
    assert_eq!(halves.diagnostics, one.diagnostics);
    let unused: Vec<&str> =
        halves.diagnostics.iter().filter(|d| d.code.as_str() == "action.unused").map(|d| d.message.as_str()).collect();
    assert_eq!(unused, ["the action `unused_one` is never used: no subscriber or schedule runs it"]);
}
