//! `jadpoc deliveries`: list deliveries, show one with its attempts, and the
//! operator's retry and skip. Works while a `jadpoc run` holds the store.

use crate::args::{Format, FormatArg};
use crate::store::{DbArg, Open, open_store};
use crate::views;
use jadpo_check::program::DeliveryState;
use jadpo_core::store::{Actions, DeliveryDetail, DeliveryFilter, RetryResult, SkipResult};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct DeliveriesArgs {
    #[command(subcommand)]
    command: Option<DeliveriesCommand>,
    /// Only deliveries in this state.
    #[arg(long, value_name = "STATE")]
    state: Option<String>,
    /// Only deliveries of this subscriber.
    #[arg(long, value_name = "NAME")]
    subscriber: Option<String>,
    #[command(flatten)]
    format: FormatArg,
    #[command(flatten)]
    db: DbArg,
}

#[derive(clap::Subcommand)]
enum DeliveriesCommand {
    /// Show one delivery with its attempts.
    Show {
        /// The delivery's id.
        id: i64,
    },
    /// Retry failed, parked, skipped or orphaned deliveries with a fresh budget.
    Retry {
        /// The deliveries' ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// Skip pending, held, parked or orphaned deliveries: each ends `skipped`,
    /// and the deliveries of its key that wait on it (`order_by:`) go on.
    Skip {
        /// The deliveries' ids.
        #[arg(required_unless_present = "subscriber", conflicts_with = "subscriber")]
        ids: Vec<i64>,
        /// Every orphaned delivery of this subscriber (one no running process's
        /// program has) instead.
        #[arg(long, value_name = "NAME")]
        subscriber: Option<String>,
    },
}

pub fn run(args: DeliveriesArgs) -> ExitCode {
    let state = match args.state.as_deref().map(|s| DeliveryState::parse(s).ok_or(s)).transpose() {
        Ok(s) => s,
        Err(bad) => {
            let all: Vec<&str> = DeliveryState::ALL.iter().map(|s| s.as_str()).collect();
            eprintln!("jadpoc: `--state {bad}` is not a state (one of {})", all.join(", "));
            return ExitCode::from(2);
        }
    };
    // Listings only read; a retry or a skip changes rows.
    let how = match args.command {
        Some(DeliveriesCommand::Retry { .. } | DeliveriesCommand::Skip { .. }) => Open::Existing,
        _ => Open::ReadOnly,
    };
    let store = match open_store(&args.db, how) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let fail = |e: jadpo_core::store::StoreError| {
        eprintln!("jadpoc: {e}");
        ExitCode::from(2)
    };
    match args.command {
        None => {
            let filter = DeliveryFilter { state, subscriber: args.subscriber.clone(), ..DeliveryFilter::default() };
            let list = match store.deliveries(&filter) {
                Ok(l) => l,
                Err(e) => return fail(e),
            };
            match args.format.format {
                Format::Json => {
                    crate::print_json(&serde_json::Value::Array(list.iter().map(views::delivery_json).collect()))
                }
                Format::Text => crate::print_lines(&list, "no deliveries", views::delivery_line),
            }
            ExitCode::SUCCESS
        }
        Some(DeliveriesCommand::Show { id }) => match store.delivery(id) {
            Ok(Some(DeliveryDetail { delivery: d, attempts: history })) => {
                match args.format.format {
                    Format::Json => crate::print_json(&views::delivery_with_history_json(&d, &history)),
                    Format::Text => crate::print_stdout(&views::delivery_text(&d, &history)),
                }
                ExitCode::SUCCESS
            }
            Ok(None) => {
                eprintln!("jadpoc: no delivery {id}");
                ExitCode::from(1)
            }
            Err(e) => fail(e),
        },
        Some(DeliveriesCommand::Retry { ids }) => {
            let results = match store.retry(&ids, crate::store::clock_for(&*store).now_ms()) {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
            let mut code = ExitCode::SUCCESS;
            let mut out = Vec::new();
            for (id, r) in ids.iter().zip(&results) {
                let note = match r {
                    RetryResult::Retried => String::new(),
                    RetryResult::NotFound => {
                        code = ExitCode::from(1);
                        format!("no delivery {id}")
                    }
                    RetryResult::NotRetryable(s) => {
                        code = ExitCode::from(1);
                        format!(
                            "delivery {id} is {s}; only failed, parked, skipped or orphaned deliveries can be retried"
                        )
                    }
                };
                match args.format.format {
                    Format::Json => out.push(views::retry_result_json(*id, r)),
                    Format::Text if note.is_empty() => {
                        crate::print_stdout(&format!("delivery {id}: retried with a fresh budget\n"))
                    }
                    Format::Text => eprintln!("jadpoc: {note}"),
                }
            }
            if args.format.format == Format::Json {
                crate::print_json(&serde_json::Value::Array(out));
            }
            code
        }
        Some(DeliveriesCommand::Skip { ids, subscriber }) => {
            let now = crate::store::clock_for(&*store).now_ms();
            let skipped = match subscriber {
                None => store.skip(&ids, now).map(|results| (ids, results)),
                Some(name) => skip_orphans(&*store, &name, now),
            };
            let (ids, results) = match skipped {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
            let mut code = ExitCode::SUCCESS;
            let mut out = Vec::new();
            for (id, r) in ids.iter().zip(&results) {
                let (word, note) = match r {
                    SkipResult::Skipped => ("skipped", String::new()),
                    SkipResult::NotFound => {
                        code = ExitCode::from(1);
                        ("not_found", format!("no delivery {id}"))
                    }
                    SkipResult::NotSkippable(s) => {
                        code = ExitCode::from(1);
                        (
                            "not_skippable",
                            format!(
                                "delivery {id} is {s}; only pending, held, parked or orphaned deliveries can be \
                                 skipped"
                            ),
                        )
                    }
                };
                match args.format.format {
                    Format::Json => out.push(serde_json::json!({"id": id, "result": word})),
                    Format::Text if note.is_empty() => crate::print_stdout(&format!("delivery {id}: skipped\n")),
                    Format::Text => eprintln!("jadpoc: {note}"),
                }
            }
            if args.format.format == Format::Json {
                crate::print_json(&serde_json::Value::Array(out));
            }
            code
        }
    }
}

/// Skip every orphaned delivery of `subscriber`, a batch at a time; the ids
/// skipped (or found changed since) and what became of each.
fn skip_orphans(
    store: &dyn jadpo_core::store::Store,
    subscriber: &str,
    now_ms: i64,
) -> Result<(Vec<i64>, Vec<SkipResult>), jadpo_core::store::StoreError> {
    const BATCH: usize = 500;
    let names = [subscriber.to_string()];
    let (mut ids, mut results) = (Vec::new(), Vec::new());
    loop {
        let batch: Vec<i64> = store.orphans(&names, BATCH)?.into_iter().map(|o| o.id).collect();
        if batch.is_empty() {
            return Ok((ids, results));
        }
        let skipped = store.skip(&batch, now_ms)?;
        // A batch that skipped none (each taken back meanwhile) would be read again.
        let any = skipped.iter().any(|r| matches!(r, SkipResult::Skipped));
        ids.extend(batch);
        results.extend(skipped);
        if !any {
            return Ok((ids, results));
        }
    }
}
