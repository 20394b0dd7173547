//! TLS settings of the HTTP client: the roots a connection trusts and the client
//! certificate it shows, all read and parsed when `jadpoc run` starts, so that a
//! missing file or bad PEM refuses the start instead of failing every call.
//!
//! Roots: the system's (`SSL_CERT_FILE` or `SSL_CERT_DIR` when set, as OpenSSL
//! reads them; else the platform's store), or Mozilla's bundled roots when the
//! system has none; a connection's `tls: { ca: ... }` adds its own, or with
//! `only_ca: true` trusts only those.

use crate::setup::{HttpSetupError, PemUnread, pem_text};
use jadpo_check::program::{Pem, Tls};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::ffi::OsString;
use std::sync::Arc;

/// The variables that point the system's roots elsewhere.
const ENV_CERT_FILE: &str = "SSL_CERT_FILE";
const ENV_CERT_DIR: &str = "SSL_CERT_DIR";

/// The system's roots, as described in the module's documentation. A set
/// `SSL_CERT_FILE` or `SSL_CERT_DIR` that yields no certificate, or names a file
/// that cannot be read or parsed, refuses the start naming it.
pub fn system_roots(env: &dyn Fn(&str) -> Option<OsString>) -> Result<RootCertStore, HttpSetupError> {
    let mut roots = RootCertStore::empty();
    let file = env(ENV_CERT_FILE).filter(|v| !v.is_empty());
    let dir = env(ENV_CERT_DIR).filter(|v| !v.is_empty());
    if file.is_some() || dir.is_some() {
        if let Some(path) = &file {
            let shown = path.to_string_lossy().into_owned();
            let bytes = std::fs::read(path).map_err(|e| HttpSetupError::TlsEnv {
                variable: ENV_CERT_FILE,
                problem: format!("cannot read `{shown}`: {e}"),
            })?;
            let certs = certificates(&bytes).map_err(|problem| HttpSetupError::TlsEnv {
                variable: ENV_CERT_FILE,
                problem: format!("`{shown}` {problem}"),
            })?;
            add_all(&mut roots, certs).map_err(|problem| HttpSetupError::TlsEnv {
                variable: ENV_CERT_FILE,
                problem: format!("`{shown}`: {problem}"),
            })?;
        }
        if let Some(dirs) = &dir {
            let mut found = 0usize;
            for d in std::env::split_paths(dirs) {
                let entries = std::fs::read_dir(&d).map_err(|e| HttpSetupError::TlsEnv {
                    variable: ENV_CERT_DIR,
                    problem: format!("cannot read the folder `{}`: {e}", d.display()),
                })?;
                for entry in entries.flatten() {
                    // A folder of roots (as `openssl rehash` makes) may hold other
                    // files: only those that parse as certificates count.
                    if let Ok(bytes) = std::fs::read(entry.path())
                        && let Ok(certs) = certificates(&bytes)
                    {
                        found += roots.add_parsable_certificates(certs).0;
                    }
                }
            }
            if found == 0 {
                return Err(HttpSetupError::TlsEnv {
                    variable: ENV_CERT_DIR,
                    problem: format!("no certificate was found in `{}`", dirs.to_string_lossy()),
                });
            }
        }
        return Ok(roots);
    }
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if roots.is_empty() {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    Ok(roots)
}

/// Every certificate of a PEM text; an error when it holds none or a broken one.
fn certificates(bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err("holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)".into());
    }
    Ok(certs)
}

/// Adds certificates as roots; an error naming the first that is not one.
fn add_all(roots: &mut RootCertStore, certs: Vec<CertificateDer<'static>>) -> Result<(), String> {
    for c in certs {
        roots.add(c).map_err(|e| format!("a certificate cannot be a root: {e}"))?;
    }
    Ok(())
}

/// The PEM text of `pem`, and where it was read in words.
fn read_pem(
    connection: &str,
    key: &'static str,
    pem: &Pem,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<(Vec<u8>, String), HttpSetupError> {
    match pem_text(pem, env) {
        Ok(bytes) => Ok((
            bytes,
            match pem {
                Pem::File(path) => format!("`{}`", path.display()),
                Pem::Env(name) => format!("the environment variable `{name}`"),
            },
        )),
        Err(PemUnread::File(file, e)) => Err(HttpSetupError::TlsFile {
            connection: connection.to_string(),
            key,
            file,
            problem: format!("cannot be read: {e}"),
        }),
        Err(PemUnread::Unset(name)) => {
            Err(HttpSetupError::TlsMissingEnv { connection: connection.to_string(), key, name })
        }
    }
}

/// A connection's TLS settings, read and parsed: its client configuration.
pub fn client_config(
    connection: &str,
    tls: &Tls,
    system: &Arc<RootCertStore>,
    provider: &Arc<rustls::crypto::CryptoProvider>,
    env: &dyn Fn(&str) -> Option<OsString>,
) -> Result<rustls::ClientConfig, HttpSetupError> {
    let bad = |key: &'static str, source: &str, problem: String| HttpSetupError::TlsPem {
        connection: connection.to_string(),
        key,
        origin: source.to_string(),
        problem,
    };
    let mut roots = if tls.only_ca { RootCertStore::empty() } else { system.as_ref().clone() };
    if let Some(ca) = &tls.ca {
        let (bytes, source) = read_pem(connection, "ca", ca, env)?;
        let certs = certificates(&bytes).map_err(|p| bad("ca", &source, p))?;
        add_all(&mut roots, certs).map_err(|p| bad("ca", &source, p))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| HttpSetupError::Tls(e.to_string()))?
        .with_root_certificates(roots);
    match &tls.client {
        None => Ok(builder.with_no_client_auth()),
        Some(client) => {
            let (bytes, source) = read_pem(connection, "client_cert", &client.cert, env)?;
            let chain = certificates(&bytes).map_err(|p| bad("client_cert", &source, p))?;
            let (bytes, key_source) = read_pem(connection, "client_key", &client.key, env)?;
            let key = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
                let problem = match e {
                    rustls::pki_types::pem::Error::NoItemsFound => {
                        "holds no PEM private key (`-----BEGIN PRIVATE KEY-----`)".to_string()
                    }
                    other => format!("is not valid PEM: {other}"),
                };
                bad("client_key", &key_source, problem)
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| bad("client_key", &key_source, format!("does not go with the client certificate: {e}")))
        }
    }
}
