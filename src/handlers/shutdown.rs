//! `shutdown`: asks the daemon to stop gracefully once everything is persisted. Only the
//! operator can create it; planners have no action that produces it.

use super::{HandlerResult, Outcome, TaskContext, TaskHandler};
use crate::clock::BoxFuture;
use crate::graph::TaskSpec;

pub struct Shutdown;

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
