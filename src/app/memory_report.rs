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

/// Which scopes `who` selects: everything (`None`); a number (a person, and a chat's notes and
/// plans, with that id); `intentions`; a name or `@name` (the people whose file is titled with
/// it).
fn selected(scope: FactScope, file: &FactFile, who: Option<&str>) -> bool {
    let Some(who) = who.map(|w| w.trim().trim_start_matches('@')) else {
        return true;
    };
    if let Ok(id) = who.parse::<i64>() {
        return matches!(scope, FactScope::Person(p) if p == id)
            || matches!(scope, FactScope::Chat(c) | FactScope::Plans(c) if c == ChatId(id));
    }
    if who.eq_ignore_ascii_case("intentions") {
        return scope == FactScope::Intentions;
    }
    matches!(scope, FactScope::Person(_)) && file.title.to_lowercase().contains(&who.to_lowercase())
}

/// One scope of an agent's memory as read: its title and facts, or why it did not read.
#[derive(Debug)]
pub(crate) struct ScopeView {
    pub(crate) scope: FactScope,
    pub(crate) file: Result<FactFile, FactError>,
}

/// One chat's summaries as read, or why they did not read.
#[derive(Debug)]
pub(crate) struct SummariesView {
    pub(crate) chat: ChatId,
    pub(crate) file: Result<crate::core::summaries::SummaryFile, FactError>,
}

/// What an agent keeps: its persona's own facts (the owner's text), each person and chat
/// scope, and each chat's summaries. Read through the memory port (blocking); the text report
/// and the console's memory page both show it.
#[derive(Debug, Default)]
pub(crate) struct MemoryView {
    pub(crate) persona: String,
    pub(crate) scopes: Vec<ScopeView>,
    pub(crate) summaries: Vec<SummariesView>,
}

/// Reads the agent's memory (blocking).
pub(crate) fn read(facts: &dyn FactStore, agent: &str) -> Result<MemoryView, FactError> {
    let persona = facts.persona_text(agent)?;
    let scopes = facts
        .scopes(agent)?
        .into_iter()
        .map(|scope| ScopeView {
            scope,
            file: facts.read(agent, scope),
        })
        .collect();
    let summaries = facts
        .summary_chats(agent)?
        .into_iter()
        .map(|chat| SummariesView {
            chat,
            file: facts.summaries(agent, chat),
        })
        .collect();
    Ok(MemoryView {
        persona,
        scopes,
        summaries,
    })
}

/// Where a fact came from, in words: when, in which chat, from which message.
pub(crate) fn fact_origin(f: &crate::core::facts::Fact) -> Vec<String> {
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
    from
}

/// The agent's memory as text: the persona's own facts, then each person and chat scope
/// `who` selects, fact by fact with its id, time, chat and message.
pub(crate) fn report(
    facts: &dyn FactStore,
    agent: &str,
    who: Option<&str>,
) -> Result<String, FactError> {
    let view = read(facts, agent)?;
    let mut out = String::new();
    if who.is_none() && !view.persona.trim().is_empty() {
        let _ = writeln!(out, "{agent} (persona.md):\n{}\n", view.persona.trim());
    }
    let mut shown = 0;
    for ScopeView { scope, file } in &view.scopes {
        let file = match file {
            Ok(f) => f,
            Err(e) => {
                let _ = writeln!(out, "{scope}: unreadable: {e}\n");
                continue;
            }
        };
        if !selected(*scope, file, who) || file.facts.is_empty() {
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
            let from = fact_origin(f);
            let _ = writeln!(out, "  [{}] {}", f.id, f.text);
            if !from.is_empty() {
                let _ = writeln!(out, "      {}", from.join(" · "));
            }
        }
        out.push('\n');
    }
    let wanted_chat = who.and_then(|w| w.trim().parse::<i64>().ok());
    for SummariesView { chat, file } in &view.summaries {
        if who.is_some() && wanted_chat != Some(chat.0) {
            continue;
        }
        let file = match file {
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

/// Whether `sel` names the fact `id`: the whole id, or (4 characters or more) the start of
/// it or of the part after its `fact-`/`note-` prefix, as drafts take a short id.
fn names_fact(id: &str, sel: &str) -> bool {
    let tail = id
        .strip_prefix("fact-")
        .or_else(|| id.strip_prefix("note-"))
        .or_else(|| id.strip_prefix("intent-"))
        .or_else(|| id.strip_prefix("plan-"))
        .unwrap_or(id);
    id == sel || (sel.chars().count() >= 4 && (id.starts_with(sel) || tail.starts_with(sel)))
}

/// A short fact id that is the start of several facts' ids.
#[derive(Debug, thiserror::Error)]
#[error("[{sel}] matches several facts of {agent}: {matches}; give more of the id")]
pub(crate) struct AmbiguousFact {
    sel: String,
    agent: String,
    matches: String,
}

/// Forgets the fact `sel` names (its id or a unique short id, see [`names_fact`]) in every
/// scope that keeps it; says where it was (and which files could not be read, so could not
/// be searched). `Ok(Err(_))`: `sel` names several facts (they are listed).
pub(crate) fn forget_fact(
    facts: &dyn FactStore,
    agent: &str,
    sel: &str,
    now: Timestamp,
) -> Result<Result<String, AmbiguousFact>, FactError> {
    let sel = crate::core::facts::clean_id(sel);
    let mut lines = Vec::new();
    let mut files = Vec::new();
    for scope in facts.scopes(agent)? {
        match facts.read(agent, scope) {
            Ok(f) => files.push((scope, f)),
            Err(e) => lines.push(format!("{scope}: not searched: {e}")),
        }
    }
    let mut named: Vec<(String, FactScope)> = Vec::new();
    for (scope, file) in &files {
        for f in file.facts.iter().filter(|f| names_fact(&f.id, &sel)) {
            if !named.iter().any(|(id, _)| *id == f.id) {
                named.push((f.id.clone(), *scope));
            }
        }
    }
    // The whole id wins over the facts it is the start of.
    if named.iter().any(|(id, _)| *id == sel) {
        named.retain(|(id, _)| *id == sel);
    }
    let id = match named.as_slice() {
        [] => sel.clone(),
        [(id, _)] => id.clone(),
        many => {
            return Ok(Err(AmbiguousFact {
                sel,
                agent: agent.to_string(),
                matches: many
                    .iter()
                    .map(|(id, scope)| format!("[{id}] ({scope})"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }));
        }
    };
    for (scope, file) in &files {
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
        lines.push(match facts.apply(agent, *scope, &write, &source)? {
            Ok(Applied::Deleted(_)) => format!("{agent}: forgot [{id}] ({scope})"),
            Ok(_) => format!("{agent}: [{id}] was already gone ({scope})"),
            Err(refused) => format!("{agent}: [{id}] not forgotten ({scope}): {refused}"),
        });
    }
    if !lines.iter().any(|l| l.contains(&format!("[{id}]"))) {
        lines.insert(0, format!("{agent} keeps no fact [{id}]"));
    }
    Ok(Ok(lines.join("\n")))
}

/// Why a chat name names no single recorded conversation (`state history`).
#[derive(Debug, thiserror::Error)]
pub enum ChatLookup {
    #[error("no recorded chat of {agent} matches {sel:?} (recorded: {known})")]
    NoMatch {
        agent: String,
        sel: String,
        known: String,
    },
    #[error("{sel:?} matches several chats: {matches}; use the id")]
    Several { sel: String, matches: String },
}

/// Which recorded conversation `sel` names (`state history`), as `ctl` takes a chat: an id,
/// or a title substring (`@name` too), among the transcripts of `agent` (the playground's
/// with `playground`). `Err` says why not: no match (with the chats there are), or several.
pub(crate) fn transcript_chat(
    dir: &crate::adapters::store::StateDir,
    agent: &str,
    sel: &str,
    playground: bool,
) -> Result<ChatId, ChatLookup> {
    let sel = sel.trim();
    if let Ok(id) = sel.parse::<i64>() {
        return Ok(ChatId(id));
    }
    let folder = if playground {
        dir.playground_dir(agent)
    } else {
        dir.memory_dir(agent)
    };
    let mut known: Vec<(i64, String)> = std::fs::read_dir(&folder)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".json")?.parse::<i64>().ok()?;
            let (chat, _) = crate::adapters::memory::read_history(&e.path()).ok()?;
            Some((id, chat.title))
        })
        .collect();
    known.sort();
    let needle = sel.trim_start_matches('@').to_lowercase();
    let matches: Vec<&(i64, String)> = known
        .iter()
        .filter(|(_, t)| t.to_lowercase() == needle)
        .collect();
    let matches = if matches.is_empty() {
        known
            .iter()
            .filter(|(_, t)| t.to_lowercase().contains(&needle))
            .collect()
    } else {
        matches
    };
    let shown = |chats: &[&(i64, String)]| {
        chats
            .iter()
            .map(|(id, t)| format!("{id} ({t})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match matches.as_slice() {
        [(id, _)] => Ok(ChatId(*id)),
        [] => Err(ChatLookup::NoMatch {
            agent: agent.to_string(),
            sel: sel.to_string(),
            known: if known.is_empty() {
                "none".to_string()
            } else {
                shown(&known.iter().collect::<Vec<_>>())
            },
        }),
        many => Err(ChatLookup::Several {
            sel: sel.to_string(),
            matches: shown(many),
        }),
    }
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
