//! Code actions: the fixes the diagnostics point at.

use super::Analysis;
use super::keys::{BlockKind, keys_of};
use jadpo_check::budget::{attempts_that_fit, average_start_ms, declared};
use jadpo_check::{Code, Diagnostic, format_duration};
use jadpo_syntax::ast::{Block, Body, Decl, Span, ValueKind};

/// One text edit: replace `span` of `file` with `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub file: usize,
    pub span: Span,
    pub text: String,
}

/// A fix for one diagnostic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    pub title: String,
    pub edits: Vec<Edit>,
    /// The diagnostic it fixes: its index in [`Analysis::diagnostics`].
    pub diagnostic: usize,
    /// The one fix to apply when there is no doubt (a "did you mean").
    pub preferred: bool,
}

impl Analysis {
    /// The fixes for the diagnostics of `file` that touch `range`.
    pub fn code_actions(&self, file: usize, range: Span) -> Vec<Fix> {
        let mut out = Vec::new();
        for (i, d) in self.diagnostics().iter().enumerate() {
            if d.file != file || d.span.start > range.end || range.start > d.span.end {
                continue;
            }
            if let Some(fix) = self.did_you_mean(i, d) {
                out.push(fix);
            }
            if d.code == Code::SubscriberRetryUnreachable {
                out.extend(self.unreachable(i, d));
            }
            if let Some(fix) = self.missing_key(i, d) {
                out.push(fix);
            }
        }
        out
    }

    /// "did you mean `X`?": replace the misspelt name (or the last segment of a path).
    fn did_you_mean(&self, i: usize, d: &Diagnostic) -> Option<Fix> {
        let help = d.help.as_deref()?;
        let start = help.find("did you mean `")? + "did you mean `".len();
        let name = &help[start..start + help[start..].find('`')?];
        let text = self.text(d.file).get(d.span.range())?;
        let (span, old) = match text.rfind('.') {
            Some(dot) => (Span::new(d.span.start as usize + dot + 1, d.span.end as usize), &text[dot + 1..]),
            None => (d.span, text),
        };
        if old.is_empty() || !old.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return None;
        }
        Some(Fix {
            title: format!("Replace `{old}` with `{name}`"),
            edits: vec![Edit { file: d.file, span, text: name.to_string() }],
            diagnostic: i,
            preferred: true,
        })
    }

    /// Both fixes of an unreachable budget: raise `within:` to the average start of
    /// the last attempt, or lower `attempts:` to those that fit.
    fn unreachable(&self, i: usize, d: &Diagnostic) -> Vec<Fix> {
        self.with_decls(d.file, |decls| {
            let Some(decl) = decls.iter().find(|x| x.span.start <= d.span.start && d.span.end <= x.span.end) else {
                return Vec::new();
            };
            let Some(budget) = declared(decl) else { return Vec::new() };
            let Body::Block { block, .. } = &decl.body else { return Vec::new() };
            let Some(retry) = block.get("retry") else { return Vec::new() };
            let ValueKind::Block(retry) = &retry.value.kind else { return Vec::new() };
            let need = format_duration(average_start_ms(budget.attempts));
            let fit = attempts_that_fit(budget.attempts, budget.within_ms);
            let within = match retry.get("within") {
                Some(e) => Edit { file: d.file, span: e.value.span, text: need.clone() },
                None => {
                    let at = retry.get("attempts").map_or(retry.span.start as usize + 1, |e| e.value.span.end as usize);
                    Edit { file: d.file, span: Span::new(at, at), text: format!(", within: {need}") }
                }
            };
            let mut fixes = vec![Fix {
                title: format!("Raise `within:` to {need}"),
                edits: vec![within],
                diagnostic: i,
                preferred: false,
            }];
            if let Some(e) = retry.get("attempts") {
                fixes.push(Fix {
                    title: format!("Lower `attempts:` to {fit}"),
                    edits: vec![Edit { file: d.file, span: e.value.span, text: fit.to_string() }],
                    diagnostic: i,
                    preferred: false,
                });
            }
            fixes
        })
    }

    /// "the subscriber `s` has no `on:`": add the key with a placeholder value.
    fn missing_key(&self, i: usize, d: &Diagnostic) -> Option<Fix> {
        let start = d.message.find("has no `")? + "has no `".len();
        let key = d.message[start..].split(['`', ':']).next()?.to_string();
        let text = self.text(d.file);
        self.with_decls(d.file, |decls| {
            let decl = decls.iter().find(|x| x.name.span == d.span)?;
            let Body::Block { block, .. } = &decl.body else { return None };
            let doc = keys_of(BlockKind::Decl(decl.kind)).into_iter().find(|k| k.key == key)?;
            let entry = format!("{key}: {}", placeholder(doc.snippet));
            Some(Fix {
                title: format!("Add `{key}:`"),
                edits: vec![insert_entry(d.file, text, decl, block, &entry)],
                diagnostic: i,
                preferred: false,
            })
        })
    }
}

/// A snippet's text with its tab stops filled by their defaults.
fn placeholder(snippet: &str) -> String {
    let mut out = String::new();
    let mut rest = snippet;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        if let Some(inner) = rest.strip_prefix('{') {
            let end = inner.find('}').unwrap_or(inner.len());
            let body = &inner[..end];
            out.push_str(body.split_once(':').map_or("", |(_, v)| v));
            rest = inner.get(end + 1..).unwrap_or("");
        } else {
            rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        }
    }
    out.push_str(rest);
    out
}

/// An edit adding `entry` as the last entry of a declaration's block: on its own
/// line before the closing brace, or inside a one-line block.
fn insert_entry(file: usize, text: &str, decl: &Decl<'_>, block: &Block<'_>, entry: &str) -> Edit {
    let close = block.span.end.saturating_sub(1) as usize;
    let inner = text.get(block.span.start as usize + 1..close).unwrap_or("");
    if inner.contains('\n') {
        let line_start = text[..close].rfind('\n').map_or(0, |i| i + 1);
        let decl_line = text[..decl.span.start as usize].rfind('\n').map_or(0, |i| i + 1);
        let indent: String = text[decl_line..].chars().take_while(|c| *c == ' ' || *c == '\t').collect();
        Edit { file, span: Span::new(line_start, line_start), text: format!("{indent}    {entry}\n") }
    } else if inner.trim().is_empty() {
        Edit { file, span: block.span, text: format!("{{ {entry} }}") }
    } else {
        let at = block.span.start as usize + 1 + inner.trim_end().len();
        Edit { file, span: Span::new(at, at), text: format!(", {entry}") }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::analysis;
    use super::*;

    fn apply(text: &str, edits: &[Edit]) -> String {
        let mut out = text.to_string();
        let mut edits = edits.to_vec();
        edits.sort_by_key(|e| std::cmp::Reverse(e.span.start));
        for e in edits {
            out.replace_range(e.span.range(), &e.text);
        }
        out
    }

    const DEFS: &str = "event PaymentReceived {\n    id: string\n}\n\nconnection c {\n    url: \"https://x.example\"\n}\n\naction a(id: string) {\n    via: c\n}\n";

    fn fixes(sub: &str) -> (String, Vec<Fix>) {
        let text = format!("{DEFS}\n{sub}");
        let (a, _, _) = analysis(&[("a.jadpo", &text)]);
        let fixes = a.code_actions(0, Span::new(0, text.len()));
        (text, fixes)
    }

    fn clean(text: &str) -> bool {
        let (a, _, _) = analysis(&[("a.jadpo", text)]);
        a.diagnostics().is_empty()
    }

    #[test]
    fn did_you_mean_replaces_the_name() {
        let (text, fixes) = fixes("subscriber s {\n    on: PaymentRecieved\n    run: a(event.id)\n}\n");
        assert_eq!(fixes.len(), 1);
        assert_eq!(fixes[0].title, "Replace `PaymentRecieved` with `PaymentReceived`");
        assert!(clean(&apply(&text, &fixes[0].edits)));
    }

    #[test]
    fn both_fixes_of_an_unreachable_budget() {
        let (text, fixes) = fixes(
            "subscriber s {\n    on: PaymentReceived\n    run: a(event.id)\n    retry: { attempts: 20, within: 1h }\n}\n",
        );
        let titles: Vec<&str> = fixes.iter().map(|f| f.title.as_str()).collect();
        assert_eq!(titles, vec!["Raise `within:` to 1d7h15m45s", "Lower `attempts:` to 8"]);
        for f in &fixes {
            assert!(clean(&apply(&text, &f.edits)), "{}", apply(&text, &f.edits));
        }
    }

    #[test]
    fn a_missing_required_key_is_added() {
        let (text, fixes) = fixes("subscriber s {\n    on: PaymentReceived\n}\n");
        let fix = fixes.iter().find(|f| f.title == "Add `run:`").unwrap();
        let fixed = apply(&text, &fix.edits);
        assert!(fixed.ends_with("subscriber s {\n    on: PaymentReceived\n    run: action()\n}\n"), "{fixed}");
        let (_, fixes) = fixes_of("connection d { timeout: 1s }\n");
        assert_eq!(fixes.iter().map(|f| f.title.as_str()).collect::<Vec<_>>(), vec!["Add `url:`"]);
    }

    fn fixes_of(text: &str) -> (String, Vec<Fix>) {
        let (a, _, _) = analysis(&[("a.jadpo", text)]);
        let fixes = a.code_actions(0, Span::new(0, text.len()));
        (text.to_string(), fixes)
    }
}
