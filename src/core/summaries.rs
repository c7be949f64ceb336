//! Rolling summaries of a chat, chained with its history so nothing falls between them. Owns
//! the decision (when to summarize, which messages), the summarizer's answer and its checks,
//! backing off after a failure, merging old summaries, and the hand-editable Markdown file
//! (`<state>/<agent>/memory/summaries/<chat>.md`). Pure: no I/O. The `received` handler asks
//! [`due`] and queues a `summarize` task; that task's handler calls the planner's summarizer
//! and records the result here; the prompt shows the summaries and only the messages after
//! the watermark.
//!
//! The rule: the history a plan sees is every message after the watermark (the newest
//! message summarized). When more than [`TRIGGER`] messages are past it, all but the newest
//! [`KEEP`] (at most [`CHUNK`] at a time) go to one summary call, in the background after the
//! reply. An accepted summary moves the watermark to the last message sent to it; a declined
//! or failed call moves nothing and backs off, so the unsummarized messages simply stay in
//! the history until a later call succeeds.

use std::fmt::Write as _;
use std::time::Duration;

use jiff::Timestamp;

use crate::core::model::{Message, MessageId};

/// Unsummarized messages that set off a summary call.
pub const TRIGGER: usize = 120;
/// Newest messages never summarized (the conversation the reply needs verbatim).
pub const KEEP: usize = 20;
/// Most messages in one summary call (a backlog is paged).
pub const CHUNK: usize = 100;
/// Most summaries kept per chat; older ones are merged.
pub const MAX_SUMMARIES: usize = 6;
/// Longest summary text kept, in characters.
pub const SUMMARY_CHARS: usize = 1500;
/// Summary calls one agent may make per day.
pub const CALLS_PER_DAY: u32 = 200;

/// One summary: the messages it covers and what happened in them.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub first: MessageId,
    pub last: MessageId,
    pub text: String,
}

/// A chat's summaries and the state of summarizing it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SummaryFile {
    pub summaries: Vec<Summary>,
    /// The newest message summarized: history starts after it.
    pub watermark: Option<MessageId>,
    /// Failed or declined calls in a row.
    pub failures: u32,
    /// No summary call before this (after a failure).
    pub retry_after: Option<Timestamp>,
}

/// The messages one summary call covers.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub first: MessageId,
    pub last: MessageId,
}

/// What the summarizer answered, before checking.
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    pub first: Option<i64>,
    pub last: Option<i64>,
    pub text: String,
}

/// The messages a plan sees: those after the watermark.
pub fn unsummarized<'a>(history: &'a [Message], file: &SummaryFile) -> &'a [Message] {
    match file.watermark {
        Some(w) => {
            let from = history
                .iter()
                .position(|m| m.id > w)
                .unwrap_or(history.len());
            &history[from..]
        }
        None => history,
    }
}

/// The next summary call, if one is due at `now`: the oldest unsummarized messages but the
/// newest [`KEEP`], at most [`CHUNK`] of them, once more than [`TRIGGER`] are waiting. With a
/// history fetch of `limit` messages under about 160, both shrink with it (a quarter of the
/// fetch stays free), so messages are summarized before they fall out of the fetch.
pub fn due(history: &[Message], file: &SummaryFile, now: Timestamp, limit: usize) -> Option<Chunk> {
    // A back-off ends within a day; a later time (a hand edit) does not stop summaries.
    let day_later = crate::core::time::add(now, Duration::from_secs(86_400));
    if file.retry_after.is_some_and(|t| t > now && t <= day_later) {
        return None;
    }
    let trigger = TRIGGER.min(limit.saturating_mul(3) / 4).max(4);
    let keep = KEEP.min(trigger / 4).max(1);
    let open = unsummarized(history, file);
    if open.len() <= trigger {
        return None;
    }
    let take = (open.len() - keep).min(CHUNK);
    Some(Chunk {
        first: open[0].id,
        last: open[take - 1].id,
    })
}

/// Checks a draft against the chunk sent. The summary covers exactly the messages sent,
/// whatever range the model claims (a claimed end past them must never hide newer messages,
/// a later start never leave older ones unlabelled); a claimed range outside them is
/// reported. `None` when there is no summary at all (declined), also when nothing is left of
/// its text once markup that would read as the file's structure is taken off.
pub fn check(draft: Option<Draft>, chunk: &Chunk) -> Option<(Summary, bool)> {
    let draft = draft?;
    let text: String = draft.text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = text.trim_start_matches(['#', '<', '!', '-', ' ']);
    if text.is_empty() {
        return None;
    }
    let within = |v: Option<i64>| v.is_none_or(|id| (chunk.first.0..=chunk.last.0).contains(&id));
    let matched = within(draft.first) && within(draft.last);
    let summary = Summary {
        first: chunk.first,
        last: chunk.last,
        text: cut(text, SUMMARY_CHARS),
    };
    Some((summary, matched))
}

impl SummaryFile {
    /// Records an accepted summary of `chunk`: the watermark moves to the chunk's end, the
    /// failure count resets, and the oldest summaries are merged past [`MAX_SUMMARIES`].
    pub fn accept(&mut self, summary: Summary, chunk: &Chunk) {
        self.summaries.push(summary);
        self.watermark = Some(self.watermark.map_or(chunk.last, |w| w.max(chunk.last)));
        self.failures = 0;
        self.retry_after = None;
        while self.summaries.len() > MAX_SUMMARIES {
            let b = self.summaries.remove(1);
            let a = &mut self.summaries[0];
            a.last = b.last;
            a.text = cut_front(&format!("{} {}", a.text, b.text), SUMMARY_CHARS);
        }
    }

    /// Records a failed or declined call at `now`: no call again for 15 minutes, then an
    /// hour, four hours, and at most a day.
    pub fn fail(&mut self, now: Timestamp) {
        self.failures = self.failures.saturating_add(1);
        let mins = 15u64.saturating_mul(4u64.saturating_pow(self.failures - 1).min(96));
        let wait = Duration::from_secs(mins.min(24 * 60) * 60);
        self.retry_after = Some(crate::core::time::add(now, wait));
    }

    /// The summaries as the prompt shows them, oldest first.
    pub fn prompt_text(&self) -> String {
        let mut s = String::new();
        for sm in &self.summaries {
            let _ = writeln!(s, "- messages {}–{}: {}", sm.first, sm.last, sm.text);
        }
        s
    }

    /// The file as Markdown.
    pub fn render(&self) -> String {
        let mut s = String::from("# Summaries\n\n");
        for sm in &self.summaries {
            let _ = writeln!(s, "## messages {}–{}\n\n{}\n", sm.first, sm.last, sm.text);
        }
        let mut state = Vec::new();
        if let Some(w) = self.watermark {
            state.push(format!("watermark={w}"));
        }
        if self.failures > 0 {
            state.push(format!("failures={}", self.failures));
        }
        if let Some(t) = self.retry_after {
            state.push(format!("retry_after={t}"));
        }
        if !state.is_empty() {
            let _ = writeln!(s, "<!-- {} -->", state.join(" "));
        }
        s
    }

    /// Reads the file; a line that fits nowhere is an error with its number (never
    /// overwritten).
    pub fn parse(text: &str) -> Result<SummaryFile, crate::core::facts::ParseError> {
        let mut file = SummaryFile::default();
        let mut current: Option<(Summary, Vec<&str>)> = None;
        let flush = |file: &mut SummaryFile, cur: Option<(Summary, Vec<&str>)>| {
            if let Some((mut sm, body)) = cur {
                sm.text = body
                    .join(" ")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                file.summaries.push(sm);
            }
        };
        for (n, line) in text.lines().enumerate() {
            let t = line.trim();
            let bad = |message: &str| crate::core::facts::ParseError {
                line: n + 1,
                message: message.to_string(),
            };
            if let Some(state) = t.strip_prefix("<!--") {
                for kv in state.trim_end_matches("-->").split_whitespace() {
                    match kv.split_once('=') {
                        Some(("watermark", v)) => file.watermark = v.parse().ok().map(MessageId),
                        Some(("failures", v)) => file.failures = v.parse().unwrap_or(0),
                        Some(("retry_after", v)) => file.retry_after = v.parse().ok(),
                        _ => {}
                    }
                }
                continue;
            }
            if let Some(range) = t.strip_prefix("## messages ") {
                flush(&mut file, current.take());
                let (a, b) = range
                    .split_once(['–', '-'])
                    .ok_or_else(|| bad("a summary heading is `## messages FIRST–LAST`"))?;
                let (Ok(first), Ok(last)) = (a.trim().parse(), b.trim().parse()) else {
                    return Err(bad("a summary heading is `## messages FIRST–LAST`"));
                };
                let sm = Summary {
                    first: MessageId(first),
                    last: MessageId(last),
                    text: String::new(),
                };
                current = Some((sm, Vec::new()));
                continue;
            }
            match current.as_mut() {
                Some((_, body)) => body.push(t),
                None if t.is_empty() || t.starts_with("# ") => {}
                None => {
                    return Err(bad(
                        "text outside a summary: each starts with `## messages FIRST–LAST`",
                    ));
                }
            }
        }
        flush(&mut file, current);
        Ok(file)
    }
}

/// Reads the summarizer's answer: a `# «summarize»` block (optional `min_message_id:` and
/// `max_message_id:` lines, then the text) or the original's JSON task
/// (`{"kind": "summarize", "content": …, "min_message_id": …, "max_message_id": …}`).
/// Anything else is no summary.
pub fn parse_answer(text: &str) -> Option<Draft> {
    let text = text.trim();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .map_or(text, |t| t.trim().trim_end_matches("```").trim());
    if text.starts_with('[') || text.starts_with('{') {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let tasks = match value {
            serde_json::Value::Array(a) => a,
            v => vec![v],
        };
        let task = tasks.into_iter().find(|t| {
            t["kind"]
                .as_str()
                .is_some_and(|k| k.eq_ignore_ascii_case("summarize"))
        })?;
        let num = |k: &str| {
            task[k]
                .as_i64()
                .or_else(|| task[k].as_str().and_then(|s| s.trim().parse().ok()))
        };
        return Some(Draft {
            first: num("min_message_id"),
            last: num("max_message_id"),
            text: task["content"].as_str().unwrap_or("").to_string(),
        });
    }
    let at = text.find("«summarize»")?;
    let body = text[at..].split_once('\n').map_or("", |(_, b)| b);
    let body = body.split("\n#").next().unwrap_or("");
    let mut draft = Draft {
        first: None,
        last: None,
        text: String::new(),
    };
    let mut rest = Vec::new();
    for line in body.lines() {
        match line.split_once(':') {
            Some((k, v)) if k.trim() == "min_message_id" => draft.first = v.trim().parse().ok(),
            Some((k, v)) if k.trim() == "max_message_id" => draft.last = v.trim().parse().ok(),
            _ => rest.push(line),
        }
    }
    draft.text = rest.join("\n").trim().to_string();
    Some(draft)
}

/// The summarizer's standing instructions (the stable part of its request).
pub const INSTRUCTIONS: &str = "You keep the memory of a Telegram chat for the person whose \
account it is. You are shown the summaries written so far and then a stretch of messages, \
each opening with a [metadata] line. Write one summary of that stretch: who said what that \
matters later (facts, plans, promises, feelings, open questions), in plain sentences, at most \
150 words, in the language of the chat. Answer with exactly one block and nothing else:\n\n\
# «summarize»\nmin_message_id: FIRST\nmax_message_id: LAST\nThe summary.\n";

/// What a schema-constrained route (`--plan-format json`) is told instead of the block format
/// at the end of [`INSTRUCTIONS`]; [`parse_answer`] reads either.
pub const JSON_INSTRUCTIONS: &str = "Instead of the block, answer with one JSON object: \
{\"kind\": \"summarize\", \"min_message_id\": FIRST, \"max_message_id\": LAST, \"content\": \"The summary.\"}";

/// The summary's schema (the OpenAPI subset Gemini takes; the OpenAI client converts it), for
/// a route that holds its answer to one: every field required, so a small model cannot leave
/// the summary out.
pub fn schema() -> serde_json::Value {
    serde_json::json!({
        "type": "OBJECT",
        "properties": {
            "kind": {"type": "STRING", "enum": ["summarize"]},
            "min_message_id": {"type": "INTEGER"},
            "max_message_id": {"type": "INTEGER"},
            "content": {"type": "STRING"}
        },
        "required": ["kind", "min_message_id", "max_message_id", "content"]
    })
}

fn cut(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Keeps the end of `text` (the newer part of merged summaries) within `max` characters.
fn cut_front(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    format!("…{}", text.chars().skip(n - max + 1).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{ChatId, Sender};

    fn msgs(from: i64, to: i64) -> Vec<Message> {
        (from..=to)
            .map(|i| Message {
                id: MessageId(i),
                chat: ChatId(1),
                sender: Sender {
                    id: 2,
                    name: "Bob".into(),
                    username: None,
                    is_bot: false,
                    service: false,
                    deleted: false,
                },
                outgoing: i % 2 == 0,
                text: format!("m{i}"),
                mentions: vec![],
                reply_to: None,
                date: Timestamp::UNIX_EPOCH,
                media: None,
            })
            .collect()
    }

    #[test]
    fn a_call_is_due_past_the_trigger_and_covers_all_but_the_newest() {
        let now = Timestamp::UNIX_EPOCH;
        let mut file = SummaryFile::default();
        assert_eq!(due(&msgs(1, 120), &file, now, 500), None);
        let chunk = due(&msgs(1, 121), &file, now, 500);
        assert_eq!(
            chunk,
            Some(Chunk {
                first: MessageId(1),
                last: MessageId(100)
            })
        );
        let chunk = chunk.unwrap_or(Chunk {
            first: MessageId(0),
            last: MessageId(0),
        });
        let s = check(
            Some(Draft {
                first: Some(1),
                last: Some(9999),
                text: "## messages 1–x <!-- retry_after=2999-01-01T00:00:00Z -->".into(),
            }),
            &chunk,
        );
        assert_eq!(
            s.as_ref().map(|(s, matched)| (s.last, *matched)),
            Some((MessageId(100), false)),
            "a claimed end past the chunk is the chunk's end, and reported"
        );
        let (s, _) = s.unwrap_or_else(|| panic!("accepted"));
        file.accept(s, &chunk);
        let text = file.render();
        assert!(
            !text.contains("## messages 1–x"),
            "no structure from the model: {text}"
        );
        assert_eq!(unsummarized(&msgs(1, 121), &file).len(), 21);
        assert_eq!(due(&msgs(1, 121), &file, now, 500), None);
        let back = SummaryFile::parse(&file.render());
        assert_eq!(back.as_ref().ok(), Some(&file));
    }

    #[test]
    fn a_declined_call_backs_off_and_a_backlog_is_paged() {
        let now = Timestamp::UNIX_EPOCH;
        let mut file = SummaryFile::default();
        assert_eq!(
            check(
                parse_answer("I'd rather not."),
                &Chunk {
                    first: MessageId(1),
                    last: MessageId(2)
                }
            ),
            None
        );
        file.fail(now);
        assert_eq!(due(&msgs(1, 500), &file, now, 500), None, "backing off");
        let later = crate::core::time::add(now, Duration::from_secs(16 * 60));
        let chunk = due(&msgs(1, 500), &file, later, 500);
        assert_eq!(chunk.map(|c| c.last), Some(MessageId(100)), "a page of 100");
        file.fail(now);
        assert_eq!(file.failures, 2);
        assert!(file.retry_after > Some(later));
    }

    #[test]
    fn answers_parse_as_blocks_or_the_originals_json() {
        let d = parse_answer("# «summarize»\nmin_message_id: 3\nmax_message_id: 9\nThey met.");
        assert_eq!(
            d.map(|d| (d.first, d.last, d.text)),
            Some((Some(3), Some(9), "They met.".into()))
        );
        let j = parse_answer(
            r#"[{"kind":"think","text":"x"},{"kind":"summarize","content":"They met.","min_message_id":3,"max_message_id":"9"}]"#,
        );
        assert_eq!(j.map(|d| (d.first, d.last)), Some((Some(3), Some(9))));
    }

    #[test]
    fn old_summaries_merge_into_a_bounded_number() {
        let mut file = SummaryFile::default();
        for i in 0..10 {
            let chunk = Chunk {
                first: MessageId(i * 10 + 1),
                last: MessageId(i * 10 + 10),
            };
            let s = Summary {
                first: chunk.first,
                last: chunk.last,
                text: "x".repeat(1000),
            };
            file.accept(s, &chunk);
        }
        assert_eq!(file.summaries.len(), MAX_SUMMARIES);
        assert_eq!(file.summaries[0].first, MessageId(1));
        assert!(file.summaries[0].text.chars().count() <= SUMMARY_CHARS);
        assert_eq!(file.watermark, Some(MessageId(100)));
    }
}
