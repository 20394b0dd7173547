//! Lowering: a program without errors, from what the checker resolved, to a
//! [`Program`]. Nothing here reads the syntax tree's values or resolves a name
//! again: every piece comes from what checking kept, and a piece that is missing
//! gives no program rather than a guess.

use super::{BUILTIN_FILE, Cx, Resolved};
use crate::budget::DEFAULT_RUN_TIMEOUT_MS;
use crate::diagnostic::{LineIndex, SourceFile};
use crate::program::{self as p, Program};
use jadpo_syntax::ast::DeclKind;

impl Cx<'_, '_> {
    /// The checked program; `None` only if checking failed to keep a piece of it.
    pub(super) fn program(&self, files: &[SourceFile]) -> Option<Program> {
        let mut prog = Program::default();
        // A declaration's index in its list of the program, by its index in `decls`.
        let mut index_of: Vec<Option<usize>> = vec![None; self.decls.len()];
        let lower_fields = |i: usize| -> Option<Vec<p::Field>> {
            let fields = self.types[i].as_ref()?;
            fields
                .iter()
                .map(|(n, t)| {
                    // Only events' fields have defaults (kept by their declaration's index).
                    let default = self.defaults.iter().find(|(d, f, _)| *d == i && f == n).map(|(_, _, l)| l.clone());
                    Some(p::Field { name: n.to_string(), ty: (*t)?, default })
                })
                .collect()
        };
        // Declarations in order of kind, so indices are stable within each list.
        for (i, &(_, decl)) in self.decls.iter().enumerate() {
            match (decl.kind, &self.resolved[i]) {
                // A built-in event is part of the program only when something uses it.
                (DeclKind::Event, _) if self.decls[i].0 == BUILTIN_FILE && !self.used[i] => {}
                (DeclKind::Event, _) => {
                    index_of[i] = Some(prog.events.len());
                    prog.events.push(p::Event { name: decl.name.text.to_string(), fields: lower_fields(i)? });
                }
                (DeclKind::Connection, Resolved::Connection(c)) => {
                    index_of[i] = Some(prog.connections.len());
                    prog.connections.push(c.clone());
                }
                (DeclKind::Connection, _) => return None,
                _ => {}
            }
        }
        for (i, &(_, decl)) in self.decls.iter().enumerate() {
            if decl.kind != DeclKind::Action {
                continue;
            }
            let Resolved::Action { via, path, idempotent } = &self.resolved[i] else { return None };
            index_of[i] = Some(prog.actions.len());
            prog.actions.push(p::Action {
                name: decl.name.text.to_string(),
                params: lower_fields(i)?,
                connection: index_of[*via]?,
                path: path.clone(),
                idempotent: *idempotent,
            });
        }
        let call = |call: &p::Call| -> Option<p::Call> {
            Some(p::Call { action: index_of[call.action]?, args: call.args.clone() })
        };
        let mut subscribers = Vec::new();
        for (i, &(_, decl)) in self.decls.iter().enumerate() {
            match (decl.kind, &self.resolved[i]) {
                (
                    DeclKind::Subscriber,
                    Resolved::Subscriber { event, call: c, budget, timeout_ms, filter, order_by },
                ) => {
                    subscribers.push((i, prog.subscribers.len()));
                    prog.subscribers.push(p::Subscriber {
                        name: decl.name.text.to_string(),
                        event: index_of[*event]?,
                        call: call(c)?,
                        budget: *budget,
                        timeout_ms: *timeout_ms,
                        filter: filter.clone(),
                        order_by: order_by.clone(),
                        was: Vec::new(),
                    });
                }
                (DeclKind::Schedule, Resolved::Schedule { every_ms, call: c }) => prog.schedules.push(p::Schedule {
                    name: decl.name.text.to_string(),
                    every_ms: *every_ms,
                    call: call(c)?,
                    timeout_ms: DEFAULT_RUN_TIMEOUT_MS,
                }),
                (DeclKind::Subscriber | DeclKind::Schedule, _) => return None,
                _ => {}
            }
        }
        for (i, s) in subscribers {
            index_of[i] = Some(s);
        }
        for &(i, name) in &self.was {
            let at = index_of[i as usize]?;
            match self.decls[i as usize].1.kind {
                DeclKind::Subscriber => prog.subscribers.get_mut(at)?.was.push(name.to_string()),
                DeclKind::Connection => prog.connections.get_mut(at)?.was.push(name.to_string()),
                _ => return None,
            }
        }
        prog.tests = self.lower_tests(files, &index_of)?;
        Some(prog)
    }

    /// The checked tests, their declarations mapped to the program's indices.
    fn lower_tests(&self, files: &[SourceFile], index_of: &[Option<usize>]) -> Option<Vec<p::Test>> {
        let map = |i: &usize| index_of[*i];
        self.tests
            .iter()
            .map(|t| {
                let steps = t
                    .steps
                    .iter()
                    .map(|s| {
                        Some(match s {
                            p::Step::Fake { connection, answers } => {
                                p::Step::Fake { connection: map(connection)?, answers: answers.clone() }
                            }
                            p::Step::Emit { event, fields } => {
                                p::Step::Emit { event: map(event)?, fields: fields.clone() }
                            }
                            p::Step::Wait { ms } => p::Step::Wait { ms: *ms },
                            p::Step::Retry { subscriber } => p::Step::Retry { subscriber: map(subscriber)? },
                            p::Step::Expect { subscriber, expect } => {
                                p::Step::Expect { subscriber: map(subscriber)?, expect: expect.clone() }
                            }
                            p::Step::ExpectBreaker { connection, expect } => {
                                p::Step::ExpectBreaker { connection: map(connection)?, expect: expect.clone() }
                            }
                        })
                    })
                    .collect::<Option<Vec<_>>>()?;
                Some(p::Test {
                    name: t.name.clone(),
                    file: files.get(t.file)?.name.clone(),
                    line: LineIndex::new(&files.get(t.file)?.text).position(t.offset).line,
                    steps,
                })
            })
            .collect()
    }
}
