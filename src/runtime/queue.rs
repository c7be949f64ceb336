//! The locked work queue between the outside world and the tick loop. Telegram event
//! handlers, finished tasks, finished writes and shutdown requests only push [`Event`]s here
//! and wake the loop;
//! nothing else happens on their side. While events wait to be consumed the queue holds the
//! clock, so virtual time cannot skip past work that has not been looked at yet.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

use crate::core::graph::ConversationKey;
use crate::core::model::{Chat, Message};
use crate::ports::clock::{Hold, SharedClock};
use crate::runtime::handlers::HandlerResult;

/// Something the tick loop must look at.
#[derive(Debug)]
pub(crate) enum Event {
    /// A message arrived (or was recorded) in a chat of `agent`.
    Inbound {
        agent: String,
        chat: Chat,
        message: Box<Message>,
        /// What admission decided: history, a plan, or a group classification.
        admission: crate::core::admission::Admission,
    },
    /// A task finished running.
    Finished {
        key: ConversationKey,
        graph_id: String,
        task_id: String,
        /// Boxed: it is the largest payload, and every queued event would be its size.
        result: Box<HandlerResult>,
    },
    /// Forget the conversation's pending plan (a person took over).
    Cancel {
        agent: String,
        chat: crate::core::model::ChatId,
        reason: String,
    },
    /// A write submitted by the persister finished (or failed).
    Saved {
        /// The files written, each with the generation of its write.
        done: Vec<(crate::runtime::persistence::Target, u64)>,
        result: Result<(), crate::runtime::RuntimeError>,
        /// The batch was of the urgent lane (writes a task waited for).
        urgent: bool,
    },
    /// A checkpoint finished (or failed).
    Checkpointed {
        result: Result<crate::ports::store::CheckpointReport, crate::runtime::RuntimeError>,
    },
    /// An agent can no longer run (its session is gone).
    StopAgent { agent: String, reason: String },
    /// Stop gracefully.
    Shutdown { reason: String },
    /// Stop gracefully as soon as no conversation has work left (the playground's end of
    /// input): judged by the loop itself, so virtual time never runs past the last plan.
    StopWhenIdle { reason: String },
    /// Hand a hold on the clock to the sender as soon as no conversation has work left, so
    /// virtual time stops right there (tests settling a runtime whose schedule would keep
    /// time moving).
    HoldWhenIdle(tokio::sync::oneshot::Sender<crate::ports::clock::Hold>),
    /// Stop an agent whose persona was removed or disabled (hot reload); graphs stay on disk.
    RemoveAgent { agent: String, reason: String },
    /// A basic group became a supergroup: its state moves to the new id.
    MigrateChat {
        agent: String,
        from: crate::core::model::ChatId,
        to: crate::core::model::ChatId,
    },
    /// The day's LLM spend after a request of `agent`.
    Spent {
        agent: String,
        /// The (UTC) day the spend is of.
        day: jiff::civil::Date,
        spend: crate::core::budget::Spend,
        all: crate::core::budget::Spend,
    },
    /// The owner lifted today's reached cap of `agent`.
    LiftBudget { agent: String },
    /// The owner decided on a draft.
    DecideDraft {
        agent: String,
        which: crate::core::scheduler::DraftRef,
        decision: crate::core::approval::Decision,
    },
    /// The owner's request of `agent` (a pause, a mode, a question about plans): carried out
    /// by the scheduler, which keeps what it changes in the agent's state; answered on `reply`.
    Owner {
        agent: String,
        request: crate::core::scheduler::OwnerRequest,
        reply: Option<tokio::sync::oneshot::Sender<crate::core::scheduler::OwnerReply>>,
    },
    /// The answer to the owner command `command` of `chat`: a send task in that chat's graph.
    AnswerOwner {
        agent: String,
        chat: Chat,
        command: crate::core::model::MessageId,
        text: String,
    },
    /// Start an agent, or give a running one a new persona (hot reload).
    UpsertAgent(Box<crate::runtime::AgentHandle>),
}

/// Events one pass of the loop takes at most: a burst is applied in slices, so what a pass
/// builds (its effects, the graphs it snapshots for their writes) stays bounded.
pub(crate) const PASS_EVENTS: usize = 1024;

/// Room the queue keeps once a burst is over.
const KEPT_CAPACITY: usize = 256;

struct Inner {
    events: VecDeque<Event>,
    hold: Option<Hold>,
    pushed: u64,
}

/// The queue itself. Shared by `Arc` between the runtime and its handles.
pub(crate) struct WorkQueue {
    inner: Mutex<Inner>,
    notify: Notify,
    clock: SharedClock,
}

impl WorkQueue {
    pub(crate) fn new(clock: SharedClock) -> WorkQueue {
        WorkQueue {
            inner: Mutex::new(Inner {
                events: VecDeque::new(),
                hold: None,
                pushed: 0,
            }),
            notify: Notify::new(),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds an event and wakes the tick loop.
    pub(crate) fn push(&self, event: Event) {
        {
            let mut inner = self.lock();
            if inner.hold.is_none() {
                inner.hold = Some(self.clock.hold());
            }
            inner.events.push_back(event);
            inner.pushed += 1;
        }
        self.notify.notify_one();
    }

    /// Takes up to `max` queued events, oldest first, and whether more remain. The clock
    /// hold that covered them comes with the last ones: while events remain queued, the
    /// queue keeps holding the clock. An emptied queue gives back what a burst made it grow
    /// to.
    pub(crate) fn drain(&self, max: usize) -> (Vec<Event>, Option<Hold>, bool) {
        let mut inner = self.lock();
        let n = inner.events.len().min(max);
        let events: Vec<Event> = inner.events.drain(..n).collect();
        if !inner.events.is_empty() {
            return (events, None, true);
        }
        if inner.events.capacity() > KEPT_CAPACITY {
            inner.events.shrink_to(KEPT_CAPACITY);
        }
        (events, inner.hold.take(), false)
    }

    /// How many events were ever pushed; the loop reports how many it has applied, so a
    /// watcher can tell whether everything pushed so far has been looked at.
    pub(crate) fn pushed(&self) -> u64 {
        self.lock().pushed
    }

    /// Resolves when something was pushed since the last call.
    pub(crate) async fn notified(&self) {
        self.notify.notified().await
    }
}
