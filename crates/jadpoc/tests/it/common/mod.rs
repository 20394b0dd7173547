//! What the end-to-end tests of `jadpoc run` share: a program in a temporary folder,
//! the commands run against its store, and a `jadpoc run` started and stopped.

#![allow(dead_code)] // each test file uses a part of it

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const JADPOC: &str = env!("CARGO_BIN_EXE_jadpoc");

/// A program and its store in a temporary folder.
pub struct Env {
    _dir: tempfile::TempDir,
    pub dir: PathBuf,
    pub program: PathBuf,
    pub db: PathBuf,
}

impl Env {
    /// `write` writes the program into the folder and returns its path; `db` is the
    /// store's path relative to the folder.
    pub fn new(db: &str, write: impl FnOnce(&Path) -> PathBuf) -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().to_path_buf();
        let program = write(&path);
        Env { db: path.join(db), dir: path, program, _dir: dir }
    }

    /// `jadpoc ARGS` in the folder, with no secret of the tests' programs set.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(JADPOC);
        c.current_dir(&self.dir).args(args).env_remove("LEDGER_TOKEN");
        c
    }

    pub fn jadpoc(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run jadpoc")
    }

    pub fn db(&self) -> &str {
        self.db.to_str().expect("utf-8 path")
    }

    pub fn prog(&self) -> &str {
        self.program.to_str().expect("utf-8 path")
    }

    /// `jadpoc ARGS --format json --db DB`, which must succeed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--format", "json", "--db", self.db()]);
        let out = self.jadpoc(&all);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("json")
    }

    pub fn deliveries(&self) -> Vec<Value> {
        self.json(&["deliveries"]).as_array().cloned().expect("an array")
    }

    pub fn show(&self, id: i64) -> Value {
        self.json(&["deliveries", "show", &id.to_string()])
    }

    pub fn status(&self) -> Value {
        self.json(&["status"])
    }

    /// Starts `jadpoc run PROGRAM --db DB --log-format json ARGS` with `vars` set.
    pub fn start_run(&self, args: &[&str], vars: &[(&str, &str)]) -> Running {
        self.start_run_logging("json", args, vars)
    }

    /// Starts `jadpoc run PROGRAM --db DB --log-format FORMAT ARGS` with `vars` set.
    pub fn start_run_logging(&self, format: &str, args: &[&str], vars: &[(&str, &str)]) -> Running {
        let mut all = vec!["run", self.prog(), "--db", self.db(), "--log-format", format];
        all.extend_from_slice(args);
        // Logs go to a file: a pipe nobody reads would fill and stall the run.
        let log = self.dir.join("run.log");
        let file = std::fs::File::create(&log).expect("log file");
        let mut cmd = self.cmd(&all);
        cmd.envs(vars.iter().copied());
        let child = cmd.stdout(Stdio::null()).stderr(Stdio::from(file)).spawn().expect("start jadpoc run");
        Running { child, log }
    }

    /// Runs until `done` holds for the deliveries (or 30s pass), stops the run with
    /// SIGTERM (it must exit 0), and returns the deliveries and the run's log.
    pub fn run_until_with(
        &self,
        args: &[&str],
        vars: &[(&str, &str)],
        done: impl Fn(&[Value]) -> bool,
    ) -> (Vec<Value>, String) {
        let run = self.start_run(args, vars);
        let start = Instant::now();
        let mut list = self.deliveries();
        while !done(&list) && start.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(50));
            list = self.deliveries();
        }
        let log = stop(run);
        assert!(done(&list), "not done in time: {list:#?}\n{log}");
        (list, log)
    }
}

/// `--fake` arguments for each script.
pub fn fakes<'a>(scripts: &[&'a str]) -> Vec<&'a str> {
    scripts.iter().flat_map(|f| ["--fake", f]).collect()
}

/// A `jadpoc run` started by a test, its log in a file.
pub struct Running {
    pub child: Child,
    pub log: PathBuf,
}

impl Running {
    /// The run's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the run's log satisfies `done` (a generous 30s at most, else
    /// the test fails naming `what`); returns the log.
    pub fn wait_for_log(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = self.log();
            if done(&log) {
                return log;
            }
            assert!(Instant::now() < deadline, "no {what} in the log in time:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// SIGTERM, then the exit status must be 0; returns the run's log.
pub fn stop(run: Running) -> String {
    let Running { mut child, log } = run;
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let err = std::fs::read_to_string(&log).unwrap_or_default();
                assert!(status.success(), "jadpoc run exited {status}: {err}");
                return err;
            }
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                let _ = child.kill();
                panic!("jadpoc run did not stop on SIGTERM");
            }
        }
    }
}

/// `jadpoc ARGS` in `dir`, without colour.
pub fn jadpoc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(JADPOC).args(args).current_dir(dir).env("NO_COLOR", "1").output().expect("jadpoc runs")
}

/// A command's output as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A temporary folder holding `files` (name, text), folders made as needed.
pub fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (name, text) in files {
        let path = dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, text).expect("write");
    }
    dir
}

/// A delivery's state.
pub fn state(d: &Value) -> &str {
    d["state"].as_str().unwrap_or("")
}

/// A fresh PostgreSQL database for one test, dropped after; `None` (with a
/// message) when no server answers outside CI.
pub struct PgDb {
    pub url: String,
    _db: jadpo_test_support::PgDatabase,
    /// Held while the test uses the server, so that a test restarting it waits.
    _shared: Option<std::sync::RwLockReadGuard<'static, ()>>,
}

/// Taken for writing by the one test that restarts the server, for the restart
/// only; every other PostgreSQL test holds it for reading.
pub static PG_RESTART: std::sync::RwLock<()> = std::sync::RwLock::new(());

impl PgDb {
    pub fn new() -> Option<PgDb> {
        PgDb::create(Some(PG_RESTART.read().unwrap_or_else(|e| e.into_inner())))
    }

    /// As [`PgDb::new`], for the test that restarts the server (taking
    /// [`PG_RESTART`] for writing meanwhile).
    pub fn restarting() -> Option<PgDb> {
        PgDb::create(None)
    }

    fn create(shared: Option<std::sync::RwLockReadGuard<'static, ()>>) -> Option<PgDb> {
        let db = jadpo_test_support::PgDatabase::new("jadpoc_t")?;
        Some(PgDb { url: db.url.clone(), _db: db, _shared: shared })
    }
}

/// Writes `p.jadpo` in `dir`: one event `Paid { id }`, connection `c` (the discard
/// port, never called by tests that deliver nothing), subscriber `rec`.
pub fn paid_program(dir: &Path) -> PathBuf {
    let path = dir.join("p.jadpo");
    let text = r#"event Paid {
    id: string
}

connection c {
    url: "http://127.0.0.1:9/c"
}

action record(id: string) {
    via: c
}

subscriber rec {
    on: Paid
    run: record(event.id)
}
"#;
    std::fs::write(&path, text).expect("write program");
    path
}
