//! Task graphs: the plan of one agent in one chat, as pure data and state transitions. A
//! graph is a list of tasks with dependencies; the scheduler asks it which task is ready,
//! marks tasks active or done, records failures and appends planned tasks. No I/O happens
//! here: [`codec`] turns graphs into the on-disk Markdown form and `store` writes them.

pub mod codec;
pub mod draft;
pub mod spec;
pub mod v1;

use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::core::model::{Chat, ChatId, MessageId};

pub use spec::{IdempotencyKey, TaskKind, TaskSpec};

/// Version of the on-disk graph format written by this build. Version 1 files (a kind and
/// an untyped parameter map per task) are still read, through [`v1`].
pub const FORMAT_VERSION: u32 = 2;

/// The longest `wait` a loaded graph may hold (a day; the planner's own cap is an hour).
pub(crate) const MAX_WAIT_SECS: f64 = 86_400.0;

/// How far past the loading moment a task's `not_before` (or the graph's `parked_until`) may
/// lie in a loaded graph: further means a damaged or forged file that would stall the chat.
/// Judged against the clock, never against the file's own timestamps (which a forged file
/// would move along).
pub(crate) const HORIZON: Duration = Duration::from_secs(30 * 86_400);

/// Which conversation a graph belongs to: one agent in one chat.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConversationKey {
    pub agent: String,
    pub chat: ChatId,
}

impl ConversationKey {
    pub fn new(agent: impl Into<String>, chat: ChatId) -> ConversationKey {
        ConversationKey {
            agent: agent.into(),
            chat,
        }
    }
}

impl fmt::Display for ConversationKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.agent, self.chat)
    }
}

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskStatus {
    Pending,
    Active,
    Done,
    Failed,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Active => "active",
            TaskStatus::Done => "done",
            TaskStatus::Failed => "failed",
        }
    }
}

/// One node of a graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub id: String,
    /// What the task does (its kind and typed parameters).
    pub spec: TaskSpec,
    #[serde(default)]
    pub depends_on: Vec<String>,
    pub status: TaskStatus,
    #[serde(default)]
    pub attempts: u32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The task is not ready before this instant: the debounce of a `received`, the deadline
    /// of an armed `wait`. Persisted so a restart keeps the remaining time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Timestamp>,
    /// A `received` task parked by sleep: the wake-up its `not_before` counts from (the
    /// reading time is drawn from it). When the persona's day changes, the scheduler moves
    /// the task to the new day's wake-up; a task without it keeps its time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub woke_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl Task {
    /// A fresh pending task with a random id derived from its kind.
    pub fn new(spec: TaskSpec, now: Timestamp) -> Task {
        Task {
            id: new_id(spec.kind().as_str()),
            spec,
            depends_on: Vec::new(),
            status: TaskStatus::Pending,
            attempts: 0,
            created_at: now,
            updated_at: now,
            not_before: None,
            woke_at: None,
            last_error: None,
        }
    }

    pub fn kind(&self) -> TaskKind {
        self.spec.kind()
    }

    /// The delay of a `wait` task; zero for other kinds.
    pub(crate) fn wait_delay(&self) -> Duration {
        self.spec.wait_delay()
    }
}

/// A random identifier `<prefix>-<12 hex digits>`.
pub(crate) fn new_id(prefix: &str) -> String {
    format!("{prefix}-{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff)
}

/// What to do after a task failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureVerdict {
    /// A retry wait was inserted; the task runs again after it.
    Retry { attempt: u32 },
    /// No attempts left (or the error is permanent): the graph must be dropped.
    Drop,
}

/// How failed tasks are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub interval: Duration,
}

/// The plan of one agent in one chat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskGraph {
    pub format: u32,
    pub id: String,
    pub agent: String,
    pub chat: Chat,
    /// Incremented on every save: a test oracle and a guard against stale writes.
    pub seq: u64,
    pub created_at: Timestamp,
    /// Nothing in this conversation runs before this instant (Telegram asked us to wait:
    /// flood wait, slow mode). Carried over when the graph is replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked_until: Option<Timestamp>,
    /// The owner's draft for this chat that a newer message voided (draft mode): the draft
    /// that replaces it waits for the draft gap after it and names it. Carried over when the
    /// graph is replaced before the replacement is posted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded: Option<crate::core::approval::Superseded>,
    pub tasks: Vec<Task>,
}

impl TaskGraph {
    /// A graph holding one `received` task for `message_id`, ready at `not_before`.
    pub fn with_received(
        agent: &str,
        chat: Chat,
        now: Timestamp,
        message_id: Option<MessageId>,
        not_before: Timestamp,
    ) -> TaskGraph {
        let mut received = Task::new(
            TaskSpec::Received {
                message_id,
                no_quote: false,
                intent: None,
            },
            now,
        );
        received.not_before = Some(not_before);
        TaskGraph::with_tasks(agent, chat, now, vec![received])
    }

    /// A graph that starts with the given chain of tasks (no `received`): operator tasks,
    /// alerts.
    pub fn with_tasks(agent: &str, chat: Chat, now: Timestamp, tasks: Vec<Task>) -> TaskGraph {
        let mut graph = TaskGraph {
            format: FORMAT_VERSION,
            id: new_id("g"),
            agent: agent.to_string(),
            chat,
            seq: 0,
            created_at: now,
            parked_until: None,
            superseded: None,
            // Exactly as many slots as tasks: a growing `Vec` makes room for four, and ten
            // thousand chats arriving at once each hold a one-task graph (a task: ~300 bytes).
            tasks: Vec::with_capacity(tasks.len()),
        };
        let mut prev: Option<String> = None;
        for mut t in tasks {
            t.depends_on = prev.iter().cloned().collect();
            prev = Some(t.id.clone());
            graph.tasks.push(t);
        }
        graph
    }

    /// Whether the plan answers someone who wrote in this chat (it starts from a `received`
    /// task for an inbound message).
    pub(crate) fn answers_inbound(&self) -> bool {
        self.tasks.first().is_some_and(|t| {
            matches!(
                t.spec,
                TaskSpec::Received {
                    message_id: Some(_),
                    ..
                }
            )
        })
    }

    /// The newest inbound message this graph handles (the one its plan answers, or a group
    /// batch waiting for the classifier), if any.
    pub(crate) fn handled_message(&self) -> Option<MessageId> {
        self.tasks
            .iter()
            .filter_map(|t| match &t.spec {
                TaskSpec::Received {
                    message_id: Some(id),
                    ..
                }
                | TaskSpec::Classify { message_id: id } => Some(*id),
                _ => None,
            })
            .max()
    }

    /// Moves the plan to another chat whose message ids start over (a basic group upgraded
    /// to a supergroup): every id of the old chat is forgotten, since in the new chat it
    /// names another message (or none). The answered message stays an inbound one with id 0,
    /// which marks nothing there as handled; quotes and the draft's "answers" are dropped.
    /// False (nothing changed) when an open task needs an old id: a group batch waiting for
    /// the classifier, or a reaction.
    pub(crate) fn move_to_chat(&mut self, to: ChatId) -> bool {
        let needs_old_id = self.tasks.iter().any(|t| {
            t.status != TaskStatus::Done
                && matches!(t.spec, TaskSpec::Classify { .. } | TaskSpec::React { .. })
        });
        if needs_old_id {
            return false;
        }
        let gone = Some(MessageId(0));
        for task in &mut self.tasks {
            match &mut task.spec {
                TaskSpec::Received {
                    message_id,
                    no_quote,
                    ..
                } if message_id.is_some() => {
                    *message_id = gone;
                    *no_quote = true;
                }
                TaskSpec::Classify { message_id } | TaskSpec::React { message_id, .. } => {
                    *message_id = MessageId(0);
                }
                TaskSpec::Send { reply_to, .. } | TaskSpec::Sticker { reply_to, .. } => {
                    *reply_to = None;
                }
                TaskSpec::Draft { answers, .. } => *answers = None,
                TaskSpec::Remember { message, .. } | TaskSpec::Note { message, .. } => {
                    *message = None;
                }
                _ => {}
            }
        }
        self.chat.id = to;
        true
    }

    pub fn key(&self) -> ConversationKey {
        ConversationKey::new(self.agent.clone(), self.chat.id)
    }

    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id == id)
    }

    fn task_mut(&mut self, id: &str) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|t| t.id == id)
    }

    /// The ids of finished tasks: dependencies are looked up in it by hash, so readiness
    /// costs one pass over the graph instead of one search per dependency.
    fn done_ids(&self) -> std::collections::HashSet<&str> {
        self.tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Done)
            .map(|t| t.id.as_str())
            .collect()
    }

    fn deps_done(done: &std::collections::HashSet<&str>, task: &Task) -> bool {
        task.depends_on.iter().all(|d| done.contains(d.as_str()))
    }

    /// The pending tasks whose dependencies are all done, in graph order.
    fn unblocked(&self) -> impl Iterator<Item = (usize, &Task)> {
        let done = self.done_ids();
        self.tasks
            .iter()
            .enumerate()
            .filter(move |(_, t)| t.status == TaskStatus::Pending && Self::deps_done(&done, t))
    }

    /// Fixes the deadline of every `wait` whose dependencies just finished (now + delay).
    /// Returns whether anything changed (and so must be saved).
    pub(crate) fn arm_waits(&mut self, now: Timestamp) -> bool {
        let to_arm: Vec<usize> = self
            .unblocked()
            .filter(|(_, t)| t.kind() == TaskKind::Wait && t.not_before.is_none())
            .map(|(i, _)| i)
            .collect();
        for &i in &to_arm {
            let t = &mut self.tasks[i];
            t.not_before = Some(crate::core::time::add(now, t.wait_delay()));
            t.updated_at = now;
        }
        !to_arm.is_empty()
    }

    /// The first task (in graph order) that may run now.
    pub(crate) fn ready_task(&self, now: Timestamp) -> Option<&Task> {
        if self.parked_until.is_some_and(|until| until > now) {
            return None;
        }
        self.unblocked()
            .map(|(_, t)| t)
            .find(|t| match t.not_before {
                Some(at) => at <= now,
                // An unarmed wait is never ready; `arm_waits` fixes its deadline first.
                None => t.kind() != TaskKind::Wait,
            })
    }

    /// The earliest future instant at which a task whose dependencies are done turns ready.
    pub(crate) fn next_deadline(&self) -> Option<Timestamp> {
        let task_deadline = self.unblocked().filter_map(|(_, t)| t.not_before).min();
        match (task_deadline, self.parked_until) {
            (Some(t), Some(p)) => Some(t.max(p)),
            (t, p) => t.or(p),
        }
    }

    /// Whether the graph moves within `horizon` of `now`: a task is active, or one is ready
    /// now or turns ready by then. A graph that does not has *settled* (it waits on a timer
    /// past the horizon, or on nothing); the store writes a moving graph's checkpoint file
    /// only once it settles (or has moved for too long), so a short reply cycle never
    /// creates a file it removes seconds later.
    pub fn moves_within(&self, now: Timestamp, horizon: Duration) -> bool {
        self.tasks.iter().any(|t| t.status == TaskStatus::Active)
            || self.ready_task(now).is_some()
            || self
                .next_deadline()
                .is_some_and(|at| at <= crate::core::time::add(now, horizon))
    }

    /// Puts the task back to pending without counting an attempt, and parks the whole
    /// conversation until `until`.
    pub fn park(&mut self, id: &str, until: Timestamp, reason: &str, now: Timestamp) {
        if let Some(t) = self.task_mut(id) {
            t.status = TaskStatus::Pending;
            t.last_error = Some(reason.to_string());
            t.updated_at = now;
        }
        self.parked_until = Some(self.parked_until.map_or(until, |p| p.max(until)));
    }

    /// True when no task is left to run.
    pub(crate) fn is_finished(&self) -> bool {
        self.tasks.iter().all(|t| t.status == TaskStatus::Done)
    }

    /// Marks a task active (the moment before its side effect starts).
    pub(crate) fn mark_active(&mut self, id: &str, now: Timestamp) -> bool {
        self.set_status(id, TaskStatus::Active, now)
    }

    /// Marks a task done.
    pub(crate) fn mark_done(&mut self, id: &str, now: Timestamp) -> bool {
        self.set_status(id, TaskStatus::Done, now)
    }

    fn set_status(&mut self, id: &str, status: TaskStatus, now: Timestamp) -> bool {
        match self.task_mut(id) {
            Some(t) => {
                t.status = status;
                t.updated_at = now;
                true
            }
            None => false,
        }
    }

    /// Records a failure of `id`. A transient failure with attempts left inserts a `wait`
    /// of the retry interval that the task then depends on; otherwise the graph is doomed.
    pub(crate) fn record_failure(
        &mut self,
        id: &str,
        error: &str,
        transient: bool,
        policy: RetryPolicy,
        now: Timestamp,
    ) -> FailureVerdict {
        let Some(idx) = self.tasks.iter().position(|t| t.id == id) else {
            return FailureVerdict::Drop;
        };
        let task = &mut self.tasks[idx];
        task.attempts = task.attempts.saturating_add(1);
        task.last_error = Some(error.to_string());
        task.updated_at = now;
        let attempt = task.attempts;
        if !transient || attempt >= policy.max_attempts {
            task.status = TaskStatus::Failed;
            return FailureVerdict::Drop;
        }
        task.status = TaskStatus::Pending;
        let spec = TaskSpec::Wait {
            delay_secs: policy.interval.as_secs_f64(),
            typing: false,
            recording: false,
            retry_of: Some(id.to_string()),
        };
        let mut wait = Task::new(spec, now);
        // A failing retry wait gets a retry of its own: named after the task it serves, not
        // `retry-1-retry-1-…`, and never the id of a task already in the graph.
        let mut base = id;
        while let Some(rest) = base
            .strip_prefix("retry-")
            .and_then(|r| r.split_once('-'))
            .filter(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
            .map(|(_, rest)| rest)
        {
            base = rest;
        }
        let mut wait_id = format!("retry-{attempt}-{base}");
        let mut n = 1;
        while self.tasks.iter().any(|t| t.id == wait_id) {
            n += 1;
            wait_id = format!("retry-{attempt}.{n}-{base}");
        }
        wait.id = wait_id;
        // The retry wait starts counting now: it has no dependencies of its own.
        wait.not_before = Some(crate::core::time::add(now, policy.interval));
        let wait_id = wait.id.clone();
        self.tasks[idx].depends_on.push(wait_id);
        self.tasks.insert(idx, wait);
        FailureVerdict::Retry { attempt }
    }

    /// Appends `tasks` as a strict chain after task `after`: the first depends on `after`,
    /// each later one on its predecessor.
    pub fn append_chain(&mut self, after: &str, tasks: Vec<Task>) {
        let mut prev = after.to_string();
        for mut t in tasks {
            t.depends_on = vec![prev.clone()];
            prev = t.id.clone();
            self.tasks.push(t);
        }
    }

    /// Takes task `id` out of the graph with every task that (transitively) depends on it;
    /// the rest stays (independent upkeep and notices in the agent's own chat).
    pub(crate) fn drop_task(&mut self, id: &str) {
        let mut gone: std::collections::HashSet<String> = std::collections::HashSet::new();
        gone.insert(id.to_string());
        loop {
            let more: Vec<String> = self
                .tasks
                .iter()
                .filter(|t| !gone.contains(&t.id) && t.depends_on.iter().any(|d| gone.contains(d)))
                .map(|t| t.id.clone())
                .collect();
            if more.is_empty() {
                break;
            }
            gone.extend(more);
        }
        // Retry waits that served the task go with it (it depends on them, not they on it).
        let waits: Vec<String> = self
            .task(id)
            .map(|t| t.depends_on.clone())
            .unwrap_or_default()
            .into_iter()
            .filter(|d| {
                self.task(d).is_some_and(
                    |w| matches!(&w.spec, TaskSpec::Wait { retry_of: Some(of), .. } if of == id),
                )
            })
            .collect();
        gone.extend(waits);
        self.tasks.retain(|t| !gone.contains(&t.id));
    }

    /// After a restart nothing is in flight: every `active` task becomes `pending` again.
    /// Returns the ids that were reset.
    pub(crate) fn reset_active(&mut self, now: Timestamp) -> Vec<String> {
        let mut reset = Vec::new();
        for t in &mut self.tasks {
            if t.status == TaskStatus::Active {
                t.status = TaskStatus::Pending;
                t.updated_at = now;
                reset.push(t.id.clone());
            }
        }
        reset
    }

    /// Tasks not yet done, for status displays.
    pub(crate) fn open_tasks(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.status != TaskStatus::Done)
            .count()
    }

    /// Checks the invariants a loaded graph must hold: unique ids, dependencies that exist.
    pub(crate) fn validate(&self) -> Result<(), crate::core::Invalid> {
        if self.format != FORMAT_VERSION {
            return Err(crate::core::Invalid::from(format!(
                "unsupported format version {} (this build reads {FORMAT_VERSION})",
                self.format
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for t in &self.tasks {
            if !seen.insert(t.id.as_str()) {
                return Err(crate::core::Invalid::from(format!(
                    "duplicate task id {:?}",
                    t.id
                )));
            }
        }
        for t in &self.tasks {
            for d in &t.depends_on {
                if *d == t.id {
                    return Err(crate::core::Invalid::from(format!(
                        "task {:?} depends on itself",
                        t.id
                    )));
                }
                if !seen.contains(d.as_str()) {
                    return Err(crate::core::Invalid::from(format!(
                        "task {:?} depends on unknown task {d:?}",
                        t.id
                    )));
                }
            }
            if let TaskSpec::Wait { delay_secs, .. } = &t.spec
                && !(delay_secs.is_finite() && (0.0..=MAX_WAIT_SECS).contains(delay_secs))
            {
                return Err(crate::core::Invalid::from(format!(
                    "task {:?} waits {delay_secs} seconds (allowed: 0 to {MAX_WAIT_SECS})",
                    t.id
                )));
            }
        }
        if let Some(cycle) = self.cycle() {
            return Err(crate::core::Invalid::from(format!(
                "dependency cycle: {}",
                cycle.join(" -> ")
            )));
        }
        Ok(())
    }

    /// Checks that nothing in the graph is due further than [`HORIZON`] past `now` (the
    /// loading moment): a task's `not_before` and the conversation's `parked_until`.
    pub(crate) fn check_horizon(&self, now: Timestamp) -> Result<(), crate::core::Invalid> {
        let limit = crate::core::time::add(now, HORIZON);
        let days = HORIZON.as_secs() / 86_400;
        let late = self.tasks.iter().find_map(|t| {
            t.not_before
                .filter(|nb| *nb > limit)
                .map(|nb| (t.id.as_str(), nb))
        });
        if let Some((id, nb)) = late {
            return Err(crate::core::Invalid::from(format!(
                "task {id:?} is not due before {nb}, more than {days} days from now ({now})"
            )));
        }
        if let Some(p) = self.parked_until.filter(|p| *p > limit) {
            return Err(crate::core::Invalid::from(format!(
                "the conversation is parked until {p}, more than {days} days from now ({now})"
            )));
        }
        Ok(())
    }

    /// The ids of one dependency cycle, if the graph has one (Kahn's algorithm: what cannot be
    /// ordered is on or behind a cycle; one cycle is then walked out for the message).
    fn cycle(&self) -> Option<Vec<String>> {
        let index: std::collections::HashMap<&str, usize> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.as_str(), i))
            .collect();
        let deps: Vec<Vec<usize>> = self
            .tasks
            .iter()
            .map(|t| {
                t.depends_on
                    .iter()
                    .filter_map(|d| index.get(d.as_str()).copied())
                    .collect()
            })
            .collect();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); self.tasks.len()];
        let mut missing: Vec<usize> = deps.iter().map(Vec::len).collect();
        for (i, ds) in deps.iter().enumerate() {
            for &d in ds {
                dependents[d].push(i);
            }
        }
        let mut ready: Vec<usize> = (0..self.tasks.len()).filter(|&i| missing[i] == 0).collect();
        let mut ordered = 0;
        while let Some(i) = ready.pop() {
            ordered += 1;
            for &j in &dependents[i] {
                missing[j] -= 1;
                if missing[j] == 0 {
                    ready.push(j);
                }
            }
        }
        if ordered == self.tasks.len() {
            return None;
        }
        // Every unordered task has an unordered dependency: follow them until one repeats.
        let mut at = (0..self.tasks.len()).find(|&i| missing[i] > 0)?;
        let mut path: Vec<usize> = Vec::new();
        loop {
            if let Some(pos) = path.iter().position(|&p| p == at) {
                let mut ids: Vec<String> = path[pos..]
                    .iter()
                    .map(|&i| self.tasks[i].id.clone())
                    .collect();
                ids.push(self.tasks[at].id.clone());
                return Some(ids);
            }
            path.push(at);
            at = *deps[at].iter().find(|&&d| missing[d] > 0)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::ChatKind;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn graph() -> TaskGraph {
        let chat = Chat {
            id: ChatId(7),
            kind: ChatKind::Direct,
            title: "Ann".into(),
        };
        TaskGraph::with_received("a", chat, at(0), None, at(2))
    }

    fn wait(secs: f64) -> Task {
        Task::new(TaskSpec::wait(secs, false), at(0))
    }

    /// A retry wait that fails itself gets a retry named after the task it serves: ids never
    /// nest (`retry-1-retry-1-…`), and never repeat one already in the graph.
    #[test]
    fn retries_of_retries_do_not_nest_their_ids() {
        let mut g = graph();
        let rid = g.tasks[0].id.clone();
        let policy = RetryPolicy {
            max_attempts: 10,
            interval: std::time::Duration::from_secs(10),
        };
        let mut failing = rid.clone();
        for round in 0..5 {
            let verdict = g.record_failure(&failing, "boom", true, policy, at(round));
            assert!(matches!(verdict, FailureVerdict::Retry { .. }));
            let task = g
                .task(&failing)
                .map(|t| t.depends_on.clone())
                .unwrap_or_default();
            failing = task.last().cloned().unwrap_or_default();
        }
        let ids: Vec<&str> = g.tasks.iter().map(|t| t.id.as_str()).collect();
        for id in &ids {
            assert!(
                id.matches("retry-").count() <= 1,
                "nested retry id {id}: {ids:?}"
            );
        }
        let unique: std::collections::HashSet<&&str> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "{ids:?}");
        assert!(g.validate().is_ok());
    }

    #[test]
    fn received_waits_for_its_debounce_deadline() {
        let g = graph();
        assert!(g.ready_task(at(1)).is_none());
        assert_eq!(g.next_deadline(), Some(at(2)));
        assert_eq!(
            g.ready_task(at(2)).map(|t| t.kind()),
            Some(TaskKind::Received)
        );
    }

    #[test]
    fn wait_deadline_is_fixed_when_its_dependencies_finish() {
        let mut g = graph();
        let rid = g.tasks[0].id.clone();
        g.append_chain(&rid, vec![wait(60.0)]);
        assert!(!g.arm_waits(at(5)), "dependency not done: nothing to arm");
        g.mark_done(&rid, at(10));
        assert!(g.arm_waits(at(10)));
        assert_eq!(g.tasks[1].not_before, Some(at(70)));
        assert!(g.ready_task(at(69)).is_none());
        assert!(g.ready_task(at(70)).is_some());
    }

    #[test]
    fn failures_retry_through_a_wait_then_doom_the_graph() {
        let mut g = graph();
        let rid = g.tasks[0].id.clone();
        let policy = RetryPolicy {
            max_attempts: 3,
            interval: Duration::from_secs(10),
        };
        assert_eq!(
            g.record_failure(&rid, "boom", true, policy, at(2)),
            FailureVerdict::Retry { attempt: 1 }
        );
        assert!(g.ready_task(at(11)).is_none());
        let ready = g.ready_task(at(12)).map(|t| t.id.clone());
        assert!(
            ready
                .as_deref()
                .is_some_and(|id| id.starts_with("retry-1-")),
            "the retry wait runs first, got {ready:?}"
        );
        assert_eq!(
            g.record_failure(&rid, "boom", true, policy, at(12)),
            FailureVerdict::Retry { attempt: 2 }
        );
        assert_eq!(
            g.record_failure(&rid, "boom", true, policy, at(22)),
            FailureVerdict::Drop
        );
        assert!(g.validate().is_ok());
    }

    #[test]
    fn permanent_failure_dooms_at_once() {
        let mut g = graph();
        let rid = g.tasks[0].id.clone();
        let policy = RetryPolicy {
            max_attempts: 10,
            interval: Duration::from_secs(10),
        };
        assert_eq!(
            g.record_failure(&rid, "forbidden", false, policy, at(2)),
            FailureVerdict::Drop
        );
    }

    /// A new graph holds exactly its tasks: no spare slots per waiting chat.
    #[test]
    fn a_new_graph_reserves_no_spare_task_slots() {
        assert_eq!(graph().tasks.capacity(), 1);
    }
}
