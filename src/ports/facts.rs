//! The long-term memory port: where an agent's facts (`core::facts`) are kept. The file store
//! (`adapters::store::facts`) is the one implementation, also used by tests and the
//! playground (on a temporary state directory). Calls are blocking file work: async callers
//! run them with `spawn_blocking`. Each `apply` is one read-change-save step, serialized
//! within the process, so two chats writing one person's facts never lose a write.

use std::path::PathBuf;
use std::sync::Arc;

use crate::core::facts::{Applied, FactFile, FactScope, FactWrite, Refused, Source};
use crate::core::model::ChatId;
use crate::core::summaries::SummaryFile;

/// Why the memory store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum FactError {
    #[error(transparent)]
    Store(#[from] crate::ports::store::StoreError),
    /// A hand-edited file that does not read as facts: never overwritten.
    #[error("{}:{line}: {message}", file.display())]
    Unreadable {
        file: PathBuf,
        line: usize,
        message: String,
    },
    /// A memory file too large to read for a plan: left alone until the owner trims it.
    #[error("{}: {size} bytes, over the cap of {cap} bytes for a memory file (trim or archive it)", file.display())]
    TooLarge { file: PathBuf, size: u64, cap: u64 },
    /// A file made by hand while the store still took it for absent: not overwritten (the
    /// next read sees it).
    #[error("{}: made by hand meanwhile; not overwritten", file.display())]
    MadeMeanwhile { file: PathBuf },
}

/// An agent's facts, by scope.
pub trait FactStore: Send + Sync + 'static {
    /// One scope's facts (empty when it has no file).
    fn read(&self, agent: &str, scope: FactScope) -> Result<FactFile, FactError>;

    /// The owner's facts about the persona (`persona.md`), as written.
    fn persona_text(&self, agent: &str) -> Result<String, FactError>;

    /// Applies one write to one scope: read, change, save atomically. The inner result is
    /// the write's own fate (refused by a cap, or what it did).
    fn apply(
        &self,
        agent: &str,
        scope: FactScope,
        write: &FactWrite,
        source: &Source,
    ) -> Result<Result<Applied, Refused>, FactError>;

    /// Every person, chat and plans scope that has a file, and the intentions when they have
    /// one, sorted.
    fn scopes(&self, agent: &str) -> Result<Vec<FactScope>, FactError>;

    /// A chat's rolling summaries (empty when it has none).
    fn summaries(&self, agent: &str, chat: ChatId) -> Result<SummaryFile, FactError>;

    /// Every chat with a summaries file, sorted.
    fn summary_chats(&self, agent: &str) -> Result<Vec<ChatId>, FactError>;

    /// A chat starts anew at message `first` (`Reset Context On First Message`): once per
    /// `first`, its summaries (and with `notes`, its notes) leave the prompt: they are moved
    /// to an archive under the agent's memory, never deleted. Returns the files moved, or
    /// `None` when this start was already handled.
    /// `intents` (the chat's scheduled intents as text, when they go too) is archived beside.
    fn fresh_start(
        &self,
        agent: &str,
        chat: ChatId,
        first: crate::core::model::MessageId,
        notes: bool,
        intents: &str,
    ) -> Result<Option<Vec<PathBuf>>, FactError>;

    /// Saves a chat's summaries (only its `summarize` tasks write them, one at a time).
    fn save_summaries(
        &self,
        agent: &str,
        chat: ChatId,
        file: &SummaryFile,
    ) -> Result<(), FactError>;

    /// Whether every one of `files` is known absent right now, answered from what the store
    /// remembers, with no system call (`false`: not known, read them). A plan of a chat
    /// whose memory files are all known absent does not go to the blocking pool.
    fn known_absent(&self, _agent: &str, _files: &[MemoryFile]) -> bool {
        false
    }
}

/// A memory file a plan reads: one scope's facts, or a chat's summaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryFile {
    Facts(FactScope),
    Summaries(ChatId),
}

pub type SharedFacts = Arc<dyn FactStore>;
