//! The persona's album: the photos, audio, video and documents it may send with `send_media`,
//! each with a stable id and a description. This module owns the album's vocabulary (an
//! [`Album`] of [`AlbumItem`]s), the sidecar formats (the original's `<id>.json` with
//! `unique_id`, `kind`, `description`, `mime_type`, `media_file`, and plain `.md`/`.txt`
//! descriptions), the ids derived from a file's content, the compact listing the model sees
//! and the original's `media.json` listing. It does no I/O: the folder is read by
//! `adapters::album` (called by the persona loader), which hands each sidecar's text and each
//! file's size and hash here. The prompt builder, the `send_media` handler and `check` read it.

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Deserialize;

use crate::core::model::MediaKind;

/// The largest file the album sends: Telegram's small-file upload cap (10 MiB, as voice notes).
pub const MAX_ITEM_BYTES: u64 = 10 * 1024 * 1024;
/// The most items one album lists (the listing is part of every prompt of the persona).
pub const MAX_ITEMS: usize = 100;
/// The longest description shown to the model, in characters (the rest is cut).
pub const MAX_LISTED_CHARS: usize = 200;
/// The longest id accepted from a sidecar.
pub const MAX_ID_CHARS: usize = 64;

/// One item of the album.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlbumItem {
    /// What the model names it by: the sidecar's `unique_id`, else [`content_id`].
    pub id: String,
    pub kind: MediaKind,
    /// What it shows, from its sidecar; `None` when it has none (listed by file name).
    pub description: Option<String>,
    /// The file itself.
    pub path: PathBuf,
    /// Its name in the folder (the name it is sent under).
    pub file_name: String,
    pub mime: String,
    pub size: u64,
    /// The SHA-256 of its bytes, in hex: the key its upload is kept under per account.
    pub content_hash: String,
}

impl AlbumItem {
    /// The description on one line, cut to [`MAX_LISTED_CHARS`]; the file name when none.
    pub fn one_line(&self) -> String {
        let Some(d) = &self.description else {
            return format!("(no description; file {})", self.file_name);
        };
        let flat = d.split_whitespace().collect::<Vec<_>>().join(" ");
        if flat.chars().count() <= MAX_LISTED_CHARS {
            return flat;
        }
        let cut: String = flat.chars().take(MAX_LISTED_CHARS - 1).collect();
        format!("{}…", cut.trim_end())
    }
}

/// A persona's album: its items in a stable order (by file name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Album {
    /// The folder it was read from (`None` when the persona has none).
    pub folder: Option<PathBuf>,
    pub items: Vec<AlbumItem>,
}

impl Album {
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The item the model names `id` (exactly: ids are case-sensitive, as the original's).
    pub fn get(&self, id: &str) -> Option<&AlbumItem> {
        let id = id.trim();
        self.items.iter().find(|i| i.id == id)
    }

    /// The album as the system instruction shows it: ids, kinds and one-line descriptions,
    /// and how to send one. Empty for an empty album (the action is then not offered). It
    /// changes only when the album does, so it belongs to the cache-stable prefix.
    pub fn prompt_section(&self) -> String {
        if self.items.is_empty() {
            return String::new();
        }
        let mut s = String::from(
            "# Media you may send\n\nYour album. Send an item with `# «send_media»` and its id as \
             the body (a message id after the kind makes it a reply; as JSON, \
             {\"kind\": \"send_media\", \"unique_id\": …, \"reply_to\": …}). Use only these ids, \
             never a `send` for them.\n\n",
        );
        for item in &self.items {
            let _ = writeln!(
                s,
                "- {} ({}): {}",
                item.id,
                item.kind.as_str(),
                item.one_line()
            );
        }
        s.push('\n');
        s
    }

    /// The original's `file:media.json`: a JSON array of `{media_id, media_type,
    /// description}`, one per item, in the album's order.
    pub fn media_json(&self) -> String {
        let list: Vec<serde_json::Value> = self
            .items
            .iter()
            .map(|i| {
                serde_json::json!({
                    "media_id": i.id,
                    "media_type": i.kind.as_str(),
                    "description": i.description,
                })
            })
            .collect();
        serde_json::to_string_pretty(&list).unwrap_or_else(|_| "[]".to_owned())
    }
}

/// A short id made from a file's content hash (hex): the first 12 hex digits. Stable for the
/// same bytes wherever the file lives.
pub fn content_id(content_hash: &str) -> String {
    content_hash.chars().take(12).collect()
}

/// What a sidecar says about its file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sidecar {
    pub unique_id: Option<String>,
    pub kind: Option<MediaKind>,
    pub description: Option<String>,
    pub mime: Option<String>,
    /// The file it describes (the original's `media_file`), when it names one.
    pub media_file: Option<String>,
}

/// Why a sidecar cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("is not valid JSON")]
    Json(#[from] serde_json::Error),
    #[error("`{field}` must be {wanted}")]
    Field {
        field: &'static str,
        wanted: &'static str,
    },
    #[error("`unique_id` {0:?} is not an id (1 to 64 letters, digits, `-` or `_`)")]
    BadId(String),
    #[error(
        "`kind` {0:?} is not one of photo, audio, music, video, movie, animation, gif, sticker, voice, document"
    )]
    BadKind(String),
    #[error("`media_file` {0:?} must be a file name in the same folder")]
    BadFile(String),
}

/// The original's sidecar as written (extra fields are ignored).
#[derive(Deserialize)]
struct RawSidecar {
    #[serde(default)]
    unique_id: Option<serde_json::Value>,
    #[serde(default)]
    kind: Option<serde_json::Value>,
    #[serde(default)]
    description: Option<serde_json::Value>,
    #[serde(default)]
    mime_type: Option<serde_json::Value>,
    #[serde(default)]
    media_file: Option<serde_json::Value>,
}

fn opt_string(
    v: Option<serde_json::Value>,
    field: &'static str,
) -> Result<Option<String>, SidecarError> {
    match v {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => {
            Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty()))
        }
        Some(_) => Err(SidecarError::Field {
            field,
            wanted: "a string",
        }),
    }
}

/// Reads a JSON sidecar (parse, then validate each field).
pub fn parse_json_sidecar(text: &str) -> Result<Sidecar, SidecarError> {
    let raw: RawSidecar = serde_json::from_str(text)?;
    let unique_id = match raw.unique_id {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s.trim().to_owned()),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        Some(_) => {
            return Err(SidecarError::Field {
                field: "unique_id",
                wanted: "a string or a number",
            });
        }
    };
    if let Some(id) = &unique_id
        && !valid_id(id)
    {
        return Err(SidecarError::BadId(id.clone()));
    }
    let kind = match opt_string(raw.kind, "kind")? {
        None => None,
        Some(k) => Some(kind_named(&k).ok_or(SidecarError::BadKind(k))?),
    };
    let media_file = opt_string(raw.media_file, "media_file")?;
    if let Some(f) = &media_file
        && (f.contains('/') || f.contains('\\') || f.starts_with('.'))
    {
        return Err(SidecarError::BadFile(f.clone()));
    }
    Ok(Sidecar {
        unique_id,
        kind,
        description: opt_string(raw.description, "description")?,
        mime: opt_string(raw.mime_type, "mime_type")?,
        media_file,
    })
}

/// Reads a `.md`/`.txt` sidecar: its text is the description.
pub fn parse_text_sidecar(text: &str) -> Sidecar {
    Sidecar {
        description: Some(text.trim().to_owned()).filter(|d| !d.is_empty()),
        ..Sidecar::default()
    }
}

/// Whether `id` can name an item: 1 to [`MAX_ID_CHARS`] ASCII letters, digits, `-` or `_`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= MAX_ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The kind a sidecar names (the original's words included).
pub fn kind_named(name: &str) -> Option<MediaKind> {
    Some(match name.trim().to_ascii_lowercase().as_str() {
        "photo" | "image" | "picture" => MediaKind::Photo,
        "audio" | "music" | "song" => MediaKind::Audio,
        "video" | "movie" => MediaKind::Video,
        "animation" | "gif" => MediaKind::Gif,
        "sticker" => MediaKind::Sticker,
        "voice" => MediaKind::Voice,
        "document" | "file" => MediaKind::Document,
        _ => return None,
    })
}

/// The kind and MIME type a file's name suggests (the extension, ignoring case).
pub fn guess(file_name: &str) -> (MediaKind, &'static str) {
    let ext = file_name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "jpg" | "jpeg" => (MediaKind::Photo, "image/jpeg"),
        "png" => (MediaKind::Photo, "image/png"),
        "webp" => (MediaKind::Photo, "image/webp"),
        "gif" => (MediaKind::Gif, "image/gif"),
        "mp3" => (MediaKind::Audio, "audio/mpeg"),
        "m4a" => (MediaKind::Audio, "audio/mp4"),
        "ogg" | "oga" | "opus" => (MediaKind::Audio, "audio/ogg"),
        "flac" => (MediaKind::Audio, "audio/flac"),
        "wav" => (MediaKind::Audio, "audio/wav"),
        "mp4" | "m4v" => (MediaKind::Video, "video/mp4"),
        "mov" => (MediaKind::Video, "video/quicktime"),
        "webm" => (MediaKind::Video, "video/webm"),
        "mkv" => (MediaKind::Video, "video/x-matroska"),
        "tgs" => (MediaKind::Sticker, "application/x-tgsticker"),
        "pdf" => (MediaKind::Document, "application/pdf"),
        "txt" => (MediaKind::Document, "text/plain"),
        _ => (MediaKind::Document, "application/octet-stream"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_originals_sidecar_reads_as_is() {
        let s = parse_json_sidecar(
            r#"{"unique_id": "4918428193711131585", "kind": "photo", "description": "Charcoal drawings.", "status": "curated", "mime_type": "image/jpeg", "media_file": "4918428193711131585.jpg", "last_used_at": "2026-02-07T17:34:49"}"#,
        )
        .unwrap();
        assert_eq!(s.unique_id.as_deref(), Some("4918428193711131585"));
        assert_eq!(s.kind, Some(MediaKind::Photo));
        assert_eq!(s.media_file.as_deref(), Some("4918428193711131585.jpg"));
        assert_eq!(s.mime.as_deref(), Some("image/jpeg"));
    }

    #[test]
    fn a_bad_sidecar_says_what_is_wrong() {
        assert!(matches!(
            parse_json_sidecar("{"),
            Err(SidecarError::Json(_))
        ));
        assert!(matches!(
            parse_json_sidecar(r#"{"kind": "hologram"}"#),
            Err(SidecarError::BadKind(_))
        ));
        assert!(matches!(
            parse_json_sidecar(r#"{"unique_id": "a b"}"#),
            Err(SidecarError::BadId(_))
        ));
        assert!(matches!(
            parse_json_sidecar(r#"{"media_file": "../x.jpg"}"#),
            Err(SidecarError::BadFile(_))
        ));
        assert!(matches!(
            parse_json_sidecar(r#"{"description": 3}"#),
            Err(SidecarError::Field { .. })
        ));
    }

    #[test]
    fn the_listing_is_one_line_per_item_and_empty_without_items() {
        assert_eq!(Album::default().prompt_section(), "");
        let album = Album {
            folder: None,
            items: vec![AlbumItem {
                id: "abc".into(),
                kind: MediaKind::Photo,
                description: Some("A cat\non a\n\nmat.".into()),
                path: PathBuf::from("cat.jpg"),
                file_name: "cat.jpg".into(),
                mime: "image/jpeg".into(),
                size: 3,
                content_hash: "00".into(),
            }],
        };
        assert!(
            album
                .prompt_section()
                .contains("- abc (photo): A cat on a mat.")
        );
        let listed: serde_json::Value = serde_json::from_str(&album.media_json()).unwrap();
        assert_eq!(listed[0]["media_id"], "abc");
        assert_eq!(listed[0]["media_type"], "photo");
    }
}
