//! What a subscriber's `where:` lets through and what a connection's `rate:` means
//! for a backlog, for hover.
//!
//! The filter's fields are the checker's references (the symbol index), with the
//! types their declarations give; the rate is read by the checker itself, and
//! what it means for a backlog is `Rate::drain_ms`, the formula the runtime runs.

use super::Analysis;
use super::hints::rounded;
use jadpo_check::budget::{HOUR_MS, MINUTE_MS, SECOND_MS};
use jadpo_check::program::Rate;
use jadpo_check::{Lower, SourceFile, SymbolKind, check, format_duration, noun, thousands};
use jadpo_syntax::ast::{Body, DeclKind, Span, ValueKind};
use std::fmt::Write as _;

/// Backlogs whose drain time a rate's hover shows.
const BACKLOGS: [u64; 3] = [1_000, 10_000, 100_000];

/// Whether `offset` is on `span`, its end included (a cursor just after a word is on it).
fn touches(span: Span, offset: u32) -> bool {
    span.start <= offset && offset <= span.end
}

impl Analysis {
    /// The summary of the `where:`, `rate:` or `burst:` entry whose key or value
    /// holds `offset`, in Markdown.
    pub(crate) fn flow_hover(&self, file: usize, offset: u32) -> Option<String> {
        let text = self.text(file);
        let written = |span: Span| text.get(span.range()).unwrap_or("").to_string();
        // What the tree says, owned, so that the tree is dropped before the index is read.
        enum Found {
            Where { event: Option<String>, condition: String, span: Span },
            Rate { rate: String, burst: Option<String> },
        }
        let found = self.with_decls(file, |decls| {
            let decl = decls.iter().find(|d| touches(d.span, offset))?;
            let Body::Block { block, .. } = &decl.body else { return None };
            let entry = block.entries.iter().find(|e| touches(e.key.span, offset) || touches(e.value.span, offset))?;
            match (decl.kind, &*entry.key.text) {
                (DeclKind::Subscriber, "where") => {
                    let event = block.get("on").and_then(|on| match &on.value.kind {
                        ValueKind::Ident { name, optional: false } => Some(name.to_string()),
                        _ => None,
                    });
                    Some(Found::Where { event, condition: written(entry.value.span), span: entry.value.span })
                }
                (DeclKind::Connection, "rate" | "burst") => {
                    let rate = block.get("rate")?;
                    Some(Found::Rate {
                        rate: written(rate.value.span),
                        burst: block.get("burst").map(|b| written(b.value.span)),
                    })
                }
                _ => None,
            }
        })?;
        match found {
            Found::Where { event, condition, span } => {
                Some(self.filter_markdown(file, event.as_deref(), &condition, span))
            }
            Found::Rate { rate, burst } => rate_markdown(&rate, burst.as_deref()),
        }
    }

    /// A `where:` as written, and the fields it reads with their types.
    fn filter_markdown(&self, file: usize, event: Option<&str>, condition: &str, span: Span) -> String {
        let mut out = match event {
            Some(event) => format!("**Filter**: the `{event}` events this subscriber takes"),
            None => "**Filter**: the events this subscriber takes".to_string(),
        };
        let _ = write!(out, "\n\n```jadpo\nwhere: {condition}\n```");
        let index = &self.checked.index;
        let mut fields: Vec<(String, String)> = Vec::new();
        for r in index.refs().iter().filter(|r| {
            r.file == file && r.kind == SymbolKind::Field && span.start <= r.span.start && r.span.end <= span.end
        }) {
            let Some(target) = r.target else { continue };
            let def = index.def(target);
            if fields.iter().any(|(name, _)| **name == *def.name) {
                continue;
            }
            // The field's declaration as written: `amount_cents: int`.
            let detail = self.detail(def);
            let ty = detail.split_once(':').map_or("", |(_, ty)| ty).trim().trim_end_matches(',').to_string();
            fields.push((def.name.to_string(), ty));
        }
        if !fields.is_empty() {
            out.push_str("\n\n| field | type |\n|---|---|\n");
            for (name, ty) in &fields {
                let _ = writeln!(out, "| `event.{name}` | `{ty}` |");
            }
            out.push_str("\nAn event for which the condition does not hold makes no delivery for this subscriber.");
        }
        out
    }
}

/// The rate as the checker reads it. The checker is given a connection of its own
/// with this `rate:` and `burst:` as written, so that the units, the ranges and the
/// default burst are its own; `None` when it refuses them (the diagnostic on the
/// program says why).
fn read_rate(rate: &str, burst: Option<&str>) -> Option<Rate> {
    let mut text = format!("connection rate_of {{\n    url: \"https://rate.invalid\"\n    rate: {rate}\n");
    if let Some(burst) = burst {
        let _ = writeln!(text, "    burst: {burst}");
    }
    text.push_str("}\n");
    let checked = check(&[SourceFile { name: "rate.jadpo".into(), text }], Lower::Yes);
    checked.program?.connections.first()?.rate
}

/// What a rate means: the spacing of calls, the burst, and how long backlogs take
/// to drain.
fn rate_markdown(written: &str, burst: Option<&str>) -> Option<String> {
    let rate = read_rate(written, burst)?;
    let interval_us = rate.interval_us().max(0) as u64;
    let interval = if interval_us < 1_000 { format!("{interval_us}µs") } else { about(interval_us / 1_000) };
    let per = match rate.per_ms {
        SECOND_MS => "a second".to_string(),
        MINUTE_MS => "a minute".to_string(),
        HOUR_MS => "an hour".to_string(),
        other => format!("per {}", format_duration(other)),
    };
    let count = u64::from(rate.count);
    let mut out = format!("**Rate** `{written}`: {} {} {per}", thousands(count), noun(count, "call"));
    if count > 1 {
        let _ = write!(out, ", one every {interval}");
    }
    if rate.burst > 1 {
        let _ = write!(out, ", and up to {} at once after a quiet spell", thousands(u64::from(rate.burst)));
    }
    out.push_str(", across every process of one store.\n\nA backlog, one call each through this connection:\n");
    for n in BACKLOGS {
        let ms = rate.drain_ms(n);
        let time = if ms == 0 { "at once".to_string() } else { format!("in {}", about(ms)) };
        let _ = writeln!(out, "- `{written}`: {} {} drain {time}", thousands(n), noun(n, "event"));
    }
    Some(out.trim_end().to_string())
}

/// A duration to read at a glance: whole seconds from a second up, then its two
/// largest units (19,980ms is `20s`, 3,589,200s is `41d13h`).
fn about(ms: u64) -> String {
    if ms < SECOND_MS { format_duration(ms) } else { rounded((ms + SECOND_MS / 2) / SECOND_MS * SECOND_MS) }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::analysis;

    const PROGRAM: &str = "event Paid {\n    id: string\n    amount_cents: int\n    currency: string?\n    vip: bool\n}\n\nconnection ledger {\n    url: \"https://x.example\"\n    rate: 50/s\n}\n\naction record(id: string) {\n    via: ledger\n}\n\nsubscriber big {\n    on: Paid\n    where: event.amount_cents >= 10000 and event.currency == \"EUR\"\n    order_by: event.id\n    run: record(event.id)\n}\n";

    fn hover(text: &str) -> String {
        let (a, file, offset) = analysis(&[("a.jadpo", text)]);
        a.hover(file, offset as u32).map(|h| h.0).unwrap_or_default()
    }

    #[test]
    fn the_rate_says_how_long_a_backlog_takes() {
        // 50/s, burst 1: 9,999 calls 20ms apart after the first.
        let shown = hover(&PROGRAM.replace("rate: 50/s", "ra|te: 50/s"));
        assert!(shown.contains("How often calls through this connection may start"), "{shown}");
        assert!(shown.contains("**Rate** `50/s`: 50 calls a second, one every 20ms, across every process"), "{shown}");
        assert!(shown.contains("- `50/s`: 10,000 events drain in 3m20s"), "{shown}");
        assert!(shown.contains("- `50/s`: 1,000 events drain in 20s"), "{shown}");
        assert!(shown.contains("- `50/s`: 100,000 events drain in 33m20s"), "{shown}");
        // On the value, with a burst: the first 10 start at once.
        let text = PROGRAM.replace("rate: 50/s", "rate: 600/|m\n    burst: 10");
        let shown = hover(&text);
        assert!(
            shown.starts_with("**Rate** `600/m`: 600 calls a minute, one every 100ms, and up to 10 at once"),
            "{shown}"
        );
        assert!(shown.contains("- `600/m`: 1,000 events drain in 1m39s"), "{shown}");
        // On `burst:`: its meaning, then the same.
        let shown = hover(&PROGRAM.replace("rate: 50/s", "rate: 1/h\n    bu|rst: 3"));
        assert!(shown.contains("`burst:` With `rate:`"), "{shown}");
        assert!(shown.contains("- `1/h`: 1,000 events drain in 41d13h"), "{shown}");
    }

    #[test]
    fn a_rate_the_checker_refuses_shows_its_diagnostic_only() {
        let shown = hover(&PROGRAM.replace("rate: 50/s", "rate: 50/|week"));
        assert!(shown.contains("`connection.rate_invalid`"), "{shown}");
        assert!(!shown.contains("**Rate**"), "{shown}");
    }

    #[test]
    fn the_filter_shows_its_fields_with_their_types() {
        for at in ["wh|ere:", ">|= 10000", "an|d event", "\"E|UR\""] {
            let text = PROGRAM.replacen(&at.replace('|', ""), at, 1);
            let shown = hover(&text);
            assert!(shown.contains("**Filter**: the `Paid` events this subscriber takes"), "{at}: {shown}");
            assert!(
                shown.contains("```jadpo\nwhere: event.amount_cents >= 10000 and event.currency == \"EUR\"\n```"),
                "{at}: {shown}"
            );
            assert!(
                shown.contains("| `event.amount_cents` | `int` |\n| `event.currency` | `string?` |\n"),
                "{at}: {shown}"
            );
            assert!(!shown.contains("`event.vip`"), "{at}: {shown}");
        }
        // On the key, the key's meaning comes first.
        assert!(hover(&PROGRAM.replace("where:", "whe|re:")).starts_with("`where:` Which events"));
    }

    #[test]
    fn a_field_in_a_condition_shows_the_field() {
        let shown = hover(&PROGRAM.replace("event.amount_cents >=", "event.amount_|cents >="));
        assert!(shown.starts_with("```jadpo\namount_cents: int\n```"), "{shown}");
        assert!(shown.contains("field of event `Paid`"), "{shown}");
        assert!(!shown.contains("**Filter**"), "{shown}");
    }
}
