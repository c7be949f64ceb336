//! The graph files are checkpoints of the journal: a graph's file is current within the
//! checkpoint delay (one second) after the graph settles (nothing of it moves within the
//! settle horizon), a reply over within that horizon never gets a file, and until then what
//! `state show` reads (`GraphStore::scan`/`read_graph`: the journal over the files) already
//! shows the newer state. Virtual time, stepped 10 ms at a time; then `personad state show` on a state
//! directory whose journal is newer than its files.

mod common;

use std::time::Duration;

use common::*;
use jiff::{SignedDuration, Timestamp};
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::{ConversationKey, TaskGraph, TaskKind, TaskStatus, codec};
use personad::core::model::ChatId;
use personad::core::plan::Action;
use personad::ports::clock::Clock;
use personad::ports::store::{Commit, RuntimeStore, SETTLE_HORIZON, Write};

/// `CHECKPOINT_EVERY` of the runtime: a graph's file is current within this long after it
/// settles (docs/state-format.md).
const CHECKPOINT_DELAY: SignedDuration = SignedDuration::from_secs(1);

/// A planner whose every plan sends `texts` an hour apart (it settles on each wait).
fn an_hour_apart(texts: &'static [&'static str]) -> ScriptedPlanner {
    ScriptedPlanner::new(move |_, _| {
        let mut plan = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            if i > 0 {
                plan.push(Action::Wait { secs: 3600.0 });
            }
            plan.push(send(text));
        }
        Ok(plan)
    })
}

/// A runtime on `planner` with one direct chat (10), told "hi" there: the harness, the
/// chat's key, its state directory, and `state show`'s view of it.
async fn said_hi(
    dir: &std::path::Path,
    planner: ScriptedPlanner,
) -> (Harness, ConversationKey, StateDir, GraphStore) {
    let chat = dm(10);
    let h = Harness::start(dir, planner, config(), std::slice::from_ref(&chat));
    h.started().await;
    h.say(&chat, "Bob", "hi").await;
    let state = StateDir::new(&h.state);
    let view = GraphStore::new(state.clone());
    (h, ConversationKey::new(AGENT, ChatId(10)), state, view)
}

fn on_file(dir: &StateDir, key: &ConversationKey) -> Option<TaskGraph> {
    let text = std::fs::read_to_string(dir.graph_path(key)).ok()?;
    codec::decode(&text).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settled_graph_is_on_file_within_the_checkpoint_delay_and_shown_newer_before()
-> TestResult {
    let dir = tempfile::tempdir()?;
    // A plan that sends, then waits an hour: it settles on the wait.
    let (mut h, key, state, view) = said_hi(dir.path(), an_hour_apart(&["one", "two"])).await;
    let mut newest: Option<TaskGraph> = None;
    let mut changed_at = Timestamp::UNIX_EPOCH;
    let mut behind_steps = 0;
    let mut sent_at: Option<Timestamp> = None;
    for _ in 0..2000 {
        h.pass(Duration::from_millis(10)).await;
        let now = h.clock.now();
        // What `state show` reads.
        let shown = view.read_graph(&key)?;
        let scanned: Vec<TaskGraph> = view
            .scan_at(now)?
            .into_iter()
            .filter_map(|f| f.graph.ok())
            .collect();
        // The runtime goes on writing while the clock is held (a batch, a checkpoint): the
        // two views are compared only when nothing changed while they were read.
        if view.read_graph(&key)? == shown {
            assert_eq!(
                scanned.first(),
                shown.as_ref(),
                "scan and read_graph disagree"
            );
        }
        if shown != newest {
            newest.clone_from(&shown);
            changed_at = now;
        }
        let file = on_file(&state, &key);
        if let Some(g) = shown.as_ref().filter(|g| file.as_ref() != Some(*g)) {
            behind_steps += 1;
            let behind = now.duration_since(changed_at);
            // A moving graph may stay in the journal alone for the settle horizon; once it
            // settles its file follows within the checkpoint delay.
            let allowed = if g.moves_within(now, SETTLE_HORIZON) {
                SignedDuration::try_from(SETTLE_HORIZON)?
            } else {
                CHECKPOINT_DELAY
            };
            assert!(
                behind <= allowed + SignedDuration::from_millis(10),
                "the file is {behind:?} behind the journal"
            );
        }
        if sent_at.is_none() && h.sends_to(ChatId(10)) == ["one"] {
            sent_at = Some(now);
        }
        if sent_at.is_some_and(|at| now.duration_since(at) > SignedDuration::from_secs(3)) {
            break;
        }
    }
    assert!(sent_at.is_some(), "the first send never went");
    let settled = newest.ok_or("no graph")?;
    assert_eq!(on_file(&state, &key).as_ref(), Some(&settled));
    assert!(
        settled
            .tasks
            .iter()
            .any(|t| t.status == TaskStatus::Done && t.kind() == TaskKind::Send),
        "{settled:?}"
    );
    // The journal was ahead of the file for a while: `state show` showed the newer state then.
    assert!(
        behind_steps > 0,
        "the file was never behind: the test saw no journal-only state"
    );
    h.stop().await?;
    Ok(())
}

/// A reply that is over within the settle horizon (send, wait 5 s, send) lives in the journal
/// alone: its graph never gets a file, though checkpoints run every second meanwhile, and
/// `state show`'s view has it while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_over_within_the_settle_horizon_never_makes_a_graph_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let planner =
        ScriptedPlanner::new(|_, _| Ok(vec![send("one"), Action::Wait { secs: 5.0 }, send("two")]));
    let (mut h, key, state, view) = said_hi(dir.path(), planner).await;
    let mut seen_in_journal = 0;
    for _ in 0..1500 {
        h.pass(Duration::from_millis(10)).await;
        assert!(
            !state.graph_path(&key).exists(),
            "a graph file was made for a reply still moving"
        );
        if view.read_graph(&key)?.is_some() {
            seen_in_journal += 1;
        }
        if h.sends_to(ChatId(10)) == ["one", "two"] && view.read_graph(&key)?.is_none() {
            break;
        }
    }
    assert_eq!(h.sends_to(ChatId(10)), ["one", "two"]);
    assert!(view.read_graph(&key)?.is_none(), "the graph is finished");
    assert!(
        seen_in_journal > 100,
        "state show's view had the running graph ({seen_in_journal} steps)"
    );
    h.stop().await?;
    assert!(!state.graph_path(&key).exists());
    Ok(())
}

/// `personad state show` on a state directory whose journal is newer than its files shows
/// the journal's state.
#[test]
fn state_show_reads_the_journal_over_an_older_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    let store = GraphStore::new(StateDir::new(&state));
    let now = Timestamp::now();
    let chat = dm(7);
    let mut g = TaskGraph::with_received(AGENT, chat, now, None, now);
    g.seq = 1;
    RuntimeStore::write_batch(
        &store,
        vec![Write::Graph(Box::new(g.clone()))],
        Commit::Shared,
    )?;
    RuntimeStore::checkpoint(&store, true, now)?;
    let mut newer = g.clone();
    newer.seq = 2;
    newer.chat.title = "renamed in the journal".into();
    RuntimeStore::write_batch(&store, vec![Write::Graph(Box::new(newer))], Commit::Shared)?;
    drop(store);
    let file = std::fs::read_to_string(StateDir::new(&state).graph_path(&g.key()))?;
    assert!(!file.contains("renamed in the journal"));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    clear_env(&mut cmd);
    let out = cmd
        .arg("--state")
        .arg(&state)
        .args(["state", "show", AGENT, "7"])
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("renamed in the journal"),
        "{stdout}\n{stderr}"
    );
    Ok(())
}

/// A restart with state only in the journal (a kill before the checkpoint) brings the files
/// up to date within the checkpoint delay even when the run writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_checkpoints_the_replayed_journal_without_new_writes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(10);
    let planner = || an_hour_apart(&["one", "two"]);
    let mut h = Harness::start(dir.path(), planner(), config(), std::slice::from_ref(&chat));
    h.started().await;
    h.say(&chat, "Bob", "hi").await;
    h.pass(Duration::from_secs(10)).await;
    h.crash().await;
    // The settled graph, one step newer in the journal than on file (as a kill right after
    // its record leaves it).
    let state = StateDir::new(dir.path());
    let store = GraphStore::new(state.clone());
    let key = ConversationKey::new(AGENT, ChatId(10));
    // Loaded first, as the daemon does: the store learns the journal's sequence numbers.
    store.load_all(t0() + SignedDuration::from_secs(10))?;
    let mut g = store.read_graph(&key)?.ok_or("no graph")?;
    assert_eq!(on_file(&state, &key).as_ref(), Some(&g));
    g.seq += 100;
    let newer = g.seq;
    RuntimeStore::write_batch(
        &store,
        vec![Write::Graph(Box::new(g.clone()))],
        Commit::Shared,
    )?;
    drop(store);
    assert_ne!(on_file(&state, &key).as_ref(), Some(&g));
    let mut h = Harness::start_at(
        dir.path(),
        planner(),
        config(),
        std::slice::from_ref(&chat),
        t0() + SignedDuration::from_secs(10),
    );
    h.started().await;
    h.pass(Duration::from_millis(1100)).await;
    let file = on_file(&state, &key).ok_or("no file")?;
    assert!(
        file.seq >= newer,
        "the replayed state is not on file a second after the start: save #{} on file, #{newer} in the journal",
        file.seq
    );
    h.stop().await?;
    Ok(())
}

/// Through the runtime: a clean stop with a plan waiting packs its graph, the next start
/// reads the pack and goes on, and the pack never brings back an older step. The plan sends
/// "two" and "three" an hour apart across two restarts, each once and on time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts_from_the_graph_pack_go_on_with_the_plan_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(10);
    let chats = std::slice::from_ref(&chat);
    let planner = || an_hour_apart(&["one", "two", "three"]);
    let pack = StateDir::new(dir.path()).graph_pack_path(AGENT);
    let mut h = Harness::start(dir.path(), planner(), config(), chats);
    h.started().await;
    h.say(&chat, "Bob", "hi").await;
    h.pass(Duration::from_secs(10)).await;
    assert_eq!(h.sends_to(ChatId(10)), ["one"]);
    h.stop().await?;
    assert!(pack.exists(), "the clean stop packed the waiting graph");

    let at = |secs: i64| t0() + SignedDuration::from_secs(secs);
    let mut h = Harness::start_at(dir.path(), planner(), config(), chats, at(10));
    h.started().await;
    h.pass(Duration::from_secs(3700)).await;
    assert_eq!(h.sends_to(ChatId(10)), ["two"]);
    assert!(
        !pack.exists(),
        "the checkpoint that wrote the graph's next step removed the pack first"
    );
    h.stop().await?;
    assert!(
        pack.exists(),
        "the second clean stop packed the graph again"
    );

    // "three" is due an hour after "two" (about 7,200 s in); a start from a stale pack would
    // run "two" again (its key answers it with the message already sent) and wait an hour
    // from the restart instead: nothing sent by 7,250 s.
    let mut h = Harness::start_at(dir.path(), planner(), config(), chats, at(3710));
    h.started().await;
    h.pass(Duration::from_secs(3540)).await;
    assert_eq!(h.sends_to(ChatId(10)), ["three"]);
    h.stop().await?;
    Ok(())
}
