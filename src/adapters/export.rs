//! Telegram Desktop chat exports (`result.json`) as messages the group pipeline can replay.
//! Both schemas load: the older one (no `date_unixtime`; `text` a string or a list of
//! strings and entity objects) and the newer one (`date_unixtime`, `text_entities`).
//! Service entries and malformed entries are skipped and counted, never fatal. Pure parsing
//! of an already-read document; `group::replay` reads the file.

use jiff::Timestamp;
use serde_json::Value;

use crate::core::model::{ChatId, Mention, Message, MessageId, Sender};

/// One message of the export, with the export's own sender id (`user123`) kept.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportMessage {
    /// The export's `from_id` (e.g. `user123`), when present.
    pub from_id: Option<String>,
    pub message: Message,
}

/// What an export held.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub name: String,
    /// The export's `type`: `public_supergroup`, `private_group`, `personal_chat`, …
    pub kind: String,
    pub chat: ChatId,
    pub messages: Vec<ExportMessage>,
    /// Service entries (joins, pins, …) skipped.
    pub skipped_service: usize,
    /// Entries without a usable id, date or sender, skipped.
    pub skipped_malformed: usize,
}

/// Why an export could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("not JSON: {0}")]
    Json(#[source] serde_json::Error),
    #[error("no `messages` list: this is not a Telegram Desktop chat export (result.json)")]
    NoMessages,
}

/// The numeric part of an export id such as `user123` or `channel456` (channels negative).
pub(crate) fn numeric_id(from_id: &str) -> Option<i64> {
    let digits = from_id.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let n = digits.parse::<i64>().ok()?;
    // i64::MIN has no positive twin: not an id (found by fuzzing).
    if from_id.starts_with("user") {
        Some(n)
    } else {
        n.checked_neg()
    }
}

fn as_i64(v: Option<&Value>) -> Option<i64> {
    match v? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn date_of(m: &serde_json::Map<String, Value>) -> Option<Timestamp> {
    if let Some(unix) = as_i64(m.get("date_unixtime")) {
        return Timestamp::from_second(unix).ok();
    }
    // The older schema: local wall time without a zone; read as UTC.
    let civil: jiff::civil::DateTime = m.get("date")?.as_str()?.parse().ok()?;
    civil
        .to_zoned(jiff::tz::TimeZone::UTC)
        .ok()
        .map(|z| z.timestamp())
}

/// Text and mentions from `text_entities` (newer) or `text` (string or list).
fn text_of(m: &serde_json::Map<String, Value>) -> (String, Vec<Mention>) {
    let parts: Vec<Value> = match (m.get("text_entities"), m.get("text")) {
        (Some(Value::Array(e)), _) => e.clone(),
        (_, Some(Value::Array(a))) => a.clone(),
        (_, Some(Value::String(s))) => vec![Value::String(s.clone())],
        _ => Vec::new(),
    };
    let mut text = String::new();
    let mut mentions = Vec::new();
    for p in parts {
        match p {
            Value::String(s) => text.push_str(&s),
            Value::Object(o) => {
                let t = o.get("text").and_then(Value::as_str).unwrap_or("");
                text.push_str(t);
                match o.get("type").and_then(Value::as_str) {
                    Some("mention") => mentions.push(Mention {
                        user_id: None,
                        username: Some(t.trim_start_matches('@').to_string()),
                    }),
                    Some("mention_name") => mentions.push(Mention {
                        user_id: as_i64(o.get("user_id")),
                        username: None,
                    }),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    (text, mentions)
}

/// Parses an export document.
pub fn parse(json: &str) -> Result<Export, ExportError> {
    let doc: Value = serde_json::from_str(json).map_err(ExportError::Json)?;
    let list = doc
        .get("messages")
        .and_then(Value::as_array)
        .ok_or(ExportError::NoMessages)?;
    let chat_raw = as_i64(doc.get("id")).unwrap_or(0);
    let chat = ChatId(-chat_raw.saturating_abs());
    let mut out = Export {
        name: doc
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        kind: doc
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        chat,
        messages: Vec::with_capacity(list.len()),
        skipped_service: 0,
        skipped_malformed: 0,
    };
    for entry in list {
        let Some(m) = entry.as_object() else {
            out.skipped_malformed += 1;
            continue;
        };
        match m.get("type").and_then(Value::as_str) {
            Some("message") => {}
            Some("service") => {
                out.skipped_service += 1;
                continue;
            }
            _ => {
                out.skipped_malformed += 1;
                continue;
            }
        }
        let (Some(id), Some(date)) = (as_i64(m.get("id")), date_of(m)) else {
            out.skipped_malformed += 1;
            continue;
        };
        let from_id = m.get("from_id").and_then(Value::as_str).map(str::to_string);
        let name = m
            .get("from")
            .and_then(Value::as_str)
            .map(str::to_string)
            .or_else(|| from_id.clone())
            .unwrap_or_default();
        let Some(sender_id) = from_id
            .as_deref()
            .and_then(numeric_id)
            .or_else(|| (!name.is_empty()).then(|| crate::adapters::memory::user_id_for(&name)))
        else {
            out.skipped_malformed += 1;
            continue;
        };
        let (text, mentions) = text_of(m);
        out.messages.push(ExportMessage {
            from_id,
            message: Message {
                id: MessageId(id),
                chat,
                sender: Sender {
                    id: sender_id,
                    name,
                    username: None,
                    is_bot: false,
                    service: false,
                    deleted: false,
                },
                outgoing: false,
                text,
                mentions,
                reply_to: as_i64(m.get("reply_to_message_id")).map(MessageId),
                date,
                media: None,
            },
        });
    }
    Ok(out)
}
