//! What a page's query string (or an action's form) asks for: the deliveries'
//! and events' filters, the page's size and cursor, read once into the store's
//! own filter types.

use crate::replay::parse_time;
use jadpo_check::program::DeliveryState;
use jadpo_core::clock::rfc3339;
use jadpo_core::store::{DeliveryFilter, EventFilter};

/// Deliveries or events on one page when the query does not say.
pub const DEFAULT_PAGE: usize = 50;
/// Most deliveries or events on one page.
pub const MAX_PAGE: usize = 500;

/// A query string's or a form's fields, in order, decoded.
#[derive(Debug, Clone, Default)]
pub struct Fields(Vec<(String, String)>);

impl Fields {
    /// The fields of `a=1&b=2` (a query string or a form body).
    pub fn parse(text: &str) -> Fields {
        Fields(url::form_urlencoded::parse(text.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect())
    }

    /// The first value of `name`, trimmed, if it is not empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.trim()).filter(|v| !v.is_empty())
    }

    /// The first value of `name` as an owned string.
    pub fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(str::to_string)
    }
}

/// A listing's filter as read from its fields, with what to show in its form.
#[derive(Debug, Clone)]
pub struct Deliveries {
    /// The store's filter, without its page's limit and cursor.
    pub filter: DeliveryFilter,
    /// How many on a page.
    pub limit: usize,
    /// The page's cursor: only ids below it.
    pub before: Option<i64>,
}

/// A field's value that is not what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub String);

fn page_size(fields: &Fields) -> Result<usize, Invalid> {
    match fields.get("limit") {
        None => Ok(DEFAULT_PAGE),
        Some(t) => match t.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
            _ => Err(Invalid(format!("`limit={t}` must be a number from 1 to {MAX_PAGE}"))),
        },
    }
}

fn cursor(fields: &Fields) -> Result<Option<i64>, Invalid> {
    fields
        .get("before")
        .map(|t| t.parse::<i64>().map_err(|_| Invalid(format!("`before={t}` must be an id"))))
        .transpose()
}

fn time(fields: &Fields, name: &str, now_ms: i64) -> Result<Option<i64>, Invalid> {
    fields.get(name).map(|t| parse_time(name, t, now_ms).map_err(Invalid)).transpose()
}

impl Deliveries {
    /// The filter `fields` name, times read against `now_ms`.
    pub fn read(fields: &Fields, now_ms: i64) -> Result<Deliveries, Invalid> {
        let state = match fields.get("state") {
            None => None,
            Some(word) => Some(DeliveryState::parse(word).ok_or_else(|| {
                let all: Vec<&str> = DeliveryState::ALL.iter().map(|s| s.as_str()).collect();
                Invalid(format!("`state={word}` is not a state (one of {})", all.join(", ")))
            })?),
        };
        let filter = DeliveryFilter {
            state,
            subscriber: fields.text("subscriber"),
            connection: fields.text("connection"),
            event: fields.text("event"),
            since_ms: time(fields, "since", now_ms)?,
            until_ms: time(fields, "until", now_ms)?,
            failure_code: fields.text("code"),
            ..DeliveryFilter::default()
        };
        Ok(Deliveries { filter, limit: page_size(fields)?, before: cursor(fields)? })
    }

    /// The store's filter for this page: one more than the page, to tell
    /// whether another follows.
    pub fn page_filter(&self) -> DeliveryFilter {
        DeliveryFilter { limit: Some(self.limit + 1), before_id: self.before, ..self.filter.clone() }
    }
}

/// The query string naming `filter` (times as RFC 3339), for links and forms.
pub fn delivery_query(filter: &DeliveryFilter) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(s) = filter.state {
        out.push(("state", s.as_str().to_string()));
    }
    let texts = [
        ("subscriber", &filter.subscriber),
        ("connection", &filter.connection),
        ("event", &filter.event),
        ("code", &filter.failure_code),
    ];
    for (k, v) in texts {
        if let Some(v) = v {
            out.push((k, v.clone()));
        }
    }
    if let Some(t) = filter.since_ms {
        out.push(("since", rfc3339(t)));
    }
    if let Some(t) = filter.until_ms {
        out.push(("until", rfc3339(t)));
    }
    out
}

/// `pairs` as a query string.
pub fn encode(pairs: &[(&str, String)]) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

/// The events' listing as its fields ask.
#[derive(Debug, Clone)]
pub struct Events {
    /// The store's filter, without its page's limit.
    pub filter: EventFilter,
    /// How many on a page.
    pub limit: usize,
    /// The page's cursor: only ids below it.
    pub before: Option<i64>,
    /// When the event at the cursor was emitted (what the store's filter reads).
    pub at_ms: Option<i64>,
}

impl Events {
    /// The filter `fields` name, times read against `now_ms`.
    pub fn read(fields: &Fields, now_ms: i64) -> Result<Events, Invalid> {
        let filter = EventFilter {
            name: fields.text("name"),
            since_ms: time(fields, "since", now_ms)?,
            until_ms: time(fields, "until", now_ms)?,
            limit: None,
        };
        let at_ms = fields
            .get("at")
            .map(|t| t.parse::<i64>().map_err(|_| Invalid(format!("`at={t}` must be a time in milliseconds"))))
            .transpose()?;
        Ok(Events { filter, limit: page_size(fields)?, before: cursor(fields)?, at_ms })
    }

    /// The store's filter for this page. The store lists events newest first by
    /// id and filters them by time, so a page after the first asks for those
    /// emitted up to the cursor's event (with room for others of its
    /// millisecond) and keeps the ids below the cursor.
    pub fn page_filter(&self) -> EventFilter {
        let until_ms = match (self.filter.until_ms, self.at_ms) {
            (Some(u), Some(at)) => Some(u.min(at + 1)),
            (u, at) => u.or(at.map(|a| a + 1)),
        };
        let extra = if self.before.is_some() { self.limit } else { 0 };
        EventFilter { until_ms, limit: Some(self.limit + 1 + extra), ..self.filter.clone() }
    }

    /// The query string naming this listing's filter.
    pub fn query(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(n) = &self.filter.name {
            out.push(("name", n.clone()));
        }
        if let Some(t) = self.filter.since_ms {
            out.push(("since", rfc3339(t)));
        }
        if let Some(t) = self.filter.until_ms {
            out.push(("until", rfc3339(t)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000;

    #[test]
    fn a_listing_reads_every_filter_and_its_page() {
        let f = Fields::parse(
            "state=failed&subscriber=book&connection=ledger&event=Paid&since=2h&until=2023-11-14T22:13:20Z\
             &code=http.503&before=900&limit=20",
        );
        let d = Deliveries::read(&f, NOW).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(d.filter.state, Some(DeliveryState::Failed));
        assert_eq!(d.filter.subscriber.as_deref(), Some("book"));
        assert_eq!(d.filter.connection.as_deref(), Some("ledger"));
        assert_eq!(d.filter.event.as_deref(), Some("Paid"));
        assert_eq!(d.filter.since_ms, Some(NOW - 7_200_000));
        assert_eq!(d.filter.until_ms, Some(NOW));
        assert_eq!(d.filter.failure_code.as_deref(), Some("http.503"));
        let page = d.page_filter();
        assert_eq!((page.limit, page.before_id), (Some(21), Some(900)));
        let back = encode(&delivery_query(&d.filter));
        assert_eq!(
            back,
            "state=failed&subscriber=book&connection=ledger&event=Paid&code=http.503\
             &since=2023-11-14T20%3A13%3A20Z&until=2023-11-14T22%3A13%3A20Z"
        );
    }

    #[test]
    fn empty_fields_are_no_filter_and_bad_ones_say_why() {
        let d = Deliveries::read(&Fields::parse("state=&subscriber=+&limit="), NOW).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((d.filter.state, d.filter.subscriber, d.limit), (None, None, DEFAULT_PAGE));
        let bad = |q: &str| Deliveries::read(&Fields::parse(q), NOW).unwrap_err().0;
        assert!(bad("state=lost").starts_with("`state=lost` is not a state (one of pending"), "{}", bad("state=lost"));
        assert_eq!(bad("limit=0"), "`limit=0` must be a number from 1 to 500");
        assert_eq!(bad("before=x"), "`before=x` must be an id");
        assert!(bad("since=yesterday").starts_with("`--since yesterday` is not a time"));
    }
}
