//! Hover: a diagnostic's explanation, a key's meaning, a name's declaration, a
//! subscriber's budget and the plan of its attempts, a `where:`'s fields and what a
//! `rate:` means for a backlog (`flow.rs`).

use super::Analysis;
use super::cursor::cursor_at;
use super::keys::{BlockKind, keys_of};
use jadpo_check::budget::{Budget, attempts_that_fit, declared, plan};
use jadpo_check::{Code, Def, SymbolKind, format_duration_spaced};
use jadpo_syntax::ast::{Body, Decl, DeclKind, Span};
use std::fmt::Write as _;

impl Analysis {
    /// What to show for the place `offset` in `file`, in Markdown, and the span it is about.
    pub fn hover(&self, file: usize, offset: u32) -> Option<(String, Span)> {
        let mut parts: Vec<String> = Vec::new();
        let mut range: Option<Span> = None;
        for d in self.diagnostics_at(file, Span { start: offset, end: offset }) {
            let mut s = format!("**{}** `{}`: {}", d.code.severity().as_str(), d.code, d.message);
            if let Some(help) = &d.help {
                let _ = write!(s, "\n\nhelp: {help}");
            }
            let _ = write!(s, "\n\n---\n\n{}", explain(d.code));
            parts.push(s);
            range.get_or_insert(d.span);
        }
        if let Some((text, span)) = self.hover_code(file, offset) {
            parts.push(text);
            range = Some(range.map_or(span, |r| r.to(span)));
        }
        if parts.is_empty() { None } else { Some((parts.join("\n\n---\n\n"), range.unwrap_or_default())) }
    }

    fn hover_code(&self, file: usize, offset: u32) -> Option<(String, Span)> {
        let text = self.text(file);
        let cur = cursor_at(text, offset as usize);
        let (span, word) = cur.token.clone()?;
        if let Some(id) = self.checked.index.symbol_at(file, offset) {
            let def = self.checked.index.def(id);
            let mut out = self.describe(def);
            if def.kind == SymbolKind::Subscriber
                && let Some(plan) = self.budget_hover(def)
            {
                out.push_str("\n\n");
                out.push_str(&plan);
            }
            return Some((out, span));
        }
        if !cur.token_is_key {
            // In a `where:`, `rate:` or `burst:` value: what it lets through.
            return self.flow_hover(file, offset).map(|out| (out, span));
        }
        let block = cur.frame().and_then(|f| f.block)?;
        let key = word.trim_matches('"');
        let doc = keys_of(block).into_iter().find(|k| k.key == key)?;
        let mut out = format!("`{key}:` {}", doc.doc);
        if let Some(flow) = self.flow_hover(file, offset) {
            out.push_str("\n\n");
            out.push_str(&flow);
        }
        if block == BlockKind::Decl(DeclKind::Subscriber)
            && key == "retry"
            && let Some((_, name)) = &cur.decl
            && let Some(id) = self.checked.index.defs_named(SymbolKind::Subscriber, name).next()
            && let Some(plan) = self.budget_hover(self.checked.index.def(id))
        {
            out.push_str("\n\n");
            out.push_str(&plan);
        }
        Some((out, span))
    }

    /// A declaration as written, in a code block, with what its defaults make of it.
    fn describe(&self, def: &Def) -> String {
        let text = self.text(def.file);
        let source = text.get(def.span.range()).unwrap_or(&def.name);
        let mut lines: Vec<&str> = source.lines().collect();
        if lines.len() > 40 {
            lines.truncate(40);
            lines.push("    ...");
        }
        let mut out = format!("```jadpo\n{}\n```", lines.join("\n"));
        if def.kind == SymbolKind::Connection {
            out.push_str("\n\n");
            out.push_str(&connection_defaults(source));
        }
        if let Some(parent) = def.parent {
            let p = self.checked.index.def(parent);
            let _ = write!(out, "\n\n{} of {} `{}`", def.kind.as_str(), p.kind.as_str(), p.name);
        }
        out
    }

    /// The budget of a subscriber in words and the plan of its attempts, as
    /// `jadpoc plan` prints it.
    fn budget_hover(&self, def: &Def) -> Option<String> {
        let budget = self.with_decls(def.file, |decls| {
            decls.iter().find(|d| d.kind == DeclKind::Subscriber && d.name.span == def.name_span).and_then(declared)
        })?;
        Some(plan_markdown(&budget))
    }
}

/// `jadpoc explain CODE`'s text.
pub(crate) fn explain(code: Code) -> String {
    format!("# {} ({})\n\n{}\n\n{}", code, code.severity().as_str(), code.summary(), code.doc())
}

fn connection_defaults(source: &str) -> String {
    use jadpo_check::budget::{DEFAULT_CALL_TIMEOUT_MS, DEFAULT_CONNECTION_ATTEMPTS, DEFAULT_MAX_IN_FLIGHT};
    let parsed = jadpo_syntax::parse(source);
    let mut out = Vec::new();
    if let Some(Decl { body: Body::Block { block, .. }, .. }) = parsed.file.decls.first() {
        if block.get("timeout").is_none() {
            out.push(format!("timeout {} (default)", format_duration_spaced(DEFAULT_CALL_TIMEOUT_MS)));
        }
        if block.get("max_in_flight").is_none() {
            out.push(format!("{DEFAULT_MAX_IN_FLIGHT} calls in flight at most (default)"));
        }
        if block.get("retry").is_none() {
            out.push(format!("{DEFAULT_CONNECTION_ATTEMPTS} send per call (default)"));
        }
    }
    out.join(", ")
}

/// The budget in plain words and its plan of attempts: earliest, average and latest
/// start of each, counted from the event.
pub(crate) fn plan_markdown(b: &Budget) -> String {
    let default = |d: bool| if d { " (default)" } else { "" };
    let mut out = format!(
        "**Budget**: {} attempts{} within {}{}\n\n| attempt | wait up to | earliest | average | latest |\n|---:|---:|---:|---:|---:|\n",
        b.attempts,
        default(b.default_attempts),
        format_duration_spaced(b.within_ms),
        default(b.default_within)
    );
    let rows = plan(b.attempts, b.within_ms);
    for r in &rows {
        let ceiling = if r.attempt == 1 { "-".to_string() } else { format_duration_spaced(r.ceiling_ms) };
        let past = if r.average_ms > b.within_ms { " (past the window on average)" } else { "" };
        let _ = writeln!(
            out,
            "| {}{past} | {ceiling} | {} | {} | {} |",
            r.attempt,
            format_duration_spaced(r.earliest_ms),
            format_duration_spaced(r.average_ms),
            format_duration_spaced(r.latest_ms)
        );
    }
    let fits = attempts_that_fit(b.attempts, b.within_ms);
    let last = rows[rows.len() - 1];
    if fits == b.attempts {
        let _ = write!(
            out,
            "\nGives up after attempt {}, which starts at the latest {} after the event.",
            b.attempts,
            format_duration_spaced(last.latest_ms)
        );
    } else {
        let _ = write!(
            out,
            "\nThe window ends it first: on average only {fits} of {} attempts start within {}.",
            b.attempts,
            format_duration_spaced(b.within_ms)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::test_util::analysis;

    const PROGRAM: &str = "event E {\n    id: string\n}\n\nconnection c {\n    url: \"https://x.example\"\n}\n\naction a(id: string) {\n    via: c\n}\n\nsubscriber s {\n    on: E\n    run: a(event.id)\n    retry: { attempts: 3, within: 1h }\n}\n";

    #[test]
    fn a_reference_shows_its_declaration() {
        let text = PROGRAM.replace("on: E", "on: |E");
        let (a, file, offset) = analysis(&[("a.jadpo", &text)]);
        let (hover, _) = a.hover(file, offset as u32).unwrap();
        assert!(hover.contains("event E {\n    id: string\n}"), "{hover}");
    }

    #[test]
    fn a_key_shows_its_meaning_and_the_retry_key_the_plan() {
        let text = PROGRAM.replace("retry: {", "re|try: {");
        let (a, file, offset) = analysis(&[("a.jadpo", &text)]);
        let (hover, _) = a.hover(file, offset as u32).unwrap();
        assert!(hover.contains("The retry budget"), "{hover}");
        assert!(hover.contains("| 3 | 1m | 2s | 45s | 1m 30s |"), "{hover}");
        assert!(hover.contains("Gives up after attempt 3"), "{hover}");
        let text = PROGRAM.replace("url:", "u|rl:");
        let (a, file, offset) = analysis(&[("a.jadpo", &text)]);
        assert!(a.hover(file, offset as u32).unwrap().0.contains("The provider's address"));
    }

    #[test]
    fn a_diagnostic_shows_its_explanation() {
        let text = PROGRAM.replace("on: E", "on: |F");
        let (a, file, offset) = analysis(&[("a.jadpo", &text)]);
        let (hover, _) = a.hover(file, offset as u32).unwrap();
        assert!(hover.contains("`subscriber.unknown_event`"), "{hover}");
        assert!(hover.contains("# subscriber.unknown_event (error)"), "{hover}");
    }
}
