//! Several `jadpoc run` processes on one PostgreSQL database, end to end: the
//! database's clock shared by hosts whose clocks disagree, wake-ups by
//! `LISTEN`/`NOTIFY`, `--schema`, and the faults (processes killed, the server
//! restarted) under load. Skipped with a message when no server answers, except
//! under `CI=true`.

use crate::common::{self, Env, PgDb};
use crate::http_server::{Provider, Reply};
use postgres::fallible_iterator::FallibleIterator;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The time the runs are given to reach what a test waits for (the machine may be
/// loaded).
const DEADLINE: Duration = Duration::from_secs(120);

/// A `jadpoc run` of a test, its log (JSON lines) in a file of its own.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_for_start(&mut self) {
        let start = Instant::now();
        while !self.log().contains("running") {
            assert!(start.elapsed() < DEADLINE, "the run did not start:\n{}", self.log());
            assert!(self.alive(), "the run exited:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM; it must exit 0.
    fn stop(self) -> String {
        let log = self.log.clone();
        common::stop(common::Running { child: self.child, log })
    }

    fn kill(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.log()
    }
}

/// Starts `jadpoc run PROGRAM --db URL --log-format json ARGS` with `vars` set,
/// logging to `NAME.log` in the test's folder.
fn start(e: &Env, url: &str, name: &str, args: &[&str], vars: &[(&str, &str)]) -> Proc {
    let mut all = vec!["run", e.prog(), "--db", url, "--log-format", "json"];
    all.extend_from_slice(args);
    let log = e.dir.join(format!("{name}.log"));
    let file = std::fs::File::create(&log).expect("log file");
    let child = e
        .cmd(&all)
        .envs(vars.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::from(file))
        .spawn()
        .expect("start jadpoc run");
    Proc { child, log }
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `jadpoc emit` of `n` `Paid` events (ids `p0`...) from an NDJSON file.
fn emit_paid(e: &Env, url: &str, n: usize, extra: &[&str]) {
    let lines: String = (0..n).map(|i| format!("{{\"id\": \"p{i}\", \"cents\": {i}}}\n")).collect();
    let file = e.dir.join(format!("paid-{n}.ndjson"));
    std::fs::write(&file, lines).expect("write events");
    let mut args = vec!["emit", e.prog(), "Paid", "--ndjson", file.to_str().expect("utf-8"), "--db", url];
    args.extend_from_slice(extra);
    ok(&e.jadpoc(&args));
}

/// A connection to the test's database, made again after a server restart.
struct Sql {
    url: String,
    client: Option<postgres::Client>,
}

impl Sql {
    fn new(url: &str) -> Sql {
        Sql { url: url.to_string(), client: None }
    }

    /// The rows of `sql`, or `None` while the server cannot answer.
    fn try_query(&mut self, sql: &str) -> Option<Vec<postgres::Row>> {
        if self.client.as_ref().is_none_or(|c| c.is_closed()) {
            self.client = postgres::Client::connect(&self.url, postgres::NoTls).ok();
        }
        let rows = self.client.as_mut()?.query(sql, &[]);
        match rows {
            Ok(r) => Some(r),
            Err(_) => {
                self.client = None;
                None
            }
        }
    }

    fn query(&mut self, sql: &str) -> Vec<postgres::Row> {
        let start = Instant::now();
        loop {
            if let Some(rows) = self.try_query(sql) {
                return rows;
            }
            assert!(start.elapsed() < DEADLINE, "the database does not answer `{sql}`");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn count(&mut self, sql: &str) -> i64 {
        self.query(sql)[0].get(0)
    }

    /// What a stalled test shows beside the runs' logs: the deliveries by state
    /// and due time, the breakers, and what each session of the database is
    /// doing or waiting on.
    fn where_things_stand(&mut self, schema: &str) -> String {
        let reads = [
            format!(
                "SELECT state || ' ' || count(*) || ' due ' || coalesce(min(due_at) - \
                 (extract(epoch FROM clock_timestamp()) * 1000)::bigint, 0) || '..' || \
                 coalesce(max(due_at) - (extract(epoch FROM clock_timestamp()) * 1000)::bigint, 0) || ' ms from now' \
                 FROM {schema}.deliveries GROUP BY state"
            ),
            format!("SELECT row_to_json(b)::text FROM {schema}.circuit_breakers b"),
            "SELECT pid || ' ' || coalesce(state, '') || ' ' || coalesce(wait_event_type || ':' || wait_event, '-') \
             || ' for ' || coalesce((clock_timestamp() - state_change)::text, '') || ': ' || left(query, 160) \
             FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                .to_string(),
            "SELECT locktype || ' ' || coalesce(relation::regclass::text, objid::text, '') || ' ' || mode || ' pid ' \
             || pid || CASE WHEN granted THEN ' held' ELSE ' waiting' END \
             FROM pg_locks WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND locktype IN ('advisory', 'tuple', 'transactionid') OR NOT granted"
                .to_string(),
        ];
        let mut out = String::new();
        for sql in reads {
            for row in self.try_query(&sql).unwrap_or_default() {
                out.push_str(&row.get::<_, Option<String>>(0).unwrap_or_default());
                out.push('\n');
            }
        }
        out
    }

    /// Waits until every delivery of the schema is `succeeded` (and there are
    /// `n`); returns how long it took.
    fn wait_all_succeeded(&mut self, schema: &str, n: i64, procs: &mut [Proc]) -> Duration {
        let start = Instant::now();
        let sql = format!("SELECT count(*) FILTER (WHERE state = 'succeeded'), count(*) FROM {schema}.deliveries");
        loop {
            if let Some(rows) = self.try_query(&sql) {
                let (done, all): (i64, i64) = (rows[0].get(0), rows[0].get(1));
                if done == n && all == n {
                    return start.elapsed();
                }
                if start.elapsed() > DEADLINE {
                    let logs: Vec<String> = procs.iter().map(Proc::log).collect();
                    panic!(
                        "{done} of {all} deliveries succeeded in time (expected {n}):\n{}\n{}",
                        self.where_things_stand(schema),
                        logs.join("\n")
                    );
                }
            }
            for p in procs.iter_mut() {
                assert!(p.alive(), "a run exited:\n{}", p.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("p.jadpo");
    std::fs::write(&path, text).expect("write program");
    path
}

/// Each `Idempotency-Key`'s requests, with when they arrived (the provider's
/// clock: one host's, monotonic).
type Arrivals = Arc<Mutex<HashMap<String, Vec<Instant>>>>;

fn arrived(seen: &Arrivals, key: &str) -> usize {
    let mut seen = seen.lock().expect("lock");
    let times = seen.entry(key.to_string()).or_default();
    times.push(Instant::now());
    times.len()
}

#[test]
fn pg_cluster_hosts_whose_clocks_disagree_by_ten_minutes_behave_as_one() {
    let Some(pg) = PgDb::new() else { return };
    // The first call of four deliveries (too few in a row to open the breaker) is
    // refused with `Retry-After: 2`; every other call is taken. Calls are counted
    // by event id. Each answer takes 50 ms, as a provider's does, so that the host
    // started first cannot run all twenty before the other has started.
    let seen: Arrivals = Arrivals::default();
    let s2 = seen.clone();
    let p = Provider::start(move |_, r| {
        std::thread::sleep(Duration::from_millis(50));
        let id = r.json()["args"]["id"].as_str().unwrap_or_default().to_string();
        let refused = ["p0", "p1", "p2", "p3"].contains(&id.as_str());
        if arrived(&s2, &id) == 1 && refused { Reply::with_header(503, "Retry-After", "2") } else { Reply::status(200) }
    });
    let e = Env::new("unused.db", |dir| {
        write(dir, &crate::http_server::program_text(&p.url(), "", "idempotent: true", "5s"))
    });
    let url = pg.url.clone();
    emit_paid(&e, &url, 20, &[]);
    let behind = [(jadpo_core::clock::TEST_CLOCK_OFFSET_ENV, "-300000")];
    let ahead = [(jadpo_core::clock::TEST_CLOCK_OFFSET_ENV, "300000")];
    let mut procs = vec![
        start(&e, &url, "behind", &["--workers", "1", "--batch", "4"], &behind),
        start(&e, &url, "ahead", &["--workers", "1", "--batch", "4"], &ahead),
    ];
    let mut sql = Sql::new(&url);
    sql.wait_all_succeeded("jadpo", 20, &mut procs);
    let logs: Vec<String> = procs.into_iter().map(Proc::stop).collect();
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 20);
    for (id, times) in &seen {
        // No lease was taken early (which would call again), and each retry
        // waited its two seconds by the provider's clock: not run early by the
        // host ahead, nor minutes late by the one behind.
        let refused = ["p0", "p1", "p2", "p3"].contains(&id.as_str());
        assert_eq!(times.len(), if refused { 2 } else { 1 }, "{id} was called {} times", times.len());
        if !refused {
            continue;
        }
        let gap = times[1] - times[0];
        assert!(
            (Duration::from_millis(1_900)..Duration::from_secs(45)).contains(&gap),
            "{id}: the retry came {gap:?} after the first call"
        );
    }
    // Both hosts worked, and every time they wrote is the database's.
    for log in &logs {
        assert!(log.contains("delivery.attempt"), "a run made no attempt:\n{log}");
    }
    let off = sql.count(
        "SELECT count(*) FROM jadpo.attempts \
         WHERE abs(started_at - (extract(epoch FROM clock_timestamp()) * 1000)::bigint) > 120000",
    );
    assert_eq!(off, 0, "attempts stamped with a host's clock");
}

#[test]
fn pg_cluster_on_sqlite_a_host_whose_clock_is_ahead_runs_a_retry_early() {
    // SQLite's processes share one host's clock: a host whose clock is ahead
    // takes a retry before its time. What the PostgreSQL store's one clock
    // prevents, shown with the same test offset.
    let seen: Arrivals = Arrivals::default();
    let s2 = seen.clone();
    let p = Provider::start(move |_, r| {
        let key = r.header("idempotency-key").unwrap_or_default().to_string();
        if arrived(&s2, &key) == 1 { Reply::with_header(503, "Retry-After", "60") } else { Reply::status(200) }
    });
    let e = Env::new("outbox.db", |dir| {
        write(dir, &crate::http_server::program_text(&p.url(), "", "idempotent: true", "5s"))
    });
    emit_paid(&e, e.db(), 1, &[]);
    let first = start(&e, e.db(), "first", &[], &[]);
    let start_at = Instant::now();
    while seen.lock().expect("lock").values().map(Vec::len).sum::<usize>() < 1 {
        assert!(start_at.elapsed() < DEADLINE, "no first call:\n{}", first.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its outcome written (due a minute on), a host ten minutes ahead runs it now.
    let until = Instant::now() + DEADLINE;
    let mut list = e.deliveries();
    while list.first().is_none_or(|d| d["attempts"] != 1 || common::state(d) != "pending") {
        assert!(Instant::now() < until, "not pending again: {list:#?}");
        std::thread::sleep(Duration::from_millis(20));
        list = e.deliveries();
    }
    first.stop();
    let ahead = [(jadpo_core::clock::TEST_CLOCK_OFFSET_ENV, "600000")];
    let fast = start(&e, e.db(), "ahead", &[], &ahead);
    let until = Instant::now() + DEADLINE;
    while seen.lock().expect("lock").values().map(Vec::len).sum::<usize>() < 2 {
        assert!(Instant::now() < until, "no second call:\n{}", fast.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    fast.stop();
    let times = seen.lock().expect("lock").values().next().cloned().expect("a key");
    assert!(times[1] - times[0] < Duration::from_secs(60), "the skewed host waited the full minute");
}

#[test]
fn pg_cluster_an_event_stored_by_another_process_wakes_the_runs_before_their_poll() {
    let Some(pg) = PgDb::new() else { return };
    let e =
        Env::new("unused.db", |dir| write(dir, &crate::http_server::program_text("http://127.0.0.1:9", "", "", "5s")));
    let url = pg.url.clone();
    // Polling every ten minutes: only a wake-up delivers within the deadline.
    let poll = ["--fake", "c=ok", "--poll-ms", "600000"];
    let mut procs = vec![start(&e, &url, "a", &poll, &[]), start(&e, &url, "b", &poll, &[])];
    procs.iter_mut().for_each(Proc::wait_for_start);
    let mut sql = Sql::new(&url);
    // Wait until both loops are idle (their first claims found nothing), then emit
    // from a third process, twice.
    for round in 1..=2 {
        emit_paid(&e, &url, round, &[]);
        let took = sql.wait_all_succeeded("jadpo", (1..=round as i64).sum(), &mut procs);
        assert!(took < Duration::from_secs(60), "round {round} took {took:?}");
    }
    procs.into_iter().for_each(|p| {
        p.stop();
    });
    // Any insert into the events table notifies, the application's own SQL too.
    let mut listener = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    listener.batch_execute("LISTEN \"jadpo.events\"").expect("listen");
    sql.query("INSERT INTO jadpo.events (name, payload, emitted_at) VALUES ('Paid', '{}', 0) RETURNING id");
    let mut notes = listener.notifications();
    let note = notes.timeout_iter(DEADLINE).next().expect("a notification");
    assert_eq!(note.map(|n| n.channel().to_string()).as_deref(), Some("jadpo.events"));
}

#[test]
fn pg_cluster_schema_flag_puts_every_command_in_that_schema() {
    let Some(pg) = PgDb::new() else { return };
    let e =
        Env::new("unused.db", |dir| write(dir, &crate::http_server::program_text("http://127.0.0.1:9", "", "", "5s")));
    let url = pg.url.clone();
    let with = |args: &[&str]| -> String {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--db", &url, "--schema", "ops"]);
        ok(&e.jadpoc(&all))
    };
    assert!(with(&["migrate", "--print"]).contains(r#"CREATE TABLE "ops".deliveries"#));
    assert!(with(&["migrate"]).contains("schema `ops`"));
    emit_paid(&e, &url, 3, &["--schema", "ops"]);
    // `--schema` wins over the URL's `?schema=`.
    let other = format!("{url}?schema=elsewhere");
    let mut run = start(&e, &other, "ops", &["--fake", "c=ok", "--schema", "ops"], &[]);
    let mut sql = Sql::new(&url);
    sql.wait_all_succeeded("ops", 3, std::slice::from_mut(&mut run));
    run.stop();
    let listed: serde_json::Value = serde_json::from_str(&with(&["deliveries", "--format", "json"])).expect("json");
    assert_eq!(listed.as_array().map(Vec::len), Some(3));
    let status: serde_json::Value = serde_json::from_str(&with(&["status", "--format", "json"])).expect("json");
    assert_eq!(status["states"]["succeeded"], 3);
    assert!(with(&["breakers"]).lines().count() <= 2);
    let schemas =
        sql.count("SELECT count(*) FROM information_schema.schemata WHERE schema_name IN ('jadpo', 'elsewhere')");
    assert_eq!(schemas, 0, "a command used another schema");
    // A SQLite store has no schema.
    let out = e.jadpoc(&["status", "--db", "here.db", "--schema", "ops"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`--schema ops` names a PostgreSQL schema"));
}

/// The program of the fault test: `rec` calls `/pay` for each `Paid`; `watch`
/// calls `/out`, a provider down at first, for each `Ping`; `heartbeat` calls
/// `/sched` every two seconds.
fn fault_program(url: &str) -> String {
    format!(
        r#"event Paid {{
    id: string
    cents: int
    customer: string?
}}

event Ping {{
    id: string
}}

connection c {{
    url: "{url}/pay"
}}

connection o {{
    url: "{url}/out"
}}

connection s {{
    url: "{url}/sched"
}}

connection k {{
    url: "{url}/ord"
    max_in_flight: 16
}}

action keep(id: string, customer: string?) {{
    via: k
    idempotent: true
}}

subscriber in_order {{
    on: Paid
    run: keep(event.id, event.customer)
    order_by: event.customer
    retry: {{ attempts: 20  within: 7d }}
    timeout: 5s
}}

action record(id: string, cents: int) {{
    via: c
    idempotent: true
}}

action page(id: string) {{
    via: o
    idempotent: true
}}

action beat(scope: string) {{
    via: s
}}

subscriber rec {{
    on: Paid
    run: record(event.id, event.cents)
    retry: {{ attempts: 20  within: 7d }}
    timeout: 5s
}}

subscriber watch {{
    on: Ping
    run: page(event.id)
    retry: {{ attempts: 20  within: 7d }}
    timeout: 5s
}}

schedule heartbeat {{
    every: 2s
    run: beat("all")
}}
"#
    )
}

/// Restart the PostgreSQL server (once per test run: other tests share it).
fn restart_postgres() -> bool {
    let cmd = std::env::var("JADPO_TEST_POSTGRES_RESTART").unwrap_or_else(|_| "pg_ctlcluster 15 main restart".into());
    let mut words = cmd.split_whitespace();
    let Some(program) = words.next() else { return false };
    Command::new(program).args(words).status().is_ok_and(|s| s.success())
}

/// Each ordered call, by its key: the event's number and when it arrived.
type KeyArrivals = Arc<Mutex<HashMap<String, Vec<(usize, Instant)>>>>;

/// How long the provider takes to answer an ordered call.
const ORDERED_ANSWER: Duration = Duration::from_millis(20);

#[test]
fn pg_cluster_three_runs_killed_and_a_server_restart_under_load_lose_nothing_and_run_nothing_twice() {
    let Some(pg) = PgDb::restarting() else { return };
    const PAID: usize = 3000;
    // The ordered subscriber's keys: each has PAID / KEYS events.
    const KEYS: usize = 30;
    const PINGS: usize = 20;
    let began = Instant::now();
    let paid: Arrivals = Arrivals::default();
    let pages: Arrivals = Arrivals::default();
    let beats = Arc::new(Mutex::new(0usize));
    let ordered: KeyArrivals = KeyArrivals::default();
    let (paid2, pages2, beats2, ordered2) = (paid.clone(), pages.clone(), beats.clone(), ordered.clone());
    let down_since: Arc<Mutex<Option<Instant>>> = Arc::default();
    // The pager's provider is down for 20 seconds from its first call: one
    // outage, one alert.
    let p = Provider::start(move |_, r| {
        let key = r.header("idempotency-key").unwrap_or_default().to_string();
        if r.path.starts_with("/ord") {
            let args = &r.json()["args"];
            let (id, customer) =
                (args["id"].as_str().unwrap_or_default(), args["customer"].as_str().unwrap_or_default());
            let n: usize = id.trim_start_matches('p').parse().unwrap_or(usize::MAX);
            ordered2.lock().expect("lock").entry(customer.to_string()).or_default().push((n, Instant::now()));
            Reply::After(ORDERED_ANSWER, Box::new(Reply::status(200)))
        } else if r.path.starts_with("/pay") {
            arrived(&paid2, &key);
            Reply::After(Duration::from_millis(50), Box::new(Reply::status(200)))
        } else if r.path.starts_with("/out") {
            let since = *down_since.lock().expect("lock").get_or_insert_with(Instant::now);
            if since.elapsed() < Duration::from_secs(20) {
                Reply::status(503)
            } else {
                arrived(&pages2, &key);
                Reply::status(200)
            }
        } else {
            *beats2.lock().expect("lock") += 1;
            Reply::status(200)
        }
    });
    let e = Env::new("unused.db", |dir| write(dir, &fault_program(&p.url())));
    let url = pg.url.clone();
    // The pings first: claims take the earliest due first.
    let pings: String = (0..PINGS).map(|i| format!("{{\"id\": \"o{i}\"}}\n")).collect();
    let file = e.dir.join("pings.ndjson");
    std::fs::write(&file, pings).expect("write pings");
    ok(&e.jadpoc(&["emit", e.prog(), "Ping", "--ndjson", file.to_str().expect("utf-8"), "--db", &url]));
    let lines: String =
        (0..PAID).map(|i| format!("{{\"id\": \"p{i}\", \"cents\": {i}, \"customer\": \"k{}\"}}\n", i % KEYS)).collect();
    let file = e.dir.join("paid.ndjson");
    std::fs::write(&file, lines).expect("write events");
    ok(&e.jadpoc(&["emit", e.prog(), "Paid", "--ndjson", file.to_str().expect("utf-8"), "--db", &url]));

    let args = ["--workers", "2", "--batch", "8"];
    let mut procs: Vec<Proc> = (0..3).map(|i| start(&e, &url, &format!("run{i}-0"), &args, &[])).collect();
    let mut logs = Vec::new();
    let mut sql = Sql::new(&url);
    let succeeded = |sql: &mut Sql| {
        sql.count("SELECT count(*) FROM jadpo.deliveries WHERE state = 'succeeded' AND subscriber = 'rec'")
    };
    // Kill one run whenever another few hundred deliveries are done, and start
    // it again at once; restart the server once, half-way.
    let mut restarted = false;
    for kill in 1..=4 {
        let target = (PAID as i64) * kill / 6;
        let until = Instant::now() + DEADLINE;
        while succeeded(&mut sql) < target && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        if kill == 3 {
            // The other tests of this binary that use the server finish first.
            let _alone = common::PG_RESTART.write().unwrap_or_else(|e| e.into_inner());
            restarted = restart_postgres();
            if !restarted {
                assert!(
                    !std::env::var("CI").is_ok_and(|v| v == "true"),
                    "could not restart PostgreSQL (set JADPO_TEST_POSTGRES_RESTART to the command)"
                );
                eprintln!("note: PostgreSQL was not restarted (set JADPO_TEST_POSTGRES_RESTART to the command)");
            }
        }
        let victim = procs.remove(0);
        logs.push(victim.kill());
        procs.push(start(&e, &url, &format!("run-again-{kill}"), &args, &[]));
    }
    let total = (2 * PAID + PINGS) as i64;
    sql.wait_all_succeeded("jadpo", total, &mut procs);
    // Two beats' worth, to see the schedule go on after all that.
    let runs_then = sql.count("SELECT runs FROM jadpo.schedules WHERE name = 'heartbeat'");
    let until = Instant::now() + DEADLINE;
    while sql.count("SELECT runs FROM jadpo.schedules WHERE name = 'heartbeat'") < runs_then + 2 {
        assert!(Instant::now() < until, "the schedule stopped running");
        std::thread::sleep(Duration::from_millis(100));
    }
    for p in procs {
        logs.push(p.stop());
    }
    let logs = logs.join("\n");

    // A delivery is called again only after an attempt whose outcome the run
    // could not know, once for each such attempt: one lost with a killed run
    // (the claim that took it back recorded `lease_expired`), or one cut by its
    // time limit, the machine being loaded (`deadline_exceeded`, which only the
    // run's time limit writes in a history); never after its success was
    // written. The history shows each such attempt's duration.
    let unknown: HashMap<i64, i64> = sql
        .query(
            "SELECT delivery_id, count(*) FROM jadpo.attempts \
             WHERE code IN ('lease_expired', 'deadline_exceeded') GROUP BY delivery_id",
        )
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let late_success = sql.count(
        "SELECT count(*) FROM jadpo.attempts a JOIN jadpo.deliveries d ON d.id = a.delivery_id \
         WHERE a.outcome = 'succeeded' AND a.attempt <> d.attempts",
    );
    assert_eq!(late_success, 0, "a delivery was attempted again after its success was written");
    let attempts: HashMap<i64, i64> =
        sql.query("SELECT id, attempts FROM jadpo.deliveries").iter().map(|r| (r.get(0), r.get(1))).collect();
    let paid = paid.lock().expect("lock").clone();
    assert_eq!(paid.len(), PAID, "every delivery reached the provider");
    for (key, times) in &paid {
        let id: i64 = key.parse().expect("a delivery id");
        let unknown = unknown.get(&id).copied().unwrap_or(0);
        if times.len() as i64 > 1 + unknown {
            let history: Vec<String> = sql
                .query(&format!(
                    "SELECT attempt, outcome, coalesce(code, ''), started_at, duration_ms FROM jadpo.attempts \
                     WHERE delivery_id = {id} ORDER BY id"
                ))
                .iter()
                .map(|r| {
                    format!(
                        "{} {} {} {} {}",
                        r.get::<_, i64>(0),
                        r.get::<_, String>(1),
                        r.get::<_, String>(2),
                        r.get::<_, i64>(3),
                        r.get::<_, i64>(4)
                    )
                })
                .collect();
            panic!(
                "delivery {id} was called {} times, after {unknown} attempts whose outcome was not known: \
                 {history:#?}\n{logs}",
                times.len()
            );
        }
        assert!(times.len() as i64 <= attempts[&id], "delivery {id}: more calls than attempts");
    }
    // One success written per delivery, with its handled record.
    let twice = sql.count(
        "SELECT count(*) FROM (SELECT delivery_id FROM jadpo.attempts WHERE outcome = 'succeeded' \
         GROUP BY delivery_id HAVING count(*) <> 1) x",
    );
    assert_eq!(twice, 0, "a delivery has more than one success written");
    assert_eq!(sql.count("SELECT count(*) FROM jadpo.deliveries WHERE handled_at IS NOT NULL"), total);
    // One key's calls one at a time, in event order: each call of a key arrived
    // after the one before it had been answered (a call taken back after a kill
    // comes again before the next of its key), and the keys' events in order.
    let ordered = ordered.lock().expect("lock").clone();
    assert_eq!(ordered.len(), KEYS, "every key reached the provider");
    for (key, calls) in &ordered {
        let mut firsts: Vec<usize> = Vec::new();
        for w in calls.windows(2) {
            let ((a, at), (b, bt)) = (w[0], w[1]);
            assert!(b >= a, "key {key}: event {b} called after event {a}: {calls:?}");
            if b > a {
                assert!(
                    bt.duration_since(at) >= ORDERED_ANSWER,
                    "key {key}: event {b} called {:?} after event {a}, before {a} was answered",
                    bt.duration_since(at)
                );
            }
        }
        for &(n, _) in calls {
            if firsts.last() != Some(&n) {
                firsts.push(n);
            }
        }
        let expected: Vec<usize> = (0..PAID).filter(|i| format!("k{}", i % KEYS) == *key).collect();
        assert_eq!(firsts, expected, "key {key}: every event, once each in order (repeats only back to back)");
    }
    // The outage: one alert, across three processes and their restarts.
    assert_eq!(pages.lock().expect("lock").len(), PINGS);
    assert_eq!(sql.count("SELECT coalesce(sum(alerts), 0)::bigint FROM jadpo.circuit_breakers"), 1);
    assert_eq!(logs.matches("\"event\":\"delivery.alert\"").count(), 1, "{logs}");
    // One run per due time: no more runs than due times have passed, and no run
    // called twice.
    let rows = sql.query(
        "SELECT runs, first_seen, (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now \
         FROM jadpo.schedules",
    );
    let (runs, first_seen, now): (i64, i64, i64) = (rows[0].get(0), rows[0].get(1), rows[0].get(2));
    assert!(runs >= 2 && runs <= (now - first_seen) / 2_000, "{runs} runs in {}ms", now - first_seen);
    assert!(*beats.lock().expect("lock") as i64 <= runs);
    eprintln!("faults test: {:?} in all (server restarted: {restarted})", began.elapsed());
}
