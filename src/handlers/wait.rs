//! `wait`: a pause. Its deadline is part of readiness (fixed by the graph when the wait's
//! dependencies finish), so by the time it runs there is nothing left to do.

use super::{HandlerResult, Outcome, TaskContext, TaskHandler};
use crate::clock::BoxFuture;
use crate::graph::TaskSpec;

pub struct Wait;

impl TaskHandler for Wait {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            if matches!(ctx.task.spec, TaskSpec::Wait { typing: true, .. }) {
                // Best effort: a failed typing indicator must not cost a retry.
                if let Err(e) = ctx.telegram.typing(ctx.chat.id).await {
                    tracing::debug!(error = %e, "typing indicator failed");
                }
            }
            Ok(Outcome::Done)
        })
    }
}
