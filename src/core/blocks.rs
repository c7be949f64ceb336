//! Task blocks: turning the text of a model's reply into [`Action`]s. This module owns that
//! parsing and nothing else: it does no I/O and knows nothing about chats. Every action it
//! produces implicitly targets the chat being planned (the format has no way to name a chat, so
//! a model can never address another one); the `received` handler calls [`parse_reply`] and
//! turns the actions into tasks. The input is adversarial (whatever the model wrote), so
//! nothing here panics: whatever cannot be understood is skipped with a warning and the rest of
//! the reply still runs. Warnings are meant to be logged at WARN level by the caller; each names
//! its block and quotes at most a short, escaped excerpt of model text.
//!
//! # Format
//!
//! A reply is a sequence of blocks. A block starts with a heading line `# «kind»` (up to three
//! leading spaces, any spaces between `#` and `«`, kind case-insensitive, `_` or a space read as
//! `-`), optionally followed by a message id: `# «send» 1234` or `# «send» #1234`. Its body runs
//! until the next heading line. Lines inside a fenced code block (```` ``` ```` or `~~~`, closed
//! later in the reply) are never headings, so a send can quote task syntax. A heading for a
//! known kind written without guillemets (`# unblock`, `# wait 12`: nothing else on the line) is
//! also accepted, with a warning, because the original prompt's own example wrote one that way.
//!
//! | kind | body | heading id |
//! |------|------|------------|
//! | `send` | the text, trimmed; inner formatting and line breaks kept | message replied to |
//! | `sticker` | `SET` and `NAME` on two lines, or `SET :: NAME`, or just `NAME` (first persona set) | message replied to |
//! | `wait` | `delay: N` or `N` seconds (fractional allowed, optional `s`), clamped to a maximum | ignored |
//! | `react` | one emoji (at most 16 chars, no letters or spaces) | target message, required |
//! | `block`, `unblock` | ignored | ignored |
//! | `clear-conversation` | ignored; only when the persona enables it | ignored |
//! | `remember`, `note` | leading `id:` (and `about:`) lines, then the fact | ignored |
//! | `event` | leading `time:`, `timezone:`, `every:`, `times:`, `urgent:`, `id:` lines, then the intent's text; empty with an id deletes | the intent's id (`event-…`) |
//! | `xsend` | leading `target:` line (or the heading's), then the note | the target chat's id or name |
//! | `intend`, `plan` | a leading `id:` line (or the heading's), then the text; empty with an id deletes | the entry's id |
//! | `schedule` | `id:`, `start_time:`, `end_time:`, `activity_name:`, `responsiveness:`, `description:` lines; only when the persona may change its day | ignored |
//!
//! Any other kind (`shutdown`, `think`, …) is skipped with a warning; operator-only
//! tasks cannot be produced here because [`Action`] has no variant for them.
//!
//! # The original's JSON tasks
//!
//! A reply that is a JSON array of task objects (as the original's newer `Task-*` prompts ask
//! for), whole or inside a ```` ```json ```` fence, is read task by task with the same rules as
//! blocks: `kind` plus `text` and `reply_to` (send), `sticker_set`, `name` and `reply_to`
//! (sticker), `delay` (wait), `emoji` and `message_id` (react), `id`, `content` and `about`
//! (remember, note), `id`, `intent`, `time`, `timezone`, `interval`, `occurrences` and `urgent`
//! (event: `id` names the intent). `think` tasks are dropped by design; otherwise `id` and
//! `depends_on` are accepted and ignored (tasks run in array order); any other kind is skipped
//! with a warning. An array that is not valid JSON is skipped whole with a warning: a task
//! array is never sent to the chat as text.
//!
//! # Fallbacks and guards
//!
//! - `[metadata]` lines the model copied from the history at the start of its reply are dropped.
//! - With [`ParseOptions::speakers`], each send is checked last (`scaffold`): lines copied
//!   from the prompt's scaffolding are removed, a send is cut where the model starts writing as
//!   another person of the chat (`Bob: …`), the persona's own `Name:` label is stripped, and a
//!   send left empty is dropped and counted ([`ParsedReply::scaffolding_only`]).
//! - An empty or whitespace-only reply is silence: no actions, no warnings.
//! - A reply wholly wrapped in a ```` ```markdown ````, ```` ```md ```` or bare ```` ``` ````
//!   fence is unwrapped first (also when the model was cut off before the closing fence).
//! - A reply with no heading at all is one `send` of the whole trimmed text.
//! - Text before the first heading is sent as a `send` too: models often write a line before
//!   their first block, and dropping it silently would lose what they meant to say.
//! - Send text longer than Telegram's limit of 4096 UTF-16 code units (as rendered) is split
//!   with [`split_rendered`] into several sends; only the first keeps the reply.
//! - With [`ParseOptions::known_messages`], a reply to a message outside the chat's history is
//!   sent without the reply, and a reaction to one is skipped.
//! - At most [`ParseOptions::max_tasks`] actions are kept. If the cut falls between a `block`
//!   and the `unblock` that follows it, the `block` is dropped too, so that a cap can never turn
//!   a timed block into a permanent one.

use std::collections::HashSet;
use std::fmt;

use crate::core::graph::TaskKind;
use crate::core::model::{MessageId, StickerChoice};
use crate::core::plan::Action;

mod commitments;
mod event;
mod json;
mod memory;
mod retrieve;
mod scaffold;
mod schedule;
mod schema;
mod send_media;
mod split;
mod syntax;
mod xsend;

use event::parse_event;
use json::{find_json_tasks, parse_json_tasks, strip_echoed_metadata};
use memory::{memory_fields, push_memory};
pub use scaffold::Speakers;
pub use schema::{
    JSON_PLAN_INSTRUCTIONS, RETRIEVE_JSON_INSTRUCTIONS, offer_retrieve, plan_schema,
    with_send_media,
};
#[cfg(test)]
use split::fitting_prefix;
pub use split::{part_key, split_message, split_rendered, text_parts, utf16_len};
use syntax::{Heading, IdPart, segments, unwrap_fence};

/// Telegram's limit on a text message, in UTF-16 code units.
pub const TELEGRAM_TEXT_LIMIT_UTF16: usize = 4096;
/// Default for [`ParseOptions::max_tasks`].
pub(crate) const DEFAULT_MAX_TASKS: usize = 12;
/// Default for [`ParseOptions::max_wait_secs`].
pub(crate) const DEFAULT_MAX_WAIT_SECS: f64 = 3600.0;
/// Longest accepted reaction, in `char`s (emoji sequences with joiners run to about 10).
pub(crate) const MAX_REACTION_CHARS: usize = 16;

/// Longest accepted sticker set short name or sticker name, in `char`s.
const MAX_STICKER_FIELD_CHARS: usize = 64;
/// Most model-text `char`s quoted in one excerpt of a warning.
const EXCERPT_CHARS: usize = 40;
/// Most `char`s of an unknown kind shown in a warning's block label.
const KIND_CHARS: usize = 24;
/// Most `char`s a hard split backs off to avoid cutting an emoji sequence apart.
const MAX_JOINER_BACKOFF: usize = 16;

/// What the parser may accept; built by the caller from the persona and runtime settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseOptions {
    /// Most actions one reply may produce (split sends count one each).
    pub max_tasks: usize,
    /// Longest wait, in seconds; longer ones are clamped.
    pub max_wait_secs: f64,
    /// Whether the persona enables `clear-conversation`.
    pub allow_clear_conversation: bool,
    /// Whether the persona lets the model `block` and `unblock` (on by default).
    pub allow_block: bool,
    /// Whether the persona may look things up (`# Allow Retrieve`; off by default).
    pub allow_retrieve: bool,
    /// Whether this plan may carry a voice note (the persona's `# Voice` allows it for the
    /// message answered); otherwise a `voice` block's words go as text.
    pub allow_voice: bool,
    /// Whether the persona may change its own day (`schedule`; its prompt then lists the days).
    pub allow_schedule: bool,
    /// Set used for a sticker block that names only the sticker (the persona's first set).
    pub default_sticker_set: Option<String>,
    /// Message ids of the chat's history; `None` accepts any id.
    pub known_messages: Option<HashSet<MessageId>>,
    /// Whom a `remember` without `about` is about (the person being answered).
    pub default_person: Option<i64>,
    /// Who may be named by `about` (the chat's people); `None` accepts anyone.
    pub known_people: Option<HashSet<i64>>,
    /// A group chat: a `remember` may only be about the person being answered (what one
    /// member says about another is not kept for that other person).
    pub group: bool,
    /// Who speaks in the chat: with it, every send is checked for copied prompt scaffolding
    /// and for lines written as someone else (see `scaffold`); `None` skips the check.
    pub speakers: Option<Speakers>,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            max_tasks: DEFAULT_MAX_TASKS,
            max_wait_secs: DEFAULT_MAX_WAIT_SECS,
            allow_clear_conversation: false,
            allow_block: true,
            allow_retrieve: false,
            allow_voice: false,
            allow_schedule: false,
            default_sticker_set: None,
            known_messages: None,
            default_person: None,
            known_people: None,
            group: false,
            speakers: None,
        }
    }
}

/// The actions of one reply, in order, and what was skipped or changed on the way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedReply {
    pub actions: Vec<Action>,
    /// Human-readable, one per problem; the caller logs them at WARN level.
    pub warnings: Vec<String>,
    /// Sends dropped because nothing was left once the prompt's scaffolding was removed.
    pub scaffolding_only: usize,
}

/// Parses a model's reply into the actions it asks for. Never panics; see the module docs for
/// the format, the fallbacks and the guards.
pub fn parse_reply(text: &str, opts: &ParseOptions) -> ParsedReply {
    let mut out = ParsedReply::default();
    let text = unwrap_fence(text.trim()).trim();
    if text.is_empty() {
        return out;
    }
    if let Some(found) = find_json_tasks(text) {
        parse_json_tasks(&mut out, found, opts);
        if let Some(speakers) = &opts.speakers {
            scaffold::clean(&mut out, speakers);
        }
        enforce_cap(&mut out, opts.max_tasks);
        return out;
    }
    let text = strip_echoed_metadata(&mut out, text);
    if text.is_empty() {
        return out;
    }
    let segments = segments(text);
    let has_headings = segments.len() > 1;
    for (index, segment) in segments.iter().enumerate() {
        match &segment.heading {
            None => {
                let body = segment.body.trim();
                if body.is_empty() {
                    continue;
                }
                let label = if has_headings {
                    "text before the first block"
                } else {
                    "reply"
                };
                push_send(&mut out, label, body, None);
            }
            Some(heading) => parse_block(&mut out, index, heading, segment.body, opts),
        }
    }
    if let Some(speakers) = &opts.speakers {
        scaffold::clean(&mut out, speakers);
    }
    enforce_cap(&mut out, opts.max_tasks);
    tracing::debug!(
        actions = out.actions.len(),
        warnings = out.warnings.len(),
        "parsed model reply"
    );
    out
}

// ---------------------------------------------------------------------------------------------
// Block kinds

/// The task kind a block heading names (`send`, `Clear_Conversation`, ...: case, `_` and
/// spaces are forgiven), when a plan may contain it. The kinds are the graph's own
/// [`TaskKind`]s; planning-only and operator kinds (`received`, `classify`, `shutdown`) are
/// not blocks.
fn block_kind(raw: &str) -> Option<TaskKind> {
    let raw = raw.trim();
    if raw.len() > 32 {
        return None;
    }
    let norm: String = raw
        .chars()
        .map(|c| match c {
            '_' | ' ' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    if norm == "schedule" {
        // The model's `schedule` changes its own day; the daemon's own task of that name
        // (writing a whole day) is `TaskKind::Schedule`, never planned.
        return Some(TaskKind::EditSchedule);
    }
    TaskKind::parse(&norm).filter(|k| k.plannable())
}

// ---------------------------------------------------------------------------------------------
// Per-block parsing

fn parse_block(
    out: &mut ParsedReply,
    index: usize,
    heading: &Heading<'_>,
    body: &str,
    opts: &ParseOptions,
) {
    if heading.kind.trim().eq_ignore_ascii_case("think") {
        // Private reasoning (the original's prompts ask for it): dropped by design.
        tracing::debug!(block = index, "think block dropped");
        return;
    }
    let Some(kind) = block_kind(heading.kind) else {
        let label = format!("block {index} («{}»)", shown_kind(heading.kind));
        warn(out, &label, "unknown kind; skipped");
        return;
    };
    let label = format!("block {index} («{}»)", kind.as_str());
    if heading.bare {
        warn(
            out,
            &label,
            format_args!("heading has no guillemets; read as `# «{}»`", kind.as_str()),
        );
    }
    // An event's heading names the intent it changes (`# «event» event-3f2a…`).
    if !heading.trailing.is_empty()
        && !matches!(
            kind,
            TaskKind::Intent | TaskKind::XSend | TaskKind::Intend | TaskKind::ChatPlan
        )
    {
        warn(
            out,
            &label,
            format_args!(
                "text after the heading ignored: {}",
                excerpt(heading.trailing)
            ),
        );
    }
    let body = body.trim();
    match kind {
        TaskKind::Send => {
            let reply_to = reply_target(out, &label, &heading.id, opts);
            if body.is_empty() {
                warn(out, &label, "empty; skipped");
            } else {
                push_send(out, &label, body, reply_to);
            }
        }
        TaskKind::Voice => {
            let reply_to = reply_target(out, &label, &heading.id, opts);
            let chars = body.chars().count();
            if body.is_empty() {
                warn(out, &label, "empty; skipped");
            } else if !opts.allow_voice {
                warn(
                    out,
                    &label,
                    "voice notes are not enabled here; sent as text",
                );
                push_send(out, &label, body, reply_to);
            } else if chars > crate::core::voice::MAX_VOICE_CHARS {
                warn(
                    out,
                    &label,
                    format_args!(
                        "{chars} characters is too long for a voice note (at most {}); sent as text",
                        crate::core::voice::MAX_VOICE_CHARS
                    ),
                );
                push_send(out, &label, body, reply_to);
            } else {
                out.actions.push(Action::Voice {
                    text: body.to_owned(),
                    reply_to,
                });
            }
        }
        TaskKind::Sticker => {
            let Some(sticker) = parse_sticker(out, &label, body, opts) else {
                return;
            };
            let reply_to = reply_target(out, &label, &heading.id, opts);
            out.actions.push(Action::Sticker { sticker, reply_to });
        }
        TaskKind::Wait => {
            ignore_id(out, &label, &heading.id);
            if let Some(secs) = parse_wait(out, &label, body, opts.max_wait_secs) {
                out.actions.push(Action::Wait { secs });
            }
        }
        TaskKind::React => parse_react(out, &label, &heading.id, body, opts),
        TaskKind::Block | TaskKind::Unblock | TaskKind::ClearConversation => {
            let enabled = match kind {
                TaskKind::ClearConversation => opts.allow_clear_conversation,
                _ => opts.allow_block,
            };
            if !enabled {
                warn(out, &label, "not enabled for this persona; skipped");
                return;
            }
            ignore_id(out, &label, &heading.id);
            if !body.is_empty() {
                warn(
                    out,
                    &label,
                    format_args!("takes no body; ignored {}", excerpt(body)),
                );
            }
            out.actions.push(match kind {
                TaskKind::Block => Action::Block,
                TaskKind::Unblock => Action::Unblock,
                _ => Action::ClearConversation,
            });
        }
        TaskKind::Remember | TaskKind::Note => {
            ignore_id(out, &label, &heading.id);
            let (id, about, content) = memory_fields(body);
            push_memory(out, &label, kind, id, about, content, opts);
        }
        TaskKind::Intent => parse_event(out, &label, heading, body),
        TaskKind::XSend => xsend::parse_xsend(out, &label, heading, body),
        TaskKind::Intend | TaskKind::ChatPlan => {
            commitments::parse_commitment(out, &label, kind, heading, body);
        }
        TaskKind::EditSchedule => {
            ignore_id(out, &label, &heading.id);
            schedule::parse_schedule(out, &label, body, opts);
        }
        TaskKind::SendMedia => {
            send_media::parse_send_media(out, &label, &heading.id, body, opts);
        }
        TaskKind::Retrieve => {
            ignore_id(out, &label, &heading.id);
            retrieve::parse_retrieve(out, &label, body, opts);
        }
        // Not plannable: `block_kind` never returns these.
        TaskKind::Received
        | TaskKind::Classify
        | TaskKind::Shutdown
        | TaskKind::Summarize
        | TaskKind::Schedule
        | TaskKind::Presence
        | TaskKind::Draft => {
            warn(out, &label, "unknown kind; skipped");
        }
    }
}

/// Pushes `text` as one or more sends; only the first part replies.
fn push_send(out: &mut ParsedReply, label: &str, text: &str, reply_to: Option<MessageId>) {
    let parts = split_rendered(text, TELEGRAM_TEXT_LIMIT_UTF16);
    if parts.len() > 1 {
        warn(
            out,
            label,
            format_args!(
                "{} UTF-16 units is over Telegram's limit of {TELEGRAM_TEXT_LIMIT_UTF16}; \
                 split into {} messages",
                utf16_len(text),
                parts.len()
            ),
        );
    }
    for (i, text) in parts.into_iter().enumerate() {
        let reply_to = if i == 0 { reply_to } else { None };
        out.actions.push(Action::Send { text, reply_to });
    }
}

/// The message a send or sticker replies to, if the heading names a usable one.
fn reply_target(
    out: &mut ParsedReply,
    label: &str,
    id: &IdPart<'_>,
    opts: &ParseOptions,
) -> Option<MessageId> {
    match *id {
        IdPart::Absent => None,
        IdPart::Invalid(raw) => {
            warn(
                out,
                label,
                format_args!(
                    "message id {} is out of range; sent without a reply",
                    excerpt(raw)
                ),
            );
            None
        }
        IdPart::Valid(message) => {
            if is_known(opts, message) {
                Some(message)
            } else {
                warn(
                    out,
                    label,
                    format_args!(
                        "message {} is not in this chat's history; sent without a reply",
                        message.0
                    ),
                );
                None
            }
        }
    }
}

fn ignore_id(out: &mut ParsedReply, label: &str, id: &IdPart<'_>) {
    match *id {
        IdPart::Absent => {}
        IdPart::Valid(message) => warn(
            out,
            label,
            format_args!("takes no message id; {} ignored", message.0),
        ),
        IdPart::Invalid(raw) => warn(
            out,
            label,
            format_args!("takes no message id; {} ignored", excerpt(raw)),
        ),
    }
}

fn is_known(opts: &ParseOptions, message: MessageId) -> bool {
    opts.known_messages
        .as_ref()
        .is_none_or(|known| known.contains(&message))
}

/// Non-empty trimmed lines of a body: the first two, and how many more there are.
fn body_lines(body: &str) -> (Option<&str>, Option<&str>, usize) {
    let mut lines = body.lines().map(str::trim).filter(|line| !line.is_empty());
    let first = lines.next();
    let second = lines.next();
    (first, second, lines.count())
}

fn warn_extra_lines(out: &mut ParsedReply, label: &str, extra: usize) {
    if extra > 0 {
        let s = if extra == 1 { "" } else { "s" };
        warn(
            out,
            label,
            format_args!("{extra} extra line{s} in the body ignored"),
        );
    }
}

fn parse_sticker(
    out: &mut ParsedReply,
    label: &str,
    body: &str,
    opts: &ParseOptions,
) -> Option<StickerChoice> {
    let (first, second, more) = body_lines(body);
    let Some(first) = first else {
        warn(
            out,
            label,
            "needs a set and a name (two lines, or `SET :: NAME`); skipped",
        );
        return None;
    };
    let (set, name, extra) = if let Some((set, name)) = first.split_once("::") {
        (
            set.trim(),
            name.trim(),
            more + usize::from(second.is_some()),
        )
    } else if let Some(second) = second {
        (first, second, more)
    } else if let Some(set) = opts.default_sticker_set.as_deref() {
        (set, first, more)
    } else {
        warn(
            out,
            label,
            format_args!(
                "names only a sticker ({}) and the persona has no sticker set; skipped",
                excerpt(first)
            ),
        );
        return None;
    };
    let set_ok = !set.is_empty()
        && set.chars().count() <= MAX_STICKER_FIELD_CHARS
        && set.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !set_ok {
        warn(
            out,
            label,
            format_args!(
                "{} is not a sticker set's short name; skipped",
                excerpt(set)
            ),
        );
        return None;
    }
    if name.is_empty() || name.chars().count() > MAX_STICKER_FIELD_CHARS {
        warn(
            out,
            label,
            format_args!(
                "needs a sticker name of 1 to {MAX_STICKER_FIELD_CHARS} characters, got {}; skipped",
                excerpt(name)
            ),
        );
        return None;
    }
    warn_extra_lines(out, label, extra);
    Some(StickerChoice {
        set: set.to_owned(),
        name: name.to_owned(),
    })
}

fn parse_wait(out: &mut ParsedReply, label: &str, body: &str, max_wait_secs: f64) -> Option<f64> {
    let (first, second, more) = body_lines(body);
    let Some(line) = first else {
        warn(out, label, "needs `delay: N` (seconds); skipped");
        return None;
    };
    let secs = match parse_delay(line) {
        Ok(secs) => secs,
        Err(problem) => {
            warn(
                out,
                label,
                format_args!("delay {} {problem}; skipped", excerpt(line)),
            );
            return None;
        }
    };
    // A NaN or negative maximum from a bad configuration means no waiting at all.
    let max = if max_wait_secs >= 0.0 {
        max_wait_secs
    } else {
        0.0
    };
    let secs = if secs > max {
        warn(
            out,
            label,
            format_args!(
                "delay {} is over the limit of {max} s; clamped",
                excerpt(line)
            ),
        );
        max
    } else {
        secs
    };
    if !secs.is_finite() {
        warn(
            out,
            label,
            "delay is not a finite number of seconds; skipped",
        );
        return None;
    }
    warn_extra_lines(out, label, more + usize::from(second.is_some()));
    Some(secs)
}

/// Parses `delay: N`, `N`, `Ns`, `N seconds`. The result is finite and at least zero, or
/// infinite when the digits overflow `f64` (the caller clamps it).
fn parse_delay(line: &str) -> Result<f64, &'static str> {
    let mut value = line.trim();
    if value
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("delay"))
    {
        value = value.get(5..).unwrap_or("").trim_start();
        value = value.strip_prefix([':', '=']).unwrap_or(value).trim();
    }
    for unit in ["seconds", "second", "secs", "sec", "s"] {
        let n = value.len();
        if n >= unit.len()
            && value
                .get(n - unit.len()..)
                .is_some_and(|tail| tail.eq_ignore_ascii_case(unit))
        {
            value = value.get(..n - unit.len()).unwrap_or("").trim_end();
            break;
        }
    }
    let (negative, digits) = match value.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, value.strip_prefix('+').unwrap_or(value)),
    };
    let well_formed = digits.bytes().any(|b| b.is_ascii_digit())
        && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && digits.bytes().filter(|&b| b == b'.').count() <= 1;
    if !well_formed {
        return Err("is not a number of seconds");
    }
    let secs: f64 = digits.parse().map_err(|_| "is not a number of seconds")?;
    if negative && secs != 0.0 {
        return Err("is negative");
    }
    if secs.is_nan() {
        return Err("is not a number of seconds");
    }
    Ok(secs)
}

fn parse_react(
    out: &mut ParsedReply,
    label: &str,
    id: &IdPart<'_>,
    body: &str,
    opts: &ParseOptions,
) {
    let message = match *id {
        IdPart::Valid(message) => message,
        IdPart::Absent => {
            warn(
                out,
                label,
                "needs the target message id in the heading (`# «react» 1234`); skipped",
            );
            return;
        }
        IdPart::Invalid(raw) => {
            warn(
                out,
                label,
                format_args!("message id {} is out of range; skipped", excerpt(raw)),
            );
            return;
        }
    };
    if !is_known(opts, message) {
        warn(
            out,
            label,
            format_args!(
                "message {} is not in this chat's history; skipped",
                message.0
            ),
        );
        return;
    }
    let (first, second, more) = body_lines(body);
    let Some(emoji) = first else {
        warn(out, label, "needs an emoji; skipped");
        return;
    };
    let emoji_ok = emoji.chars().count() <= MAX_REACTION_CHARS
        && !emoji
            .chars()
            .any(|c| c.is_whitespace() || c.is_ascii_alphabetic());
    if !emoji_ok {
        warn(
            out,
            label,
            format_args!("{} is not a single emoji; skipped", excerpt(emoji)),
        );
        return;
    }
    warn_extra_lines(out, label, more + usize::from(second.is_some()));
    out.actions.push(Action::React {
        message,
        emoji: emoji.to_owned(),
    });
}

/// Keeps at most `max` actions. When the cut drops an `unblock` while a `block` before the cut
/// is still in force, that `block` is dropped too (a cap must not make a timed block permanent).
fn enforce_cap(out: &mut ParsedReply, max: usize) {
    if out.actions.len() <= max {
        return;
    }
    let total = out.actions.len();
    let dropped = out.actions.split_off(max);
    out.warnings.push(format!(
        "reply asks for {total} actions; only the first {max} are kept"
    ));
    if dropped.iter().any(|a| matches!(a, Action::Unblock)) {
        let last_toggle = out
            .actions
            .iter()
            .rposition(|a| matches!(a, Action::Block | Action::Unblock));
        if let Some(pos) = last_toggle
            && matches!(out.actions.get(pos), Some(Action::Block))
        {
            out.actions.remove(pos);
            out.warnings.push(
                "the kept «block» was dropped too: the «unblock» after it was over the limit"
                    .to_owned(),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Warnings

fn warn(out: &mut ParsedReply, label: &str, message: impl fmt::Display) {
    out.warnings.push(format!("{label}: {message}"));
}

/// A quoted, escaped excerpt of model text: at most [`EXCERPT_CHARS`] chars of it.
fn excerpt(text: &str) -> String {
    let mut shown = String::from("\"");
    for (i, c) in text.trim().chars().enumerate() {
        if i == EXCERPT_CHARS {
            shown.push('…');
            break;
        }
        shown.extend(c.escape_debug());
    }
    shown.push('"');
    shown
}

/// An unknown kind as shown in a block label: escaped, at most [`KIND_CHARS`] chars of it.
fn shown_kind(kind: &str) -> String {
    let mut shown = String::new();
    for (i, c) in kind.chars().enumerate() {
        if i == KIND_CHARS {
            shown.push('…');
            break;
        }
        shown.extend(c.escape_debug());
    }
    shown
}

#[cfg(test)]
mod tests;
