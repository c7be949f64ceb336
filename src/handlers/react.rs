//! `react`: puts an emoji reaction (`emoji`) on a message (`message_id`) of the same chat.

use super::{HandlerResult, Outcome, TaskContext, TaskError, TaskHandler};
use crate::clock::BoxFuture;
use crate::telegram::{MessageId, TelegramError};

pub struct React;

impl TaskHandler for React {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let (Some(message), Some(emoji)) = (
                ctx.task.param_i64("message_id"),
                ctx.task.param_str("emoji"),
            ) else {
                return Err(TaskError::Permanent(
                    "react task needs `message_id` and `emoji`".into(),
                ));
            };
            match ctx
                .telegram
                .react(ctx.chat.id, MessageId(message), emoji)
                .await
            {
                Ok(()) => Ok(Outcome::Done),
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
