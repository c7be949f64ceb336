//! `wait`: a pause (after a typing or "recording a voice message" indicator, when it asks). Its deadline is part of readiness (fixed by the graph when the wait's
//! dependencies finish), so by the time it runs there is nothing left to do.

use crate::core::graph::TaskSpec;
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Wait;

impl TaskHandler for Wait {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            if matches!(
                ctx.task.spec,
                TaskSpec::Wait {
                    recording: true,
                    ..
                }
            ) {
                // Best effort, as typing.
                if let Err(e) = ctx.telegram.recording_voice(ctx.chat.id).await {
                    tracing::debug!(error = %e, "recording indicator failed");
                }
            } else if matches!(ctx.task.spec, TaskSpec::Wait { typing: true, .. }) {
                // Best effort: a failed typing indicator must not cost a retry.
                if let Err(e) = ctx.telegram.typing(ctx.chat.id).await {
                    tracing::debug!(error = %e, "typing indicator failed");
                }
            }
            Ok(Outcome::Done)
        })
    }
}
