//! The outcome of a task: what a handler hands back to the scheduler (done, a plan, a stop)
//! and why a task failed, classified into what the scheduler does with the conversation.
//! Pure vocabulary between `runtime::handlers` (which produce it) and `core::scheduler` (which
//! applies it); Telegram's and the planner's errors map into it here.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::core::graph::{Task, TaskKind};
use crate::core::model::MessageId;
use crate::core::model::TelegramError;
use crate::core::plan::PlanError;

/// What a finished task asks the scheduler to do.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Mark the task done.
    Done,
    /// Mark the task done and append these tasks as a chain after it.
    Planned(Vec<Task>),
    /// Mark the task done and stop the daemon gracefully.
    Shutdown { reason: String },
    /// Mark the task done and replace the conversation's graph by a plan answering
    /// `message_id`, not before `at` (a group message the classifier found addressed).
    Replan {
        message_id: MessageId,
        quote: bool,
        at: Timestamp,
    },
    /// Mark the task done and use this day of the agent's schedule (a `schedule` task's
    /// answer, or its fallback).
    Day(Box<crate::core::presence::DaySchedule>),
    /// Mark the task done and apply this change to the chat's scheduled intents.
    Intent(crate::core::intents::IntentWrite),
    /// Mark the task done and apply the persona's changes to its own day (`schedule`).
    EditSchedule(Vec<crate::core::presence::edit::ActivityEdit>),
    /// Mark the task done and leave this note for the persona in chat `target` (`xsend`).
    XSend {
        target: crate::core::model::ChatRef,
        intent: String,
    },
    /// Mark the task done; a `retrieve` kept `added` (new documents of this chat, by URL) and
    /// refused what `refused` says: with anything added, the scheduler plans this chat again
    /// so the model reads them (`scheduler::retrieve`).
    Retrieved {
        added: Vec<String>,
        refused: Vec<String>,
    },
    /// A `draft` task posted its draft here: it stays pending until the owner decides or its
    /// timeout passes.
    Drafted(crate::core::approval::Posted),
    /// End the plan here, on purpose (a draft timed out with `then drop`): the graph goes,
    /// with the reason logged.
    Dropped { reason: String },
}

/// Why a task failed, and what that means for its conversation: the variant is what the
/// scheduler does, the [`Cause`] (or the Telegram error) is why. `Display` is the cause's
/// text, which the logs, the graph's `last_error` and the owner's notices show.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum TaskError {
    /// Try again after the retry interval.
    #[error(transparent)]
    Transient(Cause),
    /// Trying again cannot help: drop the graph.
    #[error(transparent)]
    Permanent(Cause),
    /// Telegram asked us to wait (flood wait, slow mode): park the conversation for `secs`
    /// without counting an attempt.
    #[error("{cause}")]
    Park {
        secs: u64,
        #[source]
        cause: TelegramError,
    },
    /// We may not write in this chat (banned, write forbidden): drop the graph and disable
    /// the chat.
    #[error(transparent)]
    ChatForbidden(TelegramError),
    /// The account is limited by Telegram (peer flood, spam reports): drop the graph and trip
    /// the agent's breaker.
    #[error(transparent)]
    AccountLimited(TelegramError),
    /// The session is gone: stop the agent.
    #[error(transparent)]
    Unauthorized(TelegramError),
}

/// An error of a port whose type the core does not name (the memory store's, a worker
/// thread's), kept whole as the cause.
pub(crate) type PortError = Arc<dyn std::error::Error + Send + Sync>;

/// Why a task failed, whatever the scheduler then does about it.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum Cause {
    /// A Telegram call failed (a passing network trouble, or a chat or message that is not
    /// there, a request Telegram refuses).
    #[error(transparent)]
    Telegram(#[from] TelegramError),
    /// Planning failed: the planner's LLM call, or an answer without what was asked.
    #[error("planning failed: {0}")]
    Planning(#[source] PlanError),
    /// The draft could not be posted to the owner's chat (the account left the admin group,
    /// the chat is gone): about the owner's chat, never the contact's.
    #[error("the draft could not be posted to the owner's chat: {}", detail(.0))]
    DraftNotPosted(#[source] TelegramError),
    /// The task ran longer than the task timeout.
    #[error("timed out after {} s", .0.as_secs_f64())]
    TimedOut(Duration),
    /// The memory store failed to write a fact.
    #[error("memory write failed: {0}")]
    MemoryWrite(#[source] PortError),
    /// The worker thread writing a fact stopped before it answered.
    #[error("memory write stopped: {0}")]
    MemoryWriteStopped(#[source] PortError),
    /// The retrieved documents of a chat could not be read or kept.
    #[error("retrieved documents not kept: {0}")]
    Documents(#[source] PortError),
    /// The registry handed a handler a task of another kind (a programming error).
    #[error("{expected} handler got a {got} task")]
    SpecMismatch { expected: TaskKind, got: TaskKind },
    /// A `send` task with nothing to send.
    #[error("send task without text")]
    NothingToSend,
    /// A `schedule` task whose date does not parse.
    #[error("schedule task for {0:?}, which is not a date")]
    NotADate(String),
}

/// What a Telegram error says beyond its kind (`Forbidden(why)` gives `why`).
fn detail(e: &TelegramError) -> String {
    match e {
        TelegramError::AccountLimited(why)
        | TelegramError::Forbidden(why)
        | TelegramError::ContentRefused(why)
        | TelegramError::Unauthorized(why)
        | TelegramError::NotFound(why)
        | TelegramError::Invalid(why)
        | TelegramError::TooLong(why)
        | TelegramError::Network(why)
        | TelegramError::Other(why) => why.clone(),
        TelegramError::FloodWait { .. }
        | TelegramError::SlowmodeWait { .. }
        | TelegramError::Local(_) => e.to_string(),
    }
}

impl TaskError {
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, TaskError::Transient(_))
    }
}

impl From<TelegramError> for TaskError {
    fn from(e: TelegramError) -> Self {
        match e {
            TelegramError::FloodWait { secs } | TelegramError::SlowmodeWait { secs } => {
                TaskError::Park { secs, cause: e }
            }
            TelegramError::Forbidden(_) => TaskError::ChatForbidden(e),
            TelegramError::AccountLimited(_) => TaskError::AccountLimited(e),
            TelegramError::Unauthorized(_) => TaskError::Unauthorized(e),
            TelegramError::Network(_) | TelegramError::Other(_) | TelegramError::Local(_) => {
                TaskError::Transient(Cause::Telegram(e))
            }
            TelegramError::NotFound(_)
            | TelegramError::Invalid(_)
            | TelegramError::TooLong(_)
            | TelegramError::ContentRefused(_) => TaskError::Permanent(Cause::Telegram(e)),
        }
    }
}

impl From<PlanError> for TaskError {
    fn from(e: PlanError) -> Self {
        if e.is_transient() {
            TaskError::Transient(Cause::Planning(e))
        } else {
            TaskError::Permanent(Cause::Planning(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Cause, TaskError};
    use crate::core::llm::LlmError;
    use crate::core::model::TelegramError;
    use crate::core::plan::PlanError;

    #[test]
    fn telegram_errors_keep_their_kind_and_text() {
        let cases = [
            (TelegramError::FloodWait { secs: 30 }, "park"),
            (TelegramError::SlowmodeWait { secs: 10 }, "park"),
            (
                TelegramError::Forbidden("CHAT_WRITE_FORBIDDEN".into()),
                "forbidden",
            ),
            (
                TelegramError::AccountLimited("PEER_FLOOD".into()),
                "limited",
            ),
            (
                TelegramError::Unauthorized("AUTH_KEY_UNREGISTERED".into()),
                "unauthorized",
            ),
            (TelegramError::Network("reset".into()), "transient"),
            (TelegramError::Other("500".into()), "transient"),
            (TelegramError::NotFound("message 3".into()), "permanent"),
            (TelegramError::Invalid("bad".into()), "permanent"),
            (
                TelegramError::ContentRefused("stickers".into()),
                "permanent",
            ),
        ];
        for (e, kind) in cases {
            let text = e.to_string();
            let task = TaskError::from(e.clone());
            let got = match &task {
                TaskError::Park { secs, cause } => {
                    assert!(
                        matches!(cause, TelegramError::FloodWait { secs: s } | TelegramError::SlowmodeWait { secs: s } if s == secs)
                    );
                    "park"
                }
                TaskError::ChatForbidden(_) => "forbidden",
                TaskError::AccountLimited(_) => "limited",
                TaskError::Unauthorized(_) => "unauthorized",
                TaskError::Transient(Cause::Telegram(c)) if *c == e => "transient",
                TaskError::Permanent(Cause::Telegram(c)) if *c == e => "permanent",
                other => panic!("{e:?} became {other:?}"),
            };
            assert_eq!(got, kind, "{e:?}");
            assert_eq!(
                task.to_string(),
                text,
                "the text reads as the Telegram error's"
            );
            assert_eq!(task.is_transient(), kind == "transient");
        }
    }

    #[test]
    fn planning_failures_are_transient_as_their_llm_error_is() {
        let busy = PlanError::Llm(LlmError::Transient {
            status: Some(503),
            message: "overloaded".into(),
            retry_after: None,
        });
        let task = TaskError::from(busy.clone());
        assert!(task.is_transient());
        assert!(matches!(&task, TaskError::Transient(Cause::Planning(p)) if *p == busy));
        assert_eq!(
            task.to_string(),
            "planning failed: transient LLM error (HTTP 503): overloaded"
        );
        let refused = TaskError::from(PlanError::Llm(LlmError::Permanent {
            status: Some(400),
            message: "bad request".into(),
        }));
        assert!(matches!(
            refused,
            TaskError::Permanent(Cause::Planning(PlanError::Llm(_)))
        ));
        let empty = TaskError::from(PlanError::NoAnswer("schedule"));
        assert!(!empty.is_transient());
        assert_eq!(
            empty.to_string(),
            "planning failed: the model gave no schedule"
        );
    }

    #[test]
    fn the_cause_is_the_source_of_a_chained_error() {
        let e = Cause::DraftNotPosted(TelegramError::Forbidden("USER_BANNED_IN_CHANNEL".into()));
        assert_eq!(
            e.to_string(),
            "the draft could not be posted to the owner's chat: USER_BANNED_IN_CHANNEL"
        );
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(
            source.as_deref(),
            Some("writing to this chat is forbidden (USER_BANNED_IN_CHANNEL)")
        );
    }
}
