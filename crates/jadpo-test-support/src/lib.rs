//! What the jadpo crates' tests share, written once: [`program`] (a checked
//! program from text), [`PgDatabase`] (a fresh PostgreSQL database per test),
//! [`files_under`] (a folder's files, walked), [`corpus`] (the programs tests
//! mutate and edit), [`edit_range`] (where a random edit of a text falls) and
//! [`on_every_store!`] (a store suite's tests run on every
//! store). A dev-dependency only.
//!
//! A test's failure is a panic here by design: these run only in tests.

use jadpo_check::program::Program;
use jadpo_check::{Lower, SourceFile, check};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The checked program of `text` (one file, `test.jadpo`); panics with the
/// diagnostics when it does not check.
pub fn program(text: &str) -> Arc<Program> {
    let checked = check(&[SourceFile { name: "test.jadpo".into(), text: text.into() }], Lower::Yes);
    match checked.program {
        Some(p) => Arc::new(p),
        None => panic!("the test's program does not check: {:#?}", checked.diagnostics),
    }
}

/// The server the PostgreSQL tests run on; `JADPO_TEST_POSTGRES_URL` overrides it.
pub const TEST_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A fresh database on the test server for one test, dropped with it.
#[derive(Debug)]
pub struct PgDatabase {
    /// The database's URL.
    pub url: String,
    admin: String,
    name: String,
}

impl PgDatabase {
    /// A new database whose name starts with `prefix`, or `None` when no server
    /// answers and this is not CI (`CI=true`), where the PostgreSQL tests must run
    /// and fail instead. A skip says so on the test's output, which the test
    /// harness shows for a test that is run alone or fails.
    pub fn new(prefix: &str) -> Option<PgDatabase> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let admin = std::env::var("JADPO_TEST_POSTGRES_URL").unwrap_or_else(|_| TEST_POSTGRES_URL.to_string());
        let mut c = match postgres::Client::connect(&admin, postgres::NoTls) {
            Ok(c) => c,
            Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("the PostgreSQL tests must run in CI, and no server answers at {admin}: {e}")
            }
            Err(e) => {
                println!(
                    "skipped: needs PostgreSQL ({admin}: {e}); start it with trust authentication for user \
                     `postgres` and a database `test` on 127.0.0.1:5432, or set JADPO_TEST_POSTGRES_URL"
                );
                return None;
            }
        };
        let name = format!("{prefix}_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        // One statement each: neither may run inside a transaction block.
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).expect("drop a stale test database");
        c.batch_execute(&format!("CREATE DATABASE {name}")).expect("create a test database");
        let (base, _) = admin.rsplit_once('/').expect("a URL with a database");
        Some(PgDatabase { url: format!("{base}/{name}"), admin, name })
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A client of the database.
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("connect to the test database")
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
        }
    }
}

/// The texts of every `.jadpo` file in the checker's corpus (`tests/check`), the
/// examples and the scenario tests (each folder itself, not below it), in order of
/// path, read once: programs with and without mistakes, for tests that mutate or
/// edit them.
pub fn corpus() -> &'static [String] {
    static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    CORPUS.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut paths: Vec<PathBuf> = ["examples", "tests/check", "tests/scenarios"]
            .iter()
            .flat_map(|dir| std::fs::read_dir(root.join(dir)).into_iter().flatten().flatten().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "jadpo"))
            .collect();
        paths.sort();
        let texts: Vec<String> = paths.iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect();
        assert!(texts.len() > 50, "the corpus was not found: {} files", texts.len());
        texts
    })
}

/// Every file under `dir` (recursively) whose name ends with `suffix`, sorted;
/// none when `dir` does not exist.
pub fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Runs each named test of the calling module, a `fn NAME(&dyn Fixture)`, on every
/// store: `mod sqlite` and `mod postgres` of `#[test]`s. The first argument is the
/// path of the module whose `sqlite()` and `postgres()` give each store's fixture
/// for one test (`None`: the store is not available here, and the fixture has
/// said why; the test passes as skipped).
///
/// ```ignore
/// jadpo_test_support::on_every_store!(crate::common::fixture; claims_take_due_rows, a_retry_is_fresh);
/// ```
#[macro_export]
macro_rules! on_every_store {
    ($fixtures:path; $($name:ident),* $(,)?) => {
        mod sqlite {
            use $fixtures as fixtures;
            $crate::on_every_store!(@store sqlite; $($name),*);
        }
        mod postgres {
            use $fixtures as fixtures;
            $crate::on_every_store!(@store postgres; $($name),*);
        }
    };
    (@store $store:ident; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                if let Some(f) = fixtures::$store() {
                    super::$name(&*f);
                }
            }
        )*
    };
}

/// The bytes a random edit replaces: `len` bytes from the fraction `at` of
/// `text`'s length, both ends moved out to characters' boundaries.
pub fn edit_range(text: &str, at: f64, len: usize) -> std::ops::Range<usize> {
    let mut start = ((text.len() as f64 * at) as usize).min(text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (start + len).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    start..end
}
