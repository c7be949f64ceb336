//! The group port: what the `classify` task asks of the group decision pipeline. The
//! admission chain's group gates (`ingress`) implement it; the runtime's `classify` handler
//! calls it, so the classifier call runs as a task of the conversation's graph (started,
//! persisted, supervised and paused like any other) instead of beside the runtime.

use std::sync::Arc;

use crate::core::admission::GroupOutcome;
use crate::core::model::{Chat, MessageId};
use crate::core::time::BoxFuture;

/// Classifies a group chat's pending batch for one agent.
pub trait GroupClassifier: Send + Sync {
    /// One classifier call for the chat's pending batch, whose newest message is `newest`,
    /// and what it decided. Never fails: a failed call decides [`GroupOutcome::Nothing`].
    fn classify<'a>(
        &'a self,
        agent: &'a str,
        chat: &'a Chat,
        newest: MessageId,
    ) -> BoxFuture<'a, GroupOutcome>;
}

pub(crate) type SharedGroups = Arc<dyn GroupClassifier>;
