//! `jadpoc emit`: store an event and its deliveries (one transaction), or many
//! from NDJSON in batches. Works while a `jadpoc run` holds the store.

use super::run::{DEFAULT_DB, open_store};
use jadpo_check::program::Program;
use jadpo_runtime::clock::{Clock, SystemClock};
use jadpo_runtime::payload::{PayloadError, new_event};
use jadpo_runtime::store::NewEvent;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Events per transaction for `--ndjson`.
const NDJSON_BATCH: usize = 2_000;

#[derive(clap::Args)]
pub struct EmitArgs {
    /// The program's files or folders, the event's name, and its JSON payload
    /// (`{}` when left out; none with `--ndjson`).
    #[arg(value_name = "FILE... EVENT [JSON]", required = true, num_args = 1..)]
    args: Vec<String>,
    /// Read one JSON payload a line from this file, or `-` for stdin.
    #[arg(long, value_name = "PATH|-")]
    ndjson: Option<String>,
    /// The store (created with its folder if missing).
    #[arg(long, value_name = "PATH", default_value = DEFAULT_DB)]
    db: PathBuf,
}

/// Whether a word is an event's name rather than a JSON payload.
fn is_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_')
}

pub fn run(args: EmitArgs) -> ExitCode {
    let mut words = args.args.clone();
    let json = if args.ndjson.is_none() && words.last().is_some_and(|w| !is_name(w)) { words.pop() } else { None };
    let Some(event) = words.pop().filter(|w| is_name(w)) else {
        eprintln!("jadpoc: name the event to emit: `jadpoc emit FILE... EVENT 'JSON'`");
        return ExitCode::from(2);
    };
    let files: Vec<PathBuf> = words.into_iter().map(PathBuf::from).collect();
    let program = match crate::load::program_for_run(&files) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if program.event(&event).is_none() {
        eprintln!("jadpoc: {}", PayloadError::UnknownEvent(event));
        return ExitCode::from(1);
    }
    match &args.ndjson {
        None => emit_one(&program, &event, json.as_deref().unwrap_or("{}"), &args),
        Some(source) => emit_ndjson(&program, &event, source, &args),
    }
}

fn emit_one(program: &Program, event: &str, json: &str, args: &EmitArgs) -> ExitCode {
    let new = match new_event(program, event, json) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("jadpoc: refused: {e}");
            return ExitCode::from(1);
        }
    };
    let store = match open_store(&args.db, true) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.emit(&[new], SystemClock.now_ms()) {
        Ok(ids) => {
            let out: String = ids.iter().map(|id| format!("{id}\n")).collect();
            crate::print_stdout(&out);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("jadpoc: {e}");
            ExitCode::from(2)
        }
    }
}

fn emit_ndjson(program: &Program, event: &str, source: &str, args: &EmitArgs) -> ExitCode {
    let reader: Box<dyn BufRead> = if source == "-" {
        Box::new(BufReader::new(std::io::stdin()))
    } else {
        match std::fs::File::open(source) {
            Ok(f) => Box::new(BufReader::with_capacity(1 << 20, f)),
            Err(e) => {
                eprintln!("jadpoc: cannot read `{source}`: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let store = match open_store(&args.db, true) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let clock = SystemClock;
    let mut batch: Vec<NewEvent> = Vec::with_capacity(NDJSON_BATCH);
    let (mut stored, mut refused) = (0u64, 0u64);
    let stderr = std::io::stderr();
    let flush = |batch: &mut Vec<NewEvent>, stored: &mut u64| -> Result<(), ExitCode> {
        if batch.is_empty() {
            return Ok(());
        }
        match store.emit(batch, clock.now_ms()) {
            Ok(ids) => {
                *stored += ids.len() as u64;
                batch.clear();
                Ok(())
            }
            Err(e) => {
                eprintln!("jadpoc: {e} ({stored} events were stored before it)");
                Err(ExitCode::from(2))
            }
        }
    };
    for (i, line) in reader.lines().enumerate() {
        let number = i + 1;
        let line = match line {
            Ok(l) => l,
            Err(e) => {
                eprintln!("jadpoc: cannot read line {number} of `{source}`: {e}");
                if let Err(code) = flush(&mut batch, &mut stored) {
                    return code;
                }
                return ExitCode::from(2);
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match new_event(program, event, &line) {
            Ok(e) => batch.push(e),
            Err(e) => {
                refused += 1;
                let _ = writeln!(stderr.lock(), "jadpoc: line {number}: refused: {e}");
            }
        }
        if batch.len() >= NDJSON_BATCH
            && let Err(code) = flush(&mut batch, &mut stored)
        {
            return code;
        }
    }
    if let Err(code) = flush(&mut batch, &mut stored) {
        return code;
    }
    eprintln!(
        "jadpoc: emitted {stored} `{event}` event{}{}",
        if stored == 1 { "" } else { "s" },
        if refused > 0 {
            format!(", refused {refused} line{}", if refused == 1 { "" } else { "s" })
        } else {
            String::new()
        }
    );
    if refused > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
