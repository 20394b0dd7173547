//! "Did you mean" suggestions for misspelt names.

/// The closest candidate to `name`, as a help line, when one is close enough to be
/// a likely misspelling.
pub fn did_you_mean<'c>(name: &str, candidates: impl Iterator<Item = &'c str>) -> Option<String> {
    closest(name, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// The candidate with the smallest edit distance, if within a third of the name's
/// length (at least 1); case differences count as half an edit.
pub fn closest<'c>(name: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    let limit = (name.chars().count() / 3).max(1);
    let lower = name.to_lowercase();
    let mut best: Option<(usize, &'c str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        // Cheap filter: lengths far apart cannot be within the limit.
        if c.len().abs_diff(name.len()) > limit && !name.starts_with(&c[..c.len().min(3)]) {
            continue;
        }
        // A name that starts with the candidate (`retries` for `retry`) is a likely
        // slip too, whatever the edit distance.
        let prefix = c.len() >= 3 && name.len() > c.len() && lower.starts_with(&c.to_lowercase());
        let d = if c.to_lowercase() == lower || prefix { 0 } else { strsim::levenshtein(name, c) };
        if d <= limit && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_the_closest_name() {
        let names = ["PaymentReceived", "PaymentRefunded", "OrderShipped"];
        assert_eq!(closest("PaymentRecieved", names.into_iter()), Some("PaymentReceived"));
        assert_eq!(closest("paymentreceived", names.into_iter()), Some("PaymentReceived"));
        assert_eq!(closest("Nothing", names.into_iter()), None);
    }
}
