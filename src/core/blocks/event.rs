//! Event blocks: `event`, a scheduled intent of this chat (the persona's note to its future
//! self), in either form. As a task block, the intent's id may follow the heading; the body
//! is leading `key: value` lines (`id`, `time`, `timezone`, `every` or `interval`, `times` or
//! `occurrences`, `urgent`), then the text:
//!
//! ```text
//! # «event»
//! time: 2026-11-27 09:00
//! every: 1 day
//! times: 3
//! Remind Alice about the dentist.
//! ```
//!
//! `# «event» event-abc123` with an empty body deletes that intent. As the original's JSON
//! task: `{"kind": "event", "id": …, "intent": "…", "time": "…", "timezone": "…",
//! "interval": "2 hours", "occurrences": 5, "urgent": true}` (`text` for `intent` too). Only
//! the syntax is checked here (a count that is not a number, an `urgent` that is not yes or
//! no); times, zones, intervals and caps are checked where the write is applied.

use super::memory::json_text;
use super::syntax::{Heading, IdPart};
use super::{ParsedReply, excerpt, warn};
use crate::core::intents::IntentWrite;
use crate::core::plan::Action;

/// Reads an `event` block: the heading's id (the rest of the heading line) and the body.
pub(super) fn parse_event(out: &mut ParsedReply, label: &str, heading: &Heading<'_>, body: &str) {
    let (token, extra) = match heading.id {
        IdPart::Valid(message) => (message.0.to_string(), heading.trailing),
        IdPart::Invalid(raw) => (raw.to_string(), heading.trailing),
        IdPart::Absent => {
            let (token, extra) = heading
                .trailing
                .split_once(char::is_whitespace)
                .unwrap_or((heading.trailing, ""));
            (token.to_string(), extra)
        }
    };
    if !extra.trim().is_empty() {
        warn(
            out,
            label,
            format_args!("text after the id ignored: {}", excerpt(extra)),
        );
    }
    let mut write = IntentWrite {
        id: some_text(token.trim_start_matches('#')),
        ..IntentWrite::default()
    };
    let mut rest = body.trim();
    loop {
        let (line, tail) = rest.split_once('\n').unwrap_or((rest, ""));
        let Some((key, value)) = line.split_once(':') else {
            break;
        };
        let value = value.trim();
        match key.trim().to_ascii_lowercase().as_str() {
            "id" => {
                let id = some_text(value);
                if write.id.is_some() && id.is_some() && write.id != id {
                    warn(out, label, "names two different ids; skipped");
                    return;
                }
                write.id = write.id.or(id);
            }
            "time" => write.time = some_text(value),
            "timezone" => write.timezone = some_text(value),
            "every" | "interval" => write.interval = some_text(value),
            "times" | "occurrences" => match read_count(value) {
                Ok(count) => write.occurrences = count,
                Err(()) => return bad_value(out, label, "times", value),
            },
            "urgent" => match read_yes_no(value) {
                Some(urgent) => write.urgent = urgent,
                None => return bad_value(out, label, "urgent", value),
            },
            _ => break,
        }
        rest = tail.trim_start();
    }
    write.text = rest.trim().to_string();
    push_event(out, label, write);
}

/// Reads an `event` JSON task (the original's form).
pub(super) fn parse_json_event(
    out: &mut ParsedReply,
    label: &str,
    obj: &serde_json::Map<String, serde_json::Value>,
) {
    use serde_json::Value;
    let field = |name: &str| json_text(obj, name).and_then(|t| some_text(&t));
    let occurrences = match obj.get("occurrences").or_else(|| obj.get("times")) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_u64().and_then(|n| u32::try_from(n).ok()) {
            Some(n) => Some(n),
            None => return bad_value(out, label, "occurrences", &n.to_string()),
        },
        Some(Value::String(s)) => match read_count(s) {
            Ok(count) => count,
            Err(()) => return bad_value(out, label, "occurrences", s),
        },
        Some(other) => return bad_value(out, label, "occurrences", &other.to_string()),
    };
    let urgent = match obj.get("urgent") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => match read_yes_no(s) {
            Some(urgent) => urgent,
            None => return bad_value(out, label, "urgent", s),
        },
        Some(other) => return bad_value(out, label, "urgent", &other.to_string()),
    };
    let text = json_text(obj, "intent")
        .or_else(|| json_text(obj, "text"))
        .unwrap_or_default();
    let write = IntentWrite {
        id: field("id"),
        text: text.trim().to_string(),
        time: field("time"),
        timezone: field("timezone"),
        interval: field("interval").or_else(|| field("every")),
        occurrences,
        urgent,
    };
    push_event(out, label, write);
}

/// Pushes one event write; a write with neither text nor an id means nothing.
fn push_event(out: &mut ParsedReply, label: &str, write: IntentWrite) {
    if write.text.is_empty() && write.id.is_none() {
        warn(
            out,
            label,
            "no text and no id of an intent to delete; skipped",
        );
        return;
    }
    out.actions.push(Action::Event { write });
}

fn bad_value(out: &mut ParsedReply, label: &str, key: &str, value: &str) {
    let wanted = if key == "urgent" {
        "yes or no"
    } else {
        "a whole number"
    };
    warn(
        out,
        label,
        format_args!("`{key}` {} is not {wanted}; skipped", excerpt(value)),
    );
}

/// Trimmed text, `None` when blank.
fn some_text(text: &str) -> Option<String> {
    Some(text.trim().to_string()).filter(|t| !t.is_empty())
}

/// A count of firings: a whole number, or nothing when blank.
fn read_count(value: &str) -> Result<Option<u32>, ()> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    value.parse().map(Some).map_err(|_| ())
}

fn read_yes_no(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" => Some(true),
        "no" | "false" => Some(false),
        _ => None,
    }
}
