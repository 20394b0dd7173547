//! Who may use the console and how an action proves it came from the console's
//! own page: the loopback rule, the access token, the CSRF token, and the
//! Origin and Host checks.
//!
//! - **Loopback by default.** A console listening on any other address must be
//!   given a token ([`check_listen`]); without one it refuses to start.
//! - **The token.** When one is given, every request but the login page and the
//!   assets carries it: `Authorization: Bearer TOKEN`, or the cookie the login
//!   form sets (`HttpOnly`, `SameSite=Strict`).
//! - **CSRF.** Each process draws a random token; every page sets it in a
//!   `SameSite=Strict` cookie and in a hidden field of each form, and an action
//!   is taken only when both are the process's token (compared in constant
//!   time). A request carrying the token in its `Authorization` header is not a
//!   browser's ambient credential and needs no CSRF token.
//! - **Origin and Host.** An action whose `Origin` (or `Sec-Fetch-Site`) says
//!   another site sent it is refused; on loopback, a request whose `Host` is not
//!   a loopback name is refused (a DNS rebinding page cannot reach the console).

use hyper::HeaderMap;
use hyper::header::{AUTHORIZATION, COOKIE, HOST, ORIGIN};
use jadpo_core::rng::RandomSource;
use rand::RngExt;
use std::net::SocketAddr;
use subtle::ConstantTimeEq;

/// The cookie holding the CSRF token.
pub const CSRF_COOKIE: &str = "jadpo_csrf";
/// The form field holding the CSRF token.
pub const CSRF_FIELD: &str = "csrf";
/// The cookie the login form sets to the access token.
pub const TOKEN_COOKIE: &str = "jadpo_console_token";

/// Refuse to serve on `addr` when it is not a loopback address and no token
/// guards the console.
pub fn check_listen(addr: &SocketAddr, has_token: bool) -> Result<(), String> {
    if addr.ip().is_loopback() || has_token {
        return Ok(());
    }
    Err(format!(
        "refusing to serve the console on `{addr}` without a token: anyone who can reach that address could read \
         the store's events and payloads. Listen on loopback (`127.0.0.1:7400`, the default), or give a token \
         with `--token env:NAME`"
    ))
}

/// A fresh CSRF token for this process: 32 random bytes in hex.
pub fn csrf_token(random: &RandomSource) -> String {
    let bytes: [u8; 32] = random.with(|r| r.random());
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `a` and `b` are the same, in time that does not depend on where they
/// differ.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The value of the cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The token of `Authorization: Bearer TOKEN`, if the request has one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers.get(AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

/// How a request proved it may use the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token is asked for (a loopback console without one).
    Open,
    /// The token came in the `Authorization` header (no browser sends it by
    /// itself, so no CSRF token is needed).
    Bearer,
    /// The token came in the login cookie.
    Cookie,
    /// A token is asked for and the request has none, or a wrong one.
    Refused,
}

/// How `headers` prove access to a console guarded by `token` (if any).
pub fn access(headers: &HeaderMap, token: Option<&str>) -> Access {
    let Some(token) = token else { return Access::Open };
    if bearer(headers).is_some_and(|t| same(t, token)) {
        return Access::Bearer;
    }
    if cookie(headers, TOKEN_COOKIE).is_some_and(|t| same(t, token)) {
        return Access::Cookie;
    }
    Access::Refused
}

/// Whether `host` (a `Host` header's value) names this machine's loopback.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, port)| if port.contains(':') { host } else { name }),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.to_ascii_lowercase().ends_with(".localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Why a request's `Host` is refused on a console listening on `listen`: on
/// loopback it must name loopback (a DNS rebinding page names its own host).
pub fn host_refused(headers: &HeaderMap, listen: &SocketAddr) -> Option<String> {
    if !listen.ip().is_loopback() {
        return None;
    }
    let host = headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if loopback_host(host) {
        None
    } else {
        Some(format!("this console answers on loopback only; the request named the host `{host}`"))
    }
}

/// Why an action is refused as coming from another site: its `Origin` is not
/// this console's (`http://HOST`), or `Sec-Fetch-Site` says it is cross-site.
pub fn cross_site(headers: &HeaderMap) -> Option<String> {
    let host = headers.get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if let Some(origin) = headers.get(ORIGIN).and_then(|o| o.to_str().ok()) {
        let ours = ["http://", "https://"].iter().any(|scheme| origin.strip_prefix(scheme) == Some(host));
        if !ours {
            return Some(format!("the form was sent from `{origin}`, not from this console (`{host}`)"));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|s| s.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return Some(format!("the browser says the form was sent from another site (`Sec-Fetch-Site: {site}`)"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn a_non_loopback_address_needs_a_token() {
        let lo: SocketAddr = "127.0.0.1:7400".parse().unwrap_or_else(|e| panic!("{e}"));
        let any: SocketAddr = "0.0.0.0:7400".parse().unwrap_or_else(|e| panic!("{e}"));
        let v6: SocketAddr = "[::1]:7400".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check_listen(&lo, false), Ok(()));
        assert_eq!(check_listen(&v6, false), Ok(()));
        assert_eq!(check_listen(&any, true), Ok(()));
        let err = check_listen(&any, false).unwrap_err();
        assert!(err.starts_with("refusing to serve the console on `0.0.0.0:7400` without a token"), "{err}");
    }

    #[test]
    fn the_host_must_be_loopback_on_loopback() {
        let lo: SocketAddr = "127.0.0.1:7400".parse().unwrap_or_else(|e| panic!("{e}"));
        for ok in ["127.0.0.1:7400", "localhost:7400", "[::1]:7400", "localhost", "app.localhost:1"] {
            assert_eq!(host_refused(&headers(&[("host", ok)]), &lo), None, "{ok}");
        }
        for bad in ["evil.example:7400", "10.0.0.1:7400", ""] {
            assert!(host_refused(&headers(&[("host", bad)]), &lo).is_some(), "{bad}");
        }
        let any: SocketAddr = "0.0.0.0:7400".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(host_refused(&headers(&[("host", "ops.example:7400")]), &any), None);
    }

    #[test]
    fn another_sites_form_is_refused() {
        let h = headers(&[("host", "127.0.0.1:7400"), ("origin", "http://127.0.0.1:7400")]);
        assert_eq!(cross_site(&h), None);
        let h = headers(&[("host", "127.0.0.1:7400"), ("origin", "http://evil.example")]);
        assert!(cross_site(&h).is_some());
        let h = headers(&[("host", "127.0.0.1:7400"), ("sec-fetch-site", "cross-site")]);
        assert!(cross_site(&h).is_some());
        let h = headers(&[("host", "127.0.0.1:7400"), ("sec-fetch-site", "same-origin")]);
        assert_eq!(cross_site(&h), None);
    }

    #[test]
    fn the_token_comes_in_a_header_or_the_login_cookie() {
        assert_eq!(access(&headers(&[]), None), Access::Open);
        assert_eq!(access(&headers(&[]), Some("s3")), Access::Refused);
        assert_eq!(access(&headers(&[("authorization", "Bearer s3")]), Some("s3")), Access::Bearer);
        assert_eq!(access(&headers(&[("authorization", "Bearer s4")]), Some("s3")), Access::Refused);
        assert_eq!(access(&headers(&[("cookie", "a=b; jadpo_console_token=s3")]), Some("s3")), Access::Cookie);
        assert_eq!(access(&headers(&[("cookie", "jadpo_console_token=s")]), Some("s3")), Access::Refused);
    }

    #[test]
    fn csrf_tokens_differ_and_compare_whole() {
        let random = RandomSource::from_seed(1);
        let (a, b) = (csrf_token(&random), csrf_token(&random));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &b));
        assert!(!same(&a, &a[..63]));
    }
}
