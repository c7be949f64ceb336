//! Durable writes off the loop. The driver submits writes (a graph snapshot, a graph
//! deletion, an agent's safety state) during a pass and calls [`Persister::flush`] at its
//! end: the writes ready then go out as batches (at most [`BATCH_MAX`] files each, at most
//! [`MAX_PARALLEL_BATCHES`] batches at once per lane: the bulk lane, and the urgent lane for
//! writes a task waits on, see [`Persister::make_urgent`]) on the blocking pool through the
//! store port's `RuntimeStore::write_batch`, which syncs a directory once per batch instead of
//! once per file. Each finished batch is reported as [`Saved`] to the callback the persister
//! was built with, on the pool thread that wrote it ([`blocking_then`]; the driver's callback
//! pushes it on the work queue as `Event::Saved`): the persister knows nothing of the loop's
//! events.
//!
//! Writes for one file stay in order: while one is running, later ones for the same file
//! wait, and only the newest waiting one is written (each write replaces the whole file, so
//! older ones are moot; a graph changed twice in one pass is written once). Every write gets
//! a generation number, rising across the process, so the driver can tell when a given
//! state is durable (a side-effect task starts only once its own `active` mark is).
//!
//! Each write holds the clock until its result is queued, so virtual time cannot run ahead
//! of the disk in tests. [`blocking`] is the one helper for blocking calls in the runtime.

use std::collections::HashMap;
use std::sync::Arc;

use crate::core::graph::ConversationKey;
use crate::ports::clock::SharedClock;
pub(crate) use crate::ports::store::Write;
use crate::ports::store::{CheckpointReport, Commit, SharedStore};
use crate::runtime::RuntimeError;

/// Files written by one batch at most.
pub(crate) const BATCH_MAX: usize = 1024;
/// Batches running at once per lane: one writer for the bulk of the writes (they never
/// contend for a directory's lock, and whatever changes while a batch runs goes out together
/// in the next one: group commit, one sync per directory per batch), and one for the writes
/// a side effect waits on (its `active` mark), so a reply never queues behind a bulk batch.
pub(crate) const MAX_PARALLEL_BATCHES: usize = 1;

/// Runs a blocking closure on tokio's blocking pool; a panic or cancellation there is a
/// [`RuntimeError::Join`] that keeps its source.
pub(crate) async fn blocking<T, F>(f: F) -> Result<T, RuntimeError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(tokio::task::spawn_blocking(f).await?)
}

/// Runs `job` on tokio's blocking pool and hands its result to `done` on that same thread,
/// with no async task awaiting it: a write's result reaches the work queue in one thread
/// hand-off instead of two (the pool thread, then a worker to resume the awaiting task). A
/// panic in `job` reaches `done` as [`RuntimeError::Panicked`]. `done` must not block.
pub(crate) fn blocking_then<T, J, D>(job: J, done: D)
where
    J: FnOnce() -> Result<T, RuntimeError> + Send + 'static,
    D: FnOnce(Result<T, RuntimeError>) + Send + 'static,
    T: Send + 'static,
{
    // The join handle is not needed: `done` carries the result, and a blocking job runs to
    // its end even when the runtime shuts down.
    drop(tokio::task::spawn_blocking(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job))
            .unwrap_or(Err(RuntimeError::Panicked));
        done(result);
    }));
}

/// Which file a write replaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    Graph(ConversationKey),
    AgentState(String),
    /// One day of an agent's schedule (its date as written).
    Day(String, String),
    Intents(String),
    Handled(String, crate::core::model::ChatId),
}

/// A finished batch: the files written, each with the generation of its write, the result,
/// and whether the batch was of the urgent lane (writes a task waited for).
#[derive(Debug)]
pub(crate) struct Saved {
    pub(crate) done: Vec<(Target, u64)>,
    pub(crate) result: Result<(), RuntimeError>,
    pub(crate) urgent: bool,
}

/// Told of each finished batch, on the blocking thread that wrote it (while it still holds
/// the clock).
pub(crate) type OnSaved = Arc<dyn Fn(Saved) + Send + Sync>;

/// Told of each finished checkpoint (see [`Persister::start_checkpoint`]).
pub(crate) type OnCheckpointed = Arc<dyn Fn(Result<CheckpointReport, RuntimeError>) + Send + Sync>;

/// Checkpoints are written at most this often (at once when the runtime is idle). A graph's
/// file is current within this long after it settles.
pub(crate) const CHECKPOINT_EVERY: jiff::SignedDuration = jiff::SignedDuration::from_secs(1);

/// The checkpoints' bookkeeping.
#[derive(Default)]
struct Checkpoints {
    running: bool,
    /// When the last one started.
    started_at: Option<jiff::Timestamp>,
    /// Writes completed when the last one started: more since means one is due.
    written_then: u64,
    /// The last one failed: another is owed (a second later) even if nothing is written.
    failed: bool,
    /// The last one left moving graphs for later (`CheckpointReport::moving`): another is
    /// owed a second later (they settle on their own time).
    moving: bool,
    /// The last one was started at once because the runtime was idle.
    idle: bool,
}

#[derive(Default)]
struct Slot {
    /// A write for this file is in a running batch.
    running: bool,
    /// The generation of that running write.
    running_gen: u64,
    /// That write runs in the urgent lane ([`Commit::Now`]).
    running_urgent: bool,
    /// A task waits for that write though it runs in the bulk lane: the store is hurried
    /// until it is written.
    hurried: bool,
    /// The newest write not yet handed to a batch.
    next: Option<(u64, Write)>,
    /// The file is listed in `ready`.
    queued: bool,
    /// A task waits for the next write of this file: it goes in the urgent lane.
    urgent: bool,
    /// The file is listed in `ready_urgent`.
    queued_urgent: bool,
}

/// The write scheduler. Owned by the driver; see the module documentation.
pub(crate) struct Persister {
    store: SharedStore,
    on_saved: OnSaved,
    clock: SharedClock,
    slots: HashMap<Target, Slot>,
    ready: Vec<Target>,
    /// Files whose next write a task waits for.
    ready_urgent: Vec<Target>,
    next_gen: u64,
    batches: usize,
    urgent_batches: usize,
    written: u64,
    checkpoints: Checkpoints,
    on_checkpointed: OnCheckpointed,
    /// Tasks are in flight: more writes are coming, a bulk batch may share their sync.
    busy: bool,
}

impl Persister {
    /// A persister writing through `store`, telling `on_saved` of each finished batch and
    /// `on_checkpointed` of each finished checkpoint.
    pub(crate) fn new(
        store: SharedStore,
        on_saved: OnSaved,
        on_checkpointed: OnCheckpointed,
        clock: SharedClock,
    ) -> Persister {
        Persister {
            store,
            on_saved,
            on_checkpointed,
            clock,
            slots: HashMap::new(),
            ready: Vec::new(),
            ready_urgent: Vec::new(),
            next_gen: 0,
            batches: 0,
            urgent_batches: 0,
            written: 0,
            checkpoints: Checkpoints::default(),
            busy: false,
        }
    }

    /// Whether tasks are in flight (set by the driver each pass, before it flushes).
    pub(crate) fn set_busy(&mut self, busy: bool) {
        self.busy = busy;
    }

    /// Whether writes completed since the last checkpoint started, or one runs. The first
    /// checkpoint of a run is always owed: the state replayed from the journal at start is
    /// due in the files even when the run writes nothing.
    pub(crate) fn checkpoint_owed(&self) -> bool {
        self.checkpoints.running
            || self.checkpoints.started_at.is_none()
            || self.checkpoints.failed
            || self.checkpoints.moving
            || self.written > self.checkpoints.written_then
    }

    /// When the next checkpoint is due under load (none when nothing is owed or one runs).
    pub(crate) fn next_checkpoint(&self) -> Option<jiff::Timestamp> {
        if !self.checkpoint_owed() || self.checkpoints.running {
            return None;
        }
        Some(
            self.checkpoints
                .started_at
                .map_or(jiff::Timestamp::MIN, |at| {
                    at.checked_add(CHECKPOINT_EVERY).unwrap_or(at)
                }),
        )
    }

    /// Starts a checkpoint if one is owed and due: [`CHECKPOINT_EVERY`] after the last one
    /// (so a graph changed by every message of a burst is written once a second, not once per
    /// message), or at once when the runtime is `idle` (no graph, nothing in flight, no write
    /// pending: the last changes of a run are on file before anyone waits for it).
    pub(crate) fn maybe_checkpoint(&mut self, now: jiff::Timestamp, idle: bool) {
        let Some(due) = self.next_checkpoint() else {
            return;
        };
        // An idle runtime has no graph left to move; should an idle checkpoint still find
        // one moving, the next waits its turn instead of running back to back.
        let moving_again = self.checkpoints.moving
            && self.checkpoints.idle
            && !self.checkpoints.failed
            && self.written == self.checkpoints.written_then;
        if (!idle || moving_again) && due > now {
            return;
        }
        self.checkpoints.idle = idle && due > now;
        self.start_checkpoint(now);
    }

    fn start_checkpoint(&mut self, now: jiff::Timestamp) {
        let on_checkpointed = Arc::clone(&self.on_checkpointed);
        self.checkpoints.running = true;
        self.checkpoints.started_at = Some(now);
        self.checkpoints.written_then = self.written;
        self.checkpoints.failed = false;
        self.checkpoints.moving = false;
        let store = Arc::clone(&self.store);
        self.in_background(
            move || store.checkpoint(false, now).map_err(RuntimeError::from),
            move |result| on_checkpointed(result),
        );
    }

    /// A checkpoint finished. A failure is logged and tried again with the next one (the
    /// journal keeps the state), except a state directory gone, which ends the run.
    pub(crate) fn checkpointed(
        &mut self,
        result: Result<CheckpointReport, RuntimeError>,
    ) -> Result<(), RuntimeError> {
        self.checkpoints.running = false;
        match result {
            Ok(report) => {
                self.checkpoints.moving = report.moving > 0;
                if report.retired > 0 {
                    tracing::debug!(
                        files = report.files,
                        retired = report.retired,
                        "checkpoint written; journal segments retired"
                    );
                }
                Ok(())
            }
            Err(RuntimeError::Store(crate::ports::store::StoreError::Gone(gone))) => Err(
                RuntimeError::Store(crate::ports::store::StoreError::Gone(gone)),
            ),
            Err(e) => {
                self.checkpoints.failed = true;
                tracing::error!(event = "checkpoint_failed", error = %e, "a checkpoint failed; the journal keeps the state and the next checkpoint, a second later, tries again");
                Ok(())
            }
        }
    }

    /// The last checkpoint of a run: everything written to the files and the journal
    /// retired (waits for a running checkpoint first: the store runs one at a time).
    pub(crate) async fn final_checkpoint(
        &self,
        now: jiff::Timestamp,
    ) -> Result<CheckpointReport, RuntimeError> {
        let store = Arc::clone(&self.store);
        blocking(move || store.checkpoint(true, now))
            .await
            .and_then(|r| r.map_err(RuntimeError::from))
    }

    /// Whether a write for `target` is waiting or running.
    pub(crate) fn is_pending(&self, target: &Target) -> bool {
        self.undurable(target).is_some()
    }

    /// Queues a write (replacing a queued one for the same file); returns its generation.
    /// Nothing is written before [`Persister::flush`]. A handled mark is never replaced
    /// away: a replaced write's mark rides on the newer write when that can carry it (the
    /// newer mark wins), else it is queued on its own.
    pub(crate) fn submit(&mut self, target: Target, write: Write) -> u64 {
        self.next_gen += 1;
        let generation = self.next_gen;
        let slot = self.slots.entry(target.clone()).or_default();
        let replaced = slot.next.replace((generation, write));
        let orphan = match (replaced, slot.next.as_mut()) {
            (Some((_, old)), Some((_, new))) => carry_mark(old, new),
            _ => None,
        };
        if !slot.running && !slot.queued {
            slot.queued = true;
            self.ready.push(target);
        }
        if let Some((key, mark)) = orphan {
            let (agent, chat) = (key.agent, key.chat);
            self.submit(
                Target::Handled(agent.clone(), chat),
                Write::Handled { agent, chat, mark },
            );
        }
        generation
    }

    /// The generation of the newest write of `target` not yet durable (waiting or running),
    /// if any.
    pub(crate) fn undurable(&self, target: &Target) -> Option<u64> {
        let slot = self.slots.get(target)?;
        match &slot.next {
            Some((generation, _)) => Some(*generation),
            None => slot.running.then_some(slot.running_gen),
        }
    }

    /// Moves the next write of `target` (already submitted) to the urgent lane: a task waits
    /// for it. When a write of `target` runs already in the bulk lane (the one the task waits
    /// for, or the one it waits behind), the store is hurried until it is written.
    pub(crate) fn make_urgent(&mut self, target: &Target) {
        let Some(slot) = self.slots.get_mut(target) else {
            return;
        };
        // The write the task waits for, or the one before it, runs already; in the bulk
        // lane it may be waiting for another batch's sync: the store stops holding batches
        // back until it is written.
        if slot.running && !slot.running_urgent && !slot.hurried {
            slot.hurried = true;
            self.store.hurry(true);
        }
        if slot.next.is_none() {
            return;
        }
        slot.urgent = true;
        if !slot.running && !slot.queued_urgent {
            slot.queued_urgent = true;
            self.ready_urgent.push(target.clone());
        }
    }

    /// Files with a write queued or running.
    pub(crate) fn pending(&self) -> usize {
        self.slots.len()
    }

    /// Writes completed so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Hands the ready writes to batches, as far as each lane's batch limit allows.
    pub(crate) fn flush(&mut self) {
        while !self.ready_urgent.is_empty() && self.urgent_batches < MAX_PARALLEL_BATCHES {
            let take = self.ready_urgent.len().min(BATCH_MAX);
            let targets: Vec<Target> = self.ready_urgent.drain(..take).collect();
            self.start_batch(targets, true);
        }
        while !self.ready.is_empty() && self.batches < MAX_PARALLEL_BATCHES {
            let take = self.ready.len().min(BATCH_MAX);
            let targets: Vec<Target> = self.ready.drain(..take).collect();
            self.start_batch(targets, false);
        }
    }

    /// Starts one batch of the given lane with the next write of each target (a bulk-listed
    /// target gone urgent meanwhile is left to the urgent lane).
    fn start_batch(&mut self, targets: Vec<Target>, urgent: bool) {
        let mut done = Vec::with_capacity(targets.len());
        let mut writes = Vec::with_capacity(targets.len());
        for target in targets {
            let Some(slot) = self.slots.get_mut(&target) else {
                continue;
            };
            if urgent {
                slot.queued_urgent = false;
            } else {
                slot.queued = false;
            }
            if slot.running || (slot.urgent && !urgent) {
                continue;
            }
            if let Some((generation, write)) = slot.next.take() {
                slot.running = true;
                slot.running_gen = generation;
                slot.running_urgent = urgent;
                slot.urgent = false;
                writes.push(write);
                done.push((target, generation));
            } else if !slot.queued && !slot.queued_urgent {
                // Written by the other lane meanwhile, and nothing new since.
                self.slots.remove(&target);
            }
        }
        if !writes.is_empty() {
            self.spawn(done, writes, urgent);
        }
    }

    /// Records a finished batch; files written again meanwhile become ready (in the urgent
    /// lane when a task waits for them).
    pub(crate) fn completed(&mut self, done: &[(Target, u64)], urgent: bool) {
        if urgent {
            self.urgent_batches = self.urgent_batches.saturating_sub(1);
        } else {
            self.batches = self.batches.saturating_sub(1);
        }
        for (target, _) in done {
            self.written += 1;
            let Some(slot) = self.slots.get_mut(target) else {
                continue;
            };
            slot.running = false;
            if std::mem::take(&mut slot.hurried) {
                self.store.hurry(false);
            }
            if slot.next.is_none() {
                if !slot.queued && !slot.queued_urgent {
                    self.slots.remove(target);
                }
            } else if slot.urgent {
                if !slot.queued_urgent {
                    slot.queued_urgent = true;
                    self.ready_urgent.push(target.clone());
                }
            } else if !slot.queued {
                slot.queued = true;
                self.ready.push(target.clone());
            }
        }
    }

    fn spawn(&mut self, done: Vec<(Target, u64)>, writes: Vec<Write>, urgent: bool) {
        if urgent {
            self.urgent_batches += 1;
        } else {
            self.batches += 1;
        }
        let store = Arc::clone(&self.store);
        let on_saved = Arc::clone(&self.on_saved);
        let commit = match (urgent, self.busy) {
            (true, _) => Commit::Now,
            (false, true) => Commit::Busy,
            (false, false) => Commit::Shared,
        };
        self.in_background(
            move || {
                store
                    .write_batch(writes, commit)
                    .map_err(RuntimeError::from)
            },
            move |result| {
                on_saved(Saved {
                    done,
                    result,
                    urgent,
                })
            },
        );
    }

    /// [`blocking_then`] with the clock held until `done` has returned, so virtual time
    /// cannot run ahead of the disk: the store's jobs (batches, checkpoints) run this way.
    fn in_background<T, J, D>(&self, job: J, done: D)
    where
        J: FnOnce() -> Result<T, RuntimeError> + Send + 'static,
        D: FnOnce(Result<T, RuntimeError>) + Send + 'static,
        T: Send + 'static,
    {
        let hold = self.clock.hold();
        blocking_then(job, move |result| {
            done(result);
            drop(hold);
        });
    }
}

/// The handled mark `old` held when `new` replaces it in a file's slot: kept on `new` when
/// it carries one too (the newer of the two), else returned to be saved on its own (a graph
/// deleted with its mark and made again before the deletion was written, say by an intent:
/// the new graph names no message).
fn carry_mark(
    old: Write,
    new: &mut Write,
) -> Option<(ConversationKey, crate::core::agent_state::HandledMark)> {
    let (key, mark) = match old {
        Write::DeleteGraph(key, Some(mark)) => (key, mark),
        Write::Handled { agent, chat, mark } => (ConversationKey::new(agent, chat), mark),
        _ => return None,
    };
    let slot = match new {
        Write::DeleteGraph(_, slot) => slot,
        Write::Handled { mark: newer, .. } => {
            if newer.message < mark.message {
                *newer = mark;
            }
            return None;
        }
        _ => return Some((key, mark)),
    };
    if slot.is_none_or(|m| m.message < mark.message) {
        *slot = Some(mark);
    }
    None
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use jiff::Timestamp;

    use super::{Persister, Target, Write};
    use crate::core::agent_state::{AgentState, HandledMark};
    use crate::core::graph::{ConversationKey, TaskGraph};
    use crate::core::model::{Chat, ChatId, ChatKind, MessageId};
    use crate::ports::store::{
        CheckpointReport, Commit, LoadedGraphs, LoadedPresence, Quarantined, RuntimeStore,
        StoreError,
    };

    /// A store that only records how each batch may share a sync, and its hurries.
    #[derive(Default)]
    struct Unused {
        commits: std::sync::Mutex<Vec<Commit>>,
        hurries: std::sync::Mutex<Vec<bool>>,
    }

    impl RuntimeStore for Unused {
        fn load_all(&self, _: Timestamp) -> Result<LoadedGraphs, StoreError> {
            Ok(LoadedGraphs::default())
        }
        fn load_agent_state(
            &self,
            _: &str,
        ) -> Result<(AgentState, Option<Quarantined>), StoreError> {
            Ok((AgentState::default(), None))
        }
        fn load_graph(
            &self,
            _: &ConversationKey,
            _: Timestamp,
        ) -> Result<(Option<crate::core::graph::TaskGraph>, Option<Quarantined>), StoreError>
        {
            Ok((None, None))
        }
        fn load_presence(
            &self,
            _: &str,
            _: jiff::civil::Date,
        ) -> Result<LoadedPresence, StoreError> {
            Ok(LoadedPresence::default())
        }
        fn write_batch(&self, _: Vec<Write>, commit: Commit) -> Result<(), StoreError> {
            if let Ok(mut commits) = self.commits.lock() {
                commits.push(commit);
            }
            Ok(())
        }
        fn hurry(&self, waiting: bool) {
            if let Ok(mut hurries) = self.hurries.lock() {
                hurries.push(waiting);
            }
        }
        fn checkpoint(&self, _: bool, _: Timestamp) -> Result<CheckpointReport, StoreError> {
            Ok(CheckpointReport::default())
        }
    }

    fn persister() -> Persister {
        let clock: crate::ports::clock::SharedClock = Arc::new(crate::ports::clock::SystemClock);
        Persister::new(
            Arc::new(Unused::default()),
            Arc::new(|_| {}),
            Arc::new(|_| {}),
            clock,
        )
    }

    /// A persister over `store` whose finished batches arrive on the receiver.
    fn reporting(
        store: &Arc<Unused>,
    ) -> (
        Persister,
        tokio::sync::mpsc::UnboundedReceiver<super::Saved>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let clock: crate::ports::clock::SharedClock = Arc::new(crate::ports::clock::SystemClock);
        let p = Persister::new(
            Arc::clone(store) as _,
            Arc::new(move |saved: super::Saved| {
                let _ = tx.send(saved);
            }),
            Arc::new(|_| {}),
            clock,
        );
        (p, rx)
    }

    /// The write of an empty graph of `chat`.
    fn graph_write(chat: i64) -> Write {
        let chat = Chat {
            id: ChatId(chat),
            kind: ChatKind::Direct,
            title: format!("chat {chat}"),
        };
        Write::Graph(Box::new(TaskGraph::with_tasks(
            "anna",
            chat,
            jiff::Timestamp::UNIX_EPOCH,
            Vec::new(),
        )))
    }

    /// The store is told how each batch may share a sync: a write a task waits for goes at
    /// once (`Now`), never held for another batch's; the bulk may wait while tasks are in
    /// flight (`Busy`), otherwise only in a stream of batches (`Shared`).
    #[tokio::test]
    async fn each_batch_tells_the_store_whether_it_may_wait()
    -> Result<(), Box<dyn std::error::Error>> {
        let store = Arc::new(Unused::default());
        let (mut p, mut rx) = reporting(&store);
        for (chat, busy, urgent) in [(1, false, false), (2, true, false), (3, true, true)] {
            let target = Target::Graph(ConversationKey::new("anna", ChatId(chat)));
            p.set_busy(busy);
            p.submit(target.clone(), graph_write(chat));
            if urgent {
                p.make_urgent(&target);
            }
            p.flush();
            let saved = rx.recv().await.ok_or("no batch reported")?;
            p.completed(&saved.done, saved.urgent);
        }
        let commits = store.commits.lock().map_err(|_| "poisoned")?.clone();
        assert_eq!(commits, [Commit::Shared, Commit::Busy, Commit::Now]);
        Ok(())
    }

    /// A task that starts waiting for a write already running in the bulk lane (a message's
    /// graph write, then its planning, in a later pass), or queued behind one (a new message
    /// while the chat's last deletion is written), hurries the store until that write is
    /// done, once; a write running in the urgent lane is never held back and needs none.
    #[tokio::test]
    async fn a_task_waiting_for_a_running_bulk_write_hurries_the_store()
    -> Result<(), Box<dyn std::error::Error>> {
        let store = Arc::new(Unused::default());
        let (mut p, mut rx) = reporting(&store);
        let hurries = || store.hurries.lock().map(|h| h.clone()).unwrap_or_default();
        for (id, urgent) in [(1, false), (2, true)] {
            let target = Target::Graph(ConversationKey::new("anna", ChatId(id)));
            p.set_busy(true);
            p.submit(target.clone(), graph_write(id));
            if urgent {
                p.make_urgent(&target);
            }
            p.flush();
            // The task comes in a later pass, while the write runs; and asks again.
            p.make_urgent(&target);
            p.make_urgent(&target);
            let expected: &[bool] = if urgent { &[true, false] } else { &[true] };
            assert_eq!(hurries(), expected, "while chat {id} runs");
            let saved = rx.recv().await.ok_or("no batch reported")?;
            p.completed(&saved.done, saved.urgent);
            assert_eq!(hurries(), [true, false], "after chat {id}");
        }
        // A task waiting for a newer write, queued behind a running bulk one, hurries too.
        let target = Target::Graph(ConversationKey::new("anna", ChatId(3)));
        p.submit(target.clone(), graph_write(3));
        p.flush();
        p.submit(target.clone(), graph_write(3));
        p.make_urgent(&target);
        assert_eq!(hurries(), [true, false, true], "behind a running write");
        let saved = rx.recv().await.ok_or("no batch reported")?;
        p.completed(&saved.done, saved.urgent);
        assert_eq!(hurries(), [true, false, true, false]);
        Ok(())
    }

    fn queued_mark(p: &Persister, key: &ConversationKey) -> Option<MessageId> {
        let target = Target::Handled(key.agent.clone(), key.chat);
        match p.slots.get(&target).and_then(|s| s.next.as_ref()) {
            Some((_, Write::Handled { mark, .. })) => Some(mark.message),
            _ => None,
        }
    }

    /// A deletion still queued with its graph's handled mark, replaced by a new graph of the
    /// same chat before it was written (one with no message: an intent's): the mark is
    /// queued on its own instead of vanishing with the deletion. A newer deletion keeps the
    /// newer of the two marks.
    #[test]
    fn a_replaced_deletion_keeps_its_handled_mark() -> Result<(), Box<dyn std::error::Error>> {
        let mut p = persister();
        let at = jiff::Timestamp::UNIX_EPOCH;
        let key = ConversationKey::new("anna", ChatId(7));
        let mark = |m| HandledMark {
            message: MessageId(m),
            at,
        };
        let target = Target::Graph(key.clone());
        p.submit(
            target.clone(),
            Write::DeleteGraph(key.clone(), Some(mark(70))),
        );
        let chat = Chat {
            id: ChatId(7),
            kind: ChatKind::Direct,
            title: "chat 7".into(),
        };
        let graph = TaskGraph::with_tasks("anna", chat, at, Vec::new());
        p.submit(target.clone(), Write::Graph(Box::new(graph)));
        assert_eq!(queued_mark(&p, &key), Some(MessageId(70)));

        p.submit(
            target.clone(),
            Write::DeleteGraph(key.clone(), Some(mark(80))),
        );
        p.submit(
            target.clone(),
            Write::DeleteGraph(key.clone(), Some(mark(75))),
        );
        match p.slots.get(&target).and_then(|s| s.next.as_ref()) {
            Some((_, Write::DeleteGraph(_, Some(m)))) => assert_eq!(m.message, MessageId(80)),
            other => return Err(format!("the deletion lost its mark: {other:?}").into()),
        }
        Ok(())
    }

    /// A write job that panics still reports: its result reaches the callback as
    /// `Panicked` (without the catch the callback would be dropped unrun, and the loop would
    /// wait forever for a batch that never finishes).
    #[tokio::test]
    async fn a_panicking_job_reports_to_its_callback() -> Result<(), Box<dyn std::error::Error>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        super::blocking_then(
            || -> Result<(), super::RuntimeError> { panic!("a store bug") },
            move |result| {
                let _ = tx.send(result);
            },
        );
        let result = rx.await?;
        assert!(
            matches!(result, Err(super::RuntimeError::Panicked)),
            "{result:?}"
        );
        Ok(())
    }

    /// A job's own result, error or not, reaches the callback unchanged.
    #[tokio::test]
    async fn a_jobs_result_reaches_its_callback() -> Result<(), Box<dyn std::error::Error>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        super::blocking_then(
            || Ok::<u32, super::RuntimeError>(7),
            move |result| {
                let _ = tx.send(result);
            },
        );
        assert_eq!(rx.await?.ok(), Some(7));
        Ok(())
    }
}
