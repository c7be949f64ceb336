//! The update port: where a Telegram backend's admitted updates go. The MTProto pump
//! (`adapters::mtproto::pump`) delivers to it; the admission chain's runtime sink
//! (`ingress::sink`) implements it in production, recorders in tests.

use crate::core::model::{Chat, ChatId, Message, MessageId};

/// Where admitted updates go (the runtime in production, a recorder in tests).
pub trait Sink: Send + Sync + 'static {
    /// A message from someone else; `trigger` asks for a plan.
    fn inbound(&self, chat: Chat, message: Message, trigger: bool);
    /// As `inbound`, knowing whether the message addresses us (mention, reply, name): what
    /// a group decision needs. By default the flag is not used.
    fn inbound_addressed(&self, chat: Chat, message: Message, trigger: bool, callout: bool) {
        let _ = callout;
        self.inbound(chat, message, trigger);
    }
    /// One of our own sends came back from Telegram (share of voice, replies to us).
    fn own_sent(&self, chat: &Chat, message: &Message) {
        let _ = (chat, message);
    }
    /// The owner wrote in this chat from another device: history, and the plan is cancelled.
    fn owner_wrote(&self, chat: Chat, message: Message);
    fn edited(&self, chat: Chat, message: Message);
    fn deleted(&self, chat: Option<ChatId>, ids: Vec<MessageId>);
    fn migrated(&self, from: ChatId, to: ChatId);
    /// The session is dead.
    fn unauthorized(&self, reason: &str);
}
