//! Drivers perform an action's call behind [`Driver`]: the fake driver (scripted
//! answers) here, the HTTP driver in `jadpo_http::client`.

use crate::clock::BoxFuture;
use crate::codes::RuntimeCode;
use crate::rules::{self, CallFailure, Outcome};
use jadpo_check::program::{Answer, FailureKind, FakeAnswer};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One call of an action, as a driver receives it.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The action's name.
    pub action: String,
    /// Its arguments, by parameter name.
    pub args: serde_json::Value,
    /// The event's id (none for a schedule's run).
    pub event_id: Option<i64>,
    /// The event's name, or the schedule's name for a schedule's run.
    pub event: String,
    /// The delivery's id (none for a schedule's run); the `Idempotency-Key`.
    pub delivery: Option<i64>,
    /// The attempt's number.
    pub attempt: u32,
}

/// Performs calls through one connection.
pub trait Driver: Send + Sync {
    /// Make the call and say how it ended. The run's time limit is the caller's:
    /// a call that never ends is cut off outside the driver.
    fn call(&self, request: CallRequest) -> BoxFuture<'_, Outcome>;

    /// Make the call as [`Driver::call`] does, telling `sent` when its request may
    /// have reached the provider, so that the run's time limit, passing while the
    /// call is in flight, ends it as [`SendMark::at_time_limit`] says; `sent` also
    /// carries that limit ([`SendMark::deadline`]), for the driver's own waits. A
    /// driver that never reaches outside (the fake) keeps the default: never sent.
    fn call_marked(&self, request: CallRequest, sent: SendMark) -> BoxFuture<'_, Outcome> {
        let _ = sent;
        self.call(request)
    }
}

/// Whether a call's request may have reached the provider: set by the driver, read
/// by the run's time limit; and when that limit passes. Clones share it.
#[derive(Clone, Default)]
pub struct SendMark {
    state: Arc<Mutex<MarkState>>,
    /// When the run's time limit passes, if the caller said.
    deadline: Option<Instant>,
}

#[derive(Default)]
struct MarkState {
    /// Whether the action is `idempotent: true`.
    idempotent: bool,
    /// Says whether the request may have been written by now; none while the
    /// driver has not started a send.
    probe: Option<Box<dyn Fn() -> bool + Send + Sync>>,
}

impl std::fmt::Debug for SendMark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.written() { "SendMark(written)" } else { "SendMark(not sent)" })
    }
}

impl SendMark {
    /// A mark with no send started, and no time limit told.
    pub fn new() -> SendMark {
        SendMark::default()
    }

    /// A mark with no send started, for a call whose run's time limit passes in
    /// `ms` milliseconds (none left when 0 or less).
    pub fn with_time_left(ms: i64) -> SendMark {
        let left = Duration::from_millis(u64::try_from(ms).unwrap_or(0));
        SendMark { deadline: Instant::now().checked_add(left), ..SendMark::default() }
    }

    /// When the run's time limit passes, if the caller told: every wait of the
    /// driver's (for a slot, before a re-send) ends by then.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MarkState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The driver starts a send: `probe` says, when asked, whether its request may
    /// have been written (err on the side of yes: a call wrongly taken as sent is
    /// parked, one wrongly taken as not sent is sent again).
    pub fn sending(&self, idempotent: bool, probe: impl Fn() -> bool + Send + Sync + 'static) {
        let mut m = self.lock();
        m.idempotent = idempotent;
        m.probe = Some(Box::new(probe));
    }

    /// The send ended (with an answer or a failure): nothing is in flight until
    /// the next [`SendMark::sending`].
    pub fn settled(&self) {
        self.lock().probe = None;
    }

    /// Whether a send's request may have reached the provider.
    pub fn written(&self) -> bool {
        self.lock().probe.as_ref().is_some_and(|p| p())
    }

    /// How the run's time limit ends the call: `outcome_unknown` (the delivery is
    /// parked) when a request of an action that is not idempotent may have reached
    /// the provider; `deadline_exceeded` when none did, or the action is
    /// idempotent.
    pub fn at_time_limit(&self) -> Outcome {
        let idempotent = self.lock().idempotent;
        if self.written() && !idempotent {
            let f = CallFailure::new(FailureKind::OutcomeUnknown, RuntimeCode::TransportNoAnswer.as_str())
                .with_reason("the run's time limit passed while the request was with the provider");
            Outcome::Failed(f)
        } else {
            Outcome::fail(FailureKind::DeadlineExceeded, rules::CODE_DEADLINE_EXCEEDED)
        }
    }
}

/// A bad `--fake` answer script.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid fake answers `{script}`: {problem}")]
pub struct FakeScriptError {
    /// The script as given.
    pub script: String,
    /// What is wrong with it.
    pub problem: String,
}

/// The answers a fake accepts, for messages: the same words as a test's `fake`.
fn answer_words() -> String {
    let kinds = FailureKind::ALL.into_iter().filter(|k| k.is_fake_answer()).map(FailureKind::as_str);
    ["ok", "hang"].into_iter().chain(kinds).map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", ")
}

/// Parse testing.md's answers written as one word: `unavailable*5,ok`,
/// `rate_limited(2m),ok`, `hang`. Spaces are allowed around the parts.
pub fn parse_answers(script: &str) -> Result<Vec<FakeAnswer>, FakeScriptError> {
    let err = |problem: String| FakeScriptError { script: script.to_string(), problem };
    let mut answers = Vec::new();
    for part in script.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(err("an answer is empty".into()));
        }
        let (word, times) = match part.split_once('*') {
            Some((w, n)) => {
                let n = n.trim();
                let times: u32 = n
                    .parse()
                    .ok()
                    .filter(|t| *t >= 1)
                    .ok_or_else(|| err(format!("`{n}` is not a repeat count of 1 or more")))?;
                (w.trim(), times)
            }
            None => (part, 1),
        };
        let (name, retry_after) = match word.split_once('(') {
            Some((name, rest)) => {
                let inner = rest.strip_suffix(')').ok_or_else(|| err(format!("`{word}` misses its closing `)`")))?;
                (name.trim(), Some(inner.trim()))
            }
            None => (word, None),
        };
        let answer = match (name, FailureKind::parse(name).filter(|k| k.is_fake_answer())) {
            ("ok", _) => Answer::Ok,
            ("hang", _) => Answer::Hang,
            (_, Some(kind)) => Answer::Fail { kind, retry_after_ms: None },
            (other, None) => {
                return Err(err(format!("`{other}` is not an answer; expected one of {}", answer_words())));
            }
        };
        // The rule of a test's `fake`: only a retryable answer the provider gives
        // takes a Retry-After, and it is any duration the language accepts.
        let answer = match (answer, retry_after) {
            (answer, None) => answer,
            (Answer::Fail { kind: kind @ (FailureKind::Unavailable | FailureKind::RateLimited), .. }, Some(text)) => {
                let ms = match jadpo_check::parse_duration(text) {
                    Ok(ms) if !text.is_empty() => ms,
                    Ok(_) => {
                        return Err(err(format!(
                            "`{kind}()` takes one duration, its Retry-After, such as `{kind}(2m)`"
                        )));
                    }
                    Err(why) => return Err(err(format!("`{text}` is not a duration such as `30s` or `1h30m`: {why}"))),
                };
                Answer::Fail { kind, retry_after_ms: Some(ms) }
            }
            (_, Some(_)) => {
                return Err(err(format!("only `unavailable` and `rate_limited` take a Retry-After, not `{name}`")));
            }
        };
        answers.push(FakeAnswer { answer, times });
    }
    Ok(answers)
}

/// The scripted driver: each call through the connection takes the next answer; the
/// last answer repeats forever.
#[derive(Debug)]
pub struct FakeDriver {
    answers: Vec<FakeAnswer>,
    /// `(index into answers, times used of it)`; shared by every call in call order.
    cursor: Mutex<(usize, u32)>,
}

impl FakeDriver {
    /// A fake with these answers (an empty script answers `unavailable`, as a
    /// connection with no fake does in a test).
    pub fn new(answers: Vec<FakeAnswer>) -> FakeDriver {
        FakeDriver { answers, cursor: Mutex::new((0, 0)) }
    }

    /// Take the next answer.
    pub fn next_answer(&self) -> Answer {
        let mut cur = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        let Some(last) = self.answers.len().checked_sub(1) else {
            return Answer::Fail { kind: FailureKind::Unavailable, retry_after_ms: None };
        };
        let (i, used) = *cur;
        let a = self.answers[i.min(last)];
        if i < last {
            if used + 1 >= a.times {
                *cur = (i + 1, 0);
            } else {
                *cur = (i, used + 1);
            }
        }
        a.answer
    }
}

/// The outcome a fake answer stands for (`None` for `hang`, which never answers).
pub fn outcome_of(answer: Answer) -> Option<Outcome> {
    match answer {
        Answer::Ok => Some(Outcome::ok()),
        Answer::Hang => None,
        Answer::Fail { kind, retry_after_ms } => Some(Outcome::Failed(CallFailure {
            kind,
            code: crate::codes::fake_code(kind),
            http_status: None,
            retry_after_ms,
            reason: None,
        })),
    }
}

impl Driver for FakeDriver {
    fn call(&self, _request: CallRequest) -> BoxFuture<'_, Outcome> {
        let answer = self.next_answer();
        Box::pin(async move {
            match outcome_of(answer) {
                Some(o) => o,
                None => std::future::pending().await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(kind: FailureKind) -> Answer {
        Answer::Fail { kind, retry_after_ms: None }
    }

    #[test]
    fn parses_the_one_word_syntax() {
        let a = parse_answers("unavailable*5,ok").unwrap();
        assert_eq!(
            a,
            vec![
                FakeAnswer { answer: fail(FailureKind::Unavailable), times: 5 },
                FakeAnswer { answer: Answer::Ok, times: 1 }
            ]
        );
        let a = parse_answers(" rate_limited(2m) , ok ").unwrap();
        assert_eq!(a[0].answer, Answer::Fail { kind: FailureKind::RateLimited, retry_after_ms: Some(120_000) });
        assert_eq!(parse_answers("hang").unwrap()[0].answer, Answer::Hang);
        assert_eq!(parse_answers("outcome_unknown").unwrap()[0].answer, fail(FailureKind::OutcomeUnknown));
        // Any duration the language accepts, as in a test's `fake`.
        let a = parse_answers("unavailable(1h30m)").unwrap();
        assert_eq!(a[0].answer, Answer::Fail { kind: FailureKind::Unavailable, retry_after_ms: Some(5_400_000) });
    }

    #[test]
    fn accepts_exactly_the_answers_a_test_accepts() {
        for kind in FailureKind::ALL {
            let parsed = parse_answers(kind.as_str());
            assert_eq!(parsed.is_ok(), kind.is_fake_answer(), "{kind}: {parsed:?}");
        }
        let e = parse_answers("deadline_exceeded").unwrap_err().to_string();
        assert!(e.contains("`deadline_exceeded` is not an answer"), "{e}");
        assert!(!e.contains("`deadline_exceeded`,"), "listed as an answer: {e}");
    }

    #[test]
    fn refuses_bad_scripts_with_clear_messages() {
        for (bad, needle) in [
            ("", "empty"),
            ("ok,,ok", "empty"),
            ("nope", "`nope` is not an answer"),
            ("ok*0", "repeat count"),
            ("ok*x", "repeat count"),
            ("rate_limited(2x)", "not a duration"),
            ("rate_limited(2m", "closing"),
            ("rejected(1s)", "only `unavailable` and `rate_limited` take a Retry-After"),
            ("ok(1s)", "only `unavailable` and `rate_limited` take a Retry-After"),
            ("rate_limited()", "takes one duration"),
            ("rate_limited(30m1h)", "decreasing order"),
            ("lease_expired", "not an answer"),
        ] {
            let e = parse_answers(bad).unwrap_err();
            assert!(e.to_string().contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn answers_are_taken_in_order_and_the_last_repeats() {
        let f = FakeDriver::new(parse_answers("unavailable*2,rejected,ok").unwrap());
        let got: Vec<Answer> = (0..6).map(|_| f.next_answer()).collect();
        assert_eq!(
            got,
            vec![
                fail(FailureKind::Unavailable),
                fail(FailureKind::Unavailable),
                fail(FailureKind::Rejected),
                Answer::Ok,
                Answer::Ok,
                Answer::Ok
            ]
        );
        let f = FakeDriver::new(parse_answers("unavailable*3").unwrap());
        assert!((0..10).all(|_| f.next_answer() == fail(FailureKind::Unavailable)));
    }
}
