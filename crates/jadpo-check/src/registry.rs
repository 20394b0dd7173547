//! The registry of diagnostic codes: each code once, with its severity, a one-line
//! summary and its documentation (what it means, a wrong example, the fix).
//!
//! The documentation lives in `docs/codes/CODE.md` beside this crate; it is what
//! `jadpoc explain CODE` prints and what docs/diagnostics.md is generated from.

use serde::Serialize;

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

macro_rules! codes {
    ($($variant:ident = $code:literal, $severity:ident, $summary:literal;)*) => {
        /// A stable diagnostic code. Codes are a public interface: tests, editors and
        /// CI match on them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Code { $($variant,)* }

        impl Code {
            /// Every code, in the order of the reference.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The code as users see it, such as `subscriber.retry_invalid`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$severity,)* }
            }

            /// One line: when the code is raised.
            pub fn summary(self) -> &'static str {
                match self { $(Code::$variant => $summary,)* }
            }

            /// The code's documentation in Markdown: what it means, an example that
            /// raises it and its fix.
            pub fn doc(self) -> &'static str {
                match self {
                    $(Code::$variant => include_str!(concat!("../docs/codes/", $code, ".md")),)*
                }
            }
        }
    };
}

codes! {
    SyntaxInvalidToken = "syntax.invalid_token", Error, "a character or sequence that is no token";
    SyntaxUnterminatedString = "syntax.unterminated_string", Error, "a string with no closing quote on its line";
    SyntaxInvalidEscape = "syntax.invalid_escape", Error, "an escape sequence a string does not take";
    SyntaxUnterminatedComment = "syntax.unterminated_comment", Error, "a block comment with no closing `*/`";
    SyntaxInvalidNumber = "syntax.invalid_number", Error, "an integer over 2^63-1";
    SyntaxInvalidDuration = "syntax.invalid_duration", Error, "a duration with a bad unit, order, repetition or overflow";
    SyntaxUnexpectedToken = "syntax.unexpected_token", Error, "a token where the grammar expects another";
    SyntaxUnexpectedEof = "syntax.unexpected_eof", Error, "the file ends in the middle of a declaration";
    SyntaxNestingTooDeep = "syntax.nesting_too_deep", Error, "blocks, lists and calls nested deeper than 64";
    NameDuplicate = "name.duplicate", Error, "two declarations of one kind share a name";
    NameWasCollides = "name.was_collides", Error, "a `was:` names a declaration of its kind the program still has, or a name another `was:` already claims";
    NameWasItself = "name.was_itself", Warning, "a `was:` names its own declaration";
    EventTypeUnknown = "event.type_unknown", Error, "a field type that is not one of the five";
    EventDuplicateField = "event.duplicate_field", Error, "an event declares one field twice";
    ConnectionUrlInvalid = "connection.url_invalid", Error, "a connection's `url:` is missing, not http or https, not a URL, or has a query, a fragment or a user and password";
    ConnectionTimeoutInvalid = "connection.timeout_invalid", Error, "a connection's `timeout:` is not a duration from 1ms to 5m";
    ConnectionRetryInvalid = "connection.retry_invalid", Error, "a connection's `retry:` is not a block with `attempts:` from 1 to 10";
    ConnectionMaxInFlightInvalid = "connection.max_in_flight_invalid", Error, "a connection's `max_in_flight:` is not an integer from 1 to 256";
    ConnectionHeaderInvalid = "connection.header_invalid", Error, "a connection's `headers:` is not a block of strings or `env(\"NAME\")` values";
    ConnectionHeaderReserved = "connection.header_reserved", Error, "a connection's `headers:` sets `Idempotency-Key` or `Content-Type`, which jadpo sets";
    ConnectionTlsInvalid = "connection.tls_invalid", Error, "a connection's `tls:` has a value of the wrong kind, a client certificate without its key, `only_ca` without `ca`, or an `http` url";
    ConnectionSigningInvalid = "connection.signing_invalid", Error, "a connection's `signing:` writes a secret in the program, gives both `secret:` and `key:` or neither, or has a value of the wrong kind";
    ConnectionRateInvalid = "connection.rate_invalid", Error, "a connection's `rate:` is not a count per `s`, `m` or `h` from 1/h to 10000/s, or its `burst:` is not an integer from 1 to 10000";
    ActionMissingVia = "action.missing_via", Error, "an action has no `via:`";
    ActionUnknownConnection = "action.unknown_connection", Error, "an action's `via:` names no declared connection";
    ActionParamTypeUnknown = "action.param_type_unknown", Error, "a parameter type that is not one of the five";
    ActionDuplicateParam = "action.duplicate_param", Error, "an action declares one parameter twice";
    SubscriberMissingOn = "subscriber.missing_on", Error, "a subscriber has no `on:`";
    SubscriberMissingRun = "subscriber.missing_run", Error, "a subscriber has no `run:`";
    SubscriberUnknownEvent = "subscriber.unknown_event", Error, "a subscriber's `on:` names no declared event";
    SubscriberRetryInvalid = "subscriber.retry_invalid", Error, "a subscriber's `retry:` budget is out of range or malformed";
    SubscriberTimeoutInvalid = "subscriber.timeout_invalid", Error, "a subscriber's `timeout:` is not a duration from 1s to 15m";
    SubscriberWhereInvalid = "subscriber.where_invalid", Error, "a subscriber's `where:` names a field its event lacks, compares values of different types, or is not a condition";
    SubscriberOrderByInvalid = "subscriber.order_by_invalid", Error, "a subscriber's `order_by:` is not a `string` or `int` field of its event";
    SubscriberRetryUnreachable = "subscriber.retry_unreachable", Warning, "the budget's window cannot fit its attempts on average";
    RunUnknownAction = "run.unknown_action", Error, "a `run:` calls no declared action";
    RunArityMismatch = "run.arity_mismatch", Error, "a `run:` passes more or fewer arguments than the action takes";
    RunTypeMismatch = "run.type_mismatch", Error, "a `run:` argument's type does not match the action's parameter";
    RunUnknownField = "run.unknown_field", Error, "`event.x` where the subscriber's event has no field `x`";
    RunInvalidArgument = "run.invalid_argument", Error, "a `run:` argument that is neither `event.FIELD` nor a literal";
    ScheduleRetryNotAllowed = "schedule.retry_not_allowed", Error, "a schedule has a `retry:`";
    ScheduleEveryInvalid = "schedule.every_invalid", Error, "a schedule's `every:` is missing or not a duration from 1s to 30d";
    ScheduleEventReference = "schedule.event_reference", Error, "a schedule's `run:` uses `event.`";
    ScheduleMissingRun = "schedule.missing_run", Error, "a schedule has no `run:`";
    DeclUnknownKey = "decl.unknown_key", Error, "a key the declaration does not take";
    DeclDuplicateKey = "decl.duplicate_key", Error, "the same key twice in one declaration";
    DeclInvalidValue = "decl.invalid_value", Error, "a key's value is not of the kind the key takes";
    ValueInvalidTime = "value.invalid_time", Error, "a string given for a `time` is not an RFC 3339 timestamp";
    EventUnused = "event.unused", Warning, "an event no subscriber or test uses";
    ActionUnused = "action.unused", Warning, "an action no subscriber or schedule runs";
    ConnectionUnused = "connection.unused", Warning, "a connection no action calls through";
    TestUnknownSubscriber = "test.unknown_subscriber", Error, "a test step names no declared subscriber";
    TestUnknownConnection = "test.unknown_connection", Error, "a test step names no declared connection";
    TestUnknownEvent = "test.unknown_event", Error, "a test's `emit` names no declared event";
    TestUnknownField = "test.unknown_field", Error, "a test's `emit` sets a field its event does not have";
    TestInvalidEmit = "test.invalid_emit", Error, "a test's `emit` misses a required field or gives a field a value of the wrong type";
    TestInvalidAnswer = "test.invalid_answer", Error, "a `fake` answer that is not `ok`, `hang` or a failure kind";
    TestInvalidExpect = "test.invalid_expect", Error, "an `expect` key or value the runner cannot check";
    TestMissingFake = "test.missing_fake", Warning, "a test emits an event whose subscribers call a connection it gives no fake";
}

impl Code {
    /// Looks a code up by its name.
    pub fn parse(name: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == name)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// docs/diagnostics.md: the reference of every code, generated from the registry so
/// that the two cannot drift apart (a test compares them).
pub fn reference_markdown() -> String {
    let mut out = String::from(
        "# Diagnostics\n\n\
         <!-- Generated from crates/jadpo-check/docs/codes/ by `JADPO_BLESS=1 cargo test -p jadpo-check --test it docs`; edit those files, not this one. -->\n\n\
         Every diagnostic `jadpoc check` reports has a stable code. `jadpoc explain CODE` prints the entry below.\n\n\
         | code | severity | when |\n|---|---|---|\n",
    );
    for code in Code::ALL {
        out.push_str(&format!(
            "| [`{code}`](#{}) | {} | {} |\n",
            code.as_str().replace('.', ""),
            code.severity().as_str(),
            code.summary()
        ));
    }
    for code in Code::ALL {
        out.push_str(&format!(
            "\n## {code}\n\n*{}.* {}\n\n{}",
            code.severity().as_str(),
            code.summary(),
            code.doc().trim_end()
        ));
        out.push('\n');
    }
    out
}
