//! Byte offsets to LSP positions and back, in the encoding the client chose.
//!
//! The checker speaks byte offsets; the protocol speaks lines and columns counted in
//! UTF-16 code units unless the client offers UTF-8. Every conversion clamps: a
//! position past the end of a line means the line's end, one past the last line
//! means the end of the file, so a client's stale or wrong position never panics.

/// How the client counts columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
}

/// A line and a column, both 0-based, the column in the client's encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct LineCol {
    pub line: u32,
    pub col: u32,
}

/// The start of every line of one text.
#[derive(Debug, Clone)]
pub struct LineIndex {
    starts: Vec<u32>,
    len: u32,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        // Counted first, so the list is made once at its size rather than grown by
        // doubling (a large file has hundreds of thousands of lines).
        let lines = memchr::memchr_iter(b'\n', text.as_bytes()).count();
        let mut starts = Vec::with_capacity(lines + 1);
        starts.push(0);
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i as u32 + 1));
        LineIndex { starts, len: text.len() as u32 }
    }

    /// Moves the index to `new`, the text it was made from with the bytes from
    /// `prefix` to `old_end` replaced by those from `prefix` to `new_end`: the
    /// lines before the edit are kept, those after it moved, and only the edited
    /// stretch is searched for line breaks.
    pub fn edit(&mut self, new: &str, prefix: usize, old_end: usize, new_end: usize) {
        // A line starting at or before `prefix` follows a line break before the edit;
        // one starting after `old_end`, a line break after it.
        let keep = self.starts.partition_point(|&s| s as usize <= prefix);
        let after = self.starts.partition_point(|&s| s as usize <= old_end);
        let delta = new_end as i64 - old_end as i64;
        self.starts[after..].iter_mut().for_each(|s| *s = (*s as i64 + delta) as u32);
        let stretch = new.as_bytes().get(prefix..new_end).unwrap_or_default();
        self.starts.splice(keep..after, memchr::memchr_iter(b'\n', stretch).map(|i| (prefix + i) as u32 + 1));
        self.len = new.len() as u32;
    }

    /// The line and column of a byte offset; an offset inside a character counts as
    /// the character's start.
    pub fn line_col(&self, text: &str, offset: u32, enc: Encoding) -> LineCol {
        let mut offset = offset.min(self.len) as usize;
        while offset > 0 && !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s as usize <= offset) - 1;
        let start = self.starts[line] as usize;
        let before = text.get(start..offset).unwrap_or("");
        let col = match enc {
            Encoding::Utf8 => before.len(),
            Encoding::Utf16 => before.chars().map(char::len_utf16).sum(),
        };
        LineCol { line: line as u32, col: col as u32 }
    }

    /// The byte offset of a line and column, clamped to the line's end (before its
    /// line break) and to the end of the text.
    pub fn offset(&self, text: &str, at: LineCol, enc: Encoding) -> u32 {
        let Some(&start) = self.starts.get(at.line as usize) else { return self.len };
        let end = self.starts.get(at.line as usize + 1).map_or(self.len, |&next| next - 1);
        column_offset(text, start as usize, end as usize, at.col, enc) as u32
    }

    /// [`LineIndex::offset`] without an index: the text is searched for the line's
    /// start, for a single position (an edit's) where making the index would cost
    /// more than that search, and a list the size of the text's lines.
    pub fn offset_in(text: &str, at: LineCol, enc: Encoding) -> u32 {
        let mut breaks = memchr::memchr_iter(b'\n', text.as_bytes());
        let start = match at.line {
            0 => 0,
            line => match breaks.nth(line as usize - 1) {
                Some(i) => i + 1,
                None => return text.len() as u32,
            },
        };
        let end = breaks.next().unwrap_or(text.len());
        column_offset(text, start, end, at.col, enc) as u32
    }

    /// The number of lines (a text ending in a newline has an empty last line).
    pub fn lines(&self) -> u32 {
        self.starts.len() as u32
    }
}

/// The offset of column `col` of the line from `start` to `end` (its line break),
/// clamped to the line's end.
fn column_offset(text: &str, start: usize, end: usize, col: u32, enc: Encoding) -> usize {
    let line = text.get(start..end).unwrap_or("");
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut units = 0u32;
    for (i, c) in line.char_indices() {
        if units >= col {
            return start + i;
        }
        units += match enc {
            Encoding::Utf8 => c.len_utf8() as u32,
            Encoding::Utf16 => c.len_utf16() as u32,
        };
    }
    start + line.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_utf16_units_or_bytes() {
        let text = "a: \"é😀\" b\nnext";
        let index = LineIndex::new(text);
        let b = text.find(" b").unwrap() as u32 + 1;
        // `a: "` is 4, é is 1 unit (2 bytes), 😀 is 2 units (4 bytes), `" ` is 2.
        assert_eq!(index.line_col(text, b, Encoding::Utf16), LineCol { line: 0, col: 9 });
        assert_eq!(index.line_col(text, b, Encoding::Utf8), LineCol { line: 0, col: 12 });
        assert_eq!(index.offset(text, LineCol { line: 0, col: 9 }, Encoding::Utf16), b);
        assert_eq!(index.offset(text, LineCol { line: 0, col: 12 }, Encoding::Utf8), b);
    }

    #[test]
    fn positions_past_the_end_are_clamped() {
        let text = "ab\r\ncd";
        let index = LineIndex::new(text);
        assert_eq!(index.offset(text, LineCol { line: 0, col: 99 }, Encoding::Utf16), 2);
        assert_eq!(index.offset(text, LineCol { line: 7, col: 0 }, Encoding::Utf16), 6);
        assert_eq!(index.line_col(text, 99, Encoding::Utf16), LineCol { line: 1, col: 2 });
        // An offset inside a character is the character's start.
        let text = "é";
        assert_eq!(LineIndex::new(text).line_col(text, 1, Encoding::Utf16), LineCol { line: 0, col: 0 });
    }

    #[test]
    fn an_offset_without_an_index_is_the_indexs() {
        for text in ["", "ab\r\ncd", "a\n\n\"é😀\" b\nlast", "\n", "x\n"] {
            let index = LineIndex::new(text);
            for line in 0..6 {
                for col in 0..12 {
                    for enc in [Encoding::Utf8, Encoding::Utf16] {
                        let at = LineCol { line, col };
                        assert_eq!(LineIndex::offset_in(text, at, enc), index.offset(text, at, enc), "{text:?} {at:?}");
                    }
                }
            }
        }
    }

    proptest::proptest! {
        /// An index moved by an edit is the new text's own.
        #[test]
        fn an_edited_index_is_the_new_texts(
            text in "[a\né\r]{0,40}",
            at in 0.0f64..1.0,
            len in 0usize..8,
            insert in "[b\n\r]{0,6}",
        ) {
            let std::ops::Range { start, end } = jadpo_test_support::edit_range(&text, at, len);
            let mut new = text.clone();
            new.replace_range(start..end, &insert);
            let mut index = LineIndex::new(&text);
            index.edit(&new, start, end, start + insert.len());
            let whole = LineIndex::new(&new);
            proptest::prop_assert_eq!(&index.starts, &whole.starts);
            proptest::prop_assert_eq!(index.len, whole.len);
        }
    }
}
