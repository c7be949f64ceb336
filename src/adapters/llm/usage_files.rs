//! The usage files of each agent: the journal `usage/<agent>.log`, one JSON line per metered
//! call (its tokens, model, kind and UTC day, and a sequence number), appended and synced by the
//! [`UsageMeter`] at most every few seconds; and the daily table `usage/<agent>.json`, into
//! which the journal is folded (compaction) when it grows long and when the meter stops. The
//! table records the last sequence number it holds (`applied`), so a crash between writing
//! the table and removing the journal counts nothing twice, and lines appended twice (a
//! retried append) count once. Rows are keyed by agent, model, kind ([`CallKind`]) and day;
//! files written before kinds were kept (table format 1, journal lines without `kind`) load
//! with their rows as [`CallKind::Mixed`], which is what they counted.
//!
//! It owns the row both files count in ([`UsageRow`], which `usage` re-exports), both formats
//! and their reading: journal lines at or below the table's `applied` and repeated sequence
//! numbers are skipped, a last line cut short by a crash is ignored (its counts are lost, and
//! said so), and any other bad line is reported by its number.
//! It does not keep totals or decide when to save (that is the meter).
//!
//! [`UsageMeter`]: super::usage::UsageMeter

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::adapters::store::{self, StateDir, StoreError};
use crate::core::call_kind::CallKind;

/// The table format written: 2 has a `kind` in every row.
const FORMAT: u32 = 2;
/// Format 1: rows without `kind`, read as [`CallKind::Mixed`].
const FORMAT_WITHOUT_KINDS: u32 = 1;

/// A row's key: agent, model, kind, UTC day.
pub(crate) type Key = (String, String, CallKind, String);

/// Journal lines after which the meter folds an agent's journal into its table.
pub(crate) const COMPACT_AT: usize = 512;

/// One agent's use of one model for one kind of call on one UTC day.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageRow {
    pub agent: String,
    pub model: String,
    /// What the calls were for; absent in files written before kinds ([`CallKind::Mixed`]).
    #[serde(default)]
    pub kind: CallKind,
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    /// Requests sent (each HTTP attempt), whatever became of them.
    pub requests: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    /// Of `requests`, those whose answer was never read: the plan they were for was
    /// superseded (a newer message) or the daemon stopped. They are billed all the same.
    #[serde(default)]
    pub discarded: u64,
    /// Characters spoken ([`CallKind::Speech`]; speech is billed by the character, not the
    /// token). Absent when zero, so files without speech read and write as before.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub characters: u64,
    /// Bytes fetched ([`CallKind::Retrieve`]). Absent when zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes: u64,
}

impl UsageRow {
    /// Its key in the totals: agent, model, kind, day.
    pub(crate) fn key(&self) -> Key {
        (
            self.agent.clone(),
            self.model.clone(),
            self.kind,
            self.day.clone(),
        )
    }

    /// A row of `agent`, `model`, `kind` and `day` with nothing counted yet.
    pub(crate) fn zero(agent: &str, model: &str, kind: CallKind, day: &str) -> UsageRow {
        UsageRow {
            agent: agent.to_owned(),
            model: model.to_owned(),
            kind,
            day: day.to_owned(),
            ..UsageRow::default()
        }
    }
}

/// One metered call (or, after a failed append was retried, one call again: same `seq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LogLine {
    pub seq: u64,
    pub agent: String,
    pub model: String,
    /// Absent in lines written before kinds ([`CallKind::Mixed`]).
    #[serde(default)]
    pub kind: CallKind,
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub requests: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prompt_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub output_tokens: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub discarded: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub characters: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub bytes: u64,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LogLine {
    /// The line for the change `delta` (a row of counts, starting from zero) made to the row
    /// of `delta.agent`, `delta.model`, `delta.kind` and `delta.day`.
    pub(crate) fn of(seq: u64, delta: &UsageRow) -> LogLine {
        LogLine {
            seq,
            agent: delta.agent.clone(),
            model: delta.model.clone(),
            kind: delta.kind,
            day: delta.day.clone(),
            requests: delta.requests,
            prompt_tokens: delta.prompt_tokens,
            cached_tokens: delta.cached_tokens,
            output_tokens: delta.output_tokens,
            discarded: delta.discarded,
            characters: delta.characters,
            bytes: delta.bytes,
        }
    }

    /// Adds this line's counts to `row`.
    pub(crate) fn add_to(&self, row: &mut UsageRow) {
        row.requests = row.requests.saturating_add(self.requests);
        row.prompt_tokens = row.prompt_tokens.saturating_add(self.prompt_tokens);
        row.cached_tokens = row.cached_tokens.saturating_add(self.cached_tokens);
        row.output_tokens = row.output_tokens.saturating_add(self.output_tokens);
        row.discarded = row.discarded.saturating_add(self.discarded);
        row.characters = row.characters.saturating_add(self.characters);
        row.bytes = row.bytes.saturating_add(self.bytes);
    }
}

/// What reading a journal found.
#[derive(Debug, Default)]
pub(crate) struct LogRead {
    /// Lines after `applied`, each sequence number once, in order.
    pub lines: Vec<LogLine>,
    /// The highest sequence number seen (0 when none).
    pub last_seq: u64,
    /// Lines in the file that parsed (the length compaction is measured by).
    pub length: usize,
    /// Lines that did not parse, as `line N: why`.
    pub bad: Vec<String>,
    /// The last line was cut short (a crash while appending): its counts are lost.
    pub torn_tail: bool,
}

/// Reads the journal at `path` (absent: empty), keeping lines whose sequence number is
/// above `applied`, each number once (lines may be out of order after a retried append).
pub(crate) fn read(path: &Path, applied: u64) -> Result<LogRead, StoreError> {
    let bytes = match store::read_file(path, store::STATE_FILE_CAP, store::Symlinks::Refuse) {
        Ok(bytes) => bytes,
        Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(LogRead::default());
        }
        Err(e) => return Err(e),
    };
    Ok(parse(&bytes, applied))
}

/// [`read`] on bytes already read.
pub(crate) fn parse(bytes: &[u8], applied: u64) -> LogRead {
    let mut out = LogRead::default();
    let complete = bytes.last().is_none_or(|b| *b == b'\n');
    let mut chunks: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    // The piece after the last newline: empty when the file ends with one.
    let tail = chunks.pop().unwrap_or_default();
    if !complete && !tail.is_empty() {
        out.torn_tail = true;
    }
    let mut seen = std::collections::HashSet::new();
    for (n, chunk) in chunks.iter().enumerate() {
        if chunk.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<LogLine>(chunk) {
            Ok(line) => {
                out.length += 1;
                out.last_seq = out.last_seq.max(line.seq);
                if line.seq > applied && seen.insert(line.seq) {
                    out.lines.push(line);
                }
            }
            Err(e) => out.bad.push(format!("line {}: {e}", n + 1)),
        }
    }
    out
}

/// The bytes that append `lines` to a journal.
pub(crate) fn encode(lines: &[LogLine]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(lines.len() * 128);
    for line in lines {
        // A struct of strings and integers always serializes.
        if serde_json::to_writer(&mut bytes, line).is_ok() {
            bytes.push(b'\n');
        }
    }
    bytes
}

/// The on-disk form of one agent's totals.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct UsageFile {
    format: u32,
    agent: String,
    /// The last journal line folded into `rows`: lines up to it are not counted again.
    #[serde(default)]
    applied: u64,
    rows: Vec<UsageRow>,
}

/// Writes `agent`'s table: `rows`, holding every journal line up to `applied`.
pub(crate) fn write_table(
    state: &StateDir,
    agent: &str,
    rows: Vec<UsageRow>,
    applied: u64,
) -> Result<(), StoreError> {
    let file = UsageFile {
        format: FORMAT,
        agent: agent.to_owned(),
        applied,
        rows,
    };
    let bytes = serde_json::to_vec_pretty(&file).map_err(|e| StoreError::Io {
        action: "cannot encode the usage table for",
        path: state.usage_path(agent),
        source: std::io::Error::other(e),
    })?;
    store::ensure_private_dir(&state.usage_dir())?;
    store::write_atomic(&state.usage_path(agent), &bytes)
}

/// What the meter starts from.
pub(crate) struct Loaded {
    pub rows: Vec<UsageRow>,
    /// The last sequence number used, per agent.
    pub last_seq: BTreeMap<String, u64>,
    /// Lines left in each agent's journal (only where folding it at start-up failed).
    pub length: BTreeMap<String, usize>,
}

/// Reads every agent's usage for a starting meter (blocking). A journal left by a daemon
/// that did not stop cleanly is folded into its table now. Unreadable tables, and journals
/// with unreadable lines, are moved aside (`*.unreadable`) with a warning.
pub(crate) fn load(state: &StateDir) -> Loaded {
    let mut loaded = Loaded {
        rows: Vec::new(),
        last_seq: BTreeMap::new(),
        length: BTreeMap::new(),
    };
    for agent in read_agents(state) {
        if let Some((path, why)) = &agent.table_problem {
            let aside = store::layout::unreadable_usage_path(path);
            tracing::warn!(path = %path.display(), error = %why, "usage file unreadable; moved aside");
            if let Err(e) = store::move_file(path, &aside) {
                tracing::warn!(error = %e, "could not move the usage file aside");
            }
        }
        if agent.log.torn_tail {
            tracing::warn!(path = %agent.log_path.display(), "the usage journal's last line was cut short (the daemon did not stop cleanly); its counts are lost");
        }
        let folded = agent.compact_at_load(state);
        let last = agent.applied.max(agent.log.last_seq);
        loaded.last_seq.insert(agent.name.clone(), last);
        if !folded {
            loaded.length.insert(agent.name.clone(), agent.log.length);
        }
        loaded.rows.extend(agent.rows);
    }
    loaded
}

/// One agent's saved usage: its table and its journal read together.
struct AgentUsage {
    /// The agent's name (from its table, else its journal, else the file name).
    name: String,
    /// The table's rows plus the journal's lines after `applied`.
    rows: Vec<UsageRow>,
    applied: u64,
    log: LogRead,
    log_path: PathBuf,
    table_problem: Option<(PathBuf, String)>,
    log_problem: Option<(PathBuf, String)>,
}

impl AgentUsage {
    /// At start-up: a journal with lines (a daemon that did not stop cleanly) is folded into
    /// the table and removed, or moved aside when some of its lines were unreadable. True
    /// when the journal is gone.
    fn compact_at_load(&self, state: &StateDir) -> bool {
        let damaged = !self.log.bad.is_empty() || self.log_problem.is_some();
        if self.log.length == 0 && !self.log.torn_tail && !damaged {
            return true;
        }
        if let Some((path, why)) = &self.log_problem {
            tracing::warn!(path = %path.display(), error = %why, "usage journal unreadable; moved aside");
        }
        for bad in &self.log.bad {
            tracing::warn!(path = %self.log_path.display(), line = %bad, "usage journal line unreadable; the journal is moved aside");
        }
        let last = self.applied.max(self.log.last_seq);
        let folded = write_table(state, &self.name, self.rows.clone(), last).and_then(|()| {
            if damaged {
                store::move_file(
                    &self.log_path,
                    &store::layout::unreadable_usage_path(&self.log_path),
                )
            } else {
                store::remove(&self.log_path)
            }
        });
        match folded {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(agent = %self.name, error = %e, "usage journal not folded into its table at start-up; kept");
                false
            }
        }
    }
}

/// Every agent with a usage table or journal, each read whole. The journal is read before
/// the table: a compaction in between then skips (by `applied`) what the table now holds,
/// where the other order could miss it.
fn read_agents(state: &StateDir) -> Vec<AgentUsage> {
    let dir = state.usage_dir();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut stems: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "log"))
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_owned()))
        .collect();
    stems.sort();
    stems.dedup();
    stems
        .into_iter()
        .map(|stem| read_agent(&dir, &stem))
        .collect()
}

fn read_agent(dir: &Path, stem: &str) -> AgentUsage {
    let log_path = dir.join(format!("{stem}.log"));
    let table_path = dir.join(format!("{stem}.json"));
    // Everything, then what the table already holds is dropped below.
    let (log, log_problem) = match read(&log_path, 0) {
        Ok(log) => (log, None),
        Err(e) => (LogRead::default(), Some((log_path.clone(), e.to_string()))),
    };
    let (table, table_problem) = if table_path.exists() {
        match read_file(&table_path) {
            Ok(file) => (Some(file), None),
            Err(why) => (None, Some((table_path, why.to_string()))),
        }
    } else {
        (None, None)
    };
    let applied = table.as_ref().map_or(0, |t| t.applied);
    let name = table
        .as_ref()
        .map(|t| t.agent.clone())
        .or_else(|| log.lines.first().map(|l| l.agent.clone()))
        .unwrap_or_else(|| stem.to_owned());
    let mut rows: BTreeMap<Key, UsageRow> = table
        .map(|t| t.rows)
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.key(), r))
        .collect();
    for line in log.lines.iter().filter(|l| l.seq > applied) {
        let row = rows
            .entry((
                line.agent.clone(),
                line.model.clone(),
                line.kind,
                line.day.clone(),
            ))
            .or_insert_with(|| UsageRow::zero(&line.agent, &line.model, line.kind, &line.day));
        line.add_to(row);
    }
    AgentUsage {
        name,
        rows: rows.into_values().collect(),
        applied,
        log,
        log_path,
        table_problem,
        log_problem,
    }
}

/// Every saved row (tables and journals together), and the files that could not be read
/// (path and reason; a journal's bad lines by number). Reads only: a running daemon's files
/// are read as they are (a line it is appending is not counted yet).
pub fn read_totals(state: &StateDir) -> (Vec<UsageRow>, Vec<(PathBuf, String)>) {
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    for agent in read_agents(state) {
        problems.extend(agent.table_problem);
        problems.extend(agent.log_problem);
        for bad in agent.log.bad {
            problems.push((agent.log_path.clone(), bad));
        }
        rows.extend(agent.rows);
    }
    (rows, problems)
}

/// Why a usage file could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UsageFileError {
    #[error(transparent)]
    Read(#[from] StoreError),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("unknown format {0}")]
    Format(u32),
}

fn read_file(path: &Path) -> Result<UsageFile, UsageFileError> {
    let text = store::read_to_string(path)?;
    let file: UsageFile = serde_json::from_str(&text)?;
    if file.format != FORMAT && file.format != FORMAT_WITHOUT_KINDS {
        return Err(UsageFileError::Format(file.format));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: u64, tokens: u64) -> LogLine {
        LogLine {
            seq,
            agent: "Wren".into(),
            model: "m".into(),
            kind: CallKind::Plan,
            day: "2025-06-15".into(),
            requests: 1,
            prompt_tokens: tokens,
            cached_tokens: 0,
            output_tokens: 0,
            discarded: 0,
            characters: 0,
            bytes: 0,
        }
    }

    #[test]
    fn lines_round_trip_and_zero_counts_are_left_out() {
        let bytes = encode(&[line(1, 10), line(2, 0)]);
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(text.lines().count(), 2);
        assert!(!text.contains("discarded"), "{text}");
        let read = parse(&bytes, 0);
        assert_eq!(read.lines, vec![line(1, 10), line(2, 0)]);
        assert_eq!((read.last_seq, read.length), (2, 2));
        assert!(read.bad.is_empty() && !read.torn_tail);
    }

    #[test]
    fn lines_the_table_holds_and_repeated_lines_count_once() {
        // 1 and 2 are in the table already; 3 was appended twice (a retried append).
        let bytes = encode(&[line(1, 1), line(2, 2), line(3, 3), line(3, 3), line(4, 4)]);
        let read = parse(&bytes, 2);
        let seqs: Vec<u64> = read.lines.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, vec![3, 4]);
        assert_eq!(read.last_seq, 4);
        // A retried append can land after a later save's lines: order does not matter.
        let late = parse(&encode(&[line(6, 6), line(5, 5), line(6, 6)]), 0);
        let seqs: Vec<u64> = late.lines.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, vec![6, 5]);
    }

    #[test]
    fn a_cut_short_last_line_is_ignored_and_a_bad_line_is_named() {
        let mut bytes = encode(&[line(1, 1)]);
        bytes.extend_from_slice(b"not json\n");
        bytes.extend(encode(&[line(2, 2)]));
        bytes.extend_from_slice(br#"{"seq":3,"agent":"Wr"#);
        let read = parse(&bytes, 0);
        assert_eq!(read.lines.len(), 2);
        assert!(read.torn_tail);
        assert_eq!(read.bad.len(), 1);
        assert!(read.bad[0].starts_with("line 2:"), "{:?}", read.bad);
    }
}

/// The meter and these files together: what a kill -9 at each point leaves, and what a
/// later meter and `state usage` make of it.
#[cfg(test)]
mod meter_tests {
    use std::sync::Arc;

    use super::super::usage::{Usage, UsageMeter};
    use super::*;
    use crate::ports::clock::{SharedClock, VirtualClock};

    struct Fixture {
        _dir: tempfile::TempDir,
        state: StateDir,
        clock: SharedClock,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let state = StateDir::new(dir.path());
        let start = "2025-06-15T12:00:00Z"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        let clock: SharedClock = Arc::new(VirtualClock::new(start, false));
        Fixture {
            _dir: dir,
            state,
            clock,
        }
    }

    impl Fixture {
        fn meter(&self) -> UsageMeter {
            UsageMeter::load(self.state.clone(), Arc::clone(&self.clock))
        }
        fn log(&self) -> PathBuf {
            self.state.usage_log_path("Wren")
        }
        fn table(&self) -> Option<UsageFile> {
            read_file(&self.state.usage_path("Wren")).ok()
        }
        /// (requests, prompt tokens) summed over the saved rows of Wren.
        fn saved(&self) -> (u64, u64) {
            let (rows, problems) = read_totals(&self.state);
            assert!(problems.is_empty(), "{problems:?}");
            let wren = rows.iter().filter(|r| r.agent == "Wren");
            wren.fold((0, 0), |(n, p), r| (n + r.requests, p + r.prompt_tokens))
        }
    }

    fn call(meter: &UsageMeter, prompt_tokens: u64) {
        let usage = Usage {
            prompt_tokens,
            cached_tokens: 0,
            output_tokens: 1,
        };
        meter.add("Wren", "m", CallKind::Plan, usage);
    }

    fn journal_lines(path: &Path) -> usize {
        std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
    }

    #[tokio::test]
    async fn calls_are_appended_to_the_journal_and_read_with_the_table() {
        let f = fixture();
        let meter = f.meter();
        for _ in 0..3 {
            call(&meter, 100);
        }
        meter.flush_due().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(journal_lines(&f.log()), 3, "one line per call");
        assert!(f.table().is_none(), "no table rewrite on the hot path");
        assert_eq!(f.saved(), (3, 300), "state usage reads the journal");
        // A stop folds the journal into the table and removes it.
        meter.flush().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(!f.log().exists());
        let table = f.table().unwrap_or_else(|| panic!("no table"));
        assert_eq!(table.applied, 3);
        assert_eq!(f.saved(), (3, 300));
    }

    #[tokio::test]
    async fn a_meter_after_a_kill_continues_from_the_journal() {
        let f = fixture();
        let first = f.meter();
        call(&first, 100);
        first.flush().await.unwrap_or_else(|e| panic!("{e}"));
        drop(first);
        // The next run appends two calls to the journal, then is killed.
        let meter = f.meter();
        call(&meter, 10);
        call(&meter, 10);
        meter.flush_due().await.unwrap_or_else(|e| panic!("{e}"));
        call(&meter, 1); // never saved: the kill comes first
        drop(meter);
        let again = f.meter();
        assert!(!f.log().exists(), "the journal is folded at start-up");
        assert_eq!(f.table().map(|t| t.applied), Some(3));
        let totals: u64 = again.totals().iter().map(|r| r.prompt_tokens).sum();
        assert_eq!(totals, 120);
        call(&again, 1000);
        again.flush().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.saved(), (4, 1120));
        assert_eq!(f.table().map(|t| t.applied), Some(4), "numbers go on");
    }

    #[tokio::test]
    async fn a_crash_between_the_table_and_the_journals_removal_counts_nothing_twice() {
        let f = fixture();
        let meter = f.meter();
        for _ in 0..3 {
            call(&meter, 100);
        }
        meter.flush_due().await.unwrap_or_else(|e| panic!("{e}"));
        let journal = std::fs::read(f.log()).unwrap_or_else(|e| panic!("{e}"));
        meter.flush().await.unwrap_or_else(|e| panic!("{e}"));
        // The table holds the three calls, and the journal was not removed yet.
        std::fs::write(f.log(), &journal).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.saved(), (3, 300));
        drop(meter);
        let again = f.meter();
        let requests: u64 = again.totals().iter().map(|r| r.requests).sum();
        assert_eq!(requests, 3);
    }

    #[tokio::test]
    async fn a_line_cut_short_by_a_crash_loses_only_that_call() {
        let f = fixture();
        let meter = f.meter();
        call(&meter, 100);
        call(&meter, 100);
        meter.flush_due().await.unwrap_or_else(|e| panic!("{e}"));
        drop(meter);
        let mut bytes = std::fs::read(f.log()).unwrap_or_else(|e| panic!("{e}"));
        bytes.extend_from_slice(br#"{"seq":3,"agent":"Wren","mod"#);
        std::fs::write(f.log(), &bytes).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            f.saved(),
            (2, 200),
            "a line being appended is not a problem"
        );
        let again = f.meter();
        call(&again, 5);
        again.flush_due().await.unwrap_or_else(|e| panic!("{e}"));
        // The new line did not join the cut one: it is read.
        assert_eq!(f.saved(), (3, 205));
    }

    #[tokio::test]
    async fn a_bad_journal_line_is_named_and_the_journal_kept_aside() {
        let f = fixture();
        let meter = f.meter();
        call(&meter, 100);
        meter.flush_due().await.unwrap_or_else(|e| panic!("{e}"));
        drop(meter);
        let mut bytes = std::fs::read(f.log()).unwrap_or_else(|e| panic!("{e}"));
        bytes.extend_from_slice(b"{oops}\n");
        std::fs::write(f.log(), &bytes).unwrap_or_else(|e| panic!("{e}"));
        let (_, problems) = read_totals(&f.state);
        assert_eq!(problems.len(), 1);
        assert!(problems[0].1.starts_with("line 2:"), "{problems:?}");
        let again = f.meter();
        assert!(!f.log().exists());
        assert!(store::layout::unreadable_usage_path(&f.log()).exists());
        assert_eq!(again.totals().iter().map(|r| r.requests).sum::<u64>(), 1);
        assert_eq!(f.saved(), (1, 100), "the good line is in the table");
    }

    #[tokio::test]
    async fn a_long_journal_is_folded_while_calls_go_on() {
        let f = fixture();
        let meter = f.meter();
        for _ in 0..COMPACT_AT {
            call(&meter, 1);
        }
        meter.flush_due().await.unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !f.log().exists(),
            "folded once it reached {COMPACT_AT} lines"
        );
        let applied = f.table().map(|t| t.applied);
        assert_eq!(applied, Some(COMPACT_AT as u64));
        assert_eq!(f.saved(), (COMPACT_AT as u64, COMPACT_AT as u64));
    }
}
