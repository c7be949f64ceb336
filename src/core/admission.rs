//! What admission decided about one inbound message, and what a group classification
//! decided about a chat's pending batch: the vocabulary between the admission chain
//! (`ingress`), the scheduler (`core::scheduler`, which turns it into graph work) and the
//! `classify` task's handler. Pure data.

use jiff::Timestamp;

use crate::core::model::{Chat, Message, MessageId};

/// Telegram's own accounts: 777000 posts login codes and login notices, 42777 is its
/// service-notification account.
pub const SERVICE_ACCOUNTS: [i64; 2] = [777_000, 42_777];

/// Whether `id` (a user id, or a DM's chat id) is one of Telegram's service accounts.
pub fn is_service_account(id: i64) -> bool {
    SERVICE_ACCOUNTS.contains(&id)
}

/// What the sender of an inbound message allows, whatever the source (live update, catch-up,
/// unread scan, an operator's injection): the first rule of admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderRule {
    /// A person: admission goes on.
    Person,
    /// Kept as history, never a trigger (a bot in a DM, a deleted account).
    HistoryOnly(&'static str),
    /// Not kept at all and never sent anywhere: Telegram's service accounts (login codes),
    /// in their own chat or elsewhere.
    Private,
}

/// The sender rule for `message` in `chat`. The agent's own messages (ours or the owner's,
/// from any device) are `outgoing` and never trigger anyway.
pub fn sender_rule(chat: &Chat, message: &Message) -> SenderRule {
    if is_service_account(chat.id.0) || message.sender.service {
        return SenderRule::Private;
    }
    if message.outgoing {
        return SenderRule::Person;
    }
    // In groups a bot's message is the group decision's (the persona's `reply_to_bots`).
    if message.sender.is_bot && chat.kind.is_direct() {
        SenderRule::HistoryOnly("a bot")
    } else if message.sender.deleted {
        SenderRule::HistoryOnly("a deleted account")
    } else {
        SenderRule::Person
    }
}

/// How an admitted inbound message enters its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// History only: the conversation's graph is left as it is.
    History,
    /// Plan an answer: the conversation's graph is replaced by a `received` task, debounced
    /// from `at` (a group cooldown) or from now. `quote`: the plan's first message may quote
    /// the trigger.
    Plan { quote: bool, at: Option<Timestamp> },
    /// A group message only the classifier can judge: a `classify` task (one per quiet
    /// period, coalescing the chat's pending batch) joins the conversation's graph.
    Classify,
    /// A would-be trigger in a chat the owner paused: history now (no group work, no
    /// classifier call); the newest such message of a direct chat is kept in the agent state
    /// and planned when the owner resumes the chat.
    Paused,
}

impl Admission {
    /// A plain trigger: plan now (after the debounce), quoting allowed.
    pub(crate) const PLAN: Admission = Admission::Plan {
        quote: true,
        at: None,
    };

    /// The old `trigger` flag, for callers that only know yes or no.
    pub(crate) fn from_trigger(trigger: bool) -> Admission {
        if trigger {
            Admission::PLAN
        } else {
            Admission::History
        }
    }
}

/// What classifying a group's pending batch decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupOutcome {
    /// Nothing to do (not addressed, failed closed, already handled).
    Nothing,
    /// Plan an answer to `message_id`, not before `at`.
    Plan {
        message_id: MessageId,
        quote: bool,
        at: Timestamp,
    },
    /// Answer with a reaction only.
    React {
        message_id: MessageId,
        emoji: String,
    },
}
