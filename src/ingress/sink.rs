//! The runtime as the MTProto pump's sink for one agent: every update enters the runtime
//! through [`Ingress`] (so live messages, catch-up and the startup unread scan pass the same
//! chain); our own echoed sends reach the agent's group gate (replies to us, share of voice).

use crate::core::model::{Chat, ChatId, Message, MessageId};
use crate::ingress::chain::Ingress;
use crate::ports::updates::Sink;

/// The runtime as a sink for one agent.
pub struct RuntimeSink {
    pub agent: String,
    pub ingress: Ingress,
}

impl Sink for RuntimeSink {
    fn inbound(&self, chat: Chat, message: Message, trigger: bool) {
        self.inbound_addressed(chat, message, trigger, false);
    }
    fn inbound_addressed(&self, chat: Chat, message: Message, trigger: bool, callout: bool) {
        self.ingress
            .push_addressed(&self.agent, chat, message, trigger, callout);
    }
    fn own_sent(&self, chat: &Chat, message: &Message) {
        if let Some(gate) = self.ingress.groups().get(&self.agent) {
            gate.note_own(chat, message);
        }
    }
    fn owner_wrote(&self, chat: Chat, message: Message) {
        self.own_sent(&chat, &message);
        self.ingress.owner_wrote(&self.agent, chat, message);
    }
    fn edited(&self, chat: Chat, message: Message) {
        // The planner reads history from Telegram when it plans, so it sees the new text.
        tracing::debug!(agent = %self.agent, chat = %chat.id, message_id = %message.id, "message edited");
    }
    fn deleted(&self, chat: Option<ChatId>, ids: Vec<MessageId>) {
        tracing::debug!(agent = %self.agent, chat = ?chat.map(|c| c.0), count = ids.len(), "messages deleted");
    }
    fn migrated(&self, from: ChatId, to: ChatId) {
        tracing::info!(agent = %self.agent, from = %from, to = %to, "group upgraded to a supergroup; its messages now arrive from the new id");
        // Nothing can be sent to the old basic group any more: its plan and what the agent
        // keeps about it move to the supergroup.
        self.ingress.migrated(&self.agent, from, to);
    }
    fn unauthorized(&self, reason: &str) {
        self.ingress.runtime().stop_agent(&self.agent, reason);
    }
}
