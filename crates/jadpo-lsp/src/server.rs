//! The server's state and main loop: open documents, the programs they belong to,
//! and when to check them again.

use crate::analysis::{Analysis, TEXT_SLACK};
use crate::baseline::{Baseline, ReadBaseline};
use crate::convert::{self, normalize, path_of, uri_of};
use crate::handlers::{self, Programs};
use crate::line_index::{Encoding, LineCol, LineIndex};
use lsp_server::{Connection, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::Notification as _;
use lsp_types::{self as lsp, notification as n};
use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Finds the `.jadpo` files of a workspace folder, as `jadpoc check DIR` finds them
/// (an empty list when there are none or the folder cannot be read).
pub type FindFiles = Box<dyn Fn(&Path) -> Vec<PathBuf> + Send>;

/// How long the server waits, after a check, for more messages before it calls
/// [`Options::after_check`].
pub const IDLE_AFTER_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// What the command line gives the server.
pub struct Options {
    pub find_files: FindFiles,
    /// How a baseline named by the client's `diffBaseline` initialization option
    /// (or [`Options::baseline`]) is read.
    pub read_baseline: ReadBaseline,
    /// The baseline every workspace folder's program is compared with
    /// (`jadpoc diff`'s findings shown as diagnostics), unless the client's
    /// `initializationOptions.diffBaseline` names another.
    pub baseline: Option<String>,
    /// Called once no message has come for [`IDLE_AFTER_CHECK`] after a check: a
    /// check of a large program frees several times its text's size, and `jadpoc`
    /// gives that back to the system here rather than hold it while the editor is
    /// idle. Not after every check: while a user types, the next check would only
    /// take the memory back from the system.
    pub after_check: Box<dyn Fn() + Send>,
}

/// The smallest program whose whole check is followed at once by
/// [`Options::after_check`]: below it, what the check frees is little.
const RELEASE_AFTER_WHOLE_CHECK: usize = jadpo_syntax::PIECE_MIN_LEN;

/// An open document: the editor's text, which overrides the file on disk.
pub(crate) struct Doc {
    pub text: String,
}

/// A file of a program that could not be read as text.
pub(crate) struct Unreadable {
    pub uri: String,
    pub message: String,
    /// The text before the first invalid byte, to place the diagnostic.
    pub offset_text: String,
}

/// One program: the `.jadpo` files under a workspace folder, or one file opened
/// outside every folder.
pub(crate) struct Program {
    /// The workspace folder; `None` for a single file.
    pub root: Option<PathBuf>,
    /// The single file's URI.
    pub single: Option<String>,
    /// The files under the folder, as last found on disk.
    pub disk: Vec<PathBuf>,
    /// The last analysis (`None` before the first check) and the URI of each of
    /// its files. A stale analysis keeps its files' trees for the next check.
    pub analysis: Option<Analysis>,
    /// A file of the program changed since its last check.
    pub stale: bool,
    pub uris: Vec<String>,
    /// What was last published for each URI, so unchanged files are not sent again
    /// and fixed ones are cleared.
    pub published: HashMap<String, Vec<lsp::Diagnostic>>,
    /// The baseline the program is compared with, once read (a folder's program
    /// with a baseline configured).
    pub baseline: Option<Baseline>,
}

pub(crate) struct Server {
    pub sender: crossbeam_channel::Sender<Message>,
    pub enc: Encoding,
    /// Whether the client takes snippets in completion items.
    pub snippets: bool,
    pub docs: HashMap<String, Doc>,
    pub programs: Vec<Program>,
    find_files: FindFiles,
    after_check: Box<dyn Fn() + Send>,
    read_baseline: ReadBaseline,
    /// The baseline spec in force (`git:REF` or a path), if any.
    baseline: Option<String>,
    /// A program was checked since `after_check` was last called.
    checked: bool,
    shutting_down: bool,
    next_request: i32,
}

/// Runs the server on `connection` until the client says `exit`.
pub fn run(connection: Connection, options: Options) -> Result<(), String> {
    let (id, params) = connection.initialize_start().map_err(|e| format!("cannot initialize: {e}"))?;
    let params: lsp::InitializeParams = serde_json::from_value(params).unwrap_or_default();
    let utf8 = params
        .capabilities
        .general
        .as_ref()
        .and_then(|g| g.position_encodings.as_ref())
        .is_some_and(|encs| encs.contains(&lsp::PositionEncodingKind::UTF8));
    let enc = if utf8 { Encoding::Utf8 } else { Encoding::Utf16 };
    let snippets = params
        .capabilities
        .text_document
        .as_ref()
        .and_then(|t| t.completion.as_ref())
        .and_then(|c| c.completion_item.as_ref())
        .and_then(|i| i.snippet_support)
        .unwrap_or(false);
    let mut roots: Vec<PathBuf> =
        params.workspace_folders.iter().flatten().filter_map(|f| path_of(f.uri.as_str())).collect();
    #[allow(deprecated)]
    if roots.is_empty()
        && let Some(root) = params.root_uri.as_ref().and_then(|u| path_of(u.as_str()))
    {
        roots.push(root);
    }
    let result = lsp::InitializeResult {
        capabilities: handlers::capabilities(enc),
        server_info: Some(lsp::ServerInfo {
            name: "jadpoc lsp".into(),
            version: Some(env!("CARGO_PKG_VERSION").into()),
        }),
    };
    let result = serde_json::to_value(result).map_err(|e| e.to_string())?;
    connection.initialize_finish(id, result).map_err(|e| format!("cannot initialize: {e}"))?;
    let watch = params
        .capabilities
        .workspace
        .as_ref()
        .and_then(|w| w.did_change_watched_files.as_ref())
        .and_then(|d| d.dynamic_registration)
        .unwrap_or(false);

    let mut server = Server {
        sender: connection.sender.clone(),
        enc,
        snippets,
        docs: HashMap::new(),
        programs: Vec::new(),
        find_files: options.find_files,
        after_check: options.after_check,
        read_baseline: options.read_baseline,
        baseline: params
            .initialization_options
            .as_ref()
            .and_then(|o| o.get("diffBaseline"))
            .and_then(|b| b.as_str())
            .map(str::to_string)
            .filter(|b| !b.is_empty())
            .or(options.baseline),
        checked: false,
        shutting_down: false,
        next_request: 0,
    };
    for root in roots {
        server.add_root(root);
    }
    if watch {
        server.watch_files();
    }
    server.publish_stale();
    server.main_loop(&connection.receiver);
    Ok(())
}

impl Server {
    fn main_loop(&mut self, receiver: &crossbeam_channel::Receiver<Message>) {
        loop {
            let msg = if self.checked {
                match receiver.recv_timeout(IDLE_AFTER_CHECK) {
                    Ok(msg) => msg,
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                        self.checked = false;
                        (self.after_check)();
                        continue;
                    }
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
                }
            } else {
                match receiver.recv() {
                    Ok(msg) => msg,
                    Err(_) => return,
                }
            };
            if self.handle(msg) {
                return;
            }
            // Edits that arrived while the last check ran are applied together, and
            // checked once.
            while let Ok(msg) = receiver.try_recv() {
                if self.handle(msg) {
                    return;
                }
            }
            self.publish_stale();
        }
    }

    /// Handles one message; true when the server must stop.
    fn handle(&mut self, msg: Message) -> bool {
        match msg {
            Message::Request(req) => {
                let resp = if self.shutting_down {
                    Response::new_err(
                        req.id,
                        lsp_server::ErrorCode::InvalidRequest as i32,
                        "the server is shutting down".into(),
                    )
                } else if req.method == "shutdown" {
                    self.shutting_down = true;
                    Response::new_ok(req.id, ())
                } else {
                    self.request(req)
                };
                self.send(Message::Response(resp));
                false
            }
            Message::Notification(not) => {
                if not.method == n::Exit::METHOD {
                    return true;
                }
                self.notification(not);
                false
            }
            Message::Response(_) => false,
        }
    }

    /// Answers a request, turning a panic into an error response: whatever the text,
    /// the server keeps answering.
    fn request(&mut self, req: Request) -> Response {
        let id: RequestId = req.id.clone();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            handlers::request(self, handlers::Client { enc: self.enc, snippets: self.snippets }, req)
        }));
        match outcome {
            Ok(Ok(value)) => Response::new_ok(id, value),
            Ok(Err(e)) => Response::new_err(id, e.code, e.message),
            Err(_) => Response::new_err(
                id,
                lsp_server::ErrorCode::InternalError as i32,
                "the server failed on this request; it goes on with the next".into(),
            ),
        }
    }

    fn notification(&mut self, not: Notification) {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.notification_inner(not)));
    }

    fn notification_inner(&mut self, not: Notification) {
        match not.method.as_str() {
            n::DidOpenTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp::DidOpenTextDocumentParams>(not.params) else { return };
                let uri = normalize(p.text_document.uri.as_str());
                self.docs.insert(uri.clone(), Doc { text: p.text_document.text });
                if self.program_of(&uri).is_none() && self.root_of(&uri).is_some() {
                    // Perhaps made on disk since the folder was last searched.
                    self.refresh_disk();
                }
                if self.program_of(&uri).is_none() {
                    // Outside every folder, or where `check` does not look (a hidden folder).
                    self.programs.push(Program::new(None, Some(uri.clone())));
                }
                self.stale(&uri);
            }
            n::DidChangeTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp::DidChangeTextDocumentParams>(not.params) else { return };
                let uri = normalize(p.text_document.uri.as_str());
                let enc = self.enc;
                let Some(doc) = self.docs.get_mut(&uri) else { return };
                for change in p.content_changes {
                    match change.range {
                        None => doc.text = change.text,
                        Some(range) => {
                            // Two positions: found by a search of the text, not an index
                            // of all its lines made for each change.
                            let at = |p: lsp::Position| {
                                LineIndex::offset_in(&doc.text, LineCol { line: p.line, col: p.character }, enc)
                                    as usize
                            };
                            let (start, end) = (at(range.start), at(range.end));
                            let (start, end) = (start.min(end), start.max(end));
                            let grows = change.text.len().saturating_sub(end - start);
                            if doc.text.len() + grows > doc.text.capacity() {
                                // Room for this change and some typing after it, rather
                                // than the doubling `replace_range` would make: a large
                                // file's buffer would hold twice its text.
                                doc.text.reserve_exact(grows + doc.text.len() / TEXT_SLACK);
                            }
                            doc.text.replace_range(start..end, &change.text);
                        }
                    }
                }
                self.stale(&uri);
            }
            n::DidCloseTextDocument::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp::DidCloseTextDocumentParams>(not.params) else { return };
                let uri = normalize(p.text_document.uri.as_str());
                let program = self.program_of(&uri);
                self.docs.remove(&uri);
                if let Some(i) = self.programs.iter().position(|p| p.single.as_deref() == Some(&uri)) {
                    let program = self.programs.remove(i);
                    for uri in program.published.keys() {
                        self.publish(uri, Vec::new());
                    }
                    return;
                }
                // The file falls back to its disk contents, or leaves the program if
                // it is not on disk (never saved, or deleted while open).
                self.refresh_disk();
                if let Some(i) = program {
                    self.programs[i].stale = true;
                }
            }
            n::DidSaveTextDocument::METHOD | n::DidChangeWatchedFiles::METHOD => {
                self.refresh_disk();
                for p in &mut self.programs {
                    p.stale = true;
                    // A saved file is compared with the baseline again.
                    if let Some(b) = &mut p.baseline {
                        b.due = true;
                    }
                }
            }
            n::DidChangeWorkspaceFolders::METHOD => {
                let Ok(p) = serde_json::from_value::<lsp::DidChangeWorkspaceFoldersParams>(not.params) else { return };
                for removed in p.event.removed {
                    if let Some(path) = path_of(removed.uri.as_str())
                        && let Some(i) = self.programs.iter().position(|p| p.root.as_deref() == Some(&path))
                    {
                        let program = self.programs.remove(i);
                        for uri in program.published.keys() {
                            self.publish(uri, Vec::new());
                        }
                    }
                }
                for added in p.event.added {
                    if let Some(path) = path_of(added.uri.as_str()) {
                        self.add_root(path);
                    }
                }
            }
            _ => {}
        }
    }

    fn add_root(&mut self, root: PathBuf) {
        let mut program = Program::new(Some(root.clone()), None);
        program.disk = (self.find_files)(&root);
        self.programs.push(program);
    }

    fn refresh_disk(&mut self) {
        for p in &mut self.programs {
            if let Some(root) = &p.root {
                let found = (self.find_files)(root);
                if found != p.disk {
                    p.disk = found;
                    p.stale = true;
                }
            }
        }
    }

    /// Asks the client to tell the server when `.jadpo` files change on disk.
    fn watch_files(&mut self) {
        let options = lsp::DidChangeWatchedFilesRegistrationOptions {
            watchers: vec![lsp::FileSystemWatcher {
                glob_pattern: lsp::GlobPattern::String("**/*.jadpo".into()),
                kind: None,
            }],
        };
        let params = lsp::RegistrationParams {
            registrations: vec![lsp::Registration {
                id: "jadpo-files".into(),
                method: n::DidChangeWatchedFiles::METHOD.into(),
                register_options: serde_json::to_value(options).ok(),
            }],
        };
        self.next_request += 1;
        let req = Request::new(RequestId::from(self.next_request), "client/registerCapability".into(), params);
        self.send(Message::Request(req));
    }

    /// The workspace folder holding `uri`, deepest first.
    fn root_of(&self, uri: &str) -> Option<usize> {
        let path = path_of(uri)?;
        self.programs
            .iter()
            .enumerate()
            .filter(|(_, p)| p.root.as_ref().is_some_and(|r| path.starts_with(r)))
            .max_by_key(|(_, p)| p.root.as_ref().map_or(0, |r| r.components().count()))
            .map(|(i, _)| i)
    }

    /// The program `uri` belongs to: the folder whose files include it (an open file
    /// not on disk too), or its own.
    pub(crate) fn program_of(&self, uri: &str) -> Option<usize> {
        if let Some(i) = self.programs.iter().position(|p| p.single.as_deref() == Some(uri)) {
            return Some(i);
        }
        let i = self.root_of(uri)?;
        let path = path_of(uri)?;
        let member = self.programs[i].disk.contains(&path)
            || (self.docs.contains_key(uri) && !path.exists() && path.extension().is_some_and(|e| e == "jadpo"));
        member.then_some(i)
    }

    fn stale(&mut self, uri: &str) {
        if let Some(i) = self.program_of(uri) {
            self.programs[i].stale = true;
        }
    }

    /// Checks every program whose analysis is stale and publishes its diagnostics.
    pub(crate) fn publish_stale(&mut self) {
        for i in 0..self.programs.len() {
            if self.programs[i].stale {
                self.refresh(i);
            }
        }
    }

    /// Reads a program's files (open buffers first, then disk), checks them and
    /// publishes the diagnostics that changed.
    fn refresh(&mut self, i: usize) {
        self.checked = true;
        let program = &self.programs[i];
        let mut members: Vec<(String, Option<PathBuf>)> = Vec::new();
        if let Some(root) = &program.root {
            let mut paths = program.disk.clone();
            for uri in self.docs.keys() {
                if let Some(path) = path_of(uri)
                    && path.starts_with(root)
                    && !paths.contains(&path)
                    && self.program_of(uri) == Some(i)
                {
                    paths.push(path);
                }
            }
            paths.sort();
            members.extend(paths.into_iter().map(|p| (uri_of(&p), Some(p))));
        } else if let Some(uri) = &program.single {
            members.push((uri.clone(), path_of(uri)));
        }
        let mut files = Vec::new();
        let mut uris = Vec::new();
        let mut unreadable = Vec::new();
        for (uri, path) in members {
            let name = match (&path, &program.root) {
                (Some(p), Some(root)) => p.strip_prefix(root).unwrap_or(p).display().to_string(),
                (Some(p), None) => p.display().to_string(),
                _ => uri.clone(),
            };
            let text = if let Some(doc) = self.docs.get(&uri) {
                // Borrowed: the analysis copies an open file's text only when it changed.
                Cow::Borrowed(doc.text.as_str())
            } else {
                let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok()) else { continue };
                if bytes.len() > jadpo_syntax::MAX_SOURCE_LEN {
                    continue;
                }
                match String::from_utf8(bytes) {
                    Ok(text) => Cow::Owned(text),
                    Err(e) => {
                        let valid = e.utf8_error().valid_up_to();
                        let before = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
                        unreadable.push(Unreadable {
                            uri,
                            message: "this file is not UTF-8 text: it is left out of the program".into(),
                            offset_text: before,
                        });
                        continue;
                    }
                }
            };
            files.push((name, text));
            uris.push(uri);
        }
        let analysis = Analysis::after_texts(self.programs[i].analysis.take(), files);
        let mut fresh: HashMap<String, Vec<lsp::Diagnostic>> = uris.iter().map(|u| (u.clone(), Vec::new())).collect();
        for d in analysis.diagnostics() {
            if let Some(uri) = uris.get(d.file) {
                let converted = convert::diagnostic(&analysis, &uris, self.enc, d);
                fresh.entry(uri.clone()).or_default().push(converted);
            }
        }
        if let (Some(spec), Some(root)) = (&self.baseline, self.programs[i].root.clone()) {
            let read = &*self.read_baseline;
            let baseline = self.programs[i].baseline.get_or_insert_with(|| Baseline::read(read, &root, spec));
            for (uri, d) in baseline.findings(&analysis, &uris, self.enc) {
                fresh.entry(uri).or_default().push(d);
            }
        }
        for u in &unreadable {
            let index = LineIndex::new(&u.offset_text);
            let end = index.line_col(&u.offset_text, u.offset_text.len() as u32, self.enc);
            let pos = lsp::Position { line: end.line, character: end.col };
            fresh.insert(
                u.uri.clone(),
                vec![lsp::Diagnostic {
                    range: lsp::Range { start: pos, end: pos },
                    severity: Some(lsp::DiagnosticSeverity::ERROR),
                    source: Some("jadpo".into()),
                    message: u.message.clone(),
                    ..Default::default()
                }],
            );
        }
        let old = std::mem::take(&mut self.programs[i].published);
        for (uri, diags) in &fresh {
            if old.get(uri) != Some(diags) {
                self.publish(uri, diags.clone());
            }
        }
        for uri in old.keys() {
            if !fresh.contains_key(uri) {
                self.publish(uri, Vec::new());
            }
        }
        // A whole check of a large program frees several times its text (the
        // parse's stacks and lists, on every core), in pieces the checks after an
        // edit do not take again: given back to the system now, rather than held
        // beside everything the next edits make until the editor is idle.
        if analysis.checked_whole() && analysis.text_len() >= RELEASE_AFTER_WHOLE_CHECK {
            (self.after_check)();
        }
        let program = &mut self.programs[i];
        program.published = fresh;
        program.analysis = Some(analysis);
        program.stale = false;
        program.uris = uris;
    }

    fn publish(&self, uri: &str, diagnostics: Vec<lsp::Diagnostic>) {
        let Ok(uri) = uri.parse::<lsp::Uri>() else { return };
        let params = lsp::PublishDiagnosticsParams { uri, diagnostics, version: None };
        self.send(Message::Notification(Notification::new(n::PublishDiagnostics::METHOD.into(), params)));
    }

    fn send(&self, msg: Message) {
        // The client has gone when this fails; the main loop ends on the next receive.
        let _ = self.sender.send(msg);
    }
}

impl Programs for Server {
    fn analysis_for(&mut self, uri: &str) -> Option<(&Analysis, usize, &[String])> {
        let uri = normalize(uri);
        let i = self.program_of(&uri)?;
        if self.programs[i].stale {
            self.refresh(i);
        }
        let p = &self.programs[i];
        let file = p.uris.iter().position(|u| *u == uri)?;
        Some((p.analysis.as_ref()?, file, p.uris.as_slice()))
    }

    fn analyses(&mut self) -> Vec<(&Analysis, &[String])> {
        self.publish_stale();
        self.programs.iter().filter_map(|p| Some((p.analysis.as_ref()?, p.uris.as_slice()))).collect()
    }
}

impl Program {
    fn new(root: Option<PathBuf>, single: Option<String>) -> Program {
        Program {
            root,
            single,
            disk: Vec::new(),
            analysis: None,
            stale: true,
            uris: Vec::new(),
            published: HashMap::new(),
            baseline: None,
        }
    }
}
