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
        let mut starts = vec![0];
        starts.extend(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i as u32 + 1));
        LineIndex { starts, len: text.len() as u32 }
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
        let line = text.get(start as usize..end as usize).unwrap_or("");
        let line = line.strip_suffix('\r').unwrap_or(line);
        let mut units = 0u32;
        for (i, c) in line.char_indices() {
            if units >= at.col {
                return start + i as u32;
            }
            units += match enc {
                Encoding::Utf8 => c.len_utf8() as u32,
                Encoding::Utf16 => c.len_utf16() as u32,
            };
        }
        start + line.len() as u32
    }

    /// The number of lines (a text ending in a newline has an empty last line).
    pub fn lines(&self) -> u32 {
        self.starts.len() as u32
    }
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
}
