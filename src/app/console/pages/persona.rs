//! A persona's page (`/agent/<name>`): every chat it has known (kept across restarts), newest
//! activity first, with its last message in the persona's local time, whether it waits for an
//! answer, a waiting draft, its plan and a pause; the "waits for us" and "draft waiting"
//! filters, a search box (a plain GET form) and paging.

use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::{Frame, esc, local_short, page, persona_tabs, short};
use crate::app::console::http::encode;

/// Chats shown per page.
pub(crate) const PER_PAGE: usize = 50;

/// One chat as the list shows it.
#[derive(Debug, Clone)]
pub(crate) struct ChatRow {
    pub id: i64,
    pub title: String,
    pub group: bool,
    /// When its newest message came, who wrote it and its first words.
    pub last: Option<(Timestamp, String, String)>,
    /// Its newest message is someone else's.
    pub waits: bool,
    pub draft: bool,
    /// Its plan in a few words.
    pub plan: Option<String>,
    pub paused: bool,
}

/// Which chats the list shows: a filter (`waiting`, `drafts`), a search and a page (from 1).
#[derive(Debug, Clone, Default)]
pub(crate) struct Query {
    pub show: Option<String>,
    pub q: String,
    pub page: usize,
}

impl Query {
    /// The query of a request's parameters.
    pub(crate) fn of(params: &std::collections::BTreeMap<String, String>) -> Query {
        Query {
            show: params
                .get("show")
                .filter(|s| matches!(s.as_str(), "waiting" | "drafts"))
                .cloned(),
            q: params
                .get("q")
                .map(|q| q.trim().to_string())
                .unwrap_or_default(),
            page: params
                .get("page")
                .and_then(|p| p.parse::<usize>().ok())
                .unwrap_or(1)
                .max(1),
        }
    }

    /// The list's address with this query, on page `page`.
    fn link(&self, agent: &str, page: usize, show: Option<&str>) -> String {
        let mut pairs = form_urlencoded::Serializer::new(String::new());
        if let Some(s) = show {
            pairs.append_pair("show", s);
        }
        if !self.q.is_empty() {
            pairs.append_pair("q", &self.q);
        }
        if page > 1 {
            pairs.append_pair("page", &page.to_string());
        }
        let query = pairs.finish();
        let sep = if query.is_empty() { "" } else { "?" };
        format!("/agent/{}{sep}{query}", encode(agent))
    }
}

/// The rows `query` selects, sorted newest activity first, and how many matched in all.
pub(crate) fn select(mut rows: Vec<ChatRow>, query: &Query) -> (Vec<ChatRow>, usize) {
    let needle = query.q.to_lowercase();
    rows.retain(|r| match query.show.as_deref() {
        Some("waiting") => r.waits,
        Some("drafts") => r.draft,
        _ => true,
    });
    if !needle.is_empty() {
        rows.retain(|r| {
            r.title.to_lowercase().contains(&needle)
                || r.id.to_string() == needle
                || r.last.as_ref().is_some_and(|(_, who, text)| {
                    who.to_lowercase().contains(&needle) || text.to_lowercase().contains(&needle)
                })
        });
    }
    rows.sort_by(|a, b| {
        let at = |r: &ChatRow| r.last.as_ref().map(|l| l.0);
        at(b).cmp(&at(a)).then_with(|| a.title.cmp(&b.title))
    });
    let total = rows.len();
    let shown = rows
        .into_iter()
        .skip((query.page - 1) * PER_PAGE)
        .take(PER_PAGE)
        .collect();
    (shown, total)
}

/// The persona's chats page.
pub(crate) fn render(
    f: &Frame<'_>,
    agent: &str,
    tz: &TimeZone,
    rows: Vec<ChatRow>,
    query: &Query,
) -> String {
    let (shown, total) = select(rows, query);
    let mut body = persona_tabs(agent, "chats");
    // The filters and the search: plain links and a GET form.
    body.push_str("<div class=\"filters\">");
    for (key, label) in [
        (None, "All"),
        (Some("waiting"), "Waits for us"),
        (Some("drafts"), "Draft waiting"),
    ] {
        let on = query.show.as_deref() == key;
        let _ = write!(
            body,
            "<a class=\"filter{}\" id=\"filter-{}\" href=\"{}\">{label}</a>",
            if on { " on" } else { "" },
            key.unwrap_or("all"),
            esc(&query.link(agent, 1, key))
        );
    }
    let _ = write!(
        body,
        "</div><form method=\"get\" action=\"/agent/{}\" class=\"search\" role=\"search\">{}<input type=\"search\" name=\"q\" id=\"q\" value=\"{}\" placeholder=\"Name, id or words\" aria-label=\"Search the chats\"><button type=\"submit\" id=\"search\">Search</button></form>",
        encode(agent),
        query
            .show
            .as_deref()
            .map(|s| format!("<input type=\"hidden\" name=\"show\" value=\"{}\">", esc(s)))
            .unwrap_or_default(),
        esc(&query.q)
    );
    let pages = total.div_ceil(PER_PAGE).max(1);
    let _ = write!(
        body,
        "<p class=\"count\" id=\"chat-count\">{total} chat(s){}</p>",
        if pages > 1 {
            format!(", page {} of {pages}", query.page.min(pages))
        } else {
            String::new()
        }
    );
    body.push_str("<table class=\"stack chats\"><thead><tr><th>Chat</th><th>Last message</th><th>State</th><th>Plan</th></tr></thead><tbody>");
    for r in &shown {
        let last = match &r.last {
            Some((at, who, text)) => format!(
                "<span class=\"when\">{}</span> {}: {}",
                esc(&local_short(*at, f.now, tz)),
                esc(who),
                esc(&short(text, 80))
            ),
            None => "<span class=\"sub\">no message seen yet</span>".to_string(),
        };
        let mut state = Vec::new();
        if r.waits {
            state.push("<span class=\"tag waits\">waits for us</span>");
        }
        if r.draft {
            state.push("<span class=\"tag draft\">draft waiting</span>");
        }
        if r.paused {
            state.push("<span class=\"tag paused\">paused</span>");
        }
        let _ = write!(
            body,
            "<tr data-chat=\"{id}\"><td data-label=\"Chat\"><a class=\"chat\" href=\"/agent/{a}/chat/{id}\">{t}</a>{g}</td><td data-label=\"Last message\">{last}</td><td data-label=\"State\">{state}</td><td data-label=\"Plan\">{plan}</td></tr>",
            id = r.id,
            a = encode(agent),
            t = esc(&r.title),
            g = if r.group {
                " <span class=\"sub\">group</span>"
            } else {
                ""
            },
            state = state.join(" "),
            plan = esc(r.plan.as_deref().unwrap_or("none")),
        );
    }
    if shown.is_empty() {
        body.push_str("<tr><td colspan=\"4\">No chat here.</td></tr>");
    }
    body.push_str("</tbody></table>");
    if pages > 1 {
        body.push_str("<p class=\"pager\">");
        if query.page > 1 {
            let _ = write!(
                body,
                "<a id=\"prev\" href=\"{}\">← Newer</a> ",
                esc(&query.link(agent, query.page - 1, query.show.as_deref()))
            );
        }
        if query.page < pages {
            let _ = write!(
                body,
                "<a id=\"next\" href=\"{}\">Older →</a>",
                esc(&query.link(agent, query.page + 1, query.show.as_deref()))
            );
        }
        body.push_str("</p>");
    }
    page(f, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: i64) -> ChatRow {
        ChatRow {
            id: n,
            title: format!("Person {n:03}"),
            group: false,
            last: Some((
                Timestamp::from_second(1_800_000_000 + n).unwrap_or_default(),
                format!("Person {n:03}"),
                format!("message {n}"),
            )),
            waits: n % 2 == 0,
            draft: n % 10 == 0,
            plan: None,
            paused: false,
        }
    }

    #[test]
    fn chats_are_filtered_searched_sorted_and_paged() {
        let rows: Vec<ChatRow> = (1..=200).map(row).collect();
        let all = Query::default();
        let first = Query {
            page: 1,
            ..all.clone()
        };
        let (shown, total) = select(rows.clone(), &first);
        assert_eq!((shown.len(), total), (PER_PAGE, 200));
        assert_eq!(shown[0].id, 200, "newest first");
        let (shown, _) = select(
            rows.clone(),
            &Query {
                page: 4,
                ..all.clone()
            },
        );
        assert_eq!(shown.last().map(|r| r.id), Some(1));
        let waiting = Query {
            show: Some("waiting".into()),
            page: 1,
            ..all.clone()
        };
        assert_eq!(select(rows.clone(), &waiting).1, 100);
        let drafts = Query {
            show: Some("drafts".into()),
            page: 1,
            ..all.clone()
        };
        assert_eq!(select(rows.clone(), &drafts).1, 20);
        let search = Query {
            q: "person 123".into(),
            page: 1,
            ..all
        };
        let (shown, total) = select(rows, &search);
        assert_eq!((total, shown[0].id), (1, 123));
        let link = search.link("Tess Ann", 2, Some("waiting"));
        assert_eq!(link, "/agent/Tess%20Ann?show=waiting&q=person+123&page=2");
    }
}
