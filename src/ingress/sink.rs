//! The runtime as the MTProto pump's sink for one agent: every admitted update enters the
//! runtime through the handle the admission chain is installed on (so live messages,
//! catch-up and the startup unread scan pass the same chain); our own echoed sends reach the
//! agent's group gate (replies to us, share of voice).

use std::sync::Arc;

use crate::core::model::{Chat, ChatId, Message, MessageId};
use crate::ingress::chain::Groups;
use crate::ports::updates::Sink;
use crate::runtime::RuntimeHandle;

/// The runtime as a sink for one agent (`runtime` must carry the admission chain).
pub struct RuntimeSink {
    pub agent: String,
    pub runtime: RuntimeHandle,
    /// The agent's group gates (for our own sends: replies to us and share of voice).
    pub groups: Arc<Groups>,
}

impl Sink for RuntimeSink {
    fn inbound(&self, chat: Chat, message: Message, trigger: bool) {
        self.inbound_addressed(chat, message, trigger, false);
    }
    fn inbound_addressed(&self, chat: Chat, message: Message, trigger: bool, callout: bool) {
        self.runtime
            .push_inbound_addressed(&self.agent, chat, message, trigger, callout);
    }
    fn own_sent(&self, chat: &Chat, message: &Message) {
        if let Some(gate) = self.groups.get(&self.agent) {
            gate.note_own(chat, message);
        }
    }
    fn owner_wrote(&self, chat: Chat, message: Message) {
        self.own_sent(&chat, &message);
        let id = chat.id;
        self.runtime.push_inbound(&self.agent, chat, message, false);
        self.runtime
            .cancel_plan(&self.agent, id, "the owner wrote in this chat");
    }
    fn edited(&self, chat: Chat, message: Message) {
        // The planner reads history from Telegram when it plans, so it sees the new text.
        tracing::debug!(agent = %self.agent, chat = %chat.id, message = %message.id, "message edited");
    }
    fn deleted(&self, chat: Option<ChatId>, ids: Vec<MessageId>) {
        tracing::debug!(agent = %self.agent, chat = ?chat.map(|c| c.0), count = ids.len(), "messages deleted");
    }
    fn migrated(&self, from: ChatId, to: ChatId) {
        tracing::info!(agent = %self.agent, from = %from, to = %to, "group upgraded to a supergroup; its messages now arrive from the new id");
        // Nothing can be sent to the old basic group any more: its plan and what the agent
        // keeps about it move to the supergroup.
        self.runtime.migrate_chat(&self.agent, from, to);
    }
    fn unauthorized(&self, reason: &str) {
        self.runtime.stop_agent(&self.agent, reason);
    }
}
