//! Task handlers: one module per task kind, all registered in [`handler_for`], the single
//! place that maps a [`TaskKind`] to the code that runs it. A handler performs one task's side
//! effect through the Telegram trait (or the planner) and reports an [`Outcome`]; it never
//! touches the graph, the queue or the disk: the scheduler applies outcomes and persists.

mod block;
mod classify;
mod clear_conversation;
mod draft;
mod intent;
mod memory;
mod presence;
mod react;
mod received;
mod retrieve;
mod schedule;
mod send;
mod send_media;
mod shutdown;
mod sticker;
mod summarize;
mod unblock;
mod voice;
mod wait;
mod xsend;

use std::sync::Arc;

use crate::core::config::RuntimeConfig;
use crate::core::graph::{ConversationKey, Task, TaskKind};
use crate::core::model::Chat;
use crate::core::outcome::{Cause, Outcome, TaskError};
use crate::core::persona::Persona;
use crate::core::time::BoxFuture;
use crate::ports::clock::SharedClock;
use crate::ports::facts::SharedFacts;
use crate::ports::groups::SharedGroups;
use crate::ports::media::SharedMedia;
use crate::ports::planner::SharedPlanner;
use crate::ports::stickers::SharedStickers;
use crate::ports::telegram::Telegram;

/// Everything a handler may use while running one task.
#[derive(Clone)]
pub(crate) struct TaskContext {
    pub key: ConversationKey,
    pub chat: Chat,
    pub task: Task,
    pub persona: Arc<Persona>,
    pub telegram: Arc<dyn Telegram>,
    pub planner: SharedPlanner,
    pub clock: SharedClock,
    pub config: Arc<RuntimeConfig>,
    /// The media description pipeline, when the process has one (it needs an LLM).
    pub media: Option<SharedMedia>,
    /// What makes voice notes, when the process has it.
    pub voice: Option<crate::ports::voice::SharedVoice>,
    /// Curated stickers of every agent.
    pub stickers: SharedStickers,
    /// Long-term memory, when the process keeps it.
    pub facts: Option<SharedFacts>,
    /// The group decision pipeline the `classify` task calls, when groups are wired.
    pub groups: Option<SharedGroups>,
    /// The web fetcher and the chats' retrieved documents, when the process has them.
    pub retrieval: Option<crate::ports::retrieve::SharedRetrieval>,
    /// The agent's schedule and intents when the task started (planning, `schedule`).
    pub presence: Option<Box<crate::core::scheduler::AgentPresence>>,
    /// The owner's draft-mode override for this chat, when planning.
    pub approval: Option<crate::core::approval::ApprovalMode>,
}

impl TaskContext {
    /// The task's spec, with a permanent error when the registry handed a handler a task of
    /// another kind (a programming error, never a panic).
    fn spec_mismatch(&self, expected: TaskKind) -> TaskError {
        TaskError::Permanent(Cause::SpecMismatch {
            expected,
            got: self.task.kind(),
        })
    }
}

pub(crate) type HandlerResult = Result<Outcome, TaskError>;

/// Runs one kind of task.
pub(crate) trait TaskHandler: Send + Sync {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult>;
}

/// The registry: the handler of every task kind.
pub(crate) fn handler_for(kind: TaskKind) -> &'static dyn TaskHandler {
    match kind {
        TaskKind::Received => &received::Received,
        TaskKind::Classify => &classify::Classify,
        TaskKind::Send => &send::Send,
        TaskKind::Sticker => &sticker::Sticker,
        TaskKind::Wait => &wait::Wait,
        TaskKind::React => &react::React,
        TaskKind::Block => &block::Block,
        TaskKind::Unblock => &unblock::Unblock,
        TaskKind::ClearConversation => &clear_conversation::ClearConversation,
        TaskKind::Shutdown => &shutdown::Shutdown,
        TaskKind::Remember | TaskKind::Note | TaskKind::Intend | TaskKind::ChatPlan => {
            &memory::Memory
        }
        TaskKind::Summarize => &summarize::Summarize,
        TaskKind::Intent | TaskKind::EditSchedule => &intent::Intent,
        TaskKind::Schedule => &schedule::Schedule,
        TaskKind::Presence => &presence::Presence,
        TaskKind::Draft => &draft::Draft,
        TaskKind::Voice => &voice::Voice,
        TaskKind::XSend => &xsend::XSend,
        TaskKind::SendMedia => &send_media::SendMedia,
        TaskKind::Retrieve => &retrieve::Retrieve,
    }
}

/// Logs that the task was refused (it completes without acting), and why.
fn refused(ctx: &TaskContext, why: &str) {
    tracing::warn!(
        event = "task_refused",
        agent = %ctx.key.agent,
        chat = %ctx.key.chat,
        kind = %ctx.task.kind(),
        "refused: {why}"
    );
}

/// Whether the persona (as it is now, not when the plan was made) allows this task; if not,
/// the refusal is logged naming the persona heading that would allow it.
fn allowed_by_persona(ctx: &TaskContext, allowed: bool, heading: &str) -> bool {
    if !allowed {
        refused(ctx, &format!("the persona does not have {heading}"));
    }
    allowed
}

/// For tasks that only make sense in a one-on-one chat (block, unblock, clear): `Ok(false)`
/// (and a warning) in a group, so the task completes without acting. The kind saved in the
/// graph is not trusted alone (a damaged or edited file could call a group direct): Telegram
/// is asked what the chat is now.
async fn direct_only(ctx: &TaskContext) -> Result<bool, TaskError> {
    let live = if ctx.chat.kind.is_direct() {
        ctx.telegram.chat(ctx.chat.id).await?.kind
    } else {
        ctx.chat.kind
    };
    if !live.is_direct() {
        refused(ctx, "this task acts only in direct messages");
    }
    Ok(live.is_direct())
}

/// Counts a finished task for metrics: by outcome, and Telegram's waits with their length.
pub(crate) fn record_outcome(
    result: &Result<crate::core::outcome::Outcome, crate::core::outcome::TaskError>,
) {
    let outcome = match result {
        Ok(_) => "ok",
        Err(crate::core::outcome::TaskError::Park { secs, .. }) => {
            metrics::counter!("personad_flood_waits_total").increment(1);
            metrics::counter!("personad_parked_seconds_total").increment(*secs);
            "parked"
        }
        Err(crate::core::outcome::TaskError::ChatForbidden(_)) => "forbidden",
        Err(crate::core::outcome::TaskError::AccountLimited(_)) => "limited",
        Err(crate::core::outcome::TaskError::Unauthorized(_)) => "unauthorized",
        Err(_) => "error",
    };
    metrics::counter!("personad_tasks_finished_total", "outcome" => outcome).increment(1);
}
