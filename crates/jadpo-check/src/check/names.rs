//! Names: the tables that resolve a name to its declaration, the symbol index they
//! fill, and the warnings for declarations nothing uses.

use super::{BUILTIN_FILE, Cx};
use crate::diagnostic::Diagnostic;
use crate::index::{Def, DefId, SymbolKind};
use crate::program::Type;
use crate::registry::Code;
use crate::suggest::did_you_mean;
use jadpo_syntax::ast::{Body, Decl, DeclKind, Name, Span, ValueKind};
use std::hash::BuildHasher;
use std::sync::Arc;

/// Declarations of one kind share a namespace: (kind, name) to the first declaration
/// of that name, by index in the checker's list. The table holds the index alone
/// and reads the kind and name from the declaration: a large program's table is a
/// sixth the size of one holding the key beside it, and a check makes it anew.
#[derive(Clone, Default)]
pub(super) struct NameTable(hashbrown::HashTable<u32>);

fn key_hash(kind: DeclKind, name: &str) -> u64 {
    rustc_hash::FxBuildHasher.hash_one((kind, name))
}

/// The key of declaration `i` of `decls`: its kind and name.
fn key<'a>(decls: &[(usize, &Decl<'a>)], i: u32) -> (DeclKind, &'a str) {
    let d = decls[i as usize].1;
    (d.kind, d.name.text)
}

impl NameTable {
    pub(super) fn with_capacity(n: usize) -> NameTable {
        NameTable(hashbrown::HashTable::with_capacity(n))
    }

    /// The declaration of `decls` that `(kind, name)` names.
    fn get(&self, decls: &[(usize, &Decl<'_>)], kind: DeclKind, name: &str) -> Option<usize> {
        self.0.find(key_hash(kind, name), |&i| key(decls, i) == (kind, name)).map(|&i| i as usize)
    }

    /// Makes `(kind, name)` of declaration `index` of `decls` name it, in place of
    /// any declaration it named.
    fn set(&mut self, decls: &[(usize, &Decl<'_>)], index: usize) {
        let (kind, name) = key(decls, index as u32);
        match self.0.find_mut(key_hash(kind, name), |&i| key(decls, i) == (kind, name)) {
            Some(slot) => *slot = index as u32,
            None => self.insert(decls, index),
        }
    }

    /// Adds declaration `index` of `decls`, whose `(kind, name)` names none yet.
    fn insert(&mut self, decls: &[(usize, &Decl<'_>)], index: usize) {
        let (kind, name) = key(decls, index as u32);
        let rehash = |&i: &u32| {
            let (kind, name) = key(decls, i);
            key_hash(kind, name)
        };
        self.0.insert_unique(key_hash(kind, name), index as u32, rehash);
    }
}

impl<'a> Cx<'_, 'a> {
    pub(super) fn collect_names(&mut self) {
        for (index, &(file, decl)) in self.decls.iter().enumerate() {
            if decl.name.text.is_empty() && matches!(decl.body, Body::Broken) {
                continue;
            }
            let first = self.lookup(decl.kind, decl.name.text);
            if file == BUILTIN_FILE {
                Arc::make_mut(&mut self.names).set(self.decls, index);
                continue;
            }
            if self.indexing() {
                let name = match &decl.body {
                    Body::Steps { title, .. } => self.index.intern(title),
                    _ => self.index.intern(decl.name.text),
                };
                self.decl_def[index] = Some(self.index.define(Def {
                    name,
                    kind: SymbolKind::of_decl(decl.kind),
                    file,
                    name_span: decl.name.span,
                    span: decl.span,
                    parent: None,
                    ty: None,
                    primary: first.is_none(),
                }));
            }
            if let Some(first) = first {
                let (ffile, fdecl) = self.decls[first];
                let what = if decl.kind == DeclKind::Test { "test" } else { decl.kind.keyword() };
                let d = Diagnostic::new(
                    Code::NameDuplicate,
                    file,
                    decl.name.span,
                    format!("the {what} `{}` is declared twice", decl.name.text),
                )
                .label(ffile, fdecl.name.span, "first declared here")
                .help(format!("rename one of them; {} names are shared by every file of the program", what));
                self.push(d);
            } else {
                Arc::make_mut(&mut self.names).insert(self.decls, index);
            }
        }
    }

    /// The `was:` of every subscriber and connection: a name or a list of names the
    /// declaration had before. Each old name must be free now (no declaration of
    /// the kind has it) and claimed once, so that a program's next version maps
    /// every old declaration to at most one new one.
    pub(super) fn was_names(&mut self) {
        self.was.clear();
        // (declaration, name, span) of every name claimed so far.
        let mut claimed: Vec<(usize, &'a str, Span)> = Vec::new();
        for (index, &(file, decl)) in self.decls.iter().enumerate() {
            if file == BUILTIN_FILE || !matches!(decl.kind, DeclKind::Subscriber | DeclKind::Connection) {
                continue;
            }
            let Body::Block { block, .. } = &decl.body else { continue };
            // A second `was:` is reported as a duplicate key; the first one counts.
            let Some(entry) = block.entries.iter().find(|e| e.key.text == "was" && !e.key.quoted) else { continue };
            let names: Vec<Name<'a>> = match &entry.value.kind {
                ValueKind::Ident { name, optional: false } => vec![Name { text: name, span: entry.value.span }],
                ValueKind::List(items) => {
                    let mut names = Vec::with_capacity(items.len());
                    for item in items {
                        match item.value.kind {
                            ValueKind::Ident { name, optional: false } if item.times.is_none() => {
                                names.push(Name { text: name, span: item.value.span })
                            }
                            _ => {
                                self.invalid_value(
                                    file,
                                    &item.value,
                                    format!("`was:` lists names, found {}", item.value.kind.describe()),
                                    "write `was: [old_name, older_name]`",
                                );
                            }
                        }
                    }
                    names
                }
                other => {
                    self.invalid_value(
                        file,
                        &entry.value,
                        format!("`was:` takes a name or a list of names, found {}", other.describe()),
                        "write `was: old_name`, the name it had before",
                    );
                    continue;
                }
            };
            let what = decl.kind.keyword();
            for name in names {
                if name.text == decl.name.text {
                    self.push(
                        Diagnostic::new(
                            Code::NameWasItself,
                            file,
                            name.span,
                            format!("`was:` names the {what} `{}` itself", name.text),
                        )
                        .help(format!("remove `{}`; `was:` lists the names the {what} had before", name.text)),
                    );
                    continue;
                }
                if let Some(now) = self.lookup(decl.kind, name.text) {
                    let (nfile, ndecl) = self.decls[now];
                    self.push(
                        Diagnostic::new(
                            Code::NameWasCollides,
                            file,
                            name.span,
                            format!("`was:` names the {what} `{}`, which the program still declares", name.text),
                        )
                        .label(nfile, ndecl.name.span, "declared here")
                        .help(format!(
                            "a `was:` name is one the program no longer declares; remove `{}` from `was:`, or rename that {what}",
                            name.text
                        )),
                    );
                    continue;
                }
                if let Some(&(first, _, first_span)) =
                    claimed.iter().find(|(i, n, _)| *n == name.text && self.decls[*i].1.kind == decl.kind)
                {
                    let (ffile, fdecl) = self.decls[first];
                    self.push(
                        Diagnostic::new(
                            Code::NameWasCollides,
                            file,
                            name.span,
                            format!(
                                "the old {what} `{}` is claimed by `{}` and by `{}`",
                                name.text, fdecl.name.text, decl.name.text
                            ),
                        )
                        .label(ffile, first_span, "first claimed here")
                        .help("an old declaration becomes one new one: keep the name in one `was:`"),
                    );
                    continue;
                }
                claimed.push((index, name.text, name.span));
                if self.lower == super::Lower::Yes {
                    self.was.push((index as u32, name.text));
                }
            }
        }
    }

    pub(super) fn lookup(&self, kind: DeclKind, name: &str) -> Option<usize> {
        self.names.get(self.decls, kind, name)
    }

    pub(super) fn candidates(&self, kind: DeclKind) -> impl Iterator<Item = &'a str> + '_ {
        self.decls.iter().filter(move |(_, d)| d.kind == kind && !d.name.text.is_empty()).map(|(_, d)| d.name.text)
    }

    /// Resolves a reference to a declaration, reporting it when unknown.
    pub(super) fn resolve(&mut self, file: usize, kind: DeclKind, name: Name<'a>, code: Code) -> Option<usize> {
        let found = self.lookup(kind, name.text);
        if self.indexing() && found.is_none_or(|i| self.decls[i].0 != BUILTIN_FILE) {
            let target = found.and_then(|i| self.decl_def[i]);
            self.index.refer(SymbolKind::of_decl(kind), file, name.span, name.text, target);
        }
        match found {
            Some(i) => {
                self.mark_used(i);
                Some(i)
            }
            None => {
                let help = did_you_mean(name.text, self.candidates(kind));
                let d =
                    Diagnostic::new(code, file, name.span, format!("no {} is named `{}`", kind.keyword(), name.text))
                        .help_opt(help);
                self.push(d);
                None
            }
        }
    }

    /// Records a field of an event or a parameter of an action (`owner`).
    pub(super) fn define_member(&mut self, owner: usize, name: Name<'a>, span: Span, ty: Option<Type>, primary: bool) {
        let (file, decl) = self.decls[owner];
        if file == BUILTIN_FILE || !self.indexing() {
            return;
        }
        let kind = if decl.kind == DeclKind::Action { SymbolKind::Param } else { SymbolKind::Field };
        let def = Def {
            name: self.index.intern(name.text),
            kind,
            file,
            name_span: name.span,
            span,
            parent: self.decl_def[owner],
            ty,
            primary,
        };
        let id = self.index.define(def).0;
        // An owner's members are defined one after another.
        let members = &mut self.member_defs[owner];
        *members = if members.0 == members.1 { (id, id + 1) } else { (members.0, id + 1) };
    }

    /// Records a use of a field of event `event` (`None` when the event is unknown).
    pub(super) fn refer_field(&mut self, file: usize, event: Option<usize>, name: &str, span: Span) {
        if event.is_some_and(|e| self.decls[e].0 == BUILTIN_FILE) || !self.indexing() {
            return;
        }
        let target = event.and_then(|e| {
            let (from, to) = self.member_defs[e];
            (from..to).map(DefId).find(|&id| {
                let d = self.index.def(id);
                d.primary && *d.name == *name
            })
        });
        self.index.refer(SymbolKind::Field, file, span, name, target);
    }

    pub(super) fn unused(&mut self) {
        for index in 0..self.decls.len() {
            let (file, decl) = self.decls[index];
            if file == BUILTIN_FILE {
                continue;
            }
            let code = match decl.kind {
                DeclKind::Event => Code::EventUnused,
                DeclKind::Action => Code::ActionUnused,
                DeclKind::Connection => Code::ConnectionUnused,
                _ => continue,
            };
            // A duplicate is reported as such, not also as unused.
            let first = self.lookup(decl.kind, decl.name.text) == Some(index);
            if !self.used[index] && first {
                let by = match decl.kind {
                    DeclKind::Event => "no subscriber or test uses it",
                    DeclKind::Action => "no subscriber or schedule runs it",
                    _ => "no action calls through it",
                };
                let d = Diagnostic::new(
                    code,
                    file,
                    decl.name.span,
                    format!("the {} `{}` is never used: {by}", decl.kind.keyword(), decl.name.text),
                )
                .help("remove it, or use it");
                self.push(d);
            }
        }
    }
}
