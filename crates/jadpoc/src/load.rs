//! Finding a program's files and checking them: shared by every command that reads a
//! program.

use jadpo_check::{Checked, Lower, Program, SourceFile, check};
use jadpo_core::version::{ProgramVersion, SourceText};
use jadpo_syntax::MAX_SOURCE_LEN;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Why a program's files could not be read (exit status 2).
#[derive(Debug)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Directories not searched for `.jadpo` files: build output and hidden folders.
const SKIPPED_DIRS: [&str; 2] = ["target", "node_modules"];

/// The files named by `paths`: files as given, directories searched recursively for
/// `*.jadpo`, all sorted by path so that a program's diagnostics come in one order.
pub fn find_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, LoadError> {
    let default = [PathBuf::from(".")];
    let paths = if paths.is_empty() { &default[..] } else { paths };
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path)
            .map_err(|e| LoadError(format!("cannot read `{}`: {}", path.display(), io_reason(&e))))?;
        if meta.is_dir() {
            let before = files.len();
            walk(path, &mut files)?;
            if files.len() == before {
                return Err(LoadError(format!("no `.jadpo` files in `{}`", path.display())));
            }
        } else {
            files.push(path.clone());
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| LoadError(format!("cannot read `{}`: {}", dir.display(), io_reason(&e))))?;
    for entry in entries {
        let entry = entry.map_err(|e| LoadError(format!("cannot read `{}`: {}", dir.display(), io_reason(&e))))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let file_type =
            entry.file_type().map_err(|e| LoadError(format!("cannot read `{}`: {}", path.display(), io_reason(&e))))?;
        if file_type.is_dir() {
            if !name.starts_with('.') && !SKIPPED_DIRS.contains(&name.as_ref()) {
                walk(&path, out)?;
            }
        } else if name.ends_with(".jadpo") {
            out.push(path);
        }
    }
    Ok(())
}

/// Reads the files as UTF-8 text.
pub fn read_sources(files: &[PathBuf]) -> Result<Vec<SourceFile>, LoadError> {
    files
        .iter()
        .map(|path| {
            let what = format!("`{}`", path.display());
            let cannot = |e: std::io::Error| LoadError(format!("cannot read {what}: {}", io_reason(&e)));
            let file = std::fs::File::open(path).map_err(cannot)?;
            let len = file.metadata().map_err(cannot)?.len();
            let text = read_text(file, Some(len), &what)?;
            Ok(SourceFile { name: display_name(path), text })
        })
        .collect()
}

/// Reads one source's text: refused when it has more than [`MAX_SOURCE_LEN`] bytes
/// or is not UTF-8. `what` names it in messages (`` `a.jadpo` ``, `stdin`); `len` is
/// its length when known before reading (a regular file's), so that an over-size
/// source is refused without reading it, and any other is read no further than the
/// limit.
pub fn read_text(input: impl Read, len: Option<u64>, what: &str) -> Result<String, LoadError> {
    let too_large = || LoadError(format!("{what} is too large: a source may have at most {MAX_SOURCE_LEN} bytes"));
    let limit = u64::try_from(MAX_SOURCE_LEN).unwrap_or(u64::MAX);
    if len.is_some_and(|len| len > limit) {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(len.and_then(|len| usize::try_from(len).ok()).unwrap_or(0));
    input
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| LoadError(format!("cannot read {what}: {}", io_reason(&e))))?;
    if bytes.len() > MAX_SOURCE_LEN {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..valid];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = std::str::from_utf8(&before[before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)..])
            .map_or(1, |s| s.chars().count() + 1);
        LoadError(format!("{what} is not UTF-8 text: invalid byte at line {line}, column {col}"))
    })
}

/// A path as shown in diagnostics: as given, without a leading `./`.
fn display_name(path: &Path) -> String {
    let s = path.to_string_lossy();
    s.strip_prefix("./").unwrap_or(&s).to_string()
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => e.to_string().to_lowercase(),
    }
}

/// Reads and checks a program for a command that runs it: diagnostics (if any) go
/// to stderr; a program with errors is refused with exit 1, unreadable files with 2.
pub fn program_for_run(paths: &[PathBuf]) -> Result<Program, ExitCode> {
    load_for_run(paths).map(|loaded| loaded.program)
}

/// A checked program, with its files and the checker's findings (for
/// `jadpoc diff` and the comparison `jadpoc run` makes with the store's).
pub struct Loaded {
    pub program: Program,
    pub sources: Vec<SourceFile>,
    pub checked: Checked,
}

impl Loaded {
    /// The program's version, as a store keeps it.
    pub fn version(&self) -> ProgramVersion {
        let sources = self.sources.iter().map(|s| SourceText { path: s.name.clone(), text: s.text.clone() });
        ProgramVersion::of(&self.program, sources.collect())
    }
}

/// As [`program_for_run`], keeping the files and the checker's findings.
pub fn load_for_run(paths: &[PathBuf]) -> Result<Loaded, ExitCode> {
    let sources = find_files(paths).and_then(|f| read_sources(&f)).map_err(|e| {
        eprintln!("jadpoc: {e}");
        ExitCode::from(2)
    })?;
    let checked: Checked = check(&sources, Lower::Yes);
    if !checked.diagnostics.is_empty() {
        let color = crate::render::use_color(&std::io::stderr());
        eprint!("{}", crate::render::human(&sources, &checked, color));
    }
    let program = checked.program.clone().ok_or(ExitCode::from(1))?;
    Ok(Loaded { program, sources, checked })
}

/// This host's name, as a process's row shows it.
pub fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string()))
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}
