//! Planning: turning a chat's history into the actions a persona takes next. The [`Planner`]
//! trait is what the `received` handler calls; an LLM-backed planner implements it, and so do
//! the scripted planners of tests. [`Action`] is the closed set of things a plan may ask for:
//! operator-only tasks (shutdown) are not in it, and no action can name another chat. Each
//! action becomes the task that carries it out through [`Action::into_spec`] (the graph
//! knows tasks, not plans).
//!
//! [`EchoPlanner`] is an offline planner for trying the runtime without an LLM.

use jiff::Timestamp;

use crate::core::graph::{IdempotencyKey, TaskSpec};
use crate::core::llm::LlmError;
use crate::core::media::MediaDescriptions;
use crate::core::model::{Chat, Message, MessageId, StickerChoice};
use crate::core::persona::Persona;

/// One step of a plan, always about the chat being planned for.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Send {
        text: String,
        reply_to: Option<MessageId>,
    },
    Sticker {
        sticker: StickerChoice,
        reply_to: Option<MessageId>,
    },
    /// A voice note saying `text` (only for a persona whose `# Voice` allows it here).
    Voice {
        text: String,
        reply_to: Option<MessageId>,
    },
    Wait {
        secs: f64,
    },
    React {
        message: MessageId,
        emoji: String,
    },
    Block,
    Unblock,
    ClearConversation,
    /// A fact about a person (`about`: their sender id), learnt answering `message`.
    Remember {
        about: i64,
        /// Their name as the chat shows it, when known.
        name: Option<String>,
        write: crate::core::facts::FactWrite,
        message: Option<MessageId>,
    },
    /// A note about this chat.
    Note {
        write: crate::core::facts::FactWrite,
        message: Option<MessageId>,
    },
    /// Create, replace or delete one of the persona's intentions (`intend`): shown in every
    /// chat's prompt.
    Intend {
        write: crate::core::facts::FactWrite,
    },
    /// Create, replace or delete one of the persona's plans for this chat (`plan`).
    ChatPlan {
        write: crate::core::facts::FactWrite,
    },
    /// The persona's own changes to its day (`schedule`): all of one plan's, applied together.
    EditSchedule {
        edits: Vec<crate::core::presence::edit::ActivityEdit>,
    },
    /// Create, change or delete a scheduled intent of this chat.
    Event {
        write: crate::core::intents::IntentWrite,
    },
    /// An item of the persona's album, by its album id (`send_media`).
    SendMedia {
        unique_id: String,
        reply_to: Option<MessageId>,
    },
    /// A note to the persona's future self in another of its chats (`xsend`): shown once, in
    /// that chat's next plan, never to the people there.
    XSend {
        target: crate::core::model::ChatRef,
        intent: String,
    },
    /// Look up these targets (`retrieve`: `http`/`https` URLs or `file:` resources, at most
    /// `retrieve::MAX_URLS`); their text comes back in a follow-up plan of this chat.
    Retrieve {
        urls: Vec<String>,
    },
}

impl Action {
    /// The task that carries out this action; outbound ones get their idempotency key here,
    /// long before their side effect can start.
    pub(crate) fn into_spec(self) -> TaskSpec {
        match self {
            Action::Send { text, reply_to } => TaskSpec::send(text, reply_to),
            Action::Sticker {
                sticker: StickerChoice { set, name },
                reply_to,
            } => TaskSpec::Sticker {
                set,
                name,
                reply_to,
                idempotency_key: IdempotencyKey::fresh(),
            },
            Action::Voice { text, reply_to } => TaskSpec::Voice {
                text,
                reply_to,
                idempotency_key: IdempotencyKey::fresh(),
            },
            Action::Wait { secs } => TaskSpec::wait(secs, false),
            Action::React { message, emoji } => TaskSpec::React {
                message_id: message,
                emoji,
            },
            Action::Block => TaskSpec::Block,
            Action::Unblock => TaskSpec::Unblock,
            Action::ClearConversation => TaskSpec::ClearConversation,
            Action::Remember {
                about,
                name,
                write,
                message,
            } => TaskSpec::Remember {
                about,
                name,
                id: write.id,
                content: write.content,
                message,
            },
            Action::Note { write, message } => TaskSpec::Note {
                id: write.id,
                content: write.content,
                message,
            },
            Action::Intend { write } => TaskSpec::Intend {
                id: write.id,
                content: write.content,
            },
            Action::ChatPlan { write } => TaskSpec::ChatPlan {
                id: write.id,
                content: write.content,
            },
            Action::EditSchedule { edits } => TaskSpec::EditSchedule { edits },
            Action::Event { write } => TaskSpec::Intent { write },
            Action::XSend { target, intent } => TaskSpec::XSend { target, intent },
            Action::SendMedia {
                unique_id,
                reply_to,
            } => TaskSpec::SendMedia {
                unique_id,
                reply_to,
                idempotency_key: IdempotencyKey::fresh(),
            },
            Action::Retrieve { urls } => TaskSpec::Retrieve { urls },
        }
    }
}

/// What a planner gets to see.
#[derive(Debug, Clone, Copy)]
pub struct PlanRequest<'a> {
    pub persona: &'a Persona,
    pub chat: &'a Chat,
    /// Oldest first.
    pub history: &'a [Message],
    /// The message to respond to, when the plan was triggered by one.
    pub target: Option<MessageId>,
    pub now: Timestamp,
    /// Cached records of the history's media, by unique id.
    pub media: &'a MediaDescriptions,
    /// Whether the plan's first message may quote the trigger in a group (the classifier's
    /// impulse was high enough, or the persona was addressed outright).
    pub quote: bool,
    /// The persona's curated stickers, with cached descriptions.
    pub stickers: &'a [crate::core::model::CuratedSticker],
    /// What this chat may see of the persona's long-term memory.
    pub memory: &'a crate::core::facts::MemoryView,
    /// The moment: the persona's activity, a firing intent, the chat's intents, a fresh
    /// start (all for the prompt's final, volatile turn).
    pub moment: &'a Moment,
}

/// What is true of this plan's moment beyond the history: shown in the prompt's final turn,
/// which changes from one request to the next anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Moment {
    /// The persona's current activity (`core::presence`), as prompt lines.
    pub activity: Option<String>,
    /// The scheduled intent this plan fires.
    pub intent: Option<crate::core::intents::Fired>,
    /// The chat's scheduled intents, as prompt lines (empty: none).
    pub intents: String,
    /// The chat starts anew: the persona's `Start Of Conversation` (empty when it has none).
    pub fresh_start: Option<String>,
    /// The days the persona may change (`schedule` tasks), as prompt lines with ids; `None`
    /// when it may not (the parser then refuses such tasks).
    pub schedule: Option<String>,
    /// Documents the persona retrieved in this chat (`retrieve`), still in its window: shown
    /// at the beginning of the conversation, oldest first, as the persona's own lookups.
    pub retrieved: Vec<crate::core::retrieve::Document>,
}

/// Why planning failed (a plan, a schedule, a summary).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The model call failed: worth trying again later when the LLM error is transient
    /// (rate limits, overload, network), not when it is permanent (bad request, bad key,
    /// unknown model).
    #[error("{0}")]
    Llm(#[from] LlmError),
    /// The model answered, but without what was asked (`the model gave no schedule`).
    /// Retrying cannot help.
    #[error("the model gave no {0}")]
    NoAnswer(&'static str),
}

impl PlanError {
    /// Whether trying again later can succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, PlanError::Llm(e) if e.is_transient())
    }
}
