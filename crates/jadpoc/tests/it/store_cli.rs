//! The store through the `jadpoc` binary: many processes creating one store at
//! once, and the listing commands on a store they can only read.

use crate::common;

use common::{Env, PgDb};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn program(dir: &Path) -> PathBuf {
    crate::common::paid_program(dir)
}

#[test]
fn store_ten_emits_on_a_store_that_does_not_exist_yet_all_succeed() {
    let e = Env::new("new/outbox.db", program);
    let children: Vec<_> = (0..10)
        .map(|i| {
            e.cmd(&["emit", e.prog(), "Paid", &format!(r#"{{"id": "p{i}"}}"#), "--db", e.db()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start jadpoc emit")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(e.deliveries().len(), 10);
}

/// Whether this test runs as root, who ignores permissions: the folder is then
/// made read-only by mounting a filesystem and remounting it read-only.
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout == b"0\n")
}

fn sh(args: &[&str]) -> bool {
    Command::new(args[0]).args(&args[1..]).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

#[test]
fn store_listings_work_on_a_read_only_store_and_emit_says_read_only() {
    let e = Env::new("ro/outbox.db", program);
    let folder = e.dir.join("ro");
    std::fs::create_dir_all(&folder).expect("folder");
    let folder_s = folder.to_str().expect("utf-8").to_string();
    let root = is_root();
    if root && !sh(&["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", &folder_s]) {
        eprintln!("skipped: cannot mount a filesystem to make read-only here");
        return;
    }
    struct Restore(String, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            if self.1 {
                let _ = Command::new("umount").arg(&self.0).status();
            } else {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
            }
        }
    }
    let _restore = Restore(folder_s.clone(), root);
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p1"}"#, "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    if root {
        assert!(sh(&["mount", "-o", "remount,ro", &folder_s]), "remount read-only");
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    }
    assert_eq!(e.deliveries().len(), 1);
    assert_eq!(e.status()["states"]["pending"], 1);
    let out = e.jadpoc(&["breakers", "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p2"}"#, "--db", e.db()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is read-only; no change was made"), "{err}");
}

/// The user and group `nobody`, whom a test running as root drops to.
const NOBODY: u32 = 65534;

/// Who runs the listings in a folder whose permissions forbid writing: this
/// test's user, or `nobody` when the test runs as root (who ignores permissions).
struct Reader {
    as_nobody: bool,
}

impl Reader {
    /// The reader for `folder`, whose permissions are already taken away; shown
    /// to run `jadpoc` and to be refused a new file there. `None`, with a
    /// message, when that cannot be had here (in CI the test fails instead).
    fn of(folder: &Path) -> Option<Reader> {
        let reader = Reader { as_nobody: is_root() };
        let runs = reader.apply(Command::new(common::JADPOC).arg("--version").current_dir(folder)).output();
        let mut write = Command::new("sh");
        write.args(["-c", ": > probe"]).current_dir(folder).stderr(Stdio::null());
        let why = match (runs, reader.apply(&mut write).status()) {
            (Ok(out), Ok(wrote)) if out.status.success() && !wrote.success() => return Some(reader),
            (Ok(out), _) if !out.status.success() => {
                format!("`jadpoc` does not run as the reader: {}", String::from_utf8_lossy(&out.stderr))
            }
            (Err(e), _) | (_, Err(e)) => format!("cannot run a command as the reader: {e}"),
            _ => format!("the reader could still write to `{}`", folder.display()),
        };
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("the read-only folder tests must run in CI, and here {why}");
        }
        eprintln!("skipped: needs a folder the listings cannot write to: {why}");
        None
    }

    fn apply<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        if self.as_nobody {
            use std::os::unix::process::CommandExt;
            cmd.uid(NOBODY).gid(NOBODY);
        }
        cmd
    }

    /// `jadpoc ARGS --format json --db DB` as the reader, which must succeed.
    fn json(&self, e: &Env, db: &Path, args: &[&str]) -> serde_json::Value {
        let out = self.apply(e.cmd(args).args(["--format", "json", "--db"]).arg(db)).output().expect("run jadpoc");
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("json")
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// The names of the files in `folder`, sorted.
fn files_in(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .expect("read the folder")
        .map(|f| f.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Gives a folder its permissions back when the test ends, however it ends.
struct Writable<'a>(&'a Path);

impl Drop for Writable<'_> {
    fn drop(&mut self) {
        set_mode(self.0, 0o755);
    }
}

#[test]
fn store_listings_work_in_a_folder_they_cannot_write_to() {
    let e = Env::new("ro/outbox.db", program);
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p1"}"#, "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let folder = e.dir.join("ro");
    set_mode(&e.dir, 0o755);
    let _writable = Writable(&folder);
    // The file read-only as well, then only the folder (the file's owner could
    // write to it, not make its log beside it).
    for file_mode in [0o444, 0o666] {
        set_mode(&e.db, file_mode);
        set_mode(&folder, 0o555);
        let Some(reader) = Reader::of(&folder) else { return };
        assert_eq!(reader.json(&e, &e.db, &["status"])["states"]["pending"], 1, "file mode {file_mode:o}");
        let listed = reader.json(&e, &e.db, &["deliveries"]);
        assert_eq!(listed.as_array().map(Vec::len), Some(1));
        assert_eq!(reader.json(&e, &e.db, &["deliveries", "show", "1"])["state"], "pending");
        assert_eq!(reader.json(&e, &e.db, &["breakers"]), serde_json::json!([]));
        assert_eq!(reader.json(&e, &e.db, &["events"]).as_array().map(Vec::len), Some(1));
        assert_eq!(files_in(&folder), vec!["outbox.db"], "nothing was made beside the store");
        set_mode(&folder, 0o755);
    }
}

#[test]
fn store_listings_read_a_copy_with_its_log_and_say_what_reads_one_without_its_index() {
    let e = Env::new("live/outbox.db", program);
    let emit = |id: &str| {
        let out = e.jadpoc(&["emit", e.prog(), "Paid", &format!(r#"{{"id": "{id}"}}"#), "--db", e.db()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    emit("p1");
    // A process holding the store open keeps the second event in its log: a copy
    // taken meanwhile has the file, its log and the log's index.
    let holder = rusqlite::Connection::open(&e.db).expect("open");
    let _: i64 = holder.query_row("SELECT count(*) FROM jadpo_events", [], |r| r.get(0)).expect("read");
    emit("p2");
    let copy = e.dir.join("copy");
    std::fs::create_dir(&copy).expect("folder");
    for suffix in ["", "-wal", "-shm"] {
        let name = format!("outbox.db{suffix}");
        std::fs::copy(e.dir.join("live").join(&name), copy.join(&name)).expect("copy");
        set_mode(&copy.join(&name), 0o444);
    }
    drop(holder);
    let db = copy.join("outbox.db");
    set_mode(&e.dir, 0o755);
    set_mode(&copy, 0o555);
    let _writable = Writable(&copy);
    let Some(reader) = Reader::of(&copy) else { return };
    let listed = reader.json(&e, &db, &["deliveries"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "the log's commit is read: {listed}");

    // Without the index, the log cannot be read here: said, with what reads it.
    set_mode(&copy, 0o755);
    std::fs::remove_file(copy.join("outbox.db-shm")).expect("remove the index");
    set_mode(&copy, 0o555);
    let out = reader.apply(e.cmd(&["deliveries", "--db"]).arg(&db)).output().expect("run jadpoc");
    assert_eq!(out.status.code(), Some(2));
    let (db, folder) = (db.display(), copy.display());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "jadpoc: cannot open the store `{db}`: its write-ahead log `{db}-wal` may hold changes the file lacks, \
             and it is read through an index (`{db}-shm`) that cannot be made in the folder `{folder}`; read the \
             store where its folder can be written to (copy `outbox.db` with `outbox.db-wal`), or as a user who \
             may write to the folder\n"
        )
    );
}

#[test]
fn store_listings_work_beside_a_writer_holding_the_lock() {
    let e = Env::new("outbox.db", program);
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p1"}"#, "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let locker = rusqlite::Connection::open(&e.db).expect("open");
    locker.execute_batch("BEGIN IMMEDIATE;").expect("lock");
    // Each would wait a minute for the lock if it took one.
    let started = std::time::Instant::now();
    assert_eq!(e.deliveries().len(), 1);
    assert_eq!(e.status()["states"]["pending"], 1);
    let out = e.jadpoc(&["breakers", "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "the listings waited on the lock");
    locker.execute_batch("ROLLBACK").expect("unlock");
}

#[test]
fn store_migrate_emit_run_and_list_on_postgres() {
    let Some(pg) = PgDb::new() else { return };
    let mut e = Env::new("unused.db", program);
    e.db = PathBuf::from(&pg.url);
    let out = e.jadpoc(&["migrate", "--db", e.db(), "--print"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sql = String::from_utf8_lossy(&out.stdout);
    assert!(sql.contains(r#"CREATE TABLE "jadpo".deliveries"#), "{sql}");
    let out = e.jadpoc(&["migrate", "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is up to date"));
    for i in 0..3 {
        let out = e.jadpoc(&["emit", e.prog(), "Paid", &format!(r#"{{"id": "p{i}"}}"#), "--db", e.db()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let (list, _log) = e.run_until_with(&["--fake", "c=ok"], &[], |l| {
        l.len() == 3 && l.iter().all(|d| common::state(d) == "succeeded")
    });
    assert_eq!(list.len(), 3);
    assert_eq!(e.status()["states"]["succeeded"], 3);
}

#[test]
fn store_listings_work_on_a_read_only_postgres_database_and_emit_says_read_only() {
    let Some(pg) = PgDb::new() else { return };
    let mut e = Env::new("unused.db", program);
    e.db = PathBuf::from(&pg.url);
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p1"}"#, "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut c = postgres::Client::connect(&pg.url, postgres::NoTls).expect("connect");
    c.batch_execute(
        "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', \
         current_database()); END $$",
    )
    .expect("make the database read-only");
    assert_eq!(e.deliveries().len(), 1);
    assert_eq!(e.status()["states"]["pending"], 1);
    let out = e.jadpoc(&["breakers", "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = e.jadpoc(&["emit", e.prog(), "Paid", r#"{"id": "p2"}"#, "--db", e.db()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err, format!("jadpoc: the store `{}` is read-only; no change was made\n", pg.url));
}

#[test]
fn store_reads_of_an_older_postgres_schema_name_the_migrations_and_the_command_that_applies_them() {
    let Some(pg) = PgDb::new() else { return };
    let e = Env::new("unused.db", program);
    let on_ops = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--db", &pg.url, "--schema", "ops"]);
        e.jadpoc(&all)
    };
    // The schema as a build from before the events' migration (version 3) left
    // it: the printed migrations up to version 2, and an event of that build.
    let out = on_ops(&["migrate", "--print"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sql = String::from_utf8_lossy(&out.stdout);
    let (up_to_2, _) = sql.split_once("\n-- version 3\n").expect("a third migration");
    let mut c = postgres::Client::connect(&pg.url, postgres::NoTls).expect("connect");
    c.batch_execute(up_to_2).expect("version 2");
    c.batch_execute("INSERT INTO ops.events (name, payload, emitted_at) VALUES ('Paid', '{\"id\": \"p1\"}', 0)")
        .expect("an event");
    let url = format!("{}?schema=ops", pg.url);
    let known = jadpo_store_postgres::schema::VERSION;
    let needs = jadpo_store_postgres::schema::READS_NEED;
    for command in [&["events"][..], &["status"], &["deliveries"], &["breakers"], &["events", "show", "1"]] {
        let out = on_ops(command);
        assert_eq!(out.status.code(), Some(2), "{command:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "jadpoc: `{url}` has schema version 2, older than this jadpoc reads (version {needs} or newer): \
                 `jadpoc migrate --db '{url}'` applies migrations 3 to {known} (`--print` shows their SQL first), \
                 as `jadpoc run` and `jadpoc emit` do\n"
            ),
            "{command:?}"
        );
    }
    // The command it names does it.
    let out = e.jadpoc(&["migrate", "--db", &url]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = on_ops(&["events", "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let events: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(events.as_array().map(Vec::len), Some(1));
}

#[test]
fn store_three_runs_on_one_postgres_database_run_each_delivery_once() {
    let Some(pg) = PgDb::new() else { return };
    let mut e = Env::new("unused.db", program);
    e.db = PathBuf::from(&pg.url);
    let nd = e.dir.join("events.ndjson");
    let lines: String = (0..300).map(|i| format!("{{\"id\": \"p{i}\"}}\n")).collect();
    std::fs::write(&nd, lines).expect("write events");
    let out = e.jadpoc(&["emit", e.prog(), "Paid", "--ndjson", nd.to_str().expect("utf-8"), "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs: Vec<_> = (0..3).map(|_| e.start_run(&["--fake", "c=ok", "--batch", "7"], &[])).collect();
    let start = std::time::Instant::now();
    let mut list = e.deliveries();
    while !list.iter().all(|d| common::state(d) == "succeeded") && start.elapsed() < std::time::Duration::from_secs(60)
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
        list = e.deliveries();
    }
    for run in runs {
        common::stop(run);
    }
    assert_eq!(list.len(), 300);
    assert!(list.iter().all(|d| common::state(d) == "succeeded"), "not all delivered: {list:#?}");
    assert!(list.iter().all(|d| d["attempts"] == 1), "a delivery ran twice: {list:#?}");
}
