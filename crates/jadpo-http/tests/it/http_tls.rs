//! The HTTP driver against a real TLS provider on 127.0.0.1 (rustls, hyper), with a
//! CA and a client certificate made by the test: a connection's `tls:` block,
//! client-certificate checking, and the start refused on a missing file or bad PEM.

use crate::http_server;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use jadpo_check::program::{FailureKind, Program};
use jadpo_core::drivers::{CallRequest, Driver};
use jadpo_core::rules::Outcome;
use jadpo_http::client::{HttpClient, HttpDriver, HttpSetupError};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A CA, and a certificate with its key that it signed.
struct Pki {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn pki(names: &[&str]) -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("key")).expect("ca");
    let key = KeyPair::generate().expect("key");
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = CertificateParams::new(names).expect("params").signed_by(&key, &ca).expect("cert");
    Pki { ca_pem: ca.pem(), cert_pem: cert.pem(), key_pem: key.serialize_pem() }
}

/// A TLS 1.3 provider answering 200, its server certificate from `server`, and
/// when `clients` is given, requiring a client certificate that CA signed.
struct TlsProvider {
    port: u16,
    requests: Arc<AtomicUsize>,
}

async fn tls_provider(server: &Pki, clients: Option<&Pki>) -> TlsProvider {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let chain = vec![CertificateDer::from_pem_slice(server.cert_pem.as_bytes()).expect("cert")];
    let key = PrivateKeyDer::from_pem_slice(server.key_pem.as_bytes()).expect("key");
    let builder = rustls::ServerConfig::builder_with_protocol_versions(&[&rustls::version::TLS13]);
    let config = match clients {
        Some(c) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.add(CertificateDer::from_pem_slice(c.ca_pem.as_bytes()).expect("ca")).expect("root");
            let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots)).build().expect("verifier");
            builder.with_client_cert_verifier(verifier).with_single_cert(chain, key)
        }
        None => builder.with_no_client_auth().with_single_cert(chain, key),
    }
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, counted) = (acceptor.clone(), counted.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from_static(b"{}")))) }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
            });
        }
    });
    TlsProvider { port, requests }
}

fn program(port: u16, tls: &str) -> Arc<Program> {
    let text = http_server::program_text(&format!("https://localhost:{port}"), tls, "", "30s");
    jadpo_test_support::program(&text)
}

fn no_env(_: &str) -> Option<OsString> {
    None
}

fn request() -> CallRequest {
    CallRequest {
        action: "record".into(),
        args: json!({"id": "p1", "cents": 250}),
        event_id: Some(7),
        event: "Paid".into(),
        delivery: Some(42),
        attempt: 1,
    }
}

/// A file in `dir` holding `text`; its path as the program writes it.
fn file(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_str().expect("utf-8").replace('\\', "/")
}

fn driver(p: &Program, env: &dyn Fn(&str) -> Option<OsString>) -> Result<HttpDriver, HttpSetupError> {
    HttpDriver::new(p, 0, HttpClient::with_env(&no_env).expect("client"), env)
}

/// The code and kind of a failed call, or "ok".
fn ended(o: &Outcome) -> (String, Option<FailureKind>) {
    match o {
        Outcome::Succeeded { .. } => ("ok".into(), None),
        Outcome::Failed(f) => (f.code.clone(), Some(f.kind)),
    }
}

#[tokio::test]
async fn tls_a_private_ca_and_a_client_certificate_are_used() {
    let dir = tempfile::tempdir().expect("dir");
    let server = pki(&["localhost"]);
    let client = pki(&["client"]);
    let p = tls_provider(&server, Some(&client)).await;
    let ca = file(dir.path(), "ca.pem", &server.ca_pem);
    let cert = file(dir.path(), "client.pem", &client.cert_pem);
    let key = file(dir.path(), "client.key", &client.key_pem);
    let tls = format!(r#"tls: {{ ca: "{ca}" client_cert: "{cert}" client_key: "{key}" }}"#);
    let d = driver(&program(p.port, &tls), &no_env).expect("driver");
    assert_eq!(d.call(request()).await, Outcome::Succeeded { http_status: Some(200) });
    assert_eq!(p.requests.load(Ordering::SeqCst), 1);
    // The same, the key and certificate from the environment.
    let tls = format!(r#"tls: {{ ca: "{ca}" only_ca: true client_cert: env("CERT") client_key: env("KEY") }}"#);
    let env = |name: &str| match name {
        "CERT" => Some(OsString::from(&client.cert_pem)),
        "KEY" => Some(OsString::from(&client.key_pem)),
        _ => None,
    };
    let d = driver(&program(p.port, &tls), &env).expect("driver");
    assert_eq!(d.call(request()).await, Outcome::Succeeded { http_status: Some(200) });
}

#[tokio::test]
async fn tls_an_untrusted_server_and_a_refused_client_certificate_are_transport_tls() {
    let dir = tempfile::tempdir().expect("dir");
    let server = pki(&["localhost"]);
    let client = pki(&["client"]);
    let p = tls_provider(&server, Some(&client)).await;
    // No `ca`: the server's certificate is not trusted.
    let d = driver(&program(p.port, ""), &no_env).expect("driver");
    let o = d.call(request()).await;
    assert_eq!(ended(&o), ("transport.tls".into(), Some(FailureKind::Unavailable)), "{o:?}");
    let Outcome::Failed(f) = &o else { unreachable!() };
    assert!(f.reason.as_deref().is_some_and(|r| r.contains("certificate")), "{o:?}");
    // Trusted, but no client certificate: TLS 1.3 refuses it after the client's
    // side of the handshake, and the request was never taken.
    let ca = file(dir.path(), "ca.pem", &server.ca_pem);
    let d = driver(&program(p.port, &format!(r#"tls: {{ ca: "{ca}" }}"#)), &no_env).expect("driver");
    let o = d.call(request()).await;
    assert_eq!(ended(&o), ("transport.tls".into(), Some(FailureKind::Unavailable)), "{o:?}");
    // A client certificate of another CA: refused the same way.
    let stranger = pki(&["client"]);
    let cert = file(dir.path(), "c.pem", &stranger.cert_pem);
    let key = file(dir.path(), "c.key", &stranger.key_pem);
    let tls = format!(r#"tls: {{ ca: "{ca}" client_cert: "{cert}" client_key: "{key}" }}"#);
    let o = driver(&program(p.port, &tls), &no_env).expect("driver").call(request()).await;
    assert_eq!(ended(&o), ("transport.tls".into(), Some(FailureKind::Unavailable)), "{o:?}");
    assert_eq!(p.requests.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn tls_only_ca_trusts_only_the_given_roots() {
    let dir = tempfile::tempdir().expect("dir");
    let server = pki(&["localhost"]);
    let p = tls_provider(&server, None).await;
    let other = pki(&["x"]);
    let ca = file(dir.path(), "other.pem", &other.ca_pem);
    let d = driver(&program(p.port, &format!(r#"tls: {{ ca: "{ca}" only_ca: true }}"#)), &no_env).expect("driver");
    assert_eq!(ended(&d.call(request()).await).0, "transport.tls");
    let ca = file(dir.path(), "ca.pem", &server.ca_pem);
    let d = driver(&program(p.port, &format!(r#"tls: {{ ca: "{ca}" only_ca: true }}"#)), &no_env).expect("driver");
    assert_eq!(d.call(request()).await, Outcome::Succeeded { http_status: Some(200) });
}

#[test]
fn tls_a_missing_file_or_bad_pem_refuses_the_start_naming_it() {
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("nope.pem").to_str().expect("utf-8").replace('\\', "/");
    let p = program(9, &format!(r#"tls: {{ ca: "{missing}" }}"#));
    let e = driver(&p, &no_env).expect_err("refused");
    let text = e.to_string();
    assert!(text.starts_with("connection `c`: the tls `ca` file `") && text.contains("nope.pem"), "{text}");
    assert!(text.contains("cannot be read"), "{text}");

    let garbage = file(dir.path(), "garbage.pem", "hello, not a certificate\n");
    let e = driver(&program(9, &format!(r#"tls: {{ ca: "{garbage}" }}"#)), &no_env).expect_err("refused");
    assert!(e.to_string().contains("garbage.pem") && e.to_string().contains("holds no PEM certificate"), "{e}");

    let client = pki(&["client"]);
    let cert = file(dir.path(), "client.pem", &client.cert_pem);
    let tls = format!(r#"tls: {{ client_cert: "{cert}" client_key: "{cert}" }}"#);
    let e = driver(&program(9, &tls), &no_env).expect_err("refused");
    assert!(e.to_string().contains("tls `client_key`") && e.to_string().contains("holds no PEM private key"), "{e}");

    let tls = r#"tls: { client_cert: env("CERT") client_key: env("KEY") }"#;
    let e = driver(&program(9, tls), &no_env).expect_err("refused");
    assert_eq!(
        e.to_string(),
        "connection `c` needs the environment variable `CERT` (tls `client_cert`), which is not set"
    );
}

#[test]
fn tls_a_bad_ssl_cert_file_or_dir_refuses_the_start() {
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("roots.pem");
    let env = |name: &str| (name == "SSL_CERT_FILE").then(|| missing.clone().into_os_string());
    let e = HttpClient::with_env(&env).expect_err("refused");
    assert!(e.to_string().starts_with("`SSL_CERT_FILE`: cannot read `") && e.to_string().contains("roots.pem"), "{e}");
    std::fs::write(&missing, "garbage").expect("write");
    let e = HttpClient::with_env(&env).expect_err("refused");
    assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
    std::fs::write(&missing, pki(&["x"]).ca_pem).expect("write");
    assert!(HttpClient::with_env(&env).is_ok());
    let empty = tempfile::tempdir().expect("dir");
    let env = |name: &str| (name == "SSL_CERT_DIR").then(|| empty.path().as_os_str().to_owned());
    let e = HttpClient::with_env(&env).expect_err("refused");
    assert!(e.to_string().starts_with("`SSL_CERT_DIR`: no certificate was found"), "{e}");
}
