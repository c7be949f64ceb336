//! The console's pages as HTML strings, rendered by the server: one layout (the navigation
//! with the drafts count, the clock line in UTC and the persona's local time, the self-refresh
//! that the owner can switch off), the forms (each with the CSRF field), and one module per
//! page: `personas`, `persona` (its chats), `schedule`, `memory`, `chat` (a conversation and
//! its plan), `drafts`, `usage`. Pure: every page takes the data it shows, already read.
//! Everything from outside (names, titles, messages, model output) is escaped; no key, session
//! or phone number is ever passed in. No script: links, forms and `<meta http-equiv=refresh>`.

use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;

pub(crate) mod chat;
pub(crate) mod drafts;
pub(crate) mod memory;
pub(crate) mod persona;
pub(crate) mod personas;
pub(crate) mod schedule;
pub(crate) mod usage;

/// How often a page that refreshes itself reloads (seconds).
pub(crate) const REFRESH_SECS: u32 = 20;

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

/// What frames a page: its title and banner, the drafts waiting (the navigation's count),
/// the clock (now, and the persona whose local time is shown), and whether it refreshes.
pub(crate) struct Frame<'a> {
    pub title: &'a str,
    pub note: Option<&'a str>,
    pub drafts: usize,
    pub now: Timestamp,
    /// The persona the page is about, and its zone.
    pub persona: Option<(&'a str, TimeZone)>,
    /// The page's address when it refreshes itself, and whether it does now.
    pub refresh: Option<(&'a str, bool)>,
}

/// The page around `body`, for the owner once logged in (an error page: no clock, no count).
pub(crate) fn layout(title: &str, note: Option<&str>, body: &str) -> String {
    layout_with(title, note, body, true)
}

/// The page around `body`; `signed_in` adds the logout button to the navigation.
pub(crate) fn layout_with(title: &str, note: Option<&str>, body: &str, signed_in: bool) -> String {
    shell(title, note, body, signed_in, "", "Drafts")
}

/// A full page.
pub(crate) fn page(f: &Frame<'_>, body: &str) -> String {
    let mut head = String::new();
    let mut top = String::new();
    let _ = write!(
        top,
        "<p class=\"clock\" id=\"clock\">UTC {}",
        f.now.strftime("%Y-%m-%d %H:%M")
    );
    if let Some((name, tz)) = &f.persona {
        let _ = write!(
            top,
            " · <span id=\"local-time\">{}'s local time {} ({})</span>",
            esc(name),
            local(f.now, tz),
            esc(tz.iana_name().unwrap_or("UTC"))
        );
    }
    if let Some((path, on)) = f.refresh {
        let sep = if path.contains('?') { '&' } else { '?' };
        if on {
            let _ = write!(
                head,
                "<meta http-equiv=\"refresh\" content=\"{REFRESH_SECS}\">"
            );
            let _ = write!(
                top,
                " · refreshes every {REFRESH_SECS} s (<a id=\"refresh-off\" href=\"{}{sep}refresh=off\">stop</a>)",
                esc(path)
            );
        } else {
            let _ = write!(
                top,
                " · <a id=\"refresh-on\" href=\"{}\">refresh every {REFRESH_SECS} s</a>",
                esc(path)
            );
        }
    }
    top.push_str("</p>");
    let drafts = if f.drafts > 0 {
        format!(
            "Drafts <span class=\"count\" id=\"drafts-count\">{}</span>",
            f.drafts
        )
    } else {
        "Drafts".to_string()
    };
    shell(
        f.title,
        f.note,
        &format!("{top}{body}"),
        true,
        &head,
        &drafts,
    )
}

fn shell(
    title: &str,
    note: Option<&str>,
    body: &str,
    signed_in: bool,
    head: &str,
    drafts: &str,
) -> String {
    let note = note
        .map(|n| format!("<p class=\"note\" id=\"note\">{}</p>", esc(n)))
        .unwrap_or_default();
    let logout = if signed_in {
        "<form method=\"post\" action=\"/logout\" class=\"logout\"><button type=\"submit\" id=\"logout\">Log out</button></form>"
    } else {
        ""
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">{head}<title>{t} · personad</title><link rel=\"stylesheet\" href=\"/style.css\"></head><body><header><strong>personad</strong><nav><a href=\"/\">Personas</a><a href=\"/drafts\" id=\"nav-drafts\">{drafts}</a><a href=\"/usage\">Usage</a><a href=\"/incidents\">Incidents</a></nav>{logout}</header><main><h1>{t}</h1>{note}{body}</main></body></html>",
        t = esc(title)
    )
}

/// `t` in `tz`, to the minute.
pub(crate) fn local(t: Timestamp, tz: &TimeZone) -> String {
    t.to_zoned(tz.clone())
        .strftime("%Y-%m-%d %H:%M")
        .to_string()
}

/// `t` in `tz`, the time only when it is `now`'s local day.
pub(crate) fn local_short(t: Timestamp, now: Timestamp, tz: &TimeZone) -> String {
    let (a, b) = (t.to_zoned(tz.clone()), now.to_zoned(tz.clone()));
    if a.date() == b.date() {
        a.strftime("%H:%M").to_string()
    } else {
        a.strftime("%Y-%m-%d %H:%M").to_string()
    }
}

/// A span of seconds in words: `3 s`, `2 min`, `1 h 5 min`, `2 days`.
pub(crate) fn span(secs: f64) -> String {
    if secs < 0.5 {
        return "a moment".to_string();
    }
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min", (s + 30) / 60),
        3600..=86_399 => match (s / 3600, (s % 3600) / 60) {
            (h, 0) => format!("{h} h"),
            (h, m) => format!("{h} h {m} min"),
        },
        _ => format!("{} days", s / 86_400),
    }
}

/// The seconds from `now` to `t` (negative when past).
pub(crate) fn secs_until(now: Timestamp, t: Timestamp) -> f64 {
    t.as_millisecond().saturating_sub(now.as_millisecond()) as f64 / 1000.0
}

/// The first `n` characters of `text`, with `…` when cut.
pub(crate) fn short(text: &str, n: usize) -> String {
    if text.chars().count() > n {
        text.chars().take(n).collect::<String>() + "…"
    } else {
        text.to_string()
    }
}

/// A form posting `op` (and its fields, and the CSRF token) to `/action`, back to `back`,
/// around `inner` (its visible controls); `class` styles the form.
pub(crate) fn form(
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

/// The tabs of a persona's pages, `on` marked.
pub(crate) fn persona_tabs(agent: &str, on: &str) -> String {
    let a = super::http::encode(agent);
    let mut out = String::from("<nav class=\"tabs\">");
    for (key, label, path) in [
        ("chats", "Chats", String::new()),
        ("schedule", "Schedule", "/schedule".to_string()),
        ("memory", "Memory", "/memory".to_string()),
    ] {
        let class = if key == on { " class=\"on\"" } else { "" };
        let _ = write!(out, "<a{class} href=\"/agent/{a}{path}\">{label}</a>");
    }
    out.push_str("</nav>");
    out
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
    fn a_page_shows_utc_and_the_persona_time_and_refreshes_until_told_not_to() {
        let now = Timestamp::from_second(1_800_000_000).unwrap_or_default();
        let tz = TimeZone::get("Asia/Tokyo").unwrap_or(TimeZone::UTC);
        let mut f = Frame {
            title: "T",
            note: None,
            drafts: 3,
            now,
            persona: Some(("Tess", tz)),
            refresh: Some(("/drafts", true)),
        };
        let html = page(&f, "");
        assert!(html.contains("UTC 2027-01-15 08:00"), "{html}");
        assert!(
            html.contains("Tess's local time 2027-01-15 17:00 (Asia/Tokyo)"),
            "{html}"
        );
        assert!(html.contains("http-equiv=\"refresh\""));
        assert!(html.contains("href=\"/drafts?refresh=off\""));
        assert!(html.contains("id=\"drafts-count\">3<"));
        f.refresh = Some(("/drafts", false));
        let html = page(&f, "");
        assert!(!html.contains("http-equiv") && html.contains("id=\"refresh-on\""));
    }

    #[test]
    fn spans_read_as_words() {
        assert_eq!(span(2.6666666666666665), "3 s");
        assert_eq!(span(0.2), "a moment");
        assert_eq!(span(120.0), "2 min");
        assert_eq!(span(3900.0), "1 h 5 min");
        assert_eq!(short("Sure, see you at eight", 4), "Sure…");
    }
}
