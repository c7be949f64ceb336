//! The planner's window records: per chat, the first message of the history window it sent
//! last time (a cache hint that keeps the prompt prefix stable across restarts). Each agent's
//! records are one append-only journal, `windows/<agent>.log`, a JSON line per change
//! (`{"chat":…,"start":…}`), appended without a sync through `appender` (no temp file, rename
//! or directory made per chat; a record lost to a power loss is only recomputed). The first
//! use of an agent in a process reads its journal (a torn last line is ignored) and, when
//! more than half of it is superseded, rewrites it whole (`write_atomic`). Records of older
//! versions (`windows/<agent>/<chat>.json`, one file per chat) are still read when the
//! journal has none for the chat, but only if that directory exists (looked up once).
//!
//! **Written behind the store's batches.** A planner remembers a start without a file
//! ([`WindowRecords::remember`]: the line is queued in memory). When the runtime's store
//! writes them (`GraphStore::with_window_records`), the queued lines go out with the store's
//! next batch or checkpoint, which runs on the blocking pool anyway (a new chat's plan is
//! followed by its graph's batch): no trip of its own per new chat, which cost more than
//! the rest of a new chat's reply. Otherwise the caller flushes them itself
//! ([`Remembered::Flush`]). A queued line lost to a crash is only a recomputed hint; a clean
//! stop's full checkpoint writes it.
//!
//! It owns these files only; the planner decides what the window is. Calls that read or
//! write files block (async callers run them on the blocking pool); [`WindowRecords::known`]
//! and [`WindowRecords::remember`] never touch a file.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use super::StoreError;
use super::appender::AppendFile;
use super::files::{read_optional, write_atomic};
use super::layout::StateDir;
use crate::core::model::{ChatId, MessageId};

/// One line of the journal.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    chat: ChatId,
    start: Option<i64>,
}

impl Line {
    /// The line recording `chat`'s window start, with its newline.
    fn encode(chat: ChatId, start: Option<MessageId>) -> serde_json::Result<Vec<u8>> {
        let mut line = serde_json::to_vec(&Line {
            chat,
            start: start.map(|m| m.0),
        })?;
        line.push(b'\n');
        Ok(line)
    }
}

/// A record of the older form (one file per chat).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct OldRecord {
    #[allow(dead_code)]
    format: u32,
    window_start: Option<i64>,
}

#[derive(Default)]
struct AgentWindows {
    starts: HashMap<ChatId, Option<MessageId>>,
    file: Option<AppendFile>,
    /// The older per-chat directory exists.
    old_dir: bool,
    /// The journal is there but could not be read or rewritten: not appended to.
    loaded_broken: bool,
    /// Lines remembered and not written yet.
    queued: Vec<u8>,
}

/// What [`WindowRecords::remember`] leaves to its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remembered {
    /// Nothing: the start is unchanged, or its line is queued for the store's next write.
    Done,
    /// The line is queued: call [`WindowRecords::flush`] (on the blocking pool).
    Flush,
    /// The agent's records are not read yet: call [`WindowRecords::note`] (on the
    /// blocking pool).
    Note,
}

/// Every agent's window records, read once per agent and kept in memory.
pub struct WindowRecords {
    dir: StateDir,
    agents: Mutex<HashMap<String, AgentWindows>>,
    /// Calls of [`WindowRecords::get`] so far (each one a caller's trip to the blocking pool).
    gets: std::sync::atomic::AtomicU64,
    /// A store writes the queued lines with its batches ([`WindowRecords::write_behind`]).
    behind: std::sync::atomic::AtomicBool,
}

/// Rewritten whole at first use when it holds more than this many lines per chat.
const COMPACT_RATIO: usize = 2;
/// ... and at least this many lines.
const COMPACT_MIN: usize = 256;

impl WindowRecords {
    pub fn new(dir: StateDir) -> WindowRecords {
        WindowRecords {
            dir,
            agents: Mutex::new(HashMap::new()),
            gets: std::sync::atomic::AtomicU64::new(0),
            behind: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// From now on a store writes the queued lines ([`WindowRecords::flush`] with each of
    /// its batches and checkpoints): [`WindowRecords::remember`] leaves nothing to its caller.
    pub fn write_behind(&self) {
        self.behind
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Remembers `chat`'s window start without touching a file: a changed start's line is
    /// queued (see [`Remembered`] for what the caller still does).
    pub fn remember(&self, agent: &str, chat: ChatId, start: Option<MessageId>) -> Remembered {
        let mut all = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(windows) = all.get_mut(agent) else {
            return Remembered::Note;
        };
        match queue(windows, chat, start) {
            Ok(false) => Remembered::Done,
            // `note` says why.
            Err(_) => Remembered::Note,
            Ok(true) if self.behind.load(std::sync::atomic::Ordering::Relaxed) => Remembered::Done,
            Ok(true) => Remembered::Flush,
        }
    }

    /// Writes every queued line (blocks). A line that cannot be written is dropped (the
    /// error says where): it is a hint, recomputed when missing.
    pub fn flush(&self) -> Result<(), StoreError> {
        let mut all = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        let mut failed = None;
        for (agent, windows) in all.iter_mut().filter(|(_, w)| !w.queued.is_empty()) {
            let lines = std::mem::take(&mut windows.queued);
            let path = self.dir.windows_log_path(agent);
            if let Err(e) = append(windows, &path, &lines) {
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// How many times [`WindowRecords::get`] was called.
    pub fn gets(&self) -> u64 {
        self.gets.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The remembered window start of `chat` (`None`: none remembered).
    pub fn get(&self, agent: &str, chat: ChatId) -> Option<MessageId> {
        self.gets.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut all = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        let windows = self.agent(&mut all, agent);
        if let Some(start) = windows.starts.get(&chat) {
            return *start;
        }
        let start = if windows.old_dir {
            self.read_old(agent, chat)
        } else {
            None
        };
        windows.starts.insert(chat, start);
        start
    }

    /// `chat`'s window start when it is known without reading a file: its agent's records
    /// were read, and the chat has one or there are no older per-chat records to look in.
    /// `None`: not known, ask [`WindowRecords::get`] (on the blocking pool).
    pub fn known(&self, agent: &str, chat: ChatId) -> Option<Option<MessageId>> {
        let all = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
        let windows = all.get(agent)?;
        match windows.starts.get(&chat) {
            Some(start) => Some(*start),
            None if !windows.old_dir => Some(None),
            None => None,
        }
    }

    /// Remembers `chat`'s window start, reading the agent's records first if needed, and
    /// writes what is queued (a changed start's line after any queued before it, so the
    /// newest line of a chat is the one read back).
    pub fn note(
        &self,
        agent: &str,
        chat: ChatId,
        start: Option<MessageId>,
    ) -> Result<(), StoreError> {
        {
            let mut all = self.agents.lock().unwrap_or_else(PoisonError::into_inner);
            let windows = self.agent(&mut all, agent);
            queue(windows, chat, start).map_err(|e| StoreError::Io {
                action: "cannot encode a window record for",
                path: self.dir.windows_log_path(agent),
                source: std::io::Error::other(e),
            })?;
        }
        self.flush()
    }

    /// The agent's records, read at first use.
    fn agent<'a>(
        &self,
        all: &'a mut HashMap<String, AgentWindows>,
        agent: &str,
    ) -> &'a mut AgentWindows {
        all.entry(agent.to_string())
            .or_insert_with(|| self.load(agent))
    }

    fn load(&self, agent: &str) -> AgentWindows {
        let path = self.dir.windows_log_path(agent);
        let old_dir = self.dir.windows_dir(agent).is_dir();
        let mut out = AgentWindows {
            old_dir,
            ..AgentWindows::default()
        };
        let text = match read_optional(&path) {
            Ok(Some(text)) => text,
            Ok(None) => return out,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "window records unreadable; windows are recomputed");
                out.loaded_broken = true;
                return out;
            }
        };
        let mut lines = 0usize;
        for line in text.lines() {
            // A torn or damaged line costs only its hint.
            if let Ok(l) = serde_json::from_str::<Line>(line) {
                lines += 1;
                out.starts.insert(l.chat, l.start.map(MessageId));
            }
        }
        let torn = !text.is_empty() && !text.ends_with('\n');
        if torn || (lines >= COMPACT_MIN && lines > out.starts.len() * COMPACT_RATIO) {
            // Rewritten whole: superseded lines dropped, and a torn last line (which the next
            // append would join) gone.
            let mut whole = Vec::new();
            for (chat, start) in &out.starts {
                if let Ok(l) = Line::encode(*chat, *start) {
                    whole.extend_from_slice(&l);
                }
            }
            if let Err(e) = write_atomic(&path, &whole) {
                tracing::warn!(file = %path.display(), error = %e, "window records not rewritten; windows of this agent are not saved until the next start");
                out.loaded_broken = true;
                return out;
            }
        }
        out.file = AppendFile::open(&path).ok();
        out
    }

    fn read_old(&self, agent: &str, chat: ChatId) -> Option<MessageId> {
        let path = self.dir.window_path(agent, chat);
        match read_optional(&path) {
            Ok(Some(text)) => serde_json::from_str::<OldRecord>(&text)
                .ok()
                .and_then(|r| r.window_start.map(MessageId)),
            _ => None,
        }
    }
}

/// Queues the line of `chat`'s start when it changed; says whether it did.
fn queue(
    windows: &mut AgentWindows,
    chat: ChatId,
    start: Option<MessageId>,
) -> serde_json::Result<bool> {
    if windows.starts.get(&chat) == Some(&start) {
        return Ok(false);
    }
    let line = Line::encode(chat, start)?;
    windows.starts.insert(chat, start);
    windows.queued.extend_from_slice(&line);
    Ok(true)
}

/// Appends `lines` to the agent's journal at `path` (made on the first append).
fn append(windows: &mut AgentWindows, path: &Path, lines: &[u8]) -> Result<(), StoreError> {
    match windows.file.as_mut() {
        Some(file) => file.append(lines),
        None if windows.loaded_broken => Ok(()),
        None => {
            let file = match AppendFile::create(path, lines)? {
                Some(f) => f,
                None => {
                    let mut f = AppendFile::open(path)?;
                    f.append(lines)?;
                    f
                }
            };
            windows.file = Some(file);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::{Remembered, WindowRecords};
    use crate::adapters::store::StateDir;
    use crate::core::model::{ChatId, MessageId};

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    /// Records are appended to one file per agent (same inode, no per-chat file) and read
    /// back by the next process; an unchanged start appends nothing.
    #[test]
    fn records_are_appended_and_read_back() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let w = WindowRecords::new(StateDir::new(tmp.path()));
        w.note("Ann", ChatId(1), Some(MessageId(10)))?;
        let path = tmp.path().join("windows").join("Ann.log");
        let inode = std::fs::metadata(&path)?.ino();
        w.note("Ann", ChatId(2), None)?;
        w.note("Ann", ChatId(1), Some(MessageId(20)))?;
        w.note("Ann", ChatId(1), Some(MessageId(20)))?;
        assert_eq!(
            std::fs::metadata(&path)?.ino(),
            inode,
            "appended, not replaced"
        );
        assert_eq!(std::fs::read_to_string(&path)?.lines().count(), 3);
        let again = WindowRecords::new(StateDir::new(tmp.path()));
        assert_eq!(again.get("Ann", ChatId(1)), Some(MessageId(20)));
        assert_eq!(again.get("Ann", ChatId(2)), None);
        assert!(
            !tmp.path().join("windows").join("Ann").exists(),
            "no per-chat files"
        );
        Ok(())
    }

    /// A last line cut by a crash is dropped and the file rewritten, so the next record
    /// reads back; an older per-chat record is still read.
    #[test]
    fn a_torn_line_is_dropped_and_older_records_are_read() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("windows");
        std::fs::create_dir_all(dir.join("Ann"))?;
        std::fs::write(
            dir.join("Ann.log"),
            b"{\"chat\":1,\"start\":5}\n{\"chat\":2,\"st",
        )?;
        std::fs::write(
            dir.join("Ann").join("3.json"),
            b"{\"format\":1,\"window_start\":7}",
        )?;
        let w = WindowRecords::new(StateDir::new(tmp.path()));
        assert_eq!(w.get("Ann", ChatId(1)), Some(MessageId(5)));
        assert_eq!(
            w.get("Ann", ChatId(3)),
            Some(MessageId(7)),
            "the older form"
        );
        w.note("Ann", ChatId(2), Some(MessageId(9)))?;
        let again = WindowRecords::new(StateDir::new(tmp.path()));
        assert_eq!(again.get("Ann", ChatId(2)), Some(MessageId(9)));
        assert_eq!(again.get("Ann", ChatId(1)), Some(MessageId(5)));
        Ok(())
    }

    /// Once an agent's records are read, a chat's start is known without a file: a new
    /// chat has none, unless older per-chat records exist (then the chat's file is read).
    #[test]
    fn a_start_is_known_without_a_file_once_the_agent_is_read() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let w = WindowRecords::new(StateDir::new(tmp.path()));
        assert_eq!(w.known("Ann", ChatId(1)), None, "not read yet");
        assert_eq!(w.get("Ann", ChatId(1)), None);
        assert_eq!(w.known("Ann", ChatId(2)), Some(None), "a new chat");
        w.note("Ann", ChatId(3), Some(MessageId(4)))?;
        assert_eq!(w.known("Ann", ChatId(3)), Some(Some(MessageId(4))));

        std::fs::create_dir_all(tmp.path().join("windows/Bob"))?;
        std::fs::write(
            tmp.path().join("windows/Bob/5.json"),
            b"{\"format\":1,\"window_start\":7}",
        )?;
        assert_eq!(w.get("Bob", ChatId(1)), None);
        assert_eq!(w.known("Bob", ChatId(5)), None, "its older file is read");
        assert_eq!(w.get("Bob", ChatId(5)), Some(MessageId(7)));
        assert_eq!(w.known("Bob", ChatId(5)), Some(Some(MessageId(7))));
        Ok(())
    }

    /// A remembered start is queued, not written: `remember` asks for a `note` while the
    /// agent is not read, then for a flush, or for nothing once a store writes behind;
    /// `flush` writes what is queued, and a `note` after queued lines writes them first, so
    /// the newest start of a chat is the one read back.
    #[test]
    fn remembered_starts_are_queued_until_flushed_and_keep_their_order() -> TestResult {
        let tmp = tempfile::tempdir()?;
        let path = tmp.path().join("windows").join("Ann.log");
        let w = WindowRecords::new(StateDir::new(tmp.path()));
        assert_eq!(w.remember("Ann", ChatId(1), None), Remembered::Note);
        assert_eq!(w.get("Ann", ChatId(1)), None);
        assert_eq!(
            w.remember("Ann", ChatId(1), None),
            Remembered::Done,
            "unchanged"
        );
        assert_eq!(
            w.remember("Ann", ChatId(1), Some(MessageId(5))),
            Remembered::Flush
        );
        assert!(!path.exists(), "queued, not written");
        w.flush()?;
        let back = WindowRecords::new(StateDir::new(tmp.path()));
        assert_eq!(back.get("Ann", ChatId(1)), Some(MessageId(5)));

        w.write_behind();
        assert_eq!(
            w.remember("Ann", ChatId(1), Some(MessageId(6))),
            Remembered::Done,
            "the store writes it"
        );
        w.note("Ann", ChatId(1), Some(MessageId(7)))?;
        w.flush()?;
        let back = WindowRecords::new(StateDir::new(tmp.path()));
        assert_eq!(
            back.get("Ann", ChatId(1)),
            Some(MessageId(7)),
            "newest last"
        );
        Ok(())
    }
}
