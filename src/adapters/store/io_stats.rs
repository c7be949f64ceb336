//! Counts of the store's own system calls, for the benches: every data or file sync, rename,
//! open (and failed open of an absent file), directory creation and temp file the store's
//! primitives make is counted here, process-wide, with relaxed atomics (a few nanoseconds per
//! call). `personad bench` reads [`snapshot`] before and after a run and reports the
//! difference per message, next to what `strace -c` sees from outside.
//!
//! It counts; it decides nothing and is never read on a runtime path. Called by `files`,
//! `journal` and the other store modules at the place of each call.

use std::sync::atomic::{AtomicU64, Ordering};

/// What is counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `fsync` (a file's data and metadata, or a directory).
    Fsync,
    /// `fdatasync` (a file's data).
    Fdatasync,
    Rename,
    /// An `open` that found its file.
    Open,
    /// An `open` of a file that is not there (`ENOENT`).
    OpenAbsent,
    /// A `mkdir` (made or already there).
    Mkdir,
    /// A temp file created for a whole-file replacement.
    TempFile,
}

const OPS: usize = 7;

static COUNTS: [AtomicU64; OPS] = [const { AtomicU64::new(0) }; OPS];

fn slot(op: Op) -> usize {
    match op {
        Op::Fsync => 0,
        Op::Fdatasync => 1,
        Op::Rename => 2,
        Op::Open => 3,
        Op::OpenAbsent => 4,
        Op::Mkdir => 5,
        Op::TempFile => 6,
    }
}

/// Counts one call.
pub fn note(op: Op) {
    COUNTS[slot(op)].fetch_add(1, Ordering::Relaxed);
}

/// The counts so far, process-wide.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoCounts {
    pub fsync: u64,
    pub fdatasync: u64,
    pub rename: u64,
    pub open: u64,
    pub open_absent: u64,
    pub mkdir: u64,
    pub temp_file: u64,
}

impl IoCounts {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &IoCounts) -> IoCounts {
        IoCounts {
            fsync: self.fsync.saturating_sub(earlier.fsync),
            fdatasync: self.fdatasync.saturating_sub(earlier.fdatasync),
            rename: self.rename.saturating_sub(earlier.rename),
            open: self.open.saturating_sub(earlier.open),
            open_absent: self.open_absent.saturating_sub(earlier.open_absent),
            mkdir: self.mkdir.saturating_sub(earlier.mkdir),
            temp_file: self.temp_file.saturating_sub(earlier.temp_file),
        }
    }

    /// Syncs of either kind.
    pub fn syncs(&self) -> u64 {
        self.fsync + self.fdatasync
    }
}

/// The counts so far.
pub fn snapshot() -> IoCounts {
    let get = |op| COUNTS[slot(op)].load(Ordering::Relaxed);
    IoCounts {
        fsync: get(Op::Fsync),
        fdatasync: get(Op::Fdatasync),
        rename: get(Op::Rename),
        open: get(Op::Open),
        open_absent: get(Op::OpenAbsent),
        mkdir: get(Op::Mkdir),
        temp_file: get(Op::TempFile),
    }
}
