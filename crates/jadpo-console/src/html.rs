//! The pages' HTML: escaping, the layout every page shares, and the small
//! pieces pages are built of. Every value from the store or the request goes
//! through [`esc`].

use crate::security::CSRF_FIELD;
use std::fmt::Write;

/// `text` escaped for HTML text and quoted attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The pages of the navigation, in order: path and label.
pub const NAV: [(&str, &str); 4] =
    [("/", "Overview"), ("/deliveries", "Deliveries"), ("/events", "Events"), ("/breakers", "Breakers")];

/// What every page shows around its body.
pub struct Page<'a> {
    /// The `<title>` and the `<h1>`.
    pub title: &'a str,
    /// The navigation entry this page is under (its path).
    pub nav: &'a str,
    /// The page's body (already HTML).
    pub body: String,
    /// Whether actions are on (a read-only console says it is).
    pub actions: bool,
    /// A notice to show at the top (already HTML), e.g. what an action did.
    pub notice: Option<String>,
    /// Whether the page has a logout button (a console with a token).
    pub logout: Option<String>,
}

/// The whole document of `page`.
pub fn document(page: &Page<'_>) -> String {
    let mut nav = String::new();
    for (path, label) in NAV {
        let current = if path == page.nav { " aria-current=\"page\"" } else { "" };
        let _ = write!(nav, "<li><a href=\"{path}\"{current}>{label}</a></li>");
    }
    let mode = if page.actions {
        "<span class=\"mode mode-actions\">actions on</span>"
    } else {
        "<span class=\"mode\" title=\"started without --console-actions\">read-only</span>"
    };
    let notice =
        page.notice.as_ref().map(|n| format!("<p class=\"notice\" role=\"status\">{n}</p>")).unwrap_or_default();
    let logout = page.logout.as_ref().map(|f| format!("<li>{f}</li>")).unwrap_or_default();
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title} · jadpo console</title>\n\
         <link rel=\"icon\" href=\"data:,\">\n\
         <link rel=\"stylesheet\" href=\"/assets/console.css\">\n\
         <script src=\"/assets/console.js\" defer></script>\n</head>\n<body>\n\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\n\
         <header><nav aria-label=\"Console\"><a class=\"brand\" href=\"/\">jadpo</a>{mode}<ul>{nav}{logout}</ul></nav></header>\n\
         <main id=\"main\" tabindex=\"-1\">\n<h1>{title}</h1>\n{notice}{body}</main>\n</body>\n</html>\n",
        title = esc(page.title),
        body = page.body,
    )
}

/// A form that POSTs to `action` with the CSRF token, its `fields` (already
/// HTML) and a submit button labelled `button`; `confirm` (if any) is what the
/// page's script asks before sending it.
pub fn action_form(action: &str, csrf: &str, fields: &str, button: &str, confirm: Option<&str>) -> String {
    let confirm = confirm.map(|c| format!(" data-confirm=\"{}\"", esc(c))).unwrap_or_default();
    format!(
        "<form method=\"post\" action=\"{}\" class=\"action\"{confirm}>\
         <input type=\"hidden\" name=\"{CSRF_FIELD}\" value=\"{}\">{fields}<button type=\"submit\">{}</button></form>",
        esc(action),
        esc(csrf),
        esc(button)
    )
}

/// A hidden field.
pub fn hidden(name: &str, value: &str) -> String {
    format!("<input type=\"hidden\" name=\"{}\" value=\"{}\">", esc(name), esc(value))
}

/// A table in a wrapper that scrolls sideways on a narrow screen (the page
/// itself never does): `caption`, the header cells and the rows (already HTML).
pub fn table(caption: &str, head: &[&str], rows: &[String]) -> String {
    let mut out =
        format!("<div class=\"table-wrap\" tabindex=\"0\" role=\"region\" aria-label=\"{}\"><table>", esc(caption));
    let _ = write!(out, "<caption>{}</caption><thead><tr>", esc(caption));
    for h in head {
        let _ = write!(out, "<th scope=\"col\">{}</th>", esc(h));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str(r);
    }
    out.push_str("</tbody></table></div>");
    out
}

/// A state's word as a badge.
pub fn state_badge(word: &str) -> String {
    format!("<span class=\"state state-{0}\">{0}</span>", esc(word))
}
