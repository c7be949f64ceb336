//! The operator's view of long-term memory, shared by `personad state memory` and the owner
//! commands `/memory` and `/forget-fact`: what an agent keeps, scope by scope, with where
//! each fact came from; and forgetting one fact by its id. Reads and writes through the
//! memory port only. Also `personad state history`: a conversation as the in-memory backend
//! recorded it, with the cached media descriptions.

use std::fmt::Write as _;

use jiff::Timestamp;

use crate::core::facts::{Applied, FactFile, FactScope, FactWrite, Source};
use crate::core::model::ChatId;
use crate::ports::facts::{FactError, FactStore};

/// Which scopes `who` selects: everything (`None`); a number (a person and a chat with that
/// id); a name or `@name` (the people whose file is titled with it).
fn selected(scope: FactScope, file: &FactFile, who: Option<&str>) -> bool {
    let Some(who) = who.map(|w| w.trim().trim_start_matches('@')) else {
        return true;
    };
    if let Ok(id) = who.parse::<i64>() {
        return matches!(scope, FactScope::Person(p) if p == id)
            || matches!(scope, FactScope::Chat(c) if c == ChatId(id));
    }
    matches!(scope, FactScope::Person(_)) && file.title.to_lowercase().contains(&who.to_lowercase())
}

/// The agent's memory as text: the persona's own facts, then each person and chat scope
/// `who` selects, fact by fact with its id, time, chat and message.
pub(crate) fn report(
    facts: &dyn FactStore,
    agent: &str,
    who: Option<&str>,
) -> Result<String, FactError> {
    let mut out = String::new();
    if who.is_none() {
        let own = facts.persona_text(agent)?;
        if !own.trim().is_empty() {
            let _ = writeln!(out, "{agent} (persona.md):\n{}\n", own.trim());
        }
    }
    let mut shown = 0;
    for scope in facts.scopes(agent)? {
        let file = match facts.read(agent, scope) {
            Ok(f) => f,
            Err(e) => {
                let _ = writeln!(out, "{scope}: unreadable: {e}\n");
                continue;
            }
        };
        if !selected(scope, &file, who) || file.facts.is_empty() {
            continue;
        }
        shown += 1;
        let title = if file.title.is_empty() {
            scope.to_string()
        } else {
            format!("{} ({scope})", file.title)
        };
        let _ = writeln!(out, "{title}:");
        for f in &file.facts {
            let mut from = Vec::new();
            if let Some(t) = f.created {
                from.push(t.strftime("%Y-%m-%d %H:%M UTC").to_string());
            }
            if let Some(c) = f.chat {
                from.push(format!("chat {c}"));
            }
            if let Some(m) = f.message {
                from.push(format!("message {m}"));
            }
            let _ = writeln!(out, "  [{}] {}", f.id, f.text);
            if !from.is_empty() {
                let _ = writeln!(out, "      {}", from.join(" · "));
            }
        }
        out.push('\n');
    }
    let wanted_chat = who.and_then(|w| w.trim().parse::<i64>().ok());
    for chat in facts.summary_chats(agent)? {
        if who.is_some() && wanted_chat != Some(chat.0) {
            continue;
        }
        let file = match facts.summaries(agent, chat) {
            Ok(f) => f,
            Err(e) => {
                let _ = writeln!(out, "summaries of chat {chat}: unreadable: {e}\n");
                continue;
            }
        };
        shown += 1;
        let _ = writeln!(out, "Summaries of chat {chat}:");
        for sm in &file.summaries {
            let _ = writeln!(out, "  messages {}–{}: {}", sm.first, sm.last, sm.text);
        }
        if let Some(w) = file.watermark {
            let _ = writeln!(out, "  (history starts after message {w})");
        }
        if let Some(t) = file.retry_after {
            let _ = writeln!(
                out,
                "  ({} failed call(s); no summary call before {t})",
                file.failures
            );
        }
        out.push('\n');
    }
    if shown == 0 {
        let _ = match who {
            Some(w) => writeln!(out, "{agent} keeps no facts about {w}"),
            None => writeln!(out, "{agent} keeps no facts yet"),
        };
    }
    Ok(out)
}

/// Forgets the fact `id` in every scope that keeps it; says where it was (and which files
/// could not be read, so could not be searched).
pub(crate) fn forget_fact(
    facts: &dyn FactStore,
    agent: &str,
    id: &str,
    now: Timestamp,
) -> Result<String, FactError> {
    let id = crate::core::facts::clean_id(id);
    let mut lines = Vec::new();
    for scope in facts.scopes(agent)? {
        let file = match facts.read(agent, scope) {
            Ok(f) => f,
            Err(e) => {
                lines.push(format!("{scope}: not searched: {e}"));
                continue;
            }
        };
        if !file.facts.iter().any(|f| f.id == id) {
            continue;
        }
        let source = Source {
            task: format!("owner-{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff),
            name: None,
            chat: ChatId(0),
            message: None,
            at: now,
        };
        let write = FactWrite {
            id: Some(id.clone()),
            content: String::new(),
        };
        lines.push(match facts.apply(agent, scope, &write, &source)? {
            Ok(Applied::Deleted(_)) => format!("{agent}: forgot [{id}] ({scope})"),
            Ok(_) => format!("{agent}: [{id}] was already gone ({scope})"),
            Err(refused) => format!("{agent}: [{id}] not forgotten ({scope}): {refused}"),
        });
    }
    if !lines.iter().any(|l| l.contains(&format!("[{id}]"))) {
        lines.insert(0, format!("{agent} keeps no fact [{id}]"));
    }
    Ok(lines.join("\n"))
}

/// `personad state history`: the last `last` messages of `chat` as the in-memory backend
/// recorded them (`<agent>/telegram-memory/`, or `<agent>/playground/`), one line each: id,
/// time (UTC), who, text, what it replies to, and the media with its cached description (a
/// voice note as `[voice, <s> s, <file>: <transcript>]`; the persona's own carry their words
/// as their text).
pub(crate) fn history(
    dir: &crate::adapters::store::StateDir,
    agent: &str,
    chat: ChatId,
    last: usize,
    playground: bool,
) -> Result<String, crate::adapters::memory::HistoryError> {
    let folder = if playground {
        dir.playground_dir(agent)
    } else {
        dir.memory_dir(agent)
    };
    let path = crate::adapters::store::layout::transcript_path(&folder, chat);
    let (info, messages) = crate::adapters::memory::read_history(&path)?;
    let mut out = format!(
        "{agent} in chat {} ({}), {} message(s){}:\n",
        info.id,
        info.title,
        messages.len(),
        if messages.len() > last {
            format!(", the last {last}")
        } else {
            String::new()
        }
    );
    for m in messages.iter().skip(messages.len().saturating_sub(last)) {
        let who = if m.outgoing {
            format!("{agent} (persona)")
        } else {
            m.sender.name.clone()
        };
        let _ = write!(
            out,
            "#{} {} {who}: {}",
            m.id,
            m.date.strftime("%Y-%m-%d %H:%M:%S"),
            m.text
        );
        if let Some(r) = m.reply_to {
            let _ = write!(out, " (reply to #{r})");
        }
        if let Some(media) = &m.media {
            let described =
                crate::adapters::store::read_optional(&dir.media_record_path(&media.unique_id))
                    .ok()
                    .flatten()
                    .and_then(|t| serde_json::from_str::<crate::core::media::MediaRecord>(&t).ok())
                    .and_then(|r| r.shown_description().map(str::to_string));
            if media.kind == crate::core::model::MediaKind::Voice {
                // A voice note: its length and file; its words are its text (ours) or its
                // transcript.
                let _ = write!(
                    out,
                    " [voice{}{}{}]",
                    media
                        .duration_secs
                        .map(|d| format!(", {d} s"))
                        .unwrap_or_default(),
                    media
                        .file_name
                        .as_deref()
                        .map(|f| format!(", {f}"))
                        .unwrap_or_default(),
                    described.map(|d| format!(": {d}")).unwrap_or_default()
                );
            } else {
                let _ = write!(
                    out,
                    " [{:?}{}]",
                    media.kind,
                    described.map(|d| format!(": {d}")).unwrap_or_default()
                );
            }
        }
        out.push('\n');
    }
    Ok(out)
}
