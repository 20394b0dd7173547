//! Signed calls, verified by an implementation that is not jadpo's: a provider
//! checking each call with the Standard Webhooks reference library
//! (`standardwebhooks` from PyPI, `tests/providers/standardwebhooks_provider.py`).

use crate::common::{Env, state};
use crate::http_server::program_text;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The provider's secret, and another.
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const OTHER: &str = "whsec_c2VjcmV0LW9mLWFub3RoZXItcHJvdmlkZXIhIQ==";

/// The reference provider, killed when dropped.
struct Provider {
    child: Child,
    url: String,
    log: std::path::PathBuf,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Provider {
    /// The provider verifying with `secret`, or `None` when Python's
    /// `standardwebhooks` is not installed here (CI installs it, and there the
    /// test must run).
    fn start(dir: &Path, secret: &str) -> Option<Provider> {
        let has = Command::new("python3").args(["-c", "import standardwebhooks"]).status().is_ok_and(|s| s.success());
        if !has {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "CI must have Python's `standardwebhooks` (pip install standardwebhooks)"
            );
            eprintln!("skipped: Python's `standardwebhooks` is not installed (pip install standardwebhooks)");
            return None;
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/providers/standardwebhooks_provider.py");
        let (port_file, log) = (dir.join("provider.port"), dir.join("provider.log"));
        let child = Command::new("python3")
            .arg(&script)
            .args([secret, port_file.to_str()?, log.to_str()?])
            .stdout(Stdio::null())
            .spawn()
            .expect("start the provider");
        let start = Instant::now();
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                break port;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "the provider did not start");
            std::thread::sleep(Duration::from_millis(20));
        };
        Some(Provider { child, url: format!("http://127.0.0.1:{}", port.trim()), log })
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().map(str::to_string).collect()
    }
}

/// `events` deliveries of `Paid` through a connection signing with the secrets in
/// `vars` (`signing: { secret: [env("OLD"), env("NEW")] }`) to a provider that
/// knows `provider_secret`, run until every one is final; their states and what
/// the provider saw.
fn deliver(provider_secret: &str, vars: &[(&str, &str)], events: usize) -> Option<(Vec<String>, Vec<String>, Env)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let provider = Provider::start(dir.path(), provider_secret)?;
    let url = provider.url.clone();
    let env = Env::new("outbox.db", |d| {
        let text = program_text(&url, "signing: { secret: [env(\"OLD\"), env(\"NEW\")] }", "", "5s")
            .replace("    timeout: 5s\n", "    timeout: 5s\n    retry: { attempts: 1 }\n");
        std::fs::write(d.join("p.jadpo"), text).expect("write program");
        d.join("p.jadpo")
    });
    for i in 0..events {
        let payload = format!(r#"{{"id": "p{i}", "cents": {i}}}"#);
        let out = env.jadpoc(&["emit", env.prog(), "Paid", &payload, "--db", env.db()]);
        assert!(out.status.success(), "emit: {}", String::from_utf8_lossy(&out.stderr));
    }
    let (list, _log) = env.run_until_with(&[], vars, |l| {
        l.len() == events && l.iter().all(|d| ["succeeded", "failed"].contains(&state(d)))
    });
    let states = list.iter().map(|d| state(d).to_string()).collect();
    Some((states, provider.lines(), env))
}

#[test]
fn signed_calls_verify_with_the_reference_library_through_a_rotation() {
    // Signed with the old secret and the provider's (new) one: it verifies.
    let Some((states, seen, _env)) = deliver(SECRET, &[("OLD", OTHER), ("NEW", SECRET)], 3) else { return };
    assert_eq!(states, ["succeeded"; 3]);
    let mut ids: Vec<&str> = seen.iter().filter_map(|l| l.strip_prefix("ok ")).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["msg_1", "msg_2", "msg_3"], "the provider's log: {seen:?}");
}

#[test]
fn a_call_signed_with_a_secret_the_provider_does_not_know_is_refused_there() {
    let Some((states, seen, env)) = deliver(SECRET, &[("OLD", OTHER), ("NEW", OTHER)], 1) else { return };
    assert_eq!(states, ["failed"]);
    assert!(seen.len() == 1 && seen[0].starts_with("refused "), "the provider's log: {seen:?}");
    assert_eq!(env.show(1)["history"][0]["code"], "http.401");
}

#[test]
fn a_run_with_a_malformed_secret_refuses_to_start_naming_it() {
    let env = Env::new("outbox.db", |d| {
        let text = program_text("http://127.0.0.1:9", "signing: { secret: env(\"LEDGER_WHSEC\") }", "", "5s");
        std::fs::write(d.join("p.jadpo"), text).expect("write program");
        d.join("p.jadpo")
    });
    let out = env.cmd(&["run", env.prog(), "--db", env.db()]).env("LEDGER_WHSEC", "whsec_not base64").output();
    let out = out.expect("run jadpoc");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("connection `c`: the signing secret in the environment variable `LEDGER_WHSEC` is not `whsec_`"),
        "{err}"
    );
}

#[test]
fn verify_secret_names_an_environment_variable_holding_a_secret() {
    let env = Env::new("outbox.db", |d| {
        std::fs::write(d.join("p.jadpo"), program_text("http://127.0.0.1:9", "", "", "5s")).expect("write program");
        d.join("p.jadpo")
    });
    for (flag, value, says) in [
        ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", None, "names where the secret is: `env:NAME`"),
        ("env:INGEST_WHSEC", None, "the environment variable `INGEST_WHSEC` is not set"),
        ("env:INGEST_WHSEC", Some("not-a-secret"), "a secret is not `whsec_` followed by the key in base64"),
    ] {
        let mut cmd = env.cmd(&["run", env.prog(), "--db", env.db(), "--listen", "0", "--verify-secret", flag]);
        cmd.env_remove("INGEST_WHSEC");
        if let Some(v) = value {
            cmd.env("INGEST_WHSEC", v);
        }
        let out = cmd.output().expect("run jadpoc");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(says), "{flag}: {err}");
    }
    // It checks what `--listen` takes, so it needs `--listen`.
    let out = env.jadpoc(&["run", env.prog(), "--db", env.db(), "--verify-secret", "env:X"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"));
}
