//! What a task does: [`TaskSpec`], a serde-tagged enum with one variant per task kind and
//! its typed parameters. Handlers match on it instead of re-checking a parameter map; the
//! properties of a kind (may it be abandoned mid-flight, does it need an idempotency key)
//! are methods of [`TaskKind`]. Pure data: no I/O, no scheduling.
//!
//! Outbound side effects (`send`, `sticker`) carry an [`IdempotencyKey`] as a field of their
//! variant; the planner's actions (`plan::Action::into_spec`) and the runtime's owner alert
//! build them with [`IdempotencyKey::fresh`], the one generator of keys.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::model::MessageId;

/// Every kind of task the runtime knows. Each has one handler module.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskKind {
    Received,
    Classify,
    Send,
    Sticker,
    Wait,
    React,
    Block,
    Unblock,
    ClearConversation,
    Shutdown,
    Remember,
    Note,
    Summarize,
    Intent,
    Schedule,
    Presence,
    Draft,
    Voice,
    XSend,
    Intend,
    ChatPlan,
    EditSchedule,
    SendMedia,
    Retrieve,
}

impl TaskKind {
    pub(crate) const ALL: [TaskKind; 24] = [
        TaskKind::Received,
        TaskKind::Classify,
        TaskKind::Send,
        TaskKind::Sticker,
        TaskKind::Wait,
        TaskKind::React,
        TaskKind::Block,
        TaskKind::Unblock,
        TaskKind::ClearConversation,
        TaskKind::Shutdown,
        TaskKind::Remember,
        TaskKind::Note,
        TaskKind::Summarize,
        TaskKind::Intent,
        TaskKind::Schedule,
        TaskKind::Presence,
        TaskKind::Draft,
        TaskKind::Voice,
        TaskKind::XSend,
        TaskKind::Intend,
        TaskKind::ChatPlan,
        TaskKind::EditSchedule,
        TaskKind::SendMedia,
        TaskKind::Retrieve,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TaskKind::Received => "received",
            TaskKind::Classify => "classify",
            TaskKind::Send => "send",
            TaskKind::Sticker => "sticker",
            TaskKind::Wait => "wait",
            TaskKind::React => "react",
            TaskKind::Block => "block",
            TaskKind::Unblock => "unblock",
            TaskKind::ClearConversation => "clear-conversation",
            TaskKind::Shutdown => "shutdown",
            TaskKind::Remember => "remember",
            TaskKind::Note => "note",
            TaskKind::Summarize => "summarize",
            TaskKind::Intent => "event",
            TaskKind::Schedule => "schedule",
            TaskKind::Presence => "presence",
            TaskKind::Draft => "draft",
            TaskKind::Voice => "voice",
            TaskKind::XSend => "xsend",
            TaskKind::Intend => "intend",
            TaskKind::ChatPlan => "plan",
            TaskKind::EditSchedule => "schedule-edit",
            TaskKind::SendMedia => "send-media",
            TaskKind::Retrieve => "retrieve",
        }
    }

    pub fn parse(s: &str) -> Option<TaskKind> {
        TaskKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Whether a task of this kind can be abandoned mid-flight without leaving anything half
    /// done (planning, waiting).
    pub(crate) fn cancel_safe(self) -> bool {
        matches!(
            self,
            TaskKind::Received
                | TaskKind::Classify
                | TaskKind::Wait
                | TaskKind::Summarize
                | TaskKind::Schedule
                | TaskKind::XSend
                | TaskKind::Retrieve
        )
    }

    /// Whether a plan may contain the kind (a task block or a planned action); planning,
    /// classifying and stopping are the runtime's own.
    pub fn plannable(self) -> bool {
        !matches!(
            self,
            TaskKind::Received
                | TaskKind::Classify
                | TaskKind::Shutdown
                | TaskKind::Summarize
                | TaskKind::Schedule
                | TaskKind::Presence
                | TaskKind::Draft
        )
    }

    /// Whether the kind has an outbound side effect that must not happen twice, so it
    /// carries an idempotency key.
    pub(crate) fn needs_idempotency_key(self) -> bool {
        matches!(
            self,
            TaskKind::Send | TaskKind::Sticker | TaskKind::Voice | TaskKind::SendMedia
        )
    }
}

impl fmt::Display for TaskKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The key an outbound action is sent with (Telegram's `random_id`): a repeated key returns
/// the message already sent, so a crash between sending and marking done never posts twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct IdempotencyKey(pub i64);

impl IdempotencyKey {
    /// A random positive 63-bit key (zero is avoided). The one generator of keys.
    pub fn fresh() -> IdempotencyKey {
        IdempotencyKey(fastrand::i64(1..i64::MAX))
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What a task does, with its typed parameters. Serialized with a `kind` tag
/// (`{"kind": "send", "text": "hi", "idempotency_key": 42}`); new kinds are new variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TaskSpec {
    /// Plan an answer; `message_id` is the inbound message that triggered it.
    Received {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message_id: Option<MessageId>,
        /// The plan must not quote its trigger (a group classifier's low impulse).
        #[serde(default, skip_serializing_if = "is_false")]
        no_quote: bool,
        /// The scheduled intent this plan fires (no inbound message then).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        intent: Option<crate::core::intents::Fired>,
    },
    /// Classify a group chat's pending batch (its newest message is `message_id`): one
    /// structured-output LLM call whose answer is a plan, a reaction-only answer or nothing.
    Classify {
        message_id: MessageId,
    },
    Send {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<MessageId>,
        idempotency_key: IdempotencyKey,
    },
    Sticker {
        set: String,
        name: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<MessageId>,
        idempotency_key: IdempotencyKey,
    },
    /// A voice note saying `text` (made by the voice port, then sent like a message); a chat
    /// that refuses voice notes gets the same words as text.
    Voice {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<MessageId>,
        idempotency_key: IdempotencyKey,
    },
    /// An item of the persona's album (`send_media`), named by its album id; an id the album
    /// does not have is refused by the handler, never sent as text.
    SendMedia {
        unique_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reply_to: Option<MessageId>,
        idempotency_key: IdempotencyKey,
    },
    /// A note to the persona's future self in chat `target` (`xsend`): the scheduler makes a
    /// plan there that shows `intent` once (checks and caps in `scheduler::xsend`).
    #[serde(rename = "xsend")]
    XSend {
        target: crate::core::model::ChatRef,
        intent: String,
    },
    /// Look up `urls` (`retrieve`): the handler fetches them through the retrieve port, keeps
    /// their text for the chat and the scheduler plans again with it (`scheduler::retrieve`).
    Retrieve {
        urls: Vec<String>,
    },
    /// A pause of `delay_secs`, counted from when its dependencies finish; with `typing`,
    /// the typing indicator is shown first, with `recording` the "recording a voice message"
    /// one. `retry_of` names the task a retry wait precedes.
    Wait {
        delay_secs: f64,
        #[serde(default, skip_serializing_if = "is_false")]
        typing: bool,
        #[serde(default, skip_serializing_if = "is_false")]
        recording: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_of: Option<String>,
    },
    React {
        message_id: MessageId,
        emoji: String,
    },
    Block,
    Unblock,
    ClearConversation,
    /// Operator only: stop the daemon gracefully.
    Shutdown {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Keep (or, with empty `content`, forget) a fact about the person `about`, learnt in
    /// answer to `message`.
    Remember {
        about: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<MessageId>,
    },
    /// Summarize the oldest unsummarized stretch of the chat (in the background, after a
    /// reply): the runtime's own, never planned by a model.
    Summarize,
    /// Create, change or delete a scheduled intent of this chat (the original's `event`).
    #[serde(rename = "event")]
    Intent {
        #[serde(flatten)]
        write: crate::core::intents::IntentWrite,
    },
    /// Write the persona's schedule for the local `date` (`YYYY-MM-DD`): one model call in
    /// the agent's own chat, the runtime's own.
    Schedule {
        date: String,
    },
    /// Show the account online or offline (the schedule's sleep): the runtime's own.
    Presence {
        online: bool,
    },
    /// Wait for the owner's approval of the rest of the plan (draft mode): posted to the
    /// owner first, then pending until the owner decides or `timeout_secs` pass. The
    /// runtime's own, made by the `received` handler.
    Draft {
        /// The message the plan answers.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        answers: Option<MessageId>,
        /// What the owner reads: the chat, the message, the plan's actions numbered.
        draft: String,
        /// The key the draft is posted with.
        idempotency_key: IdempotencyKey,
        timeout_secs: u64,
        #[serde(default)]
        on_timeout: crate::core::approval::OnTimeout,
        /// Where the draft was posted, once it was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        posted: Option<crate::core::approval::Posted>,
        /// The owner's word, when it came while the task ran.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<crate::core::approval::Decision>,
    },
    /// Keep, replace or delete one of the persona's intentions (shown in every chat).
    Intend {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        content: String,
    },
    /// Keep, replace or delete one of the persona's plans for this chat.
    ChatPlan {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        content: String,
    },
    /// The persona's own changes to its day, applied together by the scheduler.
    EditSchedule {
        edits: Vec<crate::core::presence::edit::ActivityEdit>,
    },
    /// Keep (or forget) a note about this chat.
    Note {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<MessageId>,
    },
}

impl TaskSpec {
    pub fn kind(&self) -> TaskKind {
        match self {
            TaskSpec::Received { .. } => TaskKind::Received,
            TaskSpec::Classify { .. } => TaskKind::Classify,
            TaskSpec::Send { .. } => TaskKind::Send,
            TaskSpec::Sticker { .. } => TaskKind::Sticker,
            TaskSpec::Wait { .. } => TaskKind::Wait,
            TaskSpec::React { .. } => TaskKind::React,
            TaskSpec::Block => TaskKind::Block,
            TaskSpec::Unblock => TaskKind::Unblock,
            TaskSpec::ClearConversation => TaskKind::ClearConversation,
            TaskSpec::Shutdown { .. } => TaskKind::Shutdown,
            TaskSpec::Remember { .. } => TaskKind::Remember,
            TaskSpec::Note { .. } => TaskKind::Note,
            TaskSpec::Summarize => TaskKind::Summarize,
            TaskSpec::Intent { .. } => TaskKind::Intent,
            TaskSpec::Schedule { .. } => TaskKind::Schedule,
            TaskSpec::Presence { .. } => TaskKind::Presence,
            TaskSpec::Draft { .. } => TaskKind::Draft,
            TaskSpec::Voice { .. } => TaskKind::Voice,
            TaskSpec::XSend { .. } => TaskKind::XSend,
            TaskSpec::Intend { .. } => TaskKind::Intend,
            TaskSpec::ChatPlan { .. } => TaskKind::ChatPlan,
            TaskSpec::EditSchedule { .. } => TaskKind::EditSchedule,
            TaskSpec::SendMedia { .. } => TaskKind::SendMedia,
            TaskSpec::Retrieve { .. } => TaskKind::Retrieve,
        }
    }

    /// A text message with a fresh idempotency key.
    pub fn send(text: impl Into<String>, reply_to: Option<MessageId>) -> TaskSpec {
        TaskSpec::Send {
            text: text.into(),
            reply_to,
            idempotency_key: IdempotencyKey::fresh(),
        }
    }

    /// A pause of `secs` seconds (negative or garbage becomes zero).
    pub fn wait(secs: f64, typing: bool) -> TaskSpec {
        TaskSpec::Wait {
            delay_secs: if secs.is_finite() { secs.max(0.0) } else { 0.0 },
            typing,
            recording: false,
            retry_of: None,
        }
    }

    /// What the task will do, in one short line for the operator (`ctl plans`, `/plans`): a
    /// send's text (cut at 80 characters), a sticker, a reaction, a wait, an intent.
    pub fn summary(&self) -> String {
        let cut = |t: &str| {
            let one: String = t.split_whitespace().collect::<Vec<_>>().join(" ");
            match one.char_indices().nth(80) {
                Some((i, _)) => format!("{:?}…", &one[..i]),
                None => format!("{one:?}"),
            }
        };
        let reply =
            |r: &Option<MessageId>| r.map(|id| format!(" (reply to #{id})")).unwrap_or_default();
        match self {
            TaskSpec::Received {
                message_id, intent, ..
            } => match (message_id, intent) {
                (_, Some(f)) => format!("for the intent {}", f.id),
                (Some(id), None) => format!("answering #{id}"),
                (None, None) => String::new(),
            },
            TaskSpec::Classify { message_id } => format!("up to #{message_id}"),
            TaskSpec::Send { text, reply_to, .. } => format!("{}{}", cut(text), reply(reply_to)),
            TaskSpec::XSend { target, intent } => format!("to chat {target}: {}", cut(intent)),
            TaskSpec::Retrieve { urls } => cut(&urls.join(" ")),
            TaskSpec::Voice { text, reply_to, .. } => {
                format!("voice note: {}{}", cut(text), reply(reply_to))
            }
            TaskSpec::SendMedia {
                unique_id,
                reply_to,
                ..
            } => format!("album item {unique_id}{}", reply(reply_to)),
            TaskSpec::Sticker {
                set,
                name,
                reply_to,
                ..
            } => format!("{set} / {name}{}", reply(reply_to)),
            TaskSpec::Wait {
                delay_secs,
                typing,
                recording,
                ..
            } => {
                if *recording {
                    "recording a voice note".into()
                } else if *typing {
                    "typing".into()
                } else {
                    format!("{delay_secs:.1} s")
                }
            }
            TaskSpec::React { message_id, emoji } => format!("{emoji} on #{message_id}"),
            TaskSpec::Remember { content, .. } | TaskSpec::Note { content, .. } => cut(content),
            TaskSpec::Intend { id, content } | TaskSpec::ChatPlan { id, content } => {
                match (content.trim().is_empty(), id) {
                    (true, Some(id)) => format!("delete {id}"),
                    (_, Some(id)) => format!("{id}: {}", cut(content)),
                    (_, None) => cut(content),
                }
            }
            TaskSpec::Intent { write } => match (&write.time, write.text.is_empty()) {
                (_, true) => format!("delete {}", write.id.as_deref().unwrap_or("?")),
                (Some(t), false) => format!("at {t}: {}", cut(&write.text)),
                (None, false) => cut(&write.text),
            },
            TaskSpec::Schedule { date } => format!("the day {date}"),
            TaskSpec::EditSchedule { edits } => format!("{} change(s) to its day", edits.len()),
            TaskSpec::Presence { online } => (if *online { "online" } else { "offline" }).into(),
            TaskSpec::Shutdown { reason } => reason.clone().unwrap_or_default(),
            TaskSpec::Draft {
                posted, decision, ..
            } => match (posted, decision) {
                (_, Some(d)) => d.verb().to_string(),
                (Some(_), None) => "waiting for the owner".into(),
                (None, None) => "to post to the owner".into(),
            },
            TaskSpec::Block
            | TaskSpec::Unblock
            | TaskSpec::ClearConversation
            | TaskSpec::Summarize => String::new(),
        }
    }

    /// The idempotency key of an outbound task.
    pub fn idempotency_key(&self) -> Option<IdempotencyKey> {
        match self {
            TaskSpec::Send {
                idempotency_key, ..
            }
            | TaskSpec::Sticker {
                idempotency_key, ..
            }
            | TaskSpec::SendMedia {
                idempotency_key, ..
            } => Some(*idempotency_key),
            _ => None,
        }
    }

    /// The message an outbound task replies to.
    pub fn reply_to(&self) -> Option<MessageId> {
        match self {
            TaskSpec::Send { reply_to, .. }
            | TaskSpec::Sticker { reply_to, .. }
            | TaskSpec::SendMedia { reply_to, .. } => *reply_to,
            _ => None,
        }
    }

    /// The delay of a `wait` task; zero for other kinds.
    pub(crate) fn wait_delay(&self) -> Duration {
        match self {
            TaskSpec::Wait { delay_secs, .. } => crate::core::time::secs_f64(*delay_secs),
            _ => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_serialize_with_a_kind_tag_and_round_trip() {
        let specs = vec![
            TaskSpec::Received {
                message_id: Some(MessageId(3)),
                no_quote: false,
                intent: None,
            },
            TaskSpec::Received {
                message_id: None,
                no_quote: true,
                intent: Some(crate::core::intents::Fired {
                    id: "event-1".into(),
                    text: "say hi".into(),
                    due: jiff::Timestamp::UNIX_EPOCH,
                    urgent: true,
                }),
            },
            TaskSpec::Intent {
                write: crate::core::intents::IntentWrite {
                    id: None,
                    text: "remind".into(),
                    time: Some("2026-12-01 09:00".into()),
                    interval: Some("1 day".into()),
                    ..Default::default()
                },
            },
            TaskSpec::Schedule {
                date: "2026-12-01".into(),
            },
            TaskSpec::Presence { online: false },
            TaskSpec::Classify {
                message_id: MessageId(5),
            },
            TaskSpec::send("hi", Some(MessageId(2))),
            TaskSpec::wait(1.5, true),
            TaskSpec::Block,
            TaskSpec::ClearConversation,
            TaskSpec::Shutdown { reason: None },
        ];
        for spec in specs {
            let json = serde_json::to_string(&spec).unwrap_or_default();
            assert!(
                json.contains(&format!("\"kind\":\"{}\"", spec.kind())),
                "{json}"
            );
            let back: Result<TaskSpec, _> = serde_json::from_str(&json);
            assert_eq!(back.ok(), Some(spec));
        }
    }

    #[test]
    fn a_send_without_its_key_or_with_a_stray_field_is_rejected() {
        assert!(serde_json::from_str::<TaskSpec>(r#"{"kind":"send","text":"x"}"#).is_err());
        assert!(
            serde_json::from_str::<TaskSpec>(
                r#"{"kind":"send","text":"x","idempotency_key":1,"extra":2}"#
            )
            .is_err()
        );
    }

    #[test]
    fn kind_properties() {
        assert!(TaskKind::Wait.cancel_safe() && TaskKind::Received.cancel_safe());
        assert!(!TaskKind::Send.cancel_safe());
        let keyed: Vec<TaskKind> = TaskKind::ALL
            .into_iter()
            .filter(|k| k.needs_idempotency_key())
            .collect();
        assert_eq!(
            keyed,
            vec![
                TaskKind::Send,
                TaskKind::Sticker,
                TaskKind::Voice,
                TaskKind::SendMedia
            ]
        );
    }
}
