//! The prompt builder: turns a persona and a chat's history into an LLM request, laid out so
//! consecutive requests of a chat share the longest possible byte prefix (providers discount
//! repeated prefixes). The system instruction holds only what is stable for a chat (base
//! instructions, role prompts, persona, stickers, chat type): no clock, ids or counters. The
//! history follows, oldest first, one turn per message, inside a window that advances in
//! steps. Everything that changes per request (time, the message to answer) goes in one final
//! user turn. Pure: no I/O; the LLM planner calls it.

use std::fmt::Write as _;

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::llm::{Part, Role, Turn};
use crate::media::{MediaDescriptions, MediaRecord, MediaStatus};
use crate::persona::{Persona, apply_placeholders};
use crate::stickers::CuratedSticker;
use crate::telegram::{Chat, MediaInfo, MediaKind, Message, MessageId};

/// Our base instructions: the reply format and how to behave on Telegram.
pub const BASE_INSTRUCTIONS: &str = include_str!("base_instructions.md");

/// Everything the builder needs.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    pub persona: &'a Persona,
    pub chat: &'a Chat,
    /// Oldest first.
    pub history: &'a [Message],
    pub target: Option<MessageId>,
    pub now: Timestamp,
    /// Most messages sent as history.
    pub history_size: usize,
    /// First message id of the window used last time for this chat, if known.
    pub window_start: Option<MessageId>,
    /// Cached media records by unique id (rendering never does I/O).
    pub media: &'a MediaDescriptions,
    /// The persona's curated stickers (with cached descriptions).
    pub stickers: &'a [CuratedSticker],
}

/// A built prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub system: String,
    /// History turns then the final volatile user turn.
    pub turns: Vec<Turn>,
    /// First message id of the history window (remember it for the next request).
    pub window_start: Option<MessageId>,
}

/// Builds the request for one planning step.
pub fn build(input: &PromptInput<'_>) -> Prompt {
    let tz = input.persona.timezone.clone().unwrap_or(TimeZone::UTC);
    let start = window_start(input.history, input.history_size, input.window_start);
    let window = &input.history[start..];
    let mut turns: Vec<Turn> = window
        .iter()
        .map(|m| message_turn(m, &tz, input.media))
        .collect();
    turns.push(Turn {
        role: Role::User,
        parts: vec![Part::Text(volatile_context(input, &tz))],
    });
    Prompt {
        system: system_instruction(input.persona, input.chat, input.stickers),
        turns,
        window_start: window.first().map(|m| m.id),
    }
}

/// The stable part: identical for every request of a chat while persona files are unchanged.
pub fn system_instruction(persona: &Persona, chat: &Chat, stickers: &[CuratedSticker]) -> String {
    let user = chat.title.as_str();
    let mut s = String::with_capacity(8 * 1024);
    s.push_str(BASE_INSTRUCTIONS.trim());
    s.push_str("\n\n");
    if persona.allow_clear_conversation {
        s.push_str(
            "You may also use `# «clear-conversation»` (direct chats only) to delete the whole \
             conversation for both sides.\n\n",
        );
    }
    for role in &persona.role_prompts {
        s.push_str(apply_placeholders(role.text.trim(), &persona.name, user).as_str());
        s.push_str("\n\n");
    }
    let _ = writeln!(s, "# Who you are\n");
    s.push_str(apply_placeholders(persona.instructions.trim(), &persona.name, user).as_str());
    s.push_str("\n\n");
    if !stickers.is_empty() {
        // Set, name and (once described) what it shows. Changes only when the cache of
        // curated stickers does, so it stays part of the stable prefix.
        s.push_str("# Stickers you may send\n\n");
        for st in stickers {
            match &st.description {
                Some(d) => {
                    let _ = writeln!(s, "- {} :: {} - {}", st.set, st.name, d.trim());
                }
                None => {
                    let _ = writeln!(s, "- {} :: {}", st.set, st.name);
                }
            }
        }
        s.push_str(
            "You may also send a sticker you saw in this chat, naming its set and name.\n\n",
        );
    } else if !persona.stickers.is_empty() || !persona.sticker_sets.is_empty() {
        s.push_str("# Stickers you may send\n\n");
        for st in &persona.stickers {
            let _ = writeln!(s, "- {} :: {}", st.set, st.name);
        }
        for set in &persona.sticker_sets {
            let _ = writeln!(
                s,
                "- any sticker of the set {set} (name it by its emoji: `{set}` then the emoji)"
            );
        }
        s.push_str(
            "You may also send a sticker you saw in this chat, naming its set and name.\n\n",
        );
    }
    s.push_str("# This chat\n\n");
    if chat.kind.is_direct() {
        let _ = writeln!(s, "A direct (one-on-one) chat with {user}.");
    } else {
        let _ = writeln!(
            s,
            "A group chat titled {user:?}. Several people talk here; answer only when it suits you."
        );
    }
    s
}

/// Index of the first history message to send. Keeps the previous start while the window
/// holds at most `size` messages; past that, drops the oldest fifth of the window at once, so
/// consecutive requests share their prefix until the next step.
pub fn window_start(history: &[Message], size: usize, previous: Option<MessageId>) -> usize {
    let size = size.max(1);
    let len = history.len();
    let kept_from = previous
        .and_then(|id| history.iter().position(|m| m.id >= id))
        .unwrap_or(0);
    if len - kept_from <= size {
        return kept_from;
    }
    // Advance: keep four fifths of the cap, so the next steps come `size / 5` messages later.
    let keep = size - size / 5;
    len - keep.max(1)
}

/// One history message as a turn: others' messages are `user` turns, the agent's own are
/// `model` turns; both open with a metadata header (so "see my message #12" resolves). Media
/// render from their cached record, if any.
pub fn message_turn(m: &Message, tz: &TimeZone, media: &MediaDescriptions) -> Turn {
    let mut parts = Vec::with_capacity(3);
    parts.push(Part::Text(metadata_header(m, tz)));
    if let Some(info) = &m.media {
        parts.push(Part::Text(render_media(info, media.get(&info.unique_id))));
    }
    if !m.text.is_empty() {
        parts.push(Part::Text(m.text.clone()));
    }
    if parts.len() == 1 {
        parts.push(Part::Text("[no content]".into()));
    }
    Turn {
        role: if m.outgoing { Role::Model } else { Role::User },
        parts,
    }
}

/// The `[metadata]` line opening every history turn: sender, ids, reply link and the local
/// time in the persona's zone, e.g. `[metadata] sender="Bob" sender_id=2 message_id=7
/// reply_to=5 time="2024-05-01 14:03"`.
pub fn metadata_header(m: &Message, tz: &TimeZone) -> String {
    let mut h = format!(
        "[metadata] sender={:?} sender_id={} message_id={}",
        m.sender.name, m.sender.id, m.id
    );
    if let Some(u) = &m.sender.username {
        let _ = write!(h, " username=@{u}");
    }
    if m.sender.is_bot {
        h.push_str(" bot=true");
    }
    if let Some(r) = m.reply_to {
        let _ = write!(h, " reply_to={r}");
    }
    let local = m.date.to_zoned(tz.clone());
    let _ = write!(h, " time=\"{}\"", local.strftime("%Y-%m-%d %H:%M"));
    h
}

/// A compact, unambiguous placeholder for media, with its cached description when there is
/// one: `[sticker set=… name=… emoji=… description=…]`, `[photo description=…]`,
/// `[voice duration=…s transcript=…]`, otherwise the kind and why it is not described.
pub fn render_media(media: &MediaInfo, record: Option<&MediaRecord>) -> String {
    let mut s = format!("[{}", media.kind.as_str());
    if let (MediaKind::Sticker, Some(st)) = (&media.kind, &media.sticker) {
        if let Some(set) = &st.set {
            let _ = write!(s, " set={set:?}");
        }
        let _ = write!(s, " name={:?}", st.name);
        if let Some(e) = &st.emoji {
            let _ = write!(s, " emoji={e}");
        }
    }
    if let Some(d) = media.duration_secs {
        let _ = write!(s, " duration={d}s");
    }
    if let Some(f) = &media.file_name {
        let _ = write!(s, " file={f:?}");
    }
    let label = match media.kind {
        MediaKind::Voice | MediaKind::Audio => "transcript",
        MediaKind::Document => "content",
        _ => "description",
    };
    match record {
        Some(r) => match (r.shown_description(), r.status) {
            (Some(d), _) => {
                let _ = write!(s, " {label}={d:?}");
            }
            (None, MediaStatus::NotUnderstood) => s.push_str(" (could not be understood)"),
            (None, MediaStatus::Unsupported) => match media.kind {
                MediaKind::Sticker => {}
                MediaKind::Voice | MediaKind::Audio => s.push_str(" (not transcribed)"),
                _ => s.push_str(" (not described)"),
            },
            (None, _) => s.push_str(" (not described yet)"),
        },
        None => s.push_str(" (not described yet)"),
    }
    s.push(']');
    s
}

/// The final user turn: what changes from one request to the next.
fn volatile_context(input: &PromptInput<'_>, tz: &TimeZone) -> String {
    let now = input.now.to_zoned(tz.clone());
    let mut s = String::from("[context]\n");
    let _ = writeln!(
        s,
        "Current time: {} ({}).",
        now.strftime("%A %-d %B %Y, %H:%M"),
        tz.iana_name().unwrap_or("UTC")
    );
    let target = input
        .target
        .filter(|id| input.history.iter().any(|m| m.id == *id))
        .or_else(|| {
            if input.chat.kind.is_direct() {
                input
                    .history
                    .iter()
                    .rev()
                    .find(|m| !m.outgoing)
                    .map(|m| m.id)
            } else {
                None
            }
        });
    match target {
        Some(id) => {
            let _ = writeln!(
                s,
                "Respond to message {id} (or stay silent if that suits you better)."
            );
        }
        None => s.push_str(
            "Nothing in particular needs an answer; stay silent unless you want to speak.\n",
        ),
    }
    if !input.history.iter().any(|m| m.outgoing) {
        s.push_str(
            "You have not said anything in this chat yet: this would be your first message here.\n",
        );
    }
    s.push_str("Answer with task blocks only, or with nothing at all to stay silent.");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telegram::{ChatId, Sender};

    fn msg(id: i64, outgoing: bool) -> Message {
        Message {
            id: MessageId(id),
            chat: ChatId(1),
            sender: Sender {
                id: if outgoing { 1 } else { 2 },
                name: "x".into(),
                username: None,
                is_bot: false,
            },
            outgoing,
            text: format!("m{id}"),
            mentions: vec![],
            reply_to: None,
            date: Timestamp::UNIX_EPOCH,
            media: None,
        }
    }

    fn media(kind: MediaKind) -> MediaInfo {
        MediaInfo {
            kind,
            unique_id: "u1".into(),
            mime: None,
            size: None,
            duration_secs: None,
            file_name: None,
            sticker: None,
        }
    }

    fn record(kind: MediaKind, status: MediaStatus, description: Option<&str>) -> MediaRecord {
        serde_json::from_value(serde_json::json!({
            "unique_id": "u1", "kind": kind, "status": status, "description": description,
        }))
        .unwrap_or_else(|e| panic!("record: {e}"))
    }

    #[test]
    fn media_render_compactly_from_their_records() {
        use MediaKind::*;
        let ok = |k, d| record(k, MediaStatus::Ok, Some(d));
        assert_eq!(
            render_media(&media(Photo), Some(&ok(Photo, "a red bike"))),
            "[photo description=\"a red bike\"]"
        );
        assert_eq!(
            render_media(&media(Photo), None),
            "[photo (not described yet)]"
        );
        let mut st = media(Sticker);
        st.sticker = Some(crate::telegram::StickerInfo {
            set: Some("Cats".into()),
            name: "wave".into(),
            emoji: Some("👋".into()),
        });
        assert_eq!(
            render_media(&st, Some(&ok(Sticker, "a cat waving"))),
            "[sticker set=\"Cats\" name=\"wave\" emoji=👋 description=\"a cat waving\"]"
        );
        assert_eq!(
            render_media(&st, Some(&record(Sticker, MediaStatus::Unsupported, None))),
            "[sticker set=\"Cats\" name=\"wave\" emoji=👋]"
        );
        let mut voice = media(Voice);
        voice.duration_secs = Some(3);
        assert_eq!(
            render_media(&voice, Some(&ok(Voice, "hi there"))),
            "[voice duration=3s transcript=\"hi there\"]"
        );
        let mut doc = media(Document);
        doc.file_name = Some("a.zip".into());
        assert_eq!(
            render_media(
                &doc,
                Some(&record(Document, MediaStatus::Unsupported, None))
            ),
            "[document file=\"a.zip\" (not described)]"
        );
        assert_eq!(
            render_media(
                &media(Gif),
                Some(&record(Gif, MediaStatus::NotUnderstood, None))
            ),
            "[gif (could not be understood)]"
        );
        assert_eq!(
            render_media(
                &media(RoundVideo),
                Some(&record(RoundVideo, MediaStatus::Error, None))
            ),
            "[round_video (not described yet)]"
        );
    }

    #[test]
    fn window_keeps_its_start_until_the_cap_then_steps_by_a_fifth() {
        let history: Vec<Message> = (1..=10).map(|i| msg(i, false)).collect();
        assert_eq!(window_start(&history, 10, None), 0);
        let longer: Vec<Message> = (1..=11).map(|i| msg(i, false)).collect();
        // Over the cap of 10: keep 8, starting at message 4.
        assert_eq!(window_start(&longer, 10, Some(MessageId(1))), 3);
        // The next request (12 messages) keeps that start.
        let next: Vec<Message> = (1..=12).map(|i| msg(i, false)).collect();
        assert_eq!(window_start(&next, 10, Some(MessageId(4))), 3);
        // Fetched history that no longer holds the old start begins at its oldest message.
        let shifted: Vec<Message> = (5..=12).map(|i| msg(i, false)).collect();
        assert_eq!(window_start(&shifted, 10, Some(MessageId(4))), 0);
    }
}
