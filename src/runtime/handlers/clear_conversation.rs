//! `clear-conversation`: deletes the history of a direct chat, for both sides unless the
//! persona says `mine` under `Allow Clear Conversation`. Does nothing
//! (with a warning) in groups, or for a persona without `Allow Clear Conversation`.

use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{
    HandlerResult, TaskContext, TaskHandler, allowed_by_persona, direct_only,
};

pub(super) struct ClearConversation;

impl TaskHandler for ClearConversation {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            // The permission is checked again here: a saved task (or an edited graph file)
            // must not outlive the persona's `Allow Clear Conversation`.
            if !allowed_by_persona(
                ctx,
                ctx.persona.allow_clear_conversation,
                "Allow Clear Conversation",
            ) {
                return Ok(Outcome::Done);
            }
            if direct_only(ctx).await? {
                ctx.telegram
                    .delete_history(ctx.chat.id, ctx.persona.clear_for_both_sides)
                    .await?;
                tracing::info!(agent = %ctx.key.agent, chat = %ctx.key.chat, "cleared the conversation");
            }
            Ok(Outcome::Done)
        })
    }
}
