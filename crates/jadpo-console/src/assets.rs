//! The console's stylesheet and script, embedded in the binary at build time
//! (no CDN, nothing fetched at run time), served with an ETag.

use crate::{Answer, Failure, respond, with_etag};
use hyper::{HeaderMap, StatusCode};

/// The stylesheet: readable from 320 px wide up.
pub const CSS: &str = include_str!("../assets/console.css");
/// The script: the overview's refresh and the actions' confirmations. Every
/// page works without it.
pub const JS: &str = include_str!("../assets/console.js");

pub(crate) fn answer(name: &str, headers: &HeaderMap) -> Result<Answer, Failure> {
    let (content_type, body) = match name {
        "console.css" => ("text/css; charset=utf-8", CSS),
        "console.js" => ("text/javascript; charset=utf-8", JS),
        _ => return Err(Failure::new(StatusCode::NOT_FOUND, format!("no asset `{name}`"))),
    };
    Ok(with_etag(headers, respond(StatusCode::OK, content_type, body), body.as_bytes()))
}
