//! A conversation page (`/agent/<name>/chat/<id>`): its messages in the persona's local time
//! (a voice note plays in the browser's own player), the plan as readable steps ("in 2 min:
//! send “Sure…”", "then wait 3 s"), a waiting draft with Approve, Edit (a form holding the
//! draft's text) and Reject and when it expires, and the chat's controls: forget the plan,
//! pause or resume, and a group's mode with the one in force marked.

use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use super::{Frame, button, esc, local_short, page, secs_until, short, span};
use crate::app::console::http::encode;
use crate::app::ops::controls::DraftView;
use crate::core::graph::{Task, TaskGraph, TaskSpec, TaskStatus};
use crate::core::model::{Chat, Message};

/// What the page shows besides the messages.
pub(crate) struct ChatState<'a> {
    pub plan: Option<&'a TaskGraph>,
    pub drafts: &'a [DraftView],
    pub paused: bool,
    /// A group's trigger mode in force.
    pub mode: Option<String>,
}

/// The conversation page.
pub(crate) fn render(
    f: &Frame<'_>,
    agent: &str,
    tz: &TimeZone,
    chat: &Chat,
    messages: &[Message],
    state: &ChatState<'_>,
    csrf: &str,
) -> String {
    let mut body = format!(
        "<p class=\"sub\"><a href=\"/agent/{}\">← {}'s chats</a></p><ol class=\"history\">",
        encode(agent),
        esc(agent)
    );
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
            when = esc(&local_short(m.date, f.now, tz)),
            text = esc(&m.text),
        );
    }
    body.push_str("</ol>");
    let id = chat.id.0.to_string();
    let back = format!("/agent/{}/chat/{id}", encode(agent));
    for d in state.drafts {
        body.push_str(&draft_box(d, f.now, tz, csrf, &back, false));
    }
    body.push_str("<h2>Plan</h2>");
    match state.plan {
        Some(g) => body.push_str(&steps(g, f.now, tz)),
        None => body.push_str("<p id=\"no-plan\">No plan under way.</p>"),
    }
    let fields = [("agent", agent), ("chat", id.as_str())];
    body.push_str("<p class=\"controls\">");
    body.push_str(&button(csrf, "forget", &fields, "Forget the plan", &back));
    body.push_str(&if state.paused {
        button(csrf, "resume", &fields, "Resume this chat", &back)
    } else {
        button(csrf, "pause", &fields, "Pause this chat", &back)
    });
    body.push_str("</p>");
    if let Some(current) = &state.mode {
        let _ = write!(
            body,
            "<p class=\"controls modes\" id=\"modes\">Group mode: <strong id=\"mode\">{}</strong> ",
            esc(current)
        );
        for mode in ["strict", "smart", "talkative"] {
            let with_mode = [("agent", agent), ("chat", id.as_str()), ("mode", mode)];
            let label = if mode == current {
                format!("{mode} ✓")
            } else {
                mode.to_string()
            };
            let b = button(csrf, "mode", &with_mode, &label, &back);
            if mode == current {
                let _ = write!(body, "<span class=\"on\" aria-current=\"true\">{b}</span>");
            } else {
                body.push_str(&b);
            }
        }
        body.push_str("</p>");
    }
    page(f, &body)
}

/// A waiting draft: its text, when it expires and what happens then, and Approve, Edit (a
/// form holding its text) and Reject; `link` adds where it is (the drafts page).
pub(crate) fn draft_box(
    d: &DraftView,
    now: Timestamp,
    tz: &TimeZone,
    csrf: &str,
    back: &str,
    link: bool,
) -> String {
    let fields = [("agent", d.agent.as_str()), ("id", d.id.as_str())];
    let then = if d.sends_on_timeout {
        "then it is sent as drafted"
    } else {
        "then the plan is dropped"
    };
    let expiry = match d.waits_until {
        Some(at) => format!(
            "Expires at {} its time (in {}); {then}.",
            local_short(at, now, tz),
            span(secs_until(now, at))
        ),
        None => "Being posted to the owner.".to_string(),
    };
    let edit = super::form(
        csrf,
        "approve",
        &fields,
        back,
        " class=\"edit\"",
        &format!(
            "<label>Edit, then send <textarea name=\"text\" rows=\"3\">{}</textarea></label><button type=\"submit\" class=\"send-edit\">Send this text</button>",
            esc(&d.sends)
        ),
    );
    let place = if link {
        format!(
            "<h2>{} in <a href=\"/agent/{}/chat/{}\">{}</a></h2>",
            esc(&d.agent),
            encode(&d.agent),
            d.chat.0,
            esc(&d.title)
        )
    } else {
        "<h2>Draft waiting</h2>".to_string()
    };
    format!(
        "<section class=\"draft\" data-draft=\"{id}\">{place}<pre>{text}</pre><p class=\"sub expiry\">{expiry}</p><div class=\"controls\">{approve}{reject}</div>{edit}</section>",
        id = esc(&d.id),
        text = esc(&d.text),
        expiry = esc(&expiry),
        approve = button(csrf, "approve", &fields, "Approve", back),
        reject = button(csrf, "reject", &fields, "Reject", back),
    )
}

/// The plan as steps in words, each open one with when it runs.
pub(crate) fn steps(g: &TaskGraph, now: Timestamp, tz: &TimeZone) -> String {
    let done = g
        .tasks
        .iter()
        .filter(|t| t.status == TaskStatus::Done)
        .count();
    let mut out = String::from("<ol class=\"plan\" id=\"plan\">");
    let mut first = true;
    for t in g.tasks.iter().filter(|t| t.status != TaskStatus::Done) {
        let waits_for_owner = matches!(
            t.spec,
            TaskSpec::Draft {
                posted: Some(_),
                decision: None,
                ..
            }
        );
        let when = match (t.status, t.not_before) {
            (TaskStatus::Active, _) => "now: ".to_string(),
            (_, Some(at)) if waits_for_owner => format!(
                "now, until {} ({}): ",
                local_short(at, now, tz),
                span(secs_until(now, at))
            ),
            (TaskStatus::Failed, _) => "failed: ".to_string(),
            (_, Some(at)) if secs_until(now, at) >= 1.0 => format!(
                "in {} ({}): ",
                span(secs_until(now, at)),
                local_short(at, now, tz)
            ),
            _ if first => "next: ".to_string(),
            _ => "then ".to_string(),
        };
        first = false;
        let retry = match (&t.last_error, t.attempts) {
            (Some(e), n) if n > 0 => format!(
                " <span class=\"warn\">(tried {n} time(s): {})</span>",
                esc(&short(e, 120))
            ),
            _ => String::new(),
        };
        let _ = write!(out, "<li>{}{}{retry}</li>", esc(&when), esc(&step(t)));
    }
    out.push_str("</ol>");
    if done > 0 {
        let _ = write!(out, "<p class=\"sub\">{done} step(s) done.</p>");
    }
    out
}

/// One step in words.
pub(crate) fn step(t: &Task) -> String {
    let quote = |s: &str| format!("“{}”", short(s, 60));
    match &t.spec {
        TaskSpec::Received { intent, .. } => match intent {
            Some(_) => "act on a scheduled intent".into(),
            None => "read the new message(s) and plan an answer".into(),
        },
        TaskSpec::Classify { .. } => "decide whether the group message is for it".into(),
        TaskSpec::Send { text, .. } => format!("send {}", quote(text)),
        TaskSpec::Sticker { name, .. } => format!("send a sticker ({name})"),
        TaskSpec::Voice { text, .. } => format!("send a voice note {}", quote(text)),
        TaskSpec::XSend { target, intent } => {
            format!("leave a note for chat {target}: {}", quote(intent))
        }
        TaskSpec::Wait {
            delay_secs,
            typing,
            recording,
            ..
        } => {
            let how = if *typing {
                ", typing"
            } else if *recording {
                ", recording a voice note"
            } else {
                ""
            };
            format!("wait {}{how}", span(*delay_secs))
        }
        TaskSpec::React { emoji, .. } => format!("react {emoji}"),
        TaskSpec::Block => "block the chat".into(),
        TaskSpec::Unblock => "unblock the chat".into(),
        TaskSpec::ClearConversation => "clear the conversation".into(),
        TaskSpec::Shutdown { .. } => "stop the daemon".into(),
        TaskSpec::Remember {
            name,
            about,
            content,
            ..
        } => {
            let who = name.clone().unwrap_or_else(|| about.to_string());
            if content.is_empty() {
                format!("forget a fact about {who}")
            } else {
                format!("remember about {who}: {}", quote(content))
            }
        }
        TaskSpec::Summarize => "summarize the conversation so far".into(),
        TaskSpec::Intent { .. } => "change its scheduled intents".into(),
        TaskSpec::Schedule { date } => format!("plan its day {date}"),
        TaskSpec::Presence { online } => {
            if *online {
                "show itself online".into()
            } else {
                "go offline".into()
            }
        }
        TaskSpec::Draft { decision, .. } => match decision {
            Some(_) => "carry out the owner's answer to the draft".into(),
            None => "wait for the owner's answer to the draft (above)".into(),
        },
        TaskSpec::Note { content, .. } => format!("note about the chat: {}", quote(content)),
        TaskSpec::Intend { id, content } => commitment("an intention", id.as_deref(), content),
        TaskSpec::ChatPlan { id, content } => commitment("a plan", id.as_deref(), content),
        TaskSpec::EditSchedule { edits } => format!("change its day ({} change(s))", edits.len()),
        TaskSpec::SendMedia { unique_id, .. } => format!("send album item {unique_id}"),
        TaskSpec::Retrieve { urls } => format!("look up {}", urls.join(", ")),
    }
}

/// An `intend` or `plan` step in words (`what` with its article).
fn commitment(what: &str, id: Option<&str>, content: &str) -> String {
    match (id, content.trim().is_empty()) {
        (Some(id), true) => format!("drop {id}"),
        (_, _) => format!("keep {what}: “{}”", short(content, 60)),
    }
}
