//! The admission chain: the one path every inbound message takes into the runtime, whatever
//! its source (the MTProto pump, its catch-up and startup unread scan, `ctl say`, the
//! playground, `run --telegram memory`). It is installed on the runtime handle
//! (`RuntimeHandle::with_gate`), so nothing reaches the queue around it:
//!
//! owner controls (commands, pauses) → the source's filters (age, muted, blocked: they arrive
//! as a message that may not plan) → the group decision ([`GroupGate::admit`]) → the queue.
//!
//! A paused chat's message is history before any group work: no classifier call, no
//! reaction. [`Groups`] holds each agent's gate and is the runtime's `ports::groups` port,
//! through which `classify` tasks reach the gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::core::admission::GroupOutcome;
use crate::core::model::{Chat, Message, MessageId};
use crate::core::time::BoxFuture;
use crate::ingress::gate::GroupGate;
use crate::ports::groups::GroupClassifier;
use crate::runtime::{Admit, InboundGate};

/// Every agent's group gate, by agent name.
#[derive(Default)]
pub struct Groups {
    gates: Mutex<HashMap<String, GroupGate>>,
}

impl Groups {
    pub fn new() -> Arc<Groups> {
        Arc::new(Groups::default())
    }

    /// Installs (or replaces) an agent's gate.
    pub fn insert(&self, agent: &str, gate: GroupGate) {
        self.lock().insert(agent.to_string(), gate);
    }

    /// Forgets an agent's gate (the agent was removed).
    pub fn remove(&self, agent: &str) {
        self.lock().remove(agent);
    }

    /// An agent's gate.
    pub fn get(&self, agent: &str) -> Option<GroupGate> {
        self.lock().get(agent).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, GroupGate>> {
        self.gates.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl GroupClassifier for Groups {
    fn classify<'a>(
        &'a self,
        agent: &'a str,
        chat: &'a Chat,
        newest: MessageId,
    ) -> BoxFuture<'a, GroupOutcome> {
        Box::pin(async move {
            match self.get(agent) {
                Some(gate) => gate.classify_batch(chat, newest).await,
                None => GroupOutcome::Nothing,
            }
        })
    }
}

/// The chain itself: owner controls, then the group decision.
pub struct Chain {
    controls: Option<Arc<dyn InboundGate>>,
    groups: Arc<Groups>,
}

impl Chain {
    pub fn new(controls: Option<Arc<dyn InboundGate>>, groups: Arc<Groups>) -> Arc<Chain> {
        Arc::new(Chain { controls, groups })
    }
}

impl InboundGate for Chain {
    fn admit(
        &self,
        agent: &str,
        chat: &Chat,
        message: &Message,
        trigger: bool,
        callout: bool,
    ) -> Admit {
        let mut trigger = trigger;
        if let Some(controls) = &self.controls {
            match controls.admit(agent, chat, message, trigger, callout) {
                Admit::Consumed => return Admit::Consumed,
                Admit::NoTrigger => trigger = false,
                Admit::As(admission) => return Admit::As(admission),
                Admit::Pass => {}
            }
        }
        if !trigger {
            return Admit::NoTrigger;
        }
        match self.groups.get(agent) {
            Some(gate) if chat.kind.is_direct() => gate.admit_direct(chat, message),
            Some(gate) => gate.admit(chat, message, callout),
            None => Admit::Pass,
        }
    }
}
