//! The ledger of our own sends: which outgoing messages this daemon wrote (as opposed to the
//! owner typing on another device). It owns three facts: the sends in flight per chat with
//! their text (an outgoing echo there with that text is ours until the send returns, because
//! grammers pushes the echo to the update stream right after handing the RPC result to the
//! caller; any other outgoing message meanwhile is the owner's), the ids of messages we sent,
//! and the `random_id` each send used (so a `RANDOM_ID_DUPLICATE` resolves to the real
//! message id). A voice note in flight stands for "no text, a voice document" (see
//! [`SentLedger::begin_voice`]). Ids and random ids are kept on disk for the catch-up horizon, so the
//! replay of our own recent sends after a restart is recognised too.
//!
//! It is plain data plus a file: no grammers, no network. The send path (backend) records
//! into it, the update pump asks it. A damaged file is moved aside with a WARN, never
//! silently overwritten.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::core::model::{ChatId, MediaKind, Message, MessageId};
use crate::ports::clock::SharedClock;

/// How long sent ids are remembered (catch-up after downtime can replay this far back).
pub const DEFAULT_HORIZON: Duration = Duration::from_secs(3 * 24 * 3600);
/// At most this many sends are remembered, newest kept.
pub(crate) const MAX_RECORDS: usize = 5000;

/// One send we made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SentRecord {
    pub chat: ChatId,
    pub id: MessageId,
    pub random_id: i64,
    pub at: Timestamp,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct LedgerFile {
    #[serde(default)]
    sent: Vec<SentRecord>,
}

#[derive(Default)]
struct Inner {
    /// Per chat: the texts of the sends in flight there (one entry per send).
    in_flight: HashMap<ChatId, Vec<String>>,
    records: VecDeque<SentRecord>,
}

/// Our sends, shared by the send path and the update pump of one account.
pub struct SentLedger {
    inner: Mutex<Inner>,
    /// Held from the snapshot to the end of its write: saves reach the disk in the order
    /// their snapshots were taken, so an older one never lands last.
    writing: tokio::sync::Mutex<()>,
    path: Option<PathBuf>,
    clock: SharedClock,
    horizon: Duration,
}

/// A send in flight in one chat; dropping it ends the "in flight" window.
pub struct InFlight {
    ledger: Arc<SentLedger>,
    chat: ChatId,
    text: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut inner = self.ledger.lock();
        if let Some(texts) = inner.in_flight.get_mut(&self.chat) {
            if let Some(i) = texts.iter().position(|t| *t == self.text) {
                texts.swap_remove(i);
            }
            if texts.is_empty() {
                inner.in_flight.remove(&self.chat);
            }
        }
    }
}

/// How a text is compared with its echo (Telegram trims surrounding white space).
fn echo_form(text: &str) -> String {
    text.trim().to_string()
}

/// What a voice note in flight is compared with: its echo has no text and a voice document,
/// which no text send (nor a sticker's empty text) can be mistaken for.
const VOICE_ECHO: &str = "\u{0}voice";

/// The in-flight form of an outgoing message: a voice note without text is [`VOICE_ECHO`],
/// anything else its trimmed text.
fn echo_key(message: &Message) -> String {
    let voice = message
        .media
        .as_ref()
        .is_some_and(|m| m.kind == MediaKind::Voice);
    if voice && message.text.trim().is_empty() {
        VOICE_ECHO.to_string()
    } else {
        echo_form(&message.text)
    }
}

impl SentLedger {
    /// An empty ledger kept in memory only.
    pub fn in_memory(clock: SharedClock) -> Arc<SentLedger> {
        Arc::new(SentLedger {
            inner: Mutex::new(Inner::default()),
            writing: tokio::sync::Mutex::new(()),
            path: None,
            clock,
            horizon: DEFAULT_HORIZON,
        })
    }

    /// Loads the ledger from `path` (blocking; call it off the async threads). A missing
    /// file is an empty ledger; a damaged one is moved aside to `<path>.damaged` with a WARN.
    pub fn load(path: PathBuf, clock: SharedClock) -> Arc<SentLedger> {
        let records = match crate::adapters::store::read_optional(&path) {
            Ok(None) => Vec::new(),
            Ok(Some(text)) => match serde_json::from_str::<LedgerFile>(&text) {
                Ok(file) => file.sent,
                Err(e) => {
                    let aside = crate::adapters::store::layout::damaged_ledger_path(&path);
                    tracing::warn!(file = %path.display(), error = %e, moved_to = %aside.display(), "sent-message ledger is damaged; starting a new one");
                    if let Err(e) = crate::adapters::store::move_file(&path, &aside) {
                        tracing::warn!(file = %path.display(), error = %e, "could not move the damaged ledger aside");
                    }
                    Vec::new()
                }
            },
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "cannot read the sent-message ledger; starting a new one");
                Vec::new()
            }
        };
        let ledger = SentLedger {
            inner: Mutex::new(Inner {
                in_flight: HashMap::new(),
                records: records.into(),
            }),
            writing: tokio::sync::Mutex::new(()),
            path: Some(path),
            clock,
            horizon: DEFAULT_HORIZON,
        };
        ledger.prune(&mut ledger.lock());
        Arc::new(ledger)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn prune(&self, inner: &mut Inner) {
        let oldest = self
            .clock
            .now()
            .checked_sub(jiff::SignedDuration::try_from(self.horizon).unwrap_or_default())
            .unwrap_or(Timestamp::MIN);
        while inner
            .records
            .front()
            .is_some_and(|r| r.at < oldest || inner.records.len() > MAX_RECORDS)
        {
            inner.records.pop_front();
        }
    }

    /// Marks a send of `text` (empty for a sticker) in flight in `chat` until the returned
    /// guard is dropped. Record the result (if any) before dropping the guard.
    pub fn begin(self: &Arc<Self>, chat: ChatId, text: &str) -> InFlight {
        let text = echo_form(text);
        self.lock()
            .in_flight
            .entry(chat)
            .or_default()
            .push(text.clone());
        InFlight {
            ledger: Arc::clone(self),
            chat,
            text,
        }
    }

    /// Marks a voice note in flight in `chat` (its echo: no text, a voice document) until
    /// the returned guard is dropped.
    pub fn begin_voice(self: &Arc<Self>, chat: ChatId) -> InFlight {
        self.begin(chat, VOICE_ECHO)
    }

    /// Records a message we sent (in memory; [`SentLedger::save`] makes it durable).
    pub fn record(&self, chat: ChatId, id: MessageId, random_id: i64) {
        let mut inner = self.lock();
        inner.records.push_back(SentRecord {
            chat,
            id,
            random_id,
            at: self.clock.now(),
        });
        self.prune(&mut inner);
    }

    /// Whether an outgoing message is ours: a send we recorded, or the echo of a send still
    /// in flight in that chat (the same text). The owner's own message written meanwhile
    /// (another text) is not.
    pub fn is_ours(&self, chat: ChatId, id: MessageId, text: &str) -> bool {
        let inner = self.lock();
        let text = echo_form(text);
        inner
            .in_flight
            .get(&chat)
            .is_some_and(|texts| texts.contains(&text))
            || inner
                .records
                .iter()
                .rev()
                .any(|r| r.chat == chat && r.id == id)
    }

    /// Whether an outgoing message (an echo in the update stream) is ours, as
    /// [`SentLedger::is_ours`], a voice note without text matching a voice note in flight.
    pub fn is_own_message(&self, message: &Message) -> bool {
        let inner = self.lock();
        let key = echo_key(message);
        inner
            .in_flight
            .get(&message.chat)
            .is_some_and(|texts| texts.contains(&key))
            || inner
                .records
                .iter()
                .rev()
                .any(|r| r.chat == message.chat && r.id == message.id)
    }

    /// Whether we recorded sending this message (in-flight windows not counted).
    pub fn recorded(&self, chat: ChatId, id: MessageId) -> bool {
        self.lock()
            .records
            .iter()
            .rev()
            .any(|r| r.chat == chat && r.id == id)
    }

    /// The message a `random_id` created, if we recorded it.
    pub fn by_random_id(&self, chat: ChatId, random_id: i64) -> Option<MessageId> {
        self.lock()
            .records
            .iter()
            .rev()
            .find(|r| r.chat == chat && r.random_id == random_id && r.id.0 != 0)
            .map(|r| r.id)
    }

    /// Number of remembered sends.
    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the ledger to its file (atomically, off the async threads). In-memory ledgers
    /// do nothing.
    pub async fn save(&self) -> Result<(), SaveError> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let _order = self.writing.lock().await;
        let file = LedgerFile {
            sent: self.lock().records.iter().cloned().collect(),
        };
        tokio::task::spawn_blocking(move || crate::adapters::store::write_json(&path, &file))
            .await??;
        Ok(())
    }
}

/// Why the ledger could not be saved.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
    #[error(transparent)]
    Store(#[from] crate::adapters::store::StoreError),
    #[error(transparent)]
    Join(#[from] tokio::task::JoinError),
}
