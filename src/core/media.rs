//! Media records: what is known about one photo, sticker, voice note or file, keyed by
//! Telegram's unique id, and the per-history map the prompt builder renders. Pure data; the
//! pipeline that downloads, describes and stores them is `adapters::media`.

use std::collections::HashMap;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::core::model::{MediaInfo, MediaKind};

/// How a description attempt ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MediaStatus {
    /// Described (or transcribed); `description` holds the text.
    #[default]
    Ok,
    /// The model could not make it out (or gave no answer).
    NotUnderstood,
    /// This kind, format or size is not described (too big, animated sticker, binary file, …).
    Unsupported,
    /// The download or the model call failed; retried after a backoff.
    Error,
    /// The model call took too long; retried after a backoff.
    Timeout,
}

/// What is known about one medium, keyed by its unique id. Stored as
/// `state/media/<unique_id>.json`; curated records have the same shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MediaRecord {
    pub unique_id: String,
    pub kind: MediaKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticker_set: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticker_set_title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticker_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sticker_emoji: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub status: MediaStatus,
    /// Whether a later pass may try again (after `next_attempt_at`).
    #[serde(default)]
    pub retryable: bool,
    /// Description attempts so far.
    #[serde(default)]
    pub attempts: u32,
    #[serde(default)]
    pub created_at: Timestamp,
    #[serde(default)]
    pub updated_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Timestamp>,
}

impl MediaRecord {
    pub(crate) fn new(media: &MediaInfo, now: Timestamp) -> MediaRecord {
        let st = media.sticker.as_ref();
        MediaRecord {
            unique_id: media.unique_id.clone(),
            kind: media.kind,
            mime: media.mime.clone(),
            sticker_set: st.and_then(|s| s.set.clone()),
            sticker_set_title: None,
            sticker_name: st.map(|s| s.name.clone()),
            sticker_emoji: st.and_then(|s| s.emoji.clone()),
            description: None,
            status: MediaStatus::Ok,
            retryable: false,
            attempts: 0,
            created_at: now,
            updated_at: now,
            next_attempt_at: None,
        }
    }

    /// The text the prompt may show: only settled, successful descriptions.
    pub(crate) fn shown_description(&self) -> Option<&str> {
        match self.status {
            MediaStatus::Ok => self.description.as_deref().filter(|d| !d.trim().is_empty()),
            _ => None,
        }
    }

    /// Whether a pass at `now` should try to describe it again.
    pub(crate) fn retry_due(&self, now: Timestamp) -> bool {
        self.retryable && self.next_attempt_at.is_none_or(|t| t <= now)
    }
}

/// Records of the media of one history, by unique id: what the prompt builder renders.
pub(crate) type MediaDescriptions = HashMap<String, MediaRecord>;
