//! `react`: puts an emoji reaction (`emoji`) on a message (`message_id`) of the same chat.

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::model::TelegramError;
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct React;

impl TaskHandler for React {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::React { message_id, emoji } = &ctx.task.spec else {
                return Err(ctx.spec_mismatch(TaskKind::React));
            };
            match ctx.telegram.react(ctx.chat.id, *message_id, emoji).await {
                Ok(()) => {
                    tracing::info!(event = "reaction_sent", agent = %ctx.key.agent, chat = %ctx.key.chat, message_id = message_id.0, emoji, "reaction sent");
                    Ok(Outcome::Done)
                }
                // The chat does not allow this reaction (REACTION_INVALID): not worth a retry
                // and no reason to drop the rest of the plan.
                Err(TelegramError::Invalid(reason)) => {
                    tracing::warn!(agent = %ctx.key.agent, chat = %ctx.key.chat, emoji, reason = %reason, "reaction refused; skipped");
                    Ok(Outcome::Done)
                }
                Err(e) => Err(e.into()),
            }
        })
    }
}
