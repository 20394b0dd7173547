//! Connections: a provider's url, time limit, re-sends, headers and concurrency.

use super::{Cx, Lower, Resolved};
use crate::budget::*;
use crate::diagnostic::Diagnostic;
use crate::program as p;
use crate::registry::Code;
use jadpo_syntax::ast::{Block, Decl, Value, ValueKind};

impl<'a> Cx<'_, 'a> {
    pub(super) fn connection(&mut self, index: usize, file: usize, decl: &Decl<'a>, block: &Block<'a>) {
        let errors_before = self.error_count();
        let keys = self.keys(file, decl, block, &["url", "timeout", "retry", "headers", "max_in_flight"], &[]);
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
                if let Err(why) = match &e.value.kind {
                    ValueKind::Str(s) => check_url(s).map(|()| url = s.to_string()),
                    other => Err(format!("expected a string, found {}", other.describe())),
                } {
                    self.push(
                        Diagnostic::new(Code::ConnectionUrlInvalid, file, e.value.span, why)
                            .help("a url is an http or https address, such as `\"https://ledger.example.com/jadpo\"`"),
                    );
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
        if self.lower == Lower::Yes && self.error_count() == errors_before {
            let connection = p::Connection {
                name: decl.name.text.to_string(),
                url,
                timeout_ms: timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS),
                attempts: attempts.unwrap_or(DEFAULT_CONNECTION_ATTEMPTS),
                headers,
                max_in_flight: max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
            };
            self.keep(index, Resolved::Connection(connection));
        }
    }

    /// A connection's `retry:`: its attempts when given and valid.
    pub(super) fn connection_retry(&mut self, file: usize, value: &Value<'a>) -> Option<u32> {
        let code = Code::ConnectionRetryInvalid;
        let ValueKind::Block(block) = &value.kind else {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`retry:` takes a block, found {}", value.kind.describe()),
                )
                .help("write `retry: { attempts: 3 }`"),
            );
            return None;
        };
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
        let ValueKind::Block(block) = &value.kind else {
            self.push(
                Diagnostic::new(
                    code,
                    file,
                    value.span,
                    format!("`headers:` takes a block, found {}", value.kind.describe()),
                )
                .help(help),
            );
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

/// Accepts `http://HOST...` and `https://HOST...`, with a host and no spaces.
fn check_url(url: &str) -> Result<(), String> {
    let rest = if let Some(r) = url.strip_prefix("https://") {
        r
    } else if let Some(r) = url.strip_prefix("http://") {
        r
    } else if let Some((scheme, _)) = url.split_once("://") {
        return Err(format!("`{url}` uses `{scheme}`; a connection's url is http or https"));
    } else {
        return Err(format!("`{url}` is not a url"));
    };
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("`{}` holds spaces", url.escape_debug()));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host_only =
        if host.starts_with('[') { host.split(']').next().unwrap_or("") } else { host.split(':').next().unwrap_or("") };
    if host_only.trim_start_matches('[').is_empty() {
        return Err(format!("`{url}` has no host"));
    }
    if let Some(port) = host.strip_prefix(host_only).and_then(|p| p.trim_start_matches(']').strip_prefix(':'))
        && port.parse::<u16>().is_err()
    {
        return Err(format!("`{url}` has an invalid port `{port}`"));
    }
    Ok(())
}
