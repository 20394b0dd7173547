//! `jadpoc plan`: when each attempt of each subscriber's budget starts, counted from
//! its event, with no Retry-After and no breaker.

use crate::args::{Format, FormatArg, ProgramPaths};
use jadpo_check::report::{subscriber_plan, subscriber_plan_text};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct PlanArgs {
    #[command(flatten)]
    program: ProgramPaths,
    /// Only this subscriber.
    #[arg(long, value_name = "NAME")]
    subscriber: Option<String>,
    #[command(flatten)]
    format: FormatArg,
}

pub fn run(args: PlanArgs) -> ExitCode {
    let program = match crate::load::program_for_run(&args.program.paths) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let chosen = match jadpo_check::report::planned_subscribers(&program, args.subscriber.as_deref()) {
        Ok(c) => c,
        Err(m) => {
            eprintln!("jadpoc: {m}");
            return ExitCode::from(2);
        }
    };
    let out = match args.format.format {
        Format::Text => chosen.iter().map(|&i| subscriber_plan_text(&program, i)).collect::<Vec<_>>().join("\n"),
        Format::Json => {
            let plans: Vec<_> = chosen.iter().filter_map(|&i| subscriber_plan(&program, i)).collect();
            serde_json::to_string(&plans).unwrap_or_default() + "\n"
        }
    };
    crate::print_stdout(&out);
    ExitCode::SUCCESS
}
