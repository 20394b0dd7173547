//! Connections: a provider's url, time limit, re-sends, headers, concurrency, TLS
//! settings and how calls are signed.

use super::{Cx, Resolved};
use crate::budget::*;
use crate::diagnostic::Diagnostic;
use crate::program::{self as p, RESERVED_HEADERS, WHSEC_PREFIX};
use crate::registry::Code;
use crate::suggest::did_you_mean;
use jadpo_syntax::ast::{Block, Decl, Entry, Value, ValueKind};
use std::path::Path;

/// The keys of a connection.
const KEYS: &[&str] =
    &["url", "timeout", "retry", "headers", "max_in_flight", "tls", "signing", "rate", "burst", "was"];

const RATE_HELP: &str = "write a count per second, minute or hour, such as `rate: 50/s` or `rate: 600/m`";

/// The keys of a connection's `tls:` block.
const TLS_KEYS: &[&str] = &["ca", "only_ca", "client_cert", "client_key"];

/// The keys of a connection's `signing:` block.
const SIGNING_KEYS: &[&str] = &["secret", "key"];

/// `env("NAME")`'s variable, when it names one.
fn env_var<'v>(args: &'v [Value<'_>]) -> Option<&'v str> {
    match args {
        [Value { kind: ValueKind::Str(var), .. }] if !var.is_empty() => Some(var.as_ref()),
        _ => None,
    }
}

impl<'a> Cx<'_, 'a> {
    pub(super) fn connection(&mut self, index: usize, file: usize, decl: &Decl<'a>, block: &Block<'a>) {
        let errors_before = self.errors_if_lowering();
        let keys = self.keys(file, decl, block, KEYS, &[]);
        let mut url = String::new();
        match keys.get("url") {
            None => self.push(
                Diagnostic::new(
                    Code::ConnectionUrlInvalid,
                    file,
                    decl.name.span,
                    format!("the connection `{}` has no `url:`", decl.name.text),
                )
                .help("add `url: \"https://...\"`, the provider's address"),
            ),
            Some(e) => {
                if let Err((why, help)) = match &e.value.kind {
                    ValueKind::Str(s) => check_url(s).map(|()| url = s.to_string()),
                    other => Err((format!("expected a string, found {}", other.describe()), URL_HELP)),
                } {
                    self.push(Diagnostic::new(Code::ConnectionUrlInvalid, file, e.value.span, why).help(help));
                }
            }
        }
        let timeout_ms = keys.get("timeout").and_then(|e| {
            self.duration_in(
                file,
                &e.value,
                CALL_TIMEOUT_RANGE_MS,
                Code::ConnectionTimeoutInvalid,
                "a connection's `timeout:`",
            )
        });
        let attempts = keys.get("retry").and_then(|e| self.connection_retry(file, &e.value));
        let headers = keys.get("headers").map(|e| self.headers(file, &e.value)).unwrap_or_default();
        let max_in_flight = keys.get("max_in_flight").and_then(|e| {
            self.int_in(file, &e.value, MAX_IN_FLIGHT_RANGE, Code::ConnectionMaxInFlightInvalid, "`max_in_flight:`")
        });
        let tls = keys.get("tls").and_then(|e| self.tls(file, e, &url));
        let signing = keys.get("signing").and_then(|e| self.signing(file, e));
        let rate = self.rate(file, keys.get("rate"), keys.get("burst"));
        if self.clean_since(errors_before) {
            let connection = p::Connection {
                name: decl.name.text.to_string(),
                url,
                timeout_ms: timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS),
                attempts: attempts.unwrap_or(DEFAULT_CONNECTION_ATTEMPTS),
                headers,
                max_in_flight: max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
                tls,
                signing,
                rate,
                // Filled when the program is lowered, from what `was_names` kept.
                was: Vec::new(),
            };
            self.keep(index, Resolved::Connection(connection));
        }
    }

    /// A connection's `rate:` with its `burst:`, lowered when both are valid.
    fn rate(&mut self, file: usize, rate: Option<&Entry<'a>>, burst: Option<&Entry<'a>>) -> Option<p::Rate> {
        let code = Code::ConnectionRateInvalid;
        let burst = match burst {
            Some(e) if rate.is_none() => {
                self.push(
                    Diagnostic::new(code, file, e.key.span, "`burst:` without `rate:` limits nothing")
                        .help("add `rate:`, such as `rate: 50/s`, or remove `burst:`"),
                );
                return None;
            }
            Some(e) => Some(self.int_in(file, &e.value, RATE_BURST_RANGE, code, "`burst:`")?),
            None => None,
        };
        let value = &rate?.value;
        let ValueKind::Rate(text) = value.kind else {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`rate:` takes a rate, found {}", value.kind.describe()),
                )
                .help(RATE_HELP),
            );
            return None;
        };
        let (count, unit) = text.split_once('/').unwrap_or((text, ""));
        let per_ms = match unit {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => {
                self.push(
                    Diagnostic::new(code, file, value.span, format!("`{unit}` is not a rate's unit"))
                        .help(format!("a rate is counted per `s`, `m` or `h`; {RATE_HELP}")),
                );
                return None;
            }
        };
        let count = jadpo_syntax::lexer::parse_int(count).unwrap_or(i64::MAX);
        // The steadiest rate is one call an hour; the fastest, RATE_MAX_PER_S a second.
        let per_s = count as f64 * 1000.0 / per_ms as f64;
        if count < 1 || per_s > RATE_MAX_PER_S as f64 {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`{text}` is out of range: a rate is from 1/h to {RATE_MAX_PER_S}/s"),
                )
                .help(RATE_HELP),
            );
            return None;
        }
        Some(p::Rate { count: count as u32, per_ms, burst: burst.unwrap_or(DEFAULT_RATE_BURST) })
    }

    /// A connection's `tls:` block, lowered when it is valid. `url` is the
    /// connection's url when it is valid, else empty.
    fn tls(&mut self, file: usize, entry: &Entry<'a>, url: &str) -> Option<p::Tls> {
        let code = Code::ConnectionTlsInvalid;
        let value = &entry.value;
        let block = self.block_of(code, file, "tls", value, "write `tls: { ca: \"certs/ca.pem\" }`")?;
        let mut ok = true;
        if url.starts_with("http://") {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    entry.key.span,
                    format!("`tls:` is for an https url, but `{url}` is plain http"),
                )
                .help("use an `https://` url, or remove `tls:`"),
            );
            ok = false;
        }
        let seen = self.sub_block_keys(file, block, "tls", TLS_KEYS, &mut ok);
        let get = |k: &str| seen.iter().find(|e| e.key.text == k).copied();
        let mut pem = |this: &mut Self, k: &str| -> Option<p::Pem> {
            let e = get(k)?;
            let found = match this.pem_of(file, &e.value) {
                Ok(pem) => return Some(pem),
                Err(found) => found,
            };
            this.push(
                Diagnostic::new(
                    code,
                    file,
                    e.value.span,
                    format!("`{k}:` takes a path to a PEM file or `env(\"NAME\")`, found {found}"),
                )
                .help(format!(
                    "write `{k}: \"certs/{k}.pem\"` (relative to this file) or `{k}: env(\"LEDGER_{}\")`",
                    k.to_ascii_uppercase()
                )),
            );
            ok = false;
            None
        };
        let ca = pem(self, "ca");
        let cert = pem(self, "client_cert");
        let key = pem(self, "client_key");
        let mut only_ca = false;
        if let Some(e) = get("only_ca") {
            match e.value.kind {
                ValueKind::Bool(b) => only_ca = b,
                _ => {
                    self.push(
                        Diagnostic::new(
                            code,
                            file,
                            e.value.span,
                            format!("`only_ca:` takes `true` or `false`, found {}", e.value.kind.describe()),
                        )
                        .help("write `only_ca: true` to trust only the roots in `ca:`"),
                    );
                    ok = false;
                }
            }
            if get("ca").is_none() {
                self.push(
                    Diagnostic::new(
                        code,
                        file,
                        e.key.span,
                        "`only_ca:` chooses whether to trust only `ca:`, but no `ca:` is given",
                    )
                    .help("add `ca: \"certs/ca.pem\"`, the roots to trust, or remove `only_ca:`"),
                );
                ok = false;
            }
        }
        for (has, lacks) in [("client_cert", "client_key"), ("client_key", "client_cert")] {
            if let (Some(e), None) = (get(has), get(lacks)) {
                self.push(
                    Diagnostic::new(code, file, e.key.span, format!("`{has}:` is given without `{lacks}:`")).help(
                        "a client certificate is sent with its private key: give both `client_cert:` and `client_key:`",
                    ),
                );
                ok = false;
            }
        }
        let client = match (cert, key) {
            (Some(cert), Some(key)) => Some(p::ClientCert { cert, key }),
            _ => None,
        };
        ok.then_some(p::Tls { ca, only_ca, client })
    }

    /// The entries of a connection's sub-block `what` (`tls:`, `signing:`), each a
    /// key of `keys` given once; an unknown or repeated key is reported (and
    /// clears `ok`) and left out.
    fn sub_block_keys<'b>(
        &mut self,
        file: usize,
        block: &'b Block<'a>,
        what: &str,
        keys: &[&str],
        ok: &mut bool,
    ) -> Vec<&'b Entry<'a>> {
        let mut seen: Vec<&'b Entry<'a>> = Vec::new();
        for e in &block.entries {
            let key: &str = &e.key.text;
            if !keys.contains(&key) || e.key.quoted {
                let list = keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
                let help = match did_you_mean(key, keys.iter().copied()) {
                    Some(s) => format!("{s}; `{what}:` takes {list}"),
                    None => format!("`{what}:` takes {list}"),
                };
                self.push(
                    Diagnostic::new(
                        Code::DeclUnknownKey,
                        file,
                        e.key.span,
                        format!("`{key}` is not a key of `{what}:`"),
                    )
                    .help(help),
                );
                *ok = false;
            } else if let Some(first) = seen.iter().find(|f| f.key.text == key) {
                self.push(
                    Diagnostic::new(Code::DeclDuplicateKey, file, e.key.span, format!("`{key}` is given twice"))
                        .label(file, first.key.span, "first given here")
                        .help("keep one of them"),
                );
                *ok = false;
            } else {
                seen.push(e);
            }
        }
        seen
    }

    /// Where a PEM file comes from: a path (relative to the directory of the file
    /// that declares the connection) or `env("NAME")`; else what was found instead.
    fn pem_of(&self, file: usize, value: &Value<'a>) -> Result<p::Pem, String> {
        Err(match &value.kind {
            ValueKind::Str(s) if !s.is_empty() => {
                let dir = self.files.get(file).and_then(|f| Path::new(&f.name).parent());
                return Ok(p::Pem::File(
                    dir.map_or_else(|| Path::new(s.as_ref()).to_path_buf(), |d| d.join(s.as_ref())),
                ));
            }
            ValueKind::Call { name, args } if name.text == "env" => match env_var(args) {
                Some(var) => return Ok(p::Pem::Env(var.to_string())),
                None => "a call of `env` without one variable name".to_string(),
            },
            ValueKind::Str(_) => "an empty string".to_string(),
            other => other.describe().to_string(),
        })
    }

    /// A connection's `signing:` block, lowered when it is valid: `secret:` (one
    /// `env("NAME")` or a list of them, each holding a `whsec_` secret) signs with
    /// HMAC-SHA256 (`v1`); `key:` (a PEM file or `env("NAME")` holding an Ed25519
    /// private key) signs with Ed25519 (`v1a`).
    fn signing(&mut self, file: usize, entry: &Entry<'a>) -> Option<p::Signing> {
        let code = Code::ConnectionSigningInvalid;
        let help = "write `signing: { secret: env(\"LEDGER_WHSEC\") }`, a Standard Webhooks secret (`whsec_...`) \
                    kept in the environment";
        let block = self.block_of(code, file, "signing", &entry.value, help)?;
        let mut ok = true;
        let seen = self.sub_block_keys(file, block, "signing", SIGNING_KEYS, &mut ok);
        let get = |k: &str| seen.iter().find(|e| e.key.text == k).copied();
        let signing = match (get("secret"), get("key")) {
            (Some(secret), Some(key)) => {
                self.push(
                    Diagnostic::new(code, file, key.key.span, "`signing:` takes `secret:` or `key:`, not both")
                        .label(file, secret.key.span, "`secret:` given here")
                        .help("sign with a shared secret (`secret:`, HMAC-SHA256) or a private key (`key:`, Ed25519)"),
                );
                None
            }
            (None, None) => {
                self.push(
                    Diagnostic::new(code, file, entry.key.span, "`signing:` names no `secret:` or `key:`").help(help),
                );
                None
            }
            (Some(secret), None) => self.signing_secrets(file, &secret.value).map(p::Signing::Secrets),
            (None, Some(key)) => {
                match self.pem_of(file, &key.value) {
                    Ok(pem) => Some(p::Signing::Ed25519(pem)),
                    Err(found) => {
                        self.push(
                        Diagnostic::new(
                            code,
                            file,
                            key.value.span,
                            format!("`key:` takes a path to a PEM file or `env(\"NAME\")`, found {found}"),
                        )
                        .help("write `key: \"keys/ledger-ed25519.pem\"` (relative to this file), an Ed25519 private key"),
                    );
                        None
                    }
                }
            }
        };
        signing.filter(|_| ok)
    }

    /// `secret:`'s variables: one `env("NAME")`, or a list of them (every secret
    /// signs, so a provider can move from one to the next with no downtime).
    fn signing_secrets(&mut self, file: usize, value: &Value<'a>) -> Option<Vec<String>> {
        let values: Vec<&Value<'a>> = match &value.kind {
            ValueKind::List(items) if !items.is_empty() => items.iter().map(|i| &i.value).collect(),
            _ => vec![value],
        };
        let mut vars = Vec::new();
        for v in values {
            let why = match &v.kind {
                ValueKind::Call { name, args } if name.text == "env" => match env_var(args) {
                    Some(var) => {
                        vars.push(var.to_string());
                        continue;
                    }
                    None => "a call of `env` without one variable name".to_string(),
                },
                ValueKind::Str(s) if s.starts_with(WHSEC_PREFIX) => {
                    "a secret written in the program; a secret is kept out of source".to_string()
                }
                ValueKind::Str(_) => "a string; a secret is read from the environment".to_string(),
                ValueKind::List(_) => "an empty list".to_string(),
                other => other.describe().to_string(),
            };
            self.push(
                Diagnostic::new(
                    Code::ConnectionSigningInvalid,
                    file,
                    v.span,
                    format!("`secret:` takes `env(\"NAME\")` or a list of them, found {why}"),
                )
                .help(
                    "write `secret: env(\"LEDGER_WHSEC\")` and set `LEDGER_WHSEC=whsec_...`; to rotate, list both: \
                     `secret: [env(\"LEDGER_WHSEC\"), env(\"LEDGER_WHSEC_NEXT\")]`",
                ),
            );
            return None;
        }
        Some(vars)
    }

    /// A connection's `retry:`: its attempts when given and valid.
    pub(super) fn connection_retry(&mut self, file: usize, value: &Value<'a>) -> Option<u32> {
        let code = Code::ConnectionRetryInvalid;
        let block = self.block_of(code, file, "retry", value, "write `retry: { attempts: 3 }`")?;
        let mut seen = false;
        let mut attempts = None;
        for entry in &block.entries {
            if entry.key.text != "attempts" || entry.key.quoted {
                self.push(
                    Diagnostic::new(
                        code,
                        file,
                        entry.key.span,
                        format!("`{}` is not a key of a connection's `retry:`", entry.key.text),
                    )
                    .help("a connection's `retry:` takes only `attempts:`"),
                );
            } else if seen {
                self.push(
                    Diagnostic::new(code, file, entry.key.span, "`attempts` is given twice").help("keep one of them"),
                );
            } else {
                seen = true;
                attempts =
                    self.int_in(file, &entry.value, CONNECTION_ATTEMPTS_RANGE, code, "a connection's `attempts:`");
            }
        }
        attempts
    }

    /// A connection's `headers:`, the valid ones in order.
    pub(super) fn headers(&mut self, file: usize, value: &Value<'a>) -> Vec<(String, p::HeaderValue)> {
        let code = Code::ConnectionHeaderInvalid;
        let help =
            "write `headers: { \"Authorization\": env(\"LEDGER_TOKEN\") }`; values are strings or `env(\"NAME\")`";
        let Some(block) = self.block_of(code, file, "headers", value, help) else {
            return Vec::new();
        };
        let mut names: Vec<String> = Vec::new();
        let mut headers = Vec::new();
        for entry in &block.entries {
            let lower = entry.key.text.to_ascii_lowercase();
            if !is_header_name(&entry.key.text) {
                self.push(
                    Diagnostic::new(code, file, entry.key.span, format!("`{}` is not a header name", entry.key.text))
                        .help("a header name is ASCII letters, digits and `-`, such as `\"X-Request-Source\"`"),
                );
            } else if names.contains(&lower) {
                self.push(Diagnostic::new(
                    code,
                    file,
                    entry.key.span,
                    format!("the header `{}` is given twice", entry.key.text),
                ));
            }
            if let Some(reserved) = RESERVED_HEADERS.iter().find(|r| r.eq_ignore_ascii_case(&lower)) {
                self.push(
                    Diagnostic::new(
                        Code::ConnectionHeaderReserved,
                        file,
                        entry.key.span,
                        format!("`{}` is set by jadpo on every call; a connection cannot set it", entry.key.text),
                    )
                    .help(reserved_help(reserved)),
                );
            }
            names.push(lower);
            if let Some(v) = header_value(&entry.value) {
                headers.push((entry.key.text.to_string(), v));
            } else {
                self.push(
                    Diagnostic::new(
                        code,
                        file,
                        entry.value.span,
                        format!(
                            "a header's value is a string or `env(\"NAME\")`, found {}",
                            entry.value.kind.describe()
                        ),
                    )
                    .help(help),
                );
            }
        }
        headers
    }
}

/// Why a reserved header is jadpo's, for the help.
fn reserved_help(name: &str) -> String {
    if name.eq_ignore_ascii_case("Idempotency-Key") {
        "remove it: jadpo sets `Idempotency-Key` to the delivery's id, which the provider uses to tell a re-sent call from a new one".into()
    } else {
        "remove it: jadpo sends the call's arguments as JSON, with `Content-Type: application/json`".into()
    }
}

fn header_value(value: &Value<'_>) -> Option<p::HeaderValue> {
    match &value.kind {
        ValueKind::Str(s) => Some(p::HeaderValue::Literal(s.to_string())),
        ValueKind::Call { name, args } if name.text == "env" && args.len() == 1 => match &args[0].kind {
            ValueKind::Str(var) if !var.is_empty() => Some(p::HeaderValue::Env(var.to_string())),
            _ => None,
        },
        _ => None,
    }
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

const URL_HELP: &str = "a url is an http or https address, such as `\"https://ledger.example.com/jadpo\"`";

/// Where a credential or a query belongs instead of the url.
const URL_SECRET_HELP: &str = "put a token in `headers:` with `env()`, such as `headers: { \"Authorization\": env(\"LEDGER_TOKEN\") }`; an action's `path:` may carry its own query string";

/// Accepts `http://HOST[:PORT][/PATH]` and `https://...`: a host, no spaces, and
/// nothing the action's path could not follow (a query, a fragment) or that would
/// never be sent (a user and password). The error is the message and its help.
fn check_url(url: &str) -> Result<(), (String, &'static str)> {
    let rest = if let Some(r) = url.strip_prefix("https://") {
        r
    } else if let Some(r) = url.strip_prefix("http://") {
        r
    } else if let Some((scheme, _)) = url.split_once("://") {
        return Err((format!("`{url}` uses `{scheme}`; a connection's url is http or https"), URL_HELP));
    } else {
        return Err((format!("`{url}` is not a url"), URL_HELP));
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err((format!("`{}` holds spaces", url.escape_debug()), URL_HELP));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err((
            format!("`{url}` holds a user name or password (`user:password@`), which jadpo never sends"),
            URL_SECRET_HELP,
        ));
    }
    if url.contains('?') {
        return Err((
            format!("`{url}` has a query string: the action's path is appended to the url, so it would land after it"),
            URL_SECRET_HELP,
        ));
    }
    if url.contains('#') {
        return Err((
            format!("`{url}` has a fragment (`#...`), which is never sent"),
            "remove the fragment: the url and the action's `path:` are all the provider receives",
        ));
    }
    let host_only = if authority.starts_with('[') {
        authority.split(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    if host_only.trim_start_matches('[').is_empty() {
        return Err((format!("`{url}` has no host"), URL_HELP));
    }
    if let Some(port) = authority.strip_prefix(host_only).and_then(|p| p.trim_start_matches(']').strip_prefix(':'))
        && port.parse::<u16>().is_err()
    {
        return Err((format!("`{url}` has an invalid port `{port}`"), URL_HELP));
    }
    Ok(())
}
