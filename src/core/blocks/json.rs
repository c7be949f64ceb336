//! The original's JSON task arrays: a reply that is a JSON array of task objects (the Python
//! original's format) read into the same actions as task blocks, with the same limits.

use super::event::parse_json_event;
use super::memory::{json_text, push_memory};
use super::syntax::{Heading, IdPart, lines_of, segments};
use super::{ParseOptions, ParsedReply, block_kind, excerpt, parse_block, warn};
use crate::core::graph::TaskKind;
use crate::core::model::MessageId;

// ---------------------------------------------------------------------------------------------
// The original's JSON task arrays

/// How a task array names its kinds; a `[` reply without one is ordinary text.
pub(super) const JSON_KINDS: [&str; 2] = ["\"kind\"", "'kind'"];

/// What [`find_json_tasks`] found.
pub(super) enum JsonTasks {
    /// The array's task objects (anything else in it is kept to be warned about).
    Parsed(Vec<serde_json::Value>),
    /// It looks like a task array but is not valid JSON (cut off by the answer's cap, a raw
    /// newline inside a string): why, and the whole task objects before the break.
    Malformed(serde_json::Error, Vec<serde_json::Value>),
}

/// `text` with the control characters inside its JSON strings escaped (a raw newline in a
/// `text`, which JSON forbids and small models write; llama-cpp-python's JSON mode lets them
/// through), so such an answer reads as the model meant it. Text outside strings is kept.
fn escape_raw_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != ' ') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                (false, '\n') => {
                    out.push_str("\\n");
                    continue;
                }
                (false, '\r') => {
                    out.push_str("\\r");
                    continue;
                }
                (false, '\t') => {
                    out.push_str("\\t");
                    continue;
                }
                (false, c) if u32::from(c) < 0x20 => {
                    out.push_str(&format!("\\u{:04x}", u32::from(c)));
                    continue;
                }
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

/// The task objects of a broken task array (`text` from its opening `[`) that are whole and
/// valid on their own, in order, up to the first that is not: a plan cut off mid-task keeps
/// the tasks it finished.
fn salvage(text: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut start = None;
    for (i, c) in text.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '[' | '{' => {
                depth += 1;
                if c == '{' && depth == 2 {
                    start = Some(i);
                }
            }
            ']' | '}' => {
                if c == '}' && depth == 2 {
                    let Some(from) = start.take() else { break };
                    match serde_json::from_str::<serde_json::Value>(&text[from..=i]) {
                        Ok(task) => out.push(task),
                        Err(_) => break,
                    }
                }
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            _ => {}
        }
    }
    out
}

/// A JSON task array: the whole reply (`[ … ]`), or the content of a ```` ```json ```` (or
/// bare) fence in it. Text that merely starts with `[` but names no `"kind"` is not one.
pub(super) fn find_json_tasks(text: &str) -> Option<JsonTasks> {
    // A structured-output answer: `{"tasks": [...]}` (see `blocks::plan_schema`).
    if text.starts_with('{') && text.contains("\"tasks\"") {
        let text = &*escape_raw_controls(text);
        return Some(match serde_json::from_str::<serde_json::Value>(text) {
            Ok(serde_json::Value::Object(mut obj)) => match obj.remove("tasks") {
                Some(serde_json::Value::Array(tasks)) => JsonTasks::Parsed(tasks),
                _ => JsonTasks::Parsed(Vec::new()),
            },
            Ok(_) => JsonTasks::Parsed(Vec::new()),
            Err(e) => {
                let array = text
                    .find("\"tasks\"")
                    .and_then(|at| text[at..].find('[').map(|open| &text[at + open..]));
                JsonTasks::Malformed(e, array.map(salvage).unwrap_or_default())
            }
        });
    }
    let candidate = if text.starts_with('[') {
        Some(text)
    } else if segments(text).len() > 1 {
        // A reply in task blocks may quote JSON inside a send; it is not a task array.
        None
    } else {
        fenced_json(text)
    }?;
    if !JSON_KINDS.iter().any(|k| candidate.contains(k)) {
        return None;
    }
    let candidate = &*escape_raw_controls(candidate);
    Some(
        match serde_json::from_str::<Vec<serde_json::Value>>(candidate) {
            Ok(tasks) => JsonTasks::Parsed(tasks),
            Err(e) => JsonTasks::Malformed(e, salvage(candidate)),
        },
    )
}

/// The body of the first ```` ```json ```` fence (or of a bare fence holding an array).
pub(super) fn fenced_json(text: &str) -> Option<&str> {
    let lines = lines_of(text);
    let open = lines.iter().position(|line| {
        let t = line.text.trim();
        t.starts_with("```") && {
            let info = t.trim_start_matches('`').trim();
            info.eq_ignore_ascii_case("json") || info.is_empty()
        }
    })?;
    let close = lines
        .iter()
        .skip(open + 1)
        .position(|line| line.text.trim() == "```")
        .map(|i| i + open + 1);
    let start = lines.get(open)?.next;
    let end = match close {
        Some(c) => lines.get(c)?.start,
        None => text.len(),
    };
    let body = text.get(start..end)?.trim();
    body.starts_with('[').then_some(body)
}

pub(super) fn parse_json_tasks(out: &mut ParsedReply, found: JsonTasks, opts: &ParseOptions) {
    let tasks = match found {
        JsonTasks::Parsed(tasks) => tasks,
        JsonTasks::Malformed(why, whole) if whole.is_empty() => {
            warn(
                out,
                "JSON task array",
                format_args!(
                    "is not valid JSON ({}); nothing sent",
                    excerpt(&why.to_string())
                ),
            );
            return;
        }
        JsonTasks::Malformed(why, whole) => {
            warn(
                out,
                "JSON task array",
                format_args!(
                    "is not valid JSON ({}); the {} whole task(s) before the break are kept",
                    excerpt(&why.to_string()),
                    whole.len()
                ),
            );
            whole
        }
    };
    for (index, task) in tasks.iter().enumerate() {
        let index = index + 1;
        let Some(obj) = task.as_object() else {
            warn(out, &format!("task {index}"), "is not an object; skipped");
            continue;
        };
        let Some(kind) = obj.get("kind").and_then(|k| k.as_str()) else {
            warn(out, &format!("task {index}"), "has no \"kind\"; skipped");
            continue;
        };
        if kind.trim().eq_ignore_ascii_case("think") {
            // The original's private reasoning: dropped by design, never shown.
            tracing::debug!(task = index, "think task dropped");
            continue;
        }
        if let Some(k @ (TaskKind::Remember | TaskKind::Note)) = block_kind(kind) {
            let content = json_text(obj, "content")
                .or_else(|| json_text(obj, "text"))
                .unwrap_or_default();
            let label = format!("task {index} («{}»)", k.as_str());
            push_memory(
                out,
                &label,
                k,
                json_text(obj, "id"),
                json_text(obj, "about"),
                content,
                opts,
            );
            continue;
        }
        if block_kind(kind) == Some(TaskKind::Retrieve) {
            let label = format!("task {index} («{}»)", TaskKind::Retrieve.as_str());
            super::retrieve::parse_json_retrieve(out, &label, obj, opts);
            continue;
        }
        if block_kind(kind) == Some(TaskKind::XSend) {
            let label = format!("task {index} («{}»)", TaskKind::XSend.as_str());
            super::xsend::parse_json_xsend(out, &label, obj);
            continue;
        }
        if block_kind(kind) == Some(TaskKind::EditSchedule) {
            let label = format!("task {index} («schedule»)");
            super::schedule::parse_json_schedule(out, &label, obj, opts);
            continue;
        }
        if let Some(k @ (TaskKind::Intend | TaskKind::ChatPlan)) = block_kind(kind) {
            let label = format!("task {index} («{}»)", k.as_str());
            super::commitments::parse_json_commitment(out, &label, k, obj);
            continue;
        }
        if block_kind(kind) == Some(TaskKind::SendMedia) {
            let label = format!("task {index} («{}»)", TaskKind::SendMedia.as_str());
            let reply_to = json_id(obj.get("reply_to"));
            super::send_media::parse_json_send_media(out, &label, obj, &reply_to, opts);
            continue;
        }
        if block_kind(kind) == Some(TaskKind::Intent) {
            let label = format!("task {index} («{}»)", TaskKind::Intent.as_str());
            parse_json_event(out, &label, obj);
            continue;
        }
        let text_field = |name: &str| -> String {
            match obj.get(name) {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Number(n)) => n.to_string(),
                _ => String::new(),
            }
        };
        let id_field = |name: &str| -> IdPart<'static> { json_id(obj.get(name)) };
        let (id, body) = match block_kind(kind) {
            Some(TaskKind::Send | TaskKind::Voice) => (id_field("reply_to"), text_field("text")),
            Some(TaskKind::Sticker) => {
                let set = text_field("sticker_set");
                let name = text_field("name");
                let body = if set.trim().is_empty() {
                    name
                } else {
                    format!("{set}\n{name}")
                };
                (id_field("reply_to"), body)
            }
            Some(TaskKind::Wait) => (IdPart::Absent, text_field("delay")),
            Some(TaskKind::React) => {
                let mut id = id_field("message_id");
                if id == IdPart::Absent {
                    id = id_field("reply_to");
                }
                (id, text_field("emoji"))
            }
            _ => (IdPart::Absent, String::new()),
        };
        let heading = Heading {
            kind,
            id,
            trailing: "",
            bare: false,
        };
        parse_block(out, index, &heading, &body, opts);
    }
}

/// A message id given as a JSON number or a string of digits (`"#12"` too).
pub(super) fn json_id(value: Option<&serde_json::Value>) -> IdPart<'static> {
    match value {
        Some(serde_json::Value::Number(n)) => match n.as_i64() {
            Some(id) if id > 0 => IdPart::Valid(MessageId(id)),
            _ => IdPart::Invalid("(a number out of range)"),
        },
        Some(serde_json::Value::String(s)) => {
            let digits = s.trim().trim_start_matches('#');
            match digits.parse::<i64>() {
                Ok(id) if id > 0 => IdPart::Valid(MessageId(id)),
                _ if digits.is_empty() => IdPart::Absent,
                _ => IdPart::Invalid("(not a message id)"),
            }
        }
        _ => IdPart::Absent,
    }
}

/// Drops `[metadata]` lines a model copied from the history at the start of its reply: they
/// are bookkeeping, never something to send.
pub(super) fn strip_echoed_metadata<'a>(out: &mut ParsedReply, mut text: &'a str) -> &'a str {
    let mut dropped = 0;
    while text.starts_with("[metadata]") {
        text = text
            .split_once('\n')
            .map_or("", |(_, rest)| rest)
            .trim_start();
        dropped += 1;
    }
    if dropped > 0 {
        warn(
            out,
            "reply",
            format_args!("{dropped} echoed [metadata] line(s) dropped"),
        );
    }
    text
}
