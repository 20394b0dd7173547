//! English words in messages, written once for every crate that prints a count.

/// `noun(1, "file")` is `file`, `noun(2, "file")` is `files`, `noun(2,
/// "delivery")` is `deliveries`.
pub fn noun(n: u64, word: &str) -> String {
    match word.strip_suffix('y') {
        _ if n == 1 => word.to_string(),
        Some(stem) if !stem.ends_with(['a', 'e', 'o', 'u']) => format!("{stem}ies"),
        _ => format!("{word}s"),
    }
}

/// `plural(1, "file")` is `1 file`, `plural(2, "file")` is `2 files`.
pub fn plural(n: u64, word: &str) -> String {
    format!("{n} {}", noun(n, word))
}

/// `n` with its thousands separated: `10,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated() {
        for (n, shown) in [(0, "0"), (999, "999"), (1_000, "1,000"), (100_000, "100,000"), (1_234_567, "1,234,567")] {
            assert_eq!(thousands(n), shown);
        }
    }

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(plural(0, "file"), "0 files");
        assert_eq!(plural(1, "file"), "1 file");
        assert_eq!(plural(2, "attempt"), "2 attempts");
        assert_eq!(noun(1, "field"), "field");
        assert_eq!(noun(3, "field"), "fields");
        assert_eq!(plural(2, "delivery"), "2 deliveries");
        assert_eq!(plural(2, "key"), "2 keys");
    }
}
