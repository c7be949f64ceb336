//! The store port: what the runtime needs from durable storage. It loads every saved task
//! graph and an agent's safety state at start, and writes batches of graph snapshots,
//! graph deletions and safety states, returning only once the whole batch is durable (the
//! runtime starts a side effect only after the write of its `active` mark returned).
//!
//! The file-backed implementation is `adapters::store::GraphStore`; the app builds it and
//! hands it to the runtime. This module holds the trait and its vocabulary only (the write
//! kinds, what a load found, the error), never an implementation. Methods block: the runtime
//! calls them on the blocking pool.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use jiff::Timestamp;

use crate::core::agent_state::AgentState;
use crate::core::graph::codec::CodecError;
use crate::core::graph::{ConversationKey, TaskGraph};
use crate::core::intents::Intent;
use crate::core::presence::DaySchedule;

/// A storage failure, naming the path involved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The state directory was removed or replaced under the process: nothing is written.
    #[error(transparent)]
    Gone(#[from] StateGone),
    #[error("could not encode graph {key}: {source}")]
    Encode {
        key: String,
        #[source]
        source: CodecError,
    },
}

/// Why the state directory can no longer be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the state directory {dir} was {what} while the daemon ran; stopping without writing to it (start again once it is back)"
)]
pub struct StateGone {
    pub dir: PathBuf,
    pub what: &'static str,
}

/// One write of a batch (see [`RuntimeStore::write_batch`]).
#[derive(Debug)]
pub enum Write {
    Graph(Box<TaskGraph>),
    /// The graph is gone; the handled mark it held, when it held one, is saved with its
    /// deletion (never after it: a crash between the two would forget the mark).
    DeleteGraph(
        ConversationKey,
        Option<crate::core::agent_state::HandledMark>,
    ),
    /// The agent's safety state without its handled marks ([`AgentState::without_marks`]).
    AgentState(String, Box<AgentState>),
    /// One chat's handled mark.
    Handled {
        agent: String,
        chat: crate::core::model::ChatId,
        mark: crate::core::agent_state::HandledMark,
    },
    /// One day of an agent's schedule.
    Day(String, Box<DaySchedule>, Option<Box<DaySchedule>>),
    /// Every scheduled intent of an agent.
    Intents(String, Vec<Intent>),
}

/// An agent's presence as found on disk: the schedule's days around today and its intents,
/// with what could not be read (each naming its file and line; such a day falls back, an
/// unreadable intents file is moved aside).
#[derive(Debug, Default)]
pub struct LoadedPresence {
    pub days: Vec<DaySchedule>,
    /// Days whose file is there but does not read (left alone; the fallback covers them).
    pub unreadable: Vec<jiff::civil::Date>,
    pub intents: Vec<Intent>,
    pub problems: Vec<String>,
}

/// A file that could not be read and was moved aside.
#[derive(Debug, Clone)]
pub struct Quarantined {
    pub original: PathBuf,
    pub moved_to: PathBuf,
    pub reason: String,
}

/// Everything found in the state directory at startup.
#[derive(Debug, Default)]
pub struct LoadedGraphs {
    pub graphs: Vec<TaskGraph>,
    pub quarantined: Vec<Quarantined>,
    pub stale_temp_files_removed: usize,
    /// Graphs read from the agents' graph packs instead of their files.
    pub from_packs: usize,
    /// Graph packs not used (they did not match their files, or did not read), and why:
    /// removed, their files read instead.
    pub stale_packs: Vec<(PathBuf, String)>,
}

/// The runtime's durable state: task graphs and agents' safety states.
pub trait RuntimeStore: Send + Sync + 'static {
    /// Startup load at `now` (the runtime's clock): every saved graph; unreadable ones, and
    /// ones with a time further than the graph horizon past `now`, are moved aside (reported,
    /// never deleted) and debris of interrupted writes removed.
    fn load_all(&self, now: Timestamp) -> Result<LoadedGraphs, StoreError>;

    /// One graph as the runtime last made it durable (the journal's state not checkpointed
    /// yet, else its checkpoint file), for a dormant graph coming back into RAM (`Ok((None,
    /// _))`: it has none). A file that does not read (or is past the horizon from `now`) is
    /// moved aside as at start and returned so the caller can log it.
    fn load_graph(
        &self,
        key: &ConversationKey,
        now: Timestamp,
    ) -> Result<(Option<TaskGraph>, Option<Quarantined>), StoreError>;

    /// An agent's safety state: a fresh one when none was saved; an unreadable one is moved
    /// aside (returned so the caller can log it) and a fresh one used.
    fn load_agent_state(
        &self,
        agent: &str,
    ) -> Result<(AgentState, Option<Quarantined>), StoreError>;

    /// An agent's schedule days from a week before `today` to two days after it, and its
    /// intents.
    fn load_presence(
        &self,
        agent: &str,
        today: jiff::civil::Date,
    ) -> Result<LoadedPresence, StoreError>;

    /// Carries out a batch of writes; returns once all of it is durable. `commit` says
    /// whether it may wait a moment for another batch's sync to cover it too (group commit).
    fn write_batch(&self, writes: Vec<Write>, commit: Commit) -> Result<(), StoreError>;

    /// A task now waits (`true`), or no longer waits (`false`), for a batch already handed
    /// to [`RuntimeStore::write_batch`] without [`Commit::Now`] (a message's graph write,
    /// then its planning): while any task does, no batch waits for another's sync, and one
    /// waiting stops. Called from the async side: it must not block. The default does
    /// nothing (a store with no group commit).
    fn hurry(&self, waiting: bool) {
        let _ = waiting;
    }

    /// Brings the human-readable checkpoints (graph files, agent states) up to what is
    /// durable; with `full`, also retires what the journal holds (every checkpoint synced,
    /// the old segments removed), as at a clean stop. `now` (the runtime's clock) ages the
    /// handled marks. Nothing to do is cheap.
    fn checkpoint(&self, full: bool, now: Timestamp) -> Result<CheckpointReport, StoreError>;
}

/// Whether a batch may share another batch's sync (group commit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// A task waits for it (a side effect's `active` mark): made durable at once, never
    /// held back for a sync that may not come.
    Now,
    /// No task waits for it: it may wait a moment for another batch's sync when it comes in
    /// a stream of batches (a burst of inbound messages).
    Shared,
    /// No task waits for it and tasks are in flight, so more writes are coming: it may wait
    /// a moment for their sync.
    Busy,
}

/// A graph that moves within this long (a task active, or one ready by then:
/// `TaskGraph::moves_within`) is not written to its checkpoint file by a checkpoint: the
/// journal holds it and `state show` reads it from there, and a reply cycle that ends within
/// it never creates a file only to remove it. It is written within a checkpoint's delay once it
/// settles, or once it has been moving this long, and always by a full checkpoint; the
/// retirement of its journal segment carries it into the new segment instead.
pub const SETTLE_HORIZON: std::time::Duration = std::time::Duration::from_secs(60);

/// What a checkpoint wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Graph files written or removed, and agent states written.
    pub files: usize,
    /// Journal segments retired.
    pub retired: usize,
    /// Graphs not written yet because they are still moving: another checkpoint is owed.
    pub moving: usize,
    /// Moving graphs a retirement appended to the new journal segment instead of writing
    /// their files (counted among `moving`).
    pub carried: usize,
}

/// Shared handle.
pub(crate) type SharedStore = Arc<dyn RuntimeStore>;
