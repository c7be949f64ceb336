//! `unblock`: unblocks the other user of a direct chat. Does nothing (with a warning) in
//! groups.

use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{
    HandlerResult, TaskContext, TaskHandler, allowed_by_persona, direct_only,
};

pub(super) struct Unblock;

impl TaskHandler for Unblock {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            // Re-checked here: a saved task must not outlive the persona's `Allow Block`.
            if allowed_by_persona(ctx, ctx.persona.allow_block, "Allow Block")
                && direct_only(ctx).await?
            {
                ctx.telegram.unblock(ctx.chat.id).await?;
                tracing::info!(agent = %ctx.key.agent, chat = %ctx.key.chat, "unblocked the user");
            }
            Ok(Outcome::Done)
        })
    }
}
