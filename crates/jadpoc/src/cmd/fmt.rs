//! `jadpoc fmt [PATHS...] [--check]` and `jadpoc fmt -`: the canonical layout, in
//! place, as a check for CI, or from stdin to stdout for editors.

use crate::load::{find_files, read_sources, read_text};
use crate::render;
use jadpo_check::{Checked, Lower, SourceFile, check};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct FmtArgs {
    /// Files and directories (searched recursively for `*.jadpo`, as `check` does);
    /// `-` reads stdin and writes the formatted text to stdout.
    #[arg(default_value = ".")]
    paths: Vec<PathBuf>,
    /// Write nothing: list the files that would change and exit 1 if any would.
    #[arg(long)]
    check: bool,
}

/// What became of the files of one run, for its exit status.
#[derive(Default)]
struct Outcome {
    /// A file had syntax errors (left untouched) or would change under `--check`.
    failed: bool,
    /// A file could not be read or written.
    io_error: bool,
}

pub fn run(args: FmtArgs) -> ExitCode {
    let stdin = Path::new("-");
    let outcome = if args.paths.iter().any(|p| p == stdin) {
        if args.paths.len() > 1 {
            eprintln!("jadpoc: `-` (stdin) cannot be given with other paths");
            return ExitCode::from(2);
        }
        format_stdin(args.check)
    } else {
        match find_files(&args.paths) {
            Ok(files) => format_files(&files, args.check),
            Err(e) => {
                eprintln!("jadpoc: {e}");
                return ExitCode::from(2);
            }
        }
    };
    if outcome.io_error {
        ExitCode::from(2)
    } else if outcome.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Formats each file on its own: one that cannot be read or has syntax errors is
/// reported and left as it is, and the others are still formatted.
fn format_files(files: &[PathBuf], check_only: bool) -> Outcome {
    let mut outcome = Outcome::default();
    for path in files {
        let source = match read_sources(std::slice::from_ref(path)) {
            Ok(mut sources) if sources.len() == 1 => sources.remove(0),
            Ok(_) => continue,
            Err(e) => {
                eprintln!("jadpoc: {e}");
                outcome.io_error = true;
                continue;
            }
        };
        let Some(formatted) = format_or_report(&source, &mut outcome) else { continue };
        if formatted == source.text {
            continue;
        }
        if check_only {
            crate::print_stdout(&format!("{}\n", source.name));
            outcome.failed = true;
        } else if let Err(e) = replace(path, &formatted) {
            eprintln!("jadpoc: cannot write `{}`: {}", path.display(), e.to_string().to_lowercase());
            outcome.io_error = true;
        }
    }
    outcome
}

/// Replaces a file's contents at once: the text goes to a file beside it, which is
/// then renamed over it, so that an interrupted run never leaves half a file.
fn replace(path: &Path, text: &str) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.fmt-{}.tmp", std::process::id()));
    let written = std::fs::write(&tmp, text)
        .and_then(|()| std::fs::set_permissions(&tmp, std::fs::metadata(path)?.permissions()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Reads stdin and writes its formatted text to stdout; under `--check`, writes
/// `-` instead when the text would change.
fn format_stdin(check_only: bool) -> Outcome {
    let mut outcome = Outcome::default();
    let text = match read_text(std::io::stdin().lock(), stdin_len(), "stdin") {
        Ok(text) => text,
        Err(e) => {
            eprintln!("jadpoc: {e}");
            outcome.io_error = true;
            return outcome;
        }
    };
    let source = SourceFile { name: "<stdin>".into(), text };
    if let Some(formatted) = format_or_report(&source, &mut outcome) {
        if !check_only {
            crate::print_stdout(&formatted);
        } else if formatted != source.text {
            crate::print_stdout("-\n");
            outcome.failed = true;
        }
    }
    outcome
}

/// Stdin's length when it is a regular file (`jadpoc fmt - < in.jadpo`), known
/// before any of it is read, as a file's is.
fn stdin_len() -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        let fd = std::io::stdin().as_fd().try_clone_to_owned().ok()?;
        let meta = std::fs::File::from(fd).metadata().ok()?;
        meta.is_file().then_some(meta.len())
    }
    #[cfg(not(unix))]
    None
}

/// The formatted text, or `None` after printing the file's syntax errors to stderr
/// as `check` renders them.
fn format_or_report(source: &SourceFile, outcome: &mut Outcome) -> Option<String> {
    match jadpo_fmt::format(&source.text) {
        Ok(formatted) => Some(formatted),
        Err(_) => {
            // The checker turns syntax errors into coded diagnostics; only those are
            // shown, since one file alone may not resolve its names.
            let sources = std::slice::from_ref(source);
            let mut checked: Checked = check(sources, Lower::DiagnosticsOnly);
            checked.diagnostics.retain(|d| d.code.as_str().starts_with("syntax."));
            let color = render::use_color(&std::io::stderr());
            eprint!("{}", render::human(sources, &checked, color));
            outcome.failed = true;
            None
        }
    }
}
