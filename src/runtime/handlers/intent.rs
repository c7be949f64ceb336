//! `event`: a plan's change to the chat's scheduled intents. The scheduler owns the intents
//! (it fires them), so the handler only hands the write back; the scheduler applies it
//! (checks, the per-chat cap) and saves the file.

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Intent;

impl TaskHandler for Intent {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            match &ctx.task.spec {
                TaskSpec::Intent { write } => Ok(Outcome::Intent(write.clone())),
                _ => Err(ctx.spec_mismatch(TaskKind::Intent)),
            }
        })
    }
}
