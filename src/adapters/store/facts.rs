//! The file store of long-term memory: one Markdown file per scope under
//! `<state>/<agent>/memory/` (`persona.md`, `people/<user>.md`, `chats/<chat>.md`), each read
//! and written whole, atomically. Implements [`FactStore`]. Hand edits are read on the next
//! use (nothing is cached); a file that does not read as facts is reported with its line and
//! never overwritten. A process keeps one `FileFacts` (built with the services and shared by
//! the runtime's handlers and the owner's commands): it is each agent's one writer, and
//! serializes that agent's read-change-save steps itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::files::{read_optional, write_atomic};
use super::layout::StateDir;
use crate::core::facts::{
    Applied, DEFAULT_SCOPE_BYTES, FactFile, FactScope, FactWrite, Refused, Source,
};
use crate::core::model::ChatId;
use crate::core::summaries::SummaryFile;
use crate::ports::facts::{FactError, FactStore};

/// Facts as files under a state directory.
pub struct FileFacts {
    dir: StateDir,
    cap: usize,
    /// One lock per agent: its read-change-save steps run one at a time (the runtime's
    /// handlers and the owner's commands share this store).
    writing: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl FileFacts {
    pub fn new(dir: StateDir) -> FileFacts {
        FileFacts {
            dir,
            cap: DEFAULT_SCOPE_BYTES,
            writing: Mutex::default(),
        }
    }

    /// The agent's write lock.
    fn writer(&self, agent: &str) -> Arc<Mutex<()>> {
        let mut all = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(all.entry(agent.to_string()).or_default())
    }

    /// Sets the cap on one scope's prompt form, in bytes.
    pub fn with_scope_cap(mut self, bytes: usize) -> FileFacts {
        self.cap = bytes.max(256);
        self
    }
}

/// Reads and parses one memory file (a missing one is empty); a parse error names the file
/// and line.
fn read_parsed<T: Default>(
    path: std::path::PathBuf,
    parse: impl Fn(&str) -> Result<T, crate::core::facts::ParseError>,
) -> Result<T, FactError> {
    match read_optional(&path)? {
        None => Ok(T::default()),
        Some(text) => parse(&text).map_err(|e| FactError::Unreadable {
            file: path,
            line: e.line,
            message: e.message,
        }),
    }
}

impl FactStore for FileFacts {
    fn read(&self, agent: &str, scope: FactScope) -> Result<FactFile, FactError> {
        read_parsed(self.dir.facts_path(agent, scope), FactFile::parse)
    }

    fn persona_text(&self, agent: &str) -> Result<String, FactError> {
        let path = self.dir.facts_path(agent, FactScope::Persona);
        Ok(read_optional(&path)?.unwrap_or_default())
    }

    fn apply(
        &self,
        agent: &str,
        scope: FactScope,
        write: &FactWrite,
        source: &Source,
    ) -> Result<Result<Applied, Refused>, FactError> {
        let writer = self.writer(agent);
        let _one_at_a_time = writer.lock().unwrap_or_else(PoisonError::into_inner);
        let mut file = self.read(agent, scope)?;
        let applied = file.apply(scope, write, source, self.cap);
        // Every applied write is saved (a delete of nothing too: its task id is recorded).
        if matches!(&applied, Ok(a) if *a != Applied::AlreadyApplied) {
            let path = self.dir.facts_path(agent, scope);
            write_atomic(&path, file.render(scope).as_bytes())?;
        }
        Ok(applied)
    }

    fn summaries(&self, agent: &str, chat: ChatId) -> Result<SummaryFile, FactError> {
        read_parsed(self.dir.summaries_path(agent, chat), SummaryFile::parse)
    }

    fn summary_chats(&self, agent: &str) -> Result<Vec<ChatId>, FactError> {
        let Ok(entries) = std::fs::read_dir(self.dir.facts_dir(agent).join("summaries")) else {
            return Ok(Vec::new());
        };
        let mut out: Vec<ChatId> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                name.to_string_lossy()
                    .strip_suffix(".md")
                    .and_then(|n| n.parse().ok())
                    .map(ChatId)
            })
            .collect();
        out.sort();
        Ok(out)
    }

    fn fresh_start(
        &self,
        agent: &str,
        chat: ChatId,
        first: crate::core::model::MessageId,
        notes: bool,
        intents: &str,
    ) -> Result<Option<Vec<std::path::PathBuf>>, FactError> {
        let writer = self.writer(agent);
        let _one_at_a_time = writer.lock().unwrap_or_else(PoisonError::into_inner);
        let marker = self.dir.reset_marker_path(agent, chat);
        let line = format!("first message after the reset: {first}\n");
        if read_optional(&marker)?.is_some_and(|t| t == line) {
            return Ok(None);
        }
        let archive = self.dir.reset_archive_dir(agent, chat, first.0);
        let mut moved = Vec::new();
        let mut files = vec![(self.dir.summaries_path(agent, chat), "summaries.md")];
        if notes {
            files.push((
                self.dir.facts_path(agent, FactScope::Chat(chat)),
                "notes.md",
            ));
        }
        for (path, name) in files {
            if std::fs::symlink_metadata(&path).is_ok() {
                super::files::ensure_private_dir(&archive)?;
                let to = archive.join(name);
                super::files::move_file(&path, &to)?;
                moved.push(to);
            }
        }
        if !intents.trim().is_empty() {
            let to = archive.join("intents.md");
            write_atomic(&to, intents.as_bytes())?;
            moved.push(to);
        }
        write_atomic(&marker, line.as_bytes())?;
        Ok(Some(moved))
    }

    fn save_summaries(
        &self,
        agent: &str,
        chat: ChatId,
        file: &SummaryFile,
    ) -> Result<(), FactError> {
        let path = self.dir.summaries_path(agent, chat);
        Ok(write_atomic(&path, file.render().as_bytes())?)
    }

    fn scopes(&self, agent: &str) -> Result<Vec<FactScope>, FactError> {
        let root = self.dir.facts_dir(agent);
        let mut out = Vec::new();
        for (sub, make) in [
            ("people", FactScope::Person as fn(i64) -> FactScope),
            ("chats", |id| FactScope::Chat(ChatId(id))),
        ] {
            let Ok(entries) = std::fs::read_dir(root.join(sub)) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if let Some(id) = name.strip_suffix(".md").and_then(|n| n.parse().ok()) {
                    out.push(make(id));
                }
            }
        }
        out.sort();
        Ok(out)
    }
}
