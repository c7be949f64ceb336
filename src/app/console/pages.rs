//! The console's pages as HTML strings, rendered by the server: one layout, the pages, the
//! forms (each with the CSRF field) and the usage chart as inline SVG. Pure: every page takes
//! the data it shows, already read. Everything from outside (names, titles, messages, model
//! output) is escaped; no key, session or phone number is ever passed in.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::adapters::llm::usage::{PriceTable, UsageRow};
use crate::app::ops::controls::{AgentView, DraftView};
use crate::core::graph::TaskGraph;
use crate::core::model::{Chat, Message};

use super::http::encode;

/// Escapes text for HTML (element content and quoted attributes).
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// The page around `body`, for the owner once logged in.
pub(crate) fn layout(title: &str, note: Option<&str>, body: &str) -> String {
    layout_with(title, note, body, true)
}

/// The page around `body`; `signed_in` adds the logout button to the navigation.
pub(crate) fn layout_with(title: &str, note: Option<&str>, body: &str, signed_in: bool) -> String {
    let note = note
        .map(|n| format!("<p class=\"note\" id=\"note\">{}</p>", esc(n)))
        .unwrap_or_default();
    let logout = if signed_in {
        "<form method=\"post\" action=\"/logout\" class=\"logout\"><button type=\"submit\" id=\"logout\">Log out</button></form>"
    } else {
        ""
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{t} · personad</title><link rel=\"stylesheet\" href=\"/style.css\"></head><body><header><strong>personad</strong><nav><a href=\"/\">Personas</a><a href=\"/drafts\">Drafts</a><a href=\"/usage\">Usage</a><a href=\"/incidents\">Incidents</a></nav>{logout}</header><main><h1>{t}</h1>{note}{body}</main></body></html>",
        t = esc(title)
    )
}

/// A form posting `op` (and its fields, and the CSRF token) to `/action`, back to `back`,
/// around `inner` (its visible controls); `class` styles the form.
fn form(
    csrf: &str,
    op: &str,
    fields: &[(&str, &str)],
    back: &str,
    class: &str,
    inner: &str,
) -> String {
    let mut hidden = String::new();
    for (k, v) in [("csrf", csrf), ("op", op), ("back", back)]
        .iter()
        .chain(fields)
    {
        let _ = write!(
            hidden,
            "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
            esc(k),
            esc(v)
        );
    }
    format!("<form method=\"post\" action=\"/action\"{class}>{hidden}{inner}</form>")
}

/// A one-button form posting `op` (and its fields) to `/action`, back to `back`.
pub(crate) fn button(
    csrf: &str,
    op: &str,
    fields: &[(&str, &str)],
    label: &str,
    back: &str,
) -> String {
    let inner = format!(
        "<button type=\"submit\" name=\"do\" value=\"{}\">{}</button>",
        esc(op),
        esc(label)
    );
    form(csrf, op, fields, back, " class=\"inline\"", &inner)
}

/// The personas page.
pub(crate) fn personas(agents: &[AgentView], csrf: &str, note: Option<&str>) -> String {
    let mut rows = String::new();
    for a in agents {
        let status = match (&a.paused, a.paused_chats) {
            (Some(until), _) => format!("paused {}", esc(until)),
            (None, 0) => "up".into(),
            (None, n) => format!("up ({n} chat(s) paused)"),
        };
        let activity = esc(&a.now);
        let toggle = if a.paused.is_some() {
            button(csrf, "resume", &[("agent", &a.name)], "Resume", "/")
        } else {
            button(csrf, "pause", &[("agent", &a.name)], "Pause", "/")
        };
        let _ = write!(
            rows,
            "<tr data-agent=\"{n}\"><td><a href=\"/agent/{u}\">{n}</a></td><td class=\"status\">{status}</td><td>{mode}</td><td>{activity}</td><td>{plans}</td><td>{today}</td><td>{toggle}</td></tr>",
            n = esc(&a.name),
            u = encode(&a.name),
            mode = esc(&a.mode),
            plans = a.plans,
            today = esc(a.today.as_deref().unwrap_or("no LLM use today")),
        );
    }
    layout(
        "Personas",
        note,
        &format!(
            "<table><thead><tr><th>Persona</th><th>Status</th><th>Group mode</th><th>Now</th><th>Plans</th><th>Today</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
        ),
    )
}

/// A persona's chats (those seen since the start and those with a plan under way), each with
/// its last message (`last`, by chat id), whether it waits for the persona, and its plan.
pub(crate) fn chats(
    agent: &str,
    known: &[(crate::core::model::ChatId, String)],
    last: &BTreeMap<i64, Message>,
    plans: &[TaskGraph],
    note: Option<&str>,
) -> String {
    let ids: BTreeMap<i64, String> = known.iter().map(|(id, t)| (id.0, t.clone())).collect();
    let mut rows = String::new();
    for (id, title) in &ids {
        let plan = plans
            .iter()
            .find(|g| g.chat.id.0 == *id)
            .map_or_else(|| "none".to_string(), plan_state);
        let (said, waiting) = match last.get(id) {
            Some(m) => {
                let text: String = m.text.chars().take(80).collect();
                let waiting = if m.outgoing {
                    "answered"
                } else {
                    "waits for us"
                };
                (format!("{}: {text}", m.sender.name), waiting)
            }
            None => (String::new(), ""),
        };
        let _ = write!(
            rows,
            "<tr><td><a class=\"chat\" href=\"/agent/{a}/chat/{id}\">{t}</a></td><td>{s}</td><td>{waiting}</td><td>{p}</td></tr>",
            a = encode(agent),
            t = esc(title),
            s = esc(&said),
            p = esc(&plan),
        );
    }
    if rows.is_empty() {
        rows = "<tr><td colspan=\"4\">No chat yet.</td></tr>".into();
    }
    layout(
        agent,
        note,
        &format!(
            "<table><thead><tr><th>Chat</th><th>Last message</th><th></th><th>Plan</th></tr></thead><tbody>{rows}</tbody></table>"
        ),
    )
}

/// What a plan is doing, in a few words.
fn plan_state(g: &TaskGraph) -> String {
    let open: Vec<String> = g
        .tasks
        .iter()
        .filter(|t| t.status != crate::core::graph::TaskStatus::Done)
        .map(|t| format!("{} {}", t.kind(), t.status.as_str()))
        .collect();
    if open.is_empty() {
        "finished".into()
    } else {
        open.join(", ")
    }
}

/// One conversation: its messages (with media descriptions where the planner has them), the
/// pending plan task by task, and the chat's controls.
pub(crate) fn conversation(
    agent: &str,
    chat: &Chat,
    messages: &[Message],
    plan: Option<&TaskGraph>,
    paused: bool,
    csrf: &str,
    note: Option<&str>,
) -> String {
    let mut body = String::from("<ol class=\"history\">");
    for m in messages {
        let media = match m.media.as_ref() {
            // A voice note plays here (no script: the browser's own player).
            Some(x) if x.kind == crate::core::model::MediaKind::Voice => format!(
                " <span class=\"media\">[voice{}]</span> <audio controls preload=\"none\" src=\"/agent/{}/chat/{}/voice/{}\"></audio>",
                x.duration_secs
                    .map(|d| format!(", {d} s"))
                    .unwrap_or_default(),
                encode(agent),
                chat.id.0,
                m.id.0
            ),
            Some(x) => format!(" <span class=\"media\">[{}]</span>", esc(x.kind.as_str())),
            None => String::new(),
        };
        let _ = write!(
            body,
            "<li class=\"{cls}\"><span class=\"who\">{who}</span> <span class=\"when\">{when}</span><div class=\"text\">{text}{media}</div></li>",
            cls = if m.outgoing { "ours" } else { "theirs" },
            who = esc(&m.sender.name),
            when = m.date.strftime("%Y-%m-%d %H:%M"),
            text = esc(&m.text),
        );
    }
    body.push_str("</ol><h2>Plan</h2>");
    match plan {
        Some(g) => {
            body.push_str("<table class=\"plan\"><thead><tr><th>Task</th><th>Kind</th><th>Status</th><th>Not before</th><th>Details</th></tr></thead><tbody>");
            for t in &g.tasks {
                let details = serde_json::to_string(&t.spec).unwrap_or_default();
                let _ = write!(
                    body,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                    esc(&t.id),
                    t.kind(),
                    t.status.as_str(),
                    t.not_before.map(|n| n.to_string()).unwrap_or_default(),
                    esc(&details)
                );
            }
            body.push_str("</tbody></table>");
        }
        None => body.push_str("<p>No plan under way.</p>"),
    }
    let id = chat.id.0.to_string();
    let back = format!("/agent/{}/chat/{id}", encode(agent));
    let fields = [("agent", agent), ("chat", id.as_str())];
    body.push_str("<p class=\"controls\">");
    body.push_str(&button(csrf, "forget", &fields, "Forget the plan", &back));
    body.push_str(&if paused {
        button(csrf, "resume", &fields, "Resume this chat", &back)
    } else {
        button(csrf, "pause", &fields, "Pause this chat", &back)
    });
    body.push_str("</p>");
    if !chat.kind.is_direct() {
        body.push_str("<p class=\"controls\">Group mode: ");
        for mode in ["strict", "smart", "talkative"] {
            let with_mode = [("agent", agent), ("chat", id.as_str()), ("mode", mode)];
            body.push_str(&button(csrf, "mode", &with_mode, mode, &back));
        }
        body.push_str("</p>");
    }
    layout(&format!("{agent}: {}", chat.title), note, &body)
}

/// Drafts waiting for the owner, each with approve, edit (approve with this text) and reject.
pub(crate) fn drafts(list: &[DraftView], csrf: &str, note: Option<&str>) -> String {
    let mut body = String::new();
    if list.is_empty() {
        body.push_str("<p id=\"no-drafts\">No draft waits.</p>");
    }
    for d in list {
        let fields = [("agent", d.agent.as_str()), ("id", d.id.as_str())];
        let edit = form(
            csrf,
            "approve",
            &fields,
            "/drafts",
            "",
            "<textarea name=\"text\" rows=\"2\" placeholder=\"Send this instead\"></textarea><button type=\"submit\">Send my text</button>",
        );
        let _ = write!(
            body,
            "<section class=\"draft\" data-draft=\"{id}\"><h2>{agent} in <a href=\"/agent/{ua}/chat/{chat}\">{title}</a></h2><pre>{text}</pre>{approve}{edit}{reject}</section>",
            id = esc(&d.id),
            agent = esc(&d.agent),
            ua = encode(&d.agent),
            chat = d.chat.0,
            title = esc(&d.title),
            text = esc(&d.text),
            approve = button(csrf, "approve", &fields, "Approve", "/drafts"),
            reject = button(csrf, "reject", &fields, "Reject", "/drafts"),
        );
    }
    layout("Drafts", note, &body)
}

/// Usage per persona and day: an inline SVG bar chart of tokens, and a table with the
/// estimated cost (built-in prices).
pub(crate) fn usage(rows: &[UsageRow]) -> String {
    let prices = PriceTable::builtin();
    // (day, agent) → (tokens, cost, unpriced)
    let mut by: BTreeMap<(String, String), (u64, f64, bool)> = BTreeMap::new();
    for r in rows {
        let e = by.entry((r.day.clone(), r.agent.clone())).or_default();
        e.0 += r.prompt_tokens + r.output_tokens;
        match prices.cost(r) {
            Some(c) => e.1 += c,
            None => e.2 = true,
        }
    }
    let days: Vec<String> = {
        let mut d: Vec<String> = by.keys().map(|(d, _)| d.clone()).collect();
        d.dedup();
        d.into_iter().rev().take(14).rev().collect()
    };
    let agents: Vec<String> = {
        let mut a: Vec<String> = by.keys().map(|(_, a)| a.clone()).collect();
        a.sort();
        a.dedup();
        a
    };
    let max = by.values().map(|v| v.0).max().unwrap_or(0).max(1);
    let (w, h, pad) = (720.0_f64, 240.0_f64, 30.0_f64);
    let group = (w - pad) / days.len().max(1) as f64;
    let bar = (group * 0.8 / agents.len().max(1) as f64).max(2.0);
    let palette = [
        "#3b6ea5", "#c0504d", "#9bbb59", "#8064a2", "#f79646", "#4bacc6",
    ];
    let mut svg = format!(
        "<svg id=\"usage-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" role=\"img\" aria-label=\"Tokens per persona and day\"><line x1=\"{pad}\" y1=\"{h}\" x2=\"{w}\" y2=\"{h}\" stroke=\"#888\"/>",
        h + 40.0
    );
    for (i, day) in days.iter().enumerate() {
        let x0 = pad + i as f64 * group;
        for (j, agent) in agents.iter().enumerate() {
            let tokens = by.get(&(day.clone(), agent.clone())).map_or(0, |v| v.0);
            let bh = (tokens as f64 / max as f64) * (h - 10.0);
            let _ = write!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{} {}: {tokens} tokens</title></rect>",
                x0 + j as f64 * bar,
                h - bh,
                palette[j % palette.len()],
                esc(agent),
                esc(day)
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" font-size=\"10\">{}</text>",
            x0,
            h + 14.0,
            esc(day.get(5..).unwrap_or(day))
        );
    }
    for (j, agent) in agents.iter().enumerate() {
        let _ = write!(
            svg,
            "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" font-size=\"11\">{}</text>",
            pad + j as f64 * 120.0,
            h + 24.0,
            palette[j % palette.len()],
            pad + j as f64 * 120.0 + 14.0,
            h + 33.0,
            esc(agent)
        );
    }
    svg.push_str("</svg>");
    let mut table = String::from(
        "<table><thead><tr><th>Day</th><th>Persona</th><th>Tokens</th><th>Estimated cost</th></tr></thead><tbody>",
    );
    for ((day, agent), (tokens, cost, unpriced)) in by.iter().rev() {
        let cost = if *unpriced {
            "unknown (a model without a built-in price)".to_string()
        } else {
            format!("${cost:.4}")
        };
        let _ = write!(
            table,
            "<tr><td>{}</td><td>{}</td><td>{tokens}</td><td>{cost}</td></tr>",
            esc(day),
            esc(agent)
        );
    }
    table.push_str("</tbody></table>");
    let body = if by.is_empty() {
        "<p>No LLM use recorded yet.</p>".to_string()
    } else {
        format!("{svg}{table}")
    };
    layout("Usage", None, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_text_is_escaped_everywhere() {
        assert_eq!(esc("<b a=\"1\">&'"), "&lt;b a=&quot;1&quot;&gt;&amp;&#39;");
        let b = button("t\"", "pause", &[("agent", "<x>")], "P", "/");
        assert!(
            b.contains("value=\"t&quot;\"") && b.contains("&lt;x&gt;"),
            "{b}"
        );
        let page = layout("<script>", Some("<i>"), "");
        assert!(
            !page.contains("<script>") && !page.contains("<i>"),
            "{page}"
        );
    }

    #[test]
    fn the_usage_chart_draws_a_bar_per_persona_and_day() {
        let row = |agent: &str, day: &str, t: u64| UsageRow {
            agent: agent.into(),
            model: "gemini-flash-latest".into(),
            kind: crate::core::call_kind::CallKind::Plan,
            day: day.into(),
            requests: 1,
            prompt_tokens: t,
            cached_tokens: 0,
            output_tokens: 0,
            discarded: 0,
            characters: 0,
            bytes: 0,
        };
        let page = usage(&[
            row("Ann", "2026-11-25", 1000),
            row("Bo", "2026-11-25", 500),
            row("Ann", "2026-11-26", 2000),
        ]);
        assert!(page.contains("<svg id=\"usage-chart\""));
        assert_eq!(
            page.matches("<rect x=").count(),
            4 + 2,
            "4 bars and 2 legend keys"
        );
        assert!(page.contains("Ann 2026-11-26: 2000 tokens"));
        assert!(page.contains("$0.0006"), "{page}");
    }
}
