//! What admission decided about one inbound message, and what a group classification
//! decided about a chat's pending batch: the vocabulary between the admission chain
//! (`ingress`), the scheduler (`core::scheduler`, which turns it into graph work) and the
//! `classify` task's handler. Pure data.

use jiff::Timestamp;

use crate::core::model::MessageId;

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
