//! The pages' HTML: the layout every page shares and the small pieces pages are
//! built of.
//!
//! Every page and fragment is a [`Markup`] written with maud's `html!`, which
//! escapes each value spliced into it, in text and in attribute values alike
//! (attribute values are always double-quoted); a `Markup` spliced into another
//! is kept as it is. The console never writes `PreEscaped`, maud's only way to
//! put unescaped text in (the tests check its sources for it), so text from the
//! store or the request reaches a page escaped or not at all.

use crate::security::CSRF_FIELD;
pub use maud::Markup;
use maud::{DOCTYPE, Render, html};

/// The pages of the navigation, in order: path and label.
pub const NAV: [(&str, &str); 4] =
    [("/", "Overview"), ("/deliveries", "Deliveries"), ("/events", "Events"), ("/breakers", "Breakers")];

/// What every page shows around its body.
pub struct Layout<'a> {
    /// The `<title>` and the `<h1>`.
    pub title: &'a str,
    /// The navigation entry this page is under (its path).
    pub nav: &'a str,
    /// The page's body.
    pub body: Markup,
    /// Whether actions are on (a read-only console says it is).
    pub actions: bool,
    /// A notice to show at the top, e.g. what an action did.
    pub notice: Option<Markup>,
    /// The logout button of a console with a token.
    pub logout: Option<Markup>,
}

/// The whole document of `page`.
pub fn document(page: &Layout<'_>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (page.title) " · jadpo console" }
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body {
                a class="skip" href="#main" { "Skip to content" }
                header {
                    nav aria-label="Console" {
                        a class="brand" href="/" { "jadpo" }
                        @if page.actions {
                            span class="mode mode-actions" { "actions on" }
                        } @else {
                            span class="mode" title="started without --console-actions" { "read-only" }
                        }
                        ul {
                            @for (path, label) in NAV {
                                li { a href=(path) aria-current=[(path == page.nav).then_some("page")] { (label) } }
                            }
                            @if let Some(logout) = &page.logout {
                                li { (logout) }
                            }
                        }
                    }
                }
                main id="main" tabindex="-1" {
                    h1 { (page.title) }
                    @if let Some(notice) = &page.notice {
                        p class="notice" role="status" { (notice) }
                    }
                    (page.body)
                }
            }
        }
    }
}

/// A form that POSTs to `action` with the CSRF token, its `fields` and a submit
/// button labelled `button`; `confirm` (if any) is what the page's script asks
/// before sending it.
pub fn action_form(action: &str, csrf: &str, fields: Markup, button: &str, confirm: Option<&str>) -> Markup {
    html! {
        form method="post" action=(action) class="action" data-confirm=[confirm] {
            input type="hidden" name=(CSRF_FIELD) value=(csrf);
            (fields)
            button type="submit" { (button) }
        }
    }
}

/// A hidden field.
pub fn hidden(name: &str, value: impl Render) -> Markup {
    html! { input type="hidden" name=(name) value=(value); }
}

/// A table in a wrapper that scrolls sideways on a narrow screen (the page
/// itself never does): `caption`, the header cells and the rows.
pub fn table(caption: &str, head: &[&str], rows: &[Markup]) -> Markup {
    html! {
        div class="table-wrap" tabindex="0" role="region" aria-label=(caption) {
            table {
                caption { (caption) }
                thead { tr { @for h in head { th scope="col" { (h) } } } }
                tbody { @for row in rows { (row) } }
            }
        }
    }
}

/// A state's word as a badge.
pub fn state_badge(word: &str) -> Markup {
    html! { span class={ "state state-" (word) } { (word) } }
}
