//! Changing a running program, end to end. A rolling deploy: `jadpoc run`
//! processes of an old and a new program on one store, events emitted under
//! both, processes killed with SIGKILL on the way and started again; every
//! delivery that one of the two programs has succeeds, none fails for the mix,
//! and the provider never gets a `null` for a field a program declares required
//! (on SQLite and PostgreSQL). A field renamed under stored events, and a budget
//! tightened under deliveries in flight, as a user meets them. The walkthrough of
//! docs/evolution.md, run as written.
use crate::common::{self, Env, PgDb};
use crate::http_server::{Provider, Reply};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(120);

/// The old program: `rec` and `audit` on `Paid`.
fn old(url: &str) -> String {
    format!(
        r#"
event Paid {{ id: string  cents: int }}
connection c {{ url: "{url}" }}
action record(id: string, cents: int) {{ via: c  idempotent: true }}
action audit(id: string) {{ via: c  idempotent: true }}
subscriber rec {{ on: Paid  run: record(event.id, event.cents)  timeout: 2s }}
subscriber audit {{ on: Paid  run: audit(event.id)  timeout: 2s }}
"#
    )
}

/// The new program: `audit` gone, `audit2` added; `rec` as it was.
fn new(url: &str) -> String {
    format!(
        r#"
event Paid {{ id: string  cents: int }}
connection c {{ url: "{url}" }}
action record(id: string, cents: int) {{ via: c  idempotent: true }}
action audit2(id: string, cents: int) {{ via: c  idempotent: true }}
subscriber rec {{ on: Paid  run: record(event.id, event.cents)  timeout: 2s }}
subscriber audit2 {{ on: Paid  run: audit2(event.id, event.cents)  timeout: 2s }}
"#
    )
}

/// A `jadpoc run` of one program, its log in a file.
struct Run {
    child: Child,
    log: std::path::PathBuf,
}

impl Run {
    fn start(e: &Env, program: &Path, db: &str, name: &str) -> Run {
        let log = e.dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let program = program.to_str().expect("utf-8");
        // Each version starts over the other: the subscriber each lacks is the
        // breaking finding it accepts.
        let args = ["run", program, "--db", db, "--log-format", "json", "--accept", "subscriber.removed"];
        let child = e.cmd(&args).stdout(Stdio::null()).stderr(Stdio::from(file)).spawn().expect("start jadpoc run");
        let run = Run { child, log };
        let start = Instant::now();
        while !run.log().contains("running") {
            assert!(start.elapsed() < DEADLINE, "the run did not start:\n{}", run.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        run
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log()
    }

    fn stop(self) -> String {
        common::stop(common::Running { child: self.child, log: self.log })
    }
}

fn emit(e: &Env, program: &Path, db: &str, from: usize, n: usize) {
    let lines: String = (from..from + n).map(|i| format!("{{\"id\": \"p{i}\", \"cents\": {i}}}\n")).collect();
    let file = e.dir.join(format!("paid-{from}.ndjson"));
    std::fs::write(&file, lines).expect("write events");
    let args =
        ["emit", program.to_str().expect("utf-8"), "Paid", "--ndjson", file.to_str().expect("utf-8"), "--db", db];
    let out = e.jadpoc(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `jadpoc deliveries --format json` on `db`.
fn deliveries(e: &Env, db: &str) -> Vec<Value> {
    let out = e.jadpoc(&["deliveries", "--format", "json", "--db", db]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).expect("json").as_array().cloned().unwrap_or_default()
}

fn rolling_deploy(db: &str) {
    const N: usize = 150;
    let provider = Provider::start(|_, _| Reply::status(200));
    let e = Env::new("unused.db", |dir| dir.join("old.jadpo"));
    let (old_path, new_path) = (e.dir.join("old.jadpo"), e.dir.join("new.jadpo"));
    std::fs::write(&old_path, old(&provider.url())).expect("write");
    std::fs::write(&new_path, new(&provider.url())).expect("write");

    emit(&e, &old_path, db, 0, N);
    let mut runs = vec![Run::start(&e, &old_path, db, "old-0")];
    runs.push(Run::start(&e, &new_path, db, "new-0"));
    emit(&e, &new_path, db, N, N);
    emit(&e, &old_path, db, 2 * N, N);
    // Kill each version's process once, started again at once, while both
    // programs' events are delivered.
    let mut logs = Vec::new();
    logs.push(runs.remove(0).kill());
    runs.push(Run::start(&e, &old_path, db, "old-1"));
    emit(&e, &new_path, db, 3 * N, N);
    logs.push(runs.remove(0).kill());
    runs.push(Run::start(&e, &new_path, db, "new-1"));

    let total = 4 * N * 2;
    let start = Instant::now();
    let list = loop {
        let list = deliveries(&e, db);
        if list.len() == total && list.iter().all(|d| common::state(d) == "succeeded") {
            break list;
        }
        if start.elapsed() > DEADLINE {
            let states: HashMap<String, usize> = list.iter().fold(HashMap::new(), |mut m, d| {
                *m.entry(format!("{} {}", d["subscriber"], common::state(d))).or_default() += 1;
                m
            });
            let logs: Vec<String> = runs.iter().map(Run::log).collect();
            panic!("not every delivery succeeded in time: {states:?}\n{}", logs.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for r in runs {
        logs.push(r.stop());
    }
    let logs = logs.join("\n");
    assert!(!logs.contains("runtime.unknown_subscriber"), "a delivery failed for the version mix:\n{logs}");
    let by: HashMap<&str, usize> = list.iter().fold(HashMap::new(), |mut m, d| {
        *m.entry(d["subscriber"].as_str().unwrap_or_default()).or_default() += 1;
        m
    });
    // The old program made `rec` and `audit` deliveries for its 2N events, the new
    // one `rec` and `audit2` for its 2N.
    assert_eq!(by.get("rec"), Some(&(4 * N)));
    assert_eq!(by.get("audit"), Some(&(2 * N)));
    assert_eq!(by.get("audit2"), Some(&(2 * N)));

    // The provider: every delivery arrived; none with a `null` argument; a
    // delivery arrived twice only where a killed process's attempt was lost.
    let mut calls: HashMap<String, usize> = HashMap::new();
    for r in provider.received() {
        let args = &r.json()["args"];
        let nulls: Vec<&String> = args
            .as_object()
            .map(|o| o.iter().filter(|(_, v)| v.is_null()).map(|(k, _)| k).collect())
            .unwrap_or_default();
        assert!(nulls.is_empty(), "the provider got a null for {nulls:?}: {args}");
        *calls.entry(r.header("idempotency-key").unwrap_or_default().to_string()).or_default() += 1;
    }
    assert_eq!(calls.len(), total, "every delivery reached the provider");
    for d in &list {
        let id = d["id"].as_i64().unwrap_or_default().to_string();
        let attempts = d["attempts"].as_u64().unwrap_or_default() as usize;
        assert!(calls.get(&id).copied().unwrap_or(0) <= attempts, "delivery {id} was called more than attempted");
    }
}

#[test]
fn a_rolling_deploy_on_sqlite_runs_every_delivery_of_either_program() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("outbox.db");
    rolling_deploy(db.to_str().expect("utf-8"));
}

#[test]
fn a_rolling_deploy_on_postgres_runs_every_delivery_of_either_program() {
    let Some(pg) = PgDb::new() else { return };
    rolling_deploy(&pg.url);
}

/// Whether `line` is `pattern`, each `...` in it standing for any text.
fn fits(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("...").collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return line == pattern;
    }
    if !line.starts_with(first) || !line[first.len()..].ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// How many of `expected` (in order; a line `...` skipped) `output` shows, each
/// on a line after the last one's.
fn shown(expected: &[&str], output: &str) -> usize {
    let mut lines = output.lines();
    let mut found = 0;
    for pattern in expected.iter().filter(|l| **l != "...") {
        if !lines.by_ref().any(|l| fits(pattern.trim_end(), l.trim_end())) {
            break;
        }
        found += 1;
    }
    found
}

#[test]
fn the_changing_a_program_walkthrough_runs_as_written() {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/evolution.md"))
        .expect("docs/evolution.md");
    let e = Env::new(".jadpo/outbox.db", |dir| dir.join("new.jadpo"));
    let bin = Path::new(common::JADPOC).parent().expect("the binary's folder").to_path_buf();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let (mut in_block, mut info, mut block) = (false, String::new(), Vec::<String>::new());
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("```") {
            if in_block {
                if info == "jadpo,fragment"
                    && block.first().is_some_and(|l| l.starts_with("// ") && l.ends_with(".jadpo"))
                {
                    let name = block[0].trim_start_matches("// ");
                    std::fs::write(e.dir.join(name), block.join("\n")).expect("write the program");
                } else if info == "shell" {
                    for l in &block {
                        match l.strip_prefix("$ ") {
                            Some(command) => steps.push((command.to_string(), Vec::new())),
                            None => steps.last_mut().expect("a command first").1.push(l.clone()),
                        }
                    }
                }
                block.clear();
            }
            in_block = !in_block;
            info = rest.trim().to_string();
        } else if in_block {
            block.push(line.to_string());
        }
    }
    assert!(steps.len() >= 7, "the walkthrough's commands were not found");
    for (i, (command, expected)) in steps.iter().enumerate() {
        let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
        let want = expected.iter().filter(|l| **l != "...").count();
        let log = e.dir.join(format!("step-{i}.log"));
        let file = std::fs::File::create(&log).expect("log");
        let mut child = std::process::Command::new("sh")
            .args(["-c", &format!("exec {command} 2>&1")])
            .current_dir(&e.dir)
            .env("PATH", &path)
            .stdout(Stdio::from(file))
            .spawn()
            .expect("run the step");
        let start = Instant::now();
        // A command ends on its own; a run is stopped once it has shown every line.
        loop {
            let out = std::fs::read_to_string(&log).unwrap_or_default();
            if let Ok(Some(_)) = child.try_wait() {
                let out = std::fs::read_to_string(&log).unwrap_or_default();
                assert_eq!(
                    shown(&expected, &out),
                    want,
                    "`{command}` printed\n{out}\nwhere the page shows\n{}",
                    expected.join("\n")
                );
                break;
            }
            if command.starts_with("jadpoc run") && shown(&expected, &out) == want {
                common::stop(common::Running { child, log: log.clone() });
                break;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "`{command}` printed\n{out}\nwhere the page shows\n{}",
                expected.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `jadpoc run ARGS...` until its log shows `done`, then stopped; its log.
fn run_until(e: &Env, args: &[&str], done: impl Fn(&str) -> bool) -> String {
    let log = e.dir.join("until.log");
    let file = std::fs::File::create(&log).expect("log file");
    let child = e.cmd(args).stdout(Stdio::null()).stderr(Stdio::from(file)).spawn().expect("start jadpoc run");
    let run = common::Running { child, log };
    run.wait_for_log("the awaited line", done);
    common::stop(run)
}

/// A field renamed under stored events (`cents` to `amount`, which the new
/// subscriber reads): `jadpoc run` of the new program sends nothing to the
/// provider for the old events, and each delivery fails `runtime.event_shape`
/// naming the field; the provider never gets a `null`.
#[test]
fn an_event_stored_without_a_field_the_new_program_reads_is_never_sent() {
    let provider = Provider::start(|_, _| Reply::status(200));
    let e = Env::new("outbox.db", |dir| dir.join("old.jadpo"));
    let old = format!(
        "event Paid {{ id: string  cents: int }}\nconnection c {{ url: \"{}\" }}\n\
         action record(id: string, cents: int) {{ via: c  idempotent: true }}\n\
         subscriber rec {{ on: Paid  run: record(event.id, event.cents) }}\n",
        provider.url()
    );
    let new = old.replace("cents: int }", "amount: int }").replace("event.cents", "event.amount");
    std::fs::write(e.dir.join("old.jadpo"), &old).expect("write");
    std::fs::write(e.dir.join("new.jadpo"), &new).expect("write");
    let out = e.jadpoc(&["emit", "old.jadpo", "Paid", r#"{"id": "a", "cents": 5}"#, "--db", e.db()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The diff calls the rename what it is, and the run refuses it until accepted.
    let out = e.jadpoc(&["run", "new.jadpo", "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let refused = String::from_utf8_lossy(&out.stderr);
    assert!(refused.contains("event.field_removed") || refused.contains("event.field_added_required"), "{refused}");
    let codes = ["event.field_added_required", "event.field_removed"].join(",");
    let log = run_until(&e, &["run", "new.jadpo", "--db", e.db(), "--accept", &codes], |l| l.contains("-> failed"));
    assert!(log.contains("runtime.event_shape"), "{log}");
    assert_eq!(provider.count(), 0, "nothing was sent for the old event");
    let d = &e.deliveries()[0];
    assert_eq!(common::state(d), "failed");
    let shown = e.show(d["id"].as_i64().unwrap_or_default());
    let reason = shown["last_failure"]["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("field `amount` of event 1 is missing: stored by version #1;"), "{shown}");
    // The event names the version that stored it; the status lists both.
    assert_eq!(e.json(&["events", "show", "1"])["version"], 1);
    let versions = e.status()["versions"].as_array().cloned().unwrap_or_default();
    let ids: Vec<i64> = versions.iter().filter_map(|v| v["id"].as_i64()).collect();
    assert_eq!(ids, [2, 1], "the new program's version, which a run started with, first");
}

/// A budget lowered under deliveries that have used attempts: `jadpoc diff
/// --db` counts those past it, and `jadpoc run` refuses to start until the
/// finding is accepted, printing that count.
#[test]
fn a_tightened_budget_is_counted_and_refused_before_the_run() {
    let e = Env::new("outbox.db", |dir| dir.join("old.jadpo"));
    let old = "event Paid { id: string }\nconnection c { url: \"http://127.0.0.1:9/x\" }\n\
               action record(id: string) { via: c  idempotent: true }\n\
               subscriber rec { on: Paid  run: record(event.id)  retry: { attempts: 20  within: 3d } }\n";
    let new = old.replace("attempts: 20  within: 3d", "attempts: 1  within: 1h");
    std::fs::write(e.dir.join("old.jadpo"), old).expect("write");
    std::fs::write(e.dir.join("new.jadpo"), new).expect("write");
    for id in ["a", "b"] {
        let out = e.jadpoc(&["emit", "old.jadpo", "Paid", &format!(r#"{{"id": "{id}"}}"#), "--db", e.db()]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    // Each delivery's first attempt fails; both wait for their second.
    let run = ["run", "old.jadpo", "--db", e.db(), "--fake", "c=unavailable"];
    run_until(&e, &run, |l| l.matches("-> pending").count() >= 2);
    let out = e.jadpoc(&["diff", "new.jadpo", "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1));
    let shown = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        shown.contains("2 deliveries of `rec` waiting to run are past `attempts: 1 within: 1h` and would give up at their next claim"),
        "{shown}"
    );
    let out = e.jadpoc(&["run", "new.jadpo", "--db", e.db()]);
    assert_eq!(out.status.code(), Some(1));
    let refused = String::from_utf8_lossy(&out.stderr).split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(refused.contains("are past `attempts: 1 within: 1h`"), "{refused}");
    assert!(refused.contains("--accept subscriber.budget_tightened"), "{refused}");
    let states: Vec<String> = e.deliveries().iter().map(|d| common::state(d).to_string()).collect();
    assert_eq!(states, ["pending", "pending"], "a refused run changes nothing");
}
