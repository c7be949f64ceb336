//! A chat's log on the in-memory account and its transcript journal format: the chat, the
//! newest messages (a bounded window: older ones stay in the file only), the idempotency keys
//! of the window's own messages, the blocked flag and the read mark; and the lines its file
//! is made of.
//!
//! A transcript file is a journal of JSON lines: the first line is the whole log at the time
//! the file was (re)written (the header: a [`ChatLog`] object), each later line one change
//! ([`Record`]: a message, an edit, a deletion, a clear, a read mark, a block). A last line
//! without its newline is a torn append (a crash while appending): the reader ignores it and
//! says so. The older whole-file form (one pretty-printed `ChatLog` object) is read as a
//! header alone. It decides nothing about when to write (that is `persist`) and does no I/O.
//! Called by the parent module, `persist` and `transcript`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::adapters::store::appender::AppendFile;
use crate::core::model::{Chat, Message, MessageId};

/// Messages of a chat kept in RAM by default (at least the planner's default history,
/// `RuntimeConfig::history_limit`, 500); older ones are read from the file when asked for.
pub const WINDOW: usize = 512;

/// One chat's log: what its header line holds, and in RAM its window.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ChatLog {
    pub(super) chat: Chat,
    pub(super) next_id: i64,
    /// Oldest first; in RAM at most the window.
    pub(super) messages: VecDeque<Message>,
    /// Idempotency key → the message it produced (in RAM: the window's own messages).
    #[serde(default)]
    pub(super) sent_keys: BTreeMap<i64, MessageId>,
    #[serde(default)]
    pub(super) blocked: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) read_upto: Option<MessageId>,
    /// The file's side (never written).
    #[serde(skip)]
    pub(super) disk: Disk,
}

/// Where a chat's journal file stands (RAM only).
#[derive(Debug, Clone, Default)]
pub(super) struct Disk {
    /// Changes made in RAM and not yet appended, in order.
    pub(super) pending: Vec<Record>,
    /// The file exists in journal form (else the next save writes it whole).
    pub(super) created: bool,
    /// Messages older than the window are in the file (and only there).
    pub(super) older: bool,
    /// Lines in the file, and how many of them later lines made stale (for compaction).
    pub(super) lines: usize,
    pub(super) superseded: usize,
    /// Serializes the chat's appends and holds its open file, if kept.
    pub(super) slot: Arc<tokio::sync::Mutex<Option<AppendFile>>>,
}

/// One change of a chat, as a journal line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum Record {
    /// A new message (ours with the idempotency key it was sent under).
    Message {
        message: Box<Message>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        key: Option<i64>,
    },
    Edit {
        id: MessageId,
        text: String,
    },
    Delete {
        ids: Vec<MessageId>,
    },
    /// The history was deleted.
    Clear,
    Read {
        upto: MessageId,
    },
    Blocked {
        blocked: bool,
    },
}

impl Record {
    /// Lines of the file this record makes stale (an estimate for compaction: a message's
    /// line stays live; an edit makes the old text stale, and so on).
    fn supersedes(&self, log: &ChatLog) -> usize {
        match self {
            Record::Message { .. } => 0,
            Record::Edit { .. } | Record::Read { .. } | Record::Blocked { .. } => 1,
            Record::Delete { ids } => ids.len(),
            Record::Clear => log.disk.lines,
        }
    }
}

impl ChatLog {
    /// An empty log of `chat` whose next message gets `next_id`.
    pub(super) fn new(chat: Chat, next_id: i64) -> ChatLog {
        ChatLog {
            chat,
            next_id,
            messages: VecDeque::new(),
            sent_keys: BTreeMap::new(),
            blocked: false,
            read_upto: None,
            disk: Disk::default(),
        }
    }

    /// Applies `record` in RAM, keeping at most `window` messages.
    pub(super) fn apply(&mut self, record: &Record, window: usize) {
        match record {
            Record::Message { message, key } => {
                self.next_id = self.next_id.max(message.id.0.saturating_add(1));
                if let Some(key) = key {
                    self.sent_keys.insert(*key, message.id);
                }
                // Room first: pushed onto a full window, the deque would double its capacity
                // (and keep it) for the one message the trim drops right after.
                if window > 0 {
                    self.trim(window - 1);
                }
                // Grown by half, exactly, and never past the window: a chat of two messages
                // holds two, not the four (then eight) a doubling deque reserves; at 10,000
                // chats that was 7 MB.
                let len = self.messages.len();
                if len == self.messages.capacity() {
                    let room = if window > 0 {
                        (len / 2).min(window.saturating_sub(len))
                    } else {
                        len / 2
                    };
                    self.messages.reserve_exact(room.max(1));
                }
                self.messages.push_back((**message).clone());
            }
            Record::Edit { id, text } => {
                if let Some(m) = self.messages.iter_mut().find(|m| m.id == *id) {
                    m.text.clone_from(text);
                }
            }
            Record::Delete { ids } => self.messages.retain(|m| !ids.contains(&m.id)),
            Record::Clear => {
                self.messages.clear();
                self.sent_keys.clear();
                self.disk.older = false;
            }
            Record::Read { upto } => {
                self.read_upto = Some(self.read_upto.map_or(*upto, |r| r.max(*upto)));
            }
            Record::Blocked { blocked } => self.blocked = *blocked,
        }
        self.trim(window);
    }

    /// Applies `record` in RAM and queues it for the file.
    pub(super) fn change(&mut self, record: Record, window: usize) {
        self.apply(&record, window);
        self.disk.pending.push(record);
    }

    /// Drops the oldest messages over `window`, and the keys of messages no longer in it.
    pub(super) fn trim(&mut self, window: usize) {
        if self.messages.len() > window {
            let drop = self.messages.len() - window;
            self.messages.drain(..drop);
            self.disk.older = true;
            // Ids grow along the log: a key whose message left the window is forgotten.
            let oldest = self.messages.front().map_or(MessageId(i64::MAX), |m| m.id);
            self.sent_keys.retain(|_, id| *id >= oldest);
        }
    }

    /// Counts appended `records` in the file's line tally.
    pub(super) fn count_appended(&mut self, records: &[Record]) {
        for r in records {
            self.disk.superseded += r.supersedes(self);
            self.disk.lines += 1;
        }
    }
}

/// Most lines made stale before a file is rewritten whole, and the share of the file they
/// must be: a file is compacted when over half of it is stale and that is at least this many.
pub(super) const COMPACT_AFTER: usize = 256;

/// Whether `disk`'s file is worth rewriting whole.
pub(super) fn worth_compacting(disk: &Disk) -> bool {
    disk.superseded >= COMPACT_AFTER && disk.superseded * 2 >= disk.lines
}

/// The header line of `log` (the whole log as one JSON object and a newline).
pub(super) fn header(log: &ChatLog) -> Result<Vec<u8>, serde_json::Error> {
    let mut bytes = serde_json::to_vec(log)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// The lines of `records`.
pub(super) fn encode(records: &[Record]) -> Result<Vec<u8>, serde_json::Error> {
    let mut bytes = Vec::with_capacity(records.len() * 256);
    for r in records {
        serde_json::to_writer(&mut bytes, r)?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// Why a transcript's text is not a transcript.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadJournal {
    #[error("no complete first line")]
    NoHeader,
    #[error("first line: {0}")]
    Header(serde_json::Error),
    #[error("line {line}: {source}")]
    Line {
        line: usize,
        source: serde_json::Error,
    },
}

/// A transcript read whole: its log with every message (not trimmed), and what the reader
/// found about the file.
#[derive(Debug)]
pub(super) struct Folded {
    pub(super) log: ChatLog,
    /// In the older whole-file form (rewritten as a journal at start).
    pub(super) whole_file: bool,
    /// Bytes of complete lines; less than the text when the last line is torn.
    pub(super) valid_len: usize,
    pub(super) torn: bool,
}

/// Reads a transcript's text (see the module docs).
pub(super) fn fold(text: &str) -> Result<Folded, BadJournal> {
    if let Ok(mut log) = serde_json::from_str::<ChatLog>(text) {
        log.disk.lines = 1;
        return Ok(Folded {
            log,
            whole_file: text.trim_end().contains('\n'),
            valid_len: text.len(),
            torn: false,
        });
    }
    let valid_len = text.rfind('\n').map_or(0, |i| i + 1);
    let torn = !text[valid_len..].trim().is_empty();
    let mut lines = text[..valid_len].split('\n').enumerate();
    let first = lines
        .by_ref()
        .find(|(_, l)| !l.trim().is_empty())
        .ok_or(BadJournal::NoHeader)?;
    let mut log: ChatLog = serde_json::from_str(first.1).map_err(BadJournal::Header)?;
    log.disk.lines = 1;
    for (n, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let record: Record = serde_json::from_str(line).map_err(|source| BadJournal::Line {
            line: n + 1,
            source,
        })?;
        log.count_appended(std::slice::from_ref(&record));
        log.apply(&record, usize::MAX);
    }
    Ok(Folded {
        log,
        whole_file: false,
        valid_len,
        torn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{ChatId, ChatKind, Sender};

    /// The window's deque never grows past the window: pushing onto a full one would double
    /// its capacity for good (a chat's RAM, times every chat).
    #[test]
    fn a_full_window_keeps_its_capacity() {
        let chat = Chat {
            id: ChatId(1),
            kind: ChatKind::Direct,
            title: "c".into(),
        };
        let mut log = ChatLog::new(chat, 1);
        for id in 1..=1000 {
            let message = Message {
                id: MessageId(id),
                chat: ChatId(1),
                sender: Sender {
                    id: 2,
                    name: "b".into(),
                    username: None,
                    is_bot: false,
                    service: false,
                    deleted: false,
                },
                outgoing: false,
                text: format!("m{id}"),
                mentions: Vec::new(),
                reply_to: None,
                date: jiff::Timestamp::UNIX_EPOCH,
                media: None,
            };
            let record = Record::Message {
                message: Box::new(message),
                key: Some(id),
            };
            log.apply(&record, 64);
        }
        assert_eq!(log.messages.len(), 64);
        assert_eq!(log.messages.front().map(|m| m.id), Some(MessageId(937)));
        assert!(log.messages.capacity() <= 64, "{}", log.messages.capacity());
        assert_eq!(log.sent_keys.len(), 64);
        assert!(log.disk.older);
    }
}
