//! A persona's schedule page (`/agent/<name>/schedule`): today and tomorrow in its local
//! time, the current activity marked with where the persona stands now (asleep until when),
//! and its scheduled intents; read as `state schedule` reads them.

use std::fmt::Write as _;

use jiff::tz::TimeZone;

use super::{Frame, esc, page, persona_tabs};
use crate::app::ops::controls::ScheduleView;

/// The schedule page.
pub(crate) fn render(f: &Frame<'_>, agent: &str, tz: &TimeZone, view: &ScheduleView) -> String {
    let mut body = persona_tabs(agent, "schedule");
    if !view.has_schedule {
        let _ = write!(
            body,
            "<p id=\"no-schedule\">{} has no <code># Daily Schedule</code>: always available, no schedule is kept.</p>",
            esc(agent)
        );
    }
    for (n, day) in view.days.iter().enumerate() {
        let which = if n == 0 { "Today" } else { "Tomorrow" };
        let _ = write!(
            body,
            "<h2 id=\"day-{n}\">{which}, {} {}</h2><p class=\"sub\">{}</p>",
            day.day.strftime("%A"),
            day.day,
            esc(&day.origin)
        );
        for p in &day.problems {
            let _ = write!(body, "<p class=\"warn\">unreadable: {}</p>", esc(p));
        }
        if let Some(s) = &day.standing {
            let asleep = if s.asleep_until.is_some() {
                ": messages stay unread until then"
            } else {
                ""
            };
            let _ = write!(
                body,
                "<p class=\"now\" id=\"standing\">Now: {}{asleep}</p>",
                esc(&s.line(tz, f.now))
            );
        }
        body.push_str("<table class=\"stack schedule\"><thead><tr><th>When</th><th>Activity</th><th>Responsiveness</th></tr></thead><tbody>");
        for (i, a) in day.activities.iter().enumerate() {
            let current = day.current == Some(i);
            let _ = write!(
                body,
                "<tr{cls}><td data-label=\"When\">{span}</td><td data-label=\"Activity\">{mark}<strong>{name}</strong>{desc}</td><td data-label=\"Responsiveness\">{r}</td></tr>",
                cls = if current {
                    " class=\"current\" id=\"current\""
                } else {
                    ""
                },
                span = esc(&a.span()),
                mark = if current { "▶ now: " } else { "" },
                name = esc(&a.name),
                desc = if a.description.is_empty() {
                    String::new()
                } else {
                    format!(": {}", esc(&a.description))
                },
                r = a.responsiveness,
            );
        }
        body.push_str("</tbody></table>");
    }
    body.push_str("<h2 id=\"intents\">Scheduled intents</h2>");
    match &view.intents {
        Ok(intents) if intents.is_empty() => body.push_str("<p>No scheduled intents.</p>"),
        Ok(intents) => {
            body.push_str("<ul class=\"intents\">");
            for i in intents {
                let _ = write!(
                    body,
                    "<li>{}</li>",
                    esc(&crate::app::presence_report::intent_line(i))
                );
            }
            body.push_str("</ul>");
        }
        Err(problems) => {
            for p in problems {
                let _ = write!(body, "<p class=\"warn\">{}</p>", esc(p));
            }
        }
    }
    page(f, &body)
}
