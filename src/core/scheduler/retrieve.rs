//! `retrieve` inside the scheduler: what a finished retrieval asks for. Each refusal the
//! handler met (a guard, the daily cap, a failed fetch) becomes a `retrieve_refused` notable
//! for the operator; when it kept new documents for the chat, the chat is planned again at
//! once (through `presence::replan_intent`, as a firing intent is) with a moment whose id
//! starts with `retrieve::FOLLOW_UP_PREFIX`, so the model answers with what it read. A
//! retrieval that kept nothing new (every URL already retrieved in this window, or all
//! refused) asks for no other turn.

use jiff::Timestamp;
use tracing::info;

use super::{ConversationKey, Scheduler};
use crate::core::intents::Fired;
use crate::core::model::Chat;

impl Scheduler {
    /// Applies a finished `retrieve` of `key`'s chat (see the module documentation).
    pub(super) fn retrieved(
        &mut self,
        key: &ConversationKey,
        chat: Chat,
        added: &[String],
        refused: &[String],
        now: Timestamp,
    ) {
        for why in refused {
            self.notable(&key.agent, Some(key.chat), "retrieve_refused", why.clone());
        }
        if added.is_empty() {
            info!(event = "retrieve_nothing_new", conversation = %key, "nothing new retrieved: no follow-up turn");
            return;
        }
        info!(event = "retrieve_follow_up", conversation = %key, documents = added.len(), "retrieved: planning again with the documents");
        let text = format!(
            "You retrieved {} (shown at the beginning of this conversation).",
            added.join(", ")
        );
        let fired = Fired {
            id: crate::core::graph::new_id(
                crate::core::retrieve::FOLLOW_UP_PREFIX.trim_end_matches('-'),
            ),
            text,
            due: now,
            urgent: false,
        };
        let agent = key.agent.clone();
        self.replan_intent(&agent, chat, fired, now);
    }
}
