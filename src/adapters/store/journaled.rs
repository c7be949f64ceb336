//! The journaled side of the runtime's store: group commit into each agent's journal, the
//! checkpoints written from it in the background, and the replay at start.
//!
//! - **Writes** ([`Journals::append`]): a batch's records for one agent are appended with one
//!   `write` and made durable with one `fdatasync`. A batch no task waits for, written while
//!   tasks are in flight or in a stream of batches, first waits up to [`COMMIT_DELAY`] for
//!   another batch's sync to cover it (group commit: the sync a reply's send waits for
//!   carries the bulk along, and a burst of inbound messages shares one). Once durable, the batch's
//!   states become *pending*: due in a checkpoint.
//! - **Checkpoints** ([`Journals::checkpoint`], called by the runtime once a second while
//!   anything changed, and at once when it is idle): pending graphs are written to their
//!   Markdown files (in place, not synced: the journal still holds them), deleted graphs'
//!   files removed, agent states written. A graph still moving ([`SETTLE_HORIZON`]) stays
//!   pending until it settles or has moved that long, unless the checkpoint is full or
//!   retires its agent's segment: a reply cycle costs no file. A segment that reached
//!   [`ROTATE_BYTES`], or every segment at a full checkpoint (a clean stop, `state clear`),
//!   is *retired*: appends move to a new segment, everything it held is checkpointed, the
//!   handled marks written (`handled.json`, pruned), every checkpoint file written since the
//!   last retirement synced with its directory, and the old segment removed.
//! - **Replay** ([`replay`]): every segment of every agent, in order; the newest record of
//!   each graph wins over its file. At start the replayed state becomes pending and the old
//!   segments retired by the first checkpoint; read-only callers (`state list/show`, the
//!   console's readers) get the journal's newer state over the files.
//!
//! It must not decide when to checkpoint (the runtime does) nor hold graph files' format
//! (the codec does). Called by `graphs` (the store port's implementation).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tracing::{error, warn};

use super::StoreError;
use super::files::{ensure_private_dir, io_err, sync_dir, write_quarantine_reason};
use super::io_stats::{self, Op};
use super::journal::{self, ROTATE_BYTES, Record, Segment};
use super::layout::StateDir;
use crate::core::agent_state::{AgentState, HandledMark, prune_marks};
use crate::core::graph::{ConversationKey, TaskGraph};
use crate::core::model::ChatId;
use crate::ports::store::{Commit, SETTLE_HORIZON};

/// How long a batch no task waits for may wait for another batch's sync.
pub(crate) const COMMIT_DELAY: Duration = Duration::from_millis(10);

/// The handled marks of one agent.
pub(crate) type Marks = BTreeMap<ChatId, HandledMark>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One agent's journal.
#[derive(Default)]
struct AgentLog {
    state: Mutex<LogState>,
    synced: Condvar,
}

#[derive(Default)]
struct LogState {
    /// The segment appended to (made on the first append).
    segment: Option<Segment>,
    next_seq: u64,
    /// Bytes appended, and made durable, since the process started.
    appended: u64,
    synced: u64,
    /// Batches appended whose states are not pending yet (a segment is not retired then).
    unapplied: usize,
    /// Older segments, to be removed once what they hold is checkpointed and synced.
    retired: Vec<PathBuf>,
    /// When the last batch was appended: batches in a stream share their syncs.
    last_append: Option<Instant>,
    /// `next_seq` follows the records on disk (set by the start's replay, or read from the
    /// newest segment by the first append of a store that did not replay).
    seq_known: bool,
}

/// States durable in the journal and due in a checkpoint.
#[derive(Default)]
struct Pending {
    graphs: HashMap<ConversationKey, Option<Box<TaskGraph>>>,
    /// Graphs left pending by a checkpoint because they were moving ([`SETTLE_HORIZON`]),
    /// and since when.
    moving_since: HashMap<ConversationKey, Timestamp>,
    states: HashMap<String, Box<AgentState>>,
    /// Agents whose handled marks changed since `handled.json` was written.
    marks_changed: HashSet<String>,
}

/// The checkpoint files, and the directories of files written or removed, not synced yet.
#[derive(Default)]
struct Unsynced {
    files: HashSet<PathBuf>,
    dirs: HashSet<PathBuf>,
}

/// Every agent's journal and what is due in a checkpoint.
#[derive(Default)]
pub(crate) struct Journals {
    logs: Mutex<HashMap<String, Arc<AgentLog>>>,
    pending: Mutex<Pending>,
    /// The store's copy of each agent's handled marks (what `handled.json` gets).
    marks: Mutex<HashMap<String, Marks>>,
    /// The agents whose `handled.json` was read into `marks` (before it is ever rewritten).
    marks_read: Mutex<HashSet<String>>,
    /// One checkpoint at a time.
    checkpointing: Mutex<()>,
    /// Checkpoint files written (or removed: their directory) since the last retirement,
    /// synced before a segment is retired.
    unsynced: Mutex<Unsynced>,
    /// The graphs with a checkpoint file, once known (after the start's load): a graph
    /// deleted before it ever had a file costs no `unlink`.
    on_disk: Mutex<Option<HashSet<ConversationKey>>>,
    commit_delay: Option<Duration>,
    /// The agents' graph packs, removed before their graph files change.
    pub(crate) packs: super::pack::Packs,
}

/// What the journals held at start, over the files.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    /// The newest state of each graph the journals name (`None`: deleted).
    pub(crate) graphs: HashMap<ConversationKey, Option<TaskGraph>>,
    pub(crate) states: HashMap<String, AgentState>,
    pub(crate) marks: HashMap<String, Marks>,
    /// Per agent: the segments read and the next sequence number.
    pub(crate) segments: HashMap<String, (Vec<PathBuf>, u64)>,
}

impl Journals {
    pub(crate) fn new() -> Journals {
        Journals::default()
    }

    /// Overrides [`COMMIT_DELAY`] (zero: every batch syncs at once).
    pub(crate) fn with_commit_delay(mut self, delay: Duration) -> Journals {
        self.commit_delay = Some(delay);
        self
    }

    fn log(&self, agent: &str) -> Arc<AgentLog> {
        Arc::clone(lock(&self.logs).entry(agent.to_string()).or_default())
    }

    /// Takes over what was replayed at start: its states become pending (the first
    /// checkpoint writes them and retires the segments read), its marks the store's copy.
    pub(crate) fn adopt(&self, replayed: &Replayed) {
        let mut pending = lock(&self.pending);
        for (key, graph) in &replayed.graphs {
            pending
                .graphs
                .insert(key.clone(), graph.clone().map(Box::new));
        }
        for (agent, state) in &replayed.states {
            pending
                .states
                .insert(agent.clone(), Box::new(state.without_marks()));
        }
        for (agent, marks) in &replayed.marks {
            pending.marks_changed.insert(agent.clone());
            self.seed_marks(agent, marks);
        }
        drop(pending);
        for (agent, (segments, next_seq)) in &replayed.segments {
            let log = self.log(agent);
            let mut st = lock(&log.state);
            st.next_seq = st.next_seq.max(*next_seq);
            st.seq_known = true;
            st.retired.extend(segments.iter().cloned());
        }
    }

    /// The graphs that have a checkpoint file, as the start's load found them.
    pub(crate) fn set_on_disk(&self, keys: HashSet<ConversationKey>) {
        *lock(&self.on_disk) = Some(keys);
    }

    /// Seeds the store's copy of an agent's handled marks (read at the agent's start).
    pub(crate) fn seed_marks(&self, agent: &str, marks: &Marks) {
        let mut all = lock(&self.marks);
        let mine = all.entry(agent.to_string()).or_default();
        for (chat, mark) in marks {
            raise(mine, *chat, *mark);
        }
    }

    /// Reads the agent's `handled.json` into the store's copy of its marks, once per agent:
    /// at the agent's start, and before the file is rewritten by a store that never started
    /// the agent (`state clear` settling a journal), which must not write the journal's
    /// marks alone over it. An unreadable file is moved to `quarantine/` with the reason and
    /// logged (its marks are noted again as messages come); a file that cannot be read at
    /// all is an error, and nothing is written over it.
    pub(crate) fn load_marks(&self, dir: &StateDir, agent: &str) -> Result<(), StoreError> {
        if !lock(&self.marks_read).insert(agent.to_string()) {
            return Ok(());
        }
        let path = dir.handled_path(agent);
        let text = match super::files::read_optional(&path) {
            Ok(text) => text,
            Err(e) => {
                lock(&self.marks_read).remove(agent);
                return Err(e);
            }
        };
        let marks: Marks = match text.map(|t| serde_json::from_str(&t)) {
            None => Marks::new(),
            Some(Ok(marks)) => marks,
            Some(Err(e)) => {
                let moved_to = dir.quarantine_path(agent, "handled.json");
                let reason = format!("not the handled marks' JSON: {e}");
                super::files::quarantine(&path, &moved_to, &reason)?;
                warn!(
                    event = "handled_marks_quarantined",
                    file = %path.display(),
                    moved_to = %moved_to.display(),
                    reason = %reason,
                    "handled marks unreadable and moved to quarantine; a redelivered message may be planned again"
                );
                Marks::new()
            }
        };
        self.seed_marks(agent, &marks);
        Ok(())
    }

    /// Appends `records` of `agent` and returns once they are durable: at once with
    /// [`Commit::Now`], otherwise after up to [`COMMIT_DELAY`] for another batch's sync to
    /// cover them (always with [`Commit::Busy`], in a stream of batches with
    /// [`Commit::Shared`]).
    pub(crate) fn append(
        &self,
        dir: &StateDir,
        agent: &str,
        records: Vec<Record>,
        commit: Commit,
    ) -> Result<(), StoreError> {
        let log = self.log(agent);
        let mut st = lock(&log.state);
        if st.segment.is_none() {
            let jdir = dir.journal_dir(agent);
            let on_disk = journal::segments(&jdir)?;
            if !st.seq_known {
                // A store that did not replay (a tool, a test) continues the sequence on
                // disk. The newest segment with a record says where it is (a newer one may
                // be empty).
                for (_, path) in on_disk.iter().rev() {
                    if let Some((seq, _)) = journal::parse(&journal::read_segment(path)?, None)
                        .records
                        .last()
                    {
                        st.next_seq = st.next_seq.max(seq + 1);
                        break;
                    }
                }
                st.seq_known = true;
            }
            // A new segment starts past every segment on disk: a crash can leave one with no
            // whole record in it (so the sequence read says nothing of it), and taking its
            // name would append to a file the start's checkpoint is about to remove.
            if let Some((newest, _)) = on_disk.last() {
                st.next_seq = st.next_seq.max(newest + 1);
            }
            let first = st.next_seq;
            st.segment = Some(Segment::create(&jdir, first)?);
        }
        // Numbered once the sequence on disk is known.
        let mut bytes = Vec::with_capacity(records.len() * 1024);
        for (i, record) in records.iter().enumerate() {
            journal::encode_into(&mut bytes, st.next_seq + i as u64, record).map_err(|e| {
                StoreError::Io {
                    action: "cannot encode a journal record for",
                    path: dir.journal_dir(agent),
                    source: std::io::Error::other(e),
                }
            })?;
        }
        let Some(segment) = st.segment.as_mut() else {
            return Ok(());
        };
        segment.append(&bytes)?;
        st.next_seq += records.len() as u64;
        st.appended += bytes.len() as u64;
        let mine = st.appended;
        st.unapplied += 1;
        let delay = self.commit_delay.unwrap_or(COMMIT_DELAY);
        // In a stream of batches (the last one came within the delay) the next one is
        // likely soon: waiting for it costs less than a sync each. A batch a task waits for
        // never waits: a stream of those would each wait the whole delay, none covering
        // another.
        let streaming = st.last_append.is_some_and(|at| at.elapsed() < delay);
        st.last_append = Some(Instant::now());
        let may_wait = match commit {
            Commit::Now => false,
            Commit::Shared => streaming,
            Commit::Busy => true,
        };
        if may_wait && !delay.is_zero() {
            let deadline = Instant::now() + delay;
            while st.synced < mine {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                st = log
                    .synced
                    .wait_timeout(st, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        }
        let synced = if st.synced < mine {
            let result = st.segment.as_ref().map_or(Ok(()), Segment::sync);
            if result.is_ok() {
                st.synced = st.appended;
                log.synced.notify_all();
            }
            result
        } else {
            Ok(())
        };
        if synced.is_ok() {
            self.make_pending(records);
        }
        st.unapplied -= 1;
        synced
    }

    /// Durable states become due in a checkpoint (called with the agent's log locked, so a
    /// segment is never retired with states not pending yet).
    fn make_pending(&self, records: Vec<Record>) {
        let mut pending = lock(&self.pending);
        for record in records {
            match record {
                Record::Graph(g) => {
                    pending.graphs.insert(g.key(), Some(g));
                }
                Record::Delete(key) => {
                    pending.graphs.insert(key, None);
                }
                Record::State(agent, s) => {
                    pending.states.insert(agent, s);
                }
                Record::Handled(key, mark) => {
                    pending.marks_changed.insert(key.agent.clone());
                    let mut all = lock(&self.marks);
                    raise(all.entry(key.agent).or_default(), key.chat, mark);
                }
            }
        }
    }

    /// Holds off every checkpoint (no graph file is written) while the guard lives: for
    /// reading the files whole (the graph packs).
    pub(crate) fn hold_checkpoints(&self) -> MutexGuard<'_, ()> {
        lock(&self.checkpointing)
    }

    /// Writes what is pending to the checkpoint files, and retires full segments (every
    /// segment with `full`). `now` prunes the handled marks written.
    pub(crate) fn checkpoint(
        &self,
        dir: &StateDir,
        full: bool,
        now: Timestamp,
    ) -> Result<crate::ports::store::CheckpointReport, StoreError> {
        let _one = lock(&self.checkpointing);
        // Segments to retire: appends move on to a new segment first.
        let mut retiring: Vec<(String, Vec<PathBuf>)> = Vec::new();
        let logs: Vec<(String, Arc<AgentLog>)> = lock(&self.logs)
            .iter()
            .map(|(a, l)| (a.clone(), Arc::clone(l)))
            .collect();
        for (agent, log) in &logs {
            let mut st = lock(&log.state);
            let full_segment = st
                .segment
                .as_ref()
                .is_some_and(|s| s.len() >= ROTATE_BYTES || (full && s.len() > 0));
            if full_segment
                && st.unapplied == 0
                && let Some(old) = st.segment.take()
            {
                st.retired.push(old.path().to_path_buf());
            }
            if !st.retired.is_empty() && st.unapplied == 0 {
                retiring.push((agent.clone(), std::mem::take(&mut st.retired)));
            }
        }
        let pending = std::mem::take(&mut *lock(&self.pending));
        let mut report = crate::ports::store::CheckpointReport::default();
        let (files, moving) = match self.write_pending(dir, pending, &retiring, full, now) {
            Ok(counts) => counts,
            Err(e) => {
                // Not retired: they are read again at the next start.
                self.unretire(&logs, retiring);
                return Err(e);
            }
        };
        report.files = files;
        report.moving = moving;
        if retiring.is_empty() {
            return Ok(report);
        }
        if let Err(e) = self.sync_checkpoints() {
            self.unretire(&logs, retiring);
            return Err(e);
        }
        for (agent, segments) in &retiring {
            for path in segments {
                super::files::unlink(path, "cannot remove journal segment")?;
                report.retired += 1;
            }
            let jdir = dir.journal_dir(agent);
            if jdir.exists() {
                sync_dir(&jdir)?;
            }
        }
        Ok(report)
    }

    /// Puts segments back on the retired lists after a failed checkpoint.
    fn unretire(&self, logs: &[(String, Arc<AgentLog>)], retiring: Vec<(String, Vec<PathBuf>)>) {
        for (agent, segments) in retiring {
            if let Some((_, log)) = logs.iter().find(|(a, _)| *a == agent) {
                let mut st = lock(&log.state);
                let later = std::mem::replace(&mut st.retired, segments);
                st.retired.extend(later);
            }
        }
    }

    /// Writes the pending states (and the marks of retiring agents); returns the files
    /// written and the graphs left pending because they are still moving (never with
    /// `full`, nor for an agent whose segments retire: see [`SETTLE_HORIZON`]).
    fn write_pending(
        &self,
        dir: &StateDir,
        mut pending: Pending,
        retiring: &[(String, Vec<PathBuf>)],
        full: bool,
        now: Timestamp,
    ) -> Result<(usize, usize), StoreError> {
        let mut files = 0;
        let mut moving = 0;
        let mut failed: Option<StoreError> = None;
        let mut keep = Pending::default();
        for (key, graph) in pending.graphs {
            if let Some(g) = &graph
                && !full
                && !retiring.iter().any(|(agent, _)| *agent == key.agent)
                && g.moves_within(now, SETTLE_HORIZON)
            {
                let since = pending.moving_since.remove(&key).unwrap_or(now);
                if crate::core::time::add(since, SETTLE_HORIZON) > now {
                    keep.moving_since.insert(key.clone(), since);
                    keep.graphs.insert(key, graph);
                    moving += 1;
                    continue;
                }
            }
            let path = dir.graph_path(&key);
            if let Err(e) = self.packs.remove(&dir.graph_pack_path(&key.agent)) {
                keep.graphs.insert(key, graph);
                failed.get_or_insert(e);
                continue;
            }
            let result = match &graph {
                Some(g) => super::files::encode_graph(g)
                    .and_then(|text| self.write_checkpoint(&path, text.as_bytes()))
                    .map(|()| {
                        if let Some(on_disk) = lock(&self.on_disk).as_mut() {
                            on_disk.insert(key.clone());
                        }
                    }),
                None => {
                    let known_absent = lock(&self.on_disk)
                        .as_mut()
                        .is_some_and(|on_disk| !on_disk.remove(&key));
                    if known_absent {
                        continue;
                    }
                    super::files::unlink(&path, "cannot remove")
                        .map(|_| self.note_unsynced(&path, false))
                }
            };
            match result {
                Ok(()) => files += 1,
                Err(e) => {
                    keep.graphs.insert(key, graph);
                    failed.get_or_insert(e);
                }
            }
        }
        for (agent, state) in pending.states {
            let path = dir.agent_state_path(&agent);
            let result = super::files::json_bytes(&path, &state, true)
                .and_then(|bytes| self.write_checkpoint(&path, &bytes));
            match result {
                Ok(()) => files += 1,
                Err(e) => {
                    keep.states.insert(agent, state);
                    failed.get_or_insert(e);
                }
            }
        }
        let mut marks_changed = pending.marks_changed;
        for (agent, _) in retiring {
            if !marks_changed.remove(agent) {
                continue;
            }
            // What the file holds is kept: read it first if this store never did.
            if let Err(e) = self.load_marks(dir, agent) {
                keep.marks_changed.insert(agent.clone());
                failed.get_or_insert(e);
                continue;
            }
            let marks = {
                let mut all = lock(&self.marks);
                let mine = all.entry(agent.clone()).or_default();
                prune_marks(mine, now);
                mine.clone()
            };
            // Replaced whole (temp file, sync, rename), never in place: it holds the marks of
            // every earlier retirement, which no journal segment covers any more.
            let path = dir.handled_path(agent);
            let result = super::files::json_bytes(&path, &marks, false)
                .and_then(|bytes| super::files::write_atomic(&path, &bytes));
            match result {
                Ok(()) => files += 1,
                Err(e) => {
                    keep.marks_changed.insert(agent.clone());
                    failed.get_or_insert(e);
                }
            }
        }
        keep.marks_changed.extend(marks_changed);
        // What could not be written stays due (newer states that came meanwhile win).
        let mut pending = lock(&self.pending);
        for (key, graph) in keep.graphs {
            pending.graphs.entry(key).or_insert(graph);
        }
        for (key, since) in keep.moving_since {
            pending.moving_since.entry(key).or_insert(since);
        }
        for (agent, state) in keep.states {
            pending.states.entry(agent).or_insert(state);
        }
        pending.marks_changed.extend(keep.marks_changed);
        drop(pending);
        match failed {
            Some(e) => Err(e),
            None => Ok((files, moving)),
        }
    }

    /// Writes one checkpoint file (not synced: see [`Journals::sync_checkpoints`]).
    fn write_checkpoint(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        write_unsynced(path, bytes)?;
        self.note_unsynced(path, true);
        Ok(())
    }

    /// Notes a checkpoint file written (`file`) or removed, for the next sync.
    fn note_unsynced(&self, path: &Path, file: bool) {
        let mut unsynced = lock(&self.unsynced);
        if file {
            unsynced.files.insert(path.to_path_buf());
        }
        if let Some(parent) = path.parent() {
            unsynced.dirs.insert(parent.to_path_buf());
        }
    }

    /// Makes every checkpoint written since the last retirement durable: each file synced,
    /// then each directory (its renames and removals). A file or directory removed since is
    /// skipped.
    fn sync_checkpoints(&self) -> Result<(), StoreError> {
        let Unsynced { files, dirs } = std::mem::take(&mut *lock(&self.unsynced));
        let synced = files
            .iter()
            .try_for_each(|file| match std::fs::File::open(file) {
                Ok(f) => {
                    io_stats::note(Op::Open);
                    io_stats::note(Op::Fsync);
                    f.sync_all().map_err(io_err("cannot sync", file))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io_err("cannot open", file)(e)),
            })
            .and_then(|()| {
                dirs.iter().try_for_each(|d| match sync_dir(d) {
                    Err(StoreError::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound =>
                    {
                        Ok(())
                    }
                    other => other,
                })
            });
        if synced.is_err() {
            // Synced again next time.
            let mut unsynced = lock(&self.unsynced);
            unsynced.files.extend(files);
            unsynced.dirs.extend(dirs);
        }
        synced
    }

    /// The agent's newest durable state not yet checkpointed, if any.
    pub(crate) fn pending_state(&self, agent: &str) -> Option<AgentState> {
        lock(&self.pending).states.get(agent).map(|s| (**s).clone())
    }

    /// The store's copy of the agent's handled marks.
    pub(crate) fn marks(&self, agent: &str) -> Marks {
        lock(&self.marks).get(agent).cloned().unwrap_or_default()
    }
}

/// Raises `chat`'s mark in `marks` to `mark` if it is newer.
fn raise(marks: &mut Marks, chat: ChatId, mark: HandledMark) {
    match marks.get(&chat) {
        Some(m) if m.message >= mark.message => {}
        _ => {
            marks.insert(chat, mark);
        }
    }
}

/// Writes `bytes` over `path` in place (no temp file, no rename: the file keeps its inode),
/// without syncing: the journal holds the state until a retirement syncs the file. A reader
/// of the raw file may catch it half-written, and a crash may leave it so; `state show` and
/// the start read the journal's state over it (the journal covers every file written since
/// the last retirement). Never through a link; a FIFO is refused, not waited on.
fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let parent = path.parent().unwrap_or(Path::new("."));
    let mut file = super::files::in_dir(parent, || {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
    })?
    .map_err(io_err("cannot write checkpoint", path))?;
    io_stats::note(Op::Open);
    file.write_all(bytes)
        .map_err(io_err("cannot write checkpoint", path))
}

/// Reads every agent's journal under `dir` (see the module documentation). `quarantine`
/// (at start): problems are logged with the file and line, and a segment with records
/// skipped as corrupted is copied to `quarantine/`; the read-only views (beside a running
/// daemon, whose newest record may be half-written) say nothing and leave it.
pub(crate) fn replay(dir: &StateDir, quarantine: bool) -> Result<Replayed, StoreError> {
    let mut out = Replayed::default();
    let Ok(entries) = std::fs::read_dir(dir.root()) else {
        return Ok(out);
    };
    // Each agent's directory name (what `quarantine/` names) and journal directory.
    let mut agent_dirs: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.path().join(super::layout::JOURNAL_DIR))
        })
        .filter(|(_, p)| p.is_dir())
        .collect();
    agent_dirs.sort();
    for (name, jdir) in agent_dirs {
        let quarantine = quarantine.then_some((dir, name.as_str()));
        replay_agent(&jdir, quarantine, &mut out)?;
    }
    Ok(out)
}

/// One agent's journal alone, read-only (as [`replay`] without `quarantine`): what a reader
/// of one conversation needs.
pub(crate) fn replay_agent_only(dir: &StateDir, agent: &str) -> Result<Replayed, StoreError> {
    let mut out = Replayed::default();
    replay_agent(&dir.journal_dir(agent), None, &mut out)?;
    Ok(out)
}

/// Replays one agent's journal; `quarantine` (at start) names where a segment with corrupted
/// records is copied: the state directory and the agent's directory name.
fn replay_agent(
    jdir: &Path,
    quarantine: Option<(&StateDir, &str)>,
    out: &mut Replayed,
) -> Result<(), StoreError> {
    let segments = journal::segments(jdir)?;
    let mut last: Option<u64> = None;
    let mut read = Vec::new();
    let mut agent: Option<String> = None;
    for (_, path) in segments {
        let bytes = journal::read_segment(&path)?;
        let parsed = journal::parse(&bytes, last);
        // A reader beside a running daemon may see a record being appended: not a problem.
        if let Some(torn) = parsed.torn.as_ref().filter(|_| quarantine.is_some()) {
            warn!(
                event = "journal_tail_cut",
                file = %path.display(),
                line = torn.line,
                bytes = bytes.len() as u64 - parsed.keep_len,
                reason = %torn.reason,
                "the journal ends in a record cut short (a write interrupted by a crash or a full disk): it is dropped, the records before it are used"
            );
        }
        for problem in parsed.skipped.iter().filter(|_| quarantine.is_some()) {
            error!(
                event = "journal_record_skipped",
                file = %path.display(),
                line = problem.line,
                reason = %problem.reason,
                "a journal record is unusable and skipped; the newer records are used"
            );
        }
        if let Some((dir, agent_dir)) = quarantine
            && parsed
                .skipped
                .iter()
                .any(|p| !matches!(p.reason, journal::RecordProblem::Order { .. }))
        {
            keep_copy(dir, agent_dir, &path, &parsed)?;
        }
        for (seq, record) in parsed.records {
            last = Some(seq);
            agent.get_or_insert_with(|| record.agent().to_string());
            apply(out, record);
        }
        read.push(path);
    }
    // A journal with no record yet names no agent: nothing in it to retire by name (its
    // empty segments are retired with the others once a later segment holds a record).
    let Some(name) = agent else {
        return Ok(());
    };
    let entry = out.segments.entry(name).or_default();
    entry.0.extend(read);
    entry.1 = entry.1.max(last.map_or(0, |s| s + 1));
    Ok(())
}

/// Applies one replayed record: the newest state of each thing wins.
fn apply(out: &mut Replayed, record: Record) {
    match record {
        Record::Graph(g) => {
            out.graphs.insert(g.key(), Some(*g));
        }
        Record::Delete(key) => {
            out.graphs.insert(key, None);
        }
        Record::State(agent, s) => {
            out.states.insert(agent, *s);
        }
        Record::Handled(key, mark) => {
            raise(out.marks.entry(key.agent).or_default(), key.chat, mark);
        }
    }
}

/// Copies a segment with corrupted records to `quarantine/`, with the reason beside it.
fn keep_copy(
    dir: &StateDir,
    agent_dir: &str,
    path: &Path,
    parsed: &journal::Parsed,
) -> Result<(), StoreError> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let to = dir.quarantine_path(agent_dir, &file);
    if let Some(parent) = to.parent() {
        ensure_private_dir(parent)?;
    }
    std::fs::copy(path, &to).map_err(io_err("cannot copy to quarantine", path))?;
    let reason = super::files::capped_problems(
        parsed
            .skipped
            .iter()
            .map(|p| format!("line {}: {}", p.line, p.reason)),
    );
    write_quarantine_reason(&to, &reason)?;
    Ok(())
}
