//! A persona's memory page (`/agent/<name>/memory`): its own facts (the owner's text), the
//! facts it keeps per person and per chat with where each came from and a Forget button
//! each, and its chats' summaries; read as `state memory` reads them.

use std::fmt::Write as _;

use super::{Frame, button, esc, page, persona_tabs};
use crate::app::console::http::encode;
use crate::app::memory_report::{MemoryView, ScopeView, SummariesView};
use crate::core::facts::FactScope;

/// The memory page; `name` gives a chat's name where the persona knows it.
pub(crate) fn render(
    f: &Frame<'_>,
    agent: &str,
    view: &MemoryView,
    name: &dyn Fn(i64) -> Option<String>,
    csrf: &str,
) -> String {
    let mut body = persona_tabs(agent, "memory");
    let back = format!("/agent/{}/memory", encode(agent));
    if !view.persona.trim().is_empty() {
        let _ = write!(
            body,
            "<h2>About {} (persona.md)</h2><pre>{}</pre>",
            esc(agent),
            esc(view.persona.trim())
        );
    }
    let mut facts = 0;
    for (heading, want) in [("People", true), ("Chats", false)] {
        let scopes: Vec<&ScopeView> = view
            .scopes
            .iter()
            .filter(|s| matches!(s.scope, FactScope::Person(_)) == want)
            .filter(|s| !matches!(s.scope, FactScope::Persona))
            .collect();
        if scopes.is_empty() {
            continue;
        }
        let _ = write!(body, "<h2>{heading}</h2>");
        for s in scopes {
            let title = scope_title(s, name);
            let file = match &s.file {
                Ok(file) => file,
                Err(e) => {
                    let _ = write!(
                        body,
                        "<h3>{}</h3><p class=\"warn\">unreadable: {}</p>",
                        esc(&title),
                        esc(&e.to_string())
                    );
                    continue;
                }
            };
            if file.facts.is_empty() {
                continue;
            }
            let _ = write!(body, "<h3>{}</h3><ul class=\"facts\">", esc(&title));
            for fact in &file.facts {
                facts += 1;
                let origin = crate::app::memory_report::fact_origin(fact)
                    .into_iter()
                    .map(
                        |o| match o.strip_prefix("chat ").and_then(|c| c.parse::<i64>().ok()) {
                            Some(id) => name(id).map_or(o, |n| format!("chat {n}")),
                            None => o,
                        },
                    )
                    .collect::<Vec<_>>()
                    .join(" · ");
                let forget = button(
                    csrf,
                    "forget-fact",
                    &[("agent", agent), ("id", &fact.id)],
                    "Forget",
                    &back,
                );
                let _ = write!(
                    body,
                    "<li data-fact=\"{id}\"><span class=\"fact\">{text}</span><div class=\"sub\">[{id}] {origin}</div>{forget}</li>",
                    id = esc(&fact.id),
                    text = esc(&fact.text),
                    origin = esc(&origin),
                );
            }
            body.push_str("</ul>");
        }
    }
    if facts == 0 {
        let _ = write!(
            body,
            "<p id=\"no-facts\">{} keeps no facts yet.</p>",
            esc(agent)
        );
    }
    if !view.summaries.is_empty() {
        body.push_str("<h2>Summaries</h2>");
    }
    for SummariesView { chat, file } in &view.summaries {
        let title = name(chat.0).unwrap_or_else(|| chat.to_string());
        let _ = write!(body, "<h3>{}</h3>", esc(&title));
        match file {
            Ok(file) => {
                body.push_str("<ul class=\"summaries\">");
                for sm in &file.summaries {
                    let _ = write!(
                        body,
                        "<li><span class=\"sub\">messages {}–{}</span> {}</li>",
                        sm.first,
                        sm.last,
                        esc(&sm.text)
                    );
                }
                body.push_str("</ul>");
                if let Some(t) = file.retry_after {
                    let _ = write!(
                        body,
                        "<p class=\"sub\">{} failed call(s); no summary call before {} UTC</p>",
                        file.failures,
                        t.strftime("%Y-%m-%d %H:%M")
                    );
                }
            }
            Err(e) => {
                let _ = write!(
                    body,
                    "<p class=\"warn\">unreadable: {}</p>",
                    esc(&e.to_string())
                );
            }
        }
    }
    page(f, &body)
}

/// A scope's heading: its file's title and what it is about.
fn scope_title(s: &ScopeView, name: &dyn Fn(i64) -> Option<String>) -> String {
    let title = s.file.as_ref().map(|f| f.title.clone()).unwrap_or_default();
    match s.scope {
        FactScope::Chat(c) => {
            let known = name(c.0).unwrap_or_else(|| c.to_string());
            if title.is_empty() {
                format!("chat {known}")
            } else {
                format!("{title} (chat {known})")
            }
        }
        scope if title.is_empty() => scope.to_string(),
        scope => format!("{title} ({scope})"),
    }
}
