//! `received`: the planning step. Marks the chat read, fetches its history through the
//! Telegram trait, describes its media within budget (`media`, newest first), asks the
//! planner what to do, and returns the plan as a chain of tasks.
//! Runs only when its debounce window has passed, so a burst of messages costs one plan.

use std::sync::Arc;

use crate::core::config::Pacing;
use crate::core::facts::{FactScope, MemoryView};
use crate::core::graph::{Task, TaskKind, TaskSpec};
use crate::core::media::MediaDescriptions;
use crate::core::model::ChatId;
use crate::core::outcome::Outcome;
use crate::core::persona::FreshStart;
use crate::core::persona::Persona;
use crate::core::plan::{Action, Moment, PlanRequest};
use crate::core::summaries::SummaryFile;
use crate::core::time::BoxFuture;
use crate::ports::facts::{FactStore, MemoryFile};
use crate::runtime::handlers::{HandlerResult, TaskContext, TaskHandler};

pub(crate) struct Received;

impl TaskHandler for Received {
    fn run<'a>(&'a self, ctx: &'a TaskContext) -> BoxFuture<'a, HandlerResult> {
        Box::pin(async move {
            let (target, no_quote, intent) = match &ctx.task.spec {
                TaskSpec::Received {
                    message_id,
                    no_quote,
                    intent,
                } => (*message_id, *no_quote, intent.clone()),
                _ => return Err(ctx.spec_mismatch(TaskKind::Received)),
            };
            let schedule = ctx.presence.as_ref().and_then(|p| p.schedule.as_ref());
            if schedule.is_some() {
                // Reading shows the account online (it lapses by itself); cosmetic.
                if let Err(e) = ctx.telegram.set_online(true).await {
                    tracing::debug!(error = %e, "online status not set");
                }
            }
            if let Some(upto) = target {
                // Read receipts are cosmetic: never fail planning over them.
                if let Err(e) = ctx.telegram.mark_read(ctx.chat.id, upto).await {
                    tracing::debug!(error = %e, "mark read failed");
                }
            }
            let history = ctx
                .telegram
                .fetch_history(ctx.chat.id, ctx.config.history_limit)
                .await?;
            let media = match &ctx.media {
                Some(pipeline) => {
                    Arc::clone(pipeline)
                        .describe_pass(Arc::clone(&ctx.telegram), ctx.chat.id, &history)
                        .await
                }
                None => MediaDescriptions::new(),
            };
            let now = ctx.clock.now();
            let mut stickers = ctx
                .stickers
                .curated(&ctx.persona, ctx.telegram.as_ref(), now)
                .await;
            if let Some(pipeline) = &ctx.media
                && !stickers.is_empty()
            {
                let known = pipeline
                    .cached(stickers.iter().map(|s| s.unique_id.clone()).collect())
                    .await;
                for s in &mut stickers {
                    s.description = known
                        .get(&s.unique_id)
                        .and_then(|r| r.shown_description())
                        .map(str::to_string);
                }
            }
            let fresh = fresh_start(ctx, &history).await;
            // A full reset made now drops the chat's intents too (tasks leading the plan).
            // (Also when a retry of this step finds the start already recorded.)
            let dropped: Vec<String> = match (&fresh, &ctx.presence) {
                (Some(_), Some(p)) if ctx.persona.fresh_start == FreshStart::ResetContext => p
                    .intents
                    .iter()
                    .filter(|i| i.chat == ctx.chat.id)
                    .map(|i| i.id.clone())
                    .collect(),
                _ => Vec::new(),
            };
            let (memory, summaries) = memory_view(ctx, &history).await;
            let moment = Moment {
                activity: schedule.map(|s| s.now(now).prompt_text(&s.tz)),
                intent,
                intents: match &ctx.presence {
                    Some(p) if dropped.is_empty() => {
                        crate::core::intents::prompt_lines(&p.intents, ctx.chat.id)
                    }
                    _ => String::new(),
                },
                fresh_start: fresh,
                schedule: schedule
                    .filter(|_| ctx.persona.allow_schedule_edits)
                    .map(|s| crate::core::presence::edit::prompt_text(s, now)),
                retrieved: retrieved(ctx, now).await,
            };
            let actions = ctx
                .planner
                .plan(PlanRequest {
                    persona: &ctx.persona,
                    chat: &ctx.chat,
                    history: &history,
                    target,
                    now,
                    media: &media,
                    stickers: &stickers,
                    quote: !no_quote,
                    memory: &memory,
                    moment: &moment,
                })
                .await?;
            if actions.is_empty() {
                tracing::info!(agent = %ctx.key.agent, chat = %ctx.key.chat, "planner chose silence");
            }
            let pacing = persona_pacing(&ctx.persona, ctx.config.pacing);
            let mut tasks: Vec<Task> = dropped
                .into_iter()
                .map(|id| {
                    let write = crate::core::intents::IntentWrite {
                        id: Some(id),
                        ..Default::default()
                    };
                    Task::new(TaskSpec::Intent { write }, now)
                })
                .collect();
            tasks.extend(tasks_from_actions(actions, now, pacing));
            let mut tasks = with_draft(ctx, &history, target, tasks, now);
            // Summaries are written after the reply, as a task of their own.
            if summaries.is_some_and(|f| {
                crate::core::summaries::due(&history, &f, now, ctx.config.history_limit).is_some()
            }) {
                tasks.push(Task::new(TaskSpec::Summarize, now));
            }
            Ok(Outcome::Planned(tasks))
        })
    }
}

/// Draft mode: when the chat's mode (the owner's override, else the persona's `Approval`)
/// wants the owner to see this plan first, a `draft` task goes in front of its first action
/// done in the owner's name (memory and intent writes before it still apply). A plan with no
/// such action, and the account's own Saved Messages, never wait.
fn with_draft(
    ctx: &TaskContext,
    history: &[crate::core::model::Message],
    target: Option<crate::core::model::MessageId>,
    mut tasks: Vec<Task>,
    now: jiff::Timestamp,
) -> Vec<Task> {
    use crate::core::graph::draft;
    let policy = ctx.persona.approval;
    let mode = ctx.approval.unwrap_or(policy.mode);
    let own = ctx.chat.id.0 == ctx.telegram.self_id();
    let wrote_before = history.iter().any(|m| m.outgoing);
    if own
        || !mode.requires(ctx.chat.kind.is_direct(), wrote_before)
        || !tasks.iter().any(|t| draft::consequential(t.kind()))
    {
        return tasks;
    }
    let answers = target.and_then(|id| history.iter().find(|m| m.id == id));
    let text = draft::render(
        &ctx.chat.title,
        answers.map(|m| (m.sender.name.as_str(), m.text.as_str())),
        &tasks,
    );
    let at = tasks
        .iter()
        .position(|t| {
            !matches!(
                t.kind(),
                TaskKind::Remember
                    | TaskKind::Note
                    | TaskKind::Intent
                    | TaskKind::Intend
                    | TaskKind::ChatPlan
            )
        })
        .unwrap_or(tasks.len());
    let spec = TaskSpec::Draft {
        answers: target,
        draft: text,
        idempotency_key: crate::core::graph::IdempotencyKey::fresh(),
        timeout_secs: policy.timeout.as_secs().max(1),
        on_timeout: policy.on_timeout,
        posted: None,
        decision: None,
    };
    tracing::info!(event = "draft_made", agent = %ctx.key.agent, chat = %ctx.key.chat, mode = %mode, "the plan waits for the owner's approval");
    tasks.insert(at, Task::new(spec, now));
    tasks
}

/// The chat's retrieved documents still in their window (none without a document store, or
/// when the file does not read: logged, planning goes on without them).
async fn retrieved(
    ctx: &TaskContext,
    now: jiff::Timestamp,
) -> Vec<crate::core::retrieve::Document> {
    let Some(retrieval) = ctx
        .retrieval
        .as_ref()
        .filter(|_| ctx.persona.allow_retrieve)
    else {
        return Vec::new();
    };
    let store = Arc::clone(&retrieval.documents);
    let (agent, chat) = (ctx.key.agent.clone(), ctx.chat.id);
    match tokio::task::spawn_blocking(move || store.read(&agent, chat)).await {
        Ok(Ok(docs)) => docs.current(now).cloned().collect(),
        Ok(Err(e)) => {
            tracing::warn!(agent = %ctx.key.agent, chat = %ctx.key.chat, error = %e, "retrieved documents not read; planning without them");
            Vec::new()
        }
        Err(e) => {
            tracing::warn!(agent = %ctx.key.agent, chat = %ctx.key.chat, error = %e, "retrieved documents not read; planning without them");
            Vec::new()
        }
    }
}

/// A chat shorter than this, with nothing of ours in it, starts anew (the original's rule).
const FRESH_MESSAGES: usize = 5;

/// Whether the chat starts anew (a few messages, none of ours, none already summarized), and
/// if so what the plan is told (`Start Of Conversation`). With `Reset Context On First
/// Message` (or `Clear Summaries On First Message`) the chat's summaries (and notes) leave
/// the prompt, once per start: the memory store archives them and records the start's first
/// message. `None` when the chat does not start anew or the persona has neither heading.
async fn fresh_start(ctx: &TaskContext, history: &[crate::core::model::Message]) -> Option<String> {
    let persona = &ctx.persona;
    if persona.fresh_start == FreshStart::Keep && persona.start_of_conversation.is_none() {
        return None;
    }
    let first = history.first()?.id;
    if history.len() >= FRESH_MESSAGES || history.iter().any(|m| m.outgoing) {
        return None;
    }
    let text = persona.start_of_conversation.clone().unwrap_or_default();
    let Some(facts) = ctx.facts.clone() else {
        return Some(text);
    };
    // With a full reset the chat's scheduled intents go too (archived with the rest).
    let intents = match (&ctx.presence, persona.fresh_start) {
        (Some(p), FreshStart::ResetContext) => {
            crate::core::intents::prompt_lines(&p.intents, ctx.chat.id)
        }
        _ => String::new(),
    };
    let (agent, chat) = (ctx.key.agent.clone(), ctx.chat.id);
    let reset = persona.fresh_start;
    let ids: Vec<crate::core::model::MessageId> = history.iter().map(|m| m.id).collect();
    let done = tokio::task::spawn_blocking(move || {
        let watermark = facts.summaries(&agent, chat).ok().and_then(|f| f.watermark);
        if watermark.is_some_and(|w| ids.iter().any(|id| *id <= w)) {
            // Already summarized: an old conversation, not a new one.
            return Ok(None::<Option<Vec<std::path::PathBuf>>>);
        }
        if reset == FreshStart::Keep {
            return Ok(Some(None));
        }
        facts
            .fresh_start(
                &agent,
                chat,
                first,
                reset == FreshStart::ResetContext,
                &intents,
            )
            .map(Some)
    })
    .await;
    match done {
        Ok(Ok(None)) => None,
        Ok(Ok(Some(moved))) => {
            if let Some(files) = moved {
                tracing::info!(event = "fresh_start", agent = %ctx.key.agent, chat = %ctx.chat.id, first = %first, archived = files.len(), "the chat starts anew: its summaries, notes and intents leave the prompt (archived)");
            }
            Some(text)
        }
        Ok(Err(e)) => {
            tracing::warn!(event = "memory_file_unreadable", agent = %ctx.key.agent, problem = %e, "fresh start not recorded");
            Some(text)
        }
        Err(_) => Some(text),
    }
}

/// Most people of a group whose facts one plan sees (the latest speakers).
const PEOPLE_SHOWN: usize = 12;

/// What this chat may see of the agent's memory: the persona's own facts, this chat's notes,
/// and the facts about each person here (the other person of a direct chat; in a group, the
/// latest speakers of the history), each saying where it came from; a fact learnt in a group
/// only in that group. Facts about anyone else never reach the prompt. An unreadable file is
/// logged and left out.
async fn memory_view(
    ctx: &TaskContext,
    history: &[crate::core::model::Message],
) -> (MemoryView, Option<SummaryFile>) {
    let Some(facts) = ctx.facts.clone() else {
        return (MemoryView::default(), None);
    };
    let mut people: Vec<(i64, String)> = Vec::new();
    if ctx.chat.kind.is_direct() {
        people.push((ctx.chat.id.0, ctx.chat.title.clone()));
    }
    for m in history.iter().rev().filter(|m| !m.outgoing) {
        if people.len() == PEOPLE_SHOWN {
            break;
        }
        if !people.iter().any(|(id, _)| *id == m.sender.id) {
            people.push((m.sender.id, m.sender.name.clone()));
        }
    }
    // Chosen by recency, shown by id: who spoke last must not reorder the prompt (its
    // cached prefix).
    people.sort_by_key(|(id, _)| *id);
    let (agent, chat) = (ctx.key.agent.clone(), ctx.chat.id);
    // A chat nobody wrote anything about (the store knows each file absent, without asking
    // the disk) is answered here: no trip to the blocking pool.
    if facts.known_absent(&agent, &plan_files(chat, &people)) {
        return no_memory();
    }
    let cap = ctx.config.memory_scope_bytes;
    let read =
        tokio::task::spawn_blocking(move || read_memory(facts.as_ref(), &agent, chat, people, cap))
            .await;
    match read {
        Ok((view, summaries, problems)) => {
            for p in problems {
                tracing::warn!(event = "memory_file_unreadable", agent = %ctx.key.agent, problem = %p, "memory file unreadable: left out of the prompt");
            }
            (view, summaries)
        }
        Err(_) => (MemoryView::default(), None),
    }
}

/// The memory files a plan of `chat` reads ([`read_memory`]), `people` being those shown.
fn plan_files(chat: ChatId, people: &[(i64, String)]) -> Vec<MemoryFile> {
    [
        MemoryFile::Summaries(chat),
        MemoryFile::Facts(FactScope::Chat(chat)),
        MemoryFile::Facts(FactScope::Intentions),
        MemoryFile::Facts(FactScope::Plans(chat)),
        MemoryFile::Facts(FactScope::Persona),
    ]
    .into_iter()
    .chain(
        people
            .iter()
            .map(|(id, _)| MemoryFile::Facts(FactScope::Person(*id))),
    )
    .collect()
}

/// What a plan sees when none of its memory files exists: what [`read_memory`] gives then.
fn no_memory() -> (MemoryView, Option<SummaryFile>) {
    (MemoryView::default(), Some(SummaryFile::default()))
}

/// Reads what a plan of `chat` sees of memory (blocking file work): the view, the chat's
/// summaries, and the problems met (each file that could not be read is left out).
fn read_memory(
    facts: &dyn FactStore,
    agent: &str,
    chat: ChatId,
    people: Vec<(i64, String)>,
    cap: usize,
) -> (MemoryView, Option<SummaryFile>, Vec<String>) {
    let mut problems = Vec::new();
    let summaries = match facts.summaries(agent, chat) {
        Ok(f) => Some(f),
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    let mut scope_lines = |scope: FactScope| match facts.read(agent, scope) {
        Ok(file) if matches!(scope, FactScope::Person(_)) => file.person_prompt_lines(chat, cap),
        Ok(file) => file.prompt_lines(cap),
        Err(e) => {
            problems.push(e.to_string());
            String::new()
        }
    };
    let chat_notes = scope_lines(FactScope::Chat(chat));
    let intentions = scope_lines(FactScope::Intentions);
    let plans = scope_lines(FactScope::Plans(chat));
    let people: Vec<(i64, String, String)> = people
        .into_iter()
        .map(|(id, name)| (id, name, scope_lines(FactScope::Person(id))))
        .filter(|(_, _, lines)| !lines.is_empty())
        .collect();
    let persona = match facts.persona_text(agent) {
        Ok(text) => crate::core::facts::capped(&text, cap),
        Err(e) => {
            problems.push(e.to_string());
            String::new()
        }
    };
    (
        MemoryView {
            persona,
            summaries: summaries
                .as_ref()
                .map(SummaryFile::prompt_text)
                .unwrap_or_default(),
            watermark: summaries.as_ref().and_then(|f| f.watermark),
            chat: chat_notes,
            people,
            intentions,
            plans,
        },
        summaries,
        problems,
    )
}

/// The persona's own pacing where it sets one, the configured defaults otherwise.
pub(crate) fn persona_pacing(persona: &Persona, defaults: Pacing) -> Pacing {
    Pacing {
        chars_per_sec: persona.typing_speed.unwrap_or(defaults.chars_per_sec),
        start_delay_secs: persona
            .start_typing_delay
            .unwrap_or(defaults.start_delay_secs),
        ..defaults
    }
}

/// Longest single typing pause: Telegram shows "typing..." for about five seconds, so longer
/// pauses are split, each part starting with a fresh indicator.
const TYPING_CHUNK_SECS: f64 = 5.0;

/// Seconds spent "choosing" a sticker.
const STICKER_PAUSE_SECS: f64 = 1.5;

/// Turns planned actions into pending tasks (not yet chained), adding human pacing: a pause
/// before the plan's first message, and before every text a typing indicator for a time
/// proportional to its length. Outbound tasks get their idempotency key here, long before
/// their side effect can start.
pub(crate) fn tasks_from_actions(
    actions: Vec<Action>,
    now: jiff::Timestamp,
    pacing: Pacing,
) -> Vec<Task> {
    let mut tasks = Vec::with_capacity(actions.len() * 3);
    let mut first_outbound = true;
    // Memory writes first: they are applied as soon as the plan is accepted, so a newer
    // message that replaces the rest of the plan never drops them.
    let (memory, rest): (Vec<Action>, Vec<Action>) = actions
        .into_iter()
        .partition(|a| matches!(a, Action::Remember { .. } | Action::Note { .. }));
    for action in memory.into_iter().chain(rest) {
        let outbound = matches!(
            action,
            Action::Send { .. }
                | Action::Sticker { .. }
                | Action::Voice { .. }
                | Action::SendMedia { .. }
        );
        if outbound && first_outbound && pacing.start_delay_secs > 0.0 {
            // Never a wait a saved graph could not hold (settings are checked; this is the
            // last guard).
            let delay = pacing
                .start_delay_secs
                .min(crate::core::graph::MAX_WAIT_SECS);
            tasks.push(wait_task(delay, false, now));
        }
        if outbound {
            first_outbound = false;
        }
        match &action {
            Action::Send { text, .. } => {
                let chars = text.chars().count() as f64;
                let mut left = (chars / pacing.chars_per_sec).min(pacing.max_typing_secs);
                while left > 0.0 {
                    tasks.push(wait_task(0.0, true, now));
                    let part = left.min(TYPING_CHUNK_SECS);
                    tasks.push(wait_task(part, false, now));
                    left -= part;
                }
            }
            Action::Voice { text, .. } => {
                // As long as saying it takes, under "recording a voice message".
                let chars = text.chars().count() as f64;
                let mut left = (chars / crate::core::voice::SPEECH_CHARS_PER_SEC)
                    .min(f64::from(crate::core::voice::MAX_VOICE_SECS));
                while left > 0.0 {
                    tasks.push(Task::new(
                        TaskSpec::Wait {
                            delay_secs: 0.0,
                            typing: false,
                            recording: true,
                            retry_of: None,
                        },
                        now,
                    ));
                    let part = left.min(TYPING_CHUNK_SECS);
                    tasks.push(wait_task(part, false, now));
                    left -= part;
                }
            }
            Action::Sticker { .. } => tasks.push(wait_task(STICKER_PAUSE_SECS, false, now)),
            _ => {}
        }
        tasks.push(task_for(action, now));
    }
    tasks
}

fn wait_task(secs: f64, typing: bool, now: jiff::Timestamp) -> Task {
    Task::new(TaskSpec::wait(secs, typing), now)
}

fn task_for(action: Action, now: jiff::Timestamp) -> Task {
    Task::new(action.into_spec(), now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::facts::FactWrite;

    /// A memory write the model put after its messages still runs first: a newer message
    /// replacing the rest of the plan cannot drop it.
    #[test]
    fn memory_writes_lead_the_plan() {
        let actions = vec![
            Action::Send {
                text: "hello there".into(),
                reply_to: None,
            },
            Action::Note {
                write: FactWrite {
                    id: None,
                    content: "likes tea".into(),
                },
                message: None,
            },
        ];
        let tasks = tasks_from_actions(actions, jiff::Timestamp::UNIX_EPOCH, Pacing::default());
        assert_eq!(tasks.first().map(Task::kind), Some(TaskKind::Note));
        assert_eq!(tasks.last().map(Task::kind), Some(TaskKind::Send));
    }
}
