//! The jadpo checker: names, types and budgets across all files of one program,
//! the registry of diagnostic codes, and the checked [`Program`].

pub mod budget;
pub mod builtin;
mod check;
pub mod diagnostic;
pub mod diff;
mod duration;
pub mod index;
pub mod program;
pub mod registry;
pub mod report;
pub mod suggest;
mod words;

pub use check::{Checked, Lower, Replacement, check, check_again, check_parsed};
pub use diagnostic::{Diagnostic, Label, LineIndex, Position, SourceFile};
pub use duration::{format_duration, format_duration_spaced};
pub use index::{Def, DefId, Ref, SymbolIndex, SymbolKind};
/// Durations as the language writes them, for the runtime's `--fake` answers.
pub use jadpo_syntax::lexer::parse_duration;
pub use program::Program;
pub use registry::{Code, Severity};
pub use words::{noun, plural, thousands};
