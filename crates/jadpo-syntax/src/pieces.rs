//! Reading a long text in pieces at once, one per core ([`crate::parse`] says when
//! the pieces' trees are the whole text's).

use crate::lexer::Lexer;
use crate::{Lists, Parsed, ast, grammar};

/// Where to cut `src` into about `pieces` pieces of even length: offsets of line
/// starts that begin a declaration's keyword and a space, in increasing order.
pub(crate) fn cuts(src: &str, pieces: usize) -> Vec<usize> {
    use ast::DeclKind::*;
    let keywords = [Event, Connection, Action, Subscriber, Schedule, Test].map(ast::DeclKind::keyword);
    let mut cuts = Vec::with_capacity(pieces - 1);
    let mut from = 0;
    for k in 1..pieces {
        let target = (src.len() / pieces * k).max(from);
        let Some(rest) = src.get(target..) else { break };
        let found = rest.match_indices('\n').map(|(i, _)| target + i + 1).find(|&line| {
            let text = &src[line..];
            keywords.iter().any(|k| text.strip_prefix(k).is_some_and(|rest| rest.starts_with(' ')))
        });
        match found {
            Some(cut) => {
                cuts.push(cut);
                from = cut;
            }
            None => break,
        }
    }
    cuts
}

/// The pieces between `cuts` parsed at once, one thread each, and joined; `None`
/// unless every piece parsed cleanly (see [`parse`]).
pub(crate) fn parse_in_pieces<'a>(src: &'a str, cuts: &[usize]) -> Option<Parsed<'a>> {
    if cuts.is_empty() {
        return None;
    }
    let bounds: Vec<(usize, usize)> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .zip(cuts.iter().copied().chain(std::iter::once(src.len())))
        .collect();
    let pieces: Vec<Option<(Vec<ast::Decl<'a>>, Vec<ast::Comment>)>> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            bounds[1..].iter().map(|&(start, end)| scope.spawn(move || parse_piece(src, start, end))).collect();
        // The first piece on this thread, the others beside it.
        let first = parse_piece(src, bounds[0].0, bounds[0].1);
        std::iter::once(first).chain(handles.into_iter().map(|h| h.join().ok().flatten())).collect()
    });
    let pieces: Vec<_> = pieces.into_iter().collect::<Option<_>>()?;
    let mut decls = Vec::with_capacity(pieces.iter().map(|(d, _)| d.len()).sum());
    let mut comments = Vec::with_capacity(pieces.iter().map(|(_, c)| c.len()).sum());
    for (mut d, mut c) in pieces {
        decls.append(&mut d);
        comments.append(&mut c);
    }
    Some(Parsed { file: ast::File { decls }, errors: Vec::new(), comments })
}

/// One piece's declarations and comments, if it parsed without an error and no
/// token crossed its end.
fn parse_piece(src: &str, start: usize, end: usize) -> Option<(Vec<ast::Decl<'_>>, Vec<ast::Comment>)> {
    let mut errors = Vec::new();
    let mut recovered = Vec::new();
    let mut lists = Lists::default();
    let mut lexer = Lexer::piece(src, start, end, &mut errors);
    let mut file = grammar::FileParser::new().parse(src, &mut recovered, &mut lists, &mut lexer).ok()?;
    // The list grew by doubling; its spare room would be held until the pieces are joined.
    file.decls.shrink_to_fit();
    let clean = recovered.is_empty() && !lexer.crossed_end();
    let comments = lexer.take_comments();
    (clean && errors.is_empty()).then_some((file.decls, comments))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_serial;
    use proptest::prelude::*;

    /// Every place `cuts` could choose: each line start with a declaration's keyword.
    fn all_cuts(src: &str) -> Vec<usize> {
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(&cut) = cuts(&src[from..], 2).first() {
            found.push(from + cut);
            from += cut;
        }
        found
    }

    /// The pieces' parse, when there is one, is the whole text's, to the last span;
    /// returns whether there was one.
    fn same_as_serial(src: &str, cuts: &[usize]) -> bool {
        let Some(pieces) = parse_in_pieces(src, cuts) else { return false };
        let serial = parse_serial(src);
        assert!(serial.errors.is_empty(), "pieces parsed cleanly, the whole did not, cut at {cuts:?}:\n{src}");
        assert_eq!(format!("{:?}", pieces.file), format!("{:?}", serial.file), "cut at {cuts:?}:\n{src}");
        assert_eq!(pieces.comments, serial.comments, "cut at {cuts:?}");
        true
    }

    fn corpus() -> &'static [String] {
        static CORPUS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        CORPUS.get_or_init(read_corpus)
    }

    fn read_corpus() -> Vec<String> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut texts = Vec::new();
        for dir in ["examples", "tests/check", "tests/scenarios"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else { continue };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "jadpo")
                    && let Ok(text) = std::fs::read_to_string(&path)
                {
                    texts.push(text);
                }
            }
        }
        assert!(texts.len() > 50, "the corpus was not found: {} files", texts.len());
        texts
    }

    #[test]
    fn every_cut_of_the_corpus_gives_the_whole_texts_tree_or_none() {
        let (mut joined, mut refused) = (0, 0);
        for text in corpus() {
            for cut in all_cuts(text) {
                if same_as_serial(text, &[cut]) { joined += 1 } else { refused += 1 }
            }
            let every = all_cuts(text);
            if every.len() > 1 {
                same_as_serial(text, &every);
            }
        }
        // Clean files join; files with syntax errors (the corpus has many) do not.
        assert!(joined > 100 && refused > 10, "joined {joined}, refused {refused}");
    }

    #[test]
    fn a_comment_or_an_error_across_a_cut_is_refused() {
        let text = "event A { x: int }\n/* a comment\nevent B { y: int }\n*/\nevent C { z: int }\n";
        let cut = text.find("event B").expect("B");
        assert!(parse_in_pieces(text, &[cut]).is_none());
        let text = "event A { x: int\nevent B { y: int }\n";
        let cut = text.find("event B").expect("B");
        assert!(parse_in_pieces(text, &[cut]).is_none());
        let text = "event A { x: int }\nevent B { y: int }\n";
        assert!(same_as_serial(text, &[text.find("event B").expect("B")]));
    }

    #[test]
    fn a_long_text_is_parsed_in_pieces_as_in_one() {
        let mut text = String::new();
        let mut i = 0;
        while text.len() < 2 * crate::PIECE_MIN_LEN + 1000 {
            text.push_str(&format!(
                "event E{i} {{ f: int  g: string? }}\n// a comment\nsubscriber s{i} {{\n    on: E{i}\n    run: act(event.f, \"x\")\n    retry: {{ attempts: 5  within: 2h }}\n}}\n\n"
            ));
            i += 1;
        }
        let cuts = cuts(&text, 3);
        assert_eq!(cuts.len(), 2);
        assert!(same_as_serial(&text, &cuts));
        assert_eq!(format!("{:?}", crate::parse(&text).file), format!("{:?}", parse_serial(&text).file));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// A corpus file with a random stretch replaced by random text from a
        /// jadpo-like alphabet: wherever it is cut, the pieces give the whole
        /// text's tree or nothing.
        #[test]
        fn an_edited_text_cut_anywhere_gives_the_whole_texts_tree_or_none(
            file in 0usize..1000,
            at in 0.0f64..1.0,
            len in 0usize..12,
            insert in "[a-z{}()\\[\\]:,.\"/* \n]{0,12}",
        ) {
            let texts = corpus();
            let mut text = texts[file % texts.len()].clone();
            let mut start = (text.len() as f64 * at) as usize;
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            text.replace_range(start..end, &insert);
            for cut in all_cuts(&text) {
                same_as_serial(&text, &[cut]);
            }
        }
    }
}
