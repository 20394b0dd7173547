//! The registry of runtime codes: each code once, with its kind, a one-line summary
//! and its documentation.
//!
//! Two sorts of code live here. An attempt's failure code (`transport.refused`,
//! `http.503`, `fake.unavailable`, `runtime.no_driver`, ...) is what a record,
//! `jadpoc deliveries` and the log keep of how an attempt failed. An ingest code
//! (`ingest.missing_field`) names why `--listen` refused an event; its answer's
//! `error.code` is the part after `ingest.` (`missing_field`).
//!
//! `http.NNN` and `fake.KIND` are families: one entry documents every code of the
//! form. A code a provider declares in its answer's body
//! (`{"failure": {"code": C, ...}}`) is the provider's own and is not listed.
//!
//! docs/runtime.md's "Codes" section is generated from this registry
//! ([`markdown`]); a test fails when it is stale. [`lookup`] answers for any code a
//! run can record, families included (what `jadpoc explain` asks).

use jadpo_check::program::FailureKind;

/// What a code says about how things ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodeKind {
    /// An attempt's failure, always of this kind.
    Failure(FailureKind),
    /// An attempt's failure whose kind depends on the answer or the action (the
    /// entry's documentation says how).
    Varies,
    /// A refusal of the `--listen` ingest, answered with this HTTP status.
    Ingest(u16),
}

impl CodeKind {
    /// The kind as the reference shows it.
    pub fn describe(self) -> String {
        match self {
            CodeKind::Failure(kind) => format!("`{kind}`"),
            CodeKind::Varies => "by the answer".to_string(),
            CodeKind::Ingest(status) => format!("HTTP {status}"),
        }
    }
}

macro_rules! runtime_codes {
    ($($variant:ident = $code:literal, $kind:expr, $summary:literal, $doc:literal;)*) => {
        /// A code the runtime records or answers with. Codes are a public
        /// interface: operators, scripts and tests match on them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum RuntimeCode { $($variant,)* }

        impl RuntimeCode {
            /// Every code, in the order of the reference.
            pub const ALL: &'static [RuntimeCode] = &[$(RuntimeCode::$variant,)*];

            /// The code's name, such as `transport.refused` (`http.NNN` for a
            /// family).
            pub const fn as_str(self) -> &'static str {
                match self { $(RuntimeCode::$variant => $code,)* }
            }

            /// What the code says about how things ended.
            pub fn kind(self) -> CodeKind {
                match self { $(RuntimeCode::$variant => $kind,)* }
            }

            /// One line: when the code is recorded.
            pub fn summary(self) -> &'static str {
                match self { $(RuntimeCode::$variant => $summary,)* }
            }

            /// What it means and what to do, in Markdown.
            pub fn doc(self) -> &'static str {
                match self { $(RuntimeCode::$variant => $doc,)* }
            }
        }
    };
}

use CodeKind::{Failure, Ingest, Varies};
use FailureKind::{DeadlineExceeded, InternalFault, LeaseExpired, Unavailable};

runtime_codes! {
    DeadlineExceeded = "deadline_exceeded", Failure(DeadlineExceeded),
        "the run's time limit ended the attempt, or the delivery was never tried within its window",
        "The subscriber's `timeout:` passed before the call ended (counted from the claim), or a claim found the delivery never tried before its window ended. It counts as an attempt at once and is retried while the budget lasts. A provider that is often this slow needs a longer `timeout:`.";
    LeaseExpired = "lease_expired", Failure(LeaseExpired),
        "the worker running the attempt was lost; a later claim took the delivery back",
        "The process running the attempt stopped (a crash, a kill, a stop whose grace period ran out) and the attempt's lease (its `timeout:` plus 30s) ended. The attempt counts; the delivery is retried while the budget lasts. Whether the call reached the provider is unknown, which is why calls carry an `Idempotency-Key`.";
    TransportDns = "transport.dns", Failure(Unavailable),
        "the request never left: the provider's host name did not resolve",
        "The connection's host name could not be resolved (the reason gives the resolver's words). The provider surely did nothing, so it is retried, and counts toward the connection's breaker. Check the `url:` and the machine's DNS.";
    TransportRefused = "transport.refused", Failure(Unavailable),
        "the request never left: the connection was refused or the host could not be reached",
        "Nothing accepted the connection (nothing listens on that port, a firewall refused it, the network is unreachable), or the provider had closed the connection before reading the request. The provider surely did nothing, so it is retried, and counts toward the connection's breaker.";
    TransportConnectTimeout = "transport.connect_timeout", Failure(Unavailable),
        "the request never left: no connection within the connection's `timeout:`",
        "No connection to the provider was made within the connection's `timeout:` (the host does not answer, or its accept queue is full). The provider surely did nothing, so it is retried, and counts toward the connection's breaker.";
    TransportTls = "transport.tls", Failure(Unavailable),
        "the request never left: the TLS handshake failed",
        "The TLS handshake failed: the provider's certificate is not trusted (add its CA with the connection's `tls: { ca: ... }`), its name does not match, the provider refused the client certificate (in TLS 1.3 this refusal comes after the client's side of the handshake, still before any request is taken), or no protocol was common. The provider did nothing, so it is retried, and counts toward the connection's breaker; the reason gives the TLS library's words.";
    TransportNoAnswer = "transport.no_answer", Varies,
        "the request was sent and no answer came (a timeout, a reset or a close)",
        "The request went out and no answer came within the connection's `timeout:`, or the connection was reset or closed before any answer (a provider that closed an idle connection before reading the request is told apart: that call is sent again on a fresh connection). The provider may have acted: for an action that is not `idempotent: true` the kind is `outcome_unknown` and the delivery is `parked` until an operator retries it; for an idempotent one it is `unavailable` and retried.";
    HttpStatus = "http.NNN", Varies,
        "the provider answered with HTTP status NNN (mapped as the answer table says)",
        "The provider answered with that status and no `failure` body: 429 is `rate_limited`; 408 and 5xx are `unavailable`; 404 `not_found`; 409 `conflict`; any other 4xx, and any 3xx (redirects are never followed), `rejected`.";
    HttpInvalidAnswer = "http.invalid_answer", Failure(InternalFault),
        "the provider's answer is not HTTP, or its body was cut short",
        "The provider answered something that is not HTTP, or an answer whose body ended before its `Content-Length` or its last chunk (a `200` too: a cut body may have held a `failure` that wins over the status). A defect of the provider, not retried: the delivery is `failed`; retry it with `jadpoc deliveries retry` once the provider is fixed.";
    HttpDriverClosed = "http.driver_closed", Failure(InternalFault),
        "the HTTP driver was shut down while a call waited for it",
        "The connection's driver stopped taking calls (the run was ending). A defect if seen outside a stop: the delivery is `failed`; retry it with `jadpoc deliveries retry`.";
    HttpBadRequest = "http.bad_request", Failure(InternalFault),
        "the HTTP request could not be built from the connection's URL and headers",
        "The request for the call could not be made (a URL or header value the HTTP library refused). The checker accepts what it can verify; fix the connection's `url:` or `headers:` and retry the delivery.";
    HttpUnknownAction = "http.unknown_action", Failure(InternalFault),
        "the HTTP driver was asked for an action its connection does not carry",
        "A defect of the runtime: a call named an action the connection's driver was not built for. Report it; retry the delivery after an upgrade.";
    HttpBadBody = "http.bad_body", Failure(InternalFault),
        "the call's JSON body could not be written",
        "A defect of the runtime: the call's arguments could not be written as JSON. Report it; retry the delivery after an upgrade.";
    FakeKind = "fake.KIND", Varies,
        "a fake provider's scripted answer (`jadpoc test`, `jadpoc run --fake`)",
        "The answer a `fake` step or a `--fake CONN=ANSWERS` flag scripted: `fake.unavailable`, `fake.rate_limited`, `fake.not_found`, and so on, of that kind.";
    FakeNone = "fake.none", Failure(Unavailable),
        "a test called a connection that no `fake` step scripted",
        "Under `jadpoc test` every connection answers `unavailable` until a `fake CONNECTION: [...]` step gives it answers. Add one before the `emit` whose delivery calls it.";
    RuntimeUnknownSubscriber = "runtime.unknown_subscriber", Failure(InternalFault),
        "a claimed delivery's subscriber is not in the running program (a defect)",
        "A defect of the runtime: a claim leaves a delivery whose subscriber its program lacks to a process whose program has it, or marks it `orphaned` (docs/evolution.md), and never runs it. Report it.";
    RuntimeEventShape = "runtime.event_shape", Failure(InternalFault),
        "a stored event lacks a field the subscriber reads, or holds it with another type, under the running program",
        "The event was stored under an earlier program whose event had another shape: a field the subscriber's `run:` reads is missing, null or of another type than this program declares it. Nothing is sent (a missing field never becomes `null`): the delivery is `failed`, and its reason names the field and both versions. Make the field optional (`T?`) if a call may go without it, or keep the old subscriber until those events are delivered, then retry them with `jadpoc deliveries retry`. `jadpoc diff` warns of this before a deploy.";
    RuntimeBadPayload = "runtime.bad_payload", Failure(InternalFault),
        "a stored event's payload is not valid JSON",
        "The stored payload could not be read back (the store was edited by hand or damaged). The delivery is `failed`.";
    RuntimeUnknownAction = "runtime.unknown_action", Failure(InternalFault),
        "a subscriber or schedule calls an action the program does not have",
        "A defect: a checked program always names declared actions. Report it.";
    RuntimeNoDriver = "runtime.no_driver", Failure(InternalFault),
        "an action's connection has no driver in this run",
        "A defect of the embedding: the runtime was given no driver for the connection. Report it.";
    RuntimeUnknownSchedule = "runtime.unknown_schedule", Failure(InternalFault),
        "a schedule's run names a schedule the program no longer declares",
        "The store holds a schedule that was removed or renamed; its run is logged as failed.";
    RuntimeInternalFault = "runtime.internal_fault", Failure(InternalFault),
        "a task of the run panicked (a defect of the runtime, a driver or a store); the run stopped",
        "A task of `jadpoc run` panicked, a defect. The log's `runtime.internal_fault` line names the task and gives the panic's message; an attempt whose call panicked is recorded `failed` with this code. The run then stops as on SIGTERM (running attempts finish and are recorded; nothing committed is lost, and a delivery left running comes back when its lease ends) and exits 2. Report it with that line; once fixed, retry the failed deliveries with `jadpoc deliveries retry`.";
    IngestNotFound = "ingest.not_found", Ingest(404),
        "no route: events are posted to `/events/NAME`",
        "The request's path is not `/events/NAME`.";
    IngestMethodNotAllowed = "ingest.method_not_allowed", Ingest(405),
        "events are taken by `POST` only",
        "The request used another method than `POST`.";
    IngestLengthRequired = "ingest.length_required", Ingest(411),
        "the request has neither a `Content-Length` nor `Transfer-Encoding: chunked`",
        "Send the body with a `Content-Length` header or chunked.";
    IngestTooLarge = "ingest.too_large", Ingest(413),
        "the body is over 1 MiB",
        "An event's payload is at most 1 MiB.";
    IngestHeadTooLarge = "ingest.head_too_large", Ingest(431),
        "the request's head is over 16 KiB or 100 headers",
        "The request line and headers together are at most 16 KiB, and at most 100 headers. The HTTP server answers this itself, with no body.";
    IngestBadRequest = "ingest.bad_request", Ingest(400),
        "the request is not HTTP/1.1 as expected, or its body could not be read",
        "A head that is not HTTP, a `Content-Length` that is not a length, two different `Content-Length`s (the HTTP server answers these itself, with no body), or a body whose chunks are malformed.";
    IngestUnsupportedMediaType = "ingest.unsupported_media_type", Ingest(415),
        "the body's `Content-Type` is not JSON",
        "A `Content-Type`, when given, must be `application/json` or `application/*+json` (parameters such as `charset` are fine). Leave it out, or send JSON with it.";
    IngestTimeout = "ingest.timeout", Ingest(408),
        "the body did not arrive within 10 seconds of the request's head",
        "A client has 10 seconds to send a request's head (else the connection is closed) and 10 more for its body (else this answer).";
    IngestSignatureInvalid = "ingest.signature_invalid", Ingest(401),
        "the request is not signed with the secret `--verify-secret` names",
        "`jadpoc run --listen --verify-secret env:NAME` takes only requests signed as the Standard Webhooks scheme says: `webhook-id`, `webhook-timestamp` and a `webhook-signature` with a `v1,` signature (HMAC-SHA256 of `ID.TIMESTAMP.BODY`) made with the secret in `NAME`. The message says which header is missing or that no signature matches. Nothing was stored.";
    IngestSignatureStale = "ingest.signature_stale", Ingest(401),
        "the request's `webhook-timestamp` is more than 5 minutes from now",
        "A signed request is taken for 5 minutes either side of its `webhook-timestamp`, so one captured on the way cannot be sent again later. Sign each send at the time it is sent, and keep the sender's clock in time. Nothing was stored.";
    IngestStoreUnavailable = "ingest.store_unavailable", Ingest(503),
        "the event could not be stored; nothing was stored",
        "The store refused the write (locked past its wait, full, or failing). Nothing was stored: send the event again.";
    IngestStopping = "ingest.stopping", Ingest(503),
        "the run is stopping and took no more events",
        "`jadpoc run` was stopping (SIGINT or SIGTERM) when the event arrived. It was not stored: send it again to a running process.";
    IngestUnknownEvent = "ingest.unknown_event", Ingest(404),
        "the program declares no event of that name",
        "The `NAME` of `/events/NAME` is not a declared event; the message suggests the closest one. One of jadpo's own events (`jadpo.*`) is refused too: only the runtime raises those.";
    IngestNotJson = "ingest.not_json", Ingest(422),
        "the body is not JSON (or not UTF-8)",
        "The payload must be one JSON object in UTF-8.";
    IngestNotAnObject = "ingest.not_an_object", Ingest(422),
        "the payload is JSON but not an object",
        "The payload must be a JSON object whose keys are the event's fields.";
    IngestUnknownField = "ingest.unknown_field", Ingest(422),
        "the payload has a field the event does not declare",
        "Every key of the payload must be a field of the event; `error.field` names the first one that is not.";
    IngestMissingField = "ingest.missing_field", Ingest(422),
        "the payload lacks a required field",
        "Every field of the event that is not optional (`T?`) must be present; `error.field` names it.";
    IngestWrongType = "ingest.wrong_type", Ingest(422),
        "a field's value is not of the field's type",
        "`error.field` names the field and the message says the type expected. A `time` takes an RFC 3339 timestamp string.";
}

impl RuntimeCode {
    /// What goes on the wire: an ingest answer's `error.code` is the name without
    /// `ingest.`; any other code is its name.
    pub fn wire(self) -> &'static str {
        let name = self.as_str();
        name.strip_prefix("ingest.").unwrap_or(name)
    }

    /// The HTTP status of an ingest refusal (`None` for an attempt's code).
    pub fn status(self) -> Option<u16> {
        match self.kind() {
            CodeKind::Ingest(status) => Some(status),
            _ => None,
        }
    }
}

impl From<RuntimeCode> for String {
    fn from(code: RuntimeCode) -> String {
        code.as_str().to_string()
    }
}

impl std::fmt::Display for RuntimeCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The code of an answer with HTTP status `status` (the `http.NNN` family).
pub fn http_status_code(status: u16) -> String {
    format!("http.{status}")
}

/// The code of a fake's scripted failure of `kind` (the `fake.KIND` family).
pub fn fake_code(kind: FailureKind) -> String {
    format!("fake.{kind}")
}

/// The registry's entry for `name`: a code's name (`transport.refused`,
/// `ingest.missing_field`), a member of a family (`http.503`, `fake.unavailable`),
/// or the family's own name (`http.NNN`).
pub fn lookup(name: &str) -> Option<RuntimeCode> {
    if let Some(code) = RuntimeCode::ALL.iter().copied().find(|c| c.as_str() == name) {
        return Some(code);
    }
    if let Some(status) = name.strip_prefix("http.") {
        let is_status = status.len() == 3 && status.bytes().all(|b| b.is_ascii_digit());
        return is_status.then_some(RuntimeCode::HttpStatus);
    }
    if let Some(kind) = name.strip_prefix("fake.") {
        return FailureKind::parse(kind).map(|_| RuntimeCode::FakeKind);
    }
    None
}

/// docs/runtime.md's "Codes" reference, between its markers.
pub fn markdown() -> String {
    let mut out = String::from(
        "An attempt's failure code, as `jadpoc deliveries` and the log show it:\n\n\
         | code | kind | when |\n|---|---|---|\n",
    );
    let row = |c: &RuntimeCode| format!("| `{}` | {} | {} |\n", c.as_str(), c.kind().describe(), c.summary());
    let (ingest, attempt): (Vec<&RuntimeCode>, Vec<&RuntimeCode>) =
        RuntimeCode::ALL.iter().partition(|c| c.status().is_some());
    out.extend(attempt.iter().map(|c| row(c)));
    out.push_str(
        "\nA code a provider declares in its answer (`{\"failure\": {\"code\": C, \"kind\": K}}`) is \
         kept as it is.\n\n`--listen` refusals, answered as `{\"error\": {\"code\", \"field\", \"message\"}}` \
         with `code` the part after `ingest.`:\n\n| code | answer | when |\n|---|---|---|\n",
    );
    out.extend(ingest.iter().map(|c| row(c)));
    out.push('\n');
    for c in RuntimeCode::ALL {
        out.push_str(&format!("- **`{}`**: {}\n", c.as_str(), c.doc()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_ingest_codes_answer_without_their_prefix() {
        let mut names: Vec<&str> = RuntimeCode::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RuntimeCode::ALL.len());
        assert_eq!(RuntimeCode::IngestMissingField.wire(), "missing_field");
        assert_eq!(RuntimeCode::IngestMissingField.status(), Some(422));
        assert_eq!(RuntimeCode::TransportRefused.wire(), "transport.refused");
        for c in RuntimeCode::ALL {
            assert_eq!(c.status().is_some(), c.as_str().starts_with("ingest."), "{c}");
            assert!(!c.summary().is_empty() && !c.doc().is_empty(), "{c}");
        }
    }

    #[test]
    fn lookup_answers_for_codes_and_families() {
        assert_eq!(lookup("transport.no_answer"), Some(RuntimeCode::TransportNoAnswer));
        assert_eq!(lookup("http.503"), Some(RuntimeCode::HttpStatus));
        assert_eq!(lookup("http.NNN"), Some(RuntimeCode::HttpStatus));
        assert_eq!(lookup("http.driver_closed"), Some(RuntimeCode::HttpDriverClosed));
        assert_eq!(lookup("fake.rate_limited"), Some(RuntimeCode::FakeKind));
        assert_eq!(lookup("fake.none"), Some(RuntimeCode::FakeNone));
        assert_eq!(lookup("ingest.wrong_type"), Some(RuntimeCode::IngestWrongType));
        assert_eq!(lookup("http.5033"), None);
        assert_eq!(lookup("fake.sleepy"), None);
        assert_eq!(lookup("subscriber.retry_invalid"), None);
        assert_eq!(lookup(&http_status_code(429)), Some(RuntimeCode::HttpStatus));
        assert_eq!(lookup(&fake_code(FailureKind::NotFound)), Some(RuntimeCode::FakeKind));
    }
}
