//! `jadpoc explain [CODE]`: what a code means, a diagnostic's of `jadpoc check` or a
//! runtime code's (an attempt's failure, a `--listen` refusal), or the list of every
//! code with its summary; `jadpoc diff`'s codes too.

use jadpo_check::Code;
use jadpo_check::diff::DiffCode;
use jadpo_core::codes::{self, RuntimeCode};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ExplainArgs {
    /// A code such as `subscriber.retry_invalid` or `transport.refused`; every code
    /// is listed when none is given.
    code: Option<String>,
}

pub fn run(args: ExplainArgs) -> ExitCode {
    let Some(name) = args.code else {
        crate::print_stdout(&list());
        return ExitCode::SUCCESS;
    };
    if let Some(code) = Code::parse(&name) {
        crate::print_stdout(&format!(
            "# {} ({})\n\n{}\n\n{}",
            code,
            code.severity().as_str(),
            code.summary(),
            code.doc()
        ));
        return ExitCode::SUCCESS;
    }
    if let Some(code) = DiffCode::parse(&name) {
        crate::print_stdout(&format!(
            "# {} ({}, `jadpoc diff`)\n\n{}\n\n{}\n",
            code,
            code.severity().as_str(),
            code.summary(),
            code.doc().trim_end()
        ));
        return ExitCode::SUCCESS;
    }
    if let Some(code) = codes::lookup(&name) {
        crate::print_stdout(&format!(
            "# {} ({})\n\n{}\n\n{}\n",
            code.as_str(),
            code.kind().describe().replace('`', ""),
            code.summary(),
            code.doc().trim_end()
        ));
        return ExitCode::SUCCESS;
    }
    eprintln!("jadpoc: `{name}` is not a code{}", hint(&name));
    ExitCode::from(2)
}

/// Every name a registry knows: the checker's, `jadpoc diff`'s, the runtime's.
fn all_names() -> impl Iterator<Item = &'static str> {
    Code::ALL
        .iter()
        .map(|c| c.as_str())
        .chain(DiffCode::ALL.iter().map(|c| c.as_str()))
        .chain(RuntimeCode::ALL.iter().map(|c| c.as_str()))
}

/// Every code, one a line: the checker's diagnostics with their severity, then the
/// runtime's codes with their kind.
fn list() -> String {
    let width = all_names().map(str::len).max().unwrap_or(0);
    let mut out = String::from("Diagnostics of `jadpoc check`:\n");
    for c in Code::ALL {
        out.push_str(&format!("  {:width$}  {:14}  {}\n", c.as_str(), c.severity().as_str(), c.summary()));
    }
    out.push_str("\nFindings of `jadpoc diff`: what a new program does to what the old one left:\n");
    for c in DiffCode::ALL {
        out.push_str(&format!("  {:width$}  {:14}  {}\n", c.as_str(), c.severity().as_str(), c.summary()));
    }
    out.push_str("\nRuntime codes: how an attempt failed, and why `--listen` refused an event:\n");
    for c in RuntimeCode::ALL {
        let kind = c.kind().describe().replace('`', "");
        out.push_str(&format!("  {:width$}  {:14}  {}\n", c.as_str(), kind, c.summary()));
    }
    out
}

/// What the user may have meant: the codes whose name after the dot is the word
/// given (`retry_invalid`), or else the closest code by spelling.
fn hint(name: &str) -> String {
    let by_suffix: Vec<&str> = all_names().filter(|c| c.split_once('.').is_some_and(|(_, s)| s == name)).collect();
    match by_suffix.as_slice() {
        [] => jadpo_check::suggest::closest(name, all_names())
            .map(|c| format!("; did you mean `{c}`?"))
            .unwrap_or_else(|| "; `jadpoc explain` lists every code".to_string()),
        [one] => format!("; did you mean `{one}`?"),
        many => {
            let all: Vec<String> = many.iter().map(|c| format!("`{c}`")).collect();
            format!("; did you mean one of {}?", all.join(", "))
        }
    }
}
