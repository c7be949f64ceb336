//! The runtime's durable state on disk: one graph file per conversation under `graphs/`
//! (encoded by the graph codec) and each agent's safety state (`agent-state.json`). It
//! implements the store port ([`RuntimeStore`]) the runtime writes through, and serves
//! `state list/show/clear`. Unreadable files are moved to `quarantine/`, never deleted.
//! Paths come from [`StateDir`]; bytes go through the crash-safe primitives in `files`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use super::files::{
    GRAPH_FILE_CAP, Symlinks, TEMP_PREFIX, apply_batch, ensure_private_dir, io_err, optional,
    quarantine, read_file, read_optional, read_to_string, remove, utf8, write_json,
};
use super::layout::{AGENT_STATE_FILE, StateDir, fs_name};
use crate::core::agent_state::AgentState;
use crate::core::graph::codec::{self, CodecError};
use crate::core::graph::{ConversationKey, TaskGraph};
use crate::core::model::ChatId;
use crate::ports::store::{Commit, LoadedGraphs, Quarantined, RuntimeStore, StoreError, Write};

use super::journal::Record;
use super::journaled::Journals;
use super::replay::{replay, replay_agent_only};

/// The journal's graphs by the path of their checkpoint file.
fn journal_by_path(
    dir: &StateDir,
    graphs: std::collections::HashMap<ConversationKey, Option<TaskGraph>>,
) -> ByPath {
    graphs
        .into_iter()
        .map(|(key, g)| (dir.graph_path(&key), (key, g)))
        .collect()
}

/// The journal's graphs (`None`: deleted) by their file's path.
type ByPath = std::collections::HashMap<PathBuf, (ConversationKey, Option<TaskGraph>)>;

/// The files with the journal's states over them: a file the journal names shows the
/// journal's graph (or goes, when the journal deleted it); graphs only in the journal are
/// added. Sorted by path.
fn overlay(
    files: Vec<GraphFile>,
    mut journal: ByPath,
    check: impl Fn(TaskGraph) -> Result<TaskGraph, RecordError>,
) -> Vec<GraphFile> {
    let mut out = Vec::with_capacity(files.len());
    for file in files {
        match journal.remove(&file.path) {
            None => out.push(file),
            Some((_, None)) => {}
            Some((_, Some(g))) => out.push(GraphFile {
                graph: check(g),
                path: file.path,
                from_journal: true,
            }),
        }
    }
    for (path, (_, g)) in journal {
        if let Some(g) = g {
            out.push(GraphFile {
                graph: check(g),
                path,
                from_journal: true,
            });
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// Why a saved record (a graph, an agent state) is unusable.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Read(#[from] StoreError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Decode(#[from] CodecError),
    #[error("it describes conversation {key} whose file is {}", expected.display())]
    Misplaced {
        key: ConversationKey,
        expected: PathBuf,
    },
    #[error("a second file for conversation {0}")]
    Duplicate(ConversationKey),
}

/// Loads an agent's persisted safety state. A missing file is a fresh state; an unreadable
/// one is moved to `quarantine/` (returned so the caller can log it) and a fresh state used.
pub fn load_agent_state(
    dir: &StateDir,
    agent: &str,
) -> Result<(AgentState, Option<Quarantined>), StoreError> {
    let path = dir.agent_state_path(agent);
    let unusable = match read_optional(&path) {
        Ok(None) => return Ok((AgentState::default(), None)),
        Ok(Some(text)) => match serde_json::from_str(&text) {
            Ok(state) => return Ok((state, None)),
            Err(e) => e.to_string(),
        },
        // Not a regular file, too big, a link, not UTF-8: moved aside like bad JSON.
        Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::InvalidData => {
            source.to_string()
        }
        Err(e) => return Err(e),
    };
    let moved_to = dir.quarantine_path(&fs_name(agent), AGENT_STATE_FILE);
    quarantine(&path, &moved_to, &unusable)?;
    Ok((
        AgentState::default(),
        Some(Quarantined {
            original: path,
            moved_to,
            reason: unusable,
        }),
    ))
}

/// Every agent state file under the state directory, by agent directory name, for display.
pub fn list_agent_states(dir: &StateDir) -> Vec<(String, Result<AgentState, RecordError>)> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir.root()) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path().join(AGENT_STATE_FILE);
        if fs::symlink_metadata(&path).is_err() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let state = read_to_string(&path)
            .map_err(RecordError::from)
            .and_then(|t| serde_json::from_str(&t).map_err(RecordError::from));
        out.push((name, state));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Saves an agent's safety state crash-safely.
pub fn save_agent_state(dir: &StateDir, agent: &str, state: &AgentState) -> Result<(), StoreError> {
    write_json(&dir.agent_state_path(agent), state)
}

/// One graph file as read by `state list`/`show`: parsed, or the reason it is not.
#[derive(Debug)]
pub struct GraphFile {
    pub path: PathBuf,
    pub graph: Result<TaskGraph, RecordError>,
    /// The graph shown is the journal's, newer than the file (a running daemon writes the
    /// file as a checkpoint a moment later), or the file is not there yet.
    pub from_journal: bool,
}

/// Reads and writes graph files and agent states: the [`RuntimeStore`], journaled (see
/// `journaled`): the files are its checkpoints.
#[derive(Clone)]
pub struct GraphStore {
    dir: StateDir,
    journals: std::sync::Arc<Journals>,
    /// The planner's window records, written behind this store's batches and checkpoints.
    windows: Option<std::sync::Arc<super::windows::WindowRecords>>,
}

impl std::fmt::Debug for GraphStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphStore")
            .field("dir", &self.dir.root())
            .finish_non_exhaustive()
    }
}

impl RuntimeStore for GraphStore {
    fn load_all(&self, now: Timestamp) -> Result<LoadedGraphs, StoreError> {
        GraphStore::load_all(self, now)
    }

    fn load_graph(
        &self,
        key: &ConversationKey,
        now: Timestamp,
    ) -> Result<(Option<TaskGraph>, Option<Quarantined>), StoreError> {
        // No checkpoint moves the state from the journal to the file meanwhile.
        let _files_still = self.journals.hold_checkpoints();
        if let Some(pending) = self.journals.pending_graph(key) {
            return Ok((pending, None));
        }
        let path = self.dir.graph_path(key);
        let Some(bytes) = optional(read_file(&path, GRAPH_FILE_CAP, Symlinks::Refuse))? else {
            return Ok((None, None));
        };
        match self.decode_bytes(&path, bytes, now) {
            Ok(graph) => Ok((Some(graph), None)),
            Err(e) => Ok((None, Some(self.set_aside(path, e.to_string())?))),
        }
    }

    fn load_agent_state(
        &self,
        agent: &str,
    ) -> Result<(AgentState, Option<Quarantined>), StoreError> {
        let (file_state, quarantined) = load_agent_state(&self.dir, agent)?;
        // The journal's newer state wins over the file's; handled marks from every source
        // (an older file's, `handled.json`, the journal's) are merged.
        let mut state = self
            .journals
            .pending_state(agent)
            .unwrap_or_else(|| file_state.clone());
        // Marks of an older `agent-state.json` (bare ids) are journaled: the file is rewritten
        // without them by the next checkpoint of the state, and `handled.json` gets them only
        // when a segment retires.
        let known = self.journals.marks(agent);
        let legacy: Vec<Record> = file_state
            .handled
            .iter()
            .filter(|(chat, m)| known.get(chat).is_none_or(|k| k.message < m.message))
            .map(|(chat, m)| Record::Handled(ConversationKey::new(agent, *chat), *m))
            .collect();
        if !legacy.is_empty() {
            self.dir.check_guard()?;
            self.journals
                .append(&self.dir, agent, legacy, Commit::Now)?;
        }
        self.journals.load_marks(&self.dir, agent)?;
        state.handled = self.journals.marks(agent);
        let controls = super::legacy::fold_controls(&self.dir, agent, &mut state);
        Ok((state, quarantined.or(controls)))
    }

    fn load_presence(
        &self,
        agent: &str,
        today: jiff::civil::Date,
    ) -> Result<crate::ports::store::LoadedPresence, StoreError> {
        super::presence::load(&self.dir, agent, today)
    }

    fn write_batch(&self, writes: Vec<Write>, commit: Commit) -> Result<(), StoreError> {
        GraphStore::write_batch(self, writes, commit)
    }

    fn hurry(&self, waiting: bool) {
        self.journals.hurry(waiting);
    }

    fn checkpoint(
        &self,
        full: bool,
        now: Timestamp,
    ) -> Result<crate::ports::store::CheckpointReport, StoreError> {
        self.dir.check_guard()?;
        self.flush_windows();
        let report = self.journals.checkpoint(&self.dir, full, now)?;
        if full {
            self.write_packs();
        }
        Ok(report)
    }
}

/// `f` over `items` on up to four threads side by side (startup with thousands of graphs),
/// in order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let per_thread = items.len().div_ceil(threads).max(64);
    if items.len() <= per_thread {
        return items.iter().map(&f).collect();
    }
    let f = &f;
    let out = std::thread::scope(|s| {
        let workers: Vec<_> = items
            .chunks(per_thread)
            .map(|chunk| s.spawn(move || chunk.iter().map(f).collect::<Vec<_>>()))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join())
            .collect::<Result<Vec<_>, _>>()
    });
    match out {
        Ok(parts) => parts.into_iter().flatten().collect(),
        // A decoder panic is a bug; go on sequentially rather than lose the files.
        Err(_) => items.iter().map(f).collect(),
    }
}

/// Whether every time in `graph` is within the horizon from `now` (a graph file's and a
/// journal record's check alike).
fn within_horizon(graph: &TaskGraph, now: Timestamp) -> Result<(), CodecError> {
    graph
        .check_horizon(now)
        .map_err(|e| CodecError::Invalid(e.0))
}

/// How deep under the state directory stale temp files are looked for (`<agent>/memory/chats`
/// is three levels down).
const TEMP_SCAN_DEPTH: usize = 5;
/// A temp file outside the graph folders older than this is a crash's leftover (a write
/// takes milliseconds).
const TEMP_STALE_AFTER: std::time::Duration = std::time::Duration::from_secs(60);

impl GraphStore {
    pub fn new(dir: StateDir) -> GraphStore {
        GraphStore {
            dir,
            journals: std::sync::Arc::new(Journals::new()),
            windows: None,
        }
    }

    /// The same store writing `windows`' queued lines with each batch and checkpoint (on the
    /// blocking pool, where they run): a planner's new window record costs no trip of its
    /// own (`store::windows`).
    pub fn with_window_records(
        mut self,
        windows: std::sync::Arc<super::windows::WindowRecords>,
    ) -> GraphStore {
        windows.write_behind();
        self.windows = Some(windows);
        self
    }

    /// The same store with batches no task waits for synced at once (no group-commit wait).
    pub fn with_commit_delay(mut self, delay: std::time::Duration) -> GraphStore {
        self.journals = std::sync::Arc::new(Journals::new().with_commit_delay(delay));
        self
    }

    pub fn state_dir(&self) -> &StateDir {
        &self.dir
    }

    /// Writes the graph crash-safely.
    pub fn save(&self, graph: &TaskGraph) -> Result<(), StoreError> {
        self.dir.check_guard()?;
        let text = super::files::encode_graph(graph)?;
        let path = self.dir.graph_path(&graph.key());
        self.unpack(&path)?;
        super::files::write_atomic(&path, text.as_bytes())
    }

    /// Carries out a batch of writes durably: graph changes, agent states and handled
    /// marks as journal records (one sync per agent), schedule days and intents as files
    /// (see [`apply_batch`]). Nothing is written once the directory is no longer the one
    /// locked ([`StoreError::Gone`]): writing would make it again behind the operator's back.
    pub(crate) fn write_batch(&self, writes: Vec<Write>, commit: Commit) -> Result<(), StoreError> {
        self.dir.check_guard()?;
        let mut ops = Vec::new();
        let mut records: std::collections::BTreeMap<String, Vec<Record>> = Default::default();
        for w in writes {
            let record = match w {
                Write::Graph(g) => Record::Graph(g),
                Write::DeleteGraph(key, mark) => {
                    // The mark first: a torn tail that cuts the deletion cuts nothing after it.
                    if let Some(mark) = mark {
                        records
                            .entry(key.agent.clone())
                            .or_default()
                            .push(Record::Handled(key.clone(), mark));
                    }
                    Record::Delete(key)
                }
                Write::AgentState(agent, state) => Record::State(agent, state),
                Write::Handled { agent, chat, mark } => {
                    Record::Handled(ConversationKey::new(agent, chat), mark)
                }
                Write::Day(agent, day, replaces) => {
                    let path = self.dir.schedule_day_path(&agent, day.date);
                    if super::presence::may_write_day(&path, day.date, replaces.as_deref())? {
                        ops.push((path, Some(day.render(&agent).into_bytes())));
                    }
                    continue;
                }
                Write::Intents(agent, intents) => {
                    ops.push((
                        self.dir.intents_path(&agent),
                        Some(crate::core::intents::render_file(&agent, &intents).into_bytes()),
                    ));
                    continue;
                }
            };
            records
                .entry(record.agent().to_string())
                .or_default()
                .push(record);
        }
        if !ops.is_empty() {
            apply_batch(ops)?;
        }
        for (agent, records) in records {
            self.journals.append(&self.dir, &agent, records, commit)?;
        }
        self.flush_windows();
        Ok(())
    }

    /// Writes the window records the planner queued (see [`GraphStore::with_window_records`]);
    /// a failure costs only those hints, and is logged.
    fn flush_windows(&self) {
        if let Some(windows) = &self.windows
            && let Err(e) = windows.flush()
        {
            tracing::warn!(event = "window_records_not_saved", error = %e, "window records not saved; the windows are recomputed");
        }
    }

    /// Brings every checkpoint up to date and retires every journal segment (for a process
    /// that holds the state lock with no daemon running: `state clear`).
    pub fn settle(&self, now: Timestamp) -> Result<(), StoreError> {
        let replayed = replay(&self.dir, false)?;
        self.journals.adopt(&replayed);
        self.journals.checkpoint(&self.dir, true, now)?;
        self.write_packs();
        Ok(())
    }

    /// Writes the graph pack of every agent whose pack is due (removed by this process, or
    /// none yet), from its files as they are now: after a full checkpoint, the files hold
    /// everything. A pack that cannot be written is logged and left out (the next start
    /// reads the files).
    fn write_packs(&self) {
        // No checkpoint may write a graph file between reading it and the pack's rename (its
        // removal of the pack would come first and be undone).
        let _files_still = self.journals.hold_checkpoints();
        let folders = match self.graph_folders() {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(event = "graph_pack_failed", error = %e, "graph packs not written; the next start reads the graph files");
                return;
            }
        };
        for (folder, files) in folders {
            let path = self.dir.graph_pack_path_of(&folder);
            if files.is_empty() || !self.journals.packs.due(&path) {
                continue;
            }
            match super::pack::write(&path, &files) {
                Ok(()) => self.journals.packs.written(&path),
                Err(e) => {
                    tracing::warn!(event = "graph_pack_failed", pack = %path.display(), error = %e, "graph pack not written; the next start reads the graph files");
                }
            }
        }
    }

    /// Removes the graph pack standing for the graph file at `path` (before it changes).
    fn unpack(&self, path: &Path) -> Result<(), StoreError> {
        let folder = path.parent().unwrap_or(Path::new("."));
        self.journals
            .packs
            .remove(&self.dir.graph_pack_path_of(folder))
    }

    /// Writes the graph without fsync or rename: only for preparing benchmark and test
    /// state directories in bulk, never for the daemon's own saves.
    pub(crate) fn save_unsynced(&self, graph: &TaskGraph) -> Result<(), StoreError> {
        let text = super::files::encode_graph(graph)?;
        let path = self.dir.graph_path(&graph.key());
        self.unpack(&path)?;
        if let Some(dir) = path.parent() {
            ensure_private_dir(dir)?;
        }
        fs::write(&path, text).map_err(io_err("cannot write", &path))
    }

    /// Lists every graph file without changing anything (for `state list`/`show`), judged
    /// at the wall clock's now (see [`GraphStore::scan_at`]).
    pub fn scan(&self) -> Result<Vec<GraphFile>, StoreError> {
        self.scan_at(Timestamp::now())
    }

    /// Lists every graph file without changing anything; a graph with a time further than
    /// the horizon past `now` counts as unreadable. Files are read and decoded on a few
    /// threads side by side (startup with thousands of graphs); the result keeps the sorted
    /// path order.
    /// The journal's newer states are shown over the files (a running daemon writes its
    /// files as checkpoints, a moment after the journal).
    pub fn scan_at(&self, now: Timestamp) -> Result<Vec<GraphFile>, StoreError> {
        let files = self.scan_files(now)?;
        let journal = journal_by_path(&self.dir, replay(&self.dir, false)?.graphs);
        Ok(overlay(files, journal, |g| {
            within_horizon(&g, now).map_err(RecordError::from)?;
            Ok(g)
        }))
    }

    /// One conversation's graph as `state show` sees it: the journal's newest state over
    /// its file (`None`: it has no graph).
    pub fn read_graph(&self, key: &ConversationKey) -> Result<Option<TaskGraph>, RecordError> {
        if let Some(newest) = replay_agent_only(&self.dir, &key.agent)?.graphs.remove(key) {
            return Ok(newest);
        }
        let path = self.dir.graph_path(key);
        match read_optional(&path)? {
            None => Ok(None),
            Some(text) => self.decode_at(&path, &text, Timestamp::now()).map(Some),
        }
    }

    /// Every graph file, read and decoded (the checkpoints alone).
    fn scan_files(&self, now: Timestamp) -> Result<Vec<GraphFile>, StoreError> {
        let mut paths: Vec<PathBuf> = self
            .graph_folders()?
            .into_iter()
            .flat_map(|(_, files)| files)
            .collect();
        paths.sort();
        Ok(self.read_files(&paths, now))
    }

    /// The graph files at `paths`, read and decoded.
    fn read_files(&self, paths: &[PathBuf], now: Timestamp) -> Vec<GraphFile> {
        par_map(paths, |path| GraphFile {
            from_journal: false,
            path: path.clone(),
            graph: read_file(path, GRAPH_FILE_CAP, Symlinks::Refuse)
                .map_err(RecordError::from)
                .and_then(|bytes| self.decode_bytes(path, bytes, now)),
        })
    }

    /// The checkpoints at start: each agent's graph pack when it matches its folder, else its
    /// files. A pack that does not is removed and reported.
    fn load_checkpoints(
        &self,
        now: Timestamp,
        loaded: &mut LoadedGraphs,
    ) -> Result<Vec<GraphFile>, StoreError> {
        let mut out = Vec::new();
        let mut unpacked = Vec::new();
        for (folder, files) in self.graph_folders()? {
            let path = self.dir.graph_pack_path_of(&folder);
            match super::pack::read(&path, &folder, &files) {
                Ok(Some(pack)) => {
                    let entries: Vec<(&Path, &str)> = pack.entries().collect();
                    out.extend(par_map(&entries, |(file, text)| GraphFile {
                        from_journal: false,
                        path: file.to_path_buf(),
                        graph: self.decode_at(file, text, now),
                    }));
                    tracing::debug!(pack = %path.display(), graphs = pack.len(), "graphs read from their pack");
                    loaded.from_packs += pack.len();
                }
                Ok(None) => unpacked.extend(files),
                Err(problem) => {
                    tracing::info!(event = "graph_pack_stale", pack = %path.display(), reason = %problem, "graph pack not used: the graph files are read instead and the pack removed");
                    self.journals.packs.remove(&path)?;
                    loaded.stale_packs.push((path, problem.to_string()));
                    unpacked.extend(files);
                }
            }
        }
        out.extend(self.read_files(&unpacked, now));
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Startup load: removes stale temp files, parses every graph, and moves files that do
    /// not parse to `quarantine/` (never deleting them).
    pub fn load_all(&self, now: Timestamp) -> Result<LoadedGraphs, StoreError> {
        let mut loaded = LoadedGraphs {
            stale_temp_files_removed: self.remove_stale_temp_files()?,
            ..LoadedGraphs::default()
        };
        let mut replayed = replay(&self.dir, true)?;
        // A journal's graph past the horizon is moved aside like such a file.
        for (key, slot) in &mut replayed.graphs {
            let Some(graph) = slot else { continue };
            if let Err(e) = within_horizon(graph, now) {
                let reason = e.to_string();
                let moved_to = self
                    .dir
                    .quarantine_path(&fs_name(&key.agent), &format!("{}.md", key.chat));
                super::files::write_atomic(
                    &moved_to,
                    super::files::encode_graph(graph)?.as_bytes(),
                )?;
                super::files::write_quarantine_reason(&moved_to, &reason)?;
                loaded.quarantined.push(Quarantined {
                    original: self.dir.graph_path(key),
                    moved_to,
                    reason,
                });
                *slot = None;
            }
        }
        self.journals.adopt(&replayed);
        let journal = journal_by_path(&self.dir, replayed.graphs);
        let files = self.load_checkpoints(now, &mut loaded)?;
        // The graphs with a file: the journal's key for a file it names, else the file's.
        let on_disk = files
            .iter()
            .filter_map(|file| match (journal.get(&file.path), &file.graph) {
                (Some((key, _)), _) => Some(key.clone()),
                (None, Ok(g)) => Some(g.key()),
                (None, Err(_)) => None,
            })
            .collect();
        self.journals.set_on_disk(on_disk);
        // The journal's state wins over its file (even one a crash left unreadable); its
        // graphs past the horizon were moved aside above.
        let files = overlay(files, journal, Ok);
        let mut seen = std::collections::HashSet::new();
        for file in files {
            let verdict = file.graph.and_then(|g| {
                if seen.insert(g.key()) {
                    Ok(g)
                } else {
                    Err(RecordError::Duplicate(g.key()))
                }
            });
            match verdict {
                Ok(g) => loaded.graphs.push(g),
                Err(reason) => loaded
                    .quarantined
                    .push(self.set_aside(file.path, reason.to_string())?),
            }
        }
        Ok(loaded)
    }

    /// Removes every chat's graph file of one agent's chat (used by `state clear`, with the
    /// state lock held: the journal is settled into the files first).
    pub fn clear(&self, agent: Option<&str>, chat: Option<ChatId>) -> Result<usize, StoreError> {
        self.settle(Timestamp::now())?;
        let mut removed = 0;
        for file in self.scan()? {
            let matches = match &file.graph {
                Ok(g) => agent.is_none_or(|a| a == g.agent) && chat.is_none_or(|c| c == g.chat.id),
                // Unreadable files are only cleared by a clear-everything request.
                Err(_) => agent.is_none() && chat.is_none(),
            };
            if matches {
                self.unpack(&file.path)?;
                remove(&file.path)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// A graph file's bytes decoded (UTF-8 first).
    fn decode_bytes(
        &self,
        path: &Path,
        bytes: Vec<u8>,
        now: Timestamp,
    ) -> Result<TaskGraph, RecordError> {
        let text = utf8(path, bytes)?;
        self.decode_at(path, &text, now)
    }

    /// Moves the graph file at `path` to `quarantine/` with its `reason` (its pack removed
    /// first), and says where.
    fn set_aside(&self, path: PathBuf, reason: String) -> Result<Quarantined, StoreError> {
        let moved_to = self.quarantine_path(&path);
        self.unpack(&path)?;
        quarantine(&path, &moved_to, &reason)?;
        Ok(Quarantined {
            original: path,
            moved_to,
            reason,
        })
    }

    fn decode_at(&self, path: &Path, text: &str, now: Timestamp) -> Result<TaskGraph, RecordError> {
        let graph = codec::decode(text)?;
        within_horizon(&graph, now)?;
        let expected = self.dir.graph_path(&graph.key());
        if expected != path {
            return Err(RecordError::Misplaced {
                key: graph.key(),
                expected,
            });
        }
        Ok(graph)
    }

    /// Where an unreadable graph file goes: named after its agent directory and file.
    fn quarantine_path(&self, path: &Path) -> PathBuf {
        let agent_dir = path
            .parent()
            .and_then(Path::file_name)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.dir.quarantine_path(&agent_dir, &file)
    }

    fn agent_dirs(&self) -> Result<Vec<PathBuf>, StoreError> {
        let root = self.dir.graphs_dir();
        let entries = match fs::read_dir(&root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("cannot list", &root)(e)),
        };
        let mut dirs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err("cannot list", &root))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
        dirs.sort();
        Ok(dirs)
    }

    /// Each agent's graph folder and its graph files (sorted).
    fn graph_folders(&self) -> Result<Vec<(PathBuf, Vec<PathBuf>)>, StoreError> {
        let mut out = Vec::new();
        for dir in self.agent_dirs()? {
            let mut files = Vec::new();
            for entry in fs::read_dir(&dir).map_err(io_err("cannot list", &dir))? {
                let entry = entry.map_err(io_err("cannot list", &dir))?;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.ends_with(".md") && !name.starts_with('.') {
                    files.push(entry.path());
                }
            }
            files.sort();
            out.push((dir, files));
        }
        Ok(out)
    }

    /// Removes the temp files a crash left anywhere in the state directory: in the graph
    /// folders all of them (nothing writes there before the runtime starts), elsewhere (agent
    /// state, memory, schedules, transcripts) those older than [`TEMP_STALE_AFTER`], since
    /// another part (the in-memory Telegram, the sent ledger) may be writing one now. It never
    /// follows a symbolic link and never enters a nested state directory (a playground's,
    /// which has its own lock).
    fn remove_stale_temp_files(&self) -> Result<usize, StoreError> {
        let graphs = self.dir.graphs_dir();
        let stale_before = std::time::SystemTime::now()
            .checked_sub(TEMP_STALE_AFTER)
            .unwrap_or(std::time::UNIX_EPOCH);
        let mut removed = 0;
        let mut dirs = vec![(self.dir.root().to_path_buf(), 0usize)];
        while let Some((dir, depth)) = dirs.pop() {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            let in_graphs = dir.starts_with(&graphs);
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    let nested_state = depth > 0 && path.join(super::layout::LOCK_FILE).exists();
                    if depth < TEMP_SCAN_DEPTH && !nested_state {
                        dirs.push((path, depth + 1));
                    }
                    continue;
                }
                if !kind.is_file() || !entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX)
                {
                    continue;
                }
                let stale = in_graphs
                    || entry
                        .metadata()
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| t < stale_before);
                if stale {
                    remove(&path)?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }
}
