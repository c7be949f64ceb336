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
use crate::core::model::MessageId;
use crate::core::persona;
use crate::core::plan::Action;

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
];

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
        default_sticker_set: Some("set".into()),
        known_messages: Some(known.clone()),
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

/// A Telegram Desktop export (`result.json`), either schema.
pub fn tg_export(data: &[u8]) {
    let Ok(json) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(e) = export::parse(json) {
        for m in &e.messages {
            if let Some(id) = &m.from_id {
                let _ = export::numeric_id(id);
            }
        }
    }
}

/// A message or update as Telegram sends it (TL-serialized), mapped as the pump maps it: a
/// mapped message belongs to the chat it names, and its mentions come from inside its text.
pub fn telegram(data: &[u8]) {
    let ctx = MapContext {
        self_id: 1000,
        self_username: Some("personabot".into()),
    };
    let Some(SerializedMapping::Message { mapped, .. }) = map::map_serialized(data, &ctx) else {
        return;
    };
    let Ok(mapped) = *mapped else {
        return;
    };
    assert_eq!(
        mapped.chat.id, mapped.message.chat,
        "a message outside its chat"
    );
    for m in &mapped.message.mentions {
        if let Some(name) = &m.username {
            assert!(
                mapped.message.text.contains(name.as_str()),
                "a mention not in the text"
            );
        }
    }
}
