//! The admission vocabulary: a gate of the chain ([`InboundGate`]) and its verdict
//! ([`Admit`]). Owned here so the chain, the group gate and the owner controls (which `app`
//! implements) speak one language; nothing here decides anything.

use crate::core::admission::Admission;
use crate::core::model::{Chat, Message};

/// A step of the admission chain: decides, before the queue, what an inbound message is.
pub trait InboundGate: Send + Sync {
    /// Whether the message may reach the runtime, and whether it may still trigger a plan.
    fn admit(
        &self,
        agent: &str,
        chat: &Chat,
        message: &Message,
        trigger: bool,
        callout: bool,
    ) -> Admit;
}

/// A gate's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Queue it as it is.
    Pass,
    /// Queue it, but it must not plan (paused chat, a command from someone else).
    NoTrigger,
    /// Consumed by the gate (an owner command, a group message dropped): never queued.
    Consumed,
    /// Queued as the gate decided (a group decision).
    As(Admission),
}
