//! An in-memory Telegram account: the twin of the real backend used by tests and the `chat`
//! playground. It keeps per-chat transcripts (optionally persisted under the state dir as
//! append-only JSON-lines journals, so a restarted playground still has its history; see
//! `journal` and `persist`), records outbound actions with the clock's time (the newest
//! [`ACTIONS_KEPT`] by default), answers a repeated idempotency key with the message it
//! already sent while that message is in the window (as Telegram does with `random_id` for a
//! while), and can be told to fail the next call of an operation.
//!
//! RAM holds per chat at most a window of its newest messages ([`WINDOW`] by default, at
//! least the planner's default history; [`MemoryTelegram::set_window`]) and the keys of its
//! own messages among them; older messages stay in the file and are read from it when asked
//! for (or, without a state folder, are gone).
//!
//! A transcript that cannot be read at start is moved to `quarantine/` next to it (never
//! overwritten), and its chat starts empty; its ids still start above the runtime's handled
//! mark for the chat ([`MemoryTelegram::raise_ids`], called by the daemon once the runtime
//! read the agent's state), as a real Telegram never gives an id twice.
//!
//! It never touches the network. Writes go through `store`, off the async threads; paths come
//! from the state layout. The log and its journal format are in `journal`, saving and reading
//! back in `persist`, transcript reading in `transcript`, the trait in `telegram`, recording
//! actions and their observers in `actions`, voice notes (kept as files next to the
//! transcripts) in `voice`.

mod actions;
mod journal;
mod media_send;
mod persist;
mod telegram;
mod transcript;
mod voice;
mod world;
pub use journal::WINDOW;
pub use persist::OPEN_FILES;
pub use transcript::{HistoryError, read_folded_json, read_history};
pub use voice::VOICES_FORBIDDEN;
pub use world::World;

use journal::{ChatLog, Record};
use transcript::{quarantine_transcript, read_transcript};

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use jiff::Timestamp;
use serde::Serialize;

use crate::adapters::store;
use crate::core::model::{
    Chat, ChatId, MediaInfo, Mention, Message, MessageId, Sender, StickerChoice, TelegramError,
    TgResult,
};
use crate::ports::clock::SharedClock;

/// An operation of the trait, for fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Chat,
    SendText,
    SendSticker,
    SendVoice,
    SendMedia,
    RecordingVoice,
    React,
    Typing,
    MarkRead,
    Block,
    Unblock,
    DeleteHistory,
    FetchHistory,
    Download,
    Status,
}

/// Makes calls of one operation stop until the test lets them through.
#[derive(Debug, Default)]
pub struct Gate {
    /// Signalled each time a call reaches the gate.
    pub entered: tokio::sync::Notify,
    /// Signal once per call to let it continue.
    pub release: tokio::sync::Notify,
}

/// An outbound action as recorded by the fake.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Action {
    /// A message from someone else, put in by [`MemoryTelegram::inject`].
    Inbound {
        chat: ChatId,
        message: Message,
    },
    Send {
        chat: ChatId,
        message: Message,
    },
    Sticker {
        chat: ChatId,
        message: Message,
        sticker: StickerChoice,
    },
    /// A voice note: the message (its text is the transcript, its media the duration) and
    /// the file it was kept in (`None` without a state folder).
    Voice {
        chat: ChatId,
        message: Message,
        file: Option<PathBuf>,
    },
    /// An item of the persona's album (`send_media`): the message (its media names the
    /// album id) and the id.
    Media {
        chat: ChatId,
        message: Message,
        album_id: String,
    },
    React {
        chat: ChatId,
        message_id: MessageId,
        emoji: String,
    },
    Typing {
        chat: ChatId,
    },
    /// The "recording voice" chat action.
    RecordingVoice {
        chat: ChatId,
    },
    Read {
        chat: ChatId,
        upto: MessageId,
    },
    Block {
        chat: ChatId,
    },
    Unblock {
        chat: ChatId,
    },
    Clear {
        chat: ChatId,
        /// Deleted for the other side too (`false`: this account's copy only).
        for_both_sides: bool,
    },
    /// The account's online status was set.
    Status {
        online: bool,
    },
}

/// An action and when it happened on the runtime's clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub at: Timestamp,
    pub action: Action,
}

/// A message to put into a chat as if someone else wrote it.
#[derive(Debug, Clone, Default)]
pub struct Incoming {
    pub from: String,
    pub text: String,
    pub reply_to: Option<MessageId>,
    pub media: Option<MediaInfo>,
    pub mentions: Vec<Mention>,
}

/// Recorded actions kept by default (the oldest are dropped beyond it).
pub const ACTIONS_KEPT: usize = 65_536;

#[derive(Default)]
struct State {
    chats: BTreeMap<ChatId, Box<ChatLog>>,
    /// Messages kept in RAM per chat.
    window: usize,
    /// Transcript files kept open between appends (at most [`OPEN_FILES`]).
    open_files: usize,
    actions: VecDeque<Recorded>,
    actions_kept: usize,
    faults: HashMap<Op, VecDeque<TelegramError>>,
    gates: HashMap<Op, Arc<Gate>>,
    media: HashMap<String, Vec<u8>>,
    /// Simulated network time of every text send and reaction (`run --telegram memory` tests).
    send_delay: std::time::Duration,
    /// Sticker set → sticker names; empty means every sticker exists.
    sticker_sets: BTreeMap<String, Vec<String>>,
    /// Chats with a reaction allowlist (others allow any), and how often it was asked for.
    allowed_reactions: HashMap<ChatId, Vec<String>>,
    allowed_reactions_calls: usize,
    /// Per chat, the lowest id its next message may get ([`MemoryTelegram::raise_ids`]).
    id_floors: HashMap<ChatId, i64>,
    /// Chats that refuse voice notes ([`MemoryTelegram::refuse_voice`]).
    voice_refused: std::collections::HashSet<ChatId>,
    /// The voice notes sent, by chat and message.
    voices: HashMap<(ChatId, MessageId), Arc<Vec<u8>>>,
}

/// The in-memory account.
pub struct MemoryTelegram {
    self_id: i64,
    self_name: String,
    dir: Option<PathBuf>,
    clock: SharedClock,
    state: Mutex<State>,
    /// Who is told of each action, and which actions they want.
    observer: Mutex<Option<actions::Observer>>,
    /// The world this account shares its groups and direct chats with, if any.
    world: Mutex<Weak<World>>,
}

/// Deterministic user id for a display name, so a restarted playground keeps its ids.
pub fn user_id_for(name: &str) -> i64 {
    // FNV-1a, folded into a positive range that stays clear of small hand-picked ids.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    1_000_000 + (h % 1_000_000_000) as i64
}

/// Largest sticker file [`MemoryTelegram::load_sticker_sets`] reads (Telegram's own stickers
/// are at most a few hundred KB).
pub const STICKER_FILE_CAP: u64 = 16 << 20;

/// Moves the transcripts an earlier version kept in `old` (`<agent>/memory/`, now the
/// agent's long-term memory) to `new`, once: only when `new` does not exist yet. Returns how
/// many were moved.
pub fn adopt_old_transcripts(old: &Path, new: &Path) -> Result<usize, store::StoreError> {
    if new.exists() {
        return Ok(0);
    }
    let Ok(entries) = std::fs::read_dir(old) else {
        return Ok(0);
    };
    let transcripts: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
        .collect();
    if transcripts.is_empty() {
        return Ok(0);
    }
    store::ensure_private_dir(new)?;
    for path in &transcripts {
        if let Some(name) = path.file_name() {
            std::fs::rename(path, new.join(name)).map_err(|e| store::StoreError::Io {
                action: "cannot move transcript",
                path: path.clone(),
                source: e,
            })?;
        }
    }
    tracing::info!(event = "transcripts_moved", count = transcripts.len(), to = %new.display(), "in-memory transcripts moved to their new folder");
    Ok(transcripts.len())
}

impl MemoryTelegram {
    /// A fresh account. With `dir`, transcripts are loaded from and saved to
    /// `dir/<chat>.json`.
    pub fn new(
        self_name: &str,
        clock: SharedClock,
        dir: Option<PathBuf>,
    ) -> Result<MemoryTelegram, store::StoreError> {
        let mut state = State {
            window: WINDOW,
            actions_kept: ACTIONS_KEPT,
            ..State::default()
        };
        if let Some(dir) = &dir
            && let Ok(entries) = std::fs::read_dir(dir)
        {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_none_or(|e| e != "json") {
                    continue;
                }
                match read_transcript(&path)? {
                    Ok(folded) => {
                        let log = transcript::adopt(&path, folded, state.window)?;
                        state.chats.insert(log.chat.id, Box::new(log));
                    }
                    Err(reason) => {
                        let moved_to = quarantine_transcript(dir, &path)?;
                        tracing::error!(
                            event = "transcript_quarantined",
                            file = %path.display(),
                            moved_to = %moved_to.display(),
                            reason = %reason,
                            "playground transcript unreadable: moved to quarantine (never overwritten); that chat starts empty"
                        );
                    }
                }
            }
        }
        let self_id = user_id_for(self_name);
        // Saved Messages: the account's chat with itself always exists.
        state.chats.entry(ChatId(self_id)).or_insert_with(|| {
            Box::new(ChatLog::new(
                Chat {
                    id: ChatId(self_id),
                    kind: crate::core::model::ChatKind::Direct,
                    title: "Saved Messages".into(),
                },
                1,
            ))
        });
        Ok(MemoryTelegram {
            self_id,
            self_name: self_name.to_string(),
            dir,
            clock,
            state: Mutex::new(state),
            observer: Mutex::new(None),
            world: Mutex::new(Weak::new()),
        })
    }

    /// Serves sticker sets from `dir` (files over [`STICKER_FILE_CAP`] are refused, naming
    /// them): one folder per set (its name is the set's short name),
    /// one file per sticker named by its emoji or name (`👋.webp`, `wave.webp`). Each
    /// sticker's bytes become downloadable under the unique id sent stickers get. Without
    /// any set loaded every sticker exists. Blocking: reads the directory.
    pub fn load_sticker_sets(&self, dir: &Path) -> Result<usize, store::StoreError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| store::StoreError::Io {
                action: "cannot read sticker sets in",
                path,
                source,
            }
        };
        let mut count = 0;
        let mut sets = Vec::new();
        for set in std::fs::read_dir(dir).map_err(io(dir))?.flatten() {
            let set_path = set.path();
            if !set_path.is_dir() {
                continue;
            }
            let set_name = set.file_name().to_string_lossy().into_owned();
            let mut names = Vec::new();
            for file in std::fs::read_dir(&set_path)
                .map_err(io(&set_path))?
                .flatten()
            {
                let path = file.path();
                let Some(stem) = path.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
                    continue;
                };
                if !path.is_file() {
                    continue;
                }
                // Through the safe reader: capped, and never blocking should the file have
                // been swapped for a FIFO since the check above.
                let bytes = store::read_file(&path, STICKER_FILE_CAP, store::Symlinks::Follow)?;
                self.put_media(&format!("sticker:{set_name}:{stem}"), bytes);
                names.push(stem);
                count += 1;
            }
            names.sort();
            sets.push((set_name, names));
        }
        self.lock().sticker_sets.extend(sets);
        Ok(count)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes the next call of `op` fail with `error` (queued: several calls fail in order).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn fail_next(&self, op: Op, error: TelegramError) {
        self.lock().faults.entry(op).or_default().push_back(error);
    }

    /// Registers the bytes `download_media` returns for a media id.
    /// Makes every text send and reaction take `delay` on the clock (a slow network).
    pub(crate) fn set_send_delay(&self, delay: std::time::Duration) {
        self.lock().send_delay = delay;
    }

    pub fn put_media(&self, unique_id: &str, bytes: Vec<u8>) {
        self.lock().media.insert(unique_id.to_string(), bytes);
    }

    /// Restricts the reactions a chat allows (as a group's settings do).
    pub fn set_allowed_reactions(&self, chat: ChatId, emoji: Vec<String>) {
        self.lock().allowed_reactions.insert(chat, emoji);
    }

    /// How many times `allowed_reactions` was called (to check caching).
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn allowed_reactions_calls(&self) -> usize {
        self.lock().allowed_reactions_calls
    }

    /// Every action recorded so far.
    pub fn actions(&self) -> Vec<Recorded> {
        self.lock().actions.iter().cloned().collect()
    }

    /// Keeps the newest `n` recorded actions from now on (default [`ACTIONS_KEPT`]).
    pub fn set_actions_kept(&self, n: usize) {
        let mut st = self.lock();
        st.actions_kept = n;
        let over = st.actions.len().saturating_sub(n);
        st.actions.drain(..over);
    }

    /// Keeps at most the newest `n` messages of each chat in RAM from now on (default
    /// [`WINDOW`]; each chat is trimmed at its next message).
    pub fn set_window(&self, n: usize) {
        self.lock().window = n;
    }

    /// The messages of a chat in RAM (its window), oldest first.
    pub fn transcript(&self, chat: ChatId) -> Vec<Message> {
        self.lock()
            .chats
            .get(&chat)
            .map(|c| c.messages.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many messages of `chat` are in RAM.
    pub fn messages_in_ram(&self, chat: ChatId) -> usize {
        self.lock().chats.get(&chat).map_or(0, |c| c.messages.len())
    }

    /// Raises each chat's next message id above its mark in `marks` (the runtime's handled
    /// marks), as a real Telegram never gives an id twice: a chat whose transcript was
    /// quarantined starts empty but never under its mark, whose messages the runtime would
    /// take for ones already answered. A chat not known yet gets the floor when it appears.
    pub fn raise_ids(&self, marks: &BTreeMap<ChatId, MessageId>) {
        let mut st = self.lock();
        for (chat, mark) in marks {
            let floor = mark.0.saturating_add(1);
            let slot = st.id_floors.entry(*chat).or_insert(1);
            let new_floor = *slot < floor;
            *slot = (*slot).max(floor);
            let from = match st.chats.get_mut(chat) {
                Some(log) if log.next_id < floor => {
                    let from = log.next_id;
                    log.next_id = floor;
                    from
                }
                Some(_) => continue,
                // No transcript for a chat the runtime handled: it was quarantined or lost.
                None if new_floor => 1,
                None => continue,
            };
            tracing::warn!(
                event = "message_ids_raised",
                chat = chat.0,
                from,
                to = floor,
                "the chat's message ids were under its handled mark (its transcript was quarantined or lost): they start above it"
            );
        }
    }

    /// Makes a chat known (idempotent: an existing chat keeps its log).
    pub fn ensure_chat(&self, chat: Chat) {
        let mut st = self.lock();
        let next_id = st.id_floors.get(&chat.id).copied().unwrap_or(1);
        st.chats
            .entry(chat.id)
            .or_insert_with(|| Box::new(ChatLog::new(chat, next_id)));
    }

    /// Appends a message from someone else and returns it; the caller hands it to the
    /// runtime, as the real backend's event handler does.
    pub async fn inject(&self, chat: ChatId, incoming: Incoming) -> TgResult<Message> {
        let now = self.clock.now();
        let world = self.world();
        let (msg, view) = {
            let mut st = self.lock();
            let window = st.window;
            let log = st
                .chats
                .get_mut(&chat)
                .ok_or_else(|| TelegramError::NotFound(format!("chat {chat}")))?;
            let id = world
                .as_ref()
                .and_then(|w| w.allocate(self.self_id, &log.chat, log.next_id))
                .unwrap_or(log.next_id);
            let msg = Message {
                id: MessageId(id),
                chat,
                sender: Sender {
                    id: user_id_for(&incoming.from),
                    name: incoming.from,
                    username: None,
                    is_bot: false,
                    service: false,
                    deleted: false,
                },
                outgoing: false,
                text: incoming.text,
                mentions: incoming.mentions,
                reply_to: incoming.reply_to,
                date: now,
                media: incoming.media.map(Box::new),
            };
            log.change(
                Record::Message {
                    message: Box::new(msg.clone()),
                    key: None,
                },
                window,
            );
            (msg, log.chat.clone())
        };
        self.persist(chat).await?;
        if let Some(world) = world {
            world.fan_out(self.self_id, &view, &msg).await;
        }
        self.record(Action::Inbound {
            chat,
            message: msg.clone(),
        });
        Ok(msg)
    }

    /// Joins a world (see [`World::join`]).
    fn set_world(&self, world: Weak<World>) {
        *self.world.lock().unwrap_or_else(PoisonError::into_inner) = world;
    }

    fn world(&self) -> Option<Arc<World>> {
        self.world
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .upgrade()
    }

    /// A message of another account of the world arrives in `chat` (this account's copy),
    /// with the id the world gave it. False (and nothing kept) when this account blocked the
    /// sender's direct chat.
    async fn receive(&self, chat: Chat, message: Message) -> TgResult<bool> {
        let id = chat.id;
        self.ensure_chat(chat);
        let kept = self.with_chat_windowed(id, |log, window| {
            if log.blocked && log.chat.kind.is_direct() {
                return false;
            }
            let record = Record::Message {
                message: Box::new(message.clone()),
                key: None,
            };
            log.change(record, window);
            true
        })?;
        if !kept {
            return Ok(false);
        }
        self.persist(id).await?;
        self.record(Action::Inbound { chat: id, message });
        Ok(true)
    }

    /// Each chat with the id its next message would get.
    fn next_ids(&self) -> Vec<(Chat, i64)> {
        self.lock()
            .chats
            .values()
            .map(|log| (log.chat.clone(), log.next_id))
            .collect()
    }

    /// What an unread scan finds: for every direct chat that is not blocked, its newest
    /// message from others when it was never read (its plan never started: the previous run
    /// was killed between the message and its plan). Groups are left to their own traffic.
    pub fn unread(&self) -> Vec<(Chat, Message)> {
        self.lock()
            .chats
            .values()
            .filter(|log| !log.blocked && log.chat.kind == crate::core::model::ChatKind::Direct)
            .filter_map(|log| {
                let newest = log.messages.iter().rev().find(|m| !m.outgoing)?;
                let read = log.read_upto.is_some_and(|r| r >= newest.id);
                (!read).then(|| (log.chat.clone(), newest.clone()))
            })
            .collect()
    }

    /// Whether the account has blocked the chat's other side.
    pub fn is_blocked(&self, chat: ChatId) -> bool {
        self.lock().chats.get(&chat).is_some_and(|log| log.blocked)
    }

    /// The newest message of `chat` marked read, if any.
    pub fn read_upto(&self, chat: ChatId) -> Option<MessageId> {
        self.lock().chats.get(&chat).and_then(|log| log.read_upto)
    }

    /// Someone edits a message of theirs: its text changes in the transcript (what the next
    /// history fetch, and so the planner, sees). Returns the edited message.
    pub async fn edit_inbound(&self, chat: ChatId, id: MessageId, text: &str) -> TgResult<Message> {
        let mut edited = self
            .find_message(chat, id)
            .await?
            .ok_or_else(|| TelegramError::NotFound(format!("message {id} in chat {chat}")))?;
        edited.text = text.to_string();
        let record = Record::Edit {
            id,
            text: edited.text.clone(),
        };
        self.with_chat_windowed(chat, |log, window| log.change(record, window))?;
        self.persist(chat).await?;
        Ok(edited)
    }

    /// Messages are deleted: they leave the transcript. Returns how many were found.
    pub async fn delete_inbound(&self, chat: ChatId, ids: &[MessageId]) -> TgResult<usize> {
        let mut found = Vec::new();
        for id in ids {
            if !found.contains(id) && self.find_message(chat, *id).await?.is_some() {
                found.push(*id);
            }
        }
        let removed = found.len();
        if !found.is_empty() {
            let record = Record::Delete { ids: found };
            self.with_chat_windowed(chat, |log, window| log.change(record, window))?;
            self.persist(chat).await?;
        }
        Ok(removed)
    }

    /// From now on every call of `op` waits at the returned gate.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn gate(&self, op: Op) -> Arc<Gate> {
        Arc::clone(self.lock().gates.entry(op).or_default())
    }

    /// Removes the gate of `op`.
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn ungate(&self, op: Op) {
        self.lock().gates.remove(&op);
    }

    /// Passes the gate of `op` (if any), then any injected fault.
    async fn enter(&self, op: Op) -> TgResult<()> {
        let delay = self.lock().send_delay;
        if matches!(op, Op::SendText | Op::React) && !delay.is_zero() {
            tracing::info!(
                event = "memory_send_held",
                ms = delay.as_millis() as u64,
                "the in-memory Telegram holds a send or reaction (--memory-send-delay-ms)"
            );
            drop(crate::ports::clock::sleep(self.clock.as_ref(), delay).await);
        }
        let gate = self.lock().gates.get(&op).cloned();
        if let Some(gate) = gate {
            gate.entered.notify_one();
            gate.release.notified().await;
        }
        self.take_fault(op)
    }

    fn take_fault(&self, op: Op) -> TgResult<()> {
        match self
            .lock()
            .faults
            .get_mut(&op)
            .and_then(VecDeque::pop_front)
        {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn with_chat<T>(&self, chat: ChatId, f: impl FnOnce(&mut ChatLog) -> T) -> TgResult<T> {
        let mut st = self.lock();
        let log = st
            .chats
            .get_mut(&chat)
            .ok_or_else(|| TelegramError::NotFound(format!("chat {chat}")))?;
        Ok(f(log))
    }

    /// [`Self::with_chat`], also handing over the window.
    fn with_chat_windowed<T>(
        &self,
        chat: ChatId,
        f: impl FnOnce(&mut ChatLog, usize) -> T,
    ) -> TgResult<T> {
        let mut st = self.lock();
        let window = st.window;
        let log = st
            .chats
            .get_mut(&chat)
            .ok_or_else(|| TelegramError::NotFound(format!("chat {chat}")))?;
        Ok(f(log, window))
    }

    /// Appends our own message unless the key was used before; returns the message and
    /// whether it is new.
    async fn post(
        &self,
        chat: ChatId,
        key: i64,
        text: String,
        reply_to: Option<MessageId>,
        media: impl FnOnce(MessageId) -> Option<MediaInfo>,
    ) -> TgResult<(Message, bool)> {
        let now = self.clock.now();
        let (self_id, self_name) = (self.self_id, self.self_name.clone());
        let world = self.world();
        let (msg, fresh, view) = self.with_chat_windowed(chat, |log, window| {
            if log.blocked && log.chat.kind.is_direct() {
                return Err(TelegramError::Forbidden("you blocked this user".into()));
            }
            if let Some(id) = log.sent_keys.get(&key)
                && let Some(m) = log.messages.iter().find(|m| m.id == *id)
            {
                return Ok((m.clone(), false, log.chat.clone()));
            }
            let id = world
                .as_ref()
                .and_then(|w| w.allocate(self_id, &log.chat, log.next_id))
                .unwrap_or(log.next_id);
            let msg = Message {
                id: MessageId(id),
                chat,
                sender: Sender {
                    id: self_id,
                    name: self_name,
                    username: None,
                    is_bot: false,
                    service: false,
                    deleted: false,
                },
                outgoing: true,
                text,
                mentions: Vec::new(),
                reply_to,
                date: now,
                media: media(MessageId(id)).map(Box::new),
            };
            let record = Record::Message {
                message: Box::new(msg.clone()),
                key: Some(key),
            };
            log.change(record, window);
            Ok((msg, true, log.chat.clone()))
        })??;
        if fresh {
            self.persist(chat).await?;
            if let Some(world) = world {
                world.fan_out(self_id, &view, &msg).await;
            }
        }
        Ok((msg, fresh))
    }
}
