//! What each key of each kind of block means, for hover and completion.
//!
//! The checker decides which keys a block accepts; this table only explains them
//! (meaning, range, default) and gives a placeholder for completion and quick fixes.
//! Ranges and defaults are read from `jadpo_check::budget`, where they are defined. A
//! test compares the keys here with the ones the checker's `decl.unknown_key` help
//! lists, so the two cannot drift apart.

use jadpo_check::budget::*;
use jadpo_check::format_duration;
use jadpo_syntax::ast::DeclKind;

/// A kind of block that takes keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    Decl(DeclKind),
    /// A subscriber's `retry: { ... }`: its budget.
    SubscriberRetry,
    /// A connection's `retry: { ... }`: re-sends of one call.
    ConnectionRetry,
    /// A connection's `tls: { ... }`.
    ConnectionTls,
    /// A connection's `signing: { ... }`.
    ConnectionSigning,
    /// `expect SUBSCRIBER { ... }` in a test.
    Expect,
    /// `expect breaker CONNECTION { ... }` in a test.
    ExpectBreaker,
}

/// One key of a block.
#[derive(Debug, Clone)]
pub struct KeyDoc {
    pub key: &'static str,
    pub required: bool,
    /// What the key means, with its range and default, in Markdown.
    pub doc: String,
    /// A value that completes `KEY: ` as a snippet (`$1` marks what to type).
    pub snippet: &'static str,
}

fn key(key: &'static str, required: bool, snippet: &'static str, doc: String) -> KeyDoc {
    KeyDoc { key, required, doc, snippet }
}

fn d(ms: u64) -> String {
    format!("`{}`", format_duration(ms))
}

/// The keys a block takes, in the order the language reference lists them. An
/// event's block takes field names (any identifier), so it has none here.
pub fn keys_of(block: BlockKind) -> Vec<KeyDoc> {
    match block {
        BlockKind::Decl(DeclKind::Event | DeclKind::Test) => Vec::new(),
        BlockKind::Decl(DeclKind::Connection) => vec![
            key("url", true, "\"${1:https://}\"", "The provider's address: an `http` or `https` URL. Required.".into()),
            key(
                "timeout",
                false,
                "${1:10s}",
                format!(
                    "How long one call may take before it counts as `deadline_exceeded`: {} to {}, default {}.",
                    d(CALL_TIMEOUT_RANGE_MS.0),
                    d(CALL_TIMEOUT_RANGE_MS.1),
                    d(DEFAULT_CALL_TIMEOUT_MS)
                ),
            ),
            key(
                "retry",
                false,
                "{ attempts: ${1:2} }",
                format!(
                    "The connection's own quick re-sends of one call lost on the way: `{{ attempts: N }}`, N from {} to {}, default {}. The subscriber's budget is separate.",
                    CONNECTION_ATTEMPTS_RANGE.0, CONNECTION_ATTEMPTS_RANGE.1, DEFAULT_CONNECTION_ATTEMPTS
                ),
            ),
            key(
                "headers",
                false,
                "{ \"${1:Authorization}\": env(\"${2:TOKEN}\") }",
                "HTTP headers sent with every call: a block of strings or `env(\"NAME\")` values read at start.".into(),
            ),
            key(
                "max_in_flight",
                false,
                "${1:4}",
                format!(
                    "Calls in flight at once through this connection: {} to {}, default {}.",
                    MAX_IN_FLIGHT_RANGE.0, MAX_IN_FLIGHT_RANGE.1, DEFAULT_MAX_IN_FLIGHT
                ),
            ),
            key(
                "tls",
                false,
                "{ ca: \"${1:ca.pem}\" }",
                "Roots to trust and a client certificate, for an `https` url: `ca:`, `only_ca:`, `client_cert:` and `client_key:`. Default: the built-in roots, no client certificate.".into(),
            ),
            key(
                "signing",
                false,
                "{ secret: env(\"${1:LEDGER_WHSEC}\") }",
                "Sign every call as Standard Webhooks does (`webhook-id`, `webhook-timestamp`, `webhook-signature`): `secret:` (HMAC-SHA256) or `key:` (Ed25519). Default: unsigned.".into(),
            ),
            key(
                "rate",
                false,
                "${1:50/s}",
                format!(
                    "How often calls through this connection may start, across every process of one store: a count per `s`, `m` or `h`, from `1/h` to `{RATE_MAX_PER_S}/s`. Default: no limit."
                ),
            ),
            key(
                "burst",
                false,
                "${1:10}",
                format!(
                    "With `rate:`, how many calls may start at once after a quiet spell: {} to {}, default {} (calls evenly spaced).",
                    RATE_BURST_RANGE.0, RATE_BURST_RANGE.1, DEFAULT_RATE_BURST
                ),
            ),
            key(
                "was",
                false,
                "${1:old_name}",
                "The names this connection had in earlier versions of the program: a name or a list of names, which the program no longer declares. `jadpoc diff` then compares it with the connection it was, rather than reporting one removed. Default: none.".into(),
            ),
        ],
        BlockKind::ConnectionSigning => vec![
            key("secret", false, "env(\"${1:LEDGER_WHSEC}\")", "`env(\"VAR\")` holding a `whsec_` secret, or a list of them while a provider moves to a new one (every secret signs). Never written in the program. Signs with HMAC-SHA256 (`v1`).".into()),
            key("key", false, "\"${1:keys/ed25519.pem}\"", "An Ed25519 private key (PKCS#8 PEM): a file relative to this file's folder, or `env(\"VAR\")`. Signs with Ed25519 (`v1a`). Instead of `secret:`.".into()),
        ],
        BlockKind::ConnectionTls => vec![
            key("ca", false, "\"${1:ca.pem}\"", "A PEM file of certificates to trust (relative to this file's folder), or `env(\"VAR\")` holding PEM. Default: none.".into()),
            key("only_ca", false, "${1:true}", "`true`: trust only `ca:`; `false`: `ca:` and the built-in roots. Default `false`; needs `ca:`.".into()),
            key("client_cert", false, "\"${1:client.pem}\"", "The client certificate chain for mutual TLS: a PEM file or `env(\"VAR\")`. Goes with `client_key:`.".into()),
            key("client_key", false, "env(\"${1:CLIENT_KEY}\")", "The private key of `client_cert:`: a PEM file or `env(\"VAR\")`. Goes with `client_cert:`.".into()),
        ],
        BlockKind::Decl(DeclKind::Action) => vec![
            key("via", true, "${1:connection}", "The connection the action calls through. Required.".into()),
            key("path", false, "\"/${1}\"", "The path appended to the connection's `url:`.".into()),
            key(
                "idempotent",
                false,
                "${1:true}",
                "`true` when sending the same call twice does no harm: a call whose outcome is unknown is then sent again. Default `false`.".into(),
            ),
        ],
        BlockKind::Decl(DeclKind::Subscriber) => vec![
            key("on", true, "${1:Event}", "The event the subscriber receives. Required.".into()),
            key(
                "run",
                true,
                "${1:action}($2)",
                "The action it runs, with its arguments: `event.FIELD` or literals. Required.".into(),
            ),
            key(
                "retry",
                false,
                "{ attempts: ${1:10}, within: ${2:24h} }",
                format!(
                    "The retry budget: `attempts:` from {} to {} (default {}) that must start `within:` at most {} after the event (default {}).",
                    ATTEMPTS_RANGE.0,
                    ATTEMPTS_RANGE.1,
                    DEFAULT_ATTEMPTS,
                    d(MAX_WITHIN_MS),
                    d(DEFAULT_WITHIN_MS)
                ),
            ),
            key(
                "timeout",
                false,
                "${1:30s}",
                format!(
                    "How long one run may take: {} to {}, default {}.",
                    d(RUN_TIMEOUT_RANGE_MS.0),
                    d(RUN_TIMEOUT_RANGE_MS.1),
                    d(DEFAULT_RUN_TIMEOUT_MS)
                ),
            ),
            key(
                "where",
                false,
                "event.${1:field} == ${2}",
                "Which events the subscriber takes: a condition on the event's fields (`==`, `!=`, `<`, `<=`, `>`, `>=`, `in [...]`, `not in [...]`, `not`, and `and` or `or`, in parentheses where they meet). An event it refuses makes no delivery. Default: every event.".into(),
            ),
            key(
                "order_by",
                false,
                "event.${1:field}",
                "A `string` or `int` field of the event: deliveries with one value of it run one at a time, in event order. Default: no order.".into(),
            ),
            key(
                "was",
                false,
                "${1:old_name}",
                "The names this subscriber had in earlier versions of the program: a name or a list of names, which the program no longer declares. `jadpoc diff` then compares it with the subscriber it was, whose deliveries it takes on, rather than reporting one removed. Default: none.".into(),
            ),
        ],
        BlockKind::Decl(DeclKind::Schedule) => vec![
            key(
                "every",
                true,
                "${1:1h}",
                format!("How often the schedule runs: {} to {}. Required.", d(EVERY_RANGE_MS.0), d(EVERY_RANGE_MS.1)),
            ),
            key("run", true, "${1:action}($2)", "The action it runs, with literal arguments. Required.".into()),
        ],
        BlockKind::SubscriberRetry => vec![
            key(
                "attempts",
                false,
                "${1:10}",
                format!(
                    "How many attempts in all, the first included: {} to {}, default {}.",
                    ATTEMPTS_RANGE.0, ATTEMPTS_RANGE.1, DEFAULT_ATTEMPTS
                ),
            ),
            key(
                "within",
                false,
                "${1:24h}",
                format!(
                    "The window, from the event, in which attempts may start: more than 0 and at most {}, default {}.",
                    d(MAX_WITHIN_MS),
                    d(DEFAULT_WITHIN_MS)
                ),
            ),
        ],
        BlockKind::ConnectionRetry => vec![key(
            "attempts",
            false,
            "${1:2}",
            format!(
                "Sends of one call, the first included: {} to {}, default {}.",
                CONNECTION_ATTEMPTS_RANGE.0, CONNECTION_ATTEMPTS_RANGE.1, DEFAULT_CONNECTION_ATTEMPTS
            ),
        )],
        BlockKind::Expect => vec![
            key("state", false, "${1:succeeded}", "The delivery's state when the test ends here: `pending`, `running`, `held`, `succeeded`, `failed` or `parked`.".into()),
            key("attempts", false, "${1:1}", "How many attempts were made, 0 to 100.".into()),
            key("last_failure", false, "${1:unavailable}", "The failure kind of the last failed attempt.".into()),
            key("held", false, "${1:true}", "Whether the delivery is held by an open circuit breaker.".into()),
        ],
        BlockKind::ExpectBreaker => vec![
            key("state", false, "${1:closed}", "The breaker's state: `closed`, `open` or `probing`.".into()),
            key("alerts", false, "${1:0}", "How many alerts the breaker has raised.".into()),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jadpo_check::{Code, Lower, SourceFile, check};

    /// The keys the checker accepts in a declaration, read from its `decl.unknown_key` help.
    fn checker_keys(kind: &str, rest: &str) -> Vec<String> {
        let text = format!("{kind} x{rest} {{\n    zzz_not_a_key: 1\n}}\n");
        let checked = check(&[SourceFile { name: "t.jadpo".into(), text }], Lower::No);
        let help = checked
            .diagnostics
            .iter()
            .find(|d| d.code == Code::DeclUnknownKey)
            .and_then(|d| d.help.clone())
            .unwrap_or_default();
        let list = help.rsplit(" takes ").next().unwrap_or("");
        list.split(", ").map(|k| k.trim_matches('`').to_string()).collect()
    }

    #[test]
    fn the_table_lists_the_keys_the_checker_accepts() {
        for (kind, decl, rest) in [
            (DeclKind::Connection, "connection", ""),
            (DeclKind::Action, "action", "()"),
            (DeclKind::Subscriber, "subscriber", ""),
            (DeclKind::Schedule, "schedule", ""),
        ] {
            let ours: Vec<String> = keys_of(BlockKind::Decl(kind)).iter().map(|k| k.key.to_string()).collect();
            assert_eq!(ours, checker_keys(decl, rest), "{decl}");
        }
    }
}
