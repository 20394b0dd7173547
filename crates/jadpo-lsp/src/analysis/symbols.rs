//! Outline, workspace symbols, go to definition, find references and rename, all
//! read from the checker's symbol index.

use super::Analysis;
use super::actions::Edit;
use jadpo_check::{DefId, SymbolKind};
use jadpo_syntax::ast::Span;

/// A declaration in an outline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub kind: SymbolKind,
    pub file: usize,
    /// The whole declaration.
    pub span: Span,
    /// Its name.
    pub name_span: Span,
    /// An event's fields, an action's parameters.
    pub children: Vec<Symbol>,
}

/// A place in the program: a file and a span.
pub type Place = (usize, Span);

/// The test steps' words, which a rename does not give a name either (beside the
/// language's keywords, [`jadpo_syntax::KEYWORDS`]).
const STEP_WORDS: [&str; 6] = ["fake", "emit", "wait", "retry", "expect", "breaker"];

impl Analysis {
    fn symbol(&self, id: DefId) -> Symbol {
        let index = &self.checked.index;
        let d = index.def(id);
        Symbol {
            name: d.name.to_string(),
            kind: d.kind,
            file: d.file,
            span: d.span,
            name_span: d.name_span,
            children: index.children(id).map(|c| self.symbol(c)).collect(),
        }
    }

    /// The outline of one file: its declarations, with their fields and parameters.
    pub fn document_symbols(&self, file: usize) -> Vec<Symbol> {
        let index = &self.checked.index;
        index.defs_in(file).filter(|&id| index.def(id).parent.is_none()).map(|id| self.symbol(id)).collect()
    }

    /// The declarations of the program whose name contains `query` (ignoring case),
    /// fields and parameters included.
    pub fn workspace_symbols(&self, query: &str) -> Vec<Symbol> {
        let query = query.to_lowercase();
        let index = &self.checked.index;
        index
            .iter_defs()
            .filter(|(_, d)| d.name.to_lowercase().contains(&query))
            .map(|(id, d)| Symbol {
                name: d.name.to_string(),
                kind: d.kind,
                file: d.file,
                span: d.span,
                name_span: d.name_span,
                children: index.children(id).map(|c| self.symbol(c)).collect(),
            })
            .collect()
    }

    /// Where the name at `offset` is declared.
    pub fn definition(&self, file: usize, offset: u32) -> Option<Place> {
        let index = &self.checked.index;
        let id = index.symbol_at(file, offset)?;
        let d = index.def(id);
        Some((d.file, d.name_span))
    }

    /// Every use of the name at `offset`, and its declaration when asked.
    pub fn references(&self, file: usize, offset: u32, with_declaration: bool) -> Vec<Place> {
        let index = &self.checked.index;
        let Some(id) = index.symbol_at(file, offset) else { return Vec::new() };
        let mut out = Vec::new();
        if with_declaration {
            let d = index.def(id);
            out.push((d.file, d.name_span));
        }
        out.extend(index.references_of(id).map(|r| (r.file, r.span)));
        out
    }

    /// The name at `offset` that can be renamed, and its span.
    pub fn prepare_rename(&self, file: usize, offset: u32) -> Option<Span> {
        let index = &self.checked.index;
        let id = index.symbol_at(file, offset)?;
        if index.def(id).kind == SymbolKind::Test {
            return None;
        }
        index
            .def_at(file, offset)
            .map(|i| index.def(i).name_span)
            .or_else(|| index.ref_at(file, offset).map(|r| r.span))
    }

    /// The edits that rename the symbol at `offset` to `new_name` everywhere, or why
    /// they cannot.
    pub fn rename(&self, file: usize, offset: u32, new_name: &str) -> Result<Vec<Edit>, String> {
        let index = &self.checked.index;
        let id = index.symbol_at(file, offset).ok_or("there is no name to rename here")?;
        let def = index.def(id);
        if def.kind == SymbolKind::Test {
            return Err("a test's name is a string: edit it in place".into());
        }
        let valid = new_name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && new_name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid || jadpo_syntax::KEYWORDS.contains(&new_name) || STEP_WORDS.contains(&new_name) {
            return Err(format!(
                "`{new_name}` is not a name: a name is a letter or `_` followed by letters, digits or `_`, and not a keyword"
            ));
        }
        if *new_name == *def.name {
            return Ok(Vec::new());
        }
        let taken = index.defs_named(def.kind, new_name).any(|other| index.def(other).parent == def.parent);
        if taken {
            return Err(format!("the {} `{new_name}` already exists", def.kind.as_str()));
        }
        // Every declaration of the name (a duplicate too), and every use.
        let mut edits: Vec<Edit> = index
            .defs_named(def.kind, &def.name)
            .filter(|&other| index.def(other).parent == def.parent)
            .map(|other| {
                let o = index.def(other);
                Edit { file: o.file, span: o.name_span, text: new_name.to_string() }
            })
            .collect();
        edits.extend(index.references_of(id).map(|r| Edit { file: r.file, span: r.span, text: new_name.to_string() }));
        edits.sort_by_key(|e| (e.file, e.span.start));
        edits.dedup();
        Ok(edits)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::analysis;

    const A: &str = "event PaymentReceived {\n    payment_id: string\n}\n\nconnection ledger {\n    url: \"https://x.example\"\n}\n\naction record(id: string) {\n    via: ledger\n}\n";
    const B: &str = "subscriber s {\n    on: PaymentReceived\n    run: record(event.payment_id)\n}\n\ntest \"t\" {\n    fake ledger: [ok]\n    emit PaymentReceived { payment_id: \"p\" }\n    wait 1s\n    expect s { state: succeeded }\n}\n";

    fn at(text: &str, needle: &str) -> u32 {
        text.find(needle).unwrap() as u32 + 1
    }

    #[test]
    fn definition_and_references_across_files() {
        let (a, _, _) = analysis(&[("a.jadpo", A), ("b.jadpo", B)]);
        let (file, span) = a.definition(1, at(B, "PaymentReceived")).unwrap();
        assert_eq!((file, &A[span.range()]), (0, "PaymentReceived"));
        let refs = a.references(0, at(A, "payment_id"), true);
        let texts: Vec<(usize, &str)> =
            refs.iter().map(|&(f, s)| (f, if f == 0 { &A[s.range()] } else { &B[s.range()] })).collect();
        assert_eq!(texts, vec![(0, "payment_id"), (1, "payment_id"), (1, "payment_id")]);
    }

    #[test]
    fn rename_a_field_and_refuse_bad_names() {
        let (a, _, _) = analysis(&[("a.jadpo", A), ("b.jadpo", B)]);
        let edits = a.rename(1, at(B, "event.payment_id") + 6, "pid").unwrap();
        assert_eq!(edits.len(), 3);
        assert!(edits.iter().all(|e| e.text == "pid"));
        assert!(a.rename(0, at(A, "ledger"), "record").is_ok(), "an action's name does not clash with a connection's");
        let (a, _, _) = analysis(&[
            ("a.jadpo", &format!("{A}connection other {{ url: \"https://y.example\" }}\n")),
            ("b.jadpo", B),
        ]);
        assert!(a.rename(0, at(A, "ledger"), "other").unwrap_err().contains("already exists"));
        assert!(a.rename(0, at(A, "ledger"), "9x").unwrap_err().contains("is not a name"));
        assert!(a.rename(0, at(A, "ledger"), "event").unwrap_err().contains("is not a name"));
    }

    #[test]
    fn the_outline_lists_declarations_with_their_fields() {
        let (a, _, _) = analysis(&[("a.jadpo", A), ("b.jadpo", B)]);
        let outline = a.document_symbols(0);
        let names: Vec<&str> = outline.iter().map(|s| s.name.as_ref()).collect();
        assert_eq!(names, vec!["PaymentReceived", "ledger", "record"]);
        assert_eq!(outline[0].children[0].name, "payment_id");
        assert_eq!(a.workspace_symbols("pay").len(), 2);
    }
}
