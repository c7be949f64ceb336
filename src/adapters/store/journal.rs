//! The journal's format and files: each agent's runtime state changes (graph snapshots and
//! deletions, its safety state, handled marks) are appended to `<agent>/journal/<seq>.log`,
//! one record per line, and made durable by one `fdatasync` per group-committed batch
//! instead of a temp file, two syncs and a rename per changed file.
//!
//! A record is a line `<seq> <crc32 as 8 hex digits> <kind> <json>`: the sequence number
//! rises by one per record across the agent's segments, the checksum (CRC-32) covers
//! `<seq> <kind> <json>`, and the JSON is compact (serde escapes every newline, so a record
//! is one line). The JSON of a `graph` record is exactly the JSON block of a graph file. The
//! records are not Markdown: a torn or corrupted record must be found by its checksum and cut
//! without parsing prose, and a journal is read by the daemon, not by people; its lines still
//! work with `grep` and `jq` after the third space.
//!
//! [`parse`] reads a segment's bytes (pure; the fuzz target `journal` drives it): records
//! after the last good one (a write cut short by a crash or a full disk) are the torn tail,
//! cut at start and logged; a bad record followed by good ones (corruption, not a crash) is
//! skipped and reported, and so are duplicate or out-of-order sequence numbers. Every record
//! holds a whole state, so a skipped one costs at most the step it recorded.
//!
//! [`Segment`] is the open file appended to. Callers: `checkpoints` (the store's journal
//! side), `state` readers through it. It must not decide what is durable or when to
//! checkpoint.

use std::fs::File;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use jiff::Timestamp;

use super::StoreError;
use super::files::{io_err, sync_dir};
use super::io_stats::{self, Op};
use crate::core::agent_state::{AgentState, HandledMark};
use crate::core::graph::codec;
use crate::core::graph::{ConversationKey, TaskGraph};
use crate::core::model::{ChatId, MessageId};

/// A segment is retired (its records checkpointed, a new segment started) once it holds
/// this many bytes.
pub(crate) const ROTATE_BYTES: u64 = 8 << 20;

/// The extension of segment files.
const SEGMENT_EXT: &str = "log";

/// One state change. Every record names its agent (a journal lives in the agent's
/// directory, whose name is the agent's file-system form, not always its name).
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// A conversation's graph as it is now.
    Graph(Box<TaskGraph>),
    /// A conversation's graph is gone.
    Delete(ConversationKey),
    /// The agent's safety state (without its handled marks, which have their own records).
    State(String, Box<AgentState>),
    /// The newest message of a chat handed to a plan.
    Handled(ConversationKey, HandledMark),
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteJson {
    agent: String,
    chat: ChatId,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct StateJson<S> {
    agent: String,
    state: S,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct HandledJson {
    agent: String,
    chat: ChatId,
    message: MessageId,
    at: Timestamp,
}

/// Why a record could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordProblem {
    #[error("cut short (no line end)")]
    CutShort,
    #[error("not a record line (want `<seq> <crc> <kind> <json>`)")]
    Shape,
    #[error("the checksum does not match")]
    Checksum,
    #[error("unknown record kind {0:?}")]
    Kind(String),
    #[error("invalid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("invalid graph: {0}")]
    Graph(#[from] codec::CodecError),
    #[error("sequence number {seq} after {previous}: a duplicate or out of order")]
    Order { seq: u64, previous: u64 },
}

impl Record {
    /// The agent the record is about.
    pub fn agent(&self) -> &str {
        match self {
            Record::Graph(g) => &g.agent,
            Record::Delete(key) | Record::Handled(key, _) => &key.agent,
            Record::State(agent, _) => agent,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Record::Graph(_) => "graph",
            Record::Delete(_) => "delete",
            Record::State(..) => "state",
            Record::Handled(..) => "handled",
        }
    }

    fn json(&self) -> Result<String, serde_json::Error> {
        match self {
            Record::Graph(g) => serde_json::to_string(g),
            Record::Delete(key) => serde_json::to_string(&DeleteJson {
                agent: key.agent.clone(),
                chat: key.chat,
            }),
            Record::State(agent, state) => serde_json::to_string(&StateJson {
                agent: agent.clone(),
                state,
            }),
            Record::Handled(key, mark) => serde_json::to_string(&HandledJson {
                agent: key.agent.clone(),
                chat: key.chat,
                message: mark.message,
                at: mark.at,
            }),
        }
    }

    fn decode(kind: &str, json: &str) -> Result<Record, RecordProblem> {
        Ok(match kind {
            "graph" => Record::Graph(Box::new(codec::decode_json(json)?)),
            "delete" => {
                let d: DeleteJson = serde_json::from_str(json)?;
                Record::Delete(ConversationKey::new(d.agent, d.chat))
            }
            "state" => {
                let s: StateJson<AgentState> = serde_json::from_str(json)?;
                Record::State(s.agent, Box::new(s.state))
            }
            "handled" => {
                let h: HandledJson = serde_json::from_str(json)?;
                Record::Handled(
                    ConversationKey::new(h.agent, h.chat),
                    HandledMark {
                        message: h.message,
                        at: h.at,
                    },
                )
            }
            other => return Err(RecordProblem::Kind(other.chars().take(40).collect())),
        })
    }
}

fn checksum(seq: &str, kind: &str, json: &str) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(seq.as_bytes());
    h.update(b" ");
    h.update(kind.as_bytes());
    h.update(b" ");
    h.update(json.as_bytes());
    h.finalize()
}

/// Appends the line of record `seq` to `out`.
pub fn encode_into(out: &mut Vec<u8>, seq: u64, record: &Record) -> Result<(), RecordProblem> {
    let json = record.json()?;
    let kind = record.kind();
    let seq_text = seq.to_string();
    let crc = checksum(&seq_text, kind, &json);
    out.reserve(json.len() + 40);
    let _ = write!(out, "{seq_text} {crc:08x} {kind} ");
    out.extend_from_slice(json.as_bytes());
    out.push(b'\n');
    Ok(())
}

fn parse_line(line: &[u8]) -> Result<(u64, Record), RecordProblem> {
    let text = std::str::from_utf8(line).map_err(|_| RecordProblem::Shape)?;
    let mut parts = text.splitn(4, ' ');
    let (Some(seq), Some(crc), Some(kind), Some(json)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(RecordProblem::Shape);
    };
    let seq_n: u64 = seq.parse().map_err(|_| RecordProblem::Shape)?;
    if crc.len() != 8 {
        return Err(RecordProblem::Shape);
    }
    let crc = u32::from_str_radix(crc, 16).map_err(|_| RecordProblem::Shape)?;
    if checksum(seq, kind, json) != crc {
        return Err(RecordProblem::Checksum);
    }
    Ok((seq_n, Record::decode(kind, json)?))
}

/// A record that was not used, where it was and why.
#[derive(Debug)]
pub struct Problem {
    /// 1-based line of the segment.
    pub line: usize,
    /// Byte offset of the line.
    pub offset: u64,
    pub reason: RecordProblem,
}

/// What a segment holds.
#[derive(Debug, Default)]
pub struct Parsed {
    /// The good records, in order, with their sequence numbers (strictly rising).
    pub records: Vec<(u64, Record)>,
    /// The bytes to keep: everything after is the torn tail.
    pub keep_len: u64,
    /// The first record of the torn tail, when there is one.
    pub torn: Option<Problem>,
    /// Bad records with good ones after them, and out-of-order ones: skipped.
    pub skipped: Vec<Problem>,
}

/// Reads a segment (see the module documentation). `after` is the last sequence number of
/// the segments before it (records at or below it are out of order).
pub fn parse(bytes: &[u8], after: Option<u64>) -> Parsed {
    let mut out = Parsed::default();
    let mut pending_bad: Vec<Problem> = Vec::new();
    let mut previous = after;
    let mut offset = 0usize;
    let mut line_no = 0usize;
    while offset < bytes.len() {
        line_no += 1;
        let rest = &bytes[offset..];
        let (line, next) = match rest.iter().position(|b| *b == b'\n') {
            Some(end) => (Some(&rest[..end]), offset + end + 1),
            None => (None, bytes.len()),
        };
        let verdict = match line {
            Some(line) => parse_line(line),
            None => Err(RecordProblem::CutShort),
        };
        match verdict {
            Ok((seq, record)) => {
                // Good records after bad ones: the bad ones were corruption, not a tail.
                out.skipped.append(&mut pending_bad);
                out.keep_len = next as u64;
                match previous {
                    Some(p) if seq <= p => out.skipped.push(Problem {
                        line: line_no,
                        offset: offset as u64,
                        reason: RecordProblem::Order { seq, previous: p },
                    }),
                    _ => {
                        previous = Some(seq);
                        out.records.push((seq, record));
                    }
                }
            }
            Err(reason) => pending_bad.push(Problem {
                line: line_no,
                offset: offset as u64,
                reason,
            }),
        }
        offset = next;
    }
    out.torn = pending_bad.into_iter().next();
    out
}

/// The segment files in `dir`, by the sequence number they start at.
pub fn segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("cannot list", dir)(e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io_err("cannot list", dir))?;
        let path = entry.path();
        let first = path
            .extension()
            .filter(|e| *e == SEGMENT_EXT)
            .and_then(|_| path.file_stem())
            .and_then(|s| s.to_str())
            .and_then(|s| s.parse::<u64>().ok());
        if let Some(first) = first {
            out.push((first, path));
        }
    }
    out.sort();
    Ok(out)
}

/// A segment's bytes (never through a link; a segment is as long as it grew).
pub(crate) fn read_segment(path: &Path) -> Result<Vec<u8>, StoreError> {
    super::files::read_file(path, u64::MAX >> 1, super::files::Symlinks::Refuse)
}

/// The path of the segment starting at `first`.
pub fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}.{SEGMENT_EXT}"))
}

/// The segment being appended to.
#[derive(Debug)]
pub(crate) struct Segment {
    path: PathBuf,
    file: File,
    len: u64,
}

impl Segment {
    /// Creates the segment starting at `first` in `dir` (made if needed), durably.
    pub(crate) fn create(dir: &Path, first: u64) -> Result<Segment, StoreError> {
        let path = segment_path(dir, first);
        // Never an existing file: a segment's name is its first record's number, and a
        // file of that name holds (or held) other records.
        let file = super::appender::create_new(&path)?
            .map_err(io_err("cannot create journal segment", &path))?;
        io_stats::note(Op::Open);
        sync_dir(dir)?;
        Ok(Segment { path, file, len: 0 })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Appends whole records. On failure (a full disk) whatever part got written is cut
    /// off again, so the segment still ends at a record boundary.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        let written = faults::check(bytes.len()).and_then(|allowed| {
            self.file.write_all(&bytes[..allowed])?;
            if allowed < bytes.len() {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            Ok(())
        });
        match written {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                // Best effort: a failed cut leaves a torn tail, which the next start cuts.
                let _ = self.file.set_len(self.len);
                Err(io_err("cannot append to journal", &self.path)(e))
            }
        }
    }

    /// Makes everything appended so far durable.
    pub(crate) fn sync(&self) -> Result<(), StoreError> {
        io_stats::note(Op::Fdatasync);
        self.file
            .sync_data()
            .map_err(io_err("cannot sync journal", &self.path))
    }
}

/// Fault injection for the tests (a full disk in the middle of an append).
pub mod faults {
    #[cfg(feature = "test-hooks")]
    static FAIL_AFTER: std::sync::Mutex<Option<usize>> = std::sync::Mutex::new(None);

    /// The next append writes at most `bytes` bytes, then fails with `ENOSPC`.
    #[cfg(feature = "test-hooks")]
    pub fn fail_next_append_after(bytes: usize) {
        *FAIL_AFTER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(bytes);
    }

    /// How many of `len` bytes the next write may write.
    pub(super) fn check(len: usize) -> std::io::Result<usize> {
        #[cfg(feature = "test-hooks")]
        if let Some(after) = FAIL_AFTER
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            return Ok(after.min(len));
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::{Record, RecordProblem, encode_into, parse};
    use crate::core::agent_state::HandledMark;
    use crate::core::graph::ConversationKey;
    use crate::core::model::{ChatId, MessageId};

    fn handled(n: i64) -> Record {
        Record::Handled(
            ConversationKey::new("anna", ChatId(n)),
            HandledMark {
                message: MessageId(n * 10),
                at: jiff::Timestamp::UNIX_EPOCH,
            },
        )
    }

    fn lines(seqs: &[u64]) -> Vec<u8> {
        let mut out = Vec::new();
        for s in seqs {
            encode_into(&mut out, *s, &handled(*s as i64)).unwrap_or_default();
        }
        out
    }

    /// A record cut short by a crash is the torn tail: cut, and the records before kept.
    #[test]
    fn a_torn_last_record_is_cut_and_the_rest_kept() {
        let mut bytes = lines(&[1, 2, 3]);
        let whole = bytes.len() as u64;
        bytes.extend_from_slice(&lines(&[4])[..20]);
        let p = parse(&bytes, None);
        assert_eq!(p.records.len(), 3);
        assert_eq!(p.keep_len, whole);
        assert!(matches!(
            p.torn.map(|t| t.reason),
            Some(RecordProblem::CutShort)
        ));
        assert!(p.skipped.is_empty());
    }

    /// A corrupted record with good ones after it is skipped, never the ones after.
    #[test]
    fn a_corrupted_record_in_the_middle_is_skipped_not_a_tail() {
        let mut bytes = lines(&[1, 2, 3]);
        let second = lines(&[1]).len() + 5;
        bytes[second] ^= 0x01;
        let p = parse(&bytes, None);
        let seqs: Vec<u64> = p.records.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![1, 3]);
        assert_eq!(p.keep_len, bytes.len() as u64);
        assert!(p.torn.is_none());
        assert_eq!(p.skipped.len(), 1);
    }

    /// Duplicated and reordered records are skipped; sequence numbers of what is kept rise.
    #[test]
    fn duplicate_and_reordered_records_are_skipped() {
        let bytes = lines(&[1, 2, 2, 1, 3]);
        let p = parse(&bytes, None);
        let seqs: Vec<u64> = p.records.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, vec![1, 2, 3]);
        assert_eq!(p.skipped.len(), 2);
        let after = parse(&lines(&[3, 4]), Some(3));
        assert_eq!(after.records.len(), 1, "seq 3 was in the segment before");
    }
}
