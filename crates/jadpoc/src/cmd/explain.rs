//! `jadpoc explain CODE`: a diagnostic code's documentation.

use jadpo_check::Code;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ExplainArgs {
    /// A code such as `subscriber.retry_invalid`.
    code: String,
}

pub fn run(args: ExplainArgs) -> ExitCode {
    match Code::parse(&args.code) {
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
            let names = Code::ALL.iter().map(|c| c.as_str());
            let hint = jadpo_check::suggest::closest(&args.code, names)
                .map(|c| format!("; did you mean `{c}`?"))
                .unwrap_or_default();
            eprintln!("jadpoc: `{}` is not a diagnostic code{hint}", args.code);
            ExitCode::from(2)
        }
    }
}
