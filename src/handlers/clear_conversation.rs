//! `clear-conversation`: deletes the history of a direct chat for both sides. Does nothing
//! (with a warning) in groups.

use super::{HandlerResult, Outcome, TaskContext, TaskHandler, direct_only};
use crate::clock::BoxFuture;

pub struct ClearConversation;

impl TaskHandler for ClearConversation {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            if direct_only(ctx) {
                ctx.telegram.delete_history(ctx.chat.id).await?;
                tracing::info!(agent = %ctx.key.agent, chat = %ctx.key.chat, "cleared the conversation");
            }
            Ok(Outcome::Done)
        })
    }
}
