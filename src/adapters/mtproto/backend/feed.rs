//! What our own calls tell grammers' update machinery: `messages.deleteHistory` and
//! `messages.readMentions` answer with `AffectedHistory` (a pts and pts_count), which
//! grammers 0.11 does not recognise as updates (its sender only feeds `AffectedMessages`
//! answers to the update channel), so the next update would look like a gap and cost a
//! getDifference. The backend hands such a pts to the update channel itself, as the
//! `UpdatesLike::AffectedMessages` (or, for a channel, `AffectedChannelMessages`) grammers
//! itself would have made. The channel is held weakly: it closes when the pool's relay ends.

use std::sync::PoisonError;

use grammers_client::session::updates::UpdatesLike;
use grammers_client::tl;
use tokio::sync::mpsc;

use super::MtprotoTelegram;

impl MtprotoTelegram {
    /// Feeds the pts our own calls report into `updates` (the channel grammers' update
    /// stream reads) from now on.
    pub fn feed_updates_to(&self, updates: &mpsc::Sender<UpdatesLike>) {
        *self
            .update_feed
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(updates.downgrade());
    }

    /// Feeds the weak end of a pool's update relay (see [`MtprotoTelegram::feed_updates_to`]).
    pub(crate) fn feed_updates_weak(&self, updates: mpsc::WeakSender<UpdatesLike>) {
        *self
            .update_feed
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(updates);
    }

    /// Hands the pts of an `AffectedHistory` answer to grammers' update machinery
    /// (`channel`: the supergroup whose pts it is, else the account's common pts).
    pub(crate) fn feed_affected(&self, channel: Option<i64>, pts: i32, pts_count: i32) {
        let feed = self
            .update_feed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(mpsc::WeakSender::upgrade);
        let Some(feed) = feed else {
            return;
        };
        let affected = tl::types::messages::AffectedMessages { pts, pts_count };
        let update = match channel {
            Some(channel_id) => UpdatesLike::AffectedChannelMessages {
                affected,
                channel_id,
                message_ids: Vec::new(),
            },
            None => UpdatesLike::AffectedMessages(affected),
        };
        if let Err(e) = feed.try_send(update) {
            tracing::debug!(error = %e, "could not hand a pts to the update stream");
        }
    }
}
