//! The update pump core, free of grammers: it takes domain-level updates from an
//! [`UpdateSource`], decides what each one means for the runtime, and hands the result to a
//! [`Sink`]. The grammers adaptor (`mod.rs`) implements the source and the look-ups; tests
//! drive this core with scripted fakes (tests/pump.rs).
//!
//! What it guarantees:
//! - **No update lost**: the source is polled by one reader task that is never cancelled in
//!   the middle of a call (grammers takes a batch off its channel and then awaits a session
//!   write before buffering it; cancelling there drops the batch). Stopping closes the source
//!   instead, and the reader drains what it holds. The reader also saves the update state,
//!   between calls, every [`SAVE_EVERY`] and when it ends.
//! - **One ordered queue per account**: new messages from others, the owner's own messages,
//!   edits and deletions all pass through one admission task in arrival order, so during
//!   catch-up the owner's earlier answer cancels what it should, and an older inbound message
//!   never starts a plan in a chat the owner has answered since.
//! - **Own sends are ours**: outgoing messages are checked against the [`SentLedger`]
//!   (the echo of a send in flight, by its text; recorded ids, persisted across restarts): the
//!   owner's own message written during a send is still the owner's.
//! - **Supervision**: a panic while admitting one update is logged and that update skipped;
//!   a panic or end of the reader reopens the source with backoff; a channel whose
//!   difference keeps failing is dropped from catch-up after [`CHANNEL_FAILURE_LIMIT`] tries.
//! - **Flood waits are the method's, not the channel's**: Telegram's FLOOD_WAIT on
//!   `getChannelDifference` holds for every channel. A wait up to
//!   [`PumpOptions::channel_wait_limit`] (always above the library's own auto-sleep) is
//!   waited out; a longer one drops the channel that met it (so a single gap stops holding
//!   everything) and opens a flood window: a channel whose difference meets the same wait
//!   inside that window is not dropped, the reader waits for the window to close.
//! - **Stop is prompt**: the reader's backoff (a flood wait can last minutes) ends at once
//!   on stop, and the update state is saved before the reader ends.
//!
//! It must not plan, send, or sleep on the real clock: time goes through `clock`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::adapters::mtproto::sent::SentLedger;
use crate::core::model::{Chat, ChatId, Message, MessageId, TelegramError};
use crate::core::time::BoxFuture;
use crate::ports::backoff::Backoff;
use crate::ports::clock::{self, SharedClock};
pub use crate::ports::updates::Sink;

/// Reopening a failed source: the project's one backoff (exponential from 2 s, capped at
/// 5 minutes, full jitter).
pub(crate) const RESTART_BACKOFF: Backoff =
    Backoff::new(Duration::from_secs(2), Duration::from_secs(300));
/// Pausing after a transient stream error on the same source (1 s doubling to 36 s).
pub(crate) const STREAM_ERROR_BACKOFF: Backoff =
    Backoff::new(Duration::from_secs(1), Duration::from_secs(36));

/// How often the reader saves the update state while updates flow.
pub const SAVE_EVERY: Duration = Duration::from_secs(60);
/// A channel whose difference fails this many times in a row is dropped from catch-up.
pub const CHANNEL_FAILURE_LIMIT: u32 = 3;
/// The least [`PumpOptions::channel_wait_limit`]: a channel difference's flood wait up to
/// this long is waited out; a longer one drops the channel from catch-up (waiting would
/// hold every other update, DMs included, behind it).
pub const CHANNEL_WAIT_LIMIT: Duration = Duration::from_secs(60);

/// How long a flood wait on a channel's difference may be waited out, given how long the
/// library sleeps on a flood wait by itself (`auto_sleep`): every wait that reaches the pump
/// got past that sleep, so the limit is always well above it (at least
/// [`CHANNEL_WAIT_LIMIT`], at least twice the auto-sleep).
pub fn channel_wait_limit(auto_sleep: Duration) -> Duration {
    CHANNEL_WAIT_LIMIT.max(auto_sleep.saturating_mul(2))
}
/// A channel dropped from catch-up is read again from its history, one channel per this
/// interval (the first one this long after it was dropped).
pub const REFETCH_EVERY: Duration = Duration::from_secs(60);
/// How many of a dropped channel's newest messages that read takes.
pub const REFETCH_LIMIT: usize = 50;

/// A new or edited message, mapped into the domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incoming {
    pub chat: Chat,
    pub message: Message,
    /// The account is addressed (mentioned, replied to, named).
    pub callout: bool,
    /// A sticker whose message names its set by id (id, access hash): enrichment resolves
    /// the set's short name.
    pub sticker_set_id: Option<(i64, i64)>,
}

/// What the source delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TgUpdate {
    NewMessage(Incoming),
    /// The text (or media) of a message changed (reaction and view changes are not edits).
    Edited(Incoming),
    /// Messages were deleted; DMs and basic groups name no chat.
    Deleted {
        chat: Option<ChatId>,
        ids: Vec<MessageId>,
    },
    /// A basic group became a supergroup.
    Migrated {
        from: ChatId,
        to: ChatId,
    },
}

/// Why the source could not deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceError {
    /// The connection is gone (stopped, or the pool died): reopen or end.
    Closed,
    /// The session is dead: stop the agent.
    Unauthorized(String),
    /// Try again after a pause; `channel` names the channel whose difference failed, if any
    /// (bare id); `retry_after` is Telegram's own wait (a flood wait); `permanent`: the
    /// channel's difference will never succeed (CHANNEL_INVALID and the like).
    Transient {
        reason: String,
        channel: Option<i64>,
        retry_after: Option<Duration>,
        permanent: bool,
    },
}

impl SourceError {
    /// A transient failure with no channel attached and no wait asked.
    pub fn transient(reason: impl Into<String>) -> SourceError {
        SourceError::Transient {
            reason: reason.into(),
            channel: None,
            retry_after: None,
            permanent: false,
        }
    }
}

/// Why the update state could not be written to the session (the reader logs it and goes
/// on; the next save tries again).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SaveError(pub Box<dyn std::error::Error + Send + Sync>);

impl SaveError {
    /// The failure of the session write, kept whole.
    pub fn of(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SaveError {
        SaveError(e.into())
    }
}

/// Where updates come from (grammers' update stream in production, a script in tests).
pub trait UpdateSource: Send + 'static {
    /// The next update; `Ok(None)` for one the daemon does not handle.
    fn next(&mut self) -> BoxFuture<'_, Result<Option<TgUpdate>, SourceError>>;
    /// Writes the update state to the session.
    fn save_state(&mut self) -> BoxFuture<'_, Result<(), SaveError>>;
    /// Gives up the difference of a channel (bare id) that keeps failing, so other updates
    /// flow again: ends it in the library and drops it from the saved update state.
    fn skip_channel(&mut self, channel: i64) -> BoxFuture<'_, ()>;
}

/// Opens sources and closes them (stopping the pump closes the current one, which makes
/// the reader's `next` end once it has handed over what it holds).
pub trait SourceFactory: Send + Sync + 'static {
    fn open(&self) -> BoxFuture<'_, Result<Box<dyn UpdateSource>, SourceError>>;
    fn close(&self);
}

/// The look-ups admission needs (cached by the implementation).
pub trait Lookups: Send + Sync + 'static {
    fn is_blocked(&self, user: i64) -> BoxFuture<'_, bool>;
    fn is_muted(&self, chat: ChatId) -> BoxFuture<'_, bool>;
    /// Fills what the update left out (a sticker set's short name, say). Must not fail.
    fn enrich<'a>(&'a self, incoming: &'a mut Incoming) -> BoxFuture<'a, ()>;
    /// The newest `limit` messages of a chat, oldest first (how a channel dropped from
    /// catch-up is read again). A failure is logged by the pump and the chat is not retried.
    fn recent(
        &self,
        chat: ChatId,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<Incoming>, TelegramError>>;
}

/// The chat id of a channel given by its bare id (Bot API form, -100…).
pub fn channel_chat(bare: i64) -> ChatId {
    ChatId(-1_000_000_000_000 - bare)
}

/// Settings of the pump.
#[derive(Debug, Clone, Copy)]
pub struct PumpOptions {
    /// New messages older than this only join the history.
    pub max_catch_up_age: Duration,
    /// The longest flood wait on a channel's difference that is waited out (see
    /// [`channel_wait_limit`]).
    pub channel_wait_limit: Duration,
}

/// How a pump run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PumpEnd {
    Stopped,
    Unauthorized(String),
}

/// Everything the pump works with.
#[derive(Clone)]
pub struct Pump {
    pub agent: String,
    pub factory: Arc<dyn SourceFactory>,
    pub lookups: Arc<dyn Lookups>,
    pub sink: Arc<dyn Sink>,
    pub ledger: Arc<SentLedger>,
    pub clock: SharedClock,
    pub opts: PumpOptions,
}

enum ReaderEnd {
    Closed,
    Unauthorized(String),
}

impl Pump {
    /// Runs until `stop` (or a dead session): opens the source, pumps it, and reopens it
    /// with backoff when it ends or its reader panics.
    pub async fn run(self, stop: CancellationToken) -> PumpEnd {
        let (tx, rx) = mpsc::unbounded_channel::<TgUpdate>();
        let admission = tokio::spawn(self.clone().admit(rx));
        let (dropped_tx, dropped_rx) = mpsc::unbounded_channel::<i64>();
        let refetch = tokio::spawn(self.clone().refetch(dropped_rx, tx.clone(), stop.clone()));
        let mut restarts: u32 = 0;
        let end = loop {
            if stop.is_cancelled() {
                break PumpEnd::Stopped;
            }
            let source = tokio::select! {
                () = stop.cancelled() => break PumpEnd::Stopped,
                s = self.factory.open() => s,
            };
            let outcome = match source {
                Ok(source) => {
                    let reader = tokio::spawn(self.clone().read(
                        source,
                        tx.clone(),
                        dropped_tx.clone(),
                        stop.clone(),
                    ));
                    let closer = {
                        let (stop, factory) = (stop.clone(), Arc::clone(&self.factory));
                        let done = CancellationToken::new();
                        let d = done.clone();
                        tokio::spawn(async move {
                            tokio::select! {
                                () = stop.cancelled() => factory.close(),
                                () = d.cancelled() => {}
                            }
                        });
                        done
                    };
                    let joined = reader.await;
                    closer.cancel();
                    match joined {
                        Ok(ReaderEnd::Unauthorized(reason)) => {
                            break PumpEnd::Unauthorized(reason);
                        }
                        Ok(ReaderEnd::Closed) if stop.is_cancelled() => break PumpEnd::Stopped,
                        Ok(ReaderEnd::Closed) => "the connection ended".to_string(),
                        Err(e) if e.is_panic() => "the update reader panicked".to_string(),
                        Err(e) => e.to_string(),
                    }
                }
                Err(SourceError::Unauthorized(reason)) => break PumpEnd::Unauthorized(reason),
                Err(SourceError::Closed) => "the connection is closed".to_string(),
                Err(SourceError::Transient { reason, .. }) => reason,
            };
            restarts = restarts.saturating_add(1);
            let backoff = restart_backoff(restarts);
            tracing::warn!(agent = %self.agent, reason = %outcome, restart = restarts, backoff_secs = backoff.as_secs(), "update pump restarting");
            tokio::select! {
                () = stop.cancelled() => break PumpEnd::Stopped,
                () = clock::pause(self.clock.as_ref(), backoff) => {}
            }
        };
        drop(dropped_tx);
        // What the refetch already forwarded is admitted below; a read still waiting is
        // given up with the run.
        refetch.abort();
        let _ = refetch.await;
        drop(tx);
        // Admission hands over everything the reader forwarded before it ends.
        let _ = admission.await;
        if let PumpEnd::Unauthorized(reason) = &end {
            self.sink.unauthorized(reason);
        }
        end
    }

    /// The reader: polls the source (never cancelled mid-call), forwards every update in
    /// order, saves the update state between calls and when it ends, and skips channels
    /// that keep failing. Its backoff pauses end at once on `stop`.
    async fn read(
        self,
        mut source: Box<dyn UpdateSource>,
        tx: mpsc::UnboundedSender<TgUpdate>,
        dropped: mpsc::UnboundedSender<i64>,
        stop: CancellationToken,
    ) -> ReaderEnd {
        let mut last_save = self.clock.now();
        let mut failures: u32 = 0;
        let mut channels = ChannelFailures::default();
        let end = loop {
            match source.next().await {
                Ok(update) => {
                    failures = 0;
                    channels.counts.clear();
                    if let Some(update) = update {
                        // The receiver lives as long as the pump; a send error means the
                        // pump is gone anyway.
                        let _ = tx.send(update);
                    }
                    let now = self.clock.now();
                    if now.duration_since(last_save).as_secs() >= SAVE_EVERY.as_secs() as i64 {
                        self.save(source.as_mut()).await;
                        last_save = now;
                    }
                }
                Err(SourceError::Closed) => break ReaderEnd::Closed,
                Err(SourceError::Unauthorized(reason)) => break ReaderEnd::Unauthorized(reason),
                Err(SourceError::Transient {
                    reason,
                    channel,
                    retry_after,
                    permanent,
                }) => {
                    let mut flood = None;
                    if let Some(channel) = channel {
                        let now = self.clock.now();
                        let limit = self.opts.channel_wait_limit;
                        match channels.step(channel, retry_after, permanent, now, limit) {
                            ChannelStep::Drop(tries) => {
                                tracing::warn!(agent = %self.agent, channel, tries, reason = %reason, "channel difference failed; dropping the channel from catch-up (its newest messages are read from its history later)");
                                source.skip_channel(channel).await;
                                let _ = dropped.send(channel);
                                continue;
                            }
                            ChannelStep::Wait(wait) => {
                                tracing::info!(agent = %self.agent, channel, wait_secs = wait.as_secs(), reason = %reason, "channel differences are flood-limited; waiting it out (the channel stays in catch-up)");
                                flood = Some(wait);
                            }
                            ChannelStep::Retry => {}
                        }
                    }
                    failures = failures.saturating_add(1);
                    // Telegram's own wait (a flood wait) wins over a shorter backoff.
                    let backoff = STREAM_ERROR_BACKOFF
                        .delay(failures)
                        .max(retry_after.unwrap_or_default())
                        .max(flood.unwrap_or_default());
                    tracing::warn!(agent = %self.agent, error = %reason, retry_in_secs = backoff.as_secs(), "update stream error");
                    tokio::select! {
                        () = stop.cancelled() => break ReaderEnd::Closed,
                        () = clock::pause(self.clock.as_ref(), backoff) => {}
                    }
                }
            }
        };
        self.save(source.as_mut()).await;
        end
    }

    /// Reads channels dropped from catch-up again from their history: one channel per
    /// [`REFETCH_EVERY`], its newest [`REFETCH_LIMIT`] messages, each through admission like
    /// any other update (old ones become history, handled ones are not planned again).
    async fn refetch(
        self,
        mut dropped: mpsc::UnboundedReceiver<i64>,
        tx: mpsc::UnboundedSender<TgUpdate>,
        stop: CancellationToken,
    ) {
        let mut pending: std::collections::VecDeque<i64> = std::collections::VecDeque::new();
        loop {
            if pending.is_empty() {
                match dropped.recv().await {
                    Some(channel) => pending.push_back(channel),
                    None => return,
                }
            }
            while let Ok(more) = dropped.try_recv() {
                if !pending.contains(&more) {
                    pending.push_back(more);
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = clock::pause(self.clock.as_ref(), REFETCH_EVERY) => {}
            }
            let Some(channel) = pending.pop_front() else {
                continue;
            };
            let chat = channel_chat(channel);
            match self.lookups.recent(chat, REFETCH_LIMIT).await {
                Ok(messages) => {
                    tracing::info!(agent = %self.agent, chat = %chat, messages = messages.len(), "channel dropped from catch-up read again from its history");
                    for m in messages {
                        let _ = tx.send(TgUpdate::NewMessage(m));
                    }
                }
                Err(e) => {
                    tracing::warn!(agent = %self.agent, chat = %chat, error = %e, "could not read a channel dropped from catch-up; its missed messages stay unread");
                }
            }
        }
    }

    async fn save(&self, source: &mut dyn UpdateSource) {
        if let Err(e) = source.save_state().await {
            tracing::warn!(agent = %self.agent, error = %e, "could not save the update state");
        }
    }

    /// The admission task: one ordered queue for everything the reader forwards. It takes
    /// what is queued as one batch, so an inbound message followed in the batch by the
    /// owner's own message in that chat (catch-up) joins the history without a plan. Each
    /// update is admitted in its own task so a panic skips that update only.
    async fn admit(self, mut rx: mpsc::UnboundedReceiver<TgUpdate>) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            let answered = self.answered_later(&batch);
            for (update, answered) in batch.into_iter().zip(answered) {
                let this = self.clone();
                let step = tokio::spawn(async move { this.admit_one(update, answered).await });
                if let Err(e) = step.await {
                    tracing::error!(agent = %self.agent, error = %e, "admitting an update failed; it is skipped");
                }
            }
        }
    }

    /// For each update of a batch: whether the owner writes in its chat later in the batch.
    fn answered_later(&self, batch: &[TgUpdate]) -> Vec<bool> {
        let mut owner_chats = std::collections::HashSet::new();
        let mut out = vec![false; batch.len()];
        for (i, update) in batch.iter().enumerate().rev() {
            if let TgUpdate::NewMessage(m) = update {
                out[i] = owner_chats.contains(&m.chat.id);
                if m.message.outgoing && !self.ledger.is_own_message(&m.message) {
                    owner_chats.insert(m.chat.id);
                }
            }
        }
        out
    }

    /// Decides what one update means. `answered_later`: the owner's own message in the same
    /// chat is already queued behind this one.
    pub(crate) async fn admit_one(&self, update: TgUpdate, answered_later: bool) {
        match update {
            TgUpdate::NewMessage(mut incoming) => {
                let chat_id = incoming.chat.id;
                if incoming.message.outgoing {
                    if self.ledger.is_own_message(&incoming.message) {
                        self.sink.own_sent(&incoming.chat, &incoming.message);
                    } else {
                        // The owner typed this on another device: a person took over.
                        self.sink.owner_wrote(incoming.chat, incoming.message);
                    }
                    return;
                }
                if self.lookups.is_blocked(incoming.message.sender.id).await {
                    return;
                }
                self.lookups.enrich(&mut incoming).await;
                let age = self.clock.now().duration_since(incoming.message.date);
                let fresh = age.as_secs() < self.opts.max_catch_up_age.as_secs() as i64;
                let wanted = incoming.callout || !self.lookups.is_muted(chat_id).await;
                self.sink.inbound_addressed(
                    incoming.chat,
                    incoming.message,
                    fresh && wanted && !answered_later,
                    incoming.callout,
                );
            }
            TgUpdate::Edited(incoming) => {
                if incoming.message.outgoing
                    || self.lookups.is_blocked(incoming.message.sender.id).await
                {
                    return;
                }
                self.sink.edited(incoming.chat, incoming.message);
            }
            TgUpdate::Deleted { chat, ids } => self.sink.deleted(chat, ids),
            TgUpdate::Migrated { from, to } => self.sink.migrated(from, to),
        }
    }
}

/// What the reader does about a failed channel difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChannelStep {
    /// Drop the channel from catch-up (after this many tries).
    Drop(u32),
    /// A flood wait of the method: wait this long, keep the channel.
    Wait(Duration),
    /// Count the failure and try again after the usual backoff.
    Retry,
}

/// The reader's memory of failed channel differences: failures in a row per channel, and
/// the flood window of the method (Telegram's FLOOD_WAIT on `getChannelDifference` holds for
/// every channel, so it is no channel's fault).
#[derive(Default)]
struct ChannelFailures {
    counts: HashMap<i64, u32>,
    flood_until: Option<jiff::Timestamp>,
}

impl ChannelFailures {
    fn step(
        &mut self,
        channel: i64,
        retry_after: Option<Duration>,
        permanent: bool,
        now: jiff::Timestamp,
        limit: Duration,
    ) -> ChannelStep {
        if permanent {
            let tries = self.counts.remove(&channel).unwrap_or(0) + 1;
            return ChannelStep::Drop(tries);
        }
        if let Some(wait) = retry_after {
            if let Some(until) = self.flood_until
                && until > now
            {
                // Tried while the method's flood wait runs: the same wait, not this
                // channel's failure.
                let left = until.duration_since(now).unsigned_abs();
                return ChannelStep::Wait(left.max(Duration::from_secs(1)));
            }
            self.flood_until = Some(crate::core::time::add(now, wait));
            if wait <= limit {
                return ChannelStep::Wait(wait);
            }
            let tries = self.counts.remove(&channel).unwrap_or(0) + 1;
            return ChannelStep::Drop(tries);
        }
        let n = self.counts.entry(channel).or_insert(0);
        *n += 1;
        if *n >= CHANNEL_FAILURE_LIMIT {
            let tries = *n;
            self.counts.remove(&channel);
            return ChannelStep::Drop(tries);
        }
        ChannelStep::Retry
    }
}

/// Backoff before reopening the source (see [`RESTART_BACKOFF`]): full jitter up to 2, 4, 8, ... s, at most 5 minutes.
pub(crate) fn restart_backoff(restarts: u32) -> Duration {
    RESTART_BACKOFF.delay(restarts)
}
