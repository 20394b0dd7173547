//! Reading a long text in pieces at once, one per core ([`crate::parse`] says when
//! the pieces' trees are the whole text's).

use crate::lexer::Lexer;
use crate::{Lists, Parsed, ast, grammar};

/// Where lines start with a declaration's keyword and a space: where the text
/// may be cut, and about how many declarations each piece holds. Read before
/// the pieces start, on one core, so it looks only where a line break is
/// followed by a keyword's first letter (`memmem` finds each pair quickly, and
/// most lines start with indentation or `}`), then puts them in order.
pub(crate) fn decl_starts(src: &str) -> Vec<usize> {
    use ast::DeclKind::*;
    let keywords = [Event, Connection, Action, Subscriber, Schedule, Test].map(ast::DeclKind::keyword);
    let bytes = src.as_bytes();
    let starts_decl = |line: usize| {
        let text = &bytes[line..];
        keywords.iter().any(|k| text.strip_prefix(k.as_bytes()).is_some_and(|rest| rest.first() == Some(&b' ')))
    };
    let mut firsts: Vec<u8> = keywords.iter().filter_map(|k| k.as_bytes().first().copied()).collect();
    firsts.sort_unstable();
    firsts.dedup();
    let mut starts: Vec<usize> = std::iter::once(0).filter(|&line| starts_decl(line)).collect();
    for first in firsts {
        let pair = [b'\n', first];
        starts.extend(memchr::memmem::find_iter(bytes, &pair).map(|i| i + 1).filter(|&line| starts_decl(line)));
    }
    starts.sort_unstable();
    starts
}

/// Where to cut a text into about `pieces` pieces of even length: the first
/// declaration start (of `starts`, the text's [`decl_starts`]) at or after each
/// even share of `len`, past the text's start, in increasing order.
pub(crate) fn cuts(starts: &[usize], len: usize, pieces: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = (1..pieces)
        .filter_map(|k| {
            let target = len / pieces * k;
            starts.get(starts.partition_point(|&s| s < target)).copied()
        })
        .filter(|&cut| cut > 0)
        .collect();
    cuts.dedup();
    cuts
}

/// `src` read in about `pieces` pieces at once, one thread each, and joined;
/// `None` unless every piece parsed cleanly (see [`parse`](crate::parse)).
pub(crate) fn parse_in_pieces(src: &str, pieces: usize) -> Option<Parsed<'_>> {
    let starts = decl_starts(src);
    parse_at(src, &starts, &cuts(&starts, src.len(), pieces))
}

/// The pieces between `cuts` parsed at once and joined. The first piece's list
/// has room for every declaration the text starts (by `starts`), so the others'
/// are added to it without a copy of the whole.
pub(crate) fn parse_at<'a>(src: &'a str, starts: &[usize], cuts: &[usize]) -> Option<Parsed<'a>> {
    if cuts.is_empty() {
        return None;
    }
    let bounds: Vec<(usize, usize)> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .zip(cuts.iter().copied().chain(std::iter::once(src.len())))
        .collect();
    let within =
        |(start, end): (usize, usize)| starts.partition_point(|&s| s < end) - starts.partition_point(|&s| s < start);
    let pieces: Vec<Option<(Vec<ast::Decl<'a>>, Vec<ast::Comment>)>> = std::thread::scope(|scope| {
        // A thread the system refuses leaves its piece unread: the text is then
        // parsed in one piece, as when a piece has an error.
        let handles: Vec<_> = bounds[1..]
            .iter()
            .map(|&bound| {
                std::thread::Builder::new().spawn_scoped(scope, move || parse_piece(src, bound, within(bound))).ok()
            })
            .collect();
        // The first piece on this thread, the others beside it.
        let first = parse_piece(src, bounds[0], starts.len());
        std::iter::once(first).chain(handles.into_iter().map(|h| h.and_then(|h| h.join().ok().flatten()))).collect()
    });
    let mut pieces = pieces.into_iter().collect::<Option<Vec<_>>>()?.into_iter();
    let (mut decls, mut comments) = pieces.next()?;
    for (mut d, mut c) in pieces {
        decls.append(&mut d);
        comments.append(&mut c);
    }
    // Room was made for the declarations that start a line; fewer may have come.
    decls.shrink_to_fit();
    Some(Parsed { file: ast::File { decls }, errors: Vec::new(), comments })
}

/// One piece's declarations (in a list with room for `room` of them) and
/// comments, if it parsed without an error and no token crossed its end.
pub(crate) fn parse_piece(
    src: &str,
    (start, end): (usize, usize),
    room: usize,
) -> Option<(Vec<ast::Decl<'_>>, Vec<ast::Comment>)> {
    let mut errors = Vec::new();
    let mut recovered = Vec::new();
    let mut lists = Lists { decls: Vec::with_capacity(room), ..Lists::default() };
    let mut lexer = Lexer::piece(src, start, end, &mut errors);
    grammar::FileParser::new().parse(src, &mut recovered, &mut lists, &mut lexer).ok()?;
    let clean = recovered.is_empty() && !lexer.crossed_end();
    let comments = lexer.take_comments();
    (clean && errors.is_empty()).then_some((lists.decls, comments))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::parse_serial;
    use jadpo_test_support::corpus;
    use proptest::prelude::*;

    /// Every place `cuts` could choose: each line start with a declaration's keyword.
    fn all_cuts(src: &str) -> Vec<usize> {
        decl_starts(src).into_iter().filter(|&s| s > 0).collect()
    }

    /// The pieces' parse, when there is one, is the whole text's, to the last span;
    /// returns whether there was one.
    fn same_as_serial(src: &str, cuts: &[usize]) -> bool {
        let Some(pieces) = parse_at(src, &decl_starts(src), cuts) else { return false };
        let serial = parse_serial(src);
        assert!(serial.errors.is_empty(), "pieces parsed cleanly, the whole did not, cut at {cuts:?}:\n{src}");
        assert_eq!(format!("{:?}", pieces.file), format!("{:?}", serial.file), "cut at {cuts:?}:\n{src}");
        assert_eq!(pieces.comments, serial.comments, "cut at {cuts:?}");
        true
    }

    /// `text` with `len` bytes from the fraction `at` of its length replaced by
    /// `insert`, both ends moved out to characters' boundaries.
    pub(crate) fn edited(text: &str, at: f64, len: usize, insert: &str) -> String {
        let mut text = text.to_string();
        text.replace_range(jadpo_test_support::edit_range(&text, at, len), insert);
        text
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
        assert!(parse_at(text, &decl_starts(text), &[cut]).is_none());
        let text = "event A { x: int\nevent B { y: int }\n";
        let cut = text.find("event B").expect("B");
        assert!(parse_at(text, &decl_starts(text), &[cut]).is_none());
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
        let cuts = cuts(&decl_starts(&text), text.len(), 3);
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
            let text = edited(&texts[file % texts.len()], at, len, &insert);
            for cut in all_cuts(&text) {
                same_as_serial(&text, &[cut]);
            }
        }
    }
}
