//! The prompt builder: turns a persona and a chat's history into an LLM request, laid out so
//! consecutive requests of a chat share the longest possible byte prefix (providers discount
//! repeated prefixes). The system instruction holds only what is stable for a chat (base
//! instructions, role prompts, persona, stickers, chat type): no clock, ids or counters. The
//! history follows, oldest first, one turn per message, inside a window that advances in
//! steps. Everything that changes per request (time, the message to answer) goes in one final
//! user turn. Pure: no I/O; the LLM planner calls it.

use std::fmt::Write as _;

use jiff::tz::TimeZone;

use crate::core::facts::MemoryView;
use crate::core::llm::{Part, Role, Turn};
use crate::core::media::{MediaDescriptions, MediaRecord, MediaStatus};
use crate::core::model::CuratedSticker;
use crate::core::model::{Chat, MediaInfo, MediaKind, Message, MessageId};
use crate::core::persona::{Persona, apply_placeholders};
use crate::core::plan::PlanRequest;

pub mod budget;

/// Our base instructions: the reply format and how to behave on Telegram.
pub(crate) const BASE_INSTRUCTIONS: &str = include_str!("base_instructions.md");

/// How the persona changes its own day (offered when it may; the days with their ids are in
/// the final turn).
const SCHEDULE_EDITS: &str = "You may change your own day (today and tomorrow) with `schedule` \
blocks, one per change, as `key: value` lines: `id` (of an activity listed under \"Your schedule\"), \
`start_time` and `end_time` (`HH:MM` local, or ISO 8601 with the date), `activity_name`, \
`responsiveness` (0 asleep to 100 chatting) and `description`. With an id the activity changes \
(an empty `activity_name` deletes it); without one a new activity is added. All of one answer's \
changes apply together and must leave no overlap (shorten the activity a new one cuts into); a \
gap is filled by the activity before it.\n\n# «schedule»\nid: act-20260301-1500\nstart_time: \
16:00\nactivity_name: Home\n\n# «schedule»\nstart_time: 15:00\nend_time: 16:00\nactivity_name: \
Dentist\nresponsiveness: 10\n\n";

/// A built prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub system: String,
    /// History turns then the final volatile user turn.
    pub turns: Vec<Turn>,
    /// First message id of the history window (remember it for the next request).
    pub window_start: Option<MessageId>,
}

/// Builds the request for one planning step from what the planner was given: at most
/// `history_size` messages of history, the window starting where it started last time
/// (`window_start`, first message id, when known) so the cached prefix stays stable.
pub fn build(
    input: &PlanRequest<'_>,
    history_size: usize,
    window_start: Option<MessageId>,
) -> Prompt {
    build_within(input, history_size, window_start, None).0
}

/// Like [`build`], and with a `budget` (tokens for the prompt, the answer's reserve already
/// taken off) fitted to it as [`budget`] says: what was left out is reported.
pub fn build_within(
    input: &PlanRequest<'_>,
    history_size: usize,
    window_start: Option<MessageId>,
    budget: Option<usize>,
) -> (Prompt, budget::Fitted) {
    let tz = input.persona.timezone.clone().unwrap_or(TimeZone::UTC);
    // What the summaries cover is not repeated: the history starts after the watermark.
    let history = match input.memory.watermark {
        Some(w) => &input.history[input.history.partition_point(|m| m.id <= w)..],
        None => input.history,
    };
    let start = self::window_start(history, history_size, window_start);
    let window = &history[start..];
    // The persona's retrieved documents open the conversation (they change only when it
    // retrieves again, so the prefix before the history stays stable meanwhile).
    let documents = input.moment.retrieved.len();
    let turns: Vec<Turn> = input
        .moment
        .retrieved
        .iter()
        .map(|d| document_turn(d, &tz))
        .chain(window.iter().map(|m| message_turn(m, &tz, input.media)))
        .collect();
    let context = Turn {
        role: Role::User,
        parts: vec![Part::Text(volatile_context(input, &tz))],
    };
    let system = system_instruction(input.persona, input.chat, input.stickers);
    let mut memory = String::new();
    memory_section(&mut memory, input.memory);
    let (system, turns, fitted) = match budget {
        Some(budget) => budget::fit(&system, &memory, turns, context, budget),
        None => {
            let mut turns = turns;
            turns.push(context);
            let system = system + &memory;
            let tokens = budget::prompt_tokens(&system, &turns);
            (
                system,
                turns,
                budget::Fitted {
                    tokens,
                    ..budget::Fitted::default()
                },
            )
        }
    };
    let prompt = Prompt {
        system,
        turns,
        window_start: window
            .get(fitted.turns_dropped.saturating_sub(documents))
            .map(|m| m.id),
    };
    (prompt, fitted)
}

/// How `retrieve` is offered (only to a persona with `# Allow Retrieve`).
const RETRIEVE_INSTRUCTIONS: &str = "\
You may also look something up: a `# «retrieve»` block with up to 3 http or https URLs, one \
per line (a search page works too, such as https://html.duckduckgo.com/html/?q=your+words). \
`file:schedule.json` gives your own schedule for today and tomorrow. You get another turn with \
what you retrieved, shown at the beginning of the conversation; a URL you already retrieved is \
not fetched again and gives no other turn.

";

/// A retrieved document as a turn opening the conversation: marked as the persona's own
/// lookup, never something a person in the chat said.
pub(crate) fn document_turn(d: &crate::core::retrieve::Document, tz: &TimeZone) -> Turn {
    let at = d.retrieved_at.to_zoned(tz.clone());
    let mut text = format!(
        "[retrieved] url={:?} time=\"{}\"",
        d.url,
        at.strftime("%Y-%m-%d %H:%M")
    );
    if let Some(f) = &d.final_url {
        let _ = write!(text, " final_url={f:?}");
    }
    text.push_str(
        "\n(A document you retrieved yourself with `retrieve`; nobody in this chat wrote or sent it.)\n",
    );
    text.push_str(&d.text);
    if d.truncated {
        text.push_str("\n[… cut: only the beginning is kept]");
    }
    Turn {
        role: Role::User,
        parts: vec![Part::Text(text)],
    }
}

/// The stable part: identical for every request of a chat while persona files are unchanged.
pub(crate) fn system_instruction(
    persona: &Persona,
    chat: &Chat,
    stickers: &[CuratedSticker],
) -> String {
    let user = chat.title.as_str();
    let mut s = String::with_capacity(8 * 1024);
    s.push_str(BASE_INSTRUCTIONS.trim());
    s.push_str("\n\n");
    if persona.allow_block {
        s.push_str(
            "You may also use `# «block»` and `# «unblock»` (direct chats only, no body) to stop \
             or resume hearing from the other person.\n\n",
        );
    }
    if persona.allow_clear_conversation {
        s.push_str(
            "You may also use `# «clear-conversation»` (direct chats only) to delete the whole \
             conversation for both sides.\n\n",
        );
    }
    if persona.allow_schedule_edits && persona.daily_schedule.is_some() {
        s.push_str(SCHEDULE_EDITS);
    }
    // Offered only to a persona that speaks (`# Voice`); the parser holds the rest to it.
    s.push_str(&persona.voice.prompt_text());
    if persona.allow_retrieve {
        s.push_str(RETRIEVE_INSTRUCTIONS);
    }
    for role in &persona.role_prompts {
        // A role prompt that only teaches `retrieve` is left out for a persona that may not.
        if !persona.allow_retrieve && crate::core::persona::only_teaches_retrieve(&role.text) {
            continue;
        }
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
    // The album (ids, kinds, one-line descriptions): only for a persona that has one, and it
    // changes only when the album does, so it stays in the stable prefix.
    s.push_str(&persona.album.prompt_section());
    s.push_str(
        "Answer every turn with task blocks only, or with nothing at all to stay silent. When \
         asked to respond to a message, staying silent is still fine if that suits you better.\n\n",
    );
    s.push_str("# This chat\n\n");
    if chat.kind.is_direct() {
        let _ = writeln!(
            s,
            "A direct (one-on-one) chat with {user} (chat id {}).",
            chat.id
        );
    } else {
        let _ = writeln!(
            s,
            "A group chat titled {user:?} (chat id {}). Several people talk here; answer only when it suits you.",
            chat.id
        );
    }
    s
}

/// The memory part of the instruction, after everything about the persona (which it never
/// changes): the owner's facts about the persona, then this chat's notes, then the facts about
/// each person here. A new fact changes the prompt from here on only.
fn memory_section(s: &mut String, memory: &MemoryView) {
    if memory.is_empty() {
        return;
    }
    if !memory.persona.trim().is_empty() {
        s.push_str("\n# More about you\n\n");
        s.push_str(memory.persona.trim());
        s.push('\n');
    }
    if !memory.summaries.trim().is_empty() {
        s.push_str("\n# Earlier in this chat\n\n");
        s.push_str(&memory.summaries);
    }
    if !memory.intentions.trim().is_empty() {
        s.push_str("\n# Your intentions (everywhere; `intend` with an id replaces or, empty, deletes one)\n\n");
        s.push_str(&memory.intentions);
    }
    if !memory.plans.trim().is_empty() {
        s.push_str(
            "\n# Your plans for this chat (`plan` with an id replaces or, empty, deletes one)\n\n",
        );
        s.push_str(&memory.plans);
    }
    if memory.chat.trim().is_empty() && memory.people.is_empty() {
        return;
    }
    s.push_str("\n# What you remember\n\n");
    if !memory.chat.trim().is_empty() {
        s.push_str("About this chat:\n");
        s.push_str(&memory.chat);
        s.push('\n');
    }
    for (id, name, lines) in &memory.people {
        let _ = writeln!(s, "About {name:?} (sender_id {id}):");
        s.push_str(lines);
        s.push('\n');
    }
}

/// How far the window start advances at once: a fifth of the window, at least 10 messages,
/// always leaving at least one message in the window.
pub(crate) fn window_step(size: usize) -> usize {
    let size = size.max(1);
    (size / 5).max(10).min(size - 1)
}

/// Index of the first history message to send. Keeps the previous start while the window
/// holds at most `size` messages; past that (or when the previous start is older than the
/// fetched history, which then holds `size` messages or more) it advances by
/// [`window_step`] at once, so consecutive requests share their prefix until the next step.
/// Fetching `size` messages is therefore enough to honour a remembered start.
pub(crate) fn window_start(history: &[Message], size: usize, previous: Option<MessageId>) -> usize {
    let size = size.max(1);
    let len = history.len();
    let keep = size - window_step(size);
    let kept_from = match previous {
        None => Some(0),
        Some(id) => match history.iter().position(|m| m.id >= id) {
            // The remembered start fell out of a full fetch: the window overflowed.
            Some(0) if history[0].id > id && len >= size => None,
            Some(i) => Some(i),
            // Every message is older than the remembered start (ids reset): start over.
            None => Some(0),
        },
    };
    match kept_from {
        Some(from) if len - from <= size => from,
        _ => len.saturating_sub(keep),
    }
}

/// One history message as a turn: others' messages are `user` turns, the agent's own are
/// `model` turns. The turn is one text part: the metadata line (so "see my message #12"
/// resolves), then the media placeholder rendered from its cached record, if any, then the
/// text, one per line (one part per message keeps the wire format compact).
pub(crate) fn message_turn(m: &Message, tz: &TimeZone, media: &MediaDescriptions) -> Turn {
    let mut text = metadata_header(m, tz);
    let mut content = false;
    if let Some(info) = &m.media {
        text.push('\n');
        text.push_str(&render_media(info, media.get(&info.unique_id)));
        content = true;
    }
    if !m.text.is_empty() {
        text.push('\n');
        text.push_str(&m.text);
        content = true;
    }
    if !content {
        text.push_str("\n[no content]");
    }
    Turn {
        role: if m.outgoing { Role::Model } else { Role::User },
        parts: vec![Part::Text(text)],
    }
}

/// The `[metadata]` line opening every history turn: sender, ids, reply link and the local
/// time in the persona's zone, e.g. `[metadata] sender="Bob" sender_id=2 message_id=7
/// reply_to=5 time="2024-05-01 14:03"`.
pub(crate) fn metadata_header(m: &Message, tz: &TimeZone) -> String {
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
pub(crate) fn render_media(media: &MediaInfo, record: Option<&MediaRecord>) -> String {
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
fn volatile_context(input: &PlanRequest<'_>, tz: &TimeZone) -> String {
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
            let _ = writeln!(s, "Respond to message {id}.");
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
    moment_lines(&mut s, input.moment);
    s
}

/// The moment's lines of the final turn: activity, a firing intent, the chat's intents, a
/// fresh start.
fn moment_lines(s: &mut String, m: &crate::core::plan::Moment) {
    if let Some(activity) = &m.activity {
        let _ = writeln!(s, "{activity}");
    }
    let follow_up = crate::core::retrieve::FOLLOW_UP_PREFIX;
    if let Some(f) = m.intent.as_ref().filter(|f| f.id.starts_with(follow_up)) {
        let _ = writeln!(
            s,
            "{}\nAnswer the conversation with what you learnt from them (in your own words), or stay silent if nothing is worth saying.",
            f.text
        );
    } else if let Some(f) = m.intent.as_ref().filter(|f| f.id.starts_with("xsend-")) {
        let _ = writeln!(
            s,
            "A note to yourself, left in another of your chats (the people here never see it): {}\nAct on it in this chat as it says, or stay silent if it no longer makes sense.",
            f.text
        );
    } else if let Some(f) = &m.intent {
        let _ = writeln!(
            s,
            "A scheduled intent of yours fires now ({}): {}\nDo what it says in this chat, or stay silent if it no longer makes sense.",
            f.id, f.text
        );
    }
    if !m.intents.is_empty() {
        let _ = writeln!(
            s,
            "Your scheduled intents in this chat:\n{}",
            m.intents.trim_end()
        );
    }
    if let Some(days) = &m.schedule {
        let _ = writeln!(
            s,
            "Your schedule (you may change today and tomorrow with `schedule` tasks):\n{}",
            days.trim_end()
        );
    }
    if let Some(start) = &m.fresh_start {
        s.push_str(
            "This conversation is starting anew: you remember nothing of earlier talks here.\n",
        );
        if !start.is_empty() {
            let _ = writeln!(s, "{start}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{ChatId, Sender};
    use jiff::Timestamp;

    /// A test persona: the required headings plus `extra`, read without role prompt files.
    fn test_persona(extra: &str) -> Persona {
        struct NoFiles;
        impl crate::core::persona::ReadText for NoFiles {
            fn read_text(
                &self,
                _: &std::path::Path,
            ) -> Result<String, crate::core::persona::ReadError> {
                Err(crate::core::persona::ReadError::TooLarge(0))
            }
        }
        let source = format!(
            "# Agent Name\nTess\n\n# Agent Phone\n+15550100042\n\n{extra}# Agent Instructions\nHi.\n"
        );
        let entry = crate::core::persona::parse_persona_with(
            std::path::Path::new("t.md"),
            &source,
            &[],
            &NoFiles,
        );
        entry
            .persona
            .unwrap_or_else(|| panic!("{:?}", entry.problems))
    }

    fn bob() -> Chat {
        Chat {
            id: ChatId(1),
            kind: crate::core::model::ChatKind::Direct,
            title: "Bob".into(),
        }
    }

    /// The model is told about block and unblock only when the persona allows them.
    #[test]
    fn block_is_offered_only_when_the_persona_allows_it() {
        let text = |extra: &str| system_instruction(&test_persona(extra), &bob(), &[]);
        assert!(text("").contains("«block»"));
        assert!(!text("# Allow Block\nfalse\n\n").contains("«block»"));
    }

    /// `retrieve` is described only to a persona with `# Allow Retrieve`, and a role prompt
    /// that teaches nothing but `retrieve` (the original's Task-Retrieve) is left out without it.
    #[test]
    fn retrieve_is_offered_only_when_the_persona_allows_it() {
        let chat = bob();
        let persona = |extra: &str| {
            let mut persona = test_persona(extra);
            persona.role_prompts.push(crate::core::persona::RolePrompt {
                name: "Task-Retrieve".into(),
                path: "Task-Retrieve.md".into(),
                text: "<!-- SCHEMA_TASKS: retrieve -->\nFetch pages with RETRIEVE_TAUGHT.".into(),
            });
            persona
        };
        let off = system_instruction(&persona(""), &chat, &[]);
        assert!(
            !off.contains("«retrieve»") && !off.contains("RETRIEVE_TAUGHT"),
            "{off}"
        );
        let on = system_instruction(&persona("# Allow Retrieve\n\n"), &chat, &[]);
        assert!(
            on.contains("«retrieve»") && on.contains("RETRIEVE_TAUGHT"),
            "{on}"
        );
    }

    fn msg(id: i64, outgoing: bool) -> Message {
        Message {
            id: MessageId(id),
            chat: ChatId(1),
            sender: Sender {
                id: if outgoing { 1 } else { 2 },
                name: "x".into(),
                username: None,
                is_bot: false,
                service: false,
                deleted: false,
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
        st.sticker = Some(crate::core::model::StickerInfo {
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
    fn window_keeps_its_start_until_the_cap_then_steps_at_once() {
        let h =
            |from: i64, to: i64| -> Vec<Message> { (from..=to).map(|i| msg(i, false)).collect() };
        assert_eq!(window_step(20), 10, "at least 10 messages");
        assert_eq!(window_step(500), 100, "a fifth");
        assert_eq!(window_step(5), 4, "never the whole window");
        assert_eq!(window_start(&h(1, 20), 20, None), 0);
        // Over the cap of 20: keep 10, starting at message 12.
        assert_eq!(window_start(&h(1, 21), 20, Some(MessageId(1))), 11);
        // The next requests keep that start until the window is full again.
        assert_eq!(window_start(&h(1, 31), 20, Some(MessageId(12))), 11);
        // A fetch of exactly `size` messages that no longer holds the start: step again.
        assert_eq!(window_start(&h(13, 32), 20, Some(MessageId(12))), 10);
        // The same fetch still holding the start: kept.
        assert_eq!(window_start(&h(12, 31), 20, Some(MessageId(12))), 0);
        // A short history that starts after the remembered id (deleted messages): kept whole.
        assert_eq!(window_start(&h(15, 20), 20, Some(MessageId(12))), 0);
    }
}
