//! The JavaScript API (wasm-bindgen): each function takes the buffer's text and
//! returns its answer as a JSON string, which the page parses. No logic here.

use serde::Serialize;
use wasm_bindgen::prelude::wasm_bindgen;

/// A value as JSON; a value that does not serialize (none of ours fails) as an
/// error object rather than a panic.
fn json(value: &impl Serialize) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|e| serde_json::json!({"ok": false, "message": format!("internal: {e}")}).to_string())
}

/// `jadpoc check --format json` of `text`.
#[wasm_bindgen]
pub fn check(text: &str) -> String {
    json(&crate::check(text))
}

/// The formatted text, or why it was not formatted.
#[wasm_bindgen]
pub fn format(text: &str) -> String {
    json(&crate::format(text))
}

/// The plan of one subscriber's attempts (every subscriber's when `subscriber`
/// is empty).
#[wasm_bindgen]
pub fn plan(text: &str, subscriber: &str) -> String {
    json(&crate::plan(text, Some(subscriber).filter(|s| !s.is_empty())))
}

/// The plan of the subscriber at byte offset `offset`, or `null`.
#[wasm_bindgen]
pub fn hover(text: &str, offset: u32) -> String {
    json(&crate::hover(text, offset))
}

/// Every `test` block run in virtual time under `seed`, with each attempt.
#[wasm_bindgen]
pub fn run_tests(text: &str, seed: u64) -> String {
    json(&crate::run_tests(text, seed))
}

/// The toolchain's version.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
