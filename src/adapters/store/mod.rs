//! The state store. Everything the daemon writes to disk goes through it, and every path
//! under the state directory is built by it:
//! - [`files`]: crash-safe whole-file writes, batches, durable removal and moves, capped
//!   reads that refuse links and special files, quarantine of unreadable files; by path,
//!   knowing no record (each owner serializes its own: the media pipeline its records, the
//!   usage meter its totals, ...);
//! - [`layout`]: [`StateDir`], the one place that builds paths under the state directory;
//! - [`appender`]: an append-only file kept open between appends (transcript journals),
//!   each append one write and one data sync, a failed one cut back;
//! - [`io_stats`]: counts of the store's syncs, renames, opens and directory creations, for
//!   the benches;
//! - [`absent`]: which memory files are known to be absent (rechecked by their directory);
//! - [`known_dirs`]: the directories this process made, so a write does not make them again;
//! - [`lock`]: the one `flock` implementation, for the state directory and the sessions;
//! - [`secure`]: keeping the state directory private;
//! - [`graphs`]: the runtime's durable state (graph files, agent safety states), the
//!   file-backed implementation of the store port the runtime writes through;
//! - [`journal`]: the journal's record format and segment files; `journaled`, the group
//!   commit into it and the checkpoints written from it; `replay`, reading it back at start
//!   and for the read-only views;
//! - [`pack`]: each agent's graph files in one file, written at a clean stop and read at
//!   start in their place while it matches them;
//! - [`presence`]: the persona's schedule days and scheduled intents (read here, written
//!   through the runtime's batches);
//! - [`retrieved`]: the documents each chat's `retrieve` tasks kept;
//! - [`windows`]: the planner's window records, one append-only journal per agent.
//!
//! All functions block; async callers run them through `tokio::task::spawn_blocking`. Other
//! modules must not write files themselves.

pub mod absent;
pub mod appender;
pub mod facts;
pub mod files;
pub mod graphs;
pub mod io_stats;
pub mod journal;
pub(crate) mod journaled;
pub mod known_dirs;
pub mod layout;
pub(crate) mod legacy;
pub mod lock;
pub mod pack;
pub mod presence;
pub(crate) mod replay;
pub mod retrieved;
pub(crate) mod secure;
pub mod windows;

pub use crate::ports::store::{LoadedGraphs, Quarantined, StoreError, Write};
pub use files::{
    GRAPH_FILE_CAP, REASON_SUFFIX, Refused, STATE_FILE_CAP, Symlinks, append_synced, apply_batch,
    create_private_file, ensure_private_dir, file_kind, list_quarantined, move_file, quarantine,
    read_file, read_operator_file, read_optional, read_to_string, refusal, remove, write_atomic,
    write_json, write_quarantine_reason,
};
pub use graphs::{
    GraphFile, GraphStore, RecordError, list_agent_states, load_agent_state, save_agent_state,
};
pub use layout::{DirGuard, LOCK_FILE, StateDir, fs_name, media_record_path};
pub use lock::{FileLock, LockError, LockFailure, StateGone, StateLock};
pub use secure::{Tightened, secure_state_dir};
