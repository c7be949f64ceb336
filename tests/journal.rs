//! The journal's guarantees, through the store the runtime writes to (`GraphStore` behind the
//! `RuntimeStore` port): a torn tail is cut and logged, a corrupted record in the middle costs
//! only itself (and its segment is kept in `quarantine/`), the journal's newer states win over
//! the checkpoint files at load and in `state show`'s view, a full checkpoint leaves the files
//! holding everything, handled marks survive restarts (and are pruned), and a full disk in the
//! middle of an append fails the batch without tearing the segment. Each "restart" is a new
//! store on the same directory, as a new process would make.

mod common;

use common::logs::logged;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use jiff::{SignedDuration, Timestamp};
use personad::adapters::store::journal::faults;
use personad::adapters::store::{GraphStore, REASON_SUFFIX, StateDir};
use personad::core::agent_state::{AgentState, HANDLED_KEEP, HandledMark};
use personad::core::graph::{ConversationKey, Task, TaskGraph, TaskSpec};
use personad::core::model::{Chat, ChatId, ChatKind, MessageId};
use personad::ports::store::{Commit, RuntimeStore, Write};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const AGENT: &str = "anna";

/// The ENOSPC hook is process-wide: the tests that append hold this.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

fn store(state: &Path) -> GraphStore {
    GraphStore::new(StateDir::new(state)).with_commit_delay(std::time::Duration::ZERO)
}

fn now() -> Timestamp {
    Timestamp::now()
}

/// A graph of `chat` whose version shows in its `seq` (a long wait: a plan that settled).
fn graph(chat: i64, version: u64) -> TaskGraph {
    let at = now();
    let wait = Task::new(
        TaskSpec::Wait {
            delay_secs: 3600.0,
            typing: false,
            recording: false,
            retry_of: None,
        },
        at,
    );
    let chat = Chat {
        id: ChatId(chat),
        kind: ChatKind::Direct,
        title: format!("chat {chat}"),
    };
    let mut g = TaskGraph::with_tasks(AGENT, chat, at, vec![wait]);
    g.seq = version;
    g
}

type Stored = Result<(), personad::adapters::store::StoreError>;

/// Writes `g` as a batch of its own.
fn put_graph(store: &GraphStore, g: TaskGraph) -> Stored {
    RuntimeStore::write_batch(store, vec![Write::Graph(Box::new(g))], Commit::Shared)
}

fn put(store: &GraphStore, chat: i64, version: u64) -> Stored {
    put_graph(store, graph(chat, version))
}

/// Each loaded graph's chat and version, sorted.
fn versions(graphs: &[TaskGraph]) -> Vec<(i64, u64)> {
    let mut out: Vec<(i64, u64)> = graphs.iter().map(|g| (g.chat.id.0, g.seq)).collect();
    out.sort_unstable();
    out
}

fn key(chat: i64) -> ConversationKey {
    ConversationKey::new(AGENT, ChatId(chat))
}

fn journal_dir(state: &Path) -> PathBuf {
    StateDir::new(state).journal_dir(AGENT)
}

/// The agent's journal segments, oldest first.
fn segments(state: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(journal_dir(state))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn newest_segment(state: &Path) -> Result<PathBuf, String> {
    segments(state)
        .pop()
        .ok_or_else(|| "no journal segment".to_string())
}

/// Files under `quarantine/`.
fn quarantined(state: &Path) -> Vec<String> {
    std::fs::read_dir(state.join("quarantine"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A record cut short by a crash (or garbage after the last record) is dropped at start and
/// logged; the records before it are used, and the segment is retired by the first checkpoint.
#[test]
fn a_torn_tail_is_dropped_at_start_logged_and_the_earlier_records_used() -> TestResult {
    let _serial = serial();
    for garbage in [false, true] {
        let dir = tempfile::tempdir()?;
        let state = dir.path().join("state");
        let s = store(&state);
        put(&s, 1, 1)?;
        put(&s, 1, 2)?;
        put(&s, 2, 1)?;
        drop(s);
        let segment = newest_segment(&state)?;
        let bytes = std::fs::read(&segment)?;
        if garbage {
            let mut torn = bytes.clone();
            torn.extend_from_slice(b"17 0badc0de graph {\"format\":");
            std::fs::write(&segment, torn)?;
        } else {
            // The last record's line loses its end, as a write cut short by a crash.
            std::fs::write(&segment, &bytes[..bytes.len() - 25])?;
        }
        let s = store(&state);
        let (loaded, logs) = logged(|| s.load_all(now()));
        let loaded = loaded?;
        assert!(logs.contains("journal_tail_cut"), "{logs}");
        let expected = if garbage {
            vec![(1, 2), (2, 1)]
        } else {
            vec![(1, 2)]
        };
        assert_eq!(versions(&loaded.graphs), expected, "garbage: {garbage}");
        assert!(loaded.quarantined.is_empty());
        // The next append and the first checkpoint: the torn segment is retired.
        put(&s, 3, 1)?;
        RuntimeStore::checkpoint(&s, false, now())?;
        assert!(!segment.exists(), "the torn segment was not retired");
        let again = store(&state).load_all(now())?;
        let mut expected = expected;
        expected.push((3, 1));
        assert_eq!(versions(&again.graphs), expected);
    }
    Ok(())
}

/// A crash can leave a segment with no whole record in it (killed between making it and
/// its first append, or in the middle of that append). It carries no sequence number, so the
/// next run's first new segment must not take its name: the start's first checkpoint retires
/// (removes) the old one, and with it would go every record the new run appended there.
#[test]
fn a_segment_left_without_a_record_is_never_reused_for_new_records() -> TestResult {
    let _serial = serial();
    for torn in [false, true] {
        let dir = tempfile::tempdir()?;
        let state = dir.path().join("state");
        let s = store(&state);
        put(&s, 1, 1)?;
        put(&s, 1, 2)?;
        drop(s);
        // The sequence number the next record gets: one past the newest on disk.
        let text = std::fs::read_to_string(newest_segment(&state)?)?;
        let last: u64 = text
            .lines()
            .last()
            .and_then(|l| l.split(' ').next())
            .and_then(|n| n.parse().ok())
            .ok_or("no record in the segment")?;
        let left = personad::adapters::store::journal::segment_path(&journal_dir(&state), last + 1);
        let bytes: &[u8] = if torn {
            b"99 0badc0de graph {\"format\":"
        } else {
            b""
        };
        std::fs::write(&left, bytes)?;
        let s = store(&state);
        s.load_all(now())?;
        put(&s, 2, 1)?;
        // The start's first checkpoint retires the segments the start read.
        RuntimeStore::checkpoint(&s, false, now())?;
        // Appended after it: only the journal holds this version.
        put(&s, 2, 2)?;
        drop(s);
        let again = store(&state).load_all(now())?;
        assert_eq!(
            versions(&again.graphs),
            vec![(1, 2), (2, 2)],
            "torn: {torn}: records appended after the start's checkpoint were lost"
        );
    }
    Ok(())
}

/// A corrupted record with good records after it costs only itself: the later records are
/// used, the segment is copied to `quarantine/` with a `.reason` naming the line.
#[test]
fn a_corrupted_record_in_the_middle_is_skipped_and_its_segment_kept() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let s = store(&state);
    put(&s, 1, 1)?;
    put(&s, 1, 2)?;
    put(&s, 2, 1)?;
    drop(s);
    let segment = newest_segment(&state)?;
    let mut bytes = std::fs::read(&segment)?;
    // A byte in the JSON of the second record flips.
    let second = bytes.iter().position(|b| *b == b'\n').ok_or("one line")? + 1;
    let at = second + 40;
    bytes[at] ^= 0x01;
    std::fs::write(&segment, &bytes)?;
    let s = store(&state);
    let (loaded, logs) = logged(|| s.load_all(now()));
    let loaded = loaded?;
    assert!(logs.contains("journal_record_skipped"), "{logs}");
    assert!(!logs.contains("journal_tail_cut"), "{logs}");
    assert_eq!(versions(&loaded.graphs), vec![(1, 1), (2, 1)]);
    let names = quarantined(&state);
    let file = segment
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let copy = names
        .iter()
        .find(|n| n.ends_with(&file))
        .ok_or(format!("no copy of {file} in quarantine: {names:?}"))?;
    assert_eq!(std::fs::read(state.join("quarantine").join(copy))?, bytes);
    let reason = std::fs::read_to_string(
        state
            .join("quarantine")
            .join(format!("{copy}{REASON_SUFFIX}")),
    )?;
    assert!(reason.contains("line 2"), "{reason}");
    Ok(())
}

/// Records newer than a graph's file win over it at load and in `state show`'s view (`scan`,
/// `read_graph`); a file left half-written whose graph is in the journal is not quarantined,
/// and a graph the journal deleted is gone from the view.
#[test]
fn the_journal_wins_over_older_and_half_written_checkpoint_files() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let s = store(&state);
    put(&s, 1, 1)?;
    put(&s, 2, 1)?;
    put(&s, 3, 1)?;
    RuntimeStore::checkpoint(&s, true, now())?;
    assert!(segments(&state).is_empty());
    put(&s, 1, 2)?;
    put(&s, 2, 2)?;
    RuntimeStore::write_batch(&s, vec![Write::DeleteGraph(key(3), None)], Commit::Shared)?;
    drop(s);
    let dirs = StateDir::new(&state);
    // The checkpoint of chat 2 was being rewritten in place when the process died.
    std::fs::write(
        dirs.graph_path(&key(2)),
        "# Task graph: agent `anna`, chat 2\n\n````js",
    )?;
    assert!(dirs.graph_path(&key(3)).exists());
    // What `state show` sees.
    let view = store(&state);
    let scanned: Vec<(i64, u64)> = view
        .scan()?
        .into_iter()
        .map(|f| f.graph.map(|g| (g.chat.id.0, g.seq)))
        .collect::<Result<_, _>>()?;
    assert_eq!(scanned, vec![(1, 2), (2, 2)]);
    assert_eq!(view.read_graph(&key(1))?.map(|g| g.seq), Some(2));
    assert_eq!(view.read_graph(&key(3))?.map(|g| g.seq), None);
    // A restart.
    let loaded = store(&state).load_all(now())?;
    assert_eq!(versions(&loaded.graphs), vec![(1, 2), (2, 2)]);
    assert!(loaded.quarantined.is_empty(), "{:?}", loaded.quarantined);
    assert!(quarantined(&state).is_empty(), "{:?}", quarantined(&state));
    Ok(())
}

/// A full checkpoint leaves no segment; the files alone hold every graph, the agent state and
/// the handled marks, and a restart reads the same.
#[test]
fn a_full_checkpoint_leaves_no_segment_and_the_files_hold_everything() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let s = store(&state);
    let safety = AgentState {
        schedule_calls: Some((jiff::civil::date(2026, 11, 27), 2)),
        ..AgentState::default()
    };
    let t = now();
    RuntimeStore::write_batch(
        &s,
        vec![
            Write::Graph(Box::new(graph(1, 1))),
            Write::Graph(Box::new(graph(2, 1))),
            Write::AgentState(AGENT.into(), Box::new(safety.clone())),
            Write::Handled {
                agent: AGENT.into(),
                chat: ChatId(7),
                mark: HandledMark {
                    message: MessageId(70),
                    at: t,
                },
            },
        ],
        Commit::Shared,
    )?;
    put(&s, 1, 2)?;
    RuntimeStore::write_batch(&s, vec![Write::DeleteGraph(key(2), None)], Commit::Shared)?;
    assert!(!segments(&state).is_empty());
    let report = RuntimeStore::checkpoint(&s, true, t)?;
    assert!(report.retired >= 1);
    assert!(segments(&state).is_empty(), "{:?}", segments(&state));
    let dirs = StateDir::new(&state);
    let text = std::fs::read_to_string(dirs.graph_path(&key(1)))?;
    assert_eq!(personad::core::graph::codec::decode(&text)?.seq, 2);
    assert!(!dirs.graph_path(&key(2)).exists());
    let on_file: AgentState = serde_json::from_str(&std::fs::read_to_string(
        dirs.agent_dir(AGENT).join("agent-state.json"),
    )?)?;
    assert_eq!(on_file.schedule_calls, safety.schedule_calls);
    let marks = std::fs::read_to_string(dirs.agent_dir(AGENT).join("handled.json"))?;
    assert!(marks.contains("70"), "{marks}");
    // A restart reads the same from the files alone.
    let back = store(&state);
    assert_eq!(versions(&back.load_all(now())?.graphs), vec![(1, 2)]);
    let (loaded, quarantined) = back.load_agent_state(AGENT)?;
    assert!(quarantined.is_none());
    assert_eq!(loaded.schedule_calls, safety.schedule_calls);
    assert_eq!(
        loaded.handled.get(&ChatId(7)).map(|m| m.message),
        Some(MessageId(70))
    );
    Ok(())
}

fn mark(store: &GraphStore, chat: i64, message: i64, at: Timestamp) -> TestResult {
    RuntimeStore::write_batch(
        store,
        vec![Write::Handled {
            agent: AGENT.into(),
            chat: ChatId(chat),
            mark: HandledMark {
                message: MessageId(message),
                at,
            },
        }],
        Commit::Shared,
    )?;
    Ok(())
}

fn handled(store: &GraphStore) -> Result<Vec<(i64, i64)>, Box<dyn std::error::Error>> {
    let (state, _) = store.load_agent_state(AGENT)?;
    Ok(state
        .handled
        .iter()
        .map(|(c, m)| (c.0, m.message.0))
        .collect())
}

/// A graph's deletion carries the handled mark it held, in the same append and before it:
/// after a restart the graph is gone and its mark is there (never the one without the other).
#[test]
fn a_deletion_carries_the_handled_mark_of_its_graph() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let t = now();
    let s = store(&state);
    put(&s, 4, 1)?;
    let mark = HandledMark {
        message: MessageId(44),
        at: t,
    };
    RuntimeStore::write_batch(
        &s,
        vec![Write::DeleteGraph(key(4), Some(mark))],
        Commit::Shared,
    )?;
    let text = std::fs::read_to_string(newest_segment(&state)?)?;
    let last_two: Vec<&str> = text.lines().rev().take(2).collect();
    assert!(
        last_two[0].contains(" delete ") && last_two[1].contains(" handled "),
        "the mark just before the deletion: {last_two:?}"
    );
    drop(s);
    let s = store(&state);
    assert!(versions(&s.load_all(t)?.graphs).is_empty());
    assert_eq!(handled(&s)?, vec![(4, 44)]);
    Ok(())
}

/// Handled marks survive a restart through the journal and, after a full checkpoint, through
/// `handled.json`, which drops the marks older than the replay window.
#[test]
fn handled_marks_survive_restarts_and_old_ones_are_pruned() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let t = now();
    let old = t - SignedDuration::from_hours(1) - HANDLED_KEEP;
    let s = store(&state);
    mark(&s, 5, 50, t)?;
    mark(&s, 6, 60, old)?;
    mark(&s, 5, 51, t)?;
    drop(s);
    // Through the journal.
    let s = store(&state);
    s.load_all(t)?;
    assert_eq!(handled(&s)?, vec![(5, 51), (6, 60)]);
    RuntimeStore::checkpoint(&s, true, t)?;
    assert!(segments(&state).is_empty());
    drop(s);
    // Through `handled.json`, pruned.
    let s = store(&state);
    s.load_all(t)?;
    assert_eq!(handled(&s)?, vec![(5, 51)]);
    Ok(())
}

/// `handled.json` holds the marks of every earlier retirement, which no journal covers any
/// more. A store that settles a journal without having started the agent (`state clear`
/// after a crash) keeps them: it reads the file before writing it.
#[test]
fn settling_a_journal_keeps_the_handled_marks_already_in_the_file() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let t = now();
    let s = store(&state);
    s.load_all(t)?;
    mark(&s, 1, 10, t)?;
    RuntimeStore::checkpoint(&s, true, t)?;
    drop(s);
    // A run that crashed with a newer mark in its journal.
    let s = store(&state);
    s.load_all(t)?;
    mark(&s, 2, 20, t)?;
    drop(s);
    // `state clear` of another chat settles the journal into the files.
    store(&state).clear(Some(AGENT), Some(ChatId(9)))?;
    assert!(segments(&state).is_empty(), "the journal was settled");
    let s = store(&state);
    s.load_all(t)?;
    assert_eq!(handled(&s)?, vec![(1, 10), (2, 20)]);
    Ok(())
}

/// `handled.json` is replaced whole (a new file renamed over it), never rewritten in place:
/// a kill in the middle of an in-place rewrite would leave it torn, and the marks of every
/// earlier retirement with it. An unreadable one is moved to `quarantine/` and said so.
#[test]
fn handled_json_is_replaced_whole_and_an_unreadable_one_is_quarantined() -> TestResult {
    use std::os::unix::fs::MetadataExt as _;
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let t = now();
    let path = StateDir::new(&state).agent_dir(AGENT).join("handled.json");
    let s = store(&state);
    s.load_all(t)?;
    mark(&s, 1, 10, t)?;
    RuntimeStore::checkpoint(&s, true, t)?;
    let before = std::fs::metadata(&path)?.ino();
    mark(&s, 2, 20, t)?;
    RuntimeStore::checkpoint(&s, true, t)?;
    assert_ne!(
        std::fs::metadata(&path)?.ino(),
        before,
        "handled.json was rewritten in place"
    );
    drop(s);
    // Torn by hand: quarantined with its reason, the journal's marks still load.
    std::fs::write(&path, b"{\"1\":{\"mess")?;
    let s = store(&state);
    mark(&s, 3, 30, t)?;
    drop(s);
    let s = store(&state);
    s.load_all(t)?;
    let (marks, logs) = logged(|| handled(&s));
    assert_eq!(marks?, vec![(3, 30)]);
    assert!(logs.contains("handled_marks_quarantined"), "{logs}");
    assert!(
        quarantined(&state)
            .iter()
            .any(|f| f.ends_with("--handled.json")),
        "{:?}",
        quarantined(&state)
    );
    Ok(())
}

/// An older `agent-state.json` keeps its marks as bare ids: they still load, survive the
/// file's rewrite without them (a crash before any retirement included), and land in
/// `handled.json`.
#[test]
fn bare_handled_ids_of_an_older_agent_state_still_load_and_are_kept() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let dirs = StateDir::new(&state);
    std::fs::create_dir_all(dirs.agent_dir(AGENT))?;
    std::fs::write(
        dirs.agent_dir(AGENT).join("agent-state.json"),
        r#"{"handled": {"42": 3}}"#,
    )?;
    let t = now();
    let s = store(&state);
    s.load_all(t)?;
    assert_eq!(handled(&s)?, vec![(42, 3)]);
    // The safety state changes: its file is rewritten (without marks) by a checkpoint, and
    // the process dies before the journal is retired.
    let safety = AgentState {
        schedule_calls: Some((jiff::civil::date(2026, 11, 27), 1)),
        ..AgentState::default()
    };
    RuntimeStore::write_batch(
        &s,
        vec![Write::AgentState(AGENT.into(), Box::new(safety))],
        Commit::Shared,
    )?;
    RuntimeStore::checkpoint(&s, false, t)?;
    drop(s);
    let s = store(&state);
    s.load_all(t)?;
    assert_eq!(
        handled(&s)?,
        vec![(42, 3)],
        "the bare mark was lost with the old file"
    );
    RuntimeStore::checkpoint(&s, true, t)?;
    drop(s);
    let s = store(&state);
    s.load_all(t)?;
    assert_eq!(handled(&s)?, vec![(42, 3)]);
    // A mark of unknown age is kept a whole replay window from its first checkpoint, then
    // dropped like any other.
    let later = t + HANDLED_KEEP + SignedDuration::from_hours(1);
    mark(&s, 9, 90, later)?;
    RuntimeStore::checkpoint(&s, true, later)?;
    drop(s);
    let s = store(&state);
    s.load_all(later)?;
    assert_eq!(handled(&s)?, vec![(9, 90)]);
    Ok(())
}

/// A full disk in the middle of an append: the batch fails naming the journal file, the
/// segment is cut back to its last whole record, the next append works, and a restart reads
/// every acknowledged record and not the failed one.
#[test]
fn enospc_during_an_append_fails_the_batch_and_tears_nothing() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let s = store(&state);
    put(&s, 1, 1)?;
    put(&s, 2, 1)?;
    let segment = newest_segment(&state)?;
    let before = std::fs::read(&segment)?;
    faults::fail_next_append_after(30);
    let failed = put(&s, 1, 2);
    let Err(e) = failed else {
        return Err("the append with a full disk succeeded".into());
    };
    let text = e.to_string();
    assert!(text.contains("journal"), "{text}");
    assert!(
        text.contains(&segment.display().to_string()),
        "the error does not name the segment: {text}"
    );
    assert_eq!(
        std::fs::read(&segment)?,
        before,
        "the failed append left bytes behind"
    );
    put(&s, 3, 1)?;
    drop(s);
    let (loaded, logs) = logged(|| store(&state).load_all(now()));
    assert_eq!(versions(&loaded?.graphs), vec![(1, 1), (2, 1), (3, 1)]);
    assert!(!logs.contains("journal_tail_cut"), "{logs}");
    assert!(!logs.contains("journal_record_skipped"), "{logs}");
    Ok(())
}

/// The runtime over a full disk: the append of a batch fails, the runtime stops with "could
/// not be saved" naming the journal, and a restart goes on from everything acknowledged before
/// (the plan's first send is not repeated, its second still comes).
#[test]
fn a_failed_append_stops_the_runtime_and_a_restart_loses_nothing_acknowledged() -> TestResult {
    use common::{Harness, ScriptedPlanner, config, dm, send};
    use personad::core::plan::Action;
    let _serial = serial();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let dir = tempfile::tempdir()?;
        let chat = dm(10);
        let plan = || {
            ScriptedPlanner::new(|_, _| {
                Ok(vec![
                    send("one"),
                    Action::Wait { secs: 3600.0 },
                    send("two"),
                ])
            })
        };
        let mut h = Harness::start(dir.path(), plan(), config(), std::slice::from_ref(&chat));
        h.started().await;
        h.say(&chat, "Bob", "hi").await;
        h.pass(std::time::Duration::from_secs(10)).await;
        assert_eq!(h.sends_to(ChatId(10)), ["one"]);
        let key = ConversationKey::new(common::AGENT, ChatId(10));
        let view = GraphStore::new(StateDir::new(dir.path()));
        let acknowledged = view.read_graph(&key)?.ok_or("no graph")?;
        // The disk fills up: the next batch (the new message's) is cut after 10 bytes.
        faults::fail_next_append_after(10);
        h.say(&chat, "Bob", "are you there?").await;
        for _ in 0..600 {
            if h.run.is_finished() {
                break;
            }
            h.pass(std::time::Duration::from_millis(100)).await;
        }
        let Harness { run, .. } = h;
        let stopped = run.await?;
        let Err(e) = stopped else {
            return Err("the runtime went on after a failed append".into());
        };
        let text = e.to_string();
        assert!(text.contains("could not be saved"), "{text}");
        assert!(text.contains("journal"), "{text}");
        // Nothing of the failed batch, everything before it.
        assert_eq!(view.read_graph(&key)?.as_ref(), Some(&acknowledged));
        for segment in journal_segments_of(dir.path(), common::AGENT) {
            let parsed = personad::adapters::store::journal::parse(&std::fs::read(&segment)?, None);
            assert!(parsed.torn.is_none(), "{} ends torn", segment.display());
        }
        let mut again = Harness::start(dir.path(), plan(), config(), std::slice::from_ref(&chat));
        again.started().await;
        again.pass(std::time::Duration::from_secs(3700)).await;
        again.settle().await;
        let sent = again.sends_to(ChatId(10));
        assert!(sent.contains(&"two".to_string()), "{sent:?}");
        assert!(
            !sent.contains(&"one".to_string()),
            "the acknowledged send went again: {sent:?}"
        );
        again.stop().await?;
        Ok(())
    })
}

fn journal_segments_of(state: &Path, agent: &str) -> Vec<PathBuf> {
    let dir = StateDir::new(state).journal_dir(agent);
    std::fs::read_dir(dir)
        .map(|e| e.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

// The graph pack (`<agent>/graphs.pack`): a clean stop's full checkpoint packs the graph
// files, and the next start reads the pack instead of each file while it matches them.

fn pack_path(state: &Path) -> PathBuf {
    StateDir::new(state).graph_pack_path(AGENT)
}

/// A state directory after a clean stop with graphs of chats 1..=`n` at version 1.
fn packed_state(state: &Path, n: i64) -> TestResult {
    let s = store(state);
    let writes = (1..=n)
        .map(|chat| Write::Graph(Box::new(graph(chat, 1))))
        .collect();
    RuntimeStore::write_batch(&s, writes, Commit::Shared)?;
    RuntimeStore::checkpoint(&s, true, now())?;
    assert!(
        pack_path(state).exists(),
        "a full checkpoint writes the pack"
    );
    Ok(())
}

#[test]
fn a_start_after_a_clean_stop_reads_the_graphs_from_their_pack() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    packed_state(&state, 40)?;
    let loaded = store(&state).load_all(now())?;
    assert_eq!(loaded.from_packs, 40);
    assert!(loaded.stale_packs.is_empty(), "{:?}", loaded.stale_packs);
    let expected: Vec<(i64, u64)> = (1..=40).map(|c| (c, 1)).collect();
    assert_eq!(versions(&loaded.graphs), expected);
    Ok(())
}

/// The pack never stands for older files: the first write of the agent's graph files removes
/// it, so the next stop packs the new files (a stale pack would bring version 1 back).
#[test]
fn a_graph_changed_after_a_start_from_the_pack_is_never_hidden_by_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    packed_state(&state, 3)?;
    let s = store(&state);
    assert_eq!(s.load_all(now())?.from_packs, 3);
    put(&s, 2, 2)?;
    RuntimeStore::checkpoint(&s, false, now())?;
    assert!(
        !pack_path(&state).exists(),
        "the checkpoint that wrote a graph file removed the pack first"
    );
    RuntimeStore::checkpoint(&s, true, now())?;
    let loaded = store(&state).load_all(now())?;
    assert_eq!(loaded.from_packs, 3, "the stop packed the files again");
    assert_eq!(versions(&loaded.graphs), vec![(1, 1), (2, 2), (3, 1)]);
    Ok(())
}

/// A graph file removed or added by hand (with the daemon stopped) makes the pack stale: the
/// files are read, the pack removed and the reason logged.
#[test]
fn a_graph_file_removed_or_added_by_hand_makes_the_pack_stale() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    packed_state(&state, 3)?;
    let dirs = StateDir::new(&state);
    std::fs::remove_file(dirs.graph_path(&key(3)))?;
    let (loaded, logs) = logged(|| store(&state).load_all(now()));
    let loaded = loaded?;
    assert_eq!(loaded.from_packs, 0);
    assert_eq!(versions(&loaded.graphs), vec![(1, 1), (2, 1)]);
    assert_eq!(loaded.stale_packs.len(), 1, "{:?}", loaded.stale_packs);
    assert!(logs.contains("graph_pack_stale"), "{logs}");
    assert!(!pack_path(&state).exists());

    packed_state(&state, 2)?;
    let by_hand = personad::core::graph::codec::encode(&graph(9, 5))?;
    std::fs::write(dirs.graph_path(&key(9)), by_hand)?;
    let loaded = store(&state).load_all(now())?;
    assert_eq!(loaded.from_packs, 0);
    assert_eq!(versions(&loaded.graphs), vec![(1, 1), (2, 1), (9, 5)]);
    Ok(())
}

/// A pack that does not read whole (a flipped byte) is not trusted in part: every graph
/// comes from its file.
#[test]
fn a_damaged_pack_is_ignored_and_the_files_read() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    packed_state(&state, 3)?;
    let mut bytes = std::fs::read(pack_path(&state))?;
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(pack_path(&state), &bytes)?;
    let loaded = store(&state).load_all(now())?;
    assert_eq!(loaded.from_packs, 0);
    assert_eq!(loaded.stale_packs.len(), 1);
    assert_eq!(versions(&loaded.graphs), vec![(1, 1), (2, 1), (3, 1)]);
    Ok(())
}

/// A graph of `chat` that moves now: a send, pending and ready.
fn moving(chat: i64, version: u64) -> TaskGraph {
    let mut g = graph(chat, version);
    g.tasks = vec![Task::new(TaskSpec::send("hi", None), now())];
    g
}

fn put_moving(store: &GraphStore, chat: i64, version: u64) -> Stored {
    put_graph(store, moving(chat, version))
}

fn on_file(state: &Path, chat: i64) -> Option<u64> {
    let text = std::fs::read_to_string(StateDir::new(state).graph_path(&key(chat))).ok()?;
    personad::core::graph::codec::decode(&text)
        .ok()
        .map(|g| g.seq)
}

/// A checkpoint leaves a moving graph in the journal (no file made for a reply cycle that ends
/// within the horizon) and writes it once it settles or has moved for `SETTLE_HORIZON`; a
/// full checkpoint writes it at once; a graph deleted while it moved never gets a file.
#[test]
fn a_moving_graph_is_checkpointed_once_it_settles_or_has_moved_too_long() -> TestResult {
    use personad::ports::store::SETTLE_HORIZON;
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let s = store(&state);
    let t = now();
    let at = |secs: u64| t + SignedDuration::from_secs(secs as i64);
    let horizon = SETTLE_HORIZON.as_secs();
    RuntimeStore::write_batch(
        &s,
        vec![
            Write::Graph(Box::new(moving(1, 1))),
            Write::Graph(Box::new(graph(2, 1))),
            Write::Graph(Box::new(moving(3, 1))),
            Write::Graph(Box::new(moving(4, 1))),
        ],
        Commit::Shared,
    )?;
    let report = RuntimeStore::checkpoint(&s, false, t)?;
    assert_eq!(report.moving, 3, "{report:?}");
    assert_eq!(
        (on_file(&state, 1), on_file(&state, 2), on_file(&state, 3)),
        (None, Some(1), None),
        "only the settled graph is on file"
    );
    // 1 settles (a long wait), 3 moves on, 4 finishes.
    put(&s, 1, 2)?;
    put_moving(&s, 3, 2)?;
    RuntimeStore::write_batch(&s, vec![Write::DeleteGraph(key(4), None)], Commit::Shared)?;
    let report = RuntimeStore::checkpoint(&s, false, at(horizon / 2))?;
    assert_eq!(report.moving, 1, "{report:?}");
    assert_eq!(on_file(&state, 1), Some(2), "settled: on file");
    assert_eq!(on_file(&state, 3), None, "still moving within the horizon");
    assert_eq!(
        on_file(&state, 4),
        None,
        "deleted before it ever had a file"
    );
    // Moving since the first checkpoint, for the whole horizon: written anyway.
    let report = RuntimeStore::checkpoint(&s, false, at(horizon))?;
    assert_eq!(report.moving, 0, "{report:?}");
    assert_eq!(on_file(&state, 3), Some(2), "moved too long: on file");
    // A full checkpoint (a clean stop) writes a moving graph at once.
    put_moving(&s, 5, 1)?;
    assert_eq!(RuntimeStore::checkpoint(&s, false, at(horizon))?.moving, 1);
    RuntimeStore::checkpoint(&s, true, at(horizon))?;
    assert_eq!(on_file(&state, 5), Some(1));
    assert!(segments(&state).is_empty(), "{:?}", segments(&state));
    Ok(())
}

/// New versions of a settled, large graph (chat 2) until the newest segment is full (8 MiB,
/// due for retirement); returns that segment.
fn fill_segment(s: &GraphStore, state: &Path) -> Result<PathBuf, Box<dyn std::error::Error>> {
    let full = newest_segment(state)?;
    let mut version = 1;
    while std::fs::metadata(&full)?.len() < 8 << 20 {
        let mut filler = graph(2, version);
        filler.chat.title = "x".repeat(100_000);
        put_graph(s, filler)?;
        version += 1;
    }
    Ok(full)
}

/// A journal segment is retired (removed) only with everything it holds kept: a graph still
/// moving within its horizon is carried into the new segment (one append, no file made for a
/// graph whose reply is about to finish), one that has moved the whole horizon and the settled
/// ones go on file. A restart has them all, and a newer state written after the retirement
/// wins over the carried copy.
#[test]
fn a_retirement_carries_a_moving_graph_into_the_new_segment() -> TestResult {
    use personad::ports::store::SETTLE_HORIZON;
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let s = store(&state);
    let t = now();
    let later = t + SignedDuration::from_secs(SETTLE_HORIZON.as_secs() as i64);
    // Chat 3 moves from `t` on (a checkpoint notes it), chat 1 from `later`.
    put_moving(&s, 3, 1)?;
    assert_eq!(RuntimeStore::checkpoint(&s, false, t)?.moving, 1);
    put_moving(&s, 1, 1)?;
    let first = fill_segment(&s, &state)?;
    let report = RuntimeStore::checkpoint(&s, false, later)?;
    assert!(report.retired >= 1, "{report:?}");
    assert!(!first.exists(), "the full segment was retired");
    assert_eq!((report.carried, report.moving), (1, 1), "{report:?}");
    assert_eq!(on_file(&state, 1), None, "carried, not written");
    assert_eq!(
        on_file(&state, 3),
        Some(1),
        "moved the whole horizon: on file"
    );
    assert!(on_file(&state, 2).is_some(), "settled: on file");
    let back = store(&state).load_all(now())?;
    assert_eq!(
        versions(&back.graphs).iter().find(|(chat, _)| *chat == 1),
        Some(&(1, 1)),
        "the carried graph survives the retirement"
    );
    // A newer state after the carry wins at a restart.
    put_moving(&s, 1, 2)?;
    let back = store(&state).load_all(now())?;
    assert_eq!(
        versions(&back.graphs).iter().find(|(chat, _)| *chat == 1),
        Some(&(1, 2)),
    );
    Ok(())
}

/// A carry that cannot be appended (a full disk) carries nothing: the retirement writes the
/// moving graph to its file as it would without a carry, says so in the log, and a restart
/// has the graph.
#[test]
fn a_carry_that_fails_puts_the_moving_graph_on_file() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let s = store(&state);
    put_moving(&s, 1, 1)?;
    let first = fill_segment(&s, &state)?;
    faults::fail_next_append_after(10);
    let (report, logs) = logged(|| RuntimeStore::checkpoint(&s, false, now()));
    let report = report?;
    assert!(!first.exists(), "the full segment was retired");
    assert_eq!(report.carried, 0, "{report:?}");
    assert!(logs.contains("journal_carry_failed"), "{logs}");
    assert_eq!(on_file(&state, 1), Some(1), "written instead");
    let back = store(&state).load_all(now())?;
    assert!(
        back.graphs.iter().any(|g| g.chat.id == ChatId(1)),
        "the moving graph survives the retirement"
    );
    Ok(())
}

/// A store whose batches that may wait for another's sync wait up to an hour: one held back
/// shows as a timeout in [`on_a_thread`].
fn held_store(dir: &Path) -> std::sync::Arc<GraphStore> {
    std::sync::Arc::new(
        GraphStore::new(StateDir::new(dir)).with_commit_delay(std::time::Duration::from_secs(3600)),
    )
}

/// Writes version 1 of `chat`'s graph as a batch of its own.
fn write_one(store: &GraphStore, chat: i64, commit: Commit) -> Result<(), String> {
    RuntimeStore::write_batch(store, vec![Write::Graph(Box::new(graph(chat, 1)))], commit)
        .map_err(|e| e.to_string())
}

/// Runs `work` on a thread and returns its result, or `held` when it has not returned
/// within a minute.
fn on_a_thread(
    work: impl FnOnce() -> Result<(), String> + Send + 'static,
    held: &str,
) -> TestResult {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .map_err(|_| held.to_string())??;
    Ok(())
}

/// A batch a task waits for (`Commit::Now`: a send's `active` mark) is made durable at once,
/// even right after another batch: never held back for a sync no other batch would make
/// (ten sends planned together each waited the whole commit delay).
#[test]
fn a_batch_a_task_waits_for_is_never_held_back() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let store = held_store(dir.path());
    let writer = std::sync::Arc::clone(&store);
    // The first of a stream does not wait; the next one, a task's, must not either.
    on_a_thread(
        move || {
            write_one(&writer, 1, Commit::Shared).and_then(|()| write_one(&writer, 2, Commit::Now))
        },
        "the batch a task waits for was held back for another batch's sync",
    )?;
    let loaded = RuntimeStore::load_all(&self::store(dir.path()), now())?;
    assert_eq!(versions(&loaded.graphs), [(1, 1), (2, 1)]);
    Ok(())
}

/// A bulk batch (`Commit::Busy`, which may wait for another batch's sync) is not held back
/// once a task waits for it: `hurry` releases one waiting, and no batch waits while a task
/// does (a message's graph write, then its planning, which waited the whole commit delay).
#[test]
fn a_hurried_store_holds_no_bulk_batch_back() -> TestResult {
    let _serial = serial();
    let dir = tempfile::tempdir()?;
    let store = held_store(dir.path());
    let writer = std::sync::Arc::clone(&store);
    let written = std::thread::spawn(move || write_one(&writer, 1, Commit::Busy));
    RuntimeStore::hurry(&*store, true);
    on_a_thread(
        move || {
            written
                .join()
                .map_err(|_| "the writer panicked".to_string())?
        },
        "the batch a task waits for was held back for company",
    )?;
    RuntimeStore::hurry(&*store, false);
    let loaded = RuntimeStore::load_all(&self::store(dir.path()), now())?;
    assert_eq!(versions(&loaded.graphs), [(1, 1)]);
    Ok(())
}
