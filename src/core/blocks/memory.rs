//! Memory blocks: `remember` (a fact about a person) and `note` (about this chat), in either
//! form. As a task block, leading `id:` and `about:` lines, then the fact:
//!
//! ```text
//! # «remember»
//! about: 1234
//! Has a younger sister, Sarah, who studies abroad.
//! ```
//!
//! As the original's JSON task: `{"kind": "remember", "id": "…", "content": "…"}` (`about`
//! too). An `id` replaces that fact; an `id` with no content forgets it. In a group `about`
//! may only name the person being answered. `about` must be
//! someone of this chat (a sender of its history, or the other person of a direct chat);
//! without it the fact is about the person being answered.

use super::{ParseOptions, ParsedReply, excerpt, warn};
use crate::core::facts::FactWrite;
use crate::core::graph::TaskKind;
use crate::core::plan::Action;

/// Splits a memory block's body into its `id:`/`about:` lines and the fact.
pub(super) fn memory_fields(body: &str) -> (Option<String>, Option<String>, String) {
    let (mut id, mut about) = (None, None);
    let mut rest = body.trim();
    loop {
        let (line, tail) = rest.split_once('\n').unwrap_or((rest, ""));
        let Some((key, value)) = line.split_once(':') else {
            break;
        };
        match key.trim().to_ascii_lowercase().as_str() {
            "id" => id = Some(value.trim().to_string()),
            "about" => about = Some(value.trim().to_string()),
            _ => break,
        }
        rest = tail.trim_start();
    }
    (id, about, rest.trim().to_string())
}

/// Pushes one memory write, resolving whom a `remember` is about.
pub(super) fn push_memory(
    out: &mut ParsedReply,
    label: &str,
    kind: TaskKind,
    id: Option<String>,
    about: Option<String>,
    content: String,
    opts: &ParseOptions,
) {
    let id = id.filter(|i| !i.trim().is_empty());
    if content.trim().is_empty() && id.is_none() {
        warn(out, label, "no fact and no id to forget; skipped");
        return;
    }
    let write = FactWrite { id, content };
    if kind == TaskKind::Note {
        if about.is_some() {
            warn(out, label, "a note is about this chat; `about` ignored");
        }
        out.actions.push(Action::Note {
            write,
            message: None,
        });
        return;
    }
    let person = match about {
        Some(raw) => {
            let digits = raw.trim().trim_start_matches('#');
            match digits.parse::<i64>() {
                Ok(id) if opts.group && opts.default_person.is_some_and(|d| d != id) => {
                    warn(
                        out,
                        label,
                        format_args!(
                            "in a group a fact is about the person you answer, not {}; skipped (a note keeps what concerns the chat)",
                            excerpt(&raw)
                        ),
                    );
                    return;
                }
                Ok(id) if opts.known_people.as_ref().is_none_or(|k| k.contains(&id)) => Some(id),
                _ => {
                    warn(
                        out,
                        label,
                        format_args!("`about` {} is nobody in this chat; skipped", excerpt(&raw)),
                    );
                    return;
                }
            }
        }
        None => opts.default_person,
    };
    let Some(about) = person else {
        warn(
            out,
            label,
            "whom the fact is about is unknown (add `about:` with their sender_id); skipped",
        );
        return;
    };
    out.actions.push(Action::Remember {
        about,
        name: None,
        write,
        message: None,
    });
}

/// A JSON task's field as text: a string, or a number written out.
pub(super) fn json_text(
    obj: &serde_json::Map<String, serde_json::Value>,
    name: &str,
) -> Option<String> {
    match obj.get(name) {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}
