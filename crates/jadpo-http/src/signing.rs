//! Signed calls, as the Standard Webhooks scheme defines them
//! (<https://www.standardwebhooks.com>): every call carries `webhook-id` (one per
//! delivery, the same on every attempt and re-send, so a receiver can drop a
//! repeat), `webhook-timestamp` (the send's time, in seconds) and
//! `webhook-signature`, a space-separated list of `v1,BASE64` (HMAC-SHA256 of
//! `ID.TIMESTAMP.BODY` with each secret) or one `v1a,BASE64` (Ed25519 of the same
//! text). The ingest checks the same signatures on events it receives
//! ([`Verifier`]).
//!
//! The cryptography is ring's, the library rustls already runs on here: no
//! second implementation of HMAC or Ed25519 in the build. Secrets are read and
//! parsed when `jadpoc run` starts, so a missing or malformed one refuses the
//! start instead of failing every call.

use crate::setup::{HttpSetupError, PemUnread, pem_text};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use hyper::HeaderMap;
use jadpo_check::program::{Pem, Signing, WHSEC_PREFIX};
use ring::hmac;
use ring::signature::{Ed25519KeyPair, KeyPair};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;
use std::ffi::OsString;

/// The header naming the message.
pub const WEBHOOK_ID: &str = "webhook-id";
/// The header with the send's time, in seconds since the Unix epoch.
pub const WEBHOOK_TIMESTAMP: &str = "webhook-timestamp";
/// The header with the signatures.
pub const WEBHOOK_SIGNATURE: &str = "webhook-signature";

/// How far a signed request's timestamp may be from the receiver's clock, either
/// way, before it is refused as stale (the scheme's five minutes).
pub const TOLERANCE_S: i64 = 5 * 60;

/// The text signed: `ID.TIMESTAMP.BODY`.
fn signed_content(id: &str, timestamp_s: i64, body: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(id.len() + 24 + body.len());
    content.extend_from_slice(id.as_bytes());
    content.push(b'.');
    content.extend_from_slice(timestamp_s.to_string().as_bytes());
    content.push(b'.');
    content.extend_from_slice(body);
    content
}

/// A Standard Webhooks secret (`whsec_` and the key in base64; the prefix is
/// optional, as the scheme's libraries take it) as its key.
pub fn parse_secret(secret: &str) -> Result<hmac::Key, String> {
    let encoded = secret.trim().strip_prefix(WHSEC_PREFIX).unwrap_or(secret.trim());
    match BASE64.decode(encoded) {
        Ok(key) if key.len() >= 16 => Ok(hmac::Key::new(hmac::HMAC_SHA256, &key)),
        Ok(key) => Err(format!("holds a key of {} bytes; a secret is at least 16 (24 to 64 is usual)", key.len())),
        Err(_) => Err(format!("is not `{WHSEC_PREFIX}` followed by the key in base64")),
    }
}

/// How one connection signs its calls.
pub struct Signer {
    keys: Keys,
}

enum Keys {
    /// `v1`: HMAC-SHA256 with each secret.
    Secrets(Vec<hmac::Key>),
    /// `v1a`: Ed25519.
    Ed25519(Box<Ed25519KeyPair>),
}

impl std::fmt::Debug for Signer {
    // Keys are secrets: only their kind and number are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.keys {
            Keys::Secrets(keys) => write!(f, "Signer(v1, {} secrets)", keys.len()),
            Keys::Ed25519(_) => write!(f, "Signer(v1a)"),
        }
    }
}

impl Signer {
    /// The signer of `connection`'s `signing:`, its secrets or key read now
    /// through `env`.
    pub fn new(
        connection: &str,
        signing: &Signing,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<Signer, HttpSetupError> {
        let keys = match signing {
            Signing::Secrets(vars) => {
                let mut keys = Vec::with_capacity(vars.len());
                for var in vars {
                    let bad = |problem: String| HttpSetupError::Signing {
                        connection: connection.to_string(),
                        what: "secret",
                        origin: format!("the environment variable `{var}`"),
                        problem,
                    };
                    let value = env(var).ok_or_else(|| bad("is not set".to_string()))?;
                    let value = value.into_string().map_err(|_| bad("is not text".to_string()))?;
                    keys.push(parse_secret(&value).map_err(bad)?);
                }
                Keys::Secrets(keys)
            }
            Signing::Ed25519(pem) => {
                let origin = match pem {
                    Pem::File(path) => format!("the file `{}`", path.display()),
                    Pem::Env(var) => format!("the environment variable `{var}`"),
                };
                let bytes = pem_text(pem, env).map_err(|unread| HttpSetupError::Signing {
                    connection: connection.to_string(),
                    what: "key",
                    origin: origin.clone(),
                    problem: match unread {
                        PemUnread::File(_, e) => format!("cannot be read: {e}"),
                        PemUnread::Unset(_) => "is not set".to_string(),
                    },
                })?;
                let bad = |problem: String| HttpSetupError::Signing {
                    connection: connection.to_string(),
                    what: "key",
                    origin: origin.clone(),
                    problem,
                };
                let key = match PrivateKeyDer::from_pem_slice(&bytes) {
                    Ok(PrivateKeyDer::Pkcs8(der)) => der,
                    Ok(_) => return Err(bad("holds a private key that is not PKCS#8 (an Ed25519 key is)".into())),
                    Err(_) => return Err(bad("holds no PEM private key (`-----BEGIN PRIVATE KEY-----`)".into())),
                };
                let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(key.secret_pkcs8_der())
                    .map_err(|e| bad(format!("is not an Ed25519 private key: {e}")))?;
                Keys::Ed25519(Box::new(pair))
            }
        };
        Ok(Signer { keys })
    }

    /// `webhook-signature`'s value for a send of `body` as message `id` at
    /// `timestamp_s`.
    pub fn signature(&self, id: &str, timestamp_s: i64, body: &[u8]) -> String {
        let content = signed_content(id, timestamp_s, body);
        match &self.keys {
            Keys::Secrets(keys) => keys
                .iter()
                .map(|k| format!("v1,{}", BASE64.encode(hmac::sign(k, &content).as_ref())))
                .collect::<Vec<_>>()
                .join(" "),
            Keys::Ed25519(pair) => format!("v1a,{}", BASE64.encode(pair.sign(&content).as_ref())),
        }
    }

    /// The Ed25519 public key a receiver verifies `v1a` signatures with, in base64
    /// (the scheme's `whpk_` key without its prefix); none for secrets.
    pub fn public_key(&self) -> Option<String> {
        match &self.keys {
            Keys::Secrets(_) => None,
            Keys::Ed25519(pair) => Some(BASE64.encode(pair.public_key().as_ref())),
        }
    }
}

/// Why a signed request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A header of the three is missing or unreadable.
    Missing(&'static str),
    /// The timestamp is further than [`TOLERANCE_S`] from now.
    Stale {
        /// How far, in seconds (negative: in the future).
        age_s: i64,
    },
    /// No signature matches.
    Mismatch,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Missing(header) => write!(f, "the request has no `{header}` header a signature needs"),
            Refusal::Stale { age_s } if *age_s >= 0 => write!(
                f,
                "the request was signed {age_s}s ago, more than the {TOLERANCE_S}s a signature is accepted for"
            ),
            Refusal::Stale { age_s } => {
                write!(f, "the request is signed {}s in the future, more than the {TOLERANCE_S}s allowed", -age_s)
            }
            Refusal::Mismatch => write!(f, "no signature of the request matches the secret"),
        }
    }
}

/// Checks signed requests with the secrets a sender signs with.
pub struct Verifier {
    keys: Vec<hmac::Key>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Verifier({} secrets)", self.keys.len())
    }
}

impl Verifier {
    /// A verifier of `v1` signatures made with any of `secrets` (`whsec_...`).
    pub fn new(secrets: &[String]) -> Result<Verifier, String> {
        let keys = secrets.iter().map(|s| parse_secret(s)).collect::<Result<Vec<_>, _>>()?;
        Ok(Verifier { keys })
    }

    /// Whether `headers` sign `body` at `now_s`: the three headers present, the
    /// timestamp within [`TOLERANCE_S`], and one `v1` signature matching one
    /// secret (compared in constant time).
    pub fn verify(&self, headers: &HeaderMap, body: &[u8], now_s: i64) -> Result<(), Refusal> {
        let header = |name: &'static str| {
            headers.get(name).and_then(|v| v.to_str().ok()).filter(|v| !v.is_empty()).ok_or(Refusal::Missing(name))
        };
        let id = header(WEBHOOK_ID)?;
        let timestamp: i64 =
            header(WEBHOOK_TIMESTAMP)?.trim().parse().map_err(|_| Refusal::Missing(WEBHOOK_TIMESTAMP))?;
        let signatures = header(WEBHOOK_SIGNATURE)?;
        let age_s = now_s.saturating_sub(timestamp);
        if age_s.abs() > TOLERANCE_S {
            return Err(Refusal::Stale { age_s });
        }
        let content = signed_content(id, timestamp, body);
        let matches = signatures.split(' ').filter_map(|s| s.strip_prefix("v1,")).any(|sig| {
            BASE64.decode(sig).is_ok_and(|tag| self.keys.iter().any(|k| hmac::verify(k, &content, &tag).is_ok()))
        });
        if matches { Ok(()) } else { Err(Refusal::Mismatch) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's own example.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

    fn secrets(values: &[&str]) -> Signer {
        let vars: Vec<String> = (0..values.len()).map(|i| format!("S{i}")).collect();
        let env = |name: &str| {
            let i: usize = name.strip_prefix('S')?.parse().ok()?;
            values.get(i).map(OsString::from)
        };
        Signer::new("c", &Signing::Secrets(vars), &env).expect("a signer")
    }

    #[test]
    fn a_secret_signs_as_the_specification_s_example() {
        assert_eq!(secrets(&[SECRET]).signature(ID, TIMESTAMP, BODY), SIGNATURE);
    }

    #[test]
    fn every_secret_signs_so_a_receiver_knowing_either_accepts() {
        let other = "whsec_".to_string() + &BASE64.encode([7u8; 32]);
        let both = secrets(&[&other, SECRET]).signature(ID, TIMESTAMP, BODY);
        assert_eq!(both.split(' ').count(), 2);
        assert!(both.ends_with(&format!(" {SIGNATURE}")), "{both}");
        let mut headers = HeaderMap::new();
        headers.insert(WEBHOOK_ID, ID.parse().expect("id"));
        headers.insert(WEBHOOK_TIMESTAMP, TIMESTAMP.to_string().parse().expect("timestamp"));
        headers.insert(WEBHOOK_SIGNATURE, both.parse().expect("signature"));
        for known in [SECRET, other.as_str()] {
            let v = Verifier::new(&[known.to_string()]).expect("a verifier");
            assert_eq!(v.verify(&headers, BODY, TIMESTAMP + 10), Ok(()), "{known}");
        }
        let stranger = Verifier::new(&["whsec_".to_string() + &BASE64.encode([9u8; 32])]).expect("a verifier");
        assert_eq!(stranger.verify(&headers, BODY, TIMESTAMP), Err(Refusal::Mismatch));
        let v = Verifier::new(&[SECRET.to_string()]).expect("a verifier");
        assert_eq!(v.verify(&headers, b"{}", TIMESTAMP), Err(Refusal::Mismatch), "another body");
        assert_eq!(v.verify(&headers, BODY, TIMESTAMP + TOLERANCE_S + 1), Err(Refusal::Stale { age_s: 301 }));
        assert_eq!(v.verify(&headers, BODY, TIMESTAMP - TOLERANCE_S - 1), Err(Refusal::Stale { age_s: -301 }));
        headers.remove(WEBHOOK_ID);
        assert_eq!(v.verify(&headers, BODY, TIMESTAMP), Err(Refusal::Missing(WEBHOOK_ID)));
    }

    #[test]
    fn a_malformed_or_missing_secret_refuses_the_start_naming_its_variable() {
        for (value, problem) in [
            (Some("whsec_not base64!"), "is not `whsec_` followed by the key in base64"),
            (Some("whsec_c2hvcnQ="), "holds a key of 5 bytes"),
            (None, "is not set"),
        ] {
            let env = |_: &str| value.map(OsString::from);
            let e = Signer::new("ledger", &Signing::Secrets(vec!["LEDGER_WHSEC".into()]), &env).expect_err("refused");
            let text = e.to_string();
            assert!(text.contains("`LEDGER_WHSEC`") && text.contains(problem) && text.contains("ledger"), "{text}");
        }
    }

    #[test]
    fn an_ed25519_key_signs_v1a_and_its_public_key_verifies() {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).expect("a key");
        let pem =
            format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", BASE64.encode(pkcs8.as_ref()));
        let env = |_: &str| Some(OsString::from(pem.clone()));
        let signer = Signer::new("c", &Signing::Ed25519(Pem::Env("KEY".into())), &env).expect("a signer");
        let signature = signer.signature(ID, TIMESTAMP, BODY);
        let sig = BASE64.decode(signature.strip_prefix("v1a,").expect("v1a")).expect("base64");
        let public = BASE64.decode(signer.public_key().expect("a public key")).expect("base64");
        let key = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public);
        assert!(key.verify(&signed_content(ID, TIMESTAMP, BODY), &sig).is_ok());
        let env = |_: &str| Some(OsString::from("not a key"));
        let e = Signer::new("c", &Signing::Ed25519(Pem::Env("KEY".into())), &env).expect_err("refused");
        assert!(e.to_string().contains("holds no PEM private key"), "{e}");
    }
}
