//! `remember`, `note`, `intend` and `plan`: one write to the agent's long-term memory (a fact
//! about a person, a note about this chat, one of the persona's intentions, one of its plans
//! for this chat), through the memory port. Applied at most once per task: the file
//! records the task ids it has applied, so a task run again after a crash changes nothing. A
//! write over a cap is refused with a WARN line and the task completes (the plan goes on);
//! a store failure is transient (retried like any task).

use crate::core::facts::{Applied, FactScope, FactWrite, Source};
use crate::core::graph::{TaskKind, TaskSpec};
use crate::core::outcome::{Cause, Outcome, TaskError};
use crate::core::time::BoxFuture;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};
use std::sync::Arc;

pub(super) struct Memory;

impl TaskHandler for Memory {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let (scope, name, id, content, message) = match &ctx.task.spec {
                TaskSpec::Remember {
                    about,
                    name,
                    id,
                    content,
                    message,
                } => (
                    FactScope::Person(*about),
                    name.clone(),
                    id,
                    content,
                    *message,
                ),
                TaskSpec::Note {
                    id,
                    content,
                    message,
                } => (FactScope::Chat(ctx.chat.id), None, id, content, *message),
                TaskSpec::Intend { id, content } => {
                    (FactScope::Intentions, None, id, content, None)
                }
                TaskSpec::ChatPlan { id, content } => {
                    (FactScope::Plans(ctx.chat.id), None, id, content, None)
                }
                _ => return Err(ctx.spec_mismatch(TaskKind::Remember)),
            };
            let Some(facts) = ctx.facts.clone() else {
                tracing::warn!(agent = %ctx.key.agent, chat = %ctx.key.chat, "no memory store in this process: the fact is not kept");
                return Ok(Outcome::Done);
            };
            let write = FactWrite {
                id: id.clone(),
                content: content.clone(),
            };
            let source = Source {
                task: ctx.task.id.clone(),
                name,
                chat: ctx.chat.id,
                message,
                // The task's own time, so a run again writes the same entry.
                at: ctx.task.created_at,
            };
            let agent = ctx.key.agent.clone();
            let result =
                tokio::task::spawn_blocking(move || facts.apply(&agent, scope, &write, &source))
                    .await
                    .map_err(|e| TaskError::Transient(Cause::MemoryWriteStopped(Arc::new(e))))?;
            match result {
                Ok(Ok(applied)) => {
                    let (what, fact) = match &applied {
                        Applied::Created(id) => ("created", id.as_str()),
                        Applied::Replaced(id) => ("replaced", id.as_str()),
                        Applied::Deleted(id) => ("deleted", id.as_str()),
                        Applied::NothingToDelete(id) => ("nothing to delete", id.as_str()),
                        Applied::AlreadyApplied => ("already applied", ""),
                    };
                    tracing::info!(event = "memory_written", agent = %ctx.key.agent, chat = %ctx.key.chat, scope = %scope, fact = fact, outcome = what, "memory: {what}");
                }
                Ok(Err(refused)) => {
                    tracing::warn!(event = "memory_write_refused", agent = %ctx.key.agent, chat = %ctx.key.chat, scope = %scope, reason = %refused, "memory write refused: {refused}");
                }
                Err(crate::ports::facts::FactError::Unreadable {
                    file,
                    line,
                    message,
                }) => {
                    tracing::error!(event = "memory_file_unreadable", agent = %ctx.key.agent, file = %file.display(), line, problem = %message, "memory file unreadable (fix it by hand; it is never overwritten): the write is dropped");
                }
                Err(e @ crate::ports::facts::FactError::TooLarge { .. }) => {
                    tracing::error!(event = "memory_file_too_large", agent = %ctx.key.agent, error = %e, "memory file too large (trim it by hand; it is never overwritten): the write is dropped");
                }
                Err(e) => return Err(TaskError::Transient(Cause::MemoryWrite(Arc::new(e)))),
            }
            Ok(Outcome::Done)
        })
    }
}
