//! `event` and `schedule`: a plan's change to the chat's scheduled intents, or to the
//! persona's own day. The scheduler owns both (it fires intents and keeps the schedule), so
//! the handler only hands the change back; the scheduler applies it (checks, caps, the
//! owner's days) and saves the file.

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
                TaskSpec::EditSchedule { edits } => Ok(Outcome::EditSchedule(edits.clone())),
                _ => Err(ctx.spec_mismatch(TaskKind::Intent)),
            }
        })
    }
}
