//! Reading the journals back: at start (over the checkpoint files, with problems logged and
//! corrupted segments kept in `quarantine/`) and for the read-only views (`state show`,
//! `state list`, the console), which show a running daemon's newer state over its files.
//!
//! It must not write anything but the quarantine copies, nor decide what the replayed state
//! becomes (the store adopts it: `Journals::adopt` in `journaled`). Called by `graphs` and
//! `journaled` (for [`Marks`] and [`raise`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tracing::{error, warn};

use super::StoreError;
use super::files::{ensure_private_dir, io_err, write_quarantine_reason};
use super::journal::{self, Record};
use super::layout::StateDir;
use crate::core::agent_state::{AgentState, HandledMark};
use crate::core::graph::{ConversationKey, TaskGraph};
use crate::core::model::ChatId;

/// The handled marks of one agent.
pub(crate) type Marks = std::collections::BTreeMap<ChatId, HandledMark>;

/// Raises `chat`'s mark in `marks` to `mark` if it is newer.
pub(super) fn raise(marks: &mut Marks, chat: ChatId, mark: HandledMark) {
    match marks.get(&chat) {
        Some(m) if m.message >= mark.message => {}
        _ => {
            marks.insert(chat, mark);
        }
    }
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
