//! The program's symbols: every declaration and every reference to one, with their
//! places, as the checker resolved them.
//!
//! The checker fills the index while it resolves names, so an editor's go to
//! definition, find references and rename read the very resolution that
//! `jadpoc check` reports on; nothing is resolved a second way. Spans are byte
//! offsets into their file, as in diagnostics, and files are indices into the list
//! given to [`check`](crate::check).

use crate::program::Type;
use jadpo_syntax::ast::{DeclKind, Span};
use rustc_hash::FxHashSet;
use std::sync::Arc;

/// What a symbol is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SymbolKind {
    Event,
    /// A field of an event; its [`Def::parent`] is the event.
    Field,
    Connection,
    Action,
    /// A parameter of an action; its [`Def::parent`] is the action.
    Param,
    Subscriber,
    Schedule,
    Test,
}

impl SymbolKind {
    /// The kind of a top-level declaration.
    pub fn of_decl(kind: DeclKind) -> SymbolKind {
        match kind {
            DeclKind::Event => SymbolKind::Event,
            DeclKind::Connection => SymbolKind::Connection,
            DeclKind::Action => SymbolKind::Action,
            DeclKind::Subscriber => SymbolKind::Subscriber,
            DeclKind::Schedule => SymbolKind::Schedule,
            DeclKind::Test => SymbolKind::Test,
        }
    }

    /// The word for this kind in messages: `event`, `field`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            SymbolKind::Event => "event",
            SymbolKind::Field => "field",
            SymbolKind::Connection => "connection",
            SymbolKind::Action => "action",
            SymbolKind::Param => "parameter",
            SymbolKind::Subscriber => "subscriber",
            SymbolKind::Schedule => "schedule",
            SymbolKind::Test => "test",
        }
    }
}

/// A definition's place in [`SymbolIndex::defs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DefId(pub u32);

/// One declaration of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Def {
    /// Shared with every other definition and reference of the same name.
    pub name: Arc<str>,
    pub kind: SymbolKind,
    /// Index of the file in the program's list.
    pub file: usize,
    /// The name as written (a test's: its string).
    pub name_span: Span,
    /// The whole declaration: `event E { ... }`, or a field's `name: type`.
    pub span: Span,
    /// The event of a field, the action of a parameter.
    pub parent: Option<DefId>,
    /// A field's or parameter's type, when it is a valid one.
    pub ty: Option<Type>,
    /// False for a second declaration of a name already declared: references
    /// resolve to the first one.
    pub primary: bool,
}

/// One use of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    /// What kind of symbol the place names.
    pub kind: SymbolKind,
    /// Index of the file in the program's list.
    pub file: usize,
    /// The name as written.
    pub span: Span,
    /// Shared with every other definition and reference of the same name.
    pub name: Arc<str>,
    /// The definition it resolves to; `None` when the checker found none (and
    /// reported it, unless what it hangs on was itself unknown).
    pub target: Option<DefId>,
}

/// Every definition and reference of one program.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SymbolIndex {
    defs: Vec<Def>,
    refs: Vec<Ref>,
    /// Definitions in order of (file, name start), for lookups by place.
    defs_by_place: Vec<DefId>,
    /// Each name once while the checker fills the index: a program names a few
    /// thousand things hundreds of thousands of times, so every definition and
    /// reference shares its name's one copy. Emptied by [`SymbolIndex::finish`].
    names: FxHashSet<Arc<str>>,
}

/// Whether `offset` is on `span`: its end counts, as a cursor just after a name is
/// still on it.
fn touches(span: Span, offset: u32) -> bool {
    span.start <= offset && offset <= span.end
}

impl SymbolIndex {
    /// An empty index with room for `defs` definitions and `names` names.
    pub(crate) fn with_room(defs: usize, names: usize) -> SymbolIndex {
        SymbolIndex::default().emptied(defs, names)
    }

    /// This index emptied, keeping the room of its lists, with room for `defs`
    /// definitions and `names` names: a check after an edit fills the room of the
    /// last one's, rather than freeing it and taking as much again.
    pub(crate) fn emptied(self, defs: usize, names: usize) -> SymbolIndex {
        let SymbolIndex { defs: mut list, refs: _, defs_by_place: mut by_place, names: _ } = self;
        list.clear();
        // The room the last check's list had when it was made, as it was shrunk to
        // its length at the end: the allocator grows a block back within its own
        // size without moving it.
        list.reserve_exact(defs);
        by_place.clear();
        SymbolIndex {
            defs: list,
            refs: Vec::new(),
            defs_by_place: by_place,
            names: FxHashSet::with_capacity_and_hasher(names, Default::default()),
        }
    }

    /// The one shared copy of `name`.
    pub(crate) fn intern(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.names.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = Arc::from(name);
        self.names.insert(shared.clone());
        shared
    }

    /// Adds a definition; the checker calls this.
    pub(crate) fn define(&mut self, def: Def) -> DefId {
        let id = DefId(self.defs.len() as u32);
        self.defs.push(def);
        id
    }

    /// Adds a reference; the checker calls this.
    pub(crate) fn refer(&mut self, kind: SymbolKind, file: usize, span: Span, name: &str, target: Option<DefId>) {
        let name = self.intern(name);
        self.refs.push(Ref { kind, file, span, name, target });
    }

    /// Takes the references out, for a check that reuses some of them.
    pub(crate) fn take_refs(&mut self) -> Vec<Ref> {
        std::mem::take(&mut self.refs)
    }

    /// Adds references an earlier check found, in their list as it comes (its
    /// room reused rather than copied into a new one).
    pub(crate) fn add_refs(&mut self, mut earlier: Vec<Ref>) {
        earlier.append(&mut self.refs);
        self.refs = earlier;
    }

    /// Sorts what place lookups search; the checker calls this once at the end.
    /// Returns how many names were interned.
    pub(crate) fn finish(&mut self) -> usize {
        let names = self.names.len();
        self.names = FxHashSet::default();
        // Kept as long as its analysis is (the language server holds one per program).
        self.refs.shrink_to_fit();
        self.defs.shrink_to_fit();
        // No two references share a place, so an unstable sort orders them fully.
        self.refs.sort_unstable_by_key(|r| (r.file, r.span.start, r.span.end));
        // Definitions come in two runs already in order of place (the declarations,
        // then each event's fields and each action's parameters), which a stable
        // sort merges in one pass, in the room of the last check's list. Ties
        // (none in a program) keep the checker's order.
        let defs = &self.defs;
        let by_place = &mut self.defs_by_place;
        by_place.clear();
        by_place.reserve_exact(defs.len());
        by_place.extend((0..defs.len() as u32).map(DefId));
        by_place.sort_by_key(|id| {
            let d = &defs[id.0 as usize];
            (d.file, d.name_span.start)
        });
        names
    }

    /// Every definition, in the checker's order (declarations in file order, then
    /// each one's fields or parameters).
    pub fn defs(&self) -> &[Def] {
        &self.defs
    }

    /// Every reference, in order of file and place.
    pub fn refs(&self) -> &[Ref] {
        &self.refs
    }

    /// The definition with this id.
    pub fn def(&self, id: DefId) -> &Def {
        &self.defs[id.0 as usize]
    }

    /// Every definition with its id.
    pub fn iter_defs(&self) -> impl Iterator<Item = (DefId, &Def)> {
        self.defs.iter().enumerate().map(|(i, d)| (DefId(i as u32), d))
    }

    /// The definition whose name is at `offset` in `file`.
    pub fn def_at(&self, file: usize, offset: u32) -> Option<DefId> {
        let key = |id: &DefId| {
            let d = self.def(*id);
            (d.file, d.name_span.start)
        };
        // The last definition starting at or before the offset; names never overlap.
        let end = self.defs_by_place.partition_point(|id| key(id) <= (file, offset));
        self.defs_by_place[..end]
            .iter()
            .rev()
            .take_while(|id| self.def(**id).file == file)
            .find(|id| touches(self.def(**id).name_span, offset))
            .copied()
    }

    /// The reference at `offset` in `file`.
    pub fn ref_at(&self, file: usize, offset: u32) -> Option<&Ref> {
        let end = self.refs.partition_point(|r| (r.file, r.span.start) <= (file, offset));
        self.refs[..end].iter().rev().take_while(|r| r.file == file).find(|r| touches(r.span, offset))
    }

    /// The symbol at `offset`: the definition named there, or the one a reference
    /// there resolves to.
    pub fn symbol_at(&self, file: usize, offset: u32) -> Option<DefId> {
        self.def_at(file, offset).or_else(|| self.ref_at(file, offset).and_then(|r| r.target))
    }

    /// Every reference that resolves to `def`, in order of file and place.
    pub fn references_of(&self, def: DefId) -> impl Iterator<Item = &Ref> {
        self.refs.iter().filter(move |r| r.target == Some(def))
    }

    /// Every definition of `kind` named `name` (more than one when it is declared
    /// twice; fields and parameters of different parents share names).
    pub fn defs_named<'s>(&'s self, kind: SymbolKind, name: &'s str) -> impl Iterator<Item = DefId> + 's {
        self.iter_defs().filter(move |(_, d)| d.kind == kind && *d.name == *name).map(|(id, _)| id)
    }

    /// The fields of an event or the parameters of an action, in order.
    pub fn children(&self, parent: DefId) -> impl Iterator<Item = DefId> + '_ {
        self.iter_defs().filter(move |(_, d)| d.parent == Some(parent)).map(|(id, _)| id)
    }

    /// The definitions in one file, in order of place (for an outline).
    pub fn defs_in(&self, file: usize) -> impl Iterator<Item = DefId> + '_ {
        self.defs_by_place.iter().copied().filter(move |id| self.def(*id).file == file)
    }
}
