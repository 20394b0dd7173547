//! Where the cursor is, read from the tokens: inside which declaration and which
//! nested blocks, after which tokens, at a key or a value.
//!
//! Completion runs on half-written text, where the parser has given up on the
//! declaration being typed (it is `Body::Broken`), so this reads the lexer's tokens,
//! which exist for any text, and keeps a stack of open brackets.

use super::keys::BlockKind;
use jadpo_syntax::ast::{DeclKind, Span};
use jadpo_syntax::lexer::{Lexer, Tok};

/// An open bracket and what introduced it.
#[derive(Debug, Clone)]
pub struct Frame {
    pub open: char,
    /// The block kind when the bracket opens a block that takes keys.
    pub block: Option<BlockKind>,
    /// `emit EVENT {`: the event whose fields the block sets.
    pub emit_event: Option<String>,
    /// `fake CONNECTION: [`: a list of fake answers.
    pub fake_list: bool,
    /// Keys written in this block (before and after the cursor).
    pub keys: Vec<String>,
}

/// What surrounds an offset.
#[derive(Debug, Clone, Default)]
pub struct Cursor {
    /// The declaration the offset is in (its keyword was read, its block not closed).
    pub decl: Option<(DeclKind, String)>,
    /// The subscriber's `on:` event, wherever in the declaration it is written.
    pub on_event: Option<String>,
    /// Open brackets, outermost first.
    pub frames: Vec<Frame>,
    /// The texts of the tokens before the word at the offset, last one last (at most 4).
    pub before: Vec<String>,
    /// The identifier being typed: its span up to the offset.
    pub word: Span,
    /// The whole token under the offset, if any, and the text after it up to the
    /// next token (to tell a key, followed by `:`).
    pub token: Option<(Span, String)>,
    pub token_is_key: bool,
    /// Only whitespace before the word on its line, or an opening bracket or comma.
    pub line_start: bool,
}

impl Cursor {
    /// The innermost frame.
    pub fn frame(&self) -> Option<&Frame> {
        self.frames.last()
    }

    /// Whether the last tokens before the word are `text...`.
    pub fn after(&self, text: &[&str]) -> bool {
        self.before.len() >= text.len()
            && self.before[self.before.len() - text.len()..].iter().zip(text).all(|(a, b)| a == b)
    }

    pub fn decl_kind(&self) -> Option<DeclKind> {
        self.decl.as_ref().map(|d| d.0)
    }
}

fn decl_kind(tok: &Tok<'_>) -> Option<DeclKind> {
    Some(match tok {
        Tok::Event => DeclKind::Event,
        Tok::Connection => DeclKind::Connection,
        Tok::Action => DeclKind::Action,
        Tok::Subscriber => DeclKind::Subscriber,
        Tok::Schedule => DeclKind::Schedule,
        Tok::Test => DeclKind::Test,
        _ => return None,
    })
}

fn is_word(tok: &Tok<'_>) -> bool {
    !matches!(
        tok,
        Tok::Str(_)
            | Tok::Int(_)
            | Tok::Duration(_)
            | Tok::Rate(_)
            | Tok::Compare(_)
            | Tok::LBrace
            | Tok::RBrace
            | Tok::LParen
            | Tok::RParen
            | Tok::LBracket
            | Tok::RBracket
            | Tok::Colon
            | Tok::Comma
            | Tok::Dot
            | Tok::Question
            | Tok::Star
    )
}

/// Reads `text` up to the end of the declaration that holds `offset`.
pub fn cursor_at(text: &str, offset: usize) -> Cursor {
    let offset = offset.min(text.len());
    let mut errors = Vec::new();
    let toks: Vec<(usize, Tok<'_>, usize)> = Lexer::new(text, &mut errors).flatten().collect();
    let mut cur = Cursor { word: Span::new(offset, offset), ..Cursor::default() };
    // The word being typed: the identifier characters just before the offset.
    let start = text[..offset]
        .char_indices()
        .rev()
        .take_while(|&(_, c)| c.is_ascii_alphanumeric() || c == '_')
        .last()
        .map_or(offset, |(i, _)| i);
    cur.word = Span::new(start, offset);
    let line_before = &text[text[..start].rfind('\n').map_or(0, |i| i + 1)..start];
    let trimmed = line_before.trim_end();
    cur.line_start = trimmed.is_empty() || trimmed.ends_with(['{', '(', '[', ',']);

    let mut frames: Vec<Frame> = Vec::new();
    let mut decl: Option<(DeclKind, String)> = None;
    let mut on_event: Option<String> = None;
    // Where the cursor's frames end: the cursor state is taken at the offset, then
    // the scan goes on to the end of its declaration to see keys written after it.
    let mut taken: Option<(Cursor, usize)> = None;
    let src = |s: usize, e: usize| text.get(s..e).unwrap_or("").to_string();
    for (i, (s, tok, e)) in toks.iter().enumerate() {
        let (s, e) = (*s, *e);
        if taken.is_none() && e >= offset {
            if s <= offset && offset <= e && s < e {
                let inside = s < offset || is_word(tok);
                if inside {
                    cur.token = Some((Span::new(s, e), src(s, e)));
                    cur.token_is_key = matches!(toks.get(i + 1), Some((_, Tok::Colon, _))) && is_word(tok);
                }
            }
            if s >= start {
                cur.before = toks[i.saturating_sub(4)..i].iter().map(|(s, _, e)| src(*s, *e)).collect();
                cur.decl = decl.clone();
                cur.frames = frames.clone();
                taken = Some((cur.clone(), frames.len()));
            }
        }
        if frames.is_empty()
            && let Some(kind) = decl_kind(tok)
        {
            if taken.is_some() {
                // The next declaration begins: the cursor's one is over.
                break;
            }
            let name = toks.get(i + 1).map(|(s, _, e)| src(*s, *e)).unwrap_or_default();
            let name = name.trim_matches('"').to_string();
            decl = Some((kind, name));
            on_event = None;
            continue;
        }
        match tok {
            Tok::LBrace | Tok::LParen | Tok::LBracket => {
                let prev = |k: usize| i.checked_sub(k).and_then(|j| toks.get(j));
                let open = match tok {
                    Tok::LBrace => '{',
                    Tok::LParen => '(',
                    _ => '[',
                };
                let mut frame = Frame { open, block: None, emit_event: None, fake_list: false, keys: Vec::new() };
                let kind = decl.as_ref().map(|d| d.0);
                if open == '{' {
                    let key = match (prev(2), prev(1)) {
                        (Some((ks, _, ke)), Some((_, Tok::Colon, _))) => Some(src(*ks, *ke)),
                        _ => None,
                    };
                    frame.block = match (frames.len(), kind, key.as_deref()) {
                        (0, Some(k), _) => Some(BlockKind::Decl(k)),
                        (1, Some(DeclKind::Subscriber), Some("retry")) => Some(BlockKind::SubscriberRetry),
                        (1, Some(DeclKind::Connection), Some("retry")) => Some(BlockKind::ConnectionRetry),
                        (1, Some(DeclKind::Connection), Some("tls")) => Some(BlockKind::ConnectionTls),
                        (1, Some(DeclKind::Connection), Some("signing")) => Some(BlockKind::ConnectionSigning),
                        (1, Some(DeclKind::Test), _) => match (prev(3), prev(2), prev(1)) {
                            (_, Some((_, Tok::Expect, _)), Some((_, Tok::Ident(_), _))) => Some(BlockKind::Expect),
                            (Some((_, Tok::Expect, _)), Some((_, Tok::Breaker, _)), Some(_)) => {
                                Some(BlockKind::ExpectBreaker)
                            }
                            (_, Some((_, Tok::Emit, _)), Some((ns, _, ne))) => {
                                frame.emit_event = Some(src(*ns, *ne));
                                None
                            }
                            _ => None,
                        },
                        _ => None,
                    };
                }
                if open == '['
                    && let (Some((_, Tok::Fake, _)), Some(_), Some((_, Tok::Colon, _))) = (prev(3), prev(2), prev(1))
                {
                    frame.fake_list = true;
                }
                frames.push(frame);
            }
            Tok::RBrace | Tok::RParen | Tok::RBracket => {
                frames.pop();
                if let Some((_, depth)) = &taken
                    && frames.len() < *depth
                {
                    // The cursor's innermost frame closed; keys after it are not its own.
                    if frames.is_empty() {
                        break;
                    }
                }
                // The block closes the declaration; an action's `(params)` do not.
                if frames.is_empty() && taken.is_none() && matches!(tok, Tok::RBrace) {
                    decl = None;
                }
            }
            Tok::Colon => {
                if let Some((ks, kt, ke)) = i.checked_sub(1).and_then(|j| toks.get(j))
                    && is_word(kt)
                    && !frames.is_empty()
                {
                    let key = src(*ks, *ke).trim_matches('"').to_string();
                    if frames.len() == 1
                        && key == "on"
                        && let Some((vs, Tok::Ident(_), ve)) = toks.get(i + 1)
                    {
                        on_event = Some(src(*vs, *ve));
                    }
                    if let Some(frame) = frames.last_mut() {
                        frame.keys.push(key);
                    }
                }
            }
            _ => {}
        }
        if let Some((c, depth)) = &mut taken
            && frames.len() >= *depth
            && *depth > 0
        {
            // Keep the cursor's frames' key lists up to date with keys after it.
            for (k, f) in frames.iter().enumerate().take(*depth) {
                if let Some(cf) = c.frames.get_mut(k) {
                    cf.keys.clone_from(&f.keys);
                }
            }
        }
    }
    let mut cur = match taken {
        Some((c, _)) => c,
        None => {
            cur.before = toks[toks.len().saturating_sub(4)..].iter().map(|(s, _, e)| src(*s, *e)).collect();
            cur.decl = decl;
            cur.frames = frames;
            cur
        }
    };
    cur.on_event = on_event;
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text_with_bar: &str) -> Cursor {
        let offset = text_with_bar.find('|').unwrap();
        let text = text_with_bar.replacen('|', "", 1);
        cursor_at(&text, offset)
    }

    #[test]
    fn a_value_after_on() {
        let c = at("subscriber s {\n    on: Pay|\n    run: f()\n}\n");
        assert_eq!(c.decl, Some((DeclKind::Subscriber, "s".into())));
        assert!(c.after(&["on", ":"]));
        assert_eq!(c.frames.len(), 1);
        assert_eq!(c.frames[0].keys, vec!["on", "run"]);
    }

    #[test]
    fn a_key_in_a_retry_block() {
        let c = at("subscriber s {\n    on: E\n    retry: { attempts: 3, | }\n}\n");
        assert_eq!(c.frame().and_then(|f| f.block), Some(BlockKind::SubscriberRetry));
        assert_eq!(c.frame().map(|f| f.keys.clone()), Some(vec!["attempts".to_string()]));
        assert!(c.line_start);
        assert_eq!(c.on_event.as_deref(), Some("E"));
    }

    #[test]
    fn top_level_and_half_written_text() {
        let c = at("event E { a: int }\n\n|");
        assert!(c.decl.is_none() && c.frames.is_empty() && c.line_start);
        let c = at("subscriber s {\n    on: E\n    run: f(event.|");
        assert!(c.after(&["event", "."]));
        assert_eq!(c.on_event.as_deref(), Some("E"));
    }

    #[test]
    fn a_fake_list_and_an_expect_block() {
        let c = at("test \"t\" {\n    fake ledger: [unavailable, |]\n}\n");
        assert!(c.frame().is_some_and(|f| f.fake_list));
        let c = at("test \"t\" {\n    expect s { | }\n}\n");
        assert_eq!(c.frame().and_then(|f| f.block), Some(BlockKind::Expect));
    }

    #[test]
    fn operators_and_rates_are_no_words() {
        // A cursor just before an operator or a rate is not on it, as before a bracket.
        for text in ["subscriber s {\n    where: event.a |>= 1\n}\n", "connection c {\n    rate: |50/s\n}\n"] {
            assert_eq!(at(text).token, None, "{text}");
        }
        let c = at("connection c {\n    rate: 5|0/s\n}\n");
        assert_eq!(c.token.map(|t| t.1).as_deref(), Some("50/s"));
        assert!(!c.token_is_key);
    }
}
