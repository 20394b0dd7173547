//! `jadpoc events`: list events newest first, show one with its payload and
//! deliveries, and replay events to the subscribers the program has today.
//! Listings only read and work while a `jadpoc run` holds the store.

use crate::args::{Format, FormatArg};
use crate::store::{DbArg, Open, open_store, open_views};
use crate::views;
use jadpo_core::clock::{Clock, SystemClock};
use jadpo_core::store::{Actions, EventDetail, EventFilter, EventView, Replay, StoreError, Views};
use serde_json::Value;
use std::path::PathBuf;
use std::process::ExitCode;

/// How many events a listing shows when `--limit` is not given.
pub const DEFAULT_LIMIT: usize = 50;

#[derive(clap::Args)]
pub struct EventsArgs {
    #[command(subcommand)]
    command: Option<EventsCommand>,
    #[command(flatten)]
    select: Select,
    /// At most this many events, newest first.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIMIT)]
    limit: usize,
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    db: DbArg,
}

/// Which events, by name and time.
#[derive(clap::Args, Clone, Default)]
struct Select {
    /// Only events of this name.
    #[arg(long, value_name = "EVENT")]
    name: Option<String>,
    /// Only events stored at or after this time: RFC 3339
    /// (`2026-12-01T09:00:00Z`), or a duration ago (`90m`, `2h`, `7d`).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only events stored before this time (as `--since`).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
}

#[derive(clap::Subcommand)]
enum EventsCommand {
    /// Show one event: its payload, what became of it, and its deliveries.
    Show {
        /// The event's id.
        id: i64,
    },
    /// Deliver events again to the subscribers the program has today, as new
    /// deliveries with fresh budgets, recorded as a replay event of each.
    Replay(ReplayArgs),
}

#[derive(clap::Args)]
struct ReplayArgs {
    /// The events' ids (or choose them with `--since`, and `--name`, `--until`).
    ids: Vec<i64>,
    #[command(flatten)]
    select: Select,
    /// Only to this subscriber.
    #[arg(long, value_name = "NAME")]
    subscriber: Option<String>,
    /// Print what would be made and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// The program's files and folders (`.` when not given); repeat for more.
    #[arg(long, value_name = "PATH")]
    program: Vec<PathBuf>,
}

pub use jadpo_console::replay::parse_time;

impl Select {
    fn filter(&self, now_ms: i64, limit: Option<usize>) -> Result<EventFilter, String> {
        let time = |flag: &str, v: &Option<String>| v.as_deref().map(|t| parse_time(flag, t, now_ms)).transpose();
        Ok(EventFilter {
            name: self.name.clone(),
            since_ms: time("since", &self.since)?,
            until_ms: time("until", &self.until)?,
            limit,
        })
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("jadpoc: {message}");
    ExitCode::from(2)
}

fn store_failed(e: StoreError) -> ExitCode {
    eprintln!("jadpoc: {e}");
    ExitCode::from(2)
}

pub fn run(args: EventsArgs) -> ExitCode {
    let now_ms = SystemClock.now_ms();
    match args.command {
        None => list(&args.select, args.limit, args.format.format, &args.db, now_ms),
        Some(EventsCommand::Show { id }) => show(id, args.format.format, &args.db),
        Some(EventsCommand::Replay(replay)) => replay_events(&replay, args.format.format, &args.db),
    }
}

fn list(select: &Select, limit: usize, format: Format, db: &DbArg, now_ms: i64) -> ExitCode {
    let filter = match select.filter(now_ms, Some(limit)) {
        Ok(f) => f,
        Err(message) => return usage(&message),
    };
    let store = match open_views(db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let list = match store.events(&filter) {
        Ok(l) => l,
        Err(e) => return store_failed(e),
    };
    match format {
        Format::Json => crate::print_json(&Value::Array(list.iter().map(views::event_json).collect())),
        Format::Text => crate::print_lines(&list, "no events", views::event_line),
    }
    ExitCode::SUCCESS
}

fn show(id: i64, format: Format, db: &DbArg) -> ExitCode {
    let store = match open_views(db) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match store.event(id) {
        Ok(Some(EventDetail { event: e, deliveries })) => {
            match format {
                Format::Json => crate::print_json(&views::event_with_deliveries_json(&e, &deliveries)),
                Format::Text => crate::print_stdout(&views::event_text(&e, &deliveries)),
            }
            ExitCode::SUCCESS
        }
        Ok(None) => {
            eprintln!("jadpoc: no event {id}");
            ExitCode::from(1)
        }
        Err(e) => store_failed(e),
    }
}

/// What a replay does with one event: the replay to store, or why it cannot be
/// made.
struct Planned {
    event: EventView,
    outcome: Result<Replay, String>,
}

/// The events a replay names: by id (each must exist), or by name and time
/// (replays themselves left out, oldest first).
fn chosen(store: &dyn Views, args: &ReplayArgs, now_ms: i64) -> Result<Vec<Result<EventView, i64>>, ExitCode> {
    let by_time = args.select.since.is_some() || args.select.until.is_some() || args.select.name.is_some();
    if args.ids.is_empty() != by_time {
        return Err(usage(
            "name the events to replay: `jadpoc events replay ID...`, or `--since TIME` (with \
                          `--name EVENT`, `--until TIME`)",
        ));
    }
    if args.ids.is_empty() {
        if args.select.since.is_none() {
            return Err(usage("a replay by name or time needs `--since TIME`"));
        }
        let filter = args.select.filter(now_ms, None).map_err(|m| usage(&m))?;
        let mut found = store.events(&filter).map_err(store_failed)?;
        found.retain(|e| e.replay_of.is_none());
        found.reverse();
        return Ok(found.into_iter().map(Ok).collect());
    }
    let mut out = Vec::with_capacity(args.ids.len());
    for &id in &args.ids {
        match store.event(id).map_err(store_failed)? {
            Some(found) => out.push(Ok(found.event)),
            None => out.push(Err(id)),
        }
    }
    Ok(out)
}

fn replay_events(args: &ReplayArgs, format: Format, db: &DbArg) -> ExitCode {
    let program = match crate::load::program_for_run(&args.program) {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let Some(s) = &args.subscriber
        && !program.subscribers.iter().any(|sub| sub.name == *s)
    {
        return usage(&format!("the program has no subscriber `{s}`"));
    }
    // A dry run only reads.
    let how = if args.dry_run { Open::ReadOnly } else { Open::Existing };
    let store = match open_store(db, how) {
        Ok(s) => s,
        Err(code) => return code,
    };
    // The store's clock (the database's on PostgreSQL): the replays are due now
    // for every process.
    let now_ms = crate::store::clock_for(&*store).now_ms();
    let chosen = match chosen(&*store, args, now_ms) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut missing = Vec::new();
    let mut planned = Vec::new();
    for found in chosen {
        match found {
            Ok(event) => {
                let outcome = jadpo_console::replay::plan(&program, &event, args.subscriber.as_deref());
                planned.push(Planned { event, outcome });
            }
            Err(id) => missing.push(id),
        }
    }
    let replays: Vec<Replay> = planned.iter().filter_map(|p| p.outcome.as_ref().ok().cloned()).collect();
    let ids = if args.dry_run || replays.is_empty() {
        Vec::new()
    } else {
        match store.replay(&replays, now_ms) {
            Ok(ids) => ids,
            Err(e) => return store_failed(e),
        }
    };
    report(&planned, &missing, &ids, args.dry_run, format);
    let refused = !missing.is_empty() || planned.iter().any(|p| p.outcome.is_err());
    if refused { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// Print what the replay did (or would do): a line, or a JSON object, per event.
fn report(planned: &[Planned], missing: &[i64], ids: &[i64], dry_run: bool, format: Format) {
    let mut new_ids = ids.iter();
    let mut json_out = Vec::new();
    let mut text = String::new();
    for p in planned {
        let e = &p.event;
        match &p.outcome {
            Ok(r) => {
                let subscribers: Vec<String> = r.event.deliveries.iter().map(|d| d.subscriber.clone()).collect();
                let replay_id = if dry_run { None } else { new_ids.next().copied() };
                match replay_id {
                    Some(id) => text.push_str(&format!(
                        "event {} {}: replayed as event {id} to {}\n",
                        e.id,
                        e.name,
                        subscribers.join(", ")
                    )),
                    None => text.push_str(&format!(
                        "event {} {}: would replay to {}\n",
                        e.id,
                        e.name,
                        subscribers.join(", ")
                    )),
                }
                json_out.push(views::replay_json(e.id, Some(&e.name), &subscribers, replay_id, None));
            }
            Err(message) => {
                eprintln!("jadpoc: {message}");
                json_out.push(views::replay_json(e.id, Some(&e.name), &[], None, Some(message)));
            }
        }
    }
    for id in missing {
        eprintln!("jadpoc: no event {id}");
        json_out.push(views::replay_json(*id, None, &[], None, Some(&format!("no event {id}"))));
    }
    match format {
        Format::Json => crate::print_json(&Value::Array(json_out)),
        Format::Text if planned.is_empty() && missing.is_empty() => crate::print_stdout("no events to replay\n"),
        Format::Text => crate::print_stdout(&text),
    }
}
