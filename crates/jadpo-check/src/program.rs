//! The checked program: what the checker hands to the runtime and the CLI.
//!
//! Only a program without errors becomes a `Program`. Names are resolved to
//! indices, defaults are filled in, durations are milliseconds, and nothing here
//! refers back to the syntax tree.

// A subscriber's budget is declared with its numbers and formulas.
pub use crate::budget::Budget;
// A comparison's operator is the one the syntax reads.
pub use jadpo_syntax::ast::CompareOp;
use serde::Serialize;

/// A whole checked program (every file given to one command).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Program {
    pub events: Vec<Event>,
    pub connections: Vec<Connection>,
    pub actions: Vec<Action>,
    pub subscribers: Vec<Subscriber>,
    pub schedules: Vec<Schedule>,
    pub tests: Vec<Test>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub name: String,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Field {
    pub name: String,
    pub ty: Type,
    /// An event field's declared default (`amount: { type: int  default: 0 }`):
    /// what a call reads when an event, stored by an earlier program, lacks it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<Literal>,
}

/// Whether `text` is a `time` value: an RFC 3339 timestamp with its offset, such
/// as `2026-03-01T09:30:00Z`. The one rule for literals in a program, emitted
/// payloads and ingested events.
pub fn is_timestamp(text: &str) -> bool {
    text.parse::<jiff::Timestamp>().is_ok()
}

/// A field's or a parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Type {
    pub base: BaseType,
    /// `T?`: may be absent or null.
    pub optional: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseType {
    String,
    Int,
    Float,
    Bool,
    /// An RFC 3339 timestamp in JSON.
    Time,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Connection {
    pub name: String,
    pub url: String,
    /// One call's limit.
    pub timeout_ms: u64,
    /// The connection's own sends of one call within one attempt (1 = no re-send).
    pub attempts: u32,
    pub headers: Vec<(String, HeaderValue)>,
    pub max_in_flight: u32,
    /// The `tls:` block, when given (only with an `https` url).
    pub tls: Option<Tls>,
    /// How every call is signed (the Standard Webhooks headers), when it is.
    pub signing: Option<Signing>,
    /// `rate:` (with `burst:`): calls started at most this often, across every
    /// process of one store.
    pub rate: Option<Rate>,
    /// `was:`: the names the connection had in earlier versions of the program.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub was: Vec<String>,
}

/// A connection's rate limit: `count` calls per `per_ms`, of which `burst` may
/// start at once after a quiet spell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rate {
    pub count: u32,
    pub per_ms: u64,
    pub burst: u32,
}

impl Rate {
    /// The time between two calls at the steady rate, in microseconds (a rate
    /// of 3/s is 333,333 µs apart; the rounding costs at most 1 µs a call).
    pub fn interval_us(self) -> i64 {
        (self.per_ms as i64).saturating_mul(1000) / i64::from(self.count.max(1))
    }

    /// How long `n` calls take at this rate from the first to the last, the
    /// first `burst` at once (1,000 calls at 10/s: 99.9 s).
    pub fn drain_ms(self, n: u64) -> u64 {
        let spaced = n.saturating_sub(u64::from(self.burst));
        (spaced.saturating_mul(self.interval_us() as u64)).div_ceil(1000)
    }

    /// The rate as written: `50/s`, `600/m`, `20/h`.
    pub fn written(self) -> String {
        let unit = match self.per_ms {
            1_000 => "s",
            60_000 => "m",
            _ => "h",
        };
        format!("{}/{unit}", self.count)
    }

    /// What the rate means for a backlog of `n` calls, for people (`jadpoc plan`,
    /// the editor's hover): "at 50/s, 10,000 calls take 3m 20s from the first to
    /// the last".
    pub fn backlog_words(self, n: u64) -> String {
        let burst = if self.burst > 1 { format!(" (the first {} at once)", self.burst) } else { String::new() };
        format!(
            "at {}, {} calls take {} from the first to the last{burst}",
            self.written(),
            crate::words::thousands(n),
            crate::duration::format_duration_spaced(self.drain_ms(n))
        )
    }
}

/// The prefix of a Standard Webhooks secret: `whsec_` and the key in base64.
pub const WHSEC_PREFIX: &str = "whsec_";

/// How a connection signs its calls: `webhook-id`, `webhook-timestamp` and
/// `webhook-signature` on every call, as the Standard Webhooks scheme defines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Signing {
    /// `secret:`: HMAC-SHA256 (`v1,`) with each secret, read from these
    /// environment variables when `jadpoc run` starts; every secret signs, so a
    /// receiver moves from one to the next with no downtime.
    Secrets(Vec<String>),
    /// `key:`: Ed25519 (`v1a,`) with the private key in this PEM.
    Ed25519(Pem),
}

/// Headers jadpo sets on every call, which a connection's `headers:` may not set.
pub const RESERVED_HEADERS: [&str; 2] = ["Idempotency-Key", "Content-Type"];

/// A connection's `tls:` block: read and parsed when `jadpoc run` starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tls {
    /// Roots to trust in addition to the built-in ones (instead of them with `only_ca`).
    pub ca: Option<Pem>,
    /// Trust only `ca`, not the built-in roots.
    pub only_ca: bool,
    /// A client certificate and its key, for mutual TLS.
    pub client: Option<ClientCert>,
}

/// A client certificate (with its chain) and its private key, each PEM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClientCert {
    pub cert: Pem,
    pub key: Pem,
}

/// Where PEM text comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pem {
    /// A file. A relative path in the program is joined to the directory of the file
    /// that declares the connection (as that file's name was given to the command).
    File(std::path::PathBuf),
    /// `env("NAME")`: the variable holds the PEM text.
    Env(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HeaderValue {
    Literal(String),
    /// `env("NAME")`: read when `jadpoc run` starts.
    Env(String),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    pub name: String,
    pub params: Vec<Field>,
    /// Index into `Program::connections`.
    pub connection: usize,
    /// The path appended to the connection's url; `/` + the action's name by default.
    pub path: String,
    pub idempotent: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Subscriber {
    pub name: String,
    /// Index into `Program::events`.
    pub event: usize,
    pub call: Call,
    pub budget: Budget,
    /// The run's time limit.
    pub timeout_ms: u64,
    /// `where:`: the events it takes; an event the filter refuses makes no
    /// delivery for it.
    pub filter: Option<Filter>,
    /// `order_by: event.FIELD`: deliveries with one value of the field run one at a
    /// time, in event order.
    pub order_by: Option<String>,
    /// `was:`: the names the subscriber had in earlier versions of the program.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub was: Vec<String>,
}

/// A subscriber's `where:`, resolved: the field names are the event's.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Filter {
    /// Every one holds.
    All(Vec<Filter>),
    /// At least one holds.
    Any(Vec<Filter>),
    Not(Box<Filter>),
    /// `left OP right`, of one type (an int beside a float compares as a float).
    Compare {
        left: Operand,
        op: CompareOp,
        right: Operand,
        ty: BaseType,
    },
    /// `event.FIELD in [...]`, or `not in`.
    In {
        field: String,
        values: Vec<Literal>,
        negated: bool,
        ty: BaseType,
    },
    /// A `bool` field alone: it is present and true.
    True(String),
}

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operand {
    Field(String),
    Literal(Literal),
}

/// An action call with its arguments, in parameter order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Call {
    /// Index into `Program::actions`.
    pub action: usize,
    pub args: Vec<Arg>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arg {
    /// `event.FIELD`: the field's name in the subscriber's event.
    Field(String),
    Literal(Literal),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Literal {
    String(String),
    Int(i64),
    Bool(bool),
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Schedule {
    pub name: String,
    pub every_ms: u64,
    pub call: Call,
    /// A schedule's run has the default run time limit.
    pub timeout_ms: u64,
}

/// A `test "name" { ... }` block, its steps checked and resolved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Test {
    pub name: String,
    /// The file the test is in, as given to the command.
    pub file: String,
    /// 1-based line of the `test` keyword.
    pub line: u32,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Step {
    /// Replace a connection's driver with a script of answers.
    Fake {
        connection: usize,
        answers: Vec<FakeAnswer>,
    },
    /// Emit an event now, with its payload as JSON-ready values.
    Emit {
        event: usize,
        fields: Vec<(String, Literal)>,
    },
    /// Advance virtual time.
    Wait {
        ms: u64,
    },
    /// Operator retry of the subscriber's latest delivery.
    Retry {
        subscriber: usize,
    },
    Expect {
        subscriber: usize,
        expect: DeliveryExpect,
    },
    ExpectBreaker {
        connection: usize,
        expect: BreakerExpect,
    },
}

/// One scripted answer of a fake driver, repeated `times` (the last one repeats forever).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FakeAnswer {
    pub answer: Answer,
    pub times: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Answer {
    Ok,
    /// A failure of this kind, with a Retry-After in milliseconds where one is given.
    Fail {
        kind: FailureKind,
        retry_after_ms: Option<u64>,
    },
    /// Never answers: the run's time limit ends it.
    Hang,
}

/// The failure kinds an attempt can end with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Unavailable,
    RateLimited,
    NotFound,
    Conflict,
    Rejected,
    DeadlineExceeded,
    OutcomeUnknown,
    InternalFault,
    LeaseExpired,
}

impl FailureKind {
    pub const ALL: [FailureKind; 9] = [
        FailureKind::Unavailable,
        FailureKind::RateLimited,
        FailureKind::NotFound,
        FailureKind::Conflict,
        FailureKind::Rejected,
        FailureKind::DeadlineExceeded,
        FailureKind::OutcomeUnknown,
        FailureKind::InternalFault,
        FailureKind::LeaseExpired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Unavailable => "unavailable",
            FailureKind::RateLimited => "rate_limited",
            FailureKind::NotFound => "not_found",
            FailureKind::Conflict => "conflict",
            FailureKind::Rejected => "rejected",
            FailureKind::DeadlineExceeded => "deadline_exceeded",
            FailureKind::OutcomeUnknown => "outcome_unknown",
            FailureKind::InternalFault => "internal_fault",
            FailureKind::LeaseExpired => "lease_expired",
        }
    }

    pub fn parse(s: &str) -> Option<FailureKind> {
        FailureKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether a fake may answer with this kind (testing.md): `deadline_exceeded`
    /// comes from `hang` and `lease_expired` from a lost worker, never from an answer.
    pub fn is_fake_answer(self) -> bool {
        !matches!(self, FailureKind::DeadlineExceeded | FailureKind::LeaseExpired)
    }

    /// Whether a failure of this kind is tried again while the budget lasts.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            FailureKind::Unavailable
                | FailureKind::RateLimited
                | FailureKind::DeadlineExceeded
                | FailureKind::LeaseExpired
        )
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `expect SUBSCRIBER { ... }`: keys left out are not checked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeliveryExpect {
    pub state: Option<DeliveryState>,
    pub attempts: Option<u32>,
    pub last_failure: Option<FailureKind>,
    pub held: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryState {
    Pending,
    Running,
    Held,
    Succeeded,
    Failed,
    Parked,
    /// Ended by an operator (`jadpoc deliveries skip`), never run again unless
    /// retried.
    Skipped,
    /// Its subscriber is in no program that a running process runs: not due,
    /// counting against nothing, until a process whose program has it starts (and
    /// takes it back) or an operator skips it.
    Orphaned,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 8] = [
        DeliveryState::Pending,
        DeliveryState::Running,
        DeliveryState::Held,
        DeliveryState::Succeeded,
        DeliveryState::Failed,
        DeliveryState::Parked,
        DeliveryState::Skipped,
        DeliveryState::Orphaned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Running => "running",
            DeliveryState::Held => "held",
            DeliveryState::Succeeded => "succeeded",
            DeliveryState::Failed => "failed",
            DeliveryState::Parked => "parked",
            DeliveryState::Skipped => "skipped",
            DeliveryState::Orphaned => "orphaned",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryState> {
        DeliveryState::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `expect breaker CONNECTION { ... }`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BreakerExpect {
    pub state: Option<BreakerState>,
    pub alerts: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BreakerState {
    Closed,
    Open,
    Probing,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::Probing => "probing",
        }
    }

    pub fn parse(s: &str) -> Option<BreakerState> {
        [BreakerState::Closed, BreakerState::Open, BreakerState::Probing].into_iter().find(|k| k.as_str() == s)
    }
}

impl Program {
    pub fn event(&self, name: &str) -> Option<usize> {
        self.events.iter().position(|e| e.name == name)
    }
    pub fn connection(&self, name: &str) -> Option<usize> {
        self.connections.iter().position(|c| c.name == name)
    }
    pub fn subscriber(&self, name: &str) -> Option<usize> {
        self.subscribers.iter().position(|s| s.name == name)
    }
    /// The connection a subscriber's action calls through.
    pub fn subscriber_connection(&self, subscriber: usize) -> usize {
        self.actions[self.subscribers[subscriber].call.action].connection
    }
}
