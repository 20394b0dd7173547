//! What setting up the HTTP drivers reads and how it fails: the PEM text a
//! connection's `tls:` block and its `signing:` key are read from, and the
//! error that refuses `jadpoc run`'s start. The client, its TLS settings and the
//! signing all read through here, so none of them depends on another for it.

use jadpo_check::program::Pem;
use std::ffi::OsString;

/// Why HTTP drivers could not be made; `jadpoc run` refuses to start on any.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpSetupError {
    /// A header's `env("NAME")` is not set.
    #[error("connection `{connection}` needs the environment variable `{name}` (header `{header}`), which is not set")]
    MissingEnv {
        /// The connection.
        connection: String,
        /// The header it is for.
        header: String,
        /// The variable.
        name: String,
    },
    /// A header's `env("NAME")` is set but is not text a header can carry.
    #[error(
        "connection `{connection}`: the environment variable `{name}` (header `{header}`) is not a valid header value"
    )]
    BadEnv {
        /// The connection.
        connection: String,
        /// The header it is for.
        header: String,
        /// The variable.
        name: String,
    },
    /// A header's name, or its literal value, cannot be sent.
    #[error("connection `{connection}`: header `{header}` is not a valid HTTP header")]
    BadHeader {
        /// The connection.
        connection: String,
        /// The header.
        header: String,
    },
    /// The connection's url and an action's path do not make a URL.
    #[error("action `{action}`: `{url}` is not a valid URL")]
    BadUrl {
        /// The action.
        action: String,
        /// The URL as joined.
        url: String,
    },
    /// The program has no connection at the index given (a caller's mistake).
    #[error("the program has no connection #{index}")]
    NoConnection {
        /// The index given.
        index: usize,
    },
    /// TLS could not be set up.
    #[error("cannot set up TLS: {0}")]
    Tls(String),
    /// `SSL_CERT_FILE` or `SSL_CERT_DIR` is set and gives no usable root.
    #[error("`{variable}`: {problem}")]
    TlsEnv {
        /// The variable.
        variable: &'static str,
        /// What is wrong, naming the file or folder.
        problem: String,
    },
    /// A file of a connection's `tls:` block cannot be read.
    #[error("connection `{connection}`: the tls `{key}` file `{file}` {problem}")]
    TlsFile {
        /// The connection.
        connection: String,
        /// The key of the `tls:` block (`ca`, `client_cert`, `client_key`).
        key: &'static str,
        /// The file, as the program names it (joined to its folder).
        file: String,
        /// What is wrong.
        problem: String,
    },
    /// A `tls:` block's `env("NAME")` is not set.
    #[error("connection `{connection}` needs the environment variable `{name}` (tls `{key}`), which is not set")]
    TlsMissingEnv {
        /// The connection.
        connection: String,
        /// The key of the `tls:` block.
        key: &'static str,
        /// The variable.
        name: String,
    },
    /// A `signing:` secret or key cannot be read or used.
    #[error("connection `{connection}`: the signing {what} in {origin} {problem}")]
    Signing {
        /// The connection.
        connection: String,
        /// `secret` or `key`.
        what: &'static str,
        /// Where it was read: a variable or a file, in words.
        origin: String,
        /// What is wrong.
        problem: String,
    },
    /// A `tls:` block's PEM is not what it must be.
    #[error("connection `{connection}`: the tls `{key}` in {origin} {problem}")]
    TlsPem {
        /// The connection.
        connection: String,
        /// The key of the `tls:` block.
        key: &'static str,
        /// Where it was read: a file or a variable, in words.
        origin: String,
        /// What is wrong.
        problem: String,
    },
}

/// Why PEM text could not be read.
pub(crate) enum PemUnread {
    /// The file, as shown, and the error reading it.
    File(String, std::io::Error),
    /// The variable, which is not set.
    Unset(String),
}

/// The text of `pem` (a file's content or an environment variable's value), or
/// why it could not be read; the TLS settings and a signing key read PEM alike.
pub(crate) fn pem_text(pem: &Pem, env: &dyn Fn(&str) -> Option<OsString>) -> Result<Vec<u8>, PemUnread> {
    match pem {
        Pem::File(path) => std::fs::read(path).map_err(|e| PemUnread::File(path.display().to_string(), e)),
        Pem::Env(name) => env(name).map(OsString::into_encoded_bytes).ok_or_else(|| PemUnread::Unset(name.clone())),
    }
}
