//! `summarize`: one summary call for the oldest unsummarized stretch of the chat, queued by
//! the `received` handler after a plan (so it never delays a reply). Reads the chat's history
//! and summaries, asks `core::summaries::due` what to summarize (nothing, if another run got
//! there first or the chat is backing off), calls the planner's summarizer, checks the answer
//! against the messages sent and saves: an accepted summary moves the watermark; a declined
//! or failed call backs off. Never fails its graph: a failure is recorded and logged. With a
//! backlog left, it queues the next page.

use crate::core::graph::{Task, TaskKind, TaskSpec};
use crate::core::outcome::Outcome;
use crate::core::summaries::{self, SummaryFile};
use crate::core::time::BoxFuture;
use crate::ports::planner::SummaryRequest;
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(super) struct Summarize;

impl TaskHandler for Summarize {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            if !matches!(ctx.task.spec, TaskSpec::Summarize) {
                return Err(ctx.spec_mismatch(TaskKind::Summarize));
            }
            let Some(facts) = ctx.facts.clone() else {
                return Ok(Outcome::Done);
            };
            let history = ctx
                .telegram
                .fetch_history(ctx.chat.id, ctx.config.history_limit)
                .await?;
            let (agent, chat) = (ctx.key.agent.clone(), ctx.chat.id);
            let read = {
                let (facts, agent) = (facts.clone(), agent.clone());
                tokio::task::spawn_blocking(move || facts.summaries(&agent, chat)).await
            };
            let file = match read {
                Ok(Ok(f)) => f,
                Ok(Err(e)) => {
                    tracing::error!(event = "memory_file_unreadable", agent = %agent, chat = %chat, problem = %e, "summaries unreadable (fix the file by hand; it is never overwritten): not summarizing");
                    return Ok(Outcome::Done);
                }
                Err(_) => return Ok(Outcome::Done),
            };
            let now = ctx.clock.now();
            let Some(chunk) = summaries::due(&history, &file, now, ctx.config.history_limit) else {
                return Ok(Outcome::Done);
            };
            let messages: Vec<_> = history
                .iter()
                .filter(|m| m.id >= chunk.first && m.id <= chunk.last)
                .cloned()
                .collect();
            let media = match &ctx.media {
                Some(pipeline) => {
                    let ids = messages
                        .iter()
                        .filter_map(|m| m.media.as_ref().map(|i| i.unique_id.clone()))
                        .collect();
                    pipeline.cached(ids).await
                }
                None => Default::default(),
            };
            let earlier = file.prompt_text();
            let answer = ctx
                .planner
                .summarize(SummaryRequest {
                    persona: &ctx.persona,
                    chat: &ctx.chat,
                    earlier: &earlier,
                    messages: &messages,
                    media: &media,
                    now,
                })
                .await;
            if let Some(w) = file.watermark
                && chunk.first.0 > w.0 + 1
                && history.first().is_some_and(|m| m.id == chunk.first)
            {
                tracing::warn!(event = "summary_gap", agent = %agent, chat = %chat, watermark = w.0, first = chunk.first.0, "messages after {w} fell out of the history fetch before they were summarized (raise --history-limit)");
            }
            let accepted = match answer {
                Ok(draft) => summaries::check(draft, &chunk).map(|(summary, matched)| {
                    if !matched {
                        tracing::warn!(event = "summary_range_mismatch", agent = %agent, chat = %chat, "the summary claims a range outside messages {}–{}: kept as the summary of those", chunk.first, chunk.last);
                    }
                    summary
                }),
                Err(e) => {
                    tracing::warn!(event = "summary_failed", agent = %agent, chat = %chat, error = %e, "summary call failed: backing off");
                    None
                }
            };
            // The file is read again now: a hand edit made during the call is kept, and if
            // its watermark moved meanwhile this summary is dropped rather than stacked.
            let before = file.watermark;
            let reread = {
                let (facts, agent) = (facts.clone(), agent.clone());
                tokio::task::spawn_blocking(move || facts.summaries(&agent, chat)).await
            };
            let mut file = match reread {
                Ok(Ok(f)) if f.watermark == before => f,
                Ok(Ok(_)) => {
                    tracing::info!(event = "summary_superseded", agent = %agent, chat = %chat, "the summaries changed during the call: this summary is dropped");
                    return Ok(Outcome::Done);
                }
                Ok(Err(e)) => {
                    tracing::error!(event = "memory_file_unreadable", agent = %agent, chat = %chat, problem = %e, "summaries unreadable (fix the file by hand; it is never overwritten)");
                    return Ok(Outcome::Done);
                }
                Err(_) => return Ok(Outcome::Done),
            };
            let more = match accepted {
                Some(summary) => {
                    tracing::info!(event = "summary_written", agent = %agent, chat = %chat, first = summary.first.0, last = summary.last.0, "summarized messages {}–{}", chunk.first, chunk.last);
                    file.accept(summary, &chunk);
                    summaries::due(&history, &file, now, ctx.config.history_limit).is_some()
                }
                None => {
                    file.fail(now);
                    tracing::warn!(event = "summary_declined", agent = %agent, chat = %chat, failures = file.failures, "no summary of messages {}–{}: not trying again before {}", chunk.first, chunk.last, file.retry_after.map(|t| t.to_string()).unwrap_or_default());
                    false
                }
            };
            save(ctx, facts, file).await;
            Ok(if more {
                // A backlog: the next page, as its own task.
                Outcome::Planned(vec![Task::new(TaskSpec::Summarize, now)])
            } else {
                Outcome::Done
            })
        })
    }
}

async fn save(ctx: &TaskContext, facts: crate::ports::facts::SharedFacts, file: SummaryFile) {
    let (agent, chat) = (ctx.key.agent.clone(), ctx.chat.id);
    let saved =
        tokio::task::spawn_blocking(move || facts.save_summaries(&agent, chat, &file)).await;
    if let Ok(Err(e)) = saved {
        tracing::error!(event = "summary_not_saved", agent = %ctx.key.agent, chat = %ctx.key.chat, error = %e, "summaries not saved");
    }
}
