//! `jadpoc emit`: store an event and its deliveries (one transaction), or many
//! from NDJSON in batches. Works while a `jadpoc run` holds the store.

use crate::args::plural;
use crate::store::{DbArg, open_writer};
use jadpo_check::builtin::PREFIX;
use jadpo_check::program::Program;
use jadpo_core::payload::{PayloadError, new_event};
use jadpo_core::store::NewEvent;
use jadpo_core::version::ProgramVersion;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Events per transaction for `--ndjson`.
const NDJSON_BATCH: usize = 2_000;

#[derive(clap::Args)]
#[command(override_usage = "jadpoc emit [OPTIONS] [PATHS]... <EVENT> [JSON]")]
pub struct EmitArgs {
    /// The program's files and folders (`.` when none), the event's name, and its
    /// JSON payload, an object (`{}` when left out; none with `--ndjson`).
    #[arg(value_name = "PATHS", required = true, num_args = 1..)]
    args: Vec<String>,
    /// Read one JSON payload a line from this file, or `-` for stdin.
    #[arg(long, value_name = "PATH|-")]
    ndjson: Option<String>,
    #[command(flatten)]
    db: DbArg,
}

/// Whether a word can be an event's name: an identifier that is not a JSON word
/// (`true` and `false` are keywords of the language; `null` is taken as JSON).
fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !matches!(s, "true" | "false" | "null")
}

pub fn run(args: EmitArgs) -> ExitCode {
    let mut words = args.args.clone();
    // The event's name is one of the last two words; one of jadpo's own is the
    // runtime's to raise.
    if let Some(builtin) = words.iter().rev().take(2).find(|w| w.strip_prefix(PREFIX).is_some_and(is_name)) {
        eprintln!("jadpoc: refused: {}", PayloadError::BuiltinEvent(builtin.clone()));
        return ExitCode::from(1);
    }
    // The last word is the payload unless it is a name; with one word, it is the
    // event's name.
    let json = if words.len() > 1 && words.last().is_some_and(|w| !is_name(w)) { words.pop() } else { None };
    if json.is_some() && args.ndjson.is_some() {
        eprintln!("jadpoc: `--ndjson` reads the payloads: give the event's name and no JSON after it");
        return ExitCode::from(2);
    }
    let Some(event) = words.pop().filter(|w| is_name(w)) else {
        eprintln!("jadpoc: name the event to emit: `jadpoc emit [PATHS]... EVENT ['JSON']`");
        return ExitCode::from(2);
    };
    let files: Vec<PathBuf> = words.into_iter().map(PathBuf::from).collect();
    let (program, version) = match crate::load::load_for_run(&files) {
        Ok(loaded) => {
            let version = loaded.version();
            (loaded.program, version)
        }
        Err(code) => return code,
    };
    if program.event(&event).is_none() {
        eprintln!("jadpoc: {}", PayloadError::UnknownEvent(event));
        return ExitCode::from(1);
    }
    match &args.ndjson {
        None => emit_one(&program, &version, &event, json.as_deref().unwrap_or("{}"), &args),
        Some(source) => emit_ndjson(&program, &version, &event, source, &args),
    }
}

fn emit_one(program: &Program, version: &ProgramVersion, event: &str, json: &str, args: &EmitArgs) -> ExitCode {
    let new = match new_event(program, event, json) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("jadpoc: refused: {e}");
            return ExitCode::from(1);
        }
    };
    let store = match open_writer(&args.db, version) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.emit(&[new], crate::store::clock_for(&*store).now_ms()) {
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

/// What `--ndjson` did so far.
#[derive(Default)]
struct Counts {
    stored: u64,
    refused: u64,
}

impl Counts {
    /// `emitted N `E` events, refused M lines`, printed however the run ends, so
    /// that nobody re-sends what was stored.
    fn report(&self, event: &str) {
        let refused =
            if self.refused > 0 { format!(", refused {}", plural(self.refused, "line")) } else { String::new() };
        eprintln!("jadpoc: emitted {}{refused}", plural(self.stored, &format!("`{event}` event")));
    }
}

fn emit_ndjson(program: &Program, version: &ProgramVersion, event: &str, source: &str, args: &EmitArgs) -> ExitCode {
    let mut reader: Box<dyn BufRead> = if source == "-" {
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
    let store = match open_writer(&args.db, version) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let clock = crate::store::clock_for(&*store);
    let mut batch: Vec<NewEvent> = Vec::with_capacity(NDJSON_BATCH);
    let mut counts = Counts::default();
    let stderr = std::io::stderr();
    // The line of the first event in `batch`: where a failed commit's loss begins.
    let mut batch_from = 0usize;
    let flush = |batch: &mut Vec<NewEvent>, counts: &mut Counts, batch_from: usize| -> Result<(), ExitCode> {
        if batch.is_empty() {
            return Ok(());
        }
        match store.emit(batch, clock.now_ms()) {
            Ok(ids) => {
                counts.stored += ids.len() as u64;
                batch.clear();
                Ok(())
            }
            Err(e) => {
                eprintln!("jadpoc: {e}; the lines from line {batch_from} on were not stored");
                counts.report(event);
                Err(ExitCode::from(2))
            }
        }
    };
    let mut bytes = Vec::new();
    let mut number = 0usize;
    loop {
        bytes.clear();
        match reader.read_until(b'\n', &mut bytes) {
            Ok(0) => break,
            Ok(_) => number += 1,
            Err(e) => {
                eprintln!("jadpoc: cannot read line {} of `{source}`: {e}", number + 1);
                let code = flush(&mut batch, &mut counts, batch_from).err().unwrap_or(ExitCode::from(2));
                counts.report(event);
                return code;
            }
        }
        // A line that is not UTF-8 is refused like any other bad line: the lines
        // after it are still read.
        let line = match std::str::from_utf8(&bytes) {
            Ok(l) => l.trim_end_matches(['\n', '\r']),
            Err(e) => {
                counts.refused += 1;
                let column = String::from_utf8_lossy(&bytes[..e.valid_up_to()]).chars().count() + 1;
                let _ = writeln!(
                    stderr.lock(),
                    "jadpoc: line {number}: refused: the line is not UTF-8 text (invalid byte at column {column})"
                );
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match new_event(program, event, line) {
            Ok(e) => {
                if batch.is_empty() {
                    batch_from = number;
                }
                batch.push(e);
            }
            Err(e) => {
                counts.refused += 1;
                let _ = writeln!(stderr.lock(), "jadpoc: line {number}: refused: {e}");
            }
        }
        if batch.len() >= NDJSON_BATCH
            && let Err(code) = flush(&mut batch, &mut counts, batch_from)
        {
            return code;
        }
    }
    if let Err(code) = flush(&mut batch, &mut counts, batch_from) {
        return code;
    }
    counts.report(event);
    if counts.refused > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
