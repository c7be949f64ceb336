//! `received`: the planning step. Marks the chat read, fetches its history through the
//! Telegram trait, asks the planner what to do, and returns the plan as a chain of tasks.
//! Runs only when its debounce window has passed, so a burst of messages costs one plan.

use serde_json::{Map, Value};

use super::{HandlerResult, IDEMPOTENCY_KEY, Outcome, TaskContext, TaskHandler};
use crate::clock::BoxFuture;
use crate::graph::{Task, TaskKind};
use crate::planner::{Action, PlanRequest};
use crate::telegram::MessageId;

pub struct Received;

impl TaskHandler for Received {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let target = ctx.task.param_i64("message_id").map(MessageId);
            if let Some(upto) = target {
                // Read receipts are cosmetic: never fail planning over them.
                if let Err(e) = ctx.telegram.mark_read(ctx.chat.id, upto).await {
                    tracing::debug!(error = %e, "mark read failed");
                }
            }
            let history = ctx
                .telegram
                .fetch_history(ctx.chat.id, ctx.config.history_limit)
                .await?;
            let now = ctx.clock.now();
            let actions = ctx
                .planner
                .plan(PlanRequest {
                    persona: &ctx.persona,
                    chat: &ctx.chat,
                    history: &history,
                    target,
                    now,
                })
                .await?;
            if actions.is_empty() {
                tracing::info!(agent = %ctx.key.agent, chat = %ctx.key.chat, "planner chose silence");
            }
            Ok(Outcome::Planned(tasks_from_actions(actions, now)))
        })
    }
}

/// Turns planned actions into pending tasks (not yet chained). Outbound tasks get their
/// idempotency key here, long before their side effect can start.
pub fn tasks_from_actions(actions: Vec<Action>, now: jiff::Timestamp) -> Vec<Task> {
    actions
        .into_iter()
        .map(|action| {
            let mut p = Map::new();
            let kind = match action {
                Action::Send { text, reply_to } => {
                    p.insert("text".into(), Value::from(text));
                    put_reply_to(&mut p, reply_to);
                    put_key(&mut p);
                    TaskKind::Send
                }
                Action::Sticker { sticker, reply_to } => {
                    p.insert("set".into(), Value::from(sticker.set));
                    p.insert("name".into(), Value::from(sticker.name));
                    put_reply_to(&mut p, reply_to);
                    put_key(&mut p);
                    TaskKind::Sticker
                }
                Action::Wait { secs } => {
                    p.insert("delay_secs".into(), Value::from(secs.max(0.0)));
                    TaskKind::Wait
                }
                Action::React { message, emoji } => {
                    p.insert("message_id".into(), Value::from(message.0));
                    p.insert("emoji".into(), Value::from(emoji));
                    TaskKind::React
                }
                Action::Block => TaskKind::Block,
                Action::Unblock => TaskKind::Unblock,
                Action::ClearConversation => TaskKind::ClearConversation,
            };
            Task::new(kind, p, now)
        })
        .collect()
}

fn put_reply_to(p: &mut Map<String, Value>, reply_to: Option<MessageId>) {
    if let Some(id) = reply_to {
        p.insert("reply_to".into(), Value::from(id.0));
    }
}

/// A random positive 63-bit key (Telegram's `random_id` is an i64; zero is avoided).
pub fn new_idempotency_key() -> i64 {
    fastrand::i64(1..i64::MAX)
}

fn put_key(p: &mut Map<String, Value>) {
    p.insert(IDEMPOTENCY_KEY.into(), Value::from(new_idempotency_key()));
}
