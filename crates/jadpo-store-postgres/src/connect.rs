//! A PostgreSQL location read as libpq's URL form has it, TLS by rustls for its
//! `sslmode`, and the URL as it may be shown (never with its password).

use super::pg_error;
use jadpo_core::store::StoreError;
use postgres::config::SslMode;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The schema jadpo's tables live in unless `?schema=` names another.
pub const DEFAULT_SCHEMA: &str = "jadpo";

/// How long a connection attempt waits when the URL does not say.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// `sslmode`, as libpq reads it (`allow` is taken as `prefer`, `verify-ca` as
/// `verify-full`: a certificate is only worth checking with its name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ssl {
    /// No TLS.
    Disable,
    /// TLS if the server offers it, the certificate not checked (libpq's default).
    Prefer,
    /// TLS always, the certificate not checked.
    Require,
    /// TLS always, the certificate checked against the web's roots and the host.
    VerifyFull,
}

/// A PostgreSQL store's location, read from its URL.
#[derive(Clone)]
pub struct PgLocation {
    /// The connection's settings (the password among them, if any).
    pub config: postgres::Config,
    /// Its `sslmode`.
    pub ssl: Ssl,
    /// The schema for jadpo's tables.
    pub schema: String,
    /// The URL as it may be shown: the password replaced by `***`.
    pub shown: String,
}

impl std::fmt::Debug for PgLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgLocation").field("url", &self.shown).field("schema", &self.schema).finish()
    }
}

/// `url` with its password, if any, replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

fn bad(shown: &str, why: impl std::fmt::Display) -> StoreError {
    StoreError::Open { path: shown.to_string(), message: why.to_string() }
}

impl PgLocation {
    /// Read a `postgres://` or `postgresql://` URL; `password_env` is `PGPASSWORD`,
    /// used when the URL has no password.
    pub fn parse(url: &str, password_env: Option<String>) -> Result<PgLocation, StoreError> {
        let shown = redact(url);
        // `sslmode` and `schema` are read here; the rest is tokio-postgres's.
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut ssl = Ssl::Prefer;
        let mut schema = DEFAULT_SCHEMA.to_string();
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sslmode" => {
                    ssl = match value {
                        "disable" => Ssl::Disable,
                        "allow" | "prefer" => Ssl::Prefer,
                        "require" => Ssl::Require,
                        "verify-ca" | "verify-full" => Ssl::VerifyFull,
                        other => {
                            return Err(bad(
                                &shown,
                                format!(
                                    "`sslmode={other}` is not a mode (disable, allow, prefer, require, \
                                     verify-ca, verify-full)"
                                ),
                            ));
                        }
                    }
                }
                "schema" => schema = value.to_string(),
                _ => kept.push(pair),
            }
        }
        if schema.is_empty()
            || schema.len() > 63
            || !schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            || schema.starts_with(|c: char| c.is_ascii_digit())
        {
            return Err(bad(&shown, format!("`schema={schema}` must be a name of letters, digits and `_`")));
        }
        let rebuilt = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        let mut config = postgres::Config::from_str(&rebuilt).map_err(|e| bad(&shown, e))?;
        if config.get_password().is_none()
            && let Some(password) = password_env.filter(|p| !p.is_empty())
        {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("jadpo");
        }
        config.ssl_mode(match ssl {
            Ssl::Disable => SslMode::Disable,
            Ssl::Prefer => SslMode::Prefer,
            Ssl::Require | Ssl::VerifyFull => SslMode::Require,
        });
        Ok(PgLocation { config, ssl, schema, shown })
    }

    /// A new connection, its search path set to the store's schema, then
    /// `pg_catalog`, then `pg_temp`: every connection the store makes is made
    /// here, so that the store's statements reach the schema's tables. The
    /// `postgres` client starts a runtime of its own for each, and panics when
    /// it cannot (the process has no file descriptor left): the store is then
    /// unreachable, as when the connection is refused.
    pub fn connect(&self) -> Result<postgres::Client, StoreError> {
        let tls = match self.ssl {
            Ssl::Disable => None,
            Ssl::Prefer | Ssl::Require => Some(tls(false).map_err(|e| bad(&self.shown, e))?),
            Ssl::VerifyFull => Some(tls(true).map_err(|e| bad(&self.shown, e))?),
        };
        let connected = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match tls {
            None => self.config.connect(postgres::NoTls),
            Some(tls) => self.config.connect(tls),
        }));
        let unreachable = |message: String| StoreError::Unreachable { url: self.shown.clone(), message };
        let mut client = match connected {
            Ok(connected) => connected.map_err(|e| unreachable(e.to_string()))?,
            Err(_) => {
                return Err(unreachable(
                    "the client could not start its runtime (the process may have no file descriptor left)".to_string(),
                ));
            }
        };
        client.batch_execute(&search_path(&self.schema)).map_err(pg_error)?;
        Ok(client)
    }
}

/// The statement each of the store's connections runs once, as it connects, so
/// that the store's statements, which name its tables unqualified, reach the
/// tables of `schema` (a name of letters, digits and `_`, checked by
/// [`PgLocation::parse`]) and nothing else:
///
/// - the store's schema first: a table of the same name in any other schema
///   (`public.deliveries`, or a catalog table of that name) is never read;
/// - then `pg_catalog`, named so that it is not searched first, as it is when
///   left out. The built-in functions, operators and types still resolve; one
///   of the schema's of the same name and argument types would come first, so
///   the schema holds only jadpo's own functions (`emit`, `notify_events`,
///   `claim_turn`, `claim_turn_key`, `end_claim_turn`), none named like a
///   built-in one, and only the role that migrates it is meant to create in it;
/// - then `pg_temp`, last, as it is otherwise searched first for tables: a
///   temporary table named like one of the store's would capture its
///   statements.
///
/// A search path is a setting of the session, set once here and assumed kept
/// for the connection's life: none of the store's statements resets it (no
/// `DISCARD ALL`, `RESET ALL` or `SET search_path`), and a connection is never
/// shared with another session's settings. A pooler between the store and the
/// server must therefore keep each session to one client (PgBouncer's
/// `pool_mode = session`, whose `server_reset_query` runs only when the client
/// goes); a pooler by transaction would lose the search path, as it loses the
/// connection's writer setting and its claim turn (a session's advisory lock).
fn search_path(schema: &str) -> String {
    format!("SET search_path TO {}, pg_catalog, pg_temp", super::schema::quoted(schema))
}

/// rustls on ring, as the HTTP driver: checking the certificate against the web's
/// roots (`verify`), or only encrypting, as libpq's `require` and `prefer` do.
fn tls(verify: bool) -> Result<tokio_postgres_rustls::MakeRustlsConnect, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder =
        rustls::ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let config = if verify {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        builder.with_root_certificates(roots).with_no_client_auth()
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(Unchecked(provider))).with_no_client_auth()
    };
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// The certificate is not checked (libpq's `require` and `prefer`); signatures
/// of the handshake still are.
#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::{PgLocation, Ssl, redact};

    #[test]
    fn a_password_is_never_shown() {
        assert_eq!(
            redact("postgres://u:s3cret@h:5432/db?sslmode=require"),
            "postgres://u:***@h:5432/db?sslmode=require"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        let l = PgLocation::parse("postgresql://u:s3cret@h/db?schema=jobs&sslmode=disable", None).expect("parse");
        assert!(!format!("{l:?}").contains("s3cret"));
        assert_eq!((l.schema.as_str(), l.ssl), ("jobs", Ssl::Disable));
        let err = PgLocation::parse("postgres://u:s3cret@h/db?sslmode=maybe", None).unwrap_err().to_string();
        assert!(err.contains("sslmode=maybe") && !err.contains("s3cret"), "{err}");
        let err = PgLocation::parse("postgres://u:s3cret@h/db?schema=a;drop", None).unwrap_err().to_string();
        assert!(err.contains("schema") && !err.contains("s3cret"), "{err}");
    }

    #[test]
    fn the_password_comes_from_pgpassword_when_the_url_has_none() {
        let l = PgLocation::parse("postgres://u@h/db", Some("pw".into())).expect("parse");
        assert_eq!(l.config.get_password(), Some(&b"pw"[..]));
        let l = PgLocation::parse("postgres://u:url@h/db", Some("pw".into())).expect("parse");
        assert_eq!(l.config.get_password(), Some(&b"url"[..]));
    }
}
