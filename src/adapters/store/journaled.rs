//! The journaled side of the runtime's store: group commit into each agent's journal and the
//! checkpoints written from it in the background (reading it back is `replay`'s).
//!
//! - **Writes** ([`Journals::append`]): a batch's records for one agent are appended with one
//!   `write` and made durable with one `fdatasync`. A batch no task waits for, written while
//!   tasks are in flight or in a stream of batches, first waits up to [`COMMIT_DELAY`] for
//!   another batch's sync to cover it (group commit: the sync a reply's send waits for
//!   carries the bulk along, and a burst of inbound messages shares one), unless a task
//!   comes to wait for such a batch meanwhile ([`Journals::hurry`]). Once durable, the
//!   batch's states become *pending*: due in a checkpoint.
//! - **Checkpoints** ([`Journals::checkpoint`], called by the runtime once a second while
//!   anything changed, and at once when it is idle): pending graphs are written to their
//!   Markdown files (in place, not synced: the journal still holds them), deleted graphs'
//!   files removed, agent states written. A graph still moving ([`SETTLE_HORIZON`]) stays
//!   pending until it settles or has moved that long, unless the checkpoint is full: a reply
//!   cycle costs no file. A segment that reached [`ROTATE_BYTES`], or every segment at a
//!   full checkpoint (a clean stop, `state clear`), is *retired*: appends move to a new
//!   segment, the graphs still moving are carried into it (appended again, one write and one
//!   sync for all of them, instead of a file each that their reply would soon remove), the
//!   rest of what the old one held is checkpointed, the handled marks written
//!   (`handled.json`, pruned), every checkpoint file written since the last retirement synced
//!   with its directory, and the old segment removed.
//! - **Replay** (`replay`): every segment of every agent, in order; the newest record of
//!   each graph wins over its file. At start the replayed state becomes pending and the old
//!   segments retired by the first checkpoint; read-only callers (`state list/show`, the
//!   console's readers) get the journal's newer state over the files.
//!
//! It must not decide when to checkpoint (the runtime does) nor hold graph files' format
//! (the codec does). Called by `graphs` (the store port's implementation).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tracing::warn;

use super::StoreError;
use super::files::{io_err, sync_dir};
use super::io_stats::{self, Op};
use super::journal::{self, ROTATE_BYTES, Record, Segment};
use super::layout::StateDir;
use super::replay::{Marks, Replayed, raise};
use crate::core::agent_state::{AgentState, prune_marks};
use crate::core::graph::{ConversationKey, TaskGraph};
use crate::ports::store::{Commit, SETTLE_HORIZON};

/// How long a batch no task waits for may wait for another batch's sync.
pub(crate) const COMMIT_DELAY: Duration = Duration::from_millis(10);

/// How many bytes of moving graphs a retirement carries into the new segment at most.
const CARRY_BYTES: u64 = ROTATE_BYTES / 2;

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
    /// Tasks waiting for a batch that may wait for company ([`Journals::hurry`]): while any
    /// does, no batch waits.
    hurried: AtomicUsize,
    /// The agents' graph packs, removed before their graph files change.
    pub(crate) packs: super::pack::Packs,
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
        open_segment(dir, agent, &mut st)?;
        // Numbered once the sequence on disk is known.
        let mut bytes = Vec::with_capacity(records.len() * 1024);
        for (i, record) in records.iter().enumerate() {
            journal::encode_into(&mut bytes, st.next_seq + i as u64, record)
                .map_err(encode_error(dir, agent))?;
        }
        append_encoded(&mut st, &bytes, records.len())?;
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
            while st.synced < mine && self.hurried.load(Ordering::Acquire) == 0 {
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
            sync_log(log.as_ref(), &mut st)
        } else {
            Ok(())
        };
        if synced.is_ok() {
            self.make_pending(records);
        }
        st.unapplied -= 1;
        synced
    }

    /// A task waits (`waiting`), or no longer waits, for a batch handed over without
    /// [`Commit::Now`]: while any does, no batch waits for company, and those waiting stop
    /// (see `RuntimeStore::hurry`). Takes no log's lock, so a sync in progress never blocks
    /// the caller; the price is that a batch which read the count just before it rose, and
    /// had not begun to wait yet, misses the wake-up and waits out its delay (at most
    /// [`COMMIT_DELAY`]).
    pub(crate) fn hurry(&self, waiting: bool) {
        if waiting {
            self.hurried.fetch_add(1, Ordering::AcqRel);
        } else {
            // Never below zero: an unmatched `false` is ignored.
            let _ = self
                .hurried
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
            return;
        }
        let logs: Vec<Arc<AgentLog>> = lock(&self.logs).values().cloned().collect();
        for log in logs {
            log.synced.notify_all();
        }
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
        let mut carried: HashSet<ConversationKey> = HashSet::new();
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
                if !full {
                    carried.extend(self.carry(dir, agent, log, &mut st, now));
                }
                retiring.push((agent.clone(), std::mem::take(&mut st.retired)));
            }
        }
        let pending = std::mem::take(&mut *lock(&self.pending));
        let mut report = crate::ports::store::CheckpointReport {
            carried: carried.len(),
            ..Default::default()
        };
        let written = self.write_pending(dir, pending, &retiring, &carried, full, now);
        let (files, moving) = match written {
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

    /// Appends the agent's moving graphs (pending, within their horizon) to its open segment,
    /// so that retiring the old segments writes no file for a graph about to change again,
    /// and returns their keys. Called with the agent's log locked and no batch unapplied:
    /// every durable state of the agent is pending then, and whatever is appended later is
    /// numbered after the carried records, so it wins over them at a replay. At most
    /// [`CARRY_BYTES`] are carried (the other graphs go on file); a failure carries none.
    fn carry(
        &self,
        dir: &StateDir,
        agent: &str,
        log: &AgentLog,
        st: &mut LogState,
        now: Timestamp,
    ) -> HashSet<ConversationKey> {
        let mut keys = Vec::new();
        let mut bytes = Vec::new();
        {
            let pending = lock(&self.pending);
            let moving = pending.graphs.iter().filter_map(|(key, graph)| {
                let g = graph.as_ref().filter(|_| key.agent == agent)?;
                still_moving(g, pending.moving_since.get(key).copied(), now).map(|_| (key, g))
            });
            for (key, g) in moving {
                let before = bytes.len();
                let seq = st.next_seq + keys.len() as u64;
                let record = Record::Graph(g.clone());
                if journal::encode_into(&mut bytes, seq, &record).is_err()
                    || bytes.len() as u64 > CARRY_BYTES
                {
                    bytes.truncate(before);
                    break;
                }
                keys.push(key.clone());
            }
        }
        if keys.is_empty() {
            return HashSet::new();
        }
        let appended = open_segment(dir, agent, st)
            .and_then(|()| append_encoded(st, &bytes, keys.len()))
            .and_then(|()| sync_log(log, st));
        match appended {
            Ok(()) => keys.into_iter().collect(),
            Err(e) => {
                warn!(
                    event = "journal_carry_failed",
                    agent = %agent,
                    graphs = keys.len(),
                    error = %e,
                    "moving graphs could not be carried into the new journal segment; they are written to their files instead"
                );
                HashSet::new()
            }
        }
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
    /// `full`; of an agent whose segments retire, only those `carried` into its new
    /// segment: see [`SETTLE_HORIZON`]).
    fn write_pending(
        &self,
        dir: &StateDir,
        mut pending: Pending,
        retiring: &[(String, Vec<PathBuf>)],
        carried: &HashSet<ConversationKey>,
        full: bool,
        now: Timestamp,
    ) -> Result<(usize, usize), StoreError> {
        let mut files = 0;
        let mut moving = 0;
        let mut failed: Option<StoreError> = None;
        let mut keep = Pending::default();
        for (key, graph) in pending.graphs {
            // A retiring agent's graphs go on file, but for those carried into its new segment.
            let may_stay =
                !full && (carried.contains(&key) || !retiring.iter().any(|(a, _)| *a == key.agent));
            let since = pending.moving_since.remove(&key);
            if may_stay
                && let Some(g) = &graph
                && let Some(since) = still_moving(g, since, now)
            {
                keep.moving_since.insert(key.clone(), since);
                keep.graphs.insert(key, graph);
                moving += 1;
                continue;
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

    /// The graph's newest durable state not yet checkpointed (`Some(None)`: deleted), if any.
    /// Asked under [`Journals::hold_checkpoints`] with its file read after, a state is never
    /// between the two.
    pub(crate) fn pending_graph(&self, key: &ConversationKey) -> Option<Option<TaskGraph>> {
        lock(&self.pending)
            .graphs
            .get(key)
            .map(|graph| graph.as_deref().cloned())
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

/// Since when a pending graph has moved (`since`, or from `now` on), if it may still stay in
/// the journal alone: it moves within [`SETTLE_HORIZON`] and has not moved that long.
fn still_moving(g: &TaskGraph, since: Option<Timestamp>, now: Timestamp) -> Option<Timestamp> {
    let since = since.unwrap_or(now);
    (g.moves_within(now, SETTLE_HORIZON) && crate::core::time::add(since, SETTLE_HORIZON) > now)
        .then_some(since)
}

/// Opens the agent's segment to append to, if none is open: a new one, numbered past the
/// sequence and every segment on disk.
fn open_segment(dir: &StateDir, agent: &str, st: &mut LogState) -> Result<(), StoreError> {
    if st.segment.is_some() {
        return Ok(());
    }
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
    Ok(())
}

/// Makes everything appended to the open segment durable and wakes the batches waiting for
/// that.
fn sync_log(log: &AgentLog, st: &mut LogState) -> Result<(), StoreError> {
    st.segment.as_ref().map_or(Ok(()), Segment::sync)?;
    st.synced = st.appended;
    log.synced.notify_all();
    Ok(())
}

/// Appends records encoded from the sequence on (`count` of them) to the open segment.
fn append_encoded(st: &mut LogState, bytes: &[u8], count: usize) -> Result<(), StoreError> {
    let Some(segment) = st.segment.as_mut() else {
        return Ok(());
    };
    segment.append(bytes)?;
    st.next_seq += count as u64;
    st.appended += bytes.len() as u64;
    Ok(())
}

fn encode_error(dir: &StateDir, agent: &str) -> impl Fn(journal::RecordProblem) -> StoreError {
    let path = dir.journal_dir(agent);
    move |e| StoreError::Io {
        action: "cannot encode a journal record for",
        path: path.clone(),
        source: std::io::Error::other(e),
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
