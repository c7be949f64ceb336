//! The send governor: it owns the pacing and the refusals of one account's outbound
//! messages, for account safety (reliability notes §3). It must not retry failed calls (a
//! backend error goes back to the caller unchanged), must not know about graphs, tasks or
//! agents, and never touches tokio's timer. The daemon wraps each agent's backend in one
//! [`Governor`] (`Governor::new(backend, clock, config)`) before handing it to the runtime,
//! so handlers reach Telegram only through it; one governor serves exactly one account.
//!
//! Every text, sticker, voice note and album item is first checked against the first-contact rule (no first message
//! into a chat where nobody wrote to us; the account's own Saved Messages are exempt), then given a send slot that keeps the per-chat
//! gap, the per-chat rate and the per-account budget. A short wait is slept on the project
//! clock with [`clock::pause`] (so a task's hold on a virtual clock is given up meanwhile);
//! a wait over [`GovernorConfig::max_wait`] is refused with a typed, transient
//! [`TelegramError::FloodWait`], and the task retry machinery decides what happens next.
//! Reactions, read marks, history, downloads and the rest pass through unpaced; typing
//! indicators (and "recording voice", sharing their slot) are thinned to one per chat per
//! [`GovernorConfig::typing_min_gap`]. Each sleep
//! is logged at INFO and each refusal at WARN, with the chat id and the reason as fields.
//!
//! Send slots are reserved under a lock *before* sleeping, so chats sending concurrently
//! cannot overbook the account budget. A reserved slot is never given back, even if the call
//! then fails or is cancelled: a failed send may still have reached Telegram, and erring on
//! the slow side is the point of this module.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use jiff::Timestamp;

use crate::core::model::{
    Chat, ChatId, Message, MessageId, OutgoingMedia, OutgoingSticker, OutgoingText, OutgoingVoice,
    StickerChoice, TelegramError, TgResult,
};
use crate::core::time::BoxFuture;
use crate::ports::clock::{self, SharedClock};
use crate::ports::telegram::Telegram;

/// The length of the sliding window the per-minute limits count in.
pub(crate) const WINDOW: Duration = Duration::from_secs(60);

/// What to do with a message into a chat where nobody has written to us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FirstContact {
    /// Refuse it permanently ([`TelegramError::Invalid`]: the plan is dropped, the chat stays usable). The default.
    #[default]
    Refuse,
    /// Send it (for tests and trusted setups only).
    Allow,
}

/// The governor's limits. The defaults follow the policy in the reliability notes §3.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GovernorConfig {
    /// Minimum time between two of our messages (text or sticker) in one chat. Default 3 s;
    /// zero disables the gap.
    pub chat_min_gap: Duration,
    /// At most this many of our messages in one chat in any 60 s window. Default 10; zero
    /// disables the limit.
    pub chat_per_minute: u32,
    /// At most this many messages from the account, all chats together, in any 60 s window.
    /// Default 20; zero disables the limit.
    pub account_per_minute: u32,
    /// The longest wait the governor sleeps itself. A message that would have to wait longer
    /// is refused with [`TelegramError::FloodWait`] carrying the wait. Default 60 s.
    pub max_wait: Duration,
    /// The first-contact rule. Default [`FirstContact::Refuse`].
    pub first_contact: FirstContact,
    /// How many of the newest messages the first-contact check reads. Default 50 (at least 1
    /// is always read).
    pub contact_history: usize,
    /// A chat found not contacted is checked again (one history call) at most this often;
    /// in between, messages into it are refused from the cache. Default 60 s. A history
    /// fetch through the governor that shows someone else's message marks the chat
    /// contacted at once.
    pub contact_recheck: Duration,
    /// At most one typing action per chat in this interval; extra ones are dropped silently
    /// (they answer `Ok`, the indicator is still showing). Default 4 s (Telegram shows it for
    /// about 5 s); zero lets every one through.
    pub typing_min_gap: Duration,
}

impl Default for GovernorConfig {
    fn default() -> Self {
        GovernorConfig {
            chat_min_gap: Duration::from_secs(3),
            chat_per_minute: 10,
            account_per_minute: 20,
            max_wait: Duration::from_secs(60),
            first_contact: FirstContact::Refuse,
            contact_history: 50,
            contact_recheck: Duration::from_secs(60),
            typing_min_gap: Duration::from_secs(4),
        }
    }
}

/// Counters since the governor was made (read-only, for tests and status output).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GovernorStats {
    /// Messages held back by a pacing sleep.
    pub sleeps: u64,
    /// Total time of those sleeps.
    pub slept: Duration,
    /// Messages refused, for any reason (pacing or first contact).
    pub refusals: u64,
    /// Of `refusals`, those refused by the first-contact rule.
    pub first_contact_refusals: u64,
    /// Typing actions dropped by the typing limit.
    pub typing_dropped: u64,
}

/// Which limit decided a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    ChatGap,
    ChatRate,
    AccountBudget,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::ChatGap => "chat_min_gap",
            Reason::ChatRate => "chat_per_minute",
            Reason::AccountBudget => "account_per_minute",
        }
    }
}

/// What is known about whether someone wrote to us in a chat.
#[derive(Debug, Clone, Copy, Default)]
enum Contact {
    #[default]
    Unknown,
    /// Someone else's message was seen; this never reverts.
    Contacted,
    /// The history had nothing from anyone else at `checked`.
    NotContacted { checked: Timestamp },
}

#[derive(Debug, Default)]
struct ChatState {
    /// Reserved send instants (past or future), sorted.
    sends: Vec<Timestamp>,
    contact: Contact,
    last_typing: Option<Timestamp>,
    /// The chat refused a sticker (CHAT_SEND_STICKERS_FORBIDDEN, a Premium-only sticker):
    /// stickers into it go out as their name (an emoji) in text from now on.
    refuses_stickers: bool,
}

#[derive(Debug, Default)]
struct State {
    /// Reserved send instants of the whole account, sorted.
    account: Vec<Timestamp>,
    chats: HashMap<ChatId, ChatState>,
    stats: GovernorStats,
}

/// A [`Telegram`] backend with pacing and refusals in front of its sends.
pub struct Governor<T: ?Sized> {
    inner: Arc<T>,
    clock: SharedClock,
    /// The limits in force; a persona reload may change them ([`Governor::set_config`]).
    config: std::sync::RwLock<GovernorConfig>,
    state: Mutex<State>,
}

impl GovernorConfig {
    /// These limits with a persona's `# Send Limits` over them (each figure it sets wins).
    pub fn with_limits(mut self, limits: &crate::core::persona::SendLimits) -> GovernorConfig {
        if let Some(n) = limits.chat_per_minute {
            self.chat_per_minute = n;
        }
        if let Some(n) = limits.account_per_minute {
            self.account_per_minute = n;
        }
        if let Some(gap) = limits.chat_gap {
            self.chat_min_gap = gap;
        }
        self
    }
}

impl<T: Telegram + ?Sized> Governor<T> {
    /// Wraps `inner`; every wait is measured and slept on `clock`.
    pub fn new(inner: Arc<T>, clock: SharedClock, config: GovernorConfig) -> Governor<T> {
        Governor {
            inner,
            clock,
            config: std::sync::RwLock::new(config),
            state: Mutex::new(State::default()),
        }
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<T> {
        &self.inner
    }

    /// The limits in force.
    pub fn config(&self) -> GovernorConfig {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// New limits, from the next message on (a persona's `# Send Limits` changed).
    pub fn set_config(&self, config: GovernorConfig) {
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = config;
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> GovernorStats {
        self.lock().stats
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every update under this lock is a few plain assignments, so the state is usable
        // even after a panic elsewhere poisoned it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything a message must pass before it goes out: the first-contact rule, then a
    /// send slot (slept for, or refused when too far away).
    async fn admit(&self, chat: ChatId) -> TgResult<()> {
        self.check_first_contact(chat).await?;
        if let Some((wait, reason)) = self.reserve(chat)? {
            tracing::info!(
                chat = %chat,
                reason = reason.as_str(),
                wait_ms = wait.as_millis() as u64,
                "governor: holding a message back to keep the send limits"
            );
            clock::pause(&*self.clock, wait).await;
        }
        Ok(())
    }

    async fn check_first_contact(&self, chat: ChatId) -> TgResult<()> {
        // The account's own chat (Saved Messages, where the runtime alerts the owner) has no
        // one else in it and is no contact with anybody.
        if self.config().first_contact == FirstContact::Allow || chat.0 == self.inner.self_id() {
            return Ok(());
        }
        let now = self.clock.now();
        let cached = self
            .lock()
            .chats
            .get(&chat)
            .map(|c| c.contact)
            .unwrap_or_default();
        match cached {
            Contact::Contacted => return Ok(()),
            Contact::NotContacted { checked }
                if now < clock::add(checked, self.config().contact_recheck) =>
            {
                return Err(self.refuse_first_contact(chat, true));
            }
            Contact::NotContacted { .. } | Contact::Unknown => {}
        }
        let history = self
            .inner
            .fetch_history(chat, self.config().contact_history.max(1))
            .await?;
        let contacted = history.iter().any(|m| !m.outgoing);
        {
            let mut st = self.lock();
            let entry = st.chats.entry(chat).or_default();
            if contacted {
                entry.contact = Contact::Contacted;
            } else if !matches!(entry.contact, Contact::Contacted) {
                entry.contact = Contact::NotContacted { checked: now };
            }
        }
        if contacted {
            Ok(())
        } else {
            Err(self.refuse_first_contact(chat, false))
        }
    }

    fn refuse_first_contact(&self, chat: ChatId, cached: bool) -> TelegramError {
        {
            let mut st = self.lock();
            st.stats.refusals += 1;
            st.stats.first_contact_refusals += 1;
        }
        tracing::warn!(
            chat = %chat,
            reason = "first_contact",
            cached,
            "governor: refusing a message: nobody in this chat has written to us"
        );
        TelegramError::Invalid("no first messages: nobody in this chat has written to us".into())
    }

    /// Reserves the earliest send slot for `chat`. Returns the wait until it (`None` when
    /// the slot is now), or the refusal when that wait exceeds `max_wait`.
    fn reserve(&self, chat: ChatId) -> TgResult<Option<(Duration, Reason)>> {
        let now = self.clock.now();
        let cfg = &self.config();
        let result = {
            let mut guard = self.lock();
            let st = &mut *guard;
            let horizon = WINDOW.max(cfg.chat_min_gap);
            st.account.retain(|&t| clock::add(t, horizon) > now);
            let chat_state = st.chats.entry(chat).or_default();
            chat_state.sends.retain(|&t| clock::add(t, horizon) > now);
            let (slot, reason) = earliest_slot(now, &st.account, &chat_state.sends, cfg);
            let wait = Duration::try_from(slot.duration_since(now)).unwrap_or(Duration::ZERO);
            if wait > cfg.max_wait {
                st.stats.refusals += 1;
                Err((wait, reason))
            } else {
                insert_sorted(&mut chat_state.sends, slot);
                insert_sorted(&mut st.account, slot);
                match reason {
                    Some(reason) if !wait.is_zero() => {
                        st.stats.sleeps += 1;
                        st.stats.slept = st.stats.slept.saturating_add(wait);
                        Ok(Some((wait, reason)))
                    }
                    _ => Ok(None),
                }
            }
        };
        result.map_err(|(wait, reason)| {
            let secs = wait_secs(wait);
            tracing::warn!(
                chat = %chat,
                reason = reason.map_or("pacing", Reason::as_str),
                wait_secs = secs,
                max_wait_secs = cfg.max_wait.as_secs(),
                "governor: refusing a message: the send limits would need a longer wait than allowed"
            );
            TelegramError::FloodWait { secs }
        })
    }

    /// Takes the typing slot of `chat`; false when the last typing action is too recent.
    fn take_typing_slot(&self, chat: ChatId) -> (bool, Option<Timestamp>) {
        let now = self.clock.now();
        let mut st = self.lock();
        let entry = st.chats.entry(chat).or_default();
        let previous = entry.last_typing;
        let allowed = match previous {
            Some(last) => clock::add(last, self.config().typing_min_gap) <= now,
            None => true,
        };
        if allowed {
            entry.last_typing = Some(now);
        } else {
            st.stats.typing_dropped += 1;
        }
        (allowed, previous)
    }

    /// Learns from a history that passed through: someone else's message means contacted.
    fn observe_history(&self, chat: ChatId, history: &[Message]) {
        if history.iter().any(|m| !m.outgoing) {
            self.lock().chats.entry(chat).or_default().contact = Contact::Contacted;
        }
    }
}

/// A wait in whole seconds, rounded up, at least 1.
fn wait_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    secs.max(1)
}

fn insert_sorted(v: &mut Vec<Timestamp>, t: Timestamp) {
    let at = v.partition_point(|&x| x <= t);
    v.insert(at, t);
}

/// The earliest instant at or after `now` at which one more message into a chat keeps every
/// limit, given the reserved instants of the account and of that chat (both sorted), and the
/// limit that pushed it past `now` (`None` when it is `now`).
///
/// Every limit forbids open intervals around existing instants, so the answer is `now` or
/// the right end of one of them: some `e + WINDOW` or `c + chat_min_gap`. Reservations may
/// lie in the future and arrive out of order, so validity is checked on both sides.
fn earliest_slot(
    now: Timestamp,
    account: &[Timestamp],
    chat: &[Timestamp],
    cfg: &GovernorConfig,
) -> (Timestamp, Option<Reason>) {
    let mut candidates: Vec<(Timestamp, Option<Reason>)> = vec![(now, None)];
    if cfg.account_per_minute > 0 {
        candidates.extend(
            account
                .iter()
                .map(|&e| (clock::add(e, WINDOW), Some(Reason::AccountBudget))),
        );
    }
    if cfg.chat_per_minute > 0 {
        candidates.extend(
            chat.iter()
                .map(|&c| (clock::add(c, WINDOW), Some(Reason::ChatRate))),
        );
    }
    if !cfg.chat_min_gap.is_zero() {
        candidates.extend(
            chat.iter()
                .map(|&c| (clock::add(c, cfg.chat_min_gap), Some(Reason::ChatGap))),
        );
    }
    candidates.retain(|(t, _)| *t >= now);
    candidates.sort_by_key(|(t, _)| *t);
    let valid = |t: Timestamp| {
        window_allows(account, t, cfg.account_per_minute)
            && window_allows(chat, t, cfg.chat_per_minute)
            && gap_allows(chat, t, cfg.chat_min_gap)
    };
    for &(t, reason) in &candidates {
        if valid(t) {
            return (t, reason);
        }
    }
    // Unreachable in practice (the latest candidate is always valid); still, never panic.
    candidates.last().copied().unwrap_or((now, None))
}

/// Whether adding `t` to the sorted `points` keeps at most `limit` instants in every
/// half-open window of length [`WINDOW`], i.e. any `limit + 1` consecutive instants that
/// include `t` span at least the window. A zero limit allows everything.
fn window_allows(points: &[Timestamp], t: Timestamp, limit: u32) -> bool {
    let limit = limit as usize;
    if limit == 0 || points.len() < limit {
        return true;
    }
    let k = points.partition_point(|&x| x <= t);
    let mut merged = Vec::with_capacity(points.len() + 1);
    merged.extend_from_slice(&points[..k]);
    merged.push(t);
    merged.extend_from_slice(&points[k..]);
    // Groups of limit+1 consecutive instants containing index k start at i with
    // i <= k <= i + limit.
    let first = k.saturating_sub(limit);
    let last = k.min(merged.len().saturating_sub(limit + 1));
    (first..=last).all(|i| match (merged.get(i), merged.get(i + limit)) {
        (Some(&lo), Some(&hi)) => clock::add(lo, WINDOW) <= hi,
        _ => true,
    })
}

/// Whether `t` is at least `gap` away from every instant in `points`.
fn gap_allows(points: &[Timestamp], t: Timestamp, gap: Duration) -> bool {
    gap.is_zero()
        || points
            .iter()
            .all(|&c| clock::add(c, gap) <= t || clock::add(t, gap) <= c)
}

impl<T: Telegram + ?Sized> Telegram for Governor<T> {
    fn self_id(&self) -> i64 {
        self.inner.self_id()
    }

    fn chat(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Chat>> {
        self.inner.chat(chat)
    }

    fn send_text(&self, msg: OutgoingText) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            self.admit(msg.chat).await?;
            self.inner.send_text(msg).await
        })
    }

    fn send_sticker(&self, msg: OutgoingSticker) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            self.admit(msg.chat).await?;
            let refused = self
                .lock()
                .chats
                .get(&msg.chat)
                .is_some_and(|c| c.refuses_stickers);
            if !refused {
                match self.inner.send_sticker(msg.clone()).await {
                    Err(TelegramError::ContentRefused(reason)) => {
                        tracing::warn!(chat = %msg.chat, reason = %reason, "governor: the chat refuses this sticker; sending its name as text");
                        self.lock()
                            .chats
                            .entry(msg.chat)
                            .or_default()
                            .refuses_stickers = true;
                    }
                    other => return other,
                }
            }
            // The same idempotency key: the refused sticker created no message.
            self.inner
                .send_text(OutgoingText {
                    chat: msg.chat,
                    text: msg.sticker.name,
                    reply_to: msg.reply_to,
                    idempotency_key: msg.idempotency_key,
                })
                .await
        })
    }

    fn send_voice(&self, msg: OutgoingVoice) -> BoxFuture<'_, TgResult<Message>> {
        // Paced like any send; a refused voice goes back to the caller (ContentRefused), which
        // sends the same words as text.
        Box::pin(async move {
            self.admit(msg.chat).await?;
            self.inner.send_voice(msg).await
        })
    }

    fn send_media(&self, msg: OutgoingMedia) -> BoxFuture<'_, TgResult<Message>> {
        // Paced like any send (the first-contact rule included).
        Box::pin(async move {
            self.admit(msg.chat).await?;
            self.inner.send_media(msg).await
        })
    }

    fn react(&self, chat: ChatId, message: MessageId, emoji: &str) -> BoxFuture<'_, TgResult<()>> {
        let emoji = emoji.to_string();
        Box::pin(async move {
            match self.inner.react(chat, message, &emoji).await {
                Err(TelegramError::ContentRefused(reason)) => {
                    // A reaction the chat (or a non-Premium account) cannot use: skip it.
                    tracing::warn!(chat = %chat, reason = %reason, "governor: reaction refused; skipped");
                    Ok(())
                }
                other => other,
            }
        })
    }

    fn allowed_reactions(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Option<Vec<String>>>> {
        self.inner.allowed_reactions(chat)
    }

    fn typing(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        let (allowed, previous) = self.take_typing_slot(chat);
        if !allowed {
            tracing::debug!(chat = %chat, "governor: typing action dropped, one is still showing");
            return Box::pin(async { Ok(()) });
        }
        Box::pin(async move {
            let result = self.inner.typing(chat).await;
            if result.is_err() {
                // A failed indicator shows nothing: do not let it block the next one.
                self.lock().chats.entry(chat).or_default().last_typing = previous;
            }
            result
        })
    }

    fn recording_voice(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        // One chat action at a time: "recording voice" shares typing's slot.
        let (allowed, previous) = self.take_typing_slot(chat);
        if !allowed {
            tracing::debug!(chat = %chat, "governor: recording action dropped, one is still showing");
            return Box::pin(async { Ok(()) });
        }
        Box::pin(async move {
            let result = self.inner.recording_voice(chat).await;
            if result.is_err() {
                self.lock().chats.entry(chat).or_default().last_typing = previous;
            }
            result
        })
    }

    fn mark_read(&self, chat: ChatId, upto: MessageId) -> BoxFuture<'_, TgResult<()>> {
        self.inner.mark_read(chat, upto)
    }

    fn block(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        self.inner.block(chat)
    }

    fn set_online(&self, online: bool) -> BoxFuture<'_, TgResult<()>> {
        self.inner.set_online(online)
    }

    fn unblock(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        self.inner.unblock(chat)
    }

    fn chat_migrated(&self, from: ChatId, to: ChatId) {
        // The supergroup's own history starts empty, but people wrote in the group it was:
        // a plan moved there is no first contact.
        {
            let mut st = self.lock();
            let was = st.chats.get(&from).map(|c| c.contact).unwrap_or_default();
            if !matches!(was, Contact::NotContacted { .. }) {
                st.chats.entry(to).or_default().contact = Contact::Contacted;
            }
        }
        self.inner.chat_migrated(from, to);
    }

    fn delete_history(&self, chat: ChatId, for_both_sides: bool) -> BoxFuture<'_, TgResult<()>> {
        self.inner.delete_history(chat, for_both_sides)
    }

    fn fetch_history(&self, chat: ChatId, limit: usize) -> BoxFuture<'_, TgResult<Vec<Message>>> {
        Box::pin(async move {
            let history = self.inner.fetch_history(chat, limit).await?;
            self.observe_history(chat, &history);
            Ok(history)
        })
    }

    fn has_sticker(&self, choice: &StickerChoice) -> BoxFuture<'_, TgResult<bool>> {
        self.inner.has_sticker(choice)
    }

    fn sticker_set(
        &self,
        set: &str,
    ) -> BoxFuture<'_, TgResult<Vec<crate::core::model::SetSticker>>> {
        self.inner.sticker_set(set)
    }

    fn download_media(
        &self,
        chat: ChatId,
        message: MessageId,
        max_bytes: u64,
    ) -> BoxFuture<'_, TgResult<Vec<u8>>> {
        self.inner.download_media(chat, message, max_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn window_allows_exactly_the_limit_in_any_window() {
        let pts: Vec<Timestamp> = (0..3).map(t).collect();
        assert!(!window_allows(&pts, t(3), 3));
        assert!(window_allows(&pts, t(60), 3));
        assert!(!window_allows(&pts, t(59), 3));
        // A future reservation counts too: adding t(0) before t(10..12) is checked forward.
        let future: Vec<Timestamp> = (10..13).map(t).collect();
        assert!(!window_allows(&future, t(0), 3));
        assert!(window_allows(&future, t(-50), 3));
    }

    #[test]
    fn earliest_slot_takes_the_binding_limit() {
        let cfg = GovernorConfig::default();
        let (slot, reason) = earliest_slot(t(0), &[t(0)], &[t(0)], &cfg);
        assert_eq!((slot, reason), (t(3), Some(Reason::ChatGap)));
        let account: Vec<Timestamp> = (0..20).map(|_| t(0)).collect();
        let (slot, reason) = earliest_slot(t(1), &account, &[], &cfg);
        assert_eq!((slot, reason), (t(60), Some(Reason::AccountBudget)));
        let (slot, reason) = earliest_slot(t(1), &[], &[], &cfg);
        assert_eq!((slot, reason), (t(1), None));
    }

    #[test]
    fn wait_secs_rounds_up() {
        assert_eq!(wait_secs(Duration::from_millis(60_001)), 61);
        assert_eq!(wait_secs(Duration::from_secs(60)), 60);
        assert_eq!(wait_secs(Duration::ZERO), 1);
    }
}
