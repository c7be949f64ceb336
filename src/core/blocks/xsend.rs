//! `xsend` blocks: a note to the persona's future self in another of its chats, in either
//! form. As a task block the target chat's id, or the name the chat goes by (a person's name,
//! a group's title), follows the heading (or a leading `target_channel_id:` / `target:` line
//! gives it), and the body is the note:
//!
//! ```text
//! # «xsend» 5678
//! Tell Bob that Alice says hello.
//! ```
//!
//! As the original's JSON task: `{"kind": "xsend", "target_channel_id": 5678, "intent": "…"}`.
//! An empty note is allowed (the future self looks at that chat again). Only the syntax is
//! checked here; which chats a note may reach is the scheduler's (`scheduler::xsend`).

use super::memory::json_text;
use super::syntax::{Heading, IdPart};
use super::{ParsedReply, excerpt, warn};
use crate::core::model::{ChatId, ChatRef};
use crate::core::plan::Action;

/// Reads an `xsend` block.
pub(super) fn parse_xsend(out: &mut ParsedReply, label: &str, heading: &Heading<'_>, body: &str) {
    let mut target = match heading.id {
        IdPart::Valid(id) => Some(ChatRef::Id(ChatId(id.0))),
        IdPart::Invalid(raw) => target_of(raw),
        IdPart::Absent => target_of(heading.trailing),
    };
    let mut rest = body.trim();
    while let Some((key, value)) = rest
        .split_once('\n')
        .unwrap_or((rest, ""))
        .0
        .split_once(':')
    {
        let key = key.trim().to_ascii_lowercase();
        if !matches!(key.as_str(), "target_channel_id" | "target" | "intent") {
            break;
        }
        let tail = rest.split_once('\n').map_or("", |(_, t)| t);
        if key == "intent" {
            // The rest of the block is the note, this line's value first.
            let note = format!("{}\n{tail}", value.trim());
            return push(out, label, target, note.trim());
        }
        target = target_of(value);
        rest = tail.trim_start();
    }
    push(out, label, target, rest.trim());
}

/// Reads an `xsend` JSON task.
pub(super) fn parse_json_xsend(
    out: &mut ParsedReply,
    label: &str,
    obj: &serde_json::Map<String, serde_json::Value>,
) {
    let target = match obj.get("target_channel_id").or_else(|| obj.get("target")) {
        Some(serde_json::Value::Number(n)) => match n.as_i64() {
            Some(id) => Some(ChatRef::Id(ChatId(id))),
            None => return bad_target(out, label, &n.to_string()),
        },
        Some(serde_json::Value::String(s)) => target_of(s),
        _ => None,
    };
    let note = json_text(obj, "intent")
        .or_else(|| json_text(obj, "text"))
        .unwrap_or_default();
    push(out, label, target, note.trim());
}

/// A target as written: a chat id, or a name (`@` and quotes taken off; at most
/// [`NAME_CHARS`] characters).
fn target_of(raw: &str) -> Option<ChatRef> {
    let raw = raw.trim();
    if let Ok(id) = raw.parse::<i64>() {
        return Some(ChatRef::Id(ChatId(id)));
    }
    let name = raw
        .trim_start_matches('@')
        .trim_matches(|c| matches!(c, '"' | '\'' | '“' | '”'))
        .trim();
    (!name.is_empty() && name.chars().count() <= NAME_CHARS && !name.contains('\n'))
        .then(|| ChatRef::Name(name.to_owned()))
}

/// Longest chat name a target may give.
const NAME_CHARS: usize = 64;

fn push(out: &mut ParsedReply, label: &str, target: Option<ChatRef>, note: &str) {
    match target.filter(|t| *t != ChatRef::Id(ChatId(0))) {
        Some(target) => out.actions.push(Action::XSend {
            target,
            intent: note.to_owned(),
        }),
        None => warn(out, label, "names no target chat; skipped"),
    }
}

fn bad_target(out: &mut ParsedReply, label: &str, raw: &str) {
    warn(
        out,
        label,
        format_args!("the target chat {} is not a chat id; skipped", excerpt(raw)),
    );
}
