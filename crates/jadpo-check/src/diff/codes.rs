//! The registry of `jadpoc diff`'s codes: each code once, with its category, its
//! severity, a one-line summary and its documentation (`docs/diff/CODE.md` beside
//! this crate), which `jadpoc explain CODE` prints.

use serde::Serialize;

/// What a change does to what the old program left in a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffSeverity {
    /// Worth reading before the change is deployed; nothing left behind breaks.
    Warning,
    /// Deliveries, events or receivers the old program left behind are dropped,
    /// split or sent what they do not expect.
    Breaking,
}

impl DiffSeverity {
    pub fn as_str(self) -> &'static str {
        match self {
            DiffSeverity::Warning => "warning",
            DiffSeverity::Breaking => "breaking",
        }
    }
}

/// The kind of declaration a code is about; findings are grouped by it, in this
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffCategory {
    Subscriber,
    Connection,
    Action,
    Event,
}

impl DiffCategory {
    pub const ALL: [DiffCategory; 4] =
        [DiffCategory::Subscriber, DiffCategory::Connection, DiffCategory::Action, DiffCategory::Event];

    pub fn as_str(self) -> &'static str {
        match self {
            DiffCategory::Subscriber => "subscriber",
            DiffCategory::Connection => "connection",
            DiffCategory::Action => "action",
            DiffCategory::Event => "event",
        }
    }
}

macro_rules! diff_codes {
    ($($variant:ident = $code:literal, $category:ident, $severity:ident, $summary:literal;)*) => {
        /// A stable code of `jadpoc diff`. Codes are a public interface: CI and
        /// tests match on them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DiffCode { $($variant,)* }

        impl DiffCode {
            /// Every code, grouped by category, in the order of the reference.
            pub const ALL: &'static [DiffCode] = &[$(DiffCode::$variant,)*];

            /// The code as users see it, such as `subscriber.removed`.
            pub fn as_str(self) -> &'static str {
                match self { $(DiffCode::$variant => $code,)* }
            }

            pub fn category(self) -> DiffCategory {
                match self { $(DiffCode::$variant => DiffCategory::$category,)* }
            }

            pub fn severity(self) -> DiffSeverity {
                match self { $(DiffCode::$variant => DiffSeverity::$severity,)* }
            }

            /// One line: when the code is raised.
            pub fn summary(self) -> &'static str {
                match self { $(DiffCode::$variant => $summary,)* }
            }

            /// The code's documentation in Markdown: what the change does to what
            /// the old program left, and what to do about it.
            pub fn doc(self) -> &'static str {
                match self {
                    $(DiffCode::$variant => include_str!(concat!("../../docs/diff/", $code, ".md")),)*
                }
            }
        }
    };
}

diff_codes! {
    SubscriberRemoved = "subscriber.removed", Subscriber, Breaking, "a subscriber of the old program is gone, and no `was:` names it";
    SubscriberRenamed = "subscriber.renamed", Subscriber, Warning, "a subscriber's `was:` names the old subscriber it takes the place of";
    SubscriberEventChanged = "subscriber.event_changed", Subscriber, Breaking, "a subscriber's `on:` names another event";
    SubscriberWhereChanged = "subscriber.where_changed", Subscriber, Warning, "a subscriber's `where:` changed, was added or was removed";
    SubscriberOrderByChanged = "subscriber.order_by_changed", Subscriber, Breaking, "a subscriber's `order_by:` changed, was added or was removed";
    SubscriberBudgetTightened = "subscriber.budget_tightened", Subscriber, Breaking, "a subscriber's budget has fewer attempts or a shorter `within:`";
    SubscriberArgsChanged = "subscriber.args_changed", Subscriber, Warning, "a subscriber's `run:` calls another action or passes other arguments";
    ConnectionRemoved = "connection.removed", Connection, Breaking, "a connection of the old program is gone, and no `was:` names it";
    ConnectionRenamed = "connection.renamed", Connection, Warning, "a connection's `was:` names the old connection it takes the place of";
    ConnectionUrlChanged = "connection.url_changed", Connection, Warning, "a connection's `url:` changed";
    ConnectionSigningRotated = "connection.signing_rotated", Connection, Breaking, "a connection signs with no secret or key the old one signed with, or stopped signing";
    ConnectionSigningChanged = "connection.signing_changed", Connection, Warning, "a connection's `signing:` changed, keeping a secret in common, or was added";
    ConnectionRateChanged = "connection.rate_changed", Connection, Warning, "a connection's `rate:` or `burst:` changed, was added or was removed";
    ActionParamsChanged = "action.params_changed", Action, Breaking, "an action's parameter was removed, renamed, retyped or made required, or a required one was added";
    ActionParamAdded = "action.param_added", Action, Warning, "an action has a new optional parameter";
    EventRemoved = "event.removed", Event, Breaking, "an event the old program's subscribers received is gone";
    EventUnusedRemoved = "event.unused_removed", Event, Warning, "an event no subscriber of the old program received is gone";
    EventFieldRemoved = "event.field_removed", Event, Warning, "an event's field is gone";
    EventFieldRetyped = "event.field_retyped", Event, Breaking, "a field the new program's subscribers read has another type";
    EventFieldNowRequired = "event.field_now_required", Event, Breaking, "an optional field the new program's subscribers read is now required";
    EventFieldAddedRequired = "event.field_added_required", Event, Breaking, "an event has a new required field that the new program's subscribers read";
    EventUnreadFieldChanged = "event.unread_field_changed", Event, Warning, "a field no subscriber of the new program reads was retyped, made required or added required";
}

impl DiffCode {
    /// Looks a code up by its name.
    pub fn parse(name: &str) -> Option<DiffCode> {
        DiffCode::ALL.iter().copied().find(|c| c.as_str() == name)
    }

    pub fn is_breaking(self) -> bool {
        self.severity() == DiffSeverity::Breaking
    }
}

impl std::fmt::Display for DiffCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
