//! Applying a finished task: its outcome (done, a plan, a day, an intent, a posted draft, a
//! replan, a stop) or its failure (retry, park, drop, disable the chat, trip the breaker,
//! stop the agent) to its graph. Part of the pure scheduler.

use jiff::Timestamp;
use tracing::{debug, error, info, warn};

use super::{Effect, Scheduler};
use crate::core::graph::{ConversationKey, FailureVerdict, TaskKind};
use crate::core::outcome::{Outcome, TaskError};

impl Scheduler {
    /// A finished task's outcome that hands something to the scheduler: a day to install, a
    /// change of the chat's intents or of the persona's day, a note for another chat, pages
    /// looked up.
    fn hand_over(
        &mut self,
        key: &ConversationKey,
        agent: &str,
        chat: crate::core::model::Chat,
        outcome: Outcome,
        now: Timestamp,
    ) {
        match outcome {
            Outcome::Day(day) => self.install_day(agent, *day, now),
            Outcome::Intent(write) => self.apply_intent(key, &chat.title, &write, now),
            Outcome::EditSchedule(edits) => self.edit_day(agent, key, &edits, now),
            Outcome::XSend { target, intent } => self.cross_send(key, &target, &intent, now),
            Outcome::Retrieved { added, refused } => {
                self.retrieved(key, chat, &added, &refused, now);
            }
            _ => {}
        }
    }

    /// A task finished: apply its outcome to its graph (if that graph is still current).
    pub(crate) fn on_finished(
        &mut self,
        key: ConversationKey,
        graph_id: &str,
        task_id: &str,
        result: Result<Outcome, TaskError>,
        now: Timestamp,
    ) {
        let running = self
            .in_flight
            .get(&key)
            .filter(|f| f.graph_id == graph_id && f.task_id == task_id)
            .map(|f| f.kind);
        if running == Some(TaskKind::Draft) {
            let posted = match &result {
                Ok(Outcome::Drafted(p)) => Some(*p),
                _ => None,
            };
            self.early_replies_after_post(&key, task_id, posted, now);
        }
        if running.is_some() {
            self.take_in_flight(&key);
        }
        // The owner's word given while a draft was being posted (or timing out) wins over
        // what the task returned, unless the account itself failed (limited, logged out).
        let fatal = matches!(
            result,
            Err(TaskError::AccountLimited(_) | TaskError::Unauthorized(_))
        );
        match self.take_kept_decision(&key, graph_id, task_id) {
            Some(decision) if !fatal => {
                let posted = match &result {
                    Ok(Outcome::Drafted(p)) => Some(*p),
                    _ => None,
                };
                self.word_after_run(&key, task_id, posted);
                self.apply_decision(&key, task_id, decision, now);
            }
            _ => self.apply_result(&key, graph_id, task_id, result, now),
        }
        if let Some(graph) = self.graphs.get_mut(&key) {
            if graph.is_finished() {
                debug!(conversation = %key, "plan finished");
                self.remove_graph(&key, now);
            } else {
                graph.arm_waits(now);
            }
        }
        // The conversation may be free again: whatever is ready next goes in a queue.
        self.reschedule(&key, now);
    }

    fn apply_result(
        &mut self,
        key: &ConversationKey,
        graph_id: &str,
        task_id: &str,
        result: Result<Outcome, TaskError>,
        now: Timestamp,
    ) {
        let Some(graph) = self.graphs.get_mut(key).filter(|g| g.id == graph_id) else {
            debug!(conversation = %key, task = %task_id, "result of a superseded graph discarded");
            return;
        };
        match result {
            Ok(Outcome::Drafted(posted)) => self.on_drafted(key, task_id, posted, now),
            Ok(Outcome::Dropped { reason }) => {
                info!(event = "plan_dropped", conversation = %key, task = %task_id, reason = %reason, "plan dropped");
                let agent = key.agent.clone();
                self.notable(&agent, Some(key.chat), "plan_dropped", reason);
                self.remove_graph(key, now);
            }
            Ok(outcome) => {
                graph.mark_done(task_id, now);
                if graph
                    .task(task_id)
                    .is_some_and(|t| t.kind().needs_idempotency_key())
                {
                    let agent = graph.agent.clone();
                    self.note_wrote(&agent, now);
                }
                let Some(graph) = self.graphs.get_mut(key).filter(|g| g.id == graph_id) else {
                    return;
                };
                let outcome = match outcome {
                    Outcome::Day(_)
                    | Outcome::Intent(_)
                    | Outcome::EditSchedule(_)
                    | Outcome::XSend { .. }
                    | Outcome::Retrieved { .. } => {
                        let (agent, chat) = (graph.agent.clone(), graph.chat.clone());
                        self.mark_dirty(key);
                        self.hand_over(key, &agent, chat, outcome, now);
                        return;
                    }
                    other => other,
                };
                match outcome {
                    Outcome::Done
                    | Outcome::Day(_)
                    | Outcome::Intent(_)
                    | Outcome::EditSchedule(_)
                    | Outcome::XSend { .. }
                    | Outcome::Retrieved { .. } => {}
                    Outcome::Planned(tasks) => {
                        if !tasks.is_empty() {
                            info!(conversation = %key, graph = %graph.id, message_id = ?graph.handled_message(), tasks = tasks.len(), "planned");
                        }
                        let mut tasks = tasks;
                        super::owner::note_replacement(graph, &mut tasks);
                        graph.append_chain(task_id, tasks);
                    }
                    Outcome::Shutdown { reason } => self.begin_stop(reason, now),
                    Outcome::Drafted(_) | Outcome::Dropped { .. } => {}
                    Outcome::Replan {
                        message_id,
                        quote,
                        at,
                    } => {
                        let (agent, chat) = (graph.agent.clone(), graph.chat.clone());
                        info!(conversation = %key, message_id = %message_id, "group message addressed: planning");
                        self.replan(&agent, chat, message_id, quote, Some(at), now);
                        return;
                    }
                }
                self.mark_dirty(key);
            }
            Err(TaskError::Park { secs, cause }) => {
                let reason = cause.to_string();
                let until = crate::core::time::add(now, std::time::Duration::from_secs(secs));
                graph.park(task_id, until, &reason, now);
                warn!(
                    event = "flood_wait",
                    conversation = %key,
                    task = %task_id,
                    until = %until,
                    reason = %reason,
                    "Telegram asked us to wait: conversation parked"
                );
                let detail = format!(
                    "Telegram asked us to wait in {} until {until} ({reason}): the conversation resumes then",
                    graph.chat.title
                );
                self.notable(&key.agent, Some(key.chat), "flood_wait", detail);
                self.mark_dirty(key);
            }
            Err(TaskError::ChatForbidden(cause)) => {
                let reason = cause.to_string();
                error!(
                    event = "chat_disabled",
                    conversation = %key,
                    task = %task_id,
                    reason = %reason,
                    "we may not write in this chat: plan dropped and chat disabled (`personad state clear --agent {} --chat {}` enables it again)",
                    key.agent,
                    key.chat
                );
                let title = graph.chat.title.clone();
                self.remove_graph(key, now);
                self.incident(
                    key,
                    "chat_disabled",
                    format!("{title} refuses our messages ({reason}): its plan is dropped and the chat disabled; `personad state clear --agent {} --chat {}` enables it again", key.agent, key.chat),
                    now,
                );
                self.safety.disable_chat(key, reason, now);
                self.effects.push(Effect::SaveAgentState(key.agent.clone()));
            }
            Err(TaskError::AccountLimited(cause)) => {
                let reason = cause.to_string();
                error!(
                    event = "breaker_tripped",
                    conversation = %key,
                    task = %task_id,
                    reason = %reason,
                    "Telegram limits this account: plan dropped, breaker tripped for 24 h, owner alerted"
                );
                self.remove_graph(key, now);
                self.notable(
                    &key.agent.clone(),
                    Some(key.chat),
                    "breaker_tripped",
                    reason.clone(),
                );
                let alert = self.safety.trip_breaker(&key.agent, reason, now);
                self.effects.push(Effect::SaveAgentState(key.agent.clone()));
                self.notify_owner(&key.agent.clone(), &alert, now);
            }
            Err(TaskError::Unauthorized(cause)) => {
                let reason = cause.to_string();
                error!(
                    agent = %key.agent,
                    reason = %reason,
                    "the agent's Telegram session is no longer valid; stopping this agent. Log in again: personad login --agent {:?}",
                    key.agent
                );
                self.stop_unauthorized(&key.agent.clone(), &reason, now);
            }
            Err(e) => self.on_failure(key, task_id, &e, now),
        }
    }

    /// A task failed in an ordinary way: retry it through a wait, or drop the plan once its
    /// attempts are spent (or the error is permanent).
    fn on_failure(&mut self, key: &ConversationKey, task_id: &str, e: &TaskError, now: Timestamp) {
        let Some(graph) = self.graphs.get_mut(key) else {
            return;
        };
        let policy = self.config.retry;
        match graph.record_failure(task_id, &e.to_string(), e.is_transient(), policy, now) {
            FailureVerdict::Retry { attempt } => {
                warn!(
                    conversation = %key,
                    task = %task_id,
                    attempt,
                    max_attempts = policy.max_attempts,
                    error = %e,
                    "task failed; will retry"
                );
                self.mark_dirty(key);
            }
            FailureVerdict::Drop => {
                let attempts = graph.task(task_id).map_or(0, |t| t.attempts);
                error!(
                    event = "plan_dropped",
                    conversation = %key,
                    task = %task_id,
                    attempts,
                    error = %e,
                    "task failed for good; the conversation's plan is dropped"
                );
                if self.safety.is_own_chat(&key.agent, key.chat) {
                    // The own chat holds independent upkeep and notices: only the failed one
                    // goes (the incident rule never notices about this chat).
                    graph.drop_task(task_id);
                    self.notable(
                        &key.agent.clone(),
                        Some(key.chat),
                        "plan_dropped",
                        e.to_string(),
                    );
                    self.mark_dirty(key);
                    return;
                }
                let title = graph.chat.title.clone();
                self.remove_graph(key, now);
                self.incident(
                    key,
                    "plan_dropped",
                    format!("the plan for {title} was dropped after {attempts} attempt(s): {e}"),
                    now,
                );
            }
        }
    }
}

impl Scheduler {
    /// Stops an agent whose session Telegram no longer accepts. AUTH_KEY_DUPLICATED (the
    /// session was used by two processes at once, and Telegram revoked it) is also recorded
    /// as a notable event for the owner, with its own ERROR line: the account is logged out.
    pub(crate) fn stop_unauthorized(&mut self, agent: &str, reason: &str, now: Timestamp) {
        if crate::core::lease::duplicated(reason) {
            let detail = format!(
                "Telegram revoked {agent}'s session: it was used by two processes at once ({reason}); the agent is stopped and must log in again. Check that no two shards run it (their session leases)"
            );
            error!(event = "session_duplicated", agent = %agent, "{detail}");
            self.notable(agent, None, "session_duplicated", detail);
        }
        self.stop_agent(agent, now);
    }
}
