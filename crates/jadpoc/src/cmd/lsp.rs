//! `jadpoc lsp`: the language server, over stdin and stdout.

use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct LspArgs {
    /// Accepted for editors that pass it (VS Code's language client does); stdio is
    /// the only transport.
    #[arg(long)]
    stdio: bool,
    /// Compare each workspace folder's program with this baseline and show
    /// `jadpoc diff`'s findings as diagnostics: `git:REF` (the folder's files at
    /// that revision) or a file or folder (relative to the workspace folder). A
    /// client's `initializationOptions.diffBaseline` wins over it.
    #[arg(long, value_name = "git:REF|PATH")]
    diff_baseline: Option<String>,
}

pub fn run(args: LspArgs) -> ExitCode {
    // Edits come faster than mimalloc's delay before it gives freed memory back (a
    // second), so what each check frees would be held beside what the next one
    // makes, and a large program's peak would climb with every edit. A check after
    // an edit frees little now (it fills the room of the last one's lists), so
    // taking that little back costs an edit a few milliseconds, and the peak stays
    // near what the server holds.
    crate::purge_freed_memory_at_once();
    let (connection, io_threads) = jadpo_lsp::Connection::stdio();
    // A workspace folder's files are found as `jadpoc check DIR` finds them; a folder
    // with none is an empty program, not an error.
    let options = jadpo_lsp::Options {
        find_files: Box::new(|dir: &Path| crate::load::find_files(&[dir.to_path_buf()]).unwrap_or_default()),
        after_check: Box::new(crate::release_free_memory),
        read_baseline: Box::new(read_baseline),
        baseline: args.diff_baseline,
    };
    let outcome = jadpo_lsp::run(connection, options);
    // The reader thread ends when the client closes stdin; the writer when the
    // connection is dropped.
    let joined = io_threads.join();
    match outcome.map_err(|e| e.to_string()).and(joined.map_err(|e| e.to_string())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jadpoc lsp: {e}");
            ExitCode::from(1)
        }
    }
}

/// A workspace folder's baseline: `git:REF`, its files at that revision, or a
/// file or folder relative to it.
fn read_baseline(root: &Path, spec: &str) -> Result<Vec<jadpo_check::SourceFile>, String> {
    let read = match spec.strip_prefix("git:") {
        Some(rev) => crate::cmd::diff::git_sources(root, rev, &[]),
        None => crate::load::find_files(&[root.join(spec)]).and_then(|f| crate::load::read_sources(&f)),
    };
    read.map_err(|e| e.to_string())
}
