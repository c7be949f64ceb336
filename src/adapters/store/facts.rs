//! The file store of long-term memory: one Markdown file per scope under
//! `<state>/<agent>/memory/` (`persona.md`, `people/<user>.md`, `chats/<chat>.md`), each read
//! and written whole, atomically. Implements [`FactStore`]. A facts file is parsed once per
//! change: the parsed file is kept (bounded, see [`CACHE_BYTES`]) with the file's stamp (size,
//! times, inode), and read again when the stamp differs, so hand edits are seen on the next
//! use and the store's own writes drop the kept copy. A file past [`WARN_BYTES`] is warned
//! about once per change; one past [`MAX_BYTES`] is refused with its size (planning goes on
//! without it). A file that does not read as facts is reported with its line and never
//! overwritten. A process keeps one `FileFacts` (built with the services and shared by
//! the runtime's handlers and the owner's commands): it is each agent's one writer, and
//! serializes that agent's read-change-save steps itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::absent::{Absent, Lookup};
use super::files::{read_optional, write_atomic};
use super::layout::StateDir;
use crate::core::facts::{
    Applied, DEFAULT_SCOPE_BYTES, FactFile, FactScope, FactWrite, Refused, Source,
};
use crate::core::model::ChatId;
use crate::core::summaries::SummaryFile;
use crate::ports::facts::{FactError, FactStore, MemoryFile};
use crate::ports::store::StoreError;

/// A facts file past this size is warned about (once per change): it is read whole for
/// every plan of its chat, though the prompt shows only its newest part.
pub const WARN_BYTES: u64 = 1 << 20;
/// A facts file past this size is not read (an error naming it and its size); the chat is
/// planned without it until the owner trims it.
pub const MAX_BYTES: u64 = 16 << 20;
/// The parsed files kept, by their size on disk: past this, the oldest kept are dropped.
pub const CACHE_BYTES: u64 = 32 << 20;

/// Facts as files under a state directory.
pub struct FileFacts {
    dir: StateDir,
    cap: usize,
    /// One lock per agent: its read-change-save steps run one at a time (the runtime's
    /// handlers and the owner's commands share this store).
    writing: Mutex<HashMap<String, Arc<Mutex<()>>>>,
    /// Parsed facts files, by path, with the stamp they were read under.
    parsed: Mutex<Parsed>,
    /// Memory files known absent (with a clock; without one every read asks the disk).
    absent: Option<Absent>,
    /// Memory files asked for so far (answered by the absent cache or the disk).
    asked: std::sync::atomic::AtomicU64,
}

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
    inode: (u64, u64),
}

impl Stamp {
    /// The file's stamp; an error when it is not there (or cannot be looked at).
    fn of(path: &Path) -> std::io::Result<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path)?;
        Ok(Stamp {
            len: m.len(),
            modified: (m.mtime(), m.mtime_nsec()),
            changed: (m.ctime(), m.ctime_nsec()),
            inode: (m.dev(), m.ino()),
        })
    }
}

/// The kept parsed files, oldest first by when they were read.
#[derive(Default)]
struct Parsed {
    files: HashMap<PathBuf, (Stamp, u64, FactFile)>,
    order: std::collections::VecDeque<(PathBuf, u64)>,
    bytes: u64,
    next: u64,
    /// Files parsed so far (not served from the kept copies).
    parses: u64,
}

impl Parsed {
    fn get(&self, path: &Path, stamp: Stamp) -> Option<FactFile> {
        self.files
            .get(path)
            .filter(|(s, _, _)| *s == stamp)
            .map(|(_, _, f)| f.clone())
    }

    fn forget(&mut self, path: &Path) {
        if let Some((stamp, _, _)) = self.files.remove(path) {
            self.bytes -= stamp.len;
        }
    }

    fn keep(&mut self, path: PathBuf, stamp: Stamp, file: FactFile) {
        self.forget(&path);
        if stamp.len > CACHE_BYTES {
            return;
        }
        self.next += 1;
        self.order.push_back((path.clone(), self.next));
        self.files.insert(path, (stamp, self.next, file));
        self.bytes += stamp.len;
        while self.bytes > CACHE_BYTES {
            let Some((old, n)) = self.order.pop_front() else {
                break;
            };
            if self.files.get(&old).is_some_and(|(_, at, _)| *at == n) {
                self.forget(&old);
            }
        }
        // Entries of paths kept again later linger in `order`; drop them past a bound.
        if self.order.len() > 4 * self.files.len() + 64 {
            let files = &self.files;
            self.order
                .retain(|(p, n)| files.get(p).is_some_and(|(_, at, _)| at == n));
        }
    }
}

impl FileFacts {
    pub fn new(dir: StateDir) -> FileFacts {
        FileFacts {
            dir,
            cap: DEFAULT_SCOPE_BYTES,
            writing: Mutex::default(),
            parsed: Mutex::default(),
            absent: None,
            asked: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Remembers which memory files are absent, rechecking their directories at most once
    /// a second on `clock` (see [`super::absent`]): the daemon's store.
    pub fn with_absent_cache(mut self, clock: crate::ports::clock::SharedClock) -> FileFacts {
        self.absent = Some(Absent::new(clock));
        self
    }

    /// Memory files asked for so far, whether the absent cache or the disk answered (not
    /// what [`FactStore::known_absent`] answers).
    pub fn asked(&self) -> u64 {
        self.asked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Memory files found absent on disk so far (0 without the absent cache).
    pub fn absent_misses(&self) -> u64 {
        self.absent.as_ref().map_or(0, Absent::misses)
    }

    /// Whether `path` is known absent (no system call); otherwise the token to report an
    /// absence with.
    fn lookup(&self, path: &Path) -> Lookup {
        self.asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.absent
            .as_ref()
            .map_or(Lookup::Read(0), |a| a.lookup(path))
    }

    /// A memory file as text (`None` when absent), through the absent cache.
    fn read_text(&self, path: &Path) -> Result<Option<String>, FactError> {
        let token = self.lookup(path);
        if token == Lookup::Absent {
            return Ok(None);
        }
        let text = read_optional(path)?;
        if text.is_none()
            && let Some(absent) = &self.absent
        {
            absent.absent(path, token);
        }
        Ok(text)
    }

    /// The store wrote `path`: its absence is forgotten at once.
    fn written(&self, path: &Path) {
        if let Some(absent) = &self.absent {
            absent.written(path);
        }
    }

    /// Reads and parses one memory file (a missing one is empty); a parse error names the
    /// file and line.
    fn read_parsed<T: Default>(
        &self,
        path: PathBuf,
        parse: impl Fn(&str) -> Result<T, crate::core::facts::ParseError>,
    ) -> Result<T, FactError> {
        let text = self.read_text(&path)?;
        parse_text(path, text, parse)
    }

    /// How many facts files were parsed (read from disk) so far.
    pub fn parses(&self) -> u64 {
        self.parsed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .parses
    }

    /// One scope's facts: the kept copy while the file is unchanged, else read and parsed.
    fn read_facts(&self, path: PathBuf) -> Result<FactFile, FactError> {
        let token = self.lookup(&path);
        if token == Lookup::Absent {
            return Ok(FactFile::default());
        }
        let stamp = match Stamp::of(&path) {
            Ok(stamp) => stamp,
            Err(e) => {
                self.parsed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .forget(&path);
                // Absent by its stamp: remembered, and not opened as well.
                if let Some(absent) = &self.absent
                    && e.kind() == std::io::ErrorKind::NotFound
                {
                    absent.absent(&path, token);
                    return Ok(FactFile::default());
                }
                return self.read_parsed(path, FactFile::parse);
            }
        };
        if let Some(file) = self
            .parsed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&path, stamp)
        {
            return Ok(file);
        }
        if stamp.len > MAX_BYTES {
            return Err(FactError::TooLarge {
                file: path,
                size: stamp.len,
                cap: MAX_BYTES,
            });
        }
        if stamp.len > WARN_BYTES {
            tracing::warn!(event = "memory_file_large", file = %path.display(), bytes = stamp.len, warn_at = WARN_BYTES, refused_at = MAX_BYTES, "a memory file is large: it is read whole for each plan of its chat, though the prompt shows only its newest part; trim or archive it");
        }
        let file = parse_text(path.clone(), read_optional(&path)?, FactFile::parse)?;
        let mut parsed = self.parsed.lock().unwrap_or_else(PoisonError::into_inner);
        parsed.parses += 1;
        parsed.keep(path, stamp, file.clone());
        Ok(file)
    }

    /// Drops the kept copy of a file this store is about to write.
    fn forget(&self, path: &Path) {
        self.parsed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .forget(path);
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

/// Parses the text of the memory file at `path` (`None`: missing, so empty); a parse error
/// names the file and line.
fn parse_text<T: Default>(
    path: std::path::PathBuf,
    text: Option<String>,
    parse: impl Fn(&str) -> Result<T, crate::core::facts::ParseError>,
) -> Result<T, FactError> {
    match text {
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
        self.read_facts(self.dir.facts_path(agent, scope))
    }

    fn persona_text(&self, agent: &str) -> Result<String, FactError> {
        let path = self.dir.facts_path(agent, FactScope::Persona);
        Ok(self.read_text(&path)?.unwrap_or_default())
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
        // Read from disk, not from the absent cache: a file made by hand a moment ago is
        // changed, never replaced.
        self.written(&self.dir.facts_path(agent, scope));
        let mut file = self.read(agent, scope)?;
        let applied = file.apply(scope, write, source, self.cap);
        // Every applied write is saved (a delete of nothing too: its task id is recorded).
        if matches!(&applied, Ok(a) if *a != Applied::AlreadyApplied) {
            let path = self.dir.facts_path(agent, scope);
            self.dir.check_guard().map_err(StoreError::from)?;
            self.forget(&path);
            write_atomic(&path, file.render(scope).as_bytes())?;
            self.written(&path);
        }
        Ok(applied)
    }

    fn summaries(&self, agent: &str, chat: ChatId) -> Result<SummaryFile, FactError> {
        self.read_parsed(self.dir.summaries_path(agent, chat), SummaryFile::parse)
    }

    fn known_absent(&self, agent: &str, files: &[MemoryFile]) -> bool {
        let Some(absent) = &self.absent else {
            return false;
        };
        let paths: Vec<PathBuf> = files
            .iter()
            .map(|file| match *file {
                MemoryFile::Facts(scope) => self.dir.facts_path(agent, scope),
                MemoryFile::Summaries(chat) => self.dir.summaries_path(agent, chat),
            })
            .collect();
        absent.known(&paths)
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
            files.push((
                self.dir.facts_path(agent, FactScope::Plans(chat)),
                "plans.md",
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
        // What the caller read may have come from the absent cache: a file made by hand
        // since is not overwritten.
        if self.lookup(&path) == Lookup::Absent && std::fs::symlink_metadata(&path).is_ok() {
            self.written(&path);
            return Err(FactError::MadeMeanwhile { file: path });
        }
        write_atomic(&path, file.render().as_bytes())?;
        self.written(&path);
        Ok(())
    }

    fn scopes(&self, agent: &str) -> Result<Vec<FactScope>, FactError> {
        let root = self.dir.facts_dir(agent);
        let mut out = Vec::new();
        for (sub, make) in [
            ("people", FactScope::Person as fn(i64) -> FactScope),
            ("chats", |id| FactScope::Chat(ChatId(id))),
            ("plans", |id| FactScope::Plans(ChatId(id))),
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
        if std::fs::symlink_metadata(self.dir.facts_path(agent, FactScope::Intentions)).is_ok() {
            out.push(FactScope::Intentions);
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remember(facts: &FileFacts, scope: FactScope, task: &str, content: &str) {
        let source = Source {
            task: task.into(),
            name: Some("Alice".into()),
            chat: ChatId(7),
            message: None,
            at: jiff::Timestamp::UNIX_EPOCH,
        };
        let write = FactWrite {
            id: None,
            content: content.into(),
        };
        let applied = facts.apply("Tess", scope, &write, &source);
        assert!(matches!(applied, Ok(Ok(_))), "{applied:?}");
    }

    /// A facts file is parsed once per change: reading it again for the next plan uses the
    /// kept copy; the store's own write and a hand edit are both seen on the next read.
    #[test]
    fn a_facts_file_is_parsed_once_per_change() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let facts = FileFacts::new(StateDir::new(tmp.path()));
        let scope = FactScope::Person(7);
        remember(&facts, scope, "t1", "likes tea");
        let after_write = facts.parses();
        for _ in 0..5 {
            assert!(
                facts
                    .read("Tess", scope)?
                    .prompt_lines(4096)
                    .contains("likes tea")
            );
        }
        assert_eq!(
            facts.parses(),
            after_write + 1,
            "read again though unchanged"
        );
        remember(&facts, scope, "t2", "has a cat");
        let lines = facts.read("Tess", scope)?.prompt_lines(4096);
        assert!(
            lines.contains("has a cat"),
            "the store's own write unseen: {lines}"
        );
        let path = StateDir::new(tmp.path()).facts_path("Tess", scope);
        let text = std::fs::read_to_string(&path)?;
        std::fs::write(&path, text.replace("likes tea", "likes strong coffee"))?;
        let lines = facts.read("Tess", scope)?.prompt_lines(4096);
        assert!(
            lines.contains("likes strong coffee"),
            "a hand edit unseen: {lines}"
        );
        assert!(!lines.contains("likes tea"), "{lines}");
        Ok(())
    }

    /// A memory file past the cap is not read: the error names it and its size, and the
    /// file is left as it is.
    #[test]
    fn a_memory_file_past_the_cap_is_refused_by_name() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let dir = StateDir::new(tmp.path());
        let facts = FileFacts::new(dir.clone());
        let scope = FactScope::Chat(ChatId(-5));
        let path = dir.facts_path("Tess", scope);
        std::fs::create_dir_all(path.parent().ok_or("no parent")?)?;
        std::fs::File::create(&path)?.set_len(MAX_BYTES + 1)?;
        let err = facts.read("Tess", scope).err().map(|e| e.to_string());
        let err = err.ok_or("an oversized file was read")?;
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains(&(MAX_BYTES + 1).to_string()), "{err}");
        assert_eq!(std::fs::metadata(&path)?.len(), MAX_BYTES + 1);
        Ok(())
    }

    /// The kept copies are bounded by their files' sizes: past the bound the oldest go.
    #[test]
    fn the_kept_copies_stay_within_their_bound() {
        let mut parsed = Parsed::default();
        let stamp = |len| Stamp {
            len,
            modified: (0, 0),
            changed: (0, 0),
            inode: (0, 0),
        };
        for i in 0..10 {
            parsed.keep(
                PathBuf::from(format!("f{i}")),
                stamp(CACHE_BYTES / 4),
                FactFile::default(),
            );
        }
        assert!(parsed.bytes <= CACHE_BYTES, "{}", parsed.bytes);
        assert_eq!(parsed.files.len(), 4);
        assert!(
            parsed
                .get(Path::new("f9"), stamp(CACHE_BYTES / 4))
                .is_some()
        );
        assert!(
            parsed
                .get(Path::new("f0"), stamp(CACHE_BYTES / 4))
                .is_none()
        );
    }
}
