//! The conductor's transitions, as tables: at each time (ms from the start), what
//! comes in, the actions it answers with, and when it next wakes of itself.

use super::*;

/// An outcome: its delivery and when its lease ends.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Out(u32, Option<i64>);

impl Leased for Out {
    fn lease_until_ms(&self) -> Option<i64> {
        self.1
    }
}

/// An outcome whose lease ends long after the tests' times.
fn out(id: u32) -> Out {
    Out(id, Some(i64::MAX))
}

type In = Input<Out, u32, &'static str>;
type Act = Action<Out, u32, &'static str>;

/// What comes in at a row's time.
enum Step {
    /// Nothing but the time.
    Time,
    /// An input.
    Given(In),
}
use Step::{Given, Time};

fn error() -> StoreError {
    StoreError::Foreign { path: "the store".into() }
}

fn fault(task: &str) -> InternalFault {
    InternalFault { task: task.into(), message: "boom".into() }
}

fn claimed(run: &[u32], changed: usize, waiting: usize) -> Step {
    Given(Input::Claimed { written: 0, run: run.to_vec(), changed, waiting })
}

fn claim(limit: usize, outcomes: &[u32]) -> Act {
    Action::Claim { limit, outcomes: outcomes.iter().map(|&id| out(id)).collect() }
}

fn record(outcomes: &[u32]) -> Act {
    Action::Record { outcomes: outcomes.iter().map(|&id| out(id)).collect() }
}

fn finished(id: u32) -> Step {
    Given(Input::AttemptEnded(Ended::Finished(out(id))))
}

/// Eight permits, claims of four, a poll of 100 ms, expansions of 10 events,
/// a grace period of 1 s.
fn settings(one_writer: bool) -> Settings {
    Settings {
        in_flight: 8,
        claim_most: 4,
        one_writer,
        poll: Duration::from_millis(100),
        expand_limit: 10,
        prune_older_than_ms: None,
        grace: Duration::from_secs(1),
    }
}

/// The rows that start a run at 0 ms: its start, then the listen, the first
/// tick, expansion and claim; the listen, tick and expansion come back at once
/// (the expansion empty: the next after the poll, at 100 ms).
fn started(claim_limit: usize) -> Vec<(u64, Step, Vec<Act>, Option<u64>)> {
    vec![
        (0, Time, vec![Action::Start], None),
        (
            0,
            Given(Input::Started),
            vec![Action::Listen, Action::Tick, Action::Expand { limit: 10 }, claim(claim_limit, &[])],
            None,
        ),
        (0, Given(Input::Listened(Ok(()))), vec![], None),
        (0, Given(Input::Ticked(Ok(vec![]))), vec![], Some(1_000)),
        (0, Given(Input::Expanded(Ok(0))), vec![], Some(100)),
    ]
}

/// Runs `rows` on a conductor with `settings`; returns it for a last look.
fn run(settings: Settings, rows: Vec<(u64, Step, Vec<Act>, Option<u64>)>) -> Conductor<Out, u32, &'static str> {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut c = Conductor::new(settings);
    for (i, (ms, step, actions, wake)) in rows.into_iter().enumerate() {
        let shown = match &step {
            Time => "the time".to_string(),
            Given(input) => format!("{input:?}"),
        };
        match step {
            Time => c.handle_timeout(at(ms)),
            Given(input) => c.handle(at(ms), input),
        }
        let done: Vec<Act> = std::iter::from_fn(|| c.poll_action()).collect();
        assert_eq!(done, actions, "row {i}, at {ms} ms, on {shown}: the actions");
        let woken = c.next_wake().map(|t| u64::try_from(t.duration_since(t0).as_millis()).unwrap_or(u64::MAX));
        assert_eq!(woken, wake, "row {i}, at {ms} ms, on {shown}: the next wake (ms)");
    }
    c
}

#[test]
fn a_full_claim_is_followed_at_once_by_the_next_and_a_drained_one_sleeps_until_the_poll_at_most() {
    let mut rows = started(4);
    rows.extend([
        // A full claim: its attempts start and the next claim takes the permits left.
        (1, claimed(&[1, 2, 3, 4], 4, 0), vec![Action::StartAttempts(vec![1, 2, 3, 4]), claim(4, &[])], Some(100)),
        // It drains what is due: the next due time is read.
        (2, claimed(&[5], 1, 0), vec![Action::StartAttempts(vec![5]), Action::ReadNextDue], Some(100)),
        // Due at 50 ms, before the poll (2 + 100): the claims sleep until then.
        (3, Given(Input::NextDue(Ok(Some(Instant::now() + Duration::from_secs(3600))))), vec![], Some(100)),
    ]);
    // The row above gave a time far off: the poll (the claim's 2 ms + 100 ms)
    // comes first, with the expansion's 100 ms. Then the claim takes what is free.
    rows.extend([(102, Time, vec![Action::Expand { limit: 10 }, claim(3, &[])], Some(1_000))]);
    run(settings(false), rows);
}

#[test]
fn a_drained_claim_sleeps_until_the_next_due_time_when_it_comes_before_the_poll() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut c: Conductor<Out, u32, &'static str> = Conductor::new(settings(false));
    c.handle_timeout(t0);
    c.handle(t0, Input::Started);
    c.handle(t0, Input::Listened(Ok(())));
    c.handle(t0, Input::Ticked(Ok(vec![])));
    c.handle(t0, Input::Expanded(Ok(0)));
    c.handle(at(1), Input::Claimed { written: 0, run: vec![], changed: 0, waiting: 0 });
    let actions: Vec<Act> = std::iter::from_fn(|| c.poll_action()).collect();
    assert_eq!(actions.last(), Some(&Action::ReadNextDue));
    c.handle(at(2), Input::NextDue(Ok(Some(at(50)))));
    assert_eq!(c.next_wake(), Some(at(50)));
    c.handle_timeout(at(50));
    assert_eq!(c.poll_action(), Some(claim(4, &[])));
    // Nothing due at all: the poll after the claim's time.
    c.handle(at(51), Input::Claimed { written: 0, run: vec![], changed: 0, waiting: 0 });
    assert_eq!(c.poll_action(), Some(Action::ReadNextDue));
    c.handle(at(52), Input::NextDue(Ok(None)));
    assert_eq!(c.next_wake(), Some(at(100)), "the expansion's poll, before the claim's at 151 ms");
    c.handle(at(52), Input::WorkDue);
    assert_eq!(c.poll_action(), Some(claim(4, &[])), "work due wakes the idle claim at once");
}

#[test]
fn work_made_due_during_a_claim_is_claimed_after_it_rather_than_slept_on() {
    let mut rows = started(4);
    rows.extend([
        (1, Given(Input::WorkDue), vec![], Some(100)),
        // Drained, but work came meanwhile: claim again, no read of the next due time.
        (2, claimed(&[], 0, 0), vec![claim(4, &[])], Some(100)),
        (3, claimed(&[], 0, 0), vec![Action::ReadNextDue], Some(100)),
        // Work due while the next due time is read: claim once it is back.
        (4, Given(Input::WorkDue), vec![], Some(100)),
        (5, Given(Input::NextDue(Ok(None))), vec![claim(4, &[])], Some(100)),
    ]);
    run(settings(false), rows);
}

#[test]
fn deliveries_left_waiting_for_a_slot_wait_for_a_wake_or_the_poll_not_their_time() {
    let mut rows = started(4);
    rows.extend([
        // The claim was made at 0 ms: the next at the poll, 100 ms.
        (10, claimed(&[1], 2, 1), vec![Action::StartAttempts(vec![1])], Some(100)),
        (100, Time, vec![Action::Expand { limit: 10 }, claim(4, &[])], Some(1_000)),
    ]);
    run(settings(false), rows);
}

#[test]
fn a_claim_runs_no_more_deliveries_than_its_permits() {
    let mut rows = started(4);
    rows.extend([(
        1,
        claimed(&[1, 2, 3, 4, 5, 6], 6, 0),
        vec![Action::StartAttempts(vec![1, 2, 3, 4]), claim(4, &[])],
        Some(100),
    )]);
    let c = run(settings(false), rows);
    assert_eq!(c.permits_free, 0);
    assert_eq!(c.attempts_running, 4);
}

#[test]
fn without_one_writer_every_outcome_is_recorded_as_it_comes_one_record_at_a_time() {
    let mut rows = started(4);
    rows.extend([
        (1, claimed(&[1, 2, 3, 4], 4, 0), vec![Action::StartAttempts(vec![1, 2, 3, 4]), claim(4, &[])], Some(100)),
        (2, finished(1), vec![record(&[1])], Some(100)),
        (3, finished(2), vec![], Some(100)),
        (4, finished(3), vec![], Some(100)),
        (5, Given(Input::Recorded { written: 1 }), vec![record(&[2, 3])], Some(100)),
        // A failed record: its outcomes back in front, less those whose lease
        // ended; the next record after the pause (1 s).
        (
            6,
            Given(Input::RecordFailed { error: error(), outcomes: vec![out(2), Out(3, Some(5))], now_ms: 5 }),
            vec![],
            Some(100),
        ),
        (7, finished(4), vec![], Some(100)),
        (1_006, Time, vec![Action::Tick, Action::Expand { limit: 10 }, record(&[2, 4])], None),
    ]);
    run(settings(false), rows);
}

#[test]
fn with_one_writer_outcomes_go_with_the_next_claim_or_alone_when_no_claim_is_under_way() {
    let mut rows = started(4);
    rows.extend([
        (1, claimed(&[1, 2, 3, 4], 4, 0), vec![Action::StartAttempts(vec![1, 2, 3, 4]), claim(4, &[])], Some(100)),
        // A claim is under way: the outcome is left to the next, for 10 ms at most.
        (2, finished(1), vec![], Some(12)),
        // That claim drained what is due: its next due time is read, no claim
        // is under way, the outcome is written alone.
        (3, claimed(&[], 0, 0), vec![Action::ReadNextDue, record(&[1])], Some(100)),
        (4, Given(Input::NextDue(Ok(None))), vec![], Some(100)),
        (5, finished(2), vec![], Some(100)),
        // Work due: the claim takes the outcome waiting.
        (6, Given(Input::WorkDue), vec![claim(4, &[2])], Some(100)),
        (7, Given(Input::Recorded { written: 1 }), vec![], Some(100)),
        (
            8,
            Given(Input::Claimed { written: 1, run: vec![], changed: 1, waiting: 0 }),
            vec![Action::ReadNextDue],
            Some(100),
        ),
    ]);
    let mut c = run(settings(true), rows);
    assert_eq!(c.result(), Ok(RunSummary { recorded: 2, abandoned: 0 }));
}

#[test]
fn with_one_writer_an_outcome_waits_for_the_claim_at_most_left_to_claims() {
    // One permit in all: the claim waits for it while the attempt runs.
    let one = Settings { in_flight: 1, claim_most: 1, ..settings(true) };
    let rows = vec![
        (0, Time, vec![Action::Start], None),
        (
            0,
            Given(Input::Started),
            vec![Action::Listen, Action::Tick, Action::Expand { limit: 10 }, claim(1, &[])],
            None,
        ),
        (0, Given(Input::Listened(Ok(()))), vec![], None),
        (0, Given(Input::Ticked(Ok(vec!["nightly"]))), vec![], Some(1_000)),
        (0, Given(Input::Expanded(Ok(0))), vec![], Some(100)),
        (1, claimed(&[1], 1, 0), vec![Action::StartAttempts(vec![1])], Some(100)),
        // The attempt ends: its permit goes to the schedule run waiting first,
        // and the claim waits on; the outcome is left to it for 10 ms.
        (2, finished(1), vec![Action::RunSchedule("nightly")], Some(12)),
        (12, Time, vec![record(&[1])], Some(100)),
    ];
    run(one, rows);
}

#[test]
fn with_one_writer_a_claim_of_a_few_waits_a_moment_for_a_quarter_of_its_permits() {
    // Claims of up to 8: a quarter is 2.
    let wide = Settings { in_flight: 16, claim_most: 8, ..settings(true) };
    let rows = vec![
        (0, Time, vec![Action::Start], None),
        (
            0,
            Given(Input::Started),
            vec![Action::Listen, Action::Tick, Action::Expand { limit: 10 }, claim(8, &[])],
            None,
        ),
        (0, Given(Input::Listened(Ok(()))), vec![], None),
        (0, Given(Input::Ticked(Ok(vec![]))), vec![], Some(1_000)),
        (0, Given(Input::Expanded(Ok(0))), vec![], Some(100)),
        (
            1,
            claimed(&[1, 2, 3, 4, 5, 6, 7, 8], 8, 0),
            vec![Action::StartAttempts(vec![1, 2, 3, 4, 5, 6, 7, 8]), claim(8, &[])],
            Some(100),
        ),
        (
            2,
            claimed(&[11, 12, 13, 14, 15, 16, 17, 18], 8, 0),
            vec![Action::StartAttempts(vec![11, 12, 13, 14, 15, 16, 17, 18])],
            Some(100),
        ),
        // One permit back: fewer than a quarter; the claim waits 2 ms for more.
        (3, finished(1), vec![], Some(5)),
        (4, finished(2), vec![claim(2, &[1, 2])], Some(100)),
        (5, claimed(&[21, 22], 2, 0), vec![Action::StartAttempts(vec![21, 22])], Some(100)),
        (6, finished(3), vec![], Some(8)),
        // None more came: it claims with the one.
        (8, Time, vec![claim(1, &[3])], Some(100)),
    ];
    run(wide, rows);
}

#[test]
fn the_pause_after_store_errors_doubles_up_to_its_most_and_starts_over_after_a_success() {
    let mut backoff = Backoff::default();
    let pauses: Vec<u64> = (0..6).map(|_| backoff.next_pause().as_millis() as u64).collect();
    assert_eq!(pauses, [1_000, 2_000, 4_000, 5_000, 5_000, 5_000]);
    backoff.reset();
    assert_eq!(backoff.next_pause(), Duration::from_millis(STORE_ERROR_PAUSE_MS));
}

#[test]
fn a_claim_that_fails_pauses_the_claims_longer_with_each_error_until_one_succeeds() {
    // A poll of a minute: the expansion stays out of the way.
    let quiet = Settings { poll: Duration::from_secs(60), ..settings(false) };
    let failed = || Given(Input::ClaimFailed { error: error(), outcomes: vec![], now_ms: 0 });
    let rows = vec![
        (0, Time, vec![Action::Start], None),
        (
            0,
            Given(Input::Started),
            vec![Action::Listen, Action::Tick, Action::Expand { limit: 10 }, claim(4, &[])],
            None,
        ),
        (0, Given(Input::Listened(Ok(()))), vec![], None),
        (0, Given(Input::Expanded(Ok(0))), vec![], Some(60_000)),
        (0, Given(Input::Ticked(Ok(vec![]))), vec![], Some(1_000)),
        // Its permits back; the next claim after 1 s.
        (1, failed(), vec![], Some(1_000)),
        (1_000, Time, vec![Action::Tick], Some(1_001)),
        (1_000, Given(Input::Ticked(Ok(vec![]))), vec![], Some(1_001)),
        (1_001, Time, vec![claim(4, &[])], Some(2_000)),
        // Then after 2 s.
        (1_002, failed(), vec![], Some(2_000)),
        (2_000, Time, vec![Action::Tick], Some(3_002)),
        (2_000, Given(Input::Ticked(Ok(vec![]))), vec![], Some(3_000)),
        (3_000, Time, vec![Action::Tick], Some(3_002)),
        (3_000, Given(Input::Ticked(Ok(vec![]))), vec![], Some(3_002)),
        (3_002, Time, vec![claim(4, &[])], Some(4_000)),
        // A success starts the pauses over: the next error's is 1 s again.
        (3_003, claimed(&[], 4, 0), vec![claim(4, &[])], Some(4_000)),
        (3_004, failed(), vec![], Some(4_000)),
        (4_000, Time, vec![Action::Tick], Some(4_004)),
    ];
    let c = run(quiet, rows);
    assert_eq!(c.permits_free, 8);
}

#[test]
fn the_outcomes_a_failed_claim_was_to_write_come_back_less_those_whose_lease_ended() {
    let mut rows = started(4);
    rows.extend([
        (1, claimed(&[1, 2], 2, 0), vec![Action::StartAttempts(vec![1, 2]), Action::ReadNextDue], Some(100)),
        (2, Given(Input::NextDue(Ok(None))), vec![], Some(100)),
        (3, Given(Input::WorkDue), vec![claim(4, &[])], Some(100)),
        (4, finished(1), vec![], Some(14)),
        (5, Given(Input::AttemptEnded(Ended::Finished(Out(2, Some(20))))), vec![], Some(14)),
        (
            6,
            Given(Input::ClaimFailed {
                error: error(),
                outcomes: vec![out(7), Out(8, Some(30)), Out(9, None)],
                now_ms: 30,
            }),
            // Back in front of those that came since; the claims pause, so they
            // are written alone.
            vec![Action::Record { outcomes: vec![out(7), out(1), Out(2, Some(20))] }],
            Some(100),
        ),
    ]);
    run(settings(true), rows);
}

#[test]
fn the_tick_runs_every_second_and_further_apart_after_errors_and_the_expansion_after_a_full_batch_at_once() {
    // A poll of a minute: the claims and the expansion's polls stay out of the way.
    let quiet = Settings { poll: Duration::from_secs(60), ..settings(false) };
    let rows = vec![
        (0, Time, vec![Action::Start], None),
        (
            0,
            Given(Input::Started),
            vec![Action::Listen, Action::Tick, Action::Expand { limit: 10 }, claim(4, &[])],
            None,
        ),
        (0, Given(Input::Listened(Ok(()))), vec![], None),
        // A full batch: the next expansion at once; after an error, 1 s after
        // the failed one began.
        (0, Given(Input::Expanded(Ok(10))), vec![Action::Expand { limit: 10 }], None),
        (0, Given(Input::Expanded(Err(error()))), vec![], Some(1_000)),
        (0, claimed(&[], 0, 0), vec![Action::ReadNextDue], Some(1_000)),
        (0, Given(Input::NextDue(Ok(None))), vec![], Some(1_000)),
        // The error's pause (1 s) is no longer than the tick's.
        (0, Given(Input::Ticked(Err(error()))), vec![], Some(1_000)),
        (1_000, Time, vec![Action::Tick, Action::Expand { limit: 10 }], Some(60_000)),
        (1_000, Given(Input::Expanded(Ok(0))), vec![], Some(60_000)),
        (1_000, Given(Input::Ticked(Err(error()))), vec![], Some(3_000)),
        (3_000, Time, vec![Action::Tick], Some(60_000)),
        (3_000, Given(Input::Ticked(Err(error()))), vec![], Some(7_000)),
        (7_000, Time, vec![Action::Tick], Some(60_000)),
        // A success: every second again. Its schedule run takes a permit.
        (7_000, Given(Input::Ticked(Ok(vec!["nightly"]))), vec![Action::RunSchedule("nightly")], Some(8_000)),
    ];
    run(quiet, rows);
}

#[test]
fn the_prune_runs_at_start_and_every_retain_period() {
    let retain = Settings { prune_older_than_ms: Some(7_000), ..settings(false) };
    let every = RETAIN_EVERY_MS;
    let rows = vec![
        (0, Time, vec![Action::Start], None),
        (
            0,
            Given(Input::Started),
            vec![
                Action::Listen,
                Action::Tick,
                Action::Expand { limit: 10 },
                Action::Prune { older_than_ms: 7_000 },
                claim(4, &[]),
            ],
            None,
        ),
        (0, Given(Input::Listened(Ok(()))), vec![], None),
        (0, Given(Input::Pruned(Err(error()))), vec![], Some(every)),
    ];
    run(retain, rows);
}

#[test]
fn a_start_that_fails_is_tried_again_after_a_growing_pause_and_a_stop_then_ends_the_run() {
    let rows = vec![
        (0, Time, vec![Action::Start], None),
        (0, Given(Input::StartFailed(error())), vec![], Some(1_000)),
        (1_000, Time, vec![Action::Start], None),
        (1_000, Given(Input::StartFailed(error())), vec![], Some(3_000)),
        (1_500, Given(Input::StopAsked), vec![], None),
    ];
    let mut c = run(settings(false), rows);
    assert!(c.is_done());
    assert_eq!(c.result(), Ok(RunSummary::default()));
}

#[test]
fn a_stop_during_the_start_call_waits_for_it_and_a_started_process_says_it_stopped() {
    let rows = vec![
        (0, Time, vec![Action::Start], None),
        (1, Given(Input::StopAsked), vec![], None),
        // Started: no claim; the listen under way comes back, then the stop is said.
        (2, Given(Input::Started), vec![Action::Listen], None),
        (3, Given(Input::Listened(Err(error()))), vec![Action::MarkStopped], None),
        (4, Given(Input::MarkedStopped(Ok(()))), vec![], None),
    ];
    let mut c = run(settings(false), rows);
    assert!(c.is_done());
    assert_eq!(c.result(), Ok(RunSummary::default()));
}

#[test]
fn a_stop_lets_running_attempts_finish_writes_their_outcomes_then_says_the_process_stopped() {
    let mut rows = started(4);
    rows.extend([
        (1, claimed(&[1, 2, 3, 4], 4, 0), vec![Action::StartAttempts(vec![1, 2, 3, 4]), claim(4, &[])], Some(100)),
        // The stop: no new claim, tick or expansion. The claim under way comes
        // back, its deliveries start; the grace period starts then.
        (2, Given(Input::StopAsked), vec![], None),
        (3, claimed(&[5, 6], 2, 0), vec![Action::StartAttempts(vec![5, 6])], Some(1_003)),
        // With one writer and no claim any more, outcomes are written as they come.
        (4, finished(1), vec![record(&[1])], Some(1_003)),
        (5, Given(Input::WorkDue), vec![], Some(1_003)),
        (6, finished(2), vec![], Some(1_003)),
        (7, Given(Input::Recorded { written: 1 }), vec![record(&[2])], Some(1_003)),
        (8, Given(Input::RecordFailed { error: error(), outcomes: vec![out(2)], now_ms: 8 }), vec![], Some(1_003)),
        (9, finished(3), vec![], Some(1_003)),
        (10, finished(4), vec![], Some(1_003)),
        (11, finished(5), vec![], Some(1_003)),
        // Every attempt ended: the outcomes left are written after the pause.
        (12, finished(6), vec![], Some(1_008)),
        (1_008, Time, vec![record(&[2, 3, 4, 5, 6])], None),
        (1_009, Given(Input::Recorded { written: 5 }), vec![Action::MarkStopped], None),
        (1_010, Given(Input::MarkedStopped(Ok(()))), vec![], None),
    ]);
    let mut c = run(settings(true), rows);
    assert!(c.is_done());
    assert_eq!(c.result(), Ok(RunSummary { recorded: 6, abandoned: 0 }));
}

#[test]
fn a_stop_cuts_off_what_still_runs_once_the_grace_period_is_over() {
    let mut rows = started(4);
    rows.extend([
        (1, claimed(&[1, 2], 2, 0), vec![Action::StartAttempts(vec![1, 2]), Action::ReadNextDue], Some(100)),
        (2, Given(Input::Ticked(Ok(vec![]))), vec![], Some(100)),
        (3, Given(Input::StopAsked), vec![], None),
        // The next due time's read was under way: the grace period starts once
        // it is back.
        (4, Given(Input::NextDue(Ok(None))), vec![], Some(1_004)),
        (5, finished(1), vec![record(&[1])], Some(1_004)),
        (6, Given(Input::Recorded { written: 1 }), vec![], Some(1_004)),
        (1_004, Time, vec![Action::CutRunning], None),
        (1_005, Given(Input::AttemptEnded(Ended::Cut)), vec![Action::MarkStopped], None),
        (1_006, Given(Input::MarkedStopped(Err(error()))), vec![], None),
    ]);
    let mut c = run(settings(false), rows);
    assert_eq!(c.result(), Ok(RunSummary { recorded: 1, abandoned: 1 }));
}

#[test]
fn a_panic_stops_the_run_and_is_its_result() {
    let mut rows = started(4);
    rows.extend([
        (1, claimed(&[1], 1, 0), vec![Action::StartAttempts(vec![1]), Action::ReadNextDue], Some(100)),
        // The attempt's call panicked: its outcome is still written (as the
        // defect), and the run stops.
        (2, Given(Input::Fault(fault("the call of delivery 1"))), vec![], None),
        (3, finished(1), vec![record(&[1])], None),
        (4, Given(Input::NextDue(Ok(None))), vec![], None),
        (5, Given(Input::Recorded { written: 1 }), vec![Action::MarkStopped], None),
        // A later panic is logged but the first is the result.
        (6, Given(Input::Panicked { call: Call::MarkStopped, fault: fault("the store's stop") }), vec![], None),
    ]);
    let mut c = run(settings(false), rows);
    assert!(c.is_done());
    assert_eq!(c.result(), Err(fault("the call of delivery 1")));
}

#[test]
fn a_store_call_that_panics_gives_its_permits_back_and_stops_the_run() {
    let mut rows = started(4);
    rows.extend([
        (
            1,
            Given(Input::Panicked { call: Call::Claim, fault: fault("the store's claim") }),
            vec![Action::MarkStopped],
            None,
        ),
        (2, Given(Input::MarkedStopped(Ok(()))), vec![], None),
    ]);
    let mut c = run(settings(false), rows);
    assert_eq!(c.permits_free, 8);
    assert_eq!(c.result(), Err(fault("the store's claim")));
}

#[test]
fn schedule_runs_take_free_permits_before_a_claim_and_are_cut_off_like_attempts() {
    let mut rows = started(4);
    rows.extend([
        (1, claimed(&[1, 2, 3, 4], 4, 0), vec![Action::StartAttempts(vec![1, 2, 3, 4]), claim(4, &[])], Some(100)),
        (2, claimed(&[5, 6, 7], 3, 0), vec![Action::StartAttempts(vec![5, 6, 7]), Action::ReadNextDue], Some(100)),
        (3, Given(Input::NextDue(Ok(None))), vec![], Some(100)),
        (1_000, Time, vec![Action::Tick, Action::Expand { limit: 10 }, claim(1, &[])], None),
        // No permit free: the schedule runs wait.
        (1_001, Given(Input::Ticked(Ok(vec!["a", "b"]))), vec![], Some(2_001)),
        (1_002, Given(Input::Expanded(Ok(0))), vec![], Some(1_100)),
        // The claim's permit, unused, goes to the first.
        (1_003, claimed(&[], 0, 0), vec![Action::ReadNextDue, Action::RunSchedule("a")], Some(1_100)),
        (1_004, Given(Input::StopAsked), vec![], None),
        (1_005, Given(Input::NextDue(Ok(None))), vec![], Some(2_005)),
        (1_006, finished(1), vec![Action::RunSchedule("b"), record(&[1])], Some(2_005)),
        (2_005, Time, vec![Action::CutRunning], None),
    ]);
    let mut c = run(settings(false), rows);
    for _ in 0..6 {
        c.handle(Instant::now(), Input::AttemptEnded(Ended::Cut));
    }
    c.handle(Instant::now(), Input::ScheduleRunEnded(Ended::Finished(Ok(()))));
    c.handle(Instant::now(), Input::ScheduleRunEnded(Ended::Cut));
    c.handle(Instant::now(), Input::Recorded { written: 1 });
    assert_eq!(c.poll_action(), Some(Action::MarkStopped));
    c.handle(Instant::now(), Input::MarkedStopped(Ok(())));
    assert_eq!(c.result(), Ok(RunSummary { recorded: 1, abandoned: 7 }));
}

#[test]
fn inputs_name_their_store_error_and_their_fault() {
    let failed: In = Input::Ticked(Err(error()));
    assert_eq!(failed.store_error().map(ToString::to_string), Some(error().to_string()));
    assert!(failed.fault().is_none());
    let panicked: In = Input::AttemptEnded(Ended::Panicked(fault("an attempt")));
    assert_eq!(panicked.fault(), Some(&fault("an attempt")));
    assert!(panicked.store_error().is_none());
    let record_failed: In = Input::ScheduleRunEnded(Ended::Finished(Err(error())));
    assert!(record_failed.store_error().is_some());
    let fine: In = Input::Claimed { written: 0, run: vec![], changed: 0, waiting: 0 };
    assert!(fine.store_error().is_none() && fine.fault().is_none());
}

#[test]
fn the_outcomes_of_attempts_that_ended_together_are_written_in_one_record() {
    let mut rows = started(4);
    rows.extend([(
        1,
        claimed(&[1, 2, 3], 3, 0),
        vec![Action::StartAttempts(vec![1, 2, 3]), Action::ReadNextDue],
        Some(100),
    )]);
    let mut c = run(settings(false), rows);
    let now = Instant::now();
    c.handle_all(now, [1, 2, 3].map(|id| Input::AttemptEnded(Ended::Finished(out(id)))));
    assert_eq!(c.poll_action(), Some(record(&[1, 2, 3])));
    assert_eq!(c.poll_action(), None);
}
