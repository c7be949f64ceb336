//! The fuzz entry point of the journal reader (`store::journal::parse`), which reads every
//! agent's journal segments at start: on any bytes it returns; the records it keeps have
//! strictly rising sequence numbers, the bytes it keeps end on a line end, and the kept
//! records encode and parse back the same. Then a differential check against a simple
//! model: the input chooses a few valid records and mutations of their lines (torn tail,
//! duplicate, reordered pair, corrupted byte, appended garbage), and `parse` must keep
//! exactly the records whose line is intact and rises above every kept one before it: every
//! record no mutation touched survives. Called by the `journal` fuzz target and the corpus
//! test through `crate::fuzz::TARGETS`; panics only on a finding.

use jiff::Timestamp;

use crate::adapters::store::journal::{self, Record};
use crate::core::agent_state::{AgentState, HandledMark};
use crate::core::graph::{ConversationKey, Task, TaskGraph, TaskSpec};
use crate::core::model::{Chat, ChatId, ChatKind, MessageId};

/// Any bytes as a segment, then the differential check on records built from them.
pub fn journal(data: &[u8]) {
    let after = data.first().map(|b| u64::from(*b % 8));
    for prior in [None, after] {
        check_invariants(data, prior);
    }
    differential(data);
}

/// What `parse` promises on any input.
fn check_invariants(data: &[u8], after: Option<u64>) {
    let parsed = journal::parse(data, after);
    let len = data.len() as u64;
    assert!(
        parsed.keep_len <= len,
        "keep_len {} over {len}",
        parsed.keep_len
    );
    let keep = usize::try_from(parsed.keep_len).unwrap_or(usize::MAX);
    assert!(
        keep == 0 || data.get(keep - 1) == Some(&b'\n'),
        "the kept bytes do not end on a line end"
    );
    let mut previous = after;
    for (seq, _) in &parsed.records {
        assert!(
            previous.is_none_or(|p| *seq > p),
            "sequence {seq} kept after {previous:?}"
        );
        previous = Some(*seq);
    }
    if let Some(torn) = &parsed.torn {
        assert!(
            torn.offset >= parsed.keep_len,
            "a torn record inside the kept bytes"
        );
    }
    // Re-encoded, the kept records read back the same, with nothing torn or skipped.
    let mut bytes = Vec::new();
    for (seq, record) in &parsed.records {
        if let Err(e) = journal::encode_into(&mut bytes, *seq, record) {
            panic!("a record that was read does not encode: {e}");
        }
    }
    let again = journal::parse(&bytes, after);
    assert!(
        again.torn.is_none() && again.skipped.is_empty(),
        "re-encoded records are not clean"
    );
    assert_eq!(again.keep_len, bytes.len() as u64);
    assert_eq!(
        again.records, parsed.records,
        "re-encoded records read back different"
    );
}

/// Reads the input as a stream of choices (zero once it is used up).
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn below(&mut self, n: u8) -> u8 {
        self.byte() % n.max(1)
    }
}

/// A valid record of the agent, chosen by the input.
fn record(c: &mut Choices<'_>, i: usize) -> Record {
    let chat = ChatId(i64::from(c.byte()) - 100);
    let key = ConversationKey::new("anna", chat);
    let at = Timestamp::from_second(1_700_000_000 + i64::from(c.byte()) * 3600)
        .unwrap_or(Timestamp::UNIX_EPOCH);
    match c.below(4) {
        0 => Record::Handled(
            key,
            HandledMark {
                message: MessageId(i64::from(c.byte())),
                at,
            },
        ),
        1 => Record::Delete(key),
        2 => {
            let mut state = AgentState::default();
            if c.byte() % 2 == 1 {
                state.schedule_calls = Some((jiff::civil::date(2026, 1, 1), u32::from(c.byte())));
            }
            Record::State("anna".into(), Box::new(state))
        }
        _ => {
            let chat = Chat {
                id: chat,
                kind: ChatKind::Direct,
                title: format!("chat \"{}\"\n", c.byte()),
            };
            let mut wait = Task::new(
                TaskSpec::Wait {
                    delay_secs: f64::from(c.byte()) / 4.0,
                    typing: c.byte() % 2 == 1,
                    recording: false,
                    retry_of: None,
                },
                at,
            );
            wait.id = format!("wait-{i}");
            let mut g = TaskGraph::with_tasks("anna", chat, at, vec![wait]);
            g.id = format!("g-{i}");
            g.seq = u64::from(c.byte());
            Record::Graph(Box::new(g))
        }
    }
}

/// What happens to one record's line.
#[derive(Clone, Copy, PartialEq)]
enum Mutation {
    None,
    /// Written twice in a row: the copy is skipped.
    Duplicate,
    /// Swapped with the next record: it comes after a higher sequence number and is skipped.
    SwapWithNext,
    /// One byte of its JSON changed: it no longer matches its checksum.
    Corrupt(u8, u8),
}

/// One line of the built segment: the record it carries and whether it is intact.
struct Line {
    index: usize,
    intact: bool,
    bytes: Vec<u8>,
}

fn encoded(seq: u64, record: &Record) -> Vec<u8> {
    let mut out = Vec::new();
    if let Err(e) = journal::encode_into(&mut out, seq, record) {
        panic!("a built record does not encode: {e}");
    }
    out
}

/// The differential check (see the module documentation).
fn differential(data: &[u8]) {
    let mut c = Choices(data);
    let count = 1 + usize::from(c.below(8));
    let first = 1 + u64::from(c.byte());
    let records: Vec<Record> = (0..count).map(|i| record(&mut c, i)).collect();
    let mut mutations = vec![Mutation::None; count];
    let mut i = 0;
    while i < count {
        match c.below(8) {
            0 => mutations[i] = Mutation::Duplicate,
            1 if i + 1 < count => {
                mutations[i] = Mutation::SwapWithNext;
                i += 1;
            }
            2 => mutations[i] = Mutation::Corrupt(c.byte(), 1 + c.below(255)),
            _ => {}
        }
        i += 1;
    }
    let mut lines: Vec<Line> = Vec::new();
    let mut i = 0;
    while i < count {
        let line = |index: usize| encoded(first + index as u64, &records[index]);
        match mutations[i] {
            Mutation::None => lines.push(Line {
                index: i,
                intact: true,
                bytes: line(i),
            }),
            Mutation::Duplicate => {
                lines.push(Line {
                    index: i,
                    intact: true,
                    bytes: line(i),
                });
                lines.push(Line {
                    index: i,
                    intact: true,
                    bytes: line(i),
                });
            }
            Mutation::SwapWithNext => {
                lines.push(Line {
                    index: i + 1,
                    intact: true,
                    bytes: line(i + 1),
                });
                lines.push(Line {
                    index: i,
                    intact: true,
                    bytes: line(i),
                });
                i += 1;
            }
            Mutation::Corrupt(at, flip) => {
                let mut bytes = line(i);
                // A byte of the JSON (after the third space), never the line end: a CRC-32
                // catches every one-byte change.
                let json_at = bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b == b' ')
                    .nth(2)
                    .map_or(0, |(k, _)| k + 1);
                let span = bytes.len() - 1 - json_at;
                let k = json_at + usize::from(at) % span.max(1);
                let new = bytes[k] ^ flip;
                bytes[k] = if new == b'\n' { new ^ 0x80 } else { new };
                lines.push(Line {
                    index: i,
                    intact: false,
                    bytes,
                });
            }
        }
        i += 1;
    }
    // The tail: cut the last line short, or append garbage without a line end.
    match c.below(4) {
        0 => {
            if let Some(last) = lines.last_mut() {
                let keep = usize::from(c.byte()) % last.bytes.len();
                last.bytes.truncate(keep);
                last.intact = false;
            }
        }
        1 => lines.push(Line {
            index: usize::MAX,
            intact: false,
            bytes: c
                .0
                .iter()
                .copied()
                .filter(|b| *b != b'\n')
                .take(64)
                .collect(),
        }),
        _ => {}
    }
    let bytes: Vec<u8> = lines.iter().flat_map(|l| l.bytes.iter().copied()).collect();
    let after = Some(first - 1);
    let parsed = journal::parse(&bytes, after);
    // The model: intact lines whose sequence number rises above every kept one are kept.
    let mut expected: Vec<(u64, Record)> = Vec::new();
    let mut keep_len = 0u64;
    let mut end = 0u64;
    for line in &lines {
        end += line.bytes.len() as u64;
        if !line.intact {
            continue;
        }
        keep_len = end;
        let seq = first + line.index as u64;
        if expected.last().is_none_or(|(s, _)| seq > *s) {
            expected.push((seq, records[line.index].clone()));
        }
    }
    let seqs = |r: &[(u64, Record)]| r.iter().map(|(s, _)| *s).collect::<Vec<_>>();
    assert_eq!(
        seqs(&parsed.records),
        seqs(&expected),
        "kept records differ from the model"
    );
    assert_eq!(parsed.records, expected, "kept records read back different");
    assert_eq!(
        parsed.keep_len, keep_len,
        "the kept length differs from the model"
    );
    // Every record no mutation touched is kept.
    for (index, m) in mutations.iter().enumerate() {
        let torn_away = lines.last().is_some_and(|l| l.index == index && !l.intact);
        if *m == Mutation::None && !torn_away {
            assert!(
                parsed
                    .records
                    .iter()
                    .any(|(s, _)| *s == first + index as u64),
                "record {index}, untouched, was lost"
            );
        }
    }
    // A torn tail is reported as such; corruption before an intact line is skipped, not torn.
    let tail_bad = lines
        .iter()
        .rev()
        .filter(|l| !l.bytes.is_empty())
        .take_while(|l| !l.intact)
        .count()
        > 0;
    assert_eq!(
        parsed.torn.is_some(),
        tail_bad,
        "the torn tail is misreported"
    );
}
