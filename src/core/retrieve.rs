//! `retrieve`: the persona looks something up. This module owns the rules that need no I/O:
//! what a plan may ask for (at most [`MAX_URLS`] targets, `http`/`https` URLs or one of the
//! `file:` resources of [`FileResource`]), why a target is refused ([`Refused`]), the
//! documents kept per chat ([`Documents`]: at most [`MAX_DOCS`], each at most
//! [`MAX_DOC_CHARS`] characters, for [`WINDOW`] — the conversation window in which a URL is
//! retrieved once), and `file:schedule.json`'s JSON. It fetches nothing and checks no address:
//! the network and its guards are the retrieve port's (`ports::retrieve`, the adapters in
//! `adapters::retrieve`); the `retrieve` handler drives them and the scheduler asks for the
//! follow-up plan (`scheduler::retrieve`).

use jiff::{SignedDuration, Timestamp};
use serde::{Deserialize, Serialize};

use crate::core::presence::Presence;

/// Most targets one plan may retrieve (the original's limit); more are refused.
pub const MAX_URLS: usize = 3;
/// Longest URL accepted, in bytes.
pub const MAX_URL_BYTES: usize = 2048;
/// Most characters of a document's text kept (and shown to the model).
pub const MAX_DOC_CHARS: usize = 8_000;
/// Most documents kept per chat (the oldest go first).
pub const MAX_DOCS: usize = 5;
/// How long a document stays in a chat's conversation: the window within which its URL is not
/// fetched again.
pub const WINDOW: SignedDuration = SignedDuration::from_hours(24);
/// Fetches per persona per UTC day without `# Retrieve Daily Cap`.
pub const DEFAULT_DAILY_CAP: u32 = 20;
/// Highest `# Retrieve Daily Cap` accepted.
pub const MAX_DAILY_CAP: u32 = 500;
/// The id prefix of the follow-up plan a retrieval asks for (a `Fired` moment).
pub const FOLLOW_UP_PREFIX: &str = "retrieve-";

/// A `file:` resource the original offers: read from the persona's own state, never the disk
/// by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileResource {
    /// `file:schedule.json`: the persona's schedule for today and tomorrow.
    Schedule,
    /// `file:media.json`: the persona's album (none yet: it answers that there is none).
    Media,
}

impl FileResource {
    /// Its name after `file:`.
    pub fn name(self) -> &'static str {
        match self {
            FileResource::Schedule => "schedule.json",
            FileResource::Media => "media.json",
        }
    }

    fn from_name(name: &str) -> Option<FileResource> {
        [FileResource::Schedule, FileResource::Media]
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// What a target names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An `http` or `https` URL (only its form is checked here).
    Web(String),
    File(FileResource),
}

/// Why a target (or a whole retrieval) is refused; logged with an `retrieve_refused` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the persona does not have `# Allow Retrieve`")]
    NotAllowed,
    #[error("more than {MAX_URLS} URLs in one plan: {0} left out")]
    TooMany(String),
    #[error("{0}: only http and https URLs (and file:schedule.json, file:media.json)")]
    Scheme(String),
    #[error("{0}: no such file resource (file:schedule.json, file:media.json)")]
    UnknownFile(String),
    #[error("a URL over {MAX_URL_BYTES} bytes or with spaces or control characters")]
    Malformed,
    #[error("the daily cap of {0} retrievals is reached")]
    DailyCap(u32),
    #[error("{url}: {why}")]
    Fetch { url: String, why: String },
}

/// Reads one target as the model wrote it (trimmed; `<…>` around it dropped).
pub fn target(raw: &str) -> Result<Target, Refused> {
    let raw = raw.trim().trim_start_matches('<').trim_end_matches('>');
    if raw.is_empty()
        || raw.len() > MAX_URL_BYTES
        || raw.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Refused::Malformed);
    }
    let lower = raw.to_ascii_lowercase();
    if let Some(name) = lower.strip_prefix("file:") {
        return FileResource::from_name(name)
            .map(Target::File)
            .ok_or_else(|| Refused::UnknownFile(raw.to_owned()));
    }
    let rest = lower
        .strip_prefix("https://")
        .or_else(|| lower.strip_prefix("http://"));
    match rest {
        Some(rest) if !rest.is_empty() && !rest.starts_with('/') => Ok(Target::Web(raw.to_owned())),
        _ => Err(Refused::Scheme(excerpt(raw))),
    }
}

/// At most 80 characters of `s`, for a log line.
pub fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(80).collect();
    if s.chars().nth(80).is_some() {
        out.push('…');
    }
    out
}

/// One retrieved document as kept for a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// The URL as the model asked for it (`file:…` for a resource).
    pub url: String,
    /// Where the fetch ended, when a redirect moved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_url: Option<String>,
    pub retrieved_at: Timestamp,
    /// The `retrieve` task that fetched it (a task run again after a crash finds its own).
    pub task: String,
    /// Readable text, at most [`MAX_DOC_CHARS`] characters.
    pub text: String,
    /// The text was cut to [`MAX_DOC_CHARS`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl Document {
    /// A document of `text`, cut to [`MAX_DOC_CHARS`] characters.
    pub fn new(url: &str, task: &str, text: &str, at: Timestamp) -> Document {
        let truncated = text.chars().nth(MAX_DOC_CHARS).is_some();
        Document {
            url: url.to_owned(),
            final_url: None,
            retrieved_at: at,
            task: task.to_owned(),
            text: text.chars().take(MAX_DOC_CHARS).collect(),
            truncated,
        }
    }
}

/// A chat's retrieved documents, oldest first (the file `<agent>/retrieved/<chat>.json`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Documents {
    pub docs: Vec<Document>,
}

impl Documents {
    /// The documents still in the conversation window at `now`, oldest first.
    pub fn current(&self, now: Timestamp) -> impl Iterator<Item = &Document> {
        self.docs
            .iter()
            .filter(move |d| now.duration_since(d.retrieved_at) < WINDOW)
    }

    /// The document of `url` in the window, if it was retrieved there.
    pub fn find(&self, url: &str, now: Timestamp) -> Option<&Document> {
        self.current(now).find(|d| d.url == url)
    }

    /// Adds `doc`, dropping what left the window and the oldest beyond [`MAX_DOCS`].
    pub fn add(&mut self, doc: Document, now: Timestamp) {
        self.docs
            .retain(|d| now.duration_since(d.retrieved_at) < WINDOW && d.url != doc.url);
        self.docs.push(doc);
        let over = self.docs.len().saturating_sub(MAX_DOCS);
        self.docs.drain(..over);
    }
}

/// `file:schedule.json`: the persona's activities today and tomorrow in its zone, as the
/// original renders them (`id`, `start_time`, `end_time`, `activity_name`, `responsiveness`,
/// `description`).
pub fn schedule_json(presence: &Presence, now: Timestamp) -> String {
    let (today, _) = presence.local(now);
    let mut items = Vec::new();
    for date in [Some(today), today.tomorrow().ok()].into_iter().flatten() {
        let day = presence.day(date);
        for a in &day.activities {
            let at = |minute: u16| {
                let (date, minute) = match minute {
                    1440.. => (date.tomorrow().unwrap_or(date), 0),
                    m => (date, m),
                };
                let hour = i8::try_from(minute / 60).unwrap_or(0);
                let min = i8::try_from(minute % 60).unwrap_or(0);
                date.at(hour, min, 0, 0)
                    .to_zoned(presence.tz.clone())
                    .map(|z| z.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string())
                    .unwrap_or_default()
            };
            items.push(serde_json::json!({
                // The id a `schedule` change names the activity by.
                "id": crate::core::presence::edit::activity_id(date, a.start),
                "start_time": at(a.start),
                "end_time": at(a.end),
                "activity_name": a.name,
                "responsiveness": a.responsiveness,
                "description": a.description,
            }));
        }
    }
    serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".to_owned())
}

/// `file:media.json` for a persona without an album: it says there is none.
pub const NO_ALBUM: &str = "[] (you have no album of photos or media to send)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_web_urls_or_known_files() {
        assert_eq!(
            target(" https://example.org/a?b=c "),
            Ok(Target::Web("https://example.org/a?b=c".into()))
        );
        assert_eq!(
            target("<http://example.org>"),
            Ok(Target::Web("http://example.org".into()))
        );
        assert_eq!(
            target("file:schedule.json"),
            Ok(Target::File(FileResource::Schedule))
        );
        assert_eq!(
            target("file:media.json"),
            Ok(Target::File(FileResource::Media))
        );
        assert!(matches!(
            target("file:/etc/passwd"),
            Err(Refused::UnknownFile(_))
        ));
        for bad in [
            "ftp://x.org",
            "gopher://x",
            "javascript:alert(1)",
            "https:///x",
            "x.org",
        ] {
            assert!(matches!(target(bad), Err(Refused::Scheme(_))), "{bad}");
        }
        assert_eq!(target("https://a b"), Err(Refused::Malformed));
        assert_eq!(
            target(&format!("https://x.org/{}", "a".repeat(MAX_URL_BYTES))),
            Err(Refused::Malformed)
        );
    }

    /// `file:schedule.json` lists today's and tomorrow's activities in the persona's zone, in
    /// the original's fields.
    #[test]
    fn the_schedule_reads_as_the_originals_json() {
        use crate::core::presence::{Activity, DaySchedule, Source};
        let tz = jiff::tz::TimeZone::get("Europe/Berlin").unwrap_or(jiff::tz::TimeZone::UTC);
        let date = jiff::civil::date(2026, 3, 1);
        let activity = |start, end, name: &str| Activity {
            start,
            end,
            responsiveness: 40,
            name: name.into(),
            description: format!("{name} time"),
        };
        let day = DaySchedule {
            date,
            source: Source::Edited,
            activities: vec![activity(0, 540, "sleep"), activity(540, 1440, "work")],
        };
        let presence = Presence::new(tz.clone(), [day]);
        let noon = date
            .at(12, 0, 0, 0)
            .to_zoned(tz)
            .map(|z| z.timestamp())
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let json: serde_json::Value =
            serde_json::from_str(&schedule_json(&presence, noon)).unwrap_or_default();
        let items = json.as_array().cloned().unwrap_or_default();
        assert!(items.len() >= 3, "{json}");
        assert_eq!(items[1]["activity_name"], "work");
        assert_eq!(items[1]["start_time"], "2026-03-01T09:00:00+01:00");
        assert_eq!(items[1]["end_time"], "2026-03-02T00:00:00+01:00");
        assert_eq!(items[1]["responsiveness"], 40);
        assert_eq!(items[1]["description"], "work time");
        // The id a `schedule` change names the activity by.
        assert_eq!(items[1]["id"], "act-20260301-0900");
        // Tomorrow follows (its fallback when it has no file).
        assert!(
            items[2]["start_time"]
                .as_str()
                .is_some_and(|t| t.starts_with("2026-03-02"))
        );
    }

    #[test]
    fn documents_are_bounded_and_leave_the_window() {
        let t0 = Timestamp::UNIX_EPOCH;
        let mut docs = Documents::default();
        for i in 0..(MAX_DOCS + 2) {
            docs.add(
                Document::new(&format!("https://x/{i}"), "t", "text", t0),
                t0,
            );
        }
        assert_eq!(docs.docs.len(), MAX_DOCS);
        assert!(docs.find("https://x/0", t0).is_none());
        assert!(
            docs.find(&format!("https://x/{}", MAX_DOCS + 1), t0)
                .is_some()
        );
        let later = t0 + WINDOW;
        assert_eq!(docs.current(later).count(), 0);
        let long = Document::new("u", "t", &"é".repeat(MAX_DOC_CHARS + 5), t0);
        assert!(long.truncated);
        assert_eq!(long.text.chars().count(), MAX_DOC_CHARS);
    }
}
