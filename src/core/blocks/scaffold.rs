//! The last check of a send's text before it becomes a task: nothing of the prompt's own
//! scaffolding reaches a person, and the model never speaks for someone else. Small models
//! copy what they were shown: the `[metadata]` line that opens every history turn, the
//! `[context]` turn ("Current time: …", "Respond to message 15."), the system prompt's section
//! headings; and they go on to write the other side of the dialogue ("Bob: and you?"). This
//! module removes such lines, cuts a send where the model starts writing as another person of
//! the chat, strips the persona's own `Name:` label, and drops a send left empty (counted in
//! [`ParsedReply::scaffolding_only`]). Pure; called by `parse_reply` for every send.

use super::{ParsedReply, warn};
use crate::core::plan::Action;

/// Who speaks in the chat: the persona, and the other people of its history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Speakers {
    /// The persona's name (and nicknames): a line labelled with it is the persona's own.
    pub persona: Vec<String>,
    /// Everyone else the history shows: a line labelled with one of them is not ours to write.
    pub others: Vec<String>,
}

/// The section headings of the system prompt (`core::prompt`), lower case.
const PROMPT_HEADINGS: [&str; 7] = [
    "who you are",
    "stickers you may send",
    "this chat",
    "more about you",
    "earlier in this chat",
    "what you remember",
    "context",
];

/// Lines of the `[context]` turn, as `core::prompt` writes them.
const CONTEXT_LINES: [&str; 4] = [
    "current time:",
    "respond to message ",
    "nothing in particular needs an answer",
    "chat history:",
];

/// Cleans every send of `out` (see the module docs).
pub(super) fn clean(out: &mut ParsedReply, speakers: &Speakers) {
    let mut removed = 0usize;
    let mut cut_at: Vec<String> = Vec::new();
    let mut emptied = 0usize;
    let actions = std::mem::take(&mut out.actions);
    for action in actions {
        let (text, reply_to, voice) = match action {
            Action::Send { text, reply_to } => (text, reply_to, false),
            Action::Voice { text, reply_to } => (text, reply_to, true),
            other => {
                out.actions.push(other);
                continue;
            }
        };
        let cleaned = clean_text(&text, speakers);
        removed += cleaned.removed;
        cut_at.extend(cleaned.cut_at);
        if cleaned.text.trim().is_empty() {
            emptied += 1;
            continue;
        }
        let text = cleaned.text;
        out.actions.push(if voice {
            Action::Voice { text, reply_to }
        } else {
            Action::Send { text, reply_to }
        });
    }
    if removed > 0 {
        warn(
            out,
            "reply",
            format_args!("{removed} line(s) copied from the prompt's scaffolding removed"),
        );
    }
    for name in cut_at {
        warn(
            out,
            "reply",
            format_args!("cut where the model began to write {name:?}'s side of the chat"),
        );
    }
    if emptied > 0 {
        warn(
            out,
            "reply",
            format_args!("{emptied} send(s) held only scaffolding: nothing sent for them"),
        );
    }
    out.scaffolding_only += emptied;
}

struct Cleaned {
    text: String,
    removed: usize,
    cut_at: Option<String>,
}

fn clean_text(text: &str, speakers: &Speakers) -> Cleaned {
    let mut kept: Vec<&str> = Vec::new();
    let mut removed = 0;
    let mut cut_at = None;
    for line in text.lines() {
        if is_scaffolding(line) {
            removed += 1;
            continue;
        }
        // A `[tag]` opening the line: the other side's turn (`[user]`, `[Bob]`) ends the send;
        // any other tag is the prompt's kind of bookkeeping, dropped with its line when the
        // line holds nothing else, else the tag alone.
        let line = match bracket_tag(line) {
            Some((tag, rest)) => {
                let bare = tag.trim_end_matches(|c: char| c.is_ascii_digit());
                if ["user", "human", "other"].contains(&bare.to_lowercase().as_str())
                    || names(&speakers.others, tag)
                {
                    cut_at = Some(tag.to_string());
                    break;
                }
                removed += 1;
                if rest.trim().is_empty() {
                    continue;
                }
                rest.trim_start()
            }
            None => line,
        };
        match label(line) {
            Some((name, _)) if names(&speakers.others, name) => {
                cut_at = Some(name.trim().to_string());
                break;
            }
            Some((name, rest_of_line)) if names(&speakers.persona, name) => {
                kept.push(rest_of_line.trim_start());
            }
            _ => kept.push(line),
        }
    }
    Cleaned {
        text: kept.join("\n").trim().to_string(),
        removed,
        cut_at,
    }
}

/// A line copied from the prompt: a `[metadata]` or `[context]` marker, a line of the
/// context turn, our metadata's keys, or one of the system prompt's headings.
fn is_scaffolding(line: &str) -> bool {
    let t = line.trim().trim_start_matches(['*', '_', '>', ' ']);
    let lower = t.to_lowercase();
    if lower.starts_with("[metadata]") || lower.starts_with("[context]") {
        return true;
    }
    if lower.contains("sender_id=") || lower.contains("message_id=") {
        return true;
    }
    // "Respond to message 15." and its echo as someone's act ("User responds to message 24.").
    if let Some((_, rest)) = lower.split_once("responds to message ")
        && rest.trim_end_matches('.').trim().parse::<i64>().is_ok()
    {
        return true;
    }
    if CONTEXT_LINES.iter().any(|p| lower.starts_with(p)) {
        return lower.starts_with("current time:")
            || lower.starts_with("chat history:")
            || lower.starts_with("nothing in particular")
            || lower
                .strip_prefix("respond to message ")
                .is_some_and(|rest| rest.trim_end_matches('.').trim().parse::<i64>().is_ok());
    }
    if let Some(h) = lower.strip_prefix('#') {
        let h = h.trim_start_matches('#').trim();
        return PROMPT_HEADINGS.contains(&h);
    }
    false
}

/// `Name: text` at the start of a line (the name at most 40 characters, bold marks and a
/// leading `@` allowed): the name, and the text after the colon.
fn label(line: &str) -> Option<(&str, &str)> {
    let (name, rest) = line.split_once(':')?;
    let name = name.trim().trim_matches(['*', '_']).trim_start_matches('@');
    (!name.is_empty() && name.chars().count() <= 40 && !name.contains(['[', '(', '/']))
        .then_some((name, rest))
}

/// `[tag] rest` at the start of a line (a tag of at most 24 letters, digits, `_` or spaces,
/// opening with a letter: `[1]` is a footnote).
fn bracket_tag(line: &str) -> Option<(&str, &str)> {
    let inner = line.trim_start().strip_prefix('[')?;
    let (tag, rest) = inner.split_once(']')?;
    let ok = tag.starts_with(|c: char| c.is_alphabetic())
        && tag.chars().count() <= 24
        && tag
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == ' ');
    ok.then_some((tag.trim(), rest))
}

/// Whether `name` is one of `list`: the whole name, or its first word with a possessive
/// (`Bob's answer`).
fn names(list: &[String], name: &str) -> bool {
    let name = name.trim();
    let first = name
        .split_whitespace()
        .next()
        .unwrap_or("")
        .trim_end_matches("'s")
        .trim_end_matches("’s");
    let possessive = first.len() < name.len() && name[first.len()..].starts_with(['\'', '’']);
    list.iter().any(|n| {
        let n = n.trim();
        !n.is_empty()
            && (n.eq_ignore_ascii_case(name) || (possessive && n.eq_ignore_ascii_case(first)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn speakers() -> Speakers {
        Speakers {
            persona: vec!["Wren".into()],
            others: vec!["Bob".into()],
        }
    }

    fn cleaned(text: &str) -> (ParsedReply, Vec<String>) {
        let mut out = ParsedReply {
            actions: vec![Action::Send {
                text: text.into(),
                reply_to: None,
            }],
            ..ParsedReply::default()
        };
        clean(&mut out, &speakers());
        let texts = out
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Send { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect();
        (out, texts)
    }

    /// The echoes a small local model was seen to write: the metadata line, the context turn,
    /// the other person's next line.
    #[test]
    fn copied_scaffolding_and_the_other_side_never_reach_a_send() {
        let (_, t) = cleaned(
            "[metadata] sender=\"Wren\" sender_id=9 message_id=16 time=10:00\nHi Bob! I'm fine.\nBob: and you, what do you do?\nWren: I paint.",
        );
        assert_eq!(t, ["Hi Bob! I'm fine."]);
        let (out, t) =
            cleaned("[context]\nCurrent time: Saturday, 27 November 2026.\nRespond to message 15.");
        assert!(t.is_empty(), "{t:?}");
        assert_eq!(out.scaffolding_only, 1);
        let (_, t) = cleaned("Wren: sure, tomorrow works.");
        assert_eq!(t, ["sure, tomorrow works."]);
        let (_, t) = cleaned("# What you remember\nYou like tea: green, mostly.");
        assert_eq!(t, ["You like tea: green, mostly."]);
        // Forms a 135M model wrote (tests/data/smollm2-recordings.jsonl).
        let (_, t) = cleaned("[bob] How about you? I'm Wren.");
        assert!(t.is_empty(), "{t:?}");
        let (_, t) = cleaned("[message]\nChat history:\nIt was a lovely day.");
        assert_eq!(t, ["It was a lovely day."]);
        let (_, t) = cleaned("It was a lovely day.\nBob's response: \"I just got back\"");
        assert_eq!(t, ["It was a lovely day."]);
        let (_, t) = cleaned("@Bob: so glad to hear that!");
        assert!(t.is_empty(), "{t:?}");
        let (_, t) = cleaned("Bob responds to message 24.");
        assert!(t.is_empty(), "{t:?}");
    }

    /// Ordinary text with colons, "respond" and headings of its own is left alone.
    #[test]
    fn ordinary_text_is_left_alone() {
        for text in [
            "Note: the shop opens at 9:30.",
            "I'll respond to message boards later.",
            "# Shopping\n- eggs",
            "Time: whenever you like",
            "A: [address]",
            "[1] see the footnote",
        ] {
            let (out, t) = cleaned(text);
            assert_eq!(t, [text], "{:?}", out.warnings);
            assert!(out.warnings.is_empty(), "{:?}", out.warnings);
        }
    }
}
