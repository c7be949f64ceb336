//! The chats each persona has known, kept across restarts in `<state>/<agent>/chats.json`:
//! per chat its title, kind, username (a direct chat's other person) and its last message
//! (when, whether it was ours, who, its first words), so the console lists every chat the
//! persona knows, sorted by last activity, with the ones that wait for an answer, without a
//! Telegram call per chat. Fed by the owner gate (every message that reaches the persona) and
//! by [`ChatIndex::noting`], the wrapper around an agent's Telegram that notes what the persona
//! sends. Saved off the async threads by [`ChatIndex::flush`] (the controller's loop, every
//! few seconds and at the stop); read back lazily, per agent, at its first use. Owns that file
//! only; it never decides anything.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

use crate::adapters::store::{self, StateDir, Symlinks};
use crate::core::model::{
    Chat, ChatId, Message, MessageId, OutgoingSticker, OutgoingText, OutgoingVoice, SetSticker,
    StickerChoice, TgResult,
};
use crate::core::time::BoxFuture;
use crate::ports::store::StoreError;
use crate::ports::telegram::Telegram;

/// Chats kept per persona (the least recently active go first).
pub(crate) const KEPT: usize = 10_000;
/// Characters of a last message kept.
const PREVIEW_CHARS: usize = 120;
/// The largest file read back.
const FILE_CAP: u64 = 16 << 20;
/// The file's format.
const FORMAT: u32 = 1;

/// A chat as the persona knows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ChatEntry {
    pub(crate) title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) username: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) group: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last: Option<LastMessage>,
}

/// The newest message of a chat the persona has seen or sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LastMessage {
    pub(crate) at: jiff::Timestamp,
    /// The persona (or the owner on its account) wrote it.
    pub(crate) ours: bool,
    pub(crate) who: String,
    pub(crate) text: String,
}

impl ChatEntry {
    /// Whether the chat's newest message is someone else's: it waits for the persona.
    pub(crate) fn waits(&self) -> bool {
        self.last.as_ref().is_some_and(|l| !l.ours)
    }
}

#[derive(Serialize, Deserialize)]
struct File {
    format: u32,
    chats: BTreeMap<i64, ChatEntry>,
}

#[derive(Default)]
struct Known {
    chats: BTreeMap<i64, ChatEntry>,
    dirty: bool,
}

/// The chats of every persona, and the files behind them (none: kept in memory only).
pub struct ChatIndex {
    state: Option<StateDir>,
    agents: Mutex<BTreeMap<String, Known>>,
}

impl ChatIndex {
    /// The index kept under `state`.
    pub fn new(state: StateDir) -> Arc<ChatIndex> {
        Arc::new(ChatIndex {
            state: Some(state),
            agents: Mutex::default(),
        })
    }

    /// An index that is not saved (tests, tools without a state directory).
    pub fn in_memory() -> Arc<ChatIndex> {
        Arc::new(ChatIndex {
            state: None,
            agents: Mutex::default(),
        })
    }

    /// The agents' chats, `agent`'s read from its file first if this is its first use.
    fn lock(&self, agent: &str) -> MutexGuard<'_, BTreeMap<String, Known>> {
        let mut all = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        if !all.contains_key(agent) {
            let chats = self
                .state
                .as_ref()
                .map(|s| read(s, agent))
                .unwrap_or_default();
            all.insert(
                agent.to_string(),
                Known {
                    chats,
                    dirty: false,
                },
            );
        }
        all
    }

    /// Notes a message of `chat` the persona saw (the gate) or sent (its Telegram).
    pub(crate) fn seen(&self, agent: &str, chat: &Chat, message: &Message) {
        let mut all = self.lock(agent);
        let Some(known) = all.get_mut(agent) else {
            return;
        };
        let entry = known.chats.entry(chat.id.0).or_default();
        if !chat.title.is_empty() {
            entry.title = chat.title.clone();
        }
        entry.group = !chat.kind.is_direct();
        if chat.kind.is_direct() && !message.outgoing && message.sender.username.is_some() {
            entry.username = message.sender.username.clone();
        }
        note_last(entry, message);
        known.dirty = true;
        bound(&mut known.chats);
    }

    /// Notes a message the persona sent in `chat` (its title known or not).
    fn sent(&self, agent: &str, chat: ChatId, message: &Message) {
        let mut all = self.lock(agent);
        let Some(known) = all.get_mut(agent) else {
            return;
        };
        let entry = known.chats.entry(chat.0).or_default();
        if entry.title.is_empty() {
            entry.title = chat.0.to_string();
        }
        note_last(entry, message);
        known.dirty = true;
        bound(&mut known.chats);
    }

    /// The chats of `agent`, by id.
    pub(crate) fn chats(&self, agent: &str) -> BTreeMap<i64, ChatEntry> {
        self.lock(agent)
            .get(agent)
            .map(|k| k.chats.clone())
            .unwrap_or_default()
    }

    /// Writes the files of the agents whose chats changed since the last flush (blocking).
    pub fn flush(&self) -> Result<(), StoreError> {
        let Some(state) = &self.state else {
            return Ok(());
        };
        let due: Vec<(String, Vec<u8>)> = {
            let mut all = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
            all.iter_mut()
                .filter(|(_, k)| k.dirty)
                .filter_map(|(agent, k)| {
                    k.dirty = false;
                    let file = File {
                        format: FORMAT,
                        chats: k.chats.clone(),
                    };
                    serde_json::to_vec(&file).ok().map(|b| (agent.clone(), b))
                })
                .collect()
        };
        if due.is_empty() {
            return Ok(());
        }
        state.check_guard().map_err(StoreError::from)?;
        for (agent, bytes) in due {
            store::write_atomic(&state.chats_path(&agent), &bytes)?;
        }
        Ok(())
    }

    /// `telegram` of `agent`, noting each message it sends here.
    pub fn noting(self: &Arc<Self>, agent: &str, telegram: Arc<dyn Telegram>) -> Arc<dyn Telegram> {
        Arc::new(Noting {
            inner: telegram,
            agent: agent.to_string(),
            index: Arc::clone(self),
        })
    }
}

/// `message` as the chat's last, unless an even newer one is known.
fn note_last(entry: &mut ChatEntry, message: &Message) {
    if entry.last.as_ref().is_some_and(|l| l.at > message.date) {
        return;
    }
    let text: String = if message.text.is_empty() {
        message
            .media
            .as_ref()
            .map(|m| format!("[{}]", m.kind.as_str()))
            .unwrap_or_default()
    } else {
        message.text.chars().take(PREVIEW_CHARS).collect()
    };
    entry.last = Some(LastMessage {
        at: message.date,
        ours: message.outgoing,
        who: message.sender.name.clone(),
        text,
    });
}

/// Drops the least recently active chats beyond [`KEPT`].
fn bound(chats: &mut BTreeMap<i64, ChatEntry>) {
    while chats.len() > KEPT {
        let oldest = chats
            .iter()
            .min_by_key(|(_, c)| c.last.as_ref().map(|l| l.at))
            .map(|(id, _)| *id);
        match oldest {
            Some(id) => chats.remove(&id),
            None => return,
        };
    }
}

/// The chats in `agent`'s file (none when it is missing or does not read, with a warning).
fn read(state: &StateDir, agent: &str) -> BTreeMap<i64, ChatEntry> {
    let path = state.chats_path(agent);
    match store::read_file(&path, FILE_CAP, Symlinks::Refuse) {
        Ok(bytes) => match serde_json::from_slice::<File>(&bytes) {
            Ok(f) => f.chats,
            Err(e) => {
                tracing::warn!(event = "chats_unreadable", file = %path.display(), error = %e, "the persona's chat list does not read: it starts again from the next message");
                BTreeMap::new()
            }
        },
        Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            seed(state, agent)
        }
        Err(e) => {
            tracing::warn!(event = "chats_unreadable", file = %path.display(), error = %e, "the persona's chat list does not read: it starts again from the next message");
            BTreeMap::new()
        }
    }
}

/// The chats a state directory from before the chat list knew of: those with a plan on disk
/// (with their titles) and those with a handled mark or a held message in the agent's state
/// (a handled mark gives only the id). Read once, when the list's file is missing; the next
/// save keeps them. Reads only: a file that does not read is left for the runtime to report.
fn seed(state: &StateDir, agent: &str) -> BTreeMap<i64, ChatEntry> {
    let mut out: BTreeMap<i64, ChatEntry> = BTreeMap::new();
    let mut known = |chat: &Chat| {
        let e = out.entry(chat.id.0).or_default();
        e.title.clone_from(&chat.title);
        e.group = !chat.kind.is_direct();
    };
    if let Ok(files) = store::GraphStore::new(state.clone()).scan() {
        for graph in files.into_iter().filter_map(|f| f.graph.ok()) {
            if graph.agent == agent {
                known(&graph.chat);
            }
        }
    }
    let agent_state = store::read_optional(&state.agent_state_path(agent))
        .ok()
        .flatten()
        .and_then(|text| serde_json::from_str::<crate::core::agent_state::AgentState>(&text).ok());
    if let Some(s) = agent_state {
        for held in s.held.values() {
            known(&held.chat);
        }
        for chat in s.handled.keys() {
            out.entry(chat.0).or_insert_with(|| ChatEntry {
                title: format!("chat {chat}"),
                group: chat.0 < 0,
                ..ChatEntry::default()
            });
        }
    }
    if !out.is_empty() {
        tracing::info!(event = "chats_seeded", agent = %agent, chats = out.len(), "the persona's chat list starts from the chats its state knows");
    }
    out
}

/// An agent's Telegram that notes what the persona sends in the [`ChatIndex`].
struct Noting {
    inner: Arc<dyn Telegram>,
    agent: String,
    index: Arc<ChatIndex>,
}

impl Noting {
    fn note(&self, chat: ChatId, sent: &TgResult<Message>) {
        if let Ok(m) = sent {
            self.index.sent(&self.agent, chat, m);
        }
    }
}

impl Telegram for Noting {
    fn self_id(&self) -> i64 {
        self.inner.self_id()
    }
    fn chat(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Chat>> {
        self.inner.chat(chat)
    }
    fn send_text(&self, msg: OutgoingText) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            let chat = msg.chat;
            let sent = self.inner.send_text(msg).await;
            self.note(chat, &sent);
            sent
        })
    }
    fn send_sticker(&self, msg: OutgoingSticker) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            let chat = msg.chat;
            let sent = self.inner.send_sticker(msg).await;
            self.note(chat, &sent);
            sent
        })
    }
    fn send_voice(&self, msg: OutgoingVoice) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            let chat = msg.chat;
            let sent = self.inner.send_voice(msg).await;
            self.note(chat, &sent);
            sent
        })
    }
    fn send_media(
        &self,
        msg: crate::core::model::OutgoingMedia,
    ) -> BoxFuture<'_, TgResult<Message>> {
        Box::pin(async move {
            let chat = msg.chat;
            let sent = self.inner.send_media(msg).await;
            self.note(chat, &sent);
            sent
        })
    }
    fn recording_voice(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        self.inner.recording_voice(chat)
    }
    fn react(&self, chat: ChatId, message: MessageId, emoji: &str) -> BoxFuture<'_, TgResult<()>> {
        self.inner.react(chat, message, emoji)
    }
    fn typing(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        self.inner.typing(chat)
    }
    fn mark_read(&self, chat: ChatId, upto: MessageId) -> BoxFuture<'_, TgResult<()>> {
        self.inner.mark_read(chat, upto)
    }
    fn block(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        self.inner.block(chat)
    }
    fn unblock(&self, chat: ChatId) -> BoxFuture<'_, TgResult<()>> {
        self.inner.unblock(chat)
    }
    fn delete_history(&self, chat: ChatId, for_both_sides: bool) -> BoxFuture<'_, TgResult<()>> {
        self.inner.delete_history(chat, for_both_sides)
    }
    fn set_online(&self, online: bool) -> BoxFuture<'_, TgResult<()>> {
        self.inner.set_online(online)
    }
    fn chat_migrated(&self, from: ChatId, to: ChatId) {
        self.inner.chat_migrated(from, to);
    }
    fn fetch_history(&self, chat: ChatId, limit: usize) -> BoxFuture<'_, TgResult<Vec<Message>>> {
        self.inner.fetch_history(chat, limit)
    }
    fn has_sticker(&self, choice: &StickerChoice) -> BoxFuture<'_, TgResult<bool>> {
        self.inner.has_sticker(choice)
    }
    fn sticker_set(&self, set: &str) -> BoxFuture<'_, TgResult<Vec<SetSticker>>> {
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
    fn allowed_reactions(&self, chat: ChatId) -> BoxFuture<'_, TgResult<Option<Vec<String>>>> {
        self.inner.allowed_reactions(chat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{ChatKind, Sender};

    fn message(id: i64, at: i64, outgoing: bool, text: &str) -> Message {
        Message {
            id: MessageId(id),
            chat: ChatId(7),
            sender: Sender {
                id: 7,
                name: if outgoing { "Tess" } else { "Ann" }.into(),
                username: None,
                is_bot: false,
                service: false,
                deleted: false,
            },
            outgoing,
            text: text.into(),
            mentions: Vec::new(),
            reply_to: None,
            date: jiff::Timestamp::from_second(1_800_000_000 + at).unwrap_or_default(),
            media: None,
        }
    }

    #[test]
    fn chats_are_kept_across_a_reopen_with_their_last_message() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Io {
            action: "tempdir",
            path: std::path::PathBuf::new(),
            source: e,
        })?;
        let state = StateDir::new(dir.path());
        let index = ChatIndex::new(state.clone());
        let chat = Chat {
            id: ChatId(7),
            kind: ChatKind::Direct,
            title: "Ann".into(),
        };
        index.seen("Tess", &chat, &message(1, 10, false, "hi"));
        assert!(index.chats("Tess")[&7].waits());
        index.sent("Tess", ChatId(7), &message(2, 20, true, "hello"));
        // An older message seen late does not replace the newest.
        index.seen("Tess", &chat, &message(1, 10, false, "hi"));
        index.flush()?;
        let again = ChatIndex::new(state);
        let chats = again.chats("Tess");
        assert_eq!(chats[&7].title, "Ann");
        assert!(!chats[&7].waits());
        assert_eq!(
            chats[&7].last.as_ref().map(|l| l.text.as_str()),
            Some("hello")
        );
        Ok(())
    }
}

#[cfg(test)]
mod seed_tests {
    use super::*;
    use crate::core::graph::{Task, TaskGraph, TaskSpec};
    use crate::core::model::ChatKind;

    /// A state directory from before the chat list: its list starts from the chats with a
    /// plan on disk (by title) and those with a handled mark (by id), not empty.
    #[test]
    fn an_older_state_seeds_the_list_from_its_plans_and_handled_marks()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let state = StateDir::new(dir.path());
        let chat = Chat {
            id: ChatId(-1005),
            kind: ChatKind::Group,
            title: "Book club".into(),
        };
        let now = jiff::Timestamp::from_second(1_800_000_000)?;
        let graph = TaskGraph::with_tasks(
            "Tess",
            chat,
            now,
            vec![Task::new(TaskSpec::send("hi", None), now)],
        );
        store::GraphStore::new(state.clone()).save(&graph)?;
        // An older agent state: its handled marks are bare message ids.
        store::write_atomic(
            &state.agent_state_path("Tess"),
            br#"{"handled": {"42": 3}}"#,
        )?;
        let chats = ChatIndex::new(state).chats("Tess");
        assert_eq!(chats.len(), 2, "{chats:?}");
        assert_eq!(chats[&-1005].title, "Book club");
        assert!(chats[&-1005].group);
        assert_eq!(chats[&42].title, "chat 42");
        Ok(())
    }
}
