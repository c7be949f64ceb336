//! [`RuntimeHandle`]: the cloneable front door of the runtime. Telegram pumps, the
//! playground, the daemon's signal handler and tests push events through it and watch the
//! published [`Status`]; nothing here touches graphs or the disk.

use std::sync::Arc;

use tokio::sync::watch;

use super::Status;
use super::queue::{Event, WorkQueue};
use crate::telegram::{Chat, Message};

/// A cloneable handle for feeding the runtime and watching it.
#[derive(Clone)]
pub struct RuntimeHandle {
    pub(super) queue: Arc<WorkQueue>,
    pub(super) status: watch::Receiver<Status>,
}

impl RuntimeHandle {
    /// Hands an inbound message to the runtime (what Telegram event handlers call).
    pub fn push_inbound(&self, agent: &str, chat: Chat, message: Message, trigger: bool) {
        self.queue.push(Event::Inbound {
            agent: agent.to_string(),
            chat,
            message: Box::new(message),
            trigger,
        });
    }

    /// Drops the conversation's pending plan, e.g. because the owner wrote there themselves.
    pub fn cancel_plan(&self, agent: &str, chat: crate::telegram::ChatId, reason: &str) {
        self.queue.push(Event::Cancel {
            agent: agent.to_string(),
            chat,
            reason: reason.to_string(),
        });
    }

    /// Stops one agent for the rest of this run (its session is no longer valid).
    pub fn stop_agent(&self, agent: &str, reason: &str) {
        self.queue.push(Event::StopAgent {
            agent: agent.to_string(),
            reason: reason.to_string(),
        });
    }

    /// Asks the runtime to stop gracefully.
    pub fn shutdown(&self, reason: &str) {
        self.queue.push(Event::Shutdown {
            reason: reason.to_string(),
        });
    }

    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Resolves once no graph has work left and no event is waiting (or the loop stopped).
    pub async fn wait_idle(&self) {
        let mut rx = self.status.clone();
        loop {
            {
                let st = rx.borrow_and_update();
                if st.stopped || (st.idle() && st.applied == self.queue.pushed()) {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Resolves once a published status satisfies `done` (or the loop stopped).
    pub async fn wait_until(&self, done: impl Fn(&Status) -> bool) {
        let mut rx = self.status.clone();
        loop {
            {
                let st = rx.borrow_and_update();
                if st.stopped || done(&st) {
                    return;
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Resolves when the loop has ended.
    pub async fn wait_stopped(&self) {
        let mut rx = self.status.clone();
        while !rx.borrow_and_update().stopped {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}
