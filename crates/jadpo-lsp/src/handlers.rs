//! The protocol's side: capabilities, and one thin handler per request that turns
//! positions into offsets, asks the analysis, and turns the answer back.

use crate::analysis::{Analysis, CompletionKind, Symbol};
use crate::convert::{diagnostic, location, normalize, offset, position, range, workspace_edit};
use crate::line_index::Encoding;
use jadpo_check::SymbolKind;
use jadpo_syntax::ast::Span;
use lsp_server::{ErrorCode, Request};
use lsp_types::request::{self as r, Request as _};
use lsp_types::{self as lsp};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A request's error: a JSON-RPC code and a message.
pub(crate) struct Error {
    pub code: i32,
    pub message: String,
}

impl Error {
    fn new(code: ErrorCode, message: impl Into<String>) -> Error {
        Error { code: code as i32, message: message.into() }
    }
}

/// What the server can do, as the protocol names it.
pub(crate) fn capabilities(enc: Encoding) -> lsp::ServerCapabilities {
    lsp::ServerCapabilities {
        position_encoding: Some(match enc {
            Encoding::Utf8 => lsp::PositionEncodingKind::UTF8,
            Encoding::Utf16 => lsp::PositionEncodingKind::UTF16,
        }),
        text_document_sync: Some(lsp::TextDocumentSyncCapability::Options(lsp::TextDocumentSyncOptions {
            open_close: Some(true),
            change: Some(lsp::TextDocumentSyncKind::INCREMENTAL),
            save: Some(lsp::TextDocumentSyncSaveOptions::Supported(true)),
            ..Default::default()
        })),
        hover_provider: Some(lsp::HoverProviderCapability::Simple(true)),
        definition_provider: Some(lsp::OneOf::Left(true)),
        references_provider: Some(lsp::OneOf::Left(true)),
        rename_provider: Some(lsp::OneOf::Right(lsp::RenameOptions {
            prepare_provider: Some(true),
            work_done_progress_options: Default::default(),
        })),
        completion_provider: Some(lsp::CompletionOptions {
            trigger_characters: Some(vec![".".into(), ":".into(), "[".into(), " ".into()]),
            ..Default::default()
        }),
        code_action_provider: Some(lsp::CodeActionProviderCapability::Options(lsp::CodeActionOptions {
            code_action_kinds: Some(vec![lsp::CodeActionKind::QUICKFIX]),
            ..Default::default()
        })),
        document_formatting_provider: Some(lsp::OneOf::Left(true)),
        document_symbol_provider: Some(lsp::OneOf::Left(true)),
        workspace_symbol_provider: Some(lsp::OneOf::Left(true)),
        inlay_hint_provider: Some(lsp::OneOf::Left(true)),
        workspace: Some(lsp::WorkspaceServerCapabilities {
            workspace_folders: Some(lsp::WorkspaceFoldersServerCapabilities {
                supported: Some(true),
                change_notifications: Some(lsp::OneOf::Left(true)),
            }),
            file_operations: None,
        }),
        ..Default::default()
    }
}

fn params<P: DeserializeOwned>(req: Request) -> Result<P, Error> {
    serde_json::from_value(req.params)
        .map_err(|e| Error::new(ErrorCode::InvalidParams, format!("invalid parameters for `{}`: {e}", req.method)))
}

fn json<T: serde::Serialize>(v: T) -> Result<Value, Error> {
    serde_json::to_value(v).map_err(|e| Error::new(ErrorCode::InternalError, e.to_string()))
}

/// What a request is answered from: the programs the server keeps, each checked
/// again first when a file of it changed.
pub(crate) trait Programs {
    /// The fresh analysis of the program holding `uri`, the file's index in it,
    /// and the URI of each of its files.
    fn analysis_for(&mut self, uri: &str) -> Option<(&Analysis, usize, &[String])>;
    /// Every program's fresh analysis, with the URI of each of its files.
    fn analyses(&mut self) -> Vec<(&Analysis, &[String])>;
}

/// What the client said it takes, at its start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client {
    /// The encoding of the protocol's positions.
    pub enc: Encoding,
    /// Whether completion items may be snippets.
    pub snippets: bool,
}

/// Answers one request from `server`'s programs.
pub(crate) fn request(server: &mut impl Programs, client: Client, req: Request) -> Result<Value, Error> {
    let enc = client.enc;
    match req.method.as_str() {
        r::HoverRequest::METHOD => {
            let p: lsp::HoverParams = params(req)?;
            let at = &p.text_document_position_params;
            let Some((a, file, _)) = server.analysis_for(at.text_document.uri.as_str()) else { return Ok(Value::Null) };
            let offset = offset(a, file, at.position, enc);
            json(a.hover(file, offset).map(|(text, span)| lsp::Hover {
                contents: lsp::HoverContents::Markup(lsp::MarkupContent {
                    kind: lsp::MarkupKind::Markdown,
                    value: text,
                }),
                range: Some(range(a, file, span, enc)),
            }))
        }
        r::GotoDefinition::METHOD => {
            let p: lsp::GotoDefinitionParams = params(req)?;
            let at = &p.text_document_position_params;
            let uri = normalize(at.text_document.uri.as_str());
            let Some((a, file, uris)) = server.analysis_for(&uri) else { return Ok(Value::Null) };
            let offset = offset(a, file, at.position, enc);
            json(a.definition(file, offset).and_then(|(f, span)| location(a, uris, f, span, enc)))
        }
        r::References::METHOD => {
            let p: lsp::ReferenceParams = params(req)?;
            let at = &p.text_document_position;
            let uri = normalize(at.text_document.uri.as_str());
            let Some((a, file, uris)) = server.analysis_for(&uri) else { return Ok(Value::Null) };
            let offset = offset(a, file, at.position, enc);
            let places = a.references(file, offset, p.context.include_declaration);
            json(places.into_iter().filter_map(|(f, s)| location(a, uris, f, s, enc)).collect::<Vec<_>>())
        }
        r::PrepareRenameRequest::METHOD => {
            let p: lsp::TextDocumentPositionParams = params(req)?;
            let Some((a, file, _)) = server.analysis_for(p.text_document.uri.as_str()) else { return Ok(Value::Null) };
            let offset = offset(a, file, p.position, enc);
            json(a.prepare_rename(file, offset).map(|s| lsp::PrepareRenameResponse::Range(range(a, file, s, enc))))
        }
        r::Rename::METHOD => {
            let p: lsp::RenameParams = params(req)?;
            let at = &p.text_document_position;
            let uri = normalize(at.text_document.uri.as_str());
            let Some((a, file, uris)) = server.analysis_for(&uri) else { return Ok(Value::Null) };
            let offset = offset(a, file, at.position, enc);
            let edits = a.rename(file, offset, &p.new_name).map_err(|e| Error::new(ErrorCode::InvalidRequest, e))?;
            json(workspace_edit(a, uris, &edits, enc))
        }
        r::Completion::METHOD => {
            let p: lsp::CompletionParams = params(req)?;
            let at = &p.text_document_position;
            let snippets = client.snippets;
            let Some((a, file, _)) = server.analysis_for(at.text_document.uri.as_str()) else { return Ok(Value::Null) };
            let offset = offset(a, file, at.position, enc);
            let items: Vec<lsp::CompletionItem> = a
                .completion(file, offset)
                .into_iter()
                .map(|c| {
                    // A client without snippets gets the bare name.
                    let snippet = c.snippet.is_some() && snippets;
                    lsp::CompletionItem {
                        kind: Some(completion_kind(c.kind)),
                        detail: c.detail,
                        insert_text_format: Some(if snippet {
                            lsp::InsertTextFormat::SNIPPET
                        } else {
                            lsp::InsertTextFormat::PLAIN_TEXT
                        }),
                        text_edit: Some(lsp::CompletionTextEdit::Edit(lsp::TextEdit {
                            range: range(a, file, c.replace, enc),
                            new_text: c.snippet.filter(|_| snippets).unwrap_or_else(|| c.label.clone()),
                        })),
                        label: c.label,
                        ..Default::default()
                    }
                })
                .collect();
            json(lsp::CompletionResponse::Array(items))
        }
        r::CodeActionRequest::METHOD => {
            let p: lsp::CodeActionParams = params(req)?;
            let uri = normalize(p.text_document.uri.as_str());
            let Some((a, file, uris)) = server.analysis_for(&uri) else { return Ok(Value::Null) };
            let span = Span { start: offset(a, file, p.range.start, enc), end: offset(a, file, p.range.end, enc) };
            let actions: Vec<lsp::CodeActionOrCommand> = a
                .code_actions(file, span)
                .into_iter()
                .map(|fix| {
                    let d = &a.diagnostics()[fix.diagnostic];
                    lsp::CodeActionOrCommand::CodeAction(lsp::CodeAction {
                        title: fix.title,
                        kind: Some(lsp::CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![diagnostic(a, uris, enc, d)]),
                        edit: Some(workspace_edit(a, uris, &fix.edits, enc)),
                        is_preferred: Some(fix.preferred),
                        ..Default::default()
                    })
                })
                .collect();
            json(actions)
        }
        r::Formatting::METHOD => {
            let p: lsp::DocumentFormattingParams = params(req)?;
            let Some((a, file, _)) = server.analysis_for(p.text_document.uri.as_str()) else { return Ok(Value::Null) };
            let text = a.text(file);
            match a.format(file) {
                Some(formatted) if formatted != text => json(vec![lsp::TextEdit {
                    range: range(a, file, Span::new(0, text.len()), enc),
                    new_text: formatted,
                }]),
                // Already formatted, or a file with syntax errors: left as it is.
                _ => json(Vec::<lsp::TextEdit>::new()),
            }
        }
        r::DocumentSymbolRequest::METHOD => {
            let p: lsp::DocumentSymbolParams = params(req)?;
            let Some((a, file, _)) = server.analysis_for(p.text_document.uri.as_str()) else { return Ok(Value::Null) };
            let symbols: Vec<lsp::DocumentSymbol> =
                a.document_symbols(file).iter().map(|s| document_symbol(a, s, enc)).collect();
            json(lsp::DocumentSymbolResponse::Nested(symbols))
        }
        r::WorkspaceSymbolRequest::METHOD => {
            let p: lsp::WorkspaceSymbolParams = params(req)?;
            let mut out = Vec::new();
            for (a, uris) in server.analyses() {
                for s in a.workspace_symbols(&p.query) {
                    let Some(location) = location(a, uris, s.file, s.name_span, enc) else { continue };
                    out.push(lsp::WorkspaceSymbol {
                        name: s.name,
                        kind: symbol_kind(s.kind),
                        tags: None,
                        container_name: None,
                        location: lsp::OneOf::Left(location),
                        data: None,
                    });
                }
            }
            json(lsp::WorkspaceSymbolResponse::Nested(out))
        }
        r::InlayHintRequest::METHOD => {
            let p: lsp::InlayHintParams = params(req)?;
            let Some((a, file, _)) = server.analysis_for(p.text_document.uri.as_str()) else { return Ok(Value::Null) };
            let span = Span { start: offset(a, file, p.range.start, enc), end: offset(a, file, p.range.end, enc) };
            let hints: Vec<lsp::InlayHint> = a
                .inlay_hints(file, span)
                .into_iter()
                .map(|h| lsp::InlayHint {
                    position: position(a, file, h.offset, enc),
                    label: lsp::InlayHintLabel::String(h.label),
                    kind: None,
                    text_edits: None,
                    tooltip: Some(lsp::InlayHintTooltip::MarkupContent(lsp::MarkupContent {
                        kind: lsp::MarkupKind::Markdown,
                        value: h.tooltip,
                    })),
                    padding_left: Some(true),
                    padding_right: None,
                    data: None,
                })
                .collect();
            json(hints)
        }
        _ => {
            Err(Error::new(ErrorCode::MethodNotFound, format!("`{}` is not a method this server answers", req.method)))
        }
    }
}

fn symbol_kind(kind: SymbolKind) -> lsp::SymbolKind {
    match kind {
        SymbolKind::Event => lsp::SymbolKind::EVENT,
        SymbolKind::Field => lsp::SymbolKind::FIELD,
        SymbolKind::Connection => lsp::SymbolKind::INTERFACE,
        SymbolKind::Action => lsp::SymbolKind::FUNCTION,
        SymbolKind::Param => lsp::SymbolKind::VARIABLE,
        SymbolKind::Subscriber => lsp::SymbolKind::METHOD,
        SymbolKind::Schedule => lsp::SymbolKind::METHOD,
        SymbolKind::Test => lsp::SymbolKind::MODULE,
    }
}

fn completion_kind(kind: CompletionKind) -> lsp::CompletionItemKind {
    match kind {
        CompletionKind::Keyword => lsp::CompletionItemKind::KEYWORD,
        CompletionKind::Key => lsp::CompletionItemKind::PROPERTY,
        CompletionKind::Value => lsp::CompletionItemKind::VALUE,
        CompletionKind::Symbol(SymbolKind::Event) => lsp::CompletionItemKind::EVENT,
        CompletionKind::Symbol(SymbolKind::Field | SymbolKind::Param) => lsp::CompletionItemKind::FIELD,
        CompletionKind::Symbol(SymbolKind::Connection) => lsp::CompletionItemKind::INTERFACE,
        CompletionKind::Symbol(SymbolKind::Action) => lsp::CompletionItemKind::FUNCTION,
        CompletionKind::Symbol(_) => lsp::CompletionItemKind::METHOD,
    }
}

#[allow(deprecated)]
fn document_symbol(a: &Analysis, s: &Symbol, enc: Encoding) -> lsp::DocumentSymbol {
    let detail = a
        .text(s.file)
        .get(s.span.range())
        .and_then(|t| t.lines().next())
        .map(|l| l.trim_end_matches('{').trim().to_string());
    lsp::DocumentSymbol {
        name: if s.name.is_empty() { "(unnamed)".into() } else { s.name.clone() },
        detail,
        kind: symbol_kind(s.kind),
        tags: None,
        deprecated: None,
        range: range(a, s.file, s.span, enc),
        selection_range: range(a, s.file, s.name_span, enc),
        children: if s.children.is_empty() {
            None
        } else {
            Some(s.children.iter().map(|c| document_symbol(a, c, enc)).collect())
        },
    }
}
