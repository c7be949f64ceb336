//! The outcome of a task: what a handler hands back to the scheduler (done, a plan, a stop)
//! and why a task failed, classified into what the scheduler does with the conversation.
//! Pure vocabulary between `runtime::handlers` (which produce it) and `core::scheduler` (which
//! applies it); Telegram's and the planner's errors map into it here.

use jiff::Timestamp;

use crate::core::graph::Task;
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
    /// A `draft` task posted its draft here: it stays pending until the owner decides or its
    /// timeout passes.
    Drafted(crate::core::approval::Posted),
    /// End the plan here, on purpose (a draft timed out with `then drop`): the graph goes,
    /// with the reason logged.
    Dropped { reason: String },
}

/// Why a task failed, and what that means for its conversation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TaskError {
    /// Try again after the retry interval.
    #[error("{0}")]
    Transient(String),
    /// Trying again cannot help: drop the graph.
    #[error("{0}")]
    Permanent(String),
    /// Telegram asked us to wait (flood wait, slow mode): park the conversation for `secs`
    /// without counting an attempt.
    #[error("{reason}")]
    Park { secs: u64, reason: String },
    /// We may not write in this chat (banned, write forbidden): drop the graph and disable
    /// the chat.
    #[error("{0}")]
    ChatForbidden(String),
    /// The account is limited by Telegram (peer flood, spam reports): drop the graph and trip
    /// the agent's breaker.
    #[error("{0}")]
    AccountLimited(String),
    /// The session is gone: stop the agent.
    #[error("{0}")]
    Unauthorized(String),
}

impl TaskError {
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, TaskError::Transient(_))
    }
}

impl From<TelegramError> for TaskError {
    fn from(e: TelegramError) -> Self {
        let text = e.to_string();
        match e {
            TelegramError::FloodWait { secs } | TelegramError::SlowmodeWait { secs } => {
                TaskError::Park { secs, reason: text }
            }
            TelegramError::Forbidden(_) => TaskError::ChatForbidden(text),
            TelegramError::AccountLimited(_) => TaskError::AccountLimited(text),
            TelegramError::Unauthorized(_) => TaskError::Unauthorized(text),
            TelegramError::Network(_) | TelegramError::Other(_) => TaskError::Transient(text),
            TelegramError::NotFound(_)
            | TelegramError::Invalid(_)
            | TelegramError::ContentRefused(_) => TaskError::Permanent(text),
        }
    }
}

impl From<PlanError> for TaskError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::Transient(m) => TaskError::Transient(format!("planning failed: {m}")),
            PlanError::Permanent(m) => TaskError::Permanent(format!("planning failed: {m}")),
        }
    }
}
