//! Fuzz entry points: one function per parser of outside input, taking arbitrary bytes.
//! Each must return for any input (no panic, no hang, bounded memory) and checks, with
//! `assert!`, the promises its parser makes: a graph that loads saves and loads back the
//! same; a model reply never yields more actions than the cap, an over-long send, a reply to
//! an unknown message or a forbidden task; outbound entities stay inside their text; a
//! persona is usable exactly when it has no error. A failed assertion is a finding, so these
//! functions panic by design and are never called by the daemon. Called by the targets under
//! `fuzz/` (libFuzzer) and by `tests/fuzz_corpus.rs`, which replays the seeds and every
//! input that once failed.

use std::collections::HashSet;
use std::io::BufRead as _;
use std::path::Path;

use jiff::Timestamp;

use crate::adapters::export;
use crate::adapters::mtproto::map::{self, MapContext, SerializedMapping};
use crate::app::playground::input::{self, RawLine};
use crate::core::blocks::{self, ParseOptions, TELEGRAM_TEXT_LIMIT_UTF16};
use crate::core::graph::codec;
use crate::core::group::classifier;
use crate::core::model::{ChatId, ChatRef, MessageId};
use crate::core::persona;
use crate::core::plan::Action;

mod journal_reader;
pub use journal_reader::journal;

/// A fuzz entry point: takes any bytes, panics only on a finding.
pub(crate) type Target = fn(&[u8]);

/// The targets by name, as `fuzz/` and the corpus test know them.
pub const TARGETS: &[(&str, Target)] = &[
    ("graph_codec", graph_codec),
    ("model_output", model_output),
    ("markdown", markdown),
    ("persona", persona_file),
    ("jsonl_input", jsonl_input),
    ("tg_export", tg_export),
    ("telegram", telegram),
    ("presence_files", presence_files),
    ("journal", journal),
    ("graph_pack", graph_pack),
];

/// A graph pack as the start reads it (`store::pack::parse`): on any bytes it returns; what
/// it accepts is whole (every entry's range inside the input, a valid name, UTF-8 text), and
/// the entries packed again read back the same. A pack that lost an entry's bytes, or
/// accepted one cut short, would bring a graph back different from its file.
pub fn graph_pack(data: &[u8]) {
    use crate::adapters::store::pack;
    let Ok(entries) = pack::parse(data) else {
        return;
    };
    let files: Vec<(&str, &[u8])> = entries
        .iter()
        .map(|(name, range)| match data.get(range.clone()) {
            Some(bytes) => (name.as_str(), bytes),
            None => panic!("entry {name} lies outside the pack"),
        })
        .collect();
    for (name, bytes) in &files {
        assert!(
            name.ends_with(".md") && !name.contains('/'),
            "bad name {name:?}"
        );
        assert!(
            std::str::from_utf8(bytes).is_ok(),
            "entry {name} is not UTF-8"
        );
    }
    let again = pack::encode(&files);
    let back = match pack::parse(&again) {
        Ok(b) => b,
        Err(e) => panic!("a pack that read does not read again packed: {e}"),
    };
    let back: Vec<(&str, &[u8])> = back
        .iter()
        .map(|(n, r)| (n.as_str(), again.get(r.clone()).unwrap_or_default()))
        .collect();
    assert_eq!(back, files, "a pack packed again reads back different");
}

/// A graph file as `store` reads it: decoding validates, and a graph that decodes encodes
/// and decodes back equal; the scheduler's queries on it return.
pub fn graph_codec(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(graph) = codec::decode(text) else {
        return;
    };
    let encoded = match codec::encode(&graph) {
        Ok(e) => e,
        Err(e) => panic!("a graph that loaded does not save: {e}"),
    };
    match codec::decode(&encoded) {
        Ok(back) => assert_eq!(back, graph, "a saved graph reads back different"),
        Err(e) => panic!("a saved graph does not load: {e}\n{encoded}"),
    }
    let now = Timestamp::UNIX_EPOCH;
    let mut g = graph;
    g.reset_active(now);
    g.arm_waits(now);
    let _ = g.ready_task(now);
    let _ = g.next_deadline();
    let _ = (g.open_tasks(), g.is_finished(), g.answers_inbound());
}

/// A model's reply, read as task blocks (or a JSON task array) and as a classifier answer.
pub fn model_output(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let known: HashSet<MessageId> = [1, 2, 3].into_iter().map(MessageId).collect();
    let opts = ParseOptions {
        allow_clear_conversation: data.first().is_some_and(|b| b & 1 == 1),
        allow_voice: data.first().is_some_and(|b| b & 2 == 2),
        allow_schedule: data.first().is_some_and(|b| b & 4 == 4),
        allow_retrieve: data.first().is_some_and(|b| b & 8 == 8),
        default_sticker_set: Some("set".into()),
        known_messages: Some(known.clone()),
        default_person: Some(7),
        known_people: Some([7, 8].into_iter().collect()),
        speakers: Some(blocks::Speakers {
            persona: vec!["Wren".into()],
            others: vec!["Bob".into()],
        }),
        ..ParseOptions::default()
    };
    let reply = blocks::parse_reply(&text, &opts);
    assert!(reply.actions.len() <= opts.max_tasks, "over the task cap");
    for action in &reply.actions {
        match action {
            Action::Send { text, reply_to } => {
                assert!(!text.trim().is_empty(), "a blank send");
                assert!(
                    blocks::utf16_len(text) <= TELEGRAM_TEXT_LIMIT_UTF16,
                    "a send over Telegram's limit"
                );
                assert!(
                    reply_to.is_none_or(|id| known.contains(&id)),
                    "unknown reply"
                );
            }
            Action::XSend { target, .. } => assert!(
                !matches!(target, ChatRef::Id(ChatId(0)))
                    && !matches!(target, ChatRef::Name(n) if n.trim().is_empty()),
                "a note to chat 0 or to no name"
            ),
            Action::SendMedia {
                unique_id,
                reply_to,
            } => {
                assert!(
                    crate::core::album::valid_id(unique_id),
                    "an album id that is not one"
                );
                assert!(
                    reply_to.is_none_or(|id| known.contains(&id)),
                    "unknown reply"
                );
            }
            Action::Retrieve { urls } => {
                assert!(opts.allow_retrieve, "a retrieve where none is allowed");
                assert!(
                    !urls.is_empty() && urls.len() <= crate::core::retrieve::MAX_URLS,
                    "a retrieve of {} URLs",
                    urls.len()
                );
            }
            Action::Voice { text, reply_to } => {
                assert!(opts.allow_voice, "a voice note where none is allowed");
                assert!(!text.trim().is_empty(), "a blank voice note");
                assert!(
                    text.chars().count() <= crate::core::voice::MAX_VOICE_CHARS,
                    "a voice note over its length"
                );
                assert!(
                    reply_to.is_none_or(|id| known.contains(&id)),
                    "unknown reply"
                );
            }
            Action::Sticker { reply_to, .. } => {
                assert!(
                    reply_to.is_none_or(|id| known.contains(&id)),
                    "unknown reply"
                );
            }
            Action::Wait { secs } => {
                assert!(
                    (0.0..=opts.max_wait_secs).contains(secs),
                    "wait out of range"
                );
            }
            Action::React { message, emoji } => {
                assert!(known.contains(message), "reaction to an unknown message");
                let n = emoji.chars().count();
                assert!(
                    (1..=blocks::MAX_REACTION_CHARS).contains(&n),
                    "bad reaction"
                );
            }
            Action::ClearConversation => {
                assert!(opts.allow_clear_conversation, "a forbidden clear");
            }
            Action::Block | Action::Unblock => {}
            Action::Remember { about, write, .. } => {
                assert!(
                    [7, 8].contains(about),
                    "a fact about someone not in the chat"
                );
                assert!(
                    write.id.is_some() || !write.content.trim().is_empty(),
                    "an empty write"
                );
            }
            Action::Note { write, .. } | Action::Intend { write } | Action::ChatPlan { write } => {
                assert!(
                    write.id.is_some() || !write.content.trim().is_empty(),
                    "an empty write"
                );
            }
            Action::EditSchedule { edits } => {
                assert!(opts.allow_schedule, "a schedule change not allowed");
                assert!(!edits.is_empty(), "an empty schedule change");
            }
            Action::Event { write } => {
                assert!(
                    write.id.is_some() || !write.text.trim().is_empty(),
                    "an event without an id or a text"
                );
            }
        }
    }
    let limit = usize::from(data.first().copied().unwrap_or(0)).max(2);
    for part in blocks::split_message(&text, limit) {
        assert!(!part.trim().is_empty(), "a blank part");
        assert!(blocks::utf16_len(&part) <= limit, "a part over the limit");
    }
    if let Ok(scores) = classifier::parse_answer(&text) {
        for x in [scores.confidence, scores.interject, scores.impulse] {
            assert!((0.0..=1.0).contains(&x), "a score out of range");
        }
    }
}

/// Model Markdown rendered for Telegram: every entity lies inside the text, with a
/// positive length.
pub fn markdown(data: &[u8]) {
    let markdown = String::from_utf8_lossy(data);
    let (text, spans) = crate::core::markdown::entity_spans(&markdown);
    let len = crate::core::markdown::utf16_len(&text);
    for (offset, length) in spans {
        assert!(offset >= 0 && length > 0, "an empty or negative entity");
        assert!(
            offset.saturating_add(length) <= len,
            "an entity past the text"
        );
    }
    assert!(!text.is_empty() || markdown.is_empty(), "text lost");
}

/// A persona file: usable exactly when it has no error, named validly, and no problem
/// message repeats its phone number.
pub fn persona_file(data: &[u8]) {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let entry = crate::adapters::persona_loader::parse_persona(Path::new("fuzz.md"), source, &[]);
    let has_error = entry.problems.iter().any(persona::Problem::is_error);
    assert_eq!(
        entry.persona.is_some(),
        !has_error,
        "usable despite an error"
    );
    // Line endings as CommonMark (and the parser) count them: `\n`, `\r\n`, a lone `\r`.
    let lines = source
        .replace("\r\n", "\n")
        .replace('\r', "\n")
        .split('\n')
        .count();
    for p in &entry.problems {
        assert!(
            p.line.is_none_or(|l| (1..=lines).contains(&l)),
            "line out of file"
        );
        // Quoted file text is masked: no run of 7 digits (a phone number) in any message.
        let longest_digits = p
            .message
            .split(|c: char| !c.is_ascii_digit())
            .map(str::len)
            .max();
        assert!(
            longest_digits < Some(7),
            "a problem shows a phone-like number"
        );
    }
    if let Some(p) = &entry.persona {
        assert!(
            persona::validate_agent_name(&p.name).is_ok(),
            "invalid name"
        );
        let digits = p.phone.chars().filter(char::is_ascii_digit).count();
        if digits >= 7 {
            for problem in &entry.problems {
                assert!(
                    !problem.message.contains(&p.phone),
                    "a problem shows the phone"
                );
            }
            assert!(
                !p.masked_phone().contains(&p.phone),
                "the mask shows the phone"
            );
        }
        let _ = persona::apply_placeholders(&p.instructions, &p.name, "user");
    }
}

/// Playground input: lines capped and split like standard input, then read as `--jsonl`.
pub fn jsonl_input(data: &[u8]) {
    const CAP: usize = 256;
    let mut reader = std::io::BufReader::with_capacity(16, data);
    let mut lines = 0;
    while let Ok(Some(line)) = input::read_line_capped(&mut reader, CAP) {
        lines += 1;
        assert!(lines <= data.len(), "more lines than bytes");
        let RawLine::Bytes(bytes) = line else {
            continue;
        };
        assert!(bytes.len() <= CAP && !bytes.contains(&b'\n'), "a bad line");
        let Ok(text) = input::line_text(bytes) else {
            continue;
        };
        if let Ok(message) = input::parse_jsonl(&text) {
            assert!(message.after.as_millis() <= u128::from(input::MAX_AFTER_MS));
            assert!(
                !message.text.is_empty() || message.media.is_some(),
                "an empty line"
            );
        }
    }
    assert!(
        reader.fill_buf().is_ok_and(<[u8]>::is_empty),
        "input left unread"
    );
}

/// A Telegram Desktop export as `personad replay` reads it. Checked against the document
/// itself, read here as plain JSON: every entry of `messages` is kept, or counted as a
/// service entry or a malformed one (none vanishes); kept messages keep their ids, in order,
/// and their reply ids; every message is in the export's chat (never positive); an
/// `@username` mention lies inside its text.
pub fn tg_export(data: &[u8]) {
    let Ok(json) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(e) = export::parse(json) else {
        return;
    };
    let doc: serde_json::Value = serde_json::from_str(json).unwrap_or_default();
    let raw = doc["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        e.messages.len() + e.skipped_service + e.skipped_malformed,
        raw.len(),
        "an entry neither kept nor counted"
    );
    let services = raw.iter().filter(|m| m["type"] == "service").count();
    assert_eq!(e.skipped_service, services, "service entries miscounted");
    let mut rest = raw.iter().filter(|m| m["type"] == "message");
    for m in &e.messages {
        let same = |v: &serde_json::Value, id: i64| {
            v.as_i64() == Some(id) || v.as_str().is_some_and(|s| s.trim().parse() == Ok(id))
        };
        let source = rest
            .find(|r| same(&r["id"], m.message.id.0))
            .unwrap_or_else(|| panic!("message {} out of order or invented", m.message.id.0));
        if let Some(reply) = m.message.reply_to {
            assert!(
                same(&source["reply_to_message_id"], reply.0),
                "reply id changed"
            );
        }
        assert_eq!(
            m.message.chat, e.chat,
            "a message outside the export's chat"
        );
        for mention in &m.message.mentions {
            if let Some(name) = &mention.username {
                assert!(
                    m.message.text.contains(name.as_str()),
                    "a mention not in the text"
                );
            }
        }
        if let Some(id) = &m.from_id {
            let _ = export::numeric_id(id);
        }
    }
    assert!(
        e.chat.0 <= 0,
        "an export's chat id is a group's (not positive)"
    );
}

/// A message or update as Telegram sends it (TL-serialized), mapped as the pump maps it, and
/// checked against the decoded object itself: the object serializes back to bytes that
/// decode to the same bytes again; a mapped message keeps its id, text, date, direction and
/// sender; its chat is the Bot API id of its peer; every `@username` entity whose range lies
/// inside the text (UTF-16) is a mention, and every mention comes from such an entity or a
/// name mention; a deletion keeps its ids.
pub fn telegram(data: &[u8]) {
    use grammers_client::tl::{self, Deserializable as _, Serializable as _};
    let ctx = MapContext {
        self_id: 1000,
        self_username: Some("personabot".into()),
    };
    let Some(mapping) = map::map_serialized(data, &ctx) else {
        return;
    };
    let mapped = match mapping {
        SerializedMapping::Update(deleted) => {
            let Ok(update) = tl::enums::Update::from_bytes(data) else {
                panic!("mapped an update that does not decode");
            };
            let again = tl::enums::Update::from_bytes(&update.to_bytes()).map(|u| u.to_bytes());
            assert_eq!(
                again.ok(),
                Some(update.to_bytes()),
                "an update re-serializes differently"
            );
            let ids: Option<Vec<i64>> = match &update {
                tl::enums::Update::DeleteMessages(u) => {
                    Some(u.messages.iter().map(|&i| i64::from(i)).collect())
                }
                tl::enums::Update::DeleteChannelMessages(u) => {
                    Some(u.messages.iter().map(|&i| i64::from(i)).collect())
                }
                _ => None,
            };
            let got = deleted.map(|d| d.ids.iter().map(|i| i.0).collect::<Vec<_>>());
            assert_eq!(got, ids, "a deletion lost or invented ids");
            return;
        }
        SerializedMapping::Message { mapped, .. } => mapped,
    };
    let Ok(raw) = tl::enums::Message::from_bytes(data) else {
        panic!("mapped a message that does not decode");
    };
    let bytes = raw.to_bytes();
    let again = tl::enums::Message::from_bytes(&bytes).map(|m| m.to_bytes());
    assert_eq!(
        again.ok(),
        Some(bytes),
        "a message re-serializes differently"
    );
    let (Ok(mapped), tl::enums::Message::Message(m)) = (*mapped, &raw) else {
        return;
    };
    let msg = &mapped.message;
    assert_eq!(mapped.chat.id, msg.chat, "a message outside its chat");
    assert_eq!(msg.id.0, i64::from(m.id), "the id changed");
    assert_eq!(msg.text, m.message, "the text changed");
    assert_eq!(msg.date.as_second(), i64::from(m.date), "the date changed");
    // The Bot API ids, computed here (checked: ids out of range are the mapper's to refuse).
    let peer = |p: &tl::enums::Peer| match p {
        tl::enums::Peer::User(u) => Some(u.user_id),
        tl::enums::Peer::Chat(c) => c.chat_id.checked_neg(),
        tl::enums::Peer::Channel(c) => (-1_000_000_000_000_i64).checked_sub(c.channel_id),
    };
    assert_eq!(
        Some(msg.chat.0),
        peer(&m.peer_id),
        "the chat is not the peer's"
    );
    if let Some(from) = m.from_id.as_ref().filter(|f| map::chat_id_of(f).is_some()) {
        assert_eq!(Some(msg.sender.id), peer(from), "the sender is not from_id");
    }
    assert_eq!(
        msg.outgoing,
        m.out || msg.sender.id == ctx.self_id,
        "the direction changed"
    );
    // Usernames cut out of the text with an independent UTF-16 reading of the entities.
    let units: Vec<u16> = m.message.encode_utf16().collect();
    let mut names = Vec::new();
    let mut ids = Vec::new();
    for entity in m.entities.as_deref().unwrap_or(&[]) {
        match entity {
            tl::enums::MessageEntity::Mention(e) => {
                let (Ok(at), Ok(len)) = (usize::try_from(e.offset), usize::try_from(e.length))
                else {
                    continue;
                };
                let Some(cut) = at.checked_add(len).and_then(|end| units.get(at..end)) else {
                    continue;
                };
                if let Ok(s) = String::from_utf16(cut) {
                    let name = s.trim().trim_start_matches('@').to_string();
                    if !name.is_empty() {
                        names.push(name);
                    }
                }
            }
            tl::enums::MessageEntity::MentionName(e) => ids.push(e.user_id),
            tl::enums::MessageEntity::InputMessageEntityMentionName(e) => {
                if let tl::enums::InputUser::User(u) = &e.user_id {
                    ids.push(u.user_id);
                }
            }
            _ => {}
        }
    }
    for name in &names {
        assert!(
            msg.mentions
                .iter()
                .any(|x| x.username.as_deref() == Some(name.as_str())),
            "the mention @{name} was lost"
        );
    }
    for x in &msg.mentions {
        match (&x.username, x.user_id) {
            (Some(u), _) => assert!(names.contains(u), "a mention @{u} from no entity"),
            (None, Some(id)) => assert!(ids.contains(&id), "a mention of {id} from no entity"),
            (None, None) => panic!("an empty mention"),
        }
    }
    if let Some(reply) = msg.reply_to {
        let Some(tl::enums::MessageReplyHeader::Header(h)) = &m.reply_to else {
            panic!("a reply without a reply header");
        };
        assert_eq!(
            h.reply_to_msg_id.map(i64::from),
            Some(reply.0),
            "the reply id changed"
        );
    }
}

/// A schedule day file (or a model's schedule answer, read the same way) and an intents file,
/// as the store and the `schedule` task read them: a day that reads covers 00:00–24:00 without
/// gaps or overlaps, within range, and renders back to the same day; presence queries on it
/// return, and a sleep ends within the cap; problems name lines of the file; intents that
/// read render back the same, and firing them moves them past now.
pub fn presence_files(data: &[u8]) {
    use crate::core::intents;
    use crate::core::presence::{DAY_MINUTES, DaySchedule, MAX_ACTIVITIES, MAX_SLEEP, Presence};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count().max(1);
    let date = jiff::civil::date(2026, 3, 29);
    match DaySchedule::parse(text, date) {
        Ok(day) => {
            assert!(
                !day.activities.is_empty() && day.activities.len() <= MAX_ACTIVITIES,
                "activity count"
            );
            let mut at = 0;
            for a in &day.activities {
                assert_eq!(a.start, at, "a gap or an overlap");
                assert!(a.start < a.end && a.responsiveness <= 100, "out of range");
                at = a.end;
            }
            assert_eq!(at, DAY_MINUTES, "the day does not end at 24:00");
            let back = DaySchedule::parse(&day.render("fuzz"), date);
            assert_eq!(back.ok().as_ref(), Some(&day), "render and parse differ");
            let tz = jiff::tz::TimeZone::get("Europe/Berlin").unwrap_or(jiff::tz::TimeZone::UTC);
            let p = Presence::new(tz, [day]);
            for hour in [0, 1, 2, 3, 12, 23] {
                let now = Timestamp::from_second(1_774_742_400 + hour * 3600)
                    .unwrap_or(Timestamp::UNIX_EPOCH);
                let state = p.now(now);
                assert!(state.until > now, "the activity ends before now");
                if let Some(wake) = p.wake_at(now) {
                    assert!(
                        wake > now && wake <= crate::core::time::add(now, MAX_SLEEP),
                        "a sleep past the cap"
                    );
                }
            }
        }
        Err(problems) => {
            assert!(!problems.is_empty(), "an error without a problem");
            for pr in problems {
                assert!(pr.line <= lines, "problem line out of file");
            }
        }
    }
    match intents::parse_file(text) {
        Ok(list) => {
            let rendered = intents::render_file("fuzz", &list);
            assert_eq!(
                intents::parse_file(&rendered).ok().as_ref(),
                Some(&list),
                "intents render and parse differ"
            );
            let tz = jiff::tz::TimeZone::UTC;
            let now = Timestamp::from_second(1_774_742_400).unwrap_or(Timestamp::UNIX_EPOCH);
            for i in &list {
                if let Some(next) = intents::fire(i, now, &tz) {
                    assert!(
                        intents::instant(next.due, &tz) > now,
                        "fired but not moved on"
                    );
                }
            }
            let _ = intents::next_due(&list, &tz);
        }
        Err(problems) => {
            for pr in problems {
                assert!(pr.line <= lines + 1, "intent problem line out of file");
            }
        }
    }
}
