//! `shutdown`: asks the daemon to stop gracefully once everything is persisted. Only the
//! operator can create it; planners have no action that produces it.

use crate::core::graph::TaskSpec;
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Shutdown;

impl TaskHandler for Shutdown {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let reason = match &ctx.task.spec {
                TaskSpec::Shutdown {
                    reason: Some(reason),
                } => reason.clone(),
                _ => "shutdown task".to_string(),
            };
            Ok(Outcome::Shutdown { reason })
        })
    }
}
