//! Inlay hints: each subscriber's budget in short after its `retry:` block, or after
//! its name when it has none.

use super::Analysis;
use jadpo_check::budget::{Budget, attempts_that_fit, declared, plan};
use jadpo_check::format_duration;
use jadpo_syntax::ast::{Body, DeclKind, Span};

/// An inlay hint: a label shown at an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    pub offset: u32,
    pub label: String,
    /// The plan in full, for the hint's tooltip.
    pub tooltip: String,
}

impl Analysis {
    /// The hints of one file whose place is within `range`.
    pub fn inlay_hints(&self, file: usize, range: Span) -> Vec<Hint> {
        self.with_decls(file, |decls| {
            decls
                .iter()
                .filter(|d| d.kind == DeclKind::Subscriber && d.span.start <= range.end && range.start <= d.span.end)
                .filter_map(|d| {
                    let budget = declared(d)?;
                    let Body::Block { block, .. } = &d.body else { return None };
                    let offset = block.get("retry").map_or(d.name.span.end, |e| e.value.span.end);
                    (range.start <= offset && offset <= range.end).then(|| Hint {
                        offset,
                        label: short(&budget),
                        tooltip: super::hover::plan_markdown(&budget),
                    })
                })
                .collect()
        })
    }
}

/// "10 attempts, last ≈ 4h16m after the event", or what the window cuts.
pub(crate) fn short(b: &Budget) -> String {
    let fits = attempts_that_fit(b.attempts, b.within_ms);
    if fits < b.attempts {
        return format!("{} attempts, only {fits} fit in {} on average", b.attempts, format_duration(b.within_ms));
    }
    let rows = plan(b.attempts, b.within_ms);
    let last = rows.last().map_or(0, |r| r.latest_ms);
    match b.attempts {
        1 => "1 attempt, no retry".to_string(),
        n => format!("{n} attempts, last ≈ {} after the event", rounded(last)),
    }
}

/// A duration rounded to its two largest units: 4h15m30s is `4h16m`.
pub(crate) fn rounded(ms: u64) -> String {
    use jadpo_check::budget::{DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS};
    let units = [DAY_MS, HOUR_MS, MINUTE_MS, SECOND_MS, 1];
    let Some(i) = units.iter().position(|&u| ms >= u) else { return "0s".into() };
    let Some(&second) = units.get(i + 1) else { return format_duration(ms) };
    let r = (ms + second / 2) / second * second;
    format_duration(r)
}

#[cfg(test)]
mod tests {
    use super::super::test_util::analysis;
    use super::*;
    use jadpo_check::budget::DEFAULT_WITHIN_MS;

    #[test]
    fn the_default_budget_in_short() {
        let b = Budget { attempts: 10, within_ms: DEFAULT_WITHIN_MS, default_attempts: true, default_within: true };
        assert_eq!(short(&b), "10 attempts, last ≈ 4h16m after the event");
        let b = Budget { attempts: 20, within_ms: 3_600_000, default_attempts: false, default_within: false };
        assert_eq!(short(&b), "20 attempts, only 8 fit in 1h on average");
    }

    #[test]
    fn hints_go_after_the_retry_block_or_the_name() {
        let text = "event E { id: string }\nconnection c { url: \"https://x.example\" }\naction a(id: string) { via: c }\nsubscriber s { on: E, run: a(event.id) }\nsubscriber t {\n    on: E\n    run: a(event.id)\n    retry: { attempts: 3, within: 1h }\n}\n";
        let (a, _, _) = analysis(&[("a.jadpo", text)]);
        let hints = a.inlay_hints(0, Span::new(0, text.len()));
        assert_eq!(hints.len(), 2);
        assert_eq!(hints[0].offset as usize, text.find("s {").unwrap() + 1);
        assert_eq!(hints[0].label, "10 attempts, last ≈ 4h16m after the event");
        assert_eq!(hints[1].offset as usize, text.find("1h }").unwrap() + 4);
        assert_eq!(hints[1].label, "3 attempts, last ≈ 1m30s after the event");
    }
}
