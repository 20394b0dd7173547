//! The jadpo language server: `jadpoc lsp`.
//!
//! Two layers, as in rust-analyzer: [`analysis`] is a plain library over the
//! checker's results (diagnostics, symbol index) that works in byte offsets and that
//! tests call directly; the server (`server`, `handlers`) keeps the open documents,
//! decides when to check again, and converts between the protocol's positions and
//! offsets. The server speaks over the connection it is given and writes nothing
//! else: `jadpoc` hands it stdin and stdout.

pub mod analysis;
mod baseline;
mod convert;
mod handlers;
pub mod line_index;
mod server;

pub use analysis::Analysis;
pub use baseline::ReadBaseline;
pub use lsp_server::Connection;
pub use server::{FindFiles, IDLE_AFTER_CHECK, Options, run};

#[cfg(test)]
mod tidy {
    /// The server speaks only through the connection it is given: a stray print to
    /// stdout would corrupt the protocol's stream.
    #[test]
    fn nothing_writes_to_stdout() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let mut files = Vec::new();
        walk(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        assert!(files.len() > 5);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for banned in ["print!(", "println!(", "stdout(", "dbg!("] {
                // This test names them; the check skips its own module.
                let code = text.split("mod tidy").next().unwrap_or("");
                assert!(!code.contains(banned), "{} uses `{banned}`", file.display());
            }
        }
    }
}
