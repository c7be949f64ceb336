//! The owner in the loop, inside the scheduler: drafts waiting for approval (posted, then
//! decided by the owner's reply or `personad ctl`, superseded by a newer message, timed out;
//! one waiting draft per chat, its replacement posted at most once per draft gap) and notices to the owner (a send task in the agent's Saved Messages graph, so it is
//! durable and paced like any other; incident notices are rate-limited per kind). Part of
//! the pure scheduler: no I/O, the `draft` handler posts and the driver persists.

use std::collections::HashMap;

use jiff::Timestamp;
use tracing::info;

use super::{Effect, Notable, Scheduler};
use crate::core::approval::{self, Decision, Posted, Superseded};
use crate::core::graph::draft;
use crate::core::graph::{ConversationKey, Task, TaskGraph, TaskKind, TaskSpec, TaskStatus};
use crate::core::model::{Chat, ChatId, MessageId};

/// Which draft the owner means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraftRef {
    /// The owner replied to the posted draft (a message in `chat`).
    Reply { chat: ChatId, message: MessageId },
    /// A draft id from `personad ctl drafts` (the whole id or 4+ leading hex digits).
    Id(String),
}

/// At most one notice of a kind per agent in this span; the ones held back are counted in
/// the next.
pub(super) const NOTICE_GAP: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Incident notices held back per agent and kind: when the last went out, how many since.
pub(super) type Notices = HashMap<(String, &'static str), (Timestamp, u32)>;

/// Owner replies held while drafts are posted, at most.
const EARLY_REPLIES_KEPT: usize = 32;

/// An owner's reply to a message of the owner's chat that came while a draft of the same
/// agent was being posted: it may answer that draft, whose message is known only once the
/// post is back.
#[derive(Debug)]
pub(super) struct EarlyReply {
    agent: String,
    /// Always a [`DraftRef::Reply`].
    which: DraftRef,
    decision: Decision,
}

impl Scheduler {
    /// One task of the conversation's current graph, to change.
    fn task_mut(&mut self, key: &ConversationKey, task_id: &str) -> Option<&mut Task> {
        self.graphs
            .get_mut(key)?
            .tasks
            .iter_mut()
            .find(|t| t.id == task_id)
    }

    /// Whether `key`'s task in flight is a `draft` task posting its draft (its message not
    /// known yet).
    fn posting(&self, key: &ConversationKey, running: &super::Running) -> bool {
        running.kind == TaskKind::Draft
            && self.graphs.get(key).is_some_and(|g| {
                g.task(&running.task_id)
                    .is_some_and(|t| matches!(t.spec, TaskSpec::Draft { posted: None, .. }))
            })
    }

    /// Whether a `draft` task of `agent` is posting its draft right now.
    fn posting_draft(&self, agent: &str) -> bool {
        self.in_flight
            .iter()
            .any(|(key, running)| key.agent == agent && self.posting(key, running))
    }

    /// A draft task of `key` finished posting (`posted`, when it did): a reply held for it
    /// ([`EarlyReply`]) is its owner's word now, kept with the task as a word given during
    /// the post is. Once no post of the agent is under way, the replies left were to other
    /// messages: answered as such.
    pub(super) fn early_replies_after_post(
        &mut self,
        key: &ConversationKey,
        task_id: &str,
        posted: Option<Posted>,
        now: Timestamp,
    ) {
        if self.early_replies.is_empty() {
            return;
        }
        if let Some(posted) = posted
            && let Some(at) = self.early_replies.iter().position(|r| {
                r.agent == key.agent
                    && r.which
                        == DraftRef::Reply {
                            chat: posted.chat,
                            message: posted.message,
                        }
            })
        {
            let reply = self.early_replies.remove(at);
            if let Some(TaskSpec::Draft { posted: slot, .. }) =
                self.task_mut(key, task_id).map(|t| &mut t.spec)
            {
                *slot = Some(posted);
            }
            self.decide_draft(&key.agent, &reply.which, reply.decision, now);
        }
        let others_posting = self
            .in_flight
            .iter()
            .any(|(k, running)| k != key && k.agent == key.agent && self.posting(k, running));
        if others_posting {
            return;
        }
        let (left, kept): (Vec<EarlyReply>, Vec<EarlyReply>) =
            std::mem::take(&mut self.early_replies)
                .into_iter()
                .partition(|r| r.agent == key.agent);
        self.early_replies = kept;
        for reply in left {
            self.draft_not_found(&key.agent, &reply.which, now);
        }
    }

    /// The owner's word named no waiting draft: logged, and a reply to a replaced draft
    /// answered.
    fn draft_not_found(&mut self, agent: &str, which: &DraftRef, now: Timestamp) {
        info!(event = "draft_not_found", agent = %agent, which = ?which, "the owner decided on a draft that no longer waits");
        self.replied_to_superseded(agent, which, now);
    }

    /// A `draft` task posted its draft: it stays pending until the owner decides or its
    /// timeout passes (its `not_before`).
    pub(super) fn on_drafted(
        &mut self,
        key: &ConversationKey,
        task_id: &str,
        posted: Posted,
        now: Timestamp,
    ) {
        let Some(task) = self.task_mut(key, task_id) else {
            return;
        };
        let TaskSpec::Draft {
            posted: slot,
            timeout_secs,
            ..
        } = &mut task.spec
        else {
            return;
        };
        *slot = Some(posted);
        let deadline = crate::core::time::add(now, std::time::Duration::from_secs(*timeout_secs));
        task.status = TaskStatus::Pending;
        task.not_before = Some(deadline);
        task.updated_at = now;
        info!(event = "draft_posted", conversation = %key, draft = %task_id, until = %deadline, "draft waits for the owner");
        self.mark_dirty(key);
    }

    /// The owner's word on a draft. A draft whose posting is under way keeps the word and
    /// applies it once posted; the owner's reply in Telegram is answered there. Returns
    /// whether a waiting draft was found.
    pub(crate) fn decide_draft(
        &mut self,
        agent: &str,
        which: &DraftRef,
        decision: Decision,
        now: Timestamp,
    ) -> bool {
        let found = self.graphs.iter().find_map(|(key, g)| {
            if key.agent != agent {
                return None;
            }
            g.tasks.iter().find_map(|t| match &t.spec {
                TaskSpec::Draft { posted, .. } if t.status != TaskStatus::Done => {
                    let hit = match which {
                        DraftRef::Reply { chat, message } => {
                            *posted
                                == Some(Posted {
                                    chat: *chat,
                                    message: *message,
                                })
                        }
                        DraftRef::Id(sel) => approval::matches_id(&t.id, sel),
                    };
                    hit.then(|| (key.clone(), t.id.clone(), g.chat.title.clone()))
                }
                _ => None,
            })
        });
        let Some((key, task_id, title)) = found else {
            // The draft's message reaches the owner a moment before its task is back, so a
            // quick reply can come first: held until the posts under way name theirs.
            if matches!(which, DraftRef::Reply { .. }) && self.posting_draft(agent) {
                if self.early_replies.len() >= EARLY_REPLIES_KEPT {
                    self.early_replies.remove(0);
                }
                self.early_replies.push(EarlyReply {
                    agent: agent.to_string(),
                    which: which.clone(),
                    decision,
                });
                return true;
            }
            self.draft_not_found(agent, which, now);
            return false;
        };
        let in_flight = self
            .in_flight
            .get(&key)
            .is_some_and(|f| f.task_id == task_id);
        if in_flight {
            // Posting (or timing out) right now: the word is kept with the task and wins
            // when it finishes.
            if let Some(TaskSpec::Draft { decision: slot, .. }) =
                self.task_mut(&key, &task_id).map(|t| &mut t.spec)
            {
                *slot = Some(decision.clone());
            }
            self.mark_dirty(&key);
        } else {
            self.apply_decision(&key, &task_id, decision.clone(), now);
        }
        if matches!(which, DraftRef::Reply { .. }) {
            let what = match &decision {
                Decision::Send => "approved: it goes out as planned".to_string(),
                Decision::Edit { .. } => "approved with your text: that goes out".to_string(),
                Decision::Drop => "rejected: nothing is sent".to_string(),
                Decision::Later => "kept: it waits again".to_string(),
            };
            self.notify_owner(
                agent,
                &format!("personad: draft {task_id} for {title} {what}"),
                now,
            );
        }
        true
    }

    /// Applies a decision to a draft that is not running.
    pub(super) fn apply_decision(
        &mut self,
        key: &ConversationKey,
        task_id: &str,
        decision: Decision,
        now: Timestamp,
    ) {
        if !self.graphs.contains_key(key) {
            return;
        }
        info!(event = "draft_decided", conversation = %key, draft = %task_id, decision = decision.verb(), "the owner decided on a draft");
        let event = match &decision {
            Decision::Send => "draft_approved",
            Decision::Edit { .. } => "draft_edited",
            Decision::Drop => "draft_rejected",
            Decision::Later => "draft_later",
        };
        self.notable(&key.agent, Some(key.chat), event, task_id.to_string());
        let Some(graph) = self.graphs.get_mut(key) else {
            return;
        };
        // The owner decided on the chat's current draft: the one it replaced is settled too.
        graph.superseded = None;
        match decision {
            Decision::Drop => {
                self.remove_graph(key, now);
            }
            Decision::Later => {
                if let Some(t) = graph.tasks.iter_mut().find(|t| t.id == task_id) {
                    let secs = match &t.spec {
                        TaskSpec::Draft { timeout_secs, .. } => *timeout_secs,
                        _ => 0,
                    };
                    t.not_before = Some(crate::core::time::add(
                        now,
                        std::time::Duration::from_secs(secs),
                    ));
                    t.status = TaskStatus::Pending;
                    t.updated_at = now;
                }
                self.mark_dirty(key);
            }
            Decision::Send | Decision::Edit { .. } => {
                if let Decision::Edit { text } = &decision {
                    draft::apply_edit(graph, task_id, text);
                }
                if let Some(TaskSpec::Draft { decision: slot, .. }) = graph
                    .tasks
                    .iter_mut()
                    .find(|t| t.id == task_id)
                    .map(|t| &mut t.spec)
                {
                    *slot = Some(decision);
                }
                graph.mark_done(task_id, now);
                graph.arm_waits(now);
                self.mark_dirty(key);
            }
        }
        self.reschedule(key, now);
    }

    /// Takes the word the owner gave on a draft while it ran, if the finished task is one
    /// (taken: a word is applied once, never again at the next run).
    pub(super) fn take_kept_decision(
        &mut self,
        key: &ConversationKey,
        graph_id: &str,
        task_id: &str,
    ) -> Option<Decision> {
        let graph = self.graphs.get_mut(key).filter(|g| g.id == graph_id)?;
        let task = graph.tasks.iter_mut().find(|t| t.id == task_id)?;
        match &mut task.spec {
            TaskSpec::Draft { decision, .. } if task.status != TaskStatus::Done => decision.take(),
            _ => None,
        }
    }

    /// A draft task whose run ended while the owner's word waited: pending again (the word
    /// decides next), with where it was posted if the run posted it.
    pub(super) fn word_after_run(
        &mut self,
        key: &ConversationKey,
        task_id: &str,
        posted: Option<Posted>,
    ) {
        let Some(task) = self.task_mut(key, task_id) else {
            return;
        };
        task.status = TaskStatus::Pending;
        if let (TaskSpec::Draft { posted: slot, .. }, Some(p)) = (&mut task.spec, posted) {
            *slot = Some(p);
        }
        self.mark_dirty(key);
    }

    /// The conversation's graph goes (a newer message replaces it, the owner took over,
    /// paused or forgot the chat) while the owner has its draft (or is about to get it): the
    /// owner is told that draft is void, rate-limited like other incidents.
    pub(super) fn draft_void(&mut self, key: &ConversationKey, why: &str, now: Timestamp) {
        let Some((draft, title)) = self.graphs.get(key).and_then(|old| {
            old.tasks
                .iter()
                .find(|t| {
                    t.status != TaskStatus::Done
                        && matches!(&t.spec, TaskSpec::Draft { posted, decision: None, .. }
                            if posted.is_some() || t.status == TaskStatus::Active)
                })
                .map(|t| (t.id.clone(), old.chat.title.clone()))
        }) else {
            return;
        };
        info!(event = "draft_superseded", conversation = %key, draft = %draft, why, "the draft is void");
        let text = format!("personad: draft {draft} for {title} is void: {why}");
        self.notable(&key.agent, Some(key.chat), "draft_superseded", draft);
        self.notify_incident(&key.agent, "draft_superseded", &text, now);
    }

    /// A newer message replaces `key`'s graph: the draft the owner has (posted and waiting)
    /// or is about to get (being posted) is void, and is what the next draft replaces; with
    /// none, the one the graph already carried. Logged and counted, no notice: the replacing
    /// draft says what it replaces, and the owner is told if none follows.
    pub(super) fn supersede(
        &mut self,
        key: &ConversationKey,
        now: Timestamp,
    ) -> Option<Superseded> {
        let old = self.graphs.get(key)?;
        let voided = old.tasks.iter().find_map(|t| match &t.spec {
            TaskSpec::Draft {
                posted,
                decision: None,
                ..
            } if t.status != TaskStatus::Done
                && (posted.is_some() || t.status == TaskStatus::Active) =>
            {
                Some(Superseded {
                    id: t.id.clone(),
                    posted: *posted,
                    at: if posted.is_some() { t.updated_at } else { now },
                })
            }
            _ => None,
        });
        let Some(voided) = voided else {
            return old.superseded.clone();
        };
        info!(event = "draft_superseded", conversation = %key, draft = %voided.id, "a newer message came in: the draft is void, and the next one replaces it");
        self.notable(
            &key.agent,
            Some(key.chat),
            "draft_superseded",
            voided.id.clone(),
        );
        Some(voided)
    }

    /// A draft that replaces a voided one waits until the draft gap after that one was shown,
    /// so a burst of messages costs the owner one replacement post, covering the newest.
    pub(super) fn held_by_draft_gap(
        &self,
        graph: &TaskGraph,
        task: &Task,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let old = graph.superseded.as_ref()?;
        if !matches!(
            task.spec,
            TaskSpec::Draft {
                posted: None,
                decision: None,
                ..
            }
        ) {
            return None;
        }
        // A time from the future (a hand edit) holds one gap from now at most.
        let ready = crate::core::time::add(old.at.min(now), self.config.draft_gap);
        (ready > now).then_some(ready)
    }

    /// A graph leaves while it still carries a voided draft whose replacement was never
    /// posted (the new plan needed no draft, was dropped, or the owner took over): the owner
    /// is told that draft is void, rate-limited like other incidents.
    pub(super) fn superseded_void(&mut self, graph: &TaskGraph, now: Timestamp) {
        let Some(old) = &graph.superseded else {
            return;
        };
        let replaced = graph.tasks.iter().any(|t| {
            matches!(
                &t.spec,
                TaskSpec::Draft {
                    posted: Some(_),
                    ..
                }
            )
        });
        if replaced {
            return;
        }
        let title = &graph.chat.title;
        let text = format!(
            "personad: draft {} for {title} is void: {title} wrote again, and no new draft followed",
            old.id
        );
        self.notify_incident(&graph.agent, "draft_superseded", &text, now);
    }

    /// The owner answered a draft post that a newer message voided: nothing is decided (the
    /// owner did not see the plan that now waits), and the owner is told where it stands.
    fn replied_to_superseded(&mut self, agent: &str, which: &DraftRef, now: Timestamp) {
        let DraftRef::Reply { chat, message } = which else {
            return;
        };
        let mine = Some(Posted {
            chat: *chat,
            message: *message,
        });
        let Some((old, title, current)) = self.graphs.iter().find_map(|(key, g)| {
            let old = g
                .superseded
                .as_ref()
                .filter(|s| key.agent == agent && s.posted == mine)?;
            let current = g.tasks.iter().find_map(|t| match &t.spec {
                TaskSpec::Draft { posted, .. } if t.status != TaskStatus::Done => {
                    Some((t.id.clone(), posted.is_some()))
                }
                _ => None,
            });
            Some((old.id.clone(), g.chat.title.clone(), current))
        }) else {
            return;
        };
        let next = match current {
            Some((id, true)) => format!("the new draft {id} waits: answer that one"),
            Some((id, false)) => format!("the new draft {id} comes shortly: answer that one"),
            None => "a new draft comes once it is planned: answer that one".into(),
        };
        self.notify_owner(
            agent,
            &format!("personad: draft {old} for {title} was replaced ({title} wrote again), so nothing was decided; {next}"),
            now,
        );
    }

    /// After the agent's state was lost (quarantined) and the agent started paused: the
    /// paused state is saved, and the owner is told why.
    pub(crate) fn fail_closed(&mut self, agent: &str, notice: &str, now: Timestamp) {
        self.effects.push(Effect::SaveAgentState(agent.to_string()));
        self.notify_owner(agent, notice, now);
    }

    /// Sends `text` to the owner (the agent's Saved Messages) as a task of that chat's graph.
    pub(crate) fn notify_owner(&mut self, agent: &str, text: &str, now: Timestamp) {
        let Some(saved) = self.safety.own_chat(agent) else {
            return;
        };
        let task = Task::new(TaskSpec::send(text, None), now);
        self.send_to_owner(agent, saved, task, now);
    }

    /// Queues `task` (a send to the owner) in `chat`'s graph. The chat's upkeep stays; the
    /// send goes first, so upkeep that waits (a schedule call held by a spending cap) never
    /// holds it back; sends to the owner keep their order among themselves. A task of the
    /// same spec already queued is not queued again.
    pub(super) fn send_to_owner(&mut self, agent: &str, chat: Chat, task: Task, now: Timestamp) {
        let key = ConversationKey::new(agent, chat.id);
        match self.graphs.get_mut(&key) {
            Some(graph) => {
                if graph.tasks.iter().any(|t| t.spec == task.spec) {
                    return;
                }
                let at = graph
                    .tasks
                    .iter()
                    .take_while(|t| t.kind() == TaskKind::Send && t.depends_on.is_empty())
                    .count();
                graph.tasks.insert(at, task);
            }
            None => {
                self.graphs.insert(
                    key.clone(),
                    Box::new(TaskGraph::with_tasks(agent, chat, now, vec![task])),
                );
            }
        }
        self.mark_dirty(&key);
        self.reschedule(&key, now);
    }

    /// One notice per incident `kind` per agent in [`NOTICE_GAP`]; the ones held back are
    /// counted in the next.
    pub(crate) fn notify_incident(
        &mut self,
        agent: &str,
        kind: &'static str,
        text: &str,
        now: Timestamp,
    ) {
        let slot = (agent.to_string(), kind);
        let held = match self.notices.get(&slot) {
            Some((last, held)) if crate::core::time::add(*last, NOTICE_GAP) > now => {
                self.notices.insert(slot, (*last, held + 1));
                return;
            }
            Some((_, held)) => *held,
            None => 0,
        };
        self.notices.insert(slot, (now, 0));
        let text = if held > 0 {
            format!("{text} ({held} more like it since the last notice)")
        } else {
            text.to_string()
        };
        self.notify_owner(agent, &text, now);
    }
}

impl Scheduler {
    /// A plan ended against its will (dropped after its retries, refused by the chat): the
    /// operator sees it and the owner gets a notice, rate-limited per kind. Nothing is said
    /// about the agent's own Saved Messages (a notice there that fails must not beget another).
    pub(super) fn incident(
        &mut self,
        key: &ConversationKey,
        event: &'static str,
        detail: String,
        now: Timestamp,
    ) {
        self.notable(&key.agent, Some(key.chat), event, detail.clone());
        if !self.safety.is_own_chat(&key.agent, key.chat) {
            self.notify_incident(&key.agent, event, &format!("personad: {detail}"), now);
        }
    }

    /// Records something the operator should see (the caller logs it with the same name).
    pub(super) fn notable(
        &mut self,
        agent: &str,
        chat: Option<ChatId>,
        event: &'static str,
        detail: String,
    ) {
        self.effects.push(Effect::Notable(Notable {
            agent: agent.to_string(),
            chat,
            event,
            detail,
        }));
    }
}

/// A plan made in a graph that carries a voided draft: its draft says what it replaces.
pub(super) fn note_replacement(graph: &TaskGraph, tasks: &mut [Task]) {
    let Some(old) = &graph.superseded else {
        return;
    };
    let line = approval::replaces_line(old, &graph.chat.title);
    for t in tasks {
        if let TaskSpec::Draft { draft, .. } = &mut t.spec
            && !draft.contains(&line)
        {
            draft.push('\n');
            draft.push_str(&line);
        }
    }
}
