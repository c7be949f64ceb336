//! Call-level recovery rules of the send path, free of grammers so they are tested offline
//! with fakes: an unknown peer is learnt once and the call retried; a history deletion is
//! repeated until Telegram reports nothing left; rejected entities fall back to plain text;
//! a rejected reaction is retried with its emoji presentation selector toggled. The backend
//! wraps its raw calls in these; they never sleep and never log secrets.

use std::future::Future;

use crate::core::model::{ChatId, TelegramError, TgResult};
use crate::core::time::BoxFuture;

/// A failed call, split by whether learning the peer could help.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// PEER_ID_INVALID, or no access hash cached: fetch the peer and try once more.
    UnknownPeer(TelegramError),
    /// Text entities were rejected (ENTITY_*, bad URL): send the text without them.
    BadEntities(TelegramError),
    /// The reaction was rejected (REACTION_INVALID): try its other spelling.
    BadReaction(TelegramError),
    Other(TelegramError),
}

impl CallError {
    pub(crate) fn into_error(self) -> TelegramError {
        match self {
            CallError::UnknownPeer(e)
            | CallError::BadEntities(e)
            | CallError::BadReaction(e)
            | CallError::Other(e) => e,
        }
    }
}

impl From<TelegramError> for CallError {
    fn from(e: TelegramError) -> Self {
        CallError::Other(e)
    }
}

/// Whether an RPC error name means the text entities (or a link in them) were rejected.
pub fn is_entity_error(name: &str) -> bool {
    name.starts_with("ENTITY_")
        || name.starts_with("ENTITIES_")
        || matches!(
            name,
            "URL_INVALID" | "ENTITY_BOUNDS_INVALID" | "BUTTON_URL_INVALID"
        )
}

/// Whether an RPC error name means the peer is not known to this session.
pub fn is_unknown_peer(name: &str) -> bool {
    matches!(
        name,
        "PEER_ID_INVALID"
            | "USER_ID_INVALID"
            | "CHAT_ID_INVALID"
            | "INPUT_USER_DEACTIVATED_MIN"
            // A supergroup or channel without (a valid) access hash.
            | "CHANNEL_INVALID"
    )
}

/// Learns a peer's access hash (from a message it sent, or the first dialogs page).
pub trait PeerLearner: Send + Sync {
    /// True when the peer is now cached.
    fn learn_peer(&self, chat: ChatId) -> BoxFuture<'_, bool>;
}

/// Runs `op`; when it fails because the peer is unknown, learns the peer and runs it once
/// more. Only then does the error stand.
pub async fn with_peer_retry<T, F, Fut>(
    learner: &dyn PeerLearner,
    chat: ChatId,
    mut op: F,
) -> Result<T, CallError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, CallError>>,
{
    match op().await {
        Err(CallError::UnknownPeer(e)) => {
            if learner.learn_peer(chat).await {
                op().await
            } else {
                Err(CallError::UnknownPeer(e))
            }
        }
        other => other,
    }
}

/// Sends with entities first, and the same text without them when Telegram rejects the
/// entities. `op(true)` sends with entities.
pub async fn with_entity_fallback<T, F, Fut>(mut op: F) -> Result<T, CallError>
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = Result<T, CallError>>,
{
    match op(true).await {
        Err(CallError::BadEntities(_)) => op(false).await,
        other => other,
    }
}

/// Most rounds of `messages.deleteHistory` for one chat (each round deletes up to ~100k).
pub const MAX_DELETE_ROUNDS: usize = 1000;

/// Repeats a history deletion while Telegram reports an `offset > 0` (more left to
/// delete). `round` returns that offset.
pub async fn delete_all<F, Fut>(mut round: F) -> TgResult<usize>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = TgResult<i32>>,
{
    for n in 1..=MAX_DELETE_ROUNDS {
        if round().await? <= 0 {
            return Ok(n);
        }
    }
    Err(TelegramError::Other(format!(
        "history still not empty after {MAX_DELETE_ROUNDS} deletion rounds"
    )))
}

const VS16: char = '\u{FE0F}';

/// The other spelling of a reaction emoji: with U+FE0F stripped when it has one, with it
/// added when it has none (Telegram's reaction list spells some emoji each way, e.g. "❤"
/// vs "❤️"). `None` when there is no other spelling to try.
pub fn reaction_variant(emoji: &str) -> Option<String> {
    if emoji.contains(VS16) {
        Some(emoji.chars().filter(|c| *c != VS16).collect())
    } else {
        let mut chars = emoji.chars();
        let first = chars.next()?;
        // Only a single base character takes a selector (not ZWJ sequences or flags).
        if chars.next().is_some() || first.is_ascii() {
            return None;
        }
        Some(format!("{first}{VS16}"))
    }
}

/// Whether a chat is muted at `now` (unix seconds): its own setting when it has one (a
/// `mute_until` of 0 means explicitly unmuted), else the account's global setting for chats
/// of its kind.
pub fn muted(chat_until: Option<i32>, global_until: Option<i32>, now: i64) -> bool {
    match chat_until {
        Some(until) => i64::from(until) > now,
        None => global_until.is_some_and(|until| i64::from(until) > now),
    }
}

/// A small look-up cache on the project clock: answers are kept for `ok_ttl`. A failed
/// look-up (a flood wait) is not tried again for `fail_ttl`, and meanwhile the last known
/// answer stands (`None`, the caller's fail-open answer, only when none is known). At most
/// `cap` keys; the oldest entries go first.
pub struct Memo<K, V> {
    entries: std::sync::Mutex<std::collections::HashMap<K, MemoEntry<V>>>,
    ok_ttl: std::time::Duration,
    fail_ttl: std::time::Duration,
    cap: usize,
    clock: crate::ports::clock::SharedClock,
}

/// One key of a [`Memo`]: when it was last settled, the last known answer, and whether the
/// last look-up failed.
struct MemoEntry<V> {
    at: jiff::Timestamp,
    value: Option<V>,
    failed: bool,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Memo<K, V> {
    pub fn new(
        clock: crate::ports::clock::SharedClock,
        ok_ttl: std::time::Duration,
        fail_ttl: std::time::Duration,
        cap: usize,
    ) -> Self {
        Memo {
            entries: std::sync::Mutex::new(std::collections::HashMap::new()),
            ok_ttl,
            fail_ttl,
            cap: cap.max(1),
            clock,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<K, MemoEntry<V>>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached answer, or `fetch`'s. When the look-up fails now or failed recently, the
    /// last known answer (`None` when there is none).
    pub async fn get<F, Fut, E>(&self, key: K, fetch: F) -> Option<V>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
        E: std::fmt::Display,
    {
        let now = self.clock.now();
        let known = match self.lock().get(&key) {
            Some(entry) => {
                let ttl = if entry.failed {
                    self.fail_ttl
                } else {
                    self.ok_ttl
                };
                if now.duration_since(entry.at).as_secs() < ttl.as_secs() as i64 {
                    return entry.value.clone();
                }
                entry.value.clone()
            }
            None => None,
        };
        match fetch().await {
            Ok(v) => {
                self.store(key, Some(v.clone()), false);
                Some(v)
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_after_secs = self.fail_ttl.as_secs(), known = known.is_some(), "look-up failed; the last known answer (else the fail-open one) stands meanwhile");
                self.store(key, known.clone(), true);
                known
            }
        }
    }

    /// Records an answer learnt elsewhere (a dialog carries its own notify settings,
    /// Telegram pushes a change).
    pub fn put(&self, key: K, value: V) {
        self.store(key, Some(value), false);
    }

    fn store(&self, key: K, value: Option<V>, failed: bool) {
        let mut entries = self.lock();
        if entries.len() >= self.cap && !entries.contains_key(&key) {
            let oldest = entries
                .iter()
                .min_by_key(|(_, entry)| entry.at)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        let at = self.clock.now();
        entries.insert(key, MemoEntry { at, value, failed });
    }

    /// Forgets a key (after a change we made, e.g. blocking someone).
    pub fn invalidate(&self, key: &K) {
        self.lock().remove(key);
    }
}
