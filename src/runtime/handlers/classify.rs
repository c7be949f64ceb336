//! `classify`: one group classifier call for the chat's pending batch, through the group
//! port. The answer becomes graph work: a plan replaces the graph (`Outcome::Replan`), a
//! reaction-only answer is a `react` task chained after this one (durable, so a crash
//! between the decision and the send still sends it, once), anything else is done.
//! Cancel-safe: a newer message that replans the chat carries the batch over.

use crate::core::admission::GroupOutcome;
use crate::core::graph::{Task, TaskKind, TaskSpec};
use crate::core::outcome::Outcome;
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Classify;

impl TaskHandler for Classify {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let TaskSpec::Classify { message_id } = ctx.task.spec else {
                return Err(ctx.spec_mismatch(TaskKind::Classify));
            };
            let Some(groups) = &ctx.groups else {
                tracing::debug!(agent = %ctx.key.agent, chat = %ctx.key.chat, "no group classifier: the batch stays history");
                return Ok(Outcome::Done);
            };
            Ok(
                match groups.classify(&ctx.key.agent, &ctx.chat, message_id).await {
                    GroupOutcome::Nothing => Outcome::Done,
                    GroupOutcome::Plan {
                        message_id,
                        quote,
                        at,
                    } => Outcome::Replan {
                        message_id,
                        quote,
                        at,
                    },
                    GroupOutcome::React { message_id, emoji } => {
                        let now = ctx.clock.now();
                        Outcome::Planned(vec![Task::new(
                            TaskSpec::React { message_id, emoji },
                            now,
                        )])
                    }
                },
            )
        })
    }
}
