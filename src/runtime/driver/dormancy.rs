//! The driver's side of dormant graphs (`core::scheduler::dormant`): it reads a dormant
//! conversation's graph back from the store, off the loop, before an event or a deadline
//! touches it, and sends a settled graph out of RAM once its newest state is durable. The
//! scheduler decides which graphs may sleep and which are wanted; this only does the reading
//! and says when a graph's write is done. Called from the driver's loop.

use jiff::Timestamp;
use tracing::{error, warn};

use super::Driver;
use crate::core::graph::ConversationKey;
use crate::core::scheduler::OwnerRequest;
use crate::ports::store::Quarantined;
use crate::runtime::RuntimeError;
use crate::runtime::persistence::{Target, blocking};
use crate::runtime::queue::Event;

impl Driver {
    /// The conversations `events` will touch (an owner's request over every chat of an agent:
    /// all of its dormant ones); [`Driver::wake`] reads back those that are dormant.
    pub(super) fn touched_by(&self, events: &[Event]) -> Vec<ConversationKey> {
        let mut keys = Vec::new();
        for event in events {
            match event {
                Event::Inbound { agent, chat, .. } | Event::AnswerOwner { agent, chat, .. } => {
                    keys.push(ConversationKey::new(agent.as_str(), chat.id));
                }
                Event::Cancel { agent, chat, .. } => {
                    keys.push(ConversationKey::new(agent.as_str(), *chat));
                }
                Event::MigrateChat { agent, from, to } => {
                    keys.push(ConversationKey::new(agent.as_str(), *from));
                    keys.push(ConversationKey::new(agent.as_str(), *to));
                }
                Event::Owner { agent, request, .. } => match owner_chat(request) {
                    Some(chat) => keys.push(ConversationKey::new(agent.as_str(), chat)),
                    None => keys.extend(self.sched.dormant_of(agent)),
                },
                _ => {}
            }
        }
        keys
    }

    /// Reads the dormant graphs of `keys` back (one trip to the blocking pool for all of
    /// them) and hands them to the scheduler. The loop holds the clock meanwhile, so nothing
    /// moves on before they are back. A graph that cannot be read is left on disk and
    /// forgotten for this run (logged); one that does not parse is moved aside, as at start.
    pub(super) async fn wake(
        &mut self,
        mut keys: Vec<ConversationKey>,
    ) -> Result<(), RuntimeError> {
        keys.retain(|k| self.sched.is_dormant(k));
        keys.sort();
        keys.dedup();
        if keys.is_empty() {
            return Ok(());
        }
        let store = std::sync::Arc::clone(&self.svc.store);
        let now = self.svc.clock.now();
        let read = blocking(move || {
            keys.into_iter()
                .map(|key| {
                    let graph = store.load_graph(&key, now);
                    (key, graph)
                })
                .collect::<Vec<_>>()
        })
        .await?;
        let now = self.svc.clock.now();
        for (key, result) in read {
            let graph = match result {
                Ok((graph, quarantined)) => {
                    if let Some(q) = &quarantined {
                        log_quarantined(q);
                    } else if graph.is_none() {
                        warn!(event = "dormant_graph_gone", conversation = %key, "a dormant graph's file is gone; the conversation goes on without it");
                    }
                    graph
                }
                Err(e) => {
                    error!(event = "dormant_graph_unreadable", conversation = %key, error = %e, "a dormant graph could not be read back; it stays on disk for the next start and this run goes on without it");
                    None
                }
            };
            self.sched.wake(&key, graph, now);
            // Back for an event that may change nothing (the owner's list of plans): it
            // goes back to sleep at the end of the pass unless it moves.
            self.evictable.push(key);
        }
        Ok(())
    }

    /// Sends the settled graphs whose writes are done out of RAM (end of a pass).
    pub(super) fn evict_settled(&mut self, now: Timestamp) {
        for key in std::mem::take(&mut self.evictable) {
            if !self.waiting.contains_key(&key)
                && !self.persister.is_pending(&Target::Graph(key.clone()))
            {
                self.sched.evict(&key, now);
            }
        }
    }
}

/// Says that a graph file did not read and where it went (at start, and when a dormant
/// graph's file is read back).
pub(super) fn log_quarantined(q: &Quarantined) {
    error!(
        file = %q.original.display(),
        moved_to = %q.moved_to.display(),
        reason = %q.reason,
        "unreadable graph file moved to quarantine"
    );
}

/// The one chat an owner's request is about (`None`: every chat of the agent).
fn owner_chat(request: &OwnerRequest) -> Option<crate::core::model::ChatId> {
    match request {
        OwnerRequest::Pause { chat, .. }
        | OwnerRequest::Resume { chat }
        | OwnerRequest::Plans { chat } => *chat,
        OwnerRequest::Forget { chat }
        | OwnerRequest::GroupMode { chat, .. }
        | OwnerRequest::ApprovalMode { chat, .. } => Some(*chat),
    }
}
