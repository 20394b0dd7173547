//! `jadpoc explain [CODE]`: a diagnostic code's documentation, or the list of every
//! code with its summary.

use jadpo_check::Code;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ExplainArgs {
    /// A code such as `subscriber.retry_invalid`; every code is listed when none is
    /// given.
    code: Option<String>,
}

pub fn run(args: ExplainArgs) -> ExitCode {
    let Some(name) = args.code else {
        crate::print_stdout(&list());
        return ExitCode::SUCCESS;
    };
    match Code::parse(&name) {
        Some(code) => {
            crate::print_stdout(&format!(
                "# {} ({})\n\n{}\n\n{}",
                code,
                code.severity().as_str(),
                code.summary(),
                code.doc()
            ));
            ExitCode::SUCCESS
        }
        None => {
            eprintln!("jadpoc: `{name}` is not a diagnostic code{}", hint(&name));
            ExitCode::from(2)
        }
    }
}

/// Every code, one a line: its name, severity and summary.
fn list() -> String {
    let width = Code::ALL.iter().map(|c| c.as_str().len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in Code::ALL {
        out.push_str(&format!("{:width$}  {:7}  {}\n", c.as_str(), c.severity().as_str(), c.summary()));
    }
    out
}

/// What the user may have meant: the codes whose name after the dot is the word
/// given (`retry_invalid`), or else the closest code by spelling.
fn hint(name: &str) -> String {
    let by_suffix: Vec<&str> =
        Code::ALL.iter().map(|c| c.as_str()).filter(|c| c.split_once('.').is_some_and(|(_, s)| s == name)).collect();
    match by_suffix.as_slice() {
        [] => jadpo_check::suggest::closest(name, Code::ALL.iter().map(|c| c.as_str()))
            .map(|c| format!("; did you mean `{c}`?"))
            .unwrap_or_else(|| "; `jadpoc explain` lists every code".to_string()),
        [one] => format!("; did you mean `{one}`?"),
        many => {
            let all: Vec<String> = many.iter().map(|c| format!("`{c}`")).collect();
            format!("; did you mean one of {}?", all.join(", "))
        }
    }
}
