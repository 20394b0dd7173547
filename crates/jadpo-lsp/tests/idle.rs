//! The server's idle hook, through the protocol on an in-memory connection: called
//! once the server has been idle for `IDLE_AFTER_CHECK` after a check, and not
//! while messages keep coming or when nothing was checked.

use jadpo_lsp::{Connection, IDLE_AFTER_CHECK, Options};
use lsp_server::{Message, Notification, Request, RequestId};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn notify(client: &Connection, method: &str, params: serde_json::Value) {
    client.sender.send(Message::Notification(Notification::new(method.into(), params))).expect("server gone");
}

/// The next `publishDiagnostics`, skipping anything else.
fn diagnostics(client: &Connection) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match client.receiver.recv_timeout(left).expect("no diagnostics within a minute") {
            Message::Notification(n) if n.method == "textDocument/publishDiagnostics" => return n.params,
            _ => {}
        }
    }
}

#[test]
fn the_idle_hook_runs_once_after_each_check_once_messages_stop() {
    let (server, client) = Connection::memory();
    let (called, calls) = mpsc::channel();
    let options = Options {
        find_files: Box::new(|_| Vec::new()),
        after_check: Box::new(move || {
            let _ = called.send(Instant::now());
        }),
        read_baseline: Box::new(|_, spec| Err(format!("no baseline `{spec}` here"))),
        baseline: None,
    };
    let thread = std::thread::spawn(move || jadpo_lsp::run(server, options));
    let init = Request::new(RequestId::from(1), "initialize".into(), serde_json::json!({ "capabilities": {} }));
    client.sender.send(Message::Request(init)).expect("server gone");
    loop {
        if let Message::Response(_) = client.receiver.recv_timeout(Duration::from_secs(60)).expect("no answer") {
            break;
        }
    }
    notify(&client, "initialized", serde_json::json!({}));
    // Nothing is open and no folder was given: nothing was checked, so no call.
    assert!(calls.recv_timeout(IDLE_AFTER_CHECK * 2).is_err());

    let uri = "file:///tmp/idle-hook/a.jadpo";
    let text = "event E { a: int }\n";
    notify(
        &client,
        "textDocument/didOpen",
        serde_json::json!({ "textDocument": { "uri": uri, "languageId": "jadpo", "version": 1, "text": text } }),
    );
    let checked = Instant::now();
    assert_eq!(diagnostics(&client)["diagnostics"][0]["code"], "event.unused");
    let at = calls.recv_timeout(Duration::from_secs(60)).expect("the hook after the check");
    assert!(at.duration_since(checked) >= IDLE_AFTER_CHECK, "called before the server had been idle");
    // Once per check: idle for longer brings no second call.
    assert!(calls.recv_timeout(IDLE_AFTER_CHECK * 2).is_err());

    // Edits that keep coming put the call off until they stop.
    for version in 2..8 {
        let change = if version % 2 == 0 { "event E { a: int }\nevent F { b: int }\n" } else { text };
        notify(
            &client,
            "textDocument/didChange",
            serde_json::json!({ "textDocument": { "uri": uri, "version": version }, "contentChanges": [{ "text": change }] }),
        );
        diagnostics(&client);
        assert!(calls.try_recv().is_err(), "called while edits kept coming");
    }
    let last = Instant::now();
    let at = calls.recv_timeout(Duration::from_secs(60)).expect("the hook after the edits");
    assert!(at.duration_since(last) + Duration::from_millis(50) >= IDLE_AFTER_CHECK);
    assert!(calls.recv_timeout(IDLE_AFTER_CHECK * 2).is_err());

    let shutdown = Request::new(RequestId::from(2), "shutdown".into(), serde_json::Value::Null);
    client.sender.send(Message::Request(shutdown)).expect("server gone");
    notify(&client, "exit", serde_json::Value::Null);
    thread.join().expect("the server panicked").expect("the server failed");
}
