//! `xsend`: a plan's note to the persona's future self in another of its chats. The scheduler
//! owns the conversations, so the handler only hands the note back; the scheduler checks it
//! (a chat the persona has, not this one, not paused or disabled, the caps) and makes the plan
//! there (`scheduler::xsend`).

use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct XSend;

impl TaskHandler for XSend {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            match &ctx.task.spec {
                TaskSpec::XSend { target, intent } => Ok(Outcome::XSend {
                    target: target.clone(),
                    intent: intent.clone(),
                }),
                _ => Err(ctx.spec_mismatch(TaskKind::XSend)),
            }
        })
    }
}
