//! What describing one medium takes, decided from its metadata before any download: the
//! pipeline's settings ([`MediaConfig`]), the describe prompts ([`MediaPrompts`], embedded
//! defaults overridable from a directory), the per-family plan (inline bytes, metadata
//! only, skip) and MIME sniffing. Pure decisions, apart from reading prompt overrides; the
//! pipeline in the parent module carries them out.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::adapters::store::{self, StoreError};
use crate::core::model::{MediaInfo, MediaKind};

/// Default model for descriptions: a cheap one.
pub const DEFAULT_MEDIA_MODEL: &str = "gemini-flash-lite-latest";

/// Default number of new descriptions one planning pass may start.
pub const DEFAULT_BUDGET_PER_PASS: usize = 8;

/// The answer a describe prompt asks for when the model cannot make the medium out.
pub(super) const NOT_UNDERSTOOD: &str = "NOT_UNDERSTOOD";

/// Longest description kept (characters); longer model answers are cut.
pub(super) const MAX_DESCRIPTION_CHARS: usize = 4000;

/// Settings of the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct MediaConfig {
    /// New descriptions one planning pass may start (cache hits are free).
    pub budget_per_pass: usize,
    /// Description calls in flight at once, across all agents and chats.
    pub max_in_flight: usize,
    /// Model used for descriptions and transcripts.
    pub model: String,
    /// Operator-curated records (same shape as generated ones), checked before generated ones.
    pub curated_dir: Option<PathBuf>,
    /// Entries kept in memory, and how long each stays there.
    pub memory_capacity: u64,
    pub memory_ttl: Duration,
    /// Largest image, video/animation, audio and PDF sent inline.
    pub max_image_bytes: u64,
    pub max_video_bytes: u64,
    pub max_audio_bytes: u64,
    pub max_pdf_bytes: u64,
    /// Largest text document read, and the characters of it kept.
    pub max_text_bytes: u64,
    pub text_chars: usize,
    /// Longest one description call may take.
    pub describe_timeout: Duration,
    /// First retry delay of a failed item (doubled per failure), and the longest delay.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
}

impl Default for MediaConfig {
    fn default() -> Self {
        MediaConfig {
            budget_per_pass: DEFAULT_BUDGET_PER_PASS,
            max_in_flight: 4,
            model: DEFAULT_MEDIA_MODEL.to_string(),
            curated_dir: None,
            memory_capacity: 10_000,
            memory_ttl: Duration::from_secs(6 * 3600),
            max_image_bytes: 10 * 1024 * 1024,
            max_video_bytes: 10 * 1024 * 1024,
            max_audio_bytes: 15 * 1024 * 1024,
            max_pdf_bytes: 15 * 1024 * 1024,
            max_text_bytes: 1024 * 1024,
            text_chars: 4000,
            describe_timeout: Duration::from_secs(120),
            backoff_base: Duration::from_secs(60),
            backoff_max: Duration::from_secs(24 * 3600),
        }
    }
}

/// The describe prompts, one per family of media.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaPrompts {
    pub image: String,
    pub video: String,
    pub audio: String,
    pub document: String,
}

impl Default for MediaPrompts {
    fn default() -> Self {
        MediaPrompts {
            image: include_str!("media_prompts/image.md").trim().to_string(),
            video: include_str!("media_prompts/video.md").trim().to_string(),
            audio: include_str!("media_prompts/audio.md").trim().to_string(),
            document: include_str!("media_prompts/document.md").trim().to_string(),
        }
    }
}

impl MediaPrompts {
    /// The defaults, with `image.md`, `video.md`, `audio.md` and `document.md` from `dir`
    /// replacing them where present. Blocking: call from `spawn_blocking` in async code.
    pub fn load(dir: Option<&Path>) -> Result<MediaPrompts, StoreError> {
        let mut p = MediaPrompts::default();
        let Some(dir) = dir else { return Ok(p) };
        for (file, slot) in [
            ("image.md", &mut p.image),
            ("video.md", &mut p.video),
            ("audio.md", &mut p.audio),
            ("document.md", &mut p.document),
        ] {
            if let Some(text) = store::read_operator_file(&dir.join(file))?
                && !text.trim().is_empty()
            {
                *slot = text.trim().to_string();
            }
        }
        Ok(p)
    }
}

/// What describing a medium takes, decided from its metadata before any download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Plan {
    /// Download (up to `cap` bytes) and send inline with `prompt`; `mime` is the guess used
    /// when the bytes are not recognised.
    Inline {
        mime: String,
        family: Family,
        cap: u64,
    },
    /// Download a text document and keep its beginning.
    Text { cap: u64 },
    /// Not described; the reason is logged.
    Unsupported(&'static str),
    /// Described from what is known without the file (an animated sticker's emoji and set).
    FromMetadata,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    Image,
    Video,
    Audio,
    Document,
}

pub(super) fn lower_name(media: &MediaInfo) -> String {
    media
        .file_name
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// What an animated (Lottie) sticker shows, from its emoji and set, without rendering it.
pub(super) fn metadata_description(media: &MediaInfo) -> String {
    let st = media.sticker.as_ref();
    let emoji = st
        .and_then(|s| s.emoji.as_deref())
        .or(st.map(|s| s.name.as_str()))
        .unwrap_or("");
    match st.and_then(|s| s.set.as_deref()) {
        Some(set) => format!("an animated sticker expressing {emoji} from the set {set}"),
        None => format!("an animated sticker expressing {emoji}"),
    }
}

pub(super) fn plan_for(media: &MediaInfo, c: &MediaConfig) -> Plan {
    let mime = media
        .mime
        .as_deref()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let name = lower_name(media);
    let inline = |mime: &str, family: Family, cap: u64| Plan::Inline {
        mime: mime.to_string(),
        family,
        cap,
    };
    let plan = match media.kind {
        MediaKind::Photo => inline("image/jpeg", Family::Image, c.max_image_bytes),
        MediaKind::Sticker => {
            if mime == "application/x-tgsticker" || name.ends_with(".tgs") {
                Plan::FromMetadata
            } else if mime == "video/webm" || name.ends_with(".webm") {
                inline("video/webm", Family::Video, c.max_video_bytes)
            } else {
                inline("image/webp", Family::Image, c.max_image_bytes)
            }
        }
        MediaKind::Gif | MediaKind::Video | MediaKind::RoundVideo => {
            inline("video/mp4", Family::Video, c.max_video_bytes)
        }
        MediaKind::Voice => inline("audio/ogg", Family::Audio, c.max_audio_bytes),
        MediaKind::Audio => {
            let m = if mime.starts_with("audio/") {
                mime.as_str()
            } else {
                "audio/mpeg"
            };
            inline(m, Family::Audio, c.max_audio_bytes)
        }
        MediaKind::Document => {
            if mime == "application/pdf" || name.ends_with(".pdf") {
                inline("application/pdf", Family::Document, c.max_pdf_bytes)
            } else if mime.starts_with("text/")
                || mime == "application/json"
                || [".txt", ".md", ".csv", ".json", ".log"]
                    .iter()
                    .any(|e| name.ends_with(e))
            {
                Plan::Text {
                    cap: c.max_text_bytes,
                }
            } else if mime.starts_with("image/") {
                inline(&mime, Family::Image, c.max_image_bytes)
            } else {
                Plan::Unsupported("document type not described")
            }
        }
    };
    let cap = match &plan {
        Plan::Inline { cap, .. } | Plan::Text { cap } => *cap,
        Plan::Unsupported(_) | Plan::FromMetadata => return plan,
    };
    if media.size.is_some_and(|s| s > cap) {
        return Plan::Unsupported("over the size cap");
    }
    plan
}

/// The MIME type of well-known formats, from their first bytes.
pub fn sniff_mime(bytes: &[u8]) -> Option<&'static str> {
    let starts = |p: &[u8]| bytes.starts_with(p);
    if starts(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if starts(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if starts(b"RIFF") && bytes.get(8..12) == Some(b"WEBP") {
        Some("image/webp")
    } else if starts(b"GIF8") {
        Some("image/gif")
    } else if starts(b"%PDF") {
        Some("application/pdf")
    } else if starts(b"OggS") {
        Some("audio/ogg")
    } else if starts(&[0x1A, 0x45, 0xDF, 0xA3]) {
        Some("video/webm")
    } else if bytes.get(4..8) == Some(b"ftyp") {
        Some("video/mp4")
    } else if starts(b"ID3") {
        Some("audio/mpeg")
    } else if starts(&[0x1F, 0x8B]) {
        Some("application/x-tgsticker")
    } else {
        None
    }
}

/// Whether `mime` may be sent inline for a family.
pub(super) fn accepted(family: Family, mime: &str) -> bool {
    match family {
        Family::Image => matches!(mime, "image/jpeg" | "image/png" | "image/webp"),
        Family::Video => matches!(mime, "video/mp4" | "video/webm" | "image/gif"),
        Family::Audio => mime.starts_with("audio/"),
        Family::Document => mime == "application/pdf",
    }
}
