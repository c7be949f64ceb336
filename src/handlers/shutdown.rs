//! `shutdown`: asks the daemon to stop gracefully once everything is persisted. Only the
//! operator can create it; planners have no action that produces it.

use super::{HandlerResult, Outcome, TaskContext, TaskHandler};
use crate::clock::BoxFuture;

pub struct Shutdown;

impl TaskHandler for Shutdown {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let reason = ctx
                .task
                .param_str("reason")
                .unwrap_or("shutdown task")
                .to_string();
            Ok(Outcome::Shutdown { reason })
        })
    }
}
