//! `jadpoc lsp`: the language server, over stdin and stdout.

use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct LspArgs {
    /// Accepted for editors that pass it (VS Code's language client does); stdio is
    /// the only transport.
    #[arg(long)]
    stdio: bool,
}

pub fn run(_args: LspArgs) -> ExitCode {
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
