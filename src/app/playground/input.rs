//! The playground's input, read and checked: standard input split into capped lines of
//! bytes, each decoded as UTF-8 and, in `--jsonl` mode, parsed and validated into an
//! [`InputMessage`]. Pure (no I/O beyond the reader it is handed; media files named by a line
//! are read later by the playground), so the fuzz target `jsonl_input` and the tests drive it
//! directly. Every problem is a message naming what is wrong, for an `error` event; nothing
//! here panics or aborts the session. Called by the playground's input loop.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::core::model::MediaKind;

/// Longest input line; the rest of a longer line is skipped with an `error` event.
pub(crate) const MAX_LINE_BYTES: usize = 1024 * 1024;

/// Longest pause one `--jsonl` line may ask for (`after_ms`): seven days.
pub(crate) const MAX_AFTER_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// One read from standard input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RawLine {
    /// A line's bytes, without its line ending (not yet known to be UTF-8).
    Bytes(Vec<u8>),
    /// A line longer than the cap, skipped.
    TooLong,
}

/// Reads one line of at most `cap` bytes (`\n` or `\r\n` ends it; a last line without one
/// counts). `None` at the end of input. A longer line is consumed and reported as
/// [`RawLine::TooLong`] without being kept in memory.
pub(crate) fn read_line_capped(
    r: &mut impl std::io::BufRead,
    cap: usize,
) -> std::io::Result<Option<RawLine>> {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut any = false;
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            break;
        }
        any = true;
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        if !too_long {
            if line.len() + chunk.len() > cap + 1 {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = newline.map_or(buf.len(), |i| i + 1);
        r.consume(used);
        if newline.is_some() {
            break;
        }
    }
    if !any {
        return Ok(None);
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if too_long || line.len() > cap {
        return Ok(Some(RawLine::TooLong));
    }
    Ok(Some(RawLine::Bytes(line)))
}

/// A line's text, or why it is not text: the column (1-based, in bytes) of its first byte
/// that is not UTF-8.
pub(crate) fn line_text(bytes: Vec<u8>) -> Result<String, InputError> {
    String::from_utf8(bytes).map_err(|e| {
        InputError::Line(format!(
            "not valid UTF-8 (invalid byte at column {})",
            e.utf8_error().valid_up_to() + 1
        ))
    })
}

/// One line of `--jsonl` input, as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InputLine {
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    text: String,
    #[serde(default)]
    reply_to: Option<i64>,
    /// Checked by [`after_from`]: any JSON number is accepted here so that a negative,
    /// fractional or huge value gets a clear error instead of serde's.
    #[serde(default)]
    after_ms: Option<serde_json::Number>,
    #[serde(default)]
    media: Option<InputMedia>,
    /// A voice note already transcribed: its words (shorthand for a `voice` media object
    /// with a `transcript`).
    #[serde(default)]
    voice: Option<String>,
    /// The voice note's length in seconds (with `voice`).
    #[serde(default)]
    duration: Option<u32>,
}

/// A media object of a `--jsonl` line (docs/playground.md).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputMedia {
    pub kind: InputMediaKind,
    /// A file to read as the media's bytes (symlinks followed, regular files only, capped).
    #[serde(default)]
    pub path: Option<PathBuf>,
    #[serde(default)]
    pub set: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub emoji: Option<String>,
    /// A voice note's words, already transcribed (no speech-to-text is needed for it).
    #[serde(default)]
    pub transcript: Option<String>,
    /// A voice or audio note's length in seconds.
    #[serde(default)]
    pub duration: Option<u32>,
}

/// The media kinds a line may name; any other is an error for that line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputMediaKind {
    Photo,
    Sticker,
    Voice,
    Audio,
    Video,
    Gif,
    Document,
}

impl From<InputMediaKind> for MediaKind {
    fn from(k: InputMediaKind) -> MediaKind {
        match k {
            InputMediaKind::Photo => MediaKind::Photo,
            InputMediaKind::Sticker => MediaKind::Sticker,
            InputMediaKind::Voice => MediaKind::Voice,
            InputMediaKind::Audio => MediaKind::Audio,
            InputMediaKind::Video => MediaKind::Video,
            InputMediaKind::Gif => MediaKind::Gif,
            InputMediaKind::Document => MediaKind::Document,
        }
    }
}

/// A valid `--jsonl` line: it has text or media, and its pause is in range.
#[derive(Debug, Clone, PartialEq)]
pub struct InputMessage {
    /// The sender's name; `None` (or blank in the input) means the playground's user.
    pub from: Option<String>,
    pub text: String,
    pub reply_to: Option<i64>,
    /// How long to let pass before the message arrives; at most [`MAX_AFTER_MS`].
    pub after: Duration,
    pub media: Option<InputMedia>,
}

/// Parses and validates one `--jsonl` line (already known to be text).
pub(crate) fn parse_jsonl(line: &str) -> Result<InputMessage, InputError> {
    let input: InputLine = serde_json::from_str(line).map_err(|e| match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            format!("not valid JSON: {e}")
        }
        _ => format!("not a valid message: {e}"),
    })?;
    let after = after_from(input.after_ms.as_ref())?;
    let media = voice_media(input.voice, input.duration, input.media)?;
    if input.text.is_empty() && media.is_none() {
        return Err(InputError::from(
            "a message needs `text`, `media` or `voice`",
        ));
    }
    if !input.text.is_empty() && media.as_ref().is_some_and(|m| m.transcript.is_some()) {
        return Err(InputError::from(
            "a voice note has no `text`: its words are its transcript",
        ));
    }
    Ok(InputMessage {
        from: input.from.filter(|f| !f.trim().is_empty()),
        text: input.text,
        reply_to: input.reply_to,
        after,
        media,
    })
}

/// The media of a line: `voice` (with `duration`) is a voice media object with that
/// transcript; a transcript is only a voice note's, and never empty.
fn voice_media(
    voice: Option<String>,
    duration: Option<u32>,
    media: Option<InputMedia>,
) -> Result<Option<InputMedia>, InputError> {
    let media = match (voice, media) {
        (Some(_), Some(_)) => {
            return Err(InputError::from("give `voice` or `media`, not both"));
        }
        (Some(words), None) => Some(InputMedia {
            kind: InputMediaKind::Voice,
            path: None,
            set: None,
            name: None,
            emoji: None,
            transcript: Some(words),
            duration,
        }),
        (None, media) => {
            if duration.is_some() {
                return Err(InputError::from(
                    "`duration` goes with `voice` (or inside `media`)",
                ));
            }
            media
        }
    };
    if let Some(m) = &media
        && let Some(words) = &m.transcript
    {
        if m.kind != InputMediaKind::Voice {
            return Err(InputError::from("only a voice note has a `transcript`"));
        }
        if words.trim().is_empty() {
            return Err(InputError::from("a voice note's words are empty"));
        }
    }
    Ok(media)
}

/// The pause an input line asks for: a whole number of milliseconds up to
/// [`MAX_AFTER_MS`].
fn after_from(value: Option<&serde_json::Number>) -> Result<Duration, InputError> {
    let Some(n) = value else {
        return Ok(Duration::ZERO);
    };
    match n.as_u64() {
        Some(ms) if ms <= MAX_AFTER_MS => Ok(Duration::from_millis(ms)),
        _ => Err(InputError::from(format!(
            "`after_ms` must be a whole number of milliseconds from 0 to {MAX_AFTER_MS} (7 days), not {n}"
        ))),
    }
}

/// Why a line of the playground's input is not usable: the message names the problem, as
/// the session prints it (`error` events with `--jsonl`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// The line itself is wrong, said in words.
    #[error("{0}")]
    Line(String),
    /// Standard input could not be read.
    #[error("{0}")]
    Read(#[from] std::io::Error),
    /// A media file named by the line cannot be read.
    #[error("media file: {0}")]
    Media(#[source] crate::ports::store::StoreError),
    /// The worker reading it stopped.
    #[error("{0}")]
    Join(#[from] tokio::task::JoinError),
}

impl From<String> for InputError {
    fn from(message: String) -> InputError {
        InputError::Line(message)
    }
}

impl From<&str> for InputError {
    fn from(message: &str) -> InputError {
        InputError::Line(message.to_string())
    }
}
