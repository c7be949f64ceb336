//! `presence`: shows the account online or offline (the scheduler queues an offline one in
//! the agent's own chat when its sleep starts). Cosmetic: a failure is logged, never retried.

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Presence;

impl TaskHandler for Presence {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::Presence { online } = ctx.task.spec else {
                return Err(ctx.spec_mismatch(TaskKind::Presence));
            };
            if let Err(e) = ctx.telegram.set_online(online).await {
                tracing::debug!(agent = %ctx.key.agent, error = %e, "online status not set");
            }
            Ok(Outcome::Done)
        })
    }
}
