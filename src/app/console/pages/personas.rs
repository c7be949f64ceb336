//! The personas page (`/`): each running persona's health at a glance (up, paused, asleep
//! until its local time, at its spending cap with the spend against it and a Lift button,
//! warnings), then the persona files that do not run: disabled ones and those with problems
//! (file:line).

use std::fmt::Write as _;

use super::{Frame, button, esc, local, local_short, page};
use crate::app::console::http::encode;
use crate::app::ops::controls::AgentView;

/// A persona file that does not run, as the page lists it.
#[derive(Debug, Clone)]
pub(crate) struct FileView {
    /// The file's name in the agents directory.
    pub file: String,
    pub name: Option<String>,
    /// Usable but `# Disabled`.
    pub disabled: bool,
    /// Its errors, each with its line (`file:line: ...`).
    pub problems: Vec<String>,
}

/// The personas page.
pub(crate) fn render(
    f: &Frame<'_>,
    agents: &[AgentView],
    files: &[FileView],
    csrf: &str,
) -> String {
    let mut rows = String::new();
    for a in agents {
        let _ = write!(
            rows,
            "<tr data-agent=\"{n}\"><td data-label=\"Persona\"><a href=\"/agent/{u}\">{n}</a><div class=\"sub\">{time}</div></td><td class=\"status\" data-label=\"Status\">{status}</td><td data-label=\"Now\">{activity}</td><td data-label=\"Spending\">{spend}</td><td data-label=\"Group mode\">{mode}</td><td data-label=\"Plans\">{plans}</td><td data-label=\"\">{toggle}</td></tr>",
            n = esc(&a.name),
            u = encode(&a.name),
            time = esc(&format!(
                "{} {}",
                local_short(f.now, f.now, &a.zone),
                a.zone.iana_name().unwrap_or("UTC")
            )),
            status = status(a, f),
            activity = esc(&a.now),
            spend = spending(a, csrf),
            mode = esc(&a.mode),
            plans = a.plans,
            toggle = if a.paused.is_some() {
                button(csrf, "resume", &[("agent", &a.name)], "Resume", "/")
            } else {
                button(csrf, "pause", &[("agent", &a.name)], "Pause", "/")
            },
        );
    }
    if rows.is_empty() {
        rows = "<tr><td colspan=\"7\">No persona runs.</td></tr>".into();
    }
    let mut body = format!(
        "<table class=\"stack\"><thead><tr><th>Persona</th><th>Status</th><th>Now</th><th>Spending today</th><th>Group mode</th><th>Plans</th><th></th></tr></thead><tbody>{rows}</tbody></table>"
    );
    if !files.is_empty() {
        body.push_str(
            "<h2 id=\"not-running\">Persona files that do not run</h2><ul class=\"files\">",
        );
        for file in files {
            let what = if file.disabled {
                "disabled (<code># Disabled</code>)".to_string()
            } else {
                let mut p = String::from("problems:<ul>");
                for problem in &file.problems {
                    let _ = write!(p, "<li><code>{}</code></li>", esc(problem));
                }
                p.push_str("</ul>");
                p
            };
            let _ = write!(
                body,
                "<li data-file=\"{f}\"><strong>{f}</strong>{name}: {what}</li>",
                f = esc(&file.file),
                name = file
                    .name
                    .as_deref()
                    .map(|n| format!(" ({})", esc(n)))
                    .unwrap_or_default(),
            );
        }
        body.push_str("</ul>");
    }
    page(f, &body)
}

/// The status cell: paused, asleep, at its cap, up; and warnings.
fn status(a: &AgentView, f: &Frame<'_>) -> String {
    let mut parts = Vec::new();
    match &a.paused {
        Some(p) => parts.push(match p.until {
            Some(u) => format!(
                "<span class=\"tag paused\">paused until {}</span>",
                esc(&local(u, &a.zone))
            ),
            None => "<span class=\"tag paused\">paused until resumed</span>".to_string(),
        }),
        None if a.paused_chats > 0 => parts.push(format!(
            "<span class=\"tag up\">up</span> ({} chat(s) paused)",
            a.paused_chats
        )),
        None => {}
    }
    if let Some(wakes) = a.asleep_until {
        parts.push(format!(
            "<span class=\"tag asleep\">asleep</span> until {} (its time)",
            esc(&local_short(wakes, f.now, &a.zone))
        ));
    }
    if a.caps.iter().any(|c| c.holds) {
        parts.push("<span class=\"tag cap\" id=\"at-cap\">at its cap</span>".to_string());
    }
    if parts.is_empty() {
        parts.push("<span class=\"tag up\">up</span>".to_string());
    }
    for w in &a.warnings {
        parts.push(format!("<span class=\"warn\">⚠ {}</span>", esc(w)));
    }
    parts.join("<br>")
}

/// The spending cell: today's use, each cap with the spend against it, a Lift button when one
/// holds.
fn spending(a: &AgentView, csrf: &str) -> String {
    let mut out = esc(a.today.as_deref().unwrap_or("no LLM use today"));
    for c in &a.caps {
        let state = if c.holds {
            "reached: planning waits for the next UTC day"
        } else if c.lifted {
            "reached, lifted by the owner"
        } else if c.warned {
            "past 80%"
        } else {
            "under"
        };
        let _ = write!(
            out,
            "<div class=\"cap\">{} {}: {} spent, {}</div>",
            esc(c.whose),
            esc(&c.cap),
            esc(&c.spent),
            state
        );
    }
    if a.caps.iter().any(|c| c.holds) {
        out.push_str(&button(
            csrf,
            "lift",
            &[("agent", &a.name)],
            "Lift the cap for today",
            "/",
        ));
    }
    out
}
