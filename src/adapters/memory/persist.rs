//! Saving the in-memory account's chats and reading back what left the RAM window.
//!
//! Each change of a chat is queued on its log in RAM (in the order it was made, under the
//! state lock) and [`MemoryTelegram::persist`] appends everything queued for the chat as
//! whole lines with one `write` (`store::appender`), before the call that made the change
//! returns: a message sent or received before the daemon is killed is in the file after it,
//! as it would be on Telegram's side. The appends are not synced: this account stands in for
//! Telegram's servers, whose durability is not the daemon's to pay for (a power loss may cut
//! the newest lines, which the reader drops as a torn tail; the daemon's own state is in its
//! synced journal). A chat's appends are serialized by its own async lock, so concurrent
//! changes of one chat share a write (the second finds its record already written). The first
//! save of a chat writes its file whole (`write_atomic`, once per chat), and a file over half
//! made of stale lines (edits, deletions, read marks, a clear) is rewritten whole once it has
//! [`COMPACT_AFTER`](super::journal::COMPACT_AFTER) of them. Up to [`OPEN_FILES`] chats keep
//! their file open between appends; the others open it per append.
//!
//! Messages older than the window are read from the file on the blocking pool when asked for
//! (a history longer than the window, a reaction, edit, deletion or download of an old
//! message); without a state folder they are gone, as a very old message Telegram no longer
//! serves. Called by the parent module and the trait implementation in `telegram`.

use std::sync::Arc;

use super::MemoryTelegram;
use super::journal;
use super::transcript::read_transcript;
use crate::adapters::store::appender::AppendFile;
use crate::adapters::store::{self, layout};
use crate::core::model::{ChatId, LocalFailure, Message, MessageId, TelegramError, TgResult};

/// Chats whose transcript file stays open between appends.
pub const OPEN_FILES: usize = 256;

/// What one save writes.
enum Work {
    /// The file whole: its header line (the chat's first save).
    Create(Vec<u8>),
    /// Lines appended to the file.
    Append(Vec<u8>),
}

fn local(e: impl std::error::Error + Send + Sync + 'static) -> TelegramError {
    TelegramError::Local(LocalFailure::new(e))
}

impl MemoryTelegram {
    /// Writes the changes queued for `chat` (see the module docs).
    pub(super) async fn persist(&self, chat: ChatId) -> TgResult<()> {
        let Some(dir) = &self.dir else {
            if let Some(log) = self.lock().chats.get_mut(&chat) {
                log.disk.pending.clear();
            }
            return Ok(());
        };
        let Some(slot) = self
            .lock()
            .chats
            .get(&chat)
            .map(|log| Arc::clone(&log.disk.slot))
        else {
            return Ok(());
        };
        let mut open = slot.lock().await;
        let (work, records) = {
            let mut st = self.lock();
            let Some(log) = st.chats.get_mut(&chat) else {
                return Ok(());
            };
            if !log.disk.created {
                log.disk.pending.clear();
                let bytes = journal::header(log).map_err(local)?;
                (Work::Create(bytes), Vec::new())
            } else if log.disk.pending.is_empty() {
                // Written by the save that held the lock before us.
                return Ok(());
            } else {
                let records = std::mem::take(&mut log.disk.pending);
                (
                    Work::Append(journal::encode(&records).map_err(local)?),
                    records,
                )
            }
        };
        let path = layout::transcript_path(dir, chat);
        let had_file = open.is_some();
        let file = open.take();
        let (file, written) = tokio::task::spawn_blocking(move || write(&path, file, &work))
            .await
            .map_err(local)?;
        let compact = {
            let mut st = self.lock();
            keep_file(&mut st.open_files, had_file, file, &mut open);
            let Some(log) = st.chats.get_mut(&chat) else {
                return written.map_err(local);
            };
            match &written {
                Ok(()) if records.is_empty() => {
                    log.disk.created = true;
                    log.disk.lines = 1;
                    log.disk.superseded = 0;
                }
                Ok(()) => log.count_appended(&records),
                // Not written: written again with the next save.
                Err(_) if records.is_empty() => log.disk.created = false,
                Err(_) => {
                    let later = std::mem::replace(&mut log.disk.pending, records);
                    log.disk.pending.extend(later);
                }
            }
            written.is_ok() && journal::worth_compacting(&log.disk)
        };
        written.map_err(local)?;
        if compact {
            if let Some(f) = open.take() {
                self.lock().open_files -= 1;
                drop(f);
            }
            self.compact(chat).await?;
        }
        Ok(())
    }

    /// Rewrites `chat`'s file whole from what it holds (its caller holds the chat's lock).
    async fn compact(&self, chat: ChatId) -> TgResult<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let path = layout::transcript_path(dir, chat);
        let lines = tokio::task::spawn_blocking(move || -> TgResult<usize> {
            let folded = read_transcript(&path)
                .map_err(local)?
                .map_err(|e| TelegramError::Other(format!("cannot compact transcript: {e}")))?;
            let bytes = journal::header(&folded.log).map_err(local)?;
            store::write_atomic(&path, &bytes).map_err(local)?;
            Ok(folded.log.messages.len())
        })
        .await
        .map_err(local)??;
        if let Some(log) = self.lock().chats.get_mut(&chat) {
            log.disk.lines = 1;
            log.disk.superseded = 0;
        }
        tracing::debug!(
            event = "transcript_compacted",
            chat = chat.0,
            messages = lines
        );
        Ok(())
    }

    /// `chat`'s messages older than its RAM window, oldest first, read from its file (empty
    /// without a state folder or older messages).
    pub(super) async fn older_messages(&self, chat: ChatId) -> TgResult<Vec<Message>> {
        let (older, first) = self.with_chat(chat, |log| {
            (log.disk.older, log.messages.front().map(|m| m.id))
        })?;
        let Some(dir) = self.dir.as_ref().filter(|_| older) else {
            return Ok(Vec::new());
        };
        let path = layout::transcript_path(dir, chat);
        let folded = tokio::task::spawn_blocking(move || read_transcript(&path))
            .await
            .map_err(local)?
            .map_err(local)?
            .map_err(|e| TelegramError::Other(format!("transcript unreadable: {e}")))?;
        let mut all: Vec<Message> = folded.log.messages.into();
        if let Some(first) = first
            && let Some(at) = all.iter().position(|m| m.id == first)
        {
            all.truncate(at);
        }
        Ok(all)
    }

    /// A message of `chat` by id: from the window, else from the file.
    pub(super) async fn find_message(
        &self,
        chat: ChatId,
        id: MessageId,
    ) -> TgResult<Option<Message>> {
        let recent = self.with_chat(chat, |log| {
            log.messages.iter().find(|m| m.id == id).cloned()
        })?;
        if recent.is_some() {
            return Ok(recent);
        }
        Ok(self
            .older_messages(chat)
            .await?
            .into_iter()
            .find(|m| m.id == id))
    }

    /// The last `limit` messages of `chat`, reading the file when the window holds fewer.
    pub(super) async fn history(&self, chat: ChatId, limit: usize) -> TgResult<Vec<Message>> {
        let (mut recent, short) = self.with_chat(chat, |log| {
            let skip = log.messages.len().saturating_sub(limit);
            let recent: Vec<Message> = log.messages.iter().skip(skip).cloned().collect();
            (recent, log.messages.len() < limit && log.disk.older)
        })?;
        if short {
            let mut older = self.older_messages(chat).await?;
            let want = limit - recent.len();
            let from = older.len().saturating_sub(want);
            older.drain(..from);
            older.append(&mut recent);
            recent = older;
        }
        Ok(recent)
    }
}

/// Writes `work` to `path` (blocking), through `file` when it is open; returns the file to
/// keep open, if any.
fn write(
    path: &std::path::Path,
    file: Option<AppendFile>,
    work: &Work,
) -> (Option<AppendFile>, Result<(), store::StoreError>) {
    match work {
        // A new chat's file is created in place (no temp file, no rename, not synced, like
        // the appends); a file already there (an older form) is replaced whole.
        Work::Create(bytes) => match AppendFile::create(path, bytes) {
            Ok(Some(file)) => (Some(file), Ok(())),
            Ok(None) => (None, store::write_atomic(path, bytes)),
            Err(e) => (None, Err(e)),
        },
        Work::Append(bytes) => {
            let mut file = match file {
                Some(f) => f,
                None => match AppendFile::open(path) {
                    Ok(f) => f,
                    Err(e) => return (None, Err(e)),
                },
            };
            match file.append(bytes) {
                Ok(()) => (Some(file), Ok(())),
                Err(e) => (None, Err(e)),
            }
        }
    }
}

/// Keeps `file` open in `slot` within [`OPEN_FILES`], counting open files in `count`.
fn keep_file(
    count: &mut usize,
    had_file: bool,
    file: Option<AppendFile>,
    slot: &mut Option<AppendFile>,
) {
    match (had_file, file) {
        (true, Some(f)) => *slot = Some(f),
        (true, None) => *count = count.saturating_sub(1),
        (false, Some(f)) if *count < OPEN_FILES => {
            *count += 1;
            *slot = Some(f);
        }
        (false, _) => {}
    }
}
