//! The admission chain: the one path every inbound message takes into the runtime, whatever
//! its source (the MTProto pump, its catch-up and startup unread scan, `ctl say`, the
//! playground, `run --telegram memory`, the bench, the crash child). [`Ingress`] owns the
//! plain runtime handle, so a source that has an `Ingress` cannot reach the queue around it:
//!
//! Telegram's service accounts (never kept) → owner controls (commands, pauses) → the
//! source's filters (age, muted, blocked: they arrive as a message that may not plan) → the
//! group decision ([`GroupGate::admit`]) → the queue.
//!
//! A paused chat's message is history before any group work: no classifier call, no
//! reaction. [`Groups`] holds each agent's gate and is the runtime's `ports::groups` port,
//! through which `classify` tasks reach the gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::core::admission::{Admission, GroupOutcome};
use crate::core::model::{Chat, ChatId, Message, MessageId};
use crate::core::time::BoxFuture;
use crate::ingress::admit::{Admit, InboundGate};
use crate::ingress::gate::GroupGate;
use crate::ports::groups::GroupClassifier;
use crate::runtime::{RuntimeHandle, sender_allows};

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

/// The door: the runtime handle behind the chain (owner controls, then the group decision).
/// Cheap to clone; every clone is the same chain.
#[derive(Clone)]
pub struct Ingress {
    handle: RuntimeHandle,
    controls: Option<Arc<dyn InboundGate>>,
    groups: Arc<Groups>,
}

impl Ingress {
    /// The chain in front of `handle`: the owner controls, if any, then the group gates in
    /// `groups` (which the runtime's `classify` tasks reach too).
    pub fn new(
        handle: RuntimeHandle,
        controls: Option<Arc<dyn InboundGate>>,
        groups: Arc<Groups>,
    ) -> Ingress {
        Ingress {
            handle,
            controls,
            groups,
        }
    }

    /// The runtime behind the door, for everything that is not an inbound message.
    pub fn runtime(&self) -> &RuntimeHandle {
        &self.handle
    }

    /// Every agent's group gate.
    pub fn groups(&self) -> &Arc<Groups> {
        &self.groups
    }

    /// An inbound message, through the chain.
    pub fn push(&self, agent: &str, chat: Chat, message: Message, trigger: bool) {
        self.push_addressed(agent, chat, message, trigger, false);
    }

    /// As [`Ingress::push`], knowing whether Telegram flagged the message as addressing the
    /// account (a mention or a reply): what a group decision needs.
    pub fn push_addressed(
        &self,
        agent: &str,
        chat: Chat,
        message: Message,
        trigger: bool,
        callout: bool,
    ) {
        let Some(trigger) = sender_allows(agent, &chat, &message, trigger) else {
            return;
        };
        let admission = match self.admit(agent, &chat, &message, trigger, callout) {
            Admit::Consumed => return,
            Admit::NoTrigger => Admission::History,
            Admit::As(admission) => admission,
            Admit::Pass => Admission::from_trigger(trigger),
        };
        self.handle.push_admitted(agent, chat, message, admission);
    }

    /// The owner wrote in a chat from another device: history, and the chat's pending plan
    /// is dropped (a person took over).
    pub fn owner_wrote(&self, agent: &str, chat: Chat, message: Message) {
        let id = chat.id;
        self.push(agent, chat, message, false);
        self.handle
            .cancel_plan(agent, id, "the owner wrote in this chat");
    }

    /// A basic group became a supergroup.
    pub fn migrated(&self, agent: &str, from: ChatId, to: ChatId) {
        self.handle.migrate_chat(agent, from, to);
    }

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
