//! End-to-end scenarios through the real runtime: in-memory Telegram, scripted planner,
//! virtual time. Each test names the property it proves.

mod common;

use std::sync::Arc;

use common::*;
use personad::adapters::memory::{Action as Op2, Op};
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::{
    ConversationKey, IdempotencyKey, Task, TaskGraph, TaskKind, TaskSpec, TaskStatus,
};
use personad::core::model::OutgoingText;
use personad::core::model::{ChatId, TelegramError};
use personad::core::plan::{Action, PlanError};
use personad::ports::clock::Clock;
use personad::ports::telegram::Telegram;
use tokio::sync::Notify;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_gets_an_answer_after_the_debounce_window() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(10);
    let mut h = Harness::start(
        dir.path(),
        reply_with("hello!"),
        config(),
        std::slice::from_ref(&chat),
    );
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    assert_eq!(h.sends(), vec![(ChatId(10), "hello!".to_string(), 2000)]);
    assert_eq!(h.planner.calls(), 1);
    // A finished plan leaves no graph file behind.
    let graphs = files_below(&dir.path().join("graphs"));
    assert!(graphs.is_empty(), "left over: {graphs:?}");
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_serves_conversations_in_turn() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chats = [dm(1), dm(2), dm(3)];
    // A pause between messages lets the other conversations plan meanwhile, so all three
    // plans are under way together.
    let planner = ScriptedPlanner::new(|req, _| {
        let c = req.chat.id.0;
        Ok((1..=3)
            .flat_map(|i| [send(&format!("{c}.{i}")), Action::Wait { secs: 1.0 }])
            .collect())
    });
    let mut cfg = config();
    cfg.max_in_flight = 1; // one task at a time makes the tick order visible
    let mut h = Harness::start(dir.path(), planner, cfg, &chats);
    for c in &chats {
        h.say(c, "Bob", "hi").await;
    }
    h.settle().await;
    let order: Vec<String> = h.sends().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(
        order,
        [
            "1.1", "2.1", "3.1", "1.2", "2.2", "3.2", "1.3", "2.3", "3.3"
        ],
        "each conversation gets one task per round"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_under_way_goes_before_new_plans() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chats = [dm(1), dm(2), dm(3)];
    let planner = ScriptedPlanner::new(|req, _| {
        let c = req.chat.id.0;
        Ok((1..=2).map(|i| send(&format!("{c}.{i}"))).collect())
    });
    let mut cfg = config();
    cfg.max_in_flight = 1;
    let mut h = Harness::start(dir.path(), planner, cfg, &chats);
    for c in &chats {
        h.say(c, "Bob", "hi").await;
    }
    h.settle().await;
    let order: Vec<String> = h.sends().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(
        order,
        ["1.1", "1.2", "2.1", "2.2", "3.1", "3.2"],
        "a ready reply takes the free slot before the next conversation starts planning"
    );
    let planned: Vec<ChatId> = h.planner.seen().into_iter().map(|(c, _)| c).collect();
    assert_eq!(
        planned,
        [ChatId(1), ChatId(2), ChatId(3)],
        "new plans start in arrival order"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_inside_the_debounce_window_costs_one_plan() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(5);
    let mut h = Harness::start(
        dir.path(),
        reply_with("ok"),
        config(),
        std::slice::from_ref(&chat),
    );
    for i in 0..5 {
        h.say(&chat, "Bob", &format!("part {i}")).await;
        h.pass(secs(1)).await; // 1 s apart: each inside the 2 s window of the previous
    }
    h.settle().await;
    assert_eq!(h.planner.calls(), 1, "one plan for the whole burst");
    assert_eq!(
        h.planner.seen(),
        vec![(ChatId(5), 5)],
        "the plan saw all five messages"
    );
    // The last message arrived at 4 s; planning waited 2 s of quiet.
    assert_eq!(h.sends(), vec![(ChatId(5), "ok".to_string(), 6000)]);
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_message_abandons_the_planning_in_flight() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(7);
    let gate = Arc::new(Notify::new());
    let planner =
        ScriptedPlanner::new(|_, n| Ok(vec![send(&format!("plan {n}"))])).gated(gate.clone());
    let mut h = Harness::start(dir.path(), planner, config(), std::slice::from_ref(&chat));
    h.say(&chat, "Bob", "first").await;
    h.pass(secs(2)).await; // planning of "first" starts at 2 s and blocks in the planner
    h.planner.entered().await;
    h.say(&chat, "Bob", "second").await;
    // Whatever the abandoned call returns (if it was not aborted in time) is discarded.
    gate.notify_one();
    h.settle().await;
    assert_eq!(h.planner.calls(), 2);
    let sends = h.sends();
    assert_eq!(
        sends,
        vec![(ChatId(7), "plan 1".to_string(), 4000)],
        "only the newest plan is carried out, 2 s after the second message"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_of_a_superseded_send_is_discarded() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(6);
    let planner = ScriptedPlanner::new(|_, n| {
        Ok(match n {
            0 => vec![send("old one"), send("old two")],
            _ => vec![send("new")],
        })
    });
    let mut h = Harness::start(dir.path(), planner, config(), std::slice::from_ref(&chat));
    let gate = h.telegram.gate(Op::SendText);
    h.say(&chat, "Bob", "hi").await;
    h.pass(secs(2)).await;
    gate.entered.notified().await; // "old one" is in flight, stopped inside Telegram
    h.say(&chat, "Bob", "actually...").await;
    h.telegram.ungate(Op::SendText);
    gate.release.notify_one();
    h.settle().await;
    let texts: Vec<String> = h.sends().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(
        texts,
        vec!["old one".to_string(), "new".to_string()],
        "the send in flight completes; the rest of its plan is gone"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_side_effect_in_flight_finishes_but_the_rest_of_its_plan_is_dropped() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(8);
    let planner = ScriptedPlanner::new(|_, n| {
        Ok(match n {
            0 => vec![
                send("old one"),
                Action::Wait { secs: 30.0 },
                send("old two"),
            ],
            _ => vec![send("new")],
        })
    });
    let mut h = Harness::start(dir.path(), planner, config(), std::slice::from_ref(&chat));
    h.say(&chat, "Bob", "hi").await;
    h.pass(secs(10)).await; // "old one" sent, the 30 s wait is running
    h.say(&chat, "Bob", "wait, something else").await;
    h.settle().await;
    let texts: Vec<String> = h.sends().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(texts, vec!["old one".to_string(), "new".to_string()]);
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_resumes_after_a_crash_with_its_remaining_time() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(9);
    let planner = ScriptedPlanner::new(|_, _| Ok(vec![Action::Wait { secs: 60.0 }, send("late")]));
    let mut h = Harness::start(dir.path(), planner, config(), std::slice::from_ref(&chat));
    h.say(&chat, "Bob", "ping").await;
    // Planning at 2 s arms the wait until 62 s. Crash at 42 s, with 20 s left.
    h.pass(secs(42)).await;
    let key = ConversationKey::new(AGENT, ChatId(9));
    // What is on disk: the journal over the graph file (a 60 s wait keeps the graph moving,
    // so it has no file yet).
    let saved = GraphStore::new(StateDir::new(dir.path()))
        .read_graph(&key)?
        .ok_or("no graph on disk")?;
    let wait = saved
        .tasks
        .iter()
        .find(|t| t.kind() == TaskKind::Wait)
        .ok_or("wait task persisted")?;
    assert_eq!(wait.not_before.map(ms_since_t0), Some(62_000));
    assert!(h.sends().is_empty());
    h.crash().await;

    // Restart 42 s after t0: the wait still has 20 s to go.
    let restart_at = personad::core::time::add(t0(), secs(42));
    let planner =
        ScriptedPlanner::new(|_, _| Err(PlanError::NoAnswer("replanning (none expected)")));
    let mut h = Harness::start_at(
        dir.path(),
        planner,
        config(),
        std::slice::from_ref(&chat),
        restart_at,
    );
    h.settle().await;
    assert_eq!(h.sends(), vec![(ChatId(9), "late".to_string(), 62_000)]);
    assert_eq!(h.planner.calls(), 0);
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_task_is_retried_then_its_graph_dropped() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(11);
    let mut cfg = config();
    cfg.retry.max_attempts = 3;
    let mut h = Harness::start(
        dir.path(),
        reply_with("never arrives"),
        cfg,
        std::slice::from_ref(&chat),
    );
    for _ in 0..3 {
        h.telegram.fail_next(
            Op::SendText,
            TelegramError::Network("connection reset".into()),
        );
    }
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    assert!(h.sends_to(chat.id).is_empty());
    // The owner hears of it once.
    let told = h.owner_notices();
    assert!(
        told.len() == 1 && told[0].contains("dropped after 3 attempt(s)"),
        "{told:?}"
    );
    // Attempts at 2 s, 12 s and 22 s; the third failure drops the graph.
    assert_eq!(ms_since_t0(h.clock.now()), 22_000);
    assert!(
        files_below(&dir.path().join("graphs")).is_empty(),
        "dropped graph is deleted"
    );
    // A fourth attempt would have succeeded: nothing else was queued.
    h.say(&chat, "Bob", "again").await;
    h.settle().await;
    assert_eq!(h.sends_to(chat.id).len(), 1, "a new message plans afresh");
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permanent_error_drops_the_graph_without_retrying() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(12);
    let mut h = Harness::start(
        dir.path(),
        reply_with("x"),
        config(),
        std::slice::from_ref(&chat),
    );
    h.telegram.fail_next(
        Op::SendText,
        TelegramError::Forbidden("CHAT_WRITE_FORBIDDEN".into()),
    );
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    assert!(h.sends_to(chat.id).is_empty());
    assert_eq!(ms_since_t0(h.clock.now()), 2000, "no retry wait happened");
    h.stop().await?;
    Ok(())
}

/// Temp files a crash left behind are removed at start from every folder of the state
/// directory (agent state, memory, schedules), not only the graphs'; a playground's state
/// directory inside (its own lock, maybe writing now) is left alone, and so is a fresh temp
/// file outside the graphs (another part may be writing it now: the corrupt-graph test below
/// writes transcripts while the runtime starts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_temp_files_are_removed_from_every_state_folder_at_start() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agent = dir.path().join(AGENT);
    let places = [
        agent.clone(),
        agent.join("memory"),
        agent.join("memory").join("chats"),
        agent.join("schedule"),
    ];
    // Left by a crash an hour ago (a fresh one may be a write in progress).
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for p in &places {
        std::fs::create_dir_all(p)?;
        let f = std::fs::File::create(p.join(".personad-tmp-left"))?;
        f.set_modified(an_hour_ago)?;
    }
    let playground = agent.join("playground");
    std::fs::create_dir_all(&playground)?;
    std::fs::write(
        playground.join(personad::adapters::store::layout::LOCK_FILE),
        "",
    )?;
    std::fs::File::create(playground.join(".personad-tmp-live"))?.set_modified(an_hour_ago)?;
    let planner = ScriptedPlanner::new(|_, _| Ok(vec![]));
    let mut h = Harness::start(dir.path(), planner, config(), &[dm(1)]);
    h.settle().await;
    for p in &places {
        assert!(
            !p.join(".personad-tmp-left").exists(),
            "left in {}",
            p.display()
        );
    }
    assert!(
        playground.join(".personad-tmp-live").exists(),
        "a playground's temp file is not ours to remove"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_graph_file_is_quarantined_and_the_others_load() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (good, bad) = (dm(21), dm(22));
    // First run: leave a pending plan for `good` on disk.
    let planner =
        ScriptedPlanner::new(|_, _| Ok(vec![Action::Wait { secs: 100.0 }, send("resumed")]));
    let mut h = Harness::start(dir.path(), planner, config(), &[good.clone(), bad.clone()]);
    h.say(&good, "Bob", "hi").await;
    h.pass(secs(5)).await;
    h.crash().await;
    let layout = StateDir::new(dir.path());
    let bad_path = layout.graph_path(&ConversationKey::new(AGENT, ChatId(22)));
    std::fs::write(&bad_path, "# Task graph\n\n```json\n{ not json\n```\n")?;
    let stale = bad_path.with_file_name(".personad-tmp-leftover");
    std::fs::write(&stale, "half a file")?;

    let planner = ScriptedPlanner::new(|_, _| Ok(vec![]));
    let mut h = Harness::start_at(
        dir.path(),
        planner,
        config(),
        &[good.clone(), bad.clone()],
        personad::core::time::add(t0(), secs(5)),
    );
    h.settle().await;
    assert_eq!(
        h.sends().into_iter().map(|(_, t, _)| t).collect::<Vec<_>>(),
        vec!["resumed".to_string()]
    );
    let (quarantined, reasons): (Vec<String>, Vec<String>) =
        files_below(&dir.path().join("quarantine"))
            .into_iter()
            .partition(|f| !f.ends_with(".reason"));
    assert_eq!(quarantined.len(), 1, "{quarantined:?}");
    assert!(quarantined[0].ends_with("--22.md"), "{quarantined:?}");
    assert_eq!(
        reasons,
        vec![format!("{}.reason", quarantined[0])],
        "the reason is kept beside it"
    );
    let kept = std::fs::read_to_string(dir.path().join("quarantine").join(&quarantined[0]))?;
    assert!(
        kept.contains("{ not json"),
        "quarantined content is kept as it was"
    );
    assert!(!bad_path.exists() && !stale.exists());
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_interrupted_after_it_reached_telegram_is_not_repeated() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(31);
    // The state a crash leaves between "sent" and "marked done": the send task is active on
    // disk, and Telegram already has the message under the task's idempotency key.
    let now = t0();
    let mut g = TaskGraph::with_received(AGENT, chat.clone(), now, None, now);
    g.tasks[0].status = TaskStatus::Done;
    let key = 4242_i64;
    let spec = TaskSpec::Send {
        text: "only once".into(),
        reply_to: None,
        idempotency_key: IdempotencyKey(key),
    };
    let mut send_task = Task::new(spec, now);
    send_task.status = TaskStatus::Active;
    let first = g.tasks[0].id.clone();
    g.append_chain(&first, vec![send_task]);
    GraphStore::new(StateDir::new(dir.path())).save(&g)?;

    let mut h = Harness::start(
        dir.path(),
        reply_with("unused"),
        config(),
        std::slice::from_ref(&chat),
    );
    h.telegram
        .send_text(OutgoingText {
            chat: chat.id,
            text: "only once".into(),
            reply_to: None,
            idempotency_key: key,
        })
        .await?;
    h.settle().await;
    let outgoing = h
        .telegram
        .transcript(chat.id)
        .into_iter()
        .filter(|m| m.outgoing)
        .count();
    assert_eq!(
        outgoing, 1,
        "the resumed send reused its key and posted nothing new"
    );
    assert_eq!(h.sends().len(), 1);
    assert!(
        files_below(&dir.path().join("graphs")).is_empty(),
        "the plan completed"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_task_stops_the_runtime_after_saving() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(41);
    let h = Harness::start(
        dir.path(),
        reply_with("x"),
        config(),
        std::slice::from_ref(&chat),
    );
    // Operators create shutdown tasks; here one is put on disk before the runtime starts.
    drop(h.stop().await?);
    let now = t0();
    let mut g = TaskGraph::with_received(AGENT, chat.clone(), now, None, now);
    g.tasks[0].status = TaskStatus::Done;
    let shutdown = Task::new(TaskSpec::Shutdown { reason: None }, now);
    let first = g.tasks[0].id.clone();
    g.append_chain(&first, vec![shutdown]);
    GraphStore::new(StateDir::new(dir.path())).save(&g)?;
    let mut h = Harness::start(
        dir.path(),
        reply_with("x"),
        config(),
        std::slice::from_ref(&chat),
    );
    drop(h.hold.take());
    h.handle.wait_stopped().await;
    let report = h.run.await??;
    assert_eq!(report.reason, "shutdown task");
    assert!(files_below(&dir.path().join("graphs")).is_empty());
    Ok(())
}

/// Copies a fixture state directory into a fresh temp dir.
fn copy_fixture(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_fixture(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_directory_written_in_format_1_loads_and_its_plans_resume() -> TestResult {
    // tests/fixtures/state-v1 is what the release before typed tasks left behind: a plan
    // waiting 30 s before a send and a sticker (chat 10), a debounced `received` (chat 11),
    // a send interrupted while active after one retry plus a send without a key (chat 12),
    // and a disabled chat 13 in the agent state.
    let dir = tempfile::tempdir()?;
    copy_fixture(std::path::Path::new("tests/fixtures/state-v1"), dir.path())?;
    let chats = [dm(10), dm(11), dm(12), dm(13)];
    let restart = personad::core::time::add(t0(), secs(5));
    let mut h = Harness::start_at(
        dir.path(),
        reply_with("fresh plan"),
        config(),
        &chats,
        restart,
    );
    h.say(&dm(13), "Bob", "still disabled?").await;
    h.settle().await;
    let mut sends = h.sends();
    sends.sort_by(|a, b| (a.2, a.0, &a.1).cmp(&(b.2, b.0, &b.1)));
    let expected = vec![
        (ChatId(11), "fresh plan".to_string(), 5_000),
        (ChatId(12), "interrupted".to_string(), 5_000),
        (ChatId(12), "no key yet".to_string(), 5_000),
        (ChatId(10), "resumed hello".to_string(), 32_000),
    ];
    assert_eq!(sends, expected, "every pending plan resumed at its time");
    let stickers: Vec<(String, i64)> = h
        .telegram
        .actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Op2::Sticker { sticker, .. } => Some((sticker.name, ms_since_t0(r.at))),
            _ => None,
        })
        .collect();
    assert_eq!(stickers, vec![("😺".to_string(), 33_000)]);
    assert_eq!(h.planner.calls(), 1, "only chat 11 needed planning");
    assert!(files_below(&dir.path().join("quarantine")).is_empty());
    assert!(files_below(&dir.path().join("graphs")).is_empty());
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_in_flight_keeps_the_conversation_busy_while_time_moves() -> TestResult {
    use personad::adapters::governor::{FirstContact, Governor, GovernorConfig};
    let dir = tempfile::tempdir()?;
    let chat = dm(51);
    // The governor makes the second send wait 30 s for the per-chat gap, on the project
    // clock and without holding it: the send is in flight while virtual time moves on.
    let wrap: WrapTelegram = Box::new(|mem, clock| {
        let config = GovernorConfig {
            chat_min_gap: secs(30),
            chat_per_minute: 0,
            account_per_minute: 0,
            max_wait: secs(120),
            first_contact: FirstContact::Allow,
            ..GovernorConfig::default()
        };
        Arc::new(Governor::new(mem, clock, config))
    });
    let planned_at = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&planned_at);
    let planner = ScriptedPlanner::new(move |req, n| {
        if let Ok(mut v) = seen.lock() {
            v.push(ms_since_t0(req.now));
        }
        Ok(match n {
            0 => vec![send("one"), send("two")],
            _ => vec![send("three")],
        })
    });
    let mut h = Harness::start_wrapped(
        dir.path(),
        planner,
        config(),
        std::slice::from_ref(&chat),
        wrap,
    );
    h.say(&chat, "Bob", "hi").await;
    h.pass(secs(5)).await; // "one" at 2 s; "two" waits in the governor until 32 s
    h.say(&chat, "Bob", "more").await; // its debounce ends at 7 s, while "two" is in flight
    h.settle().await;
    let planned = planned_at.lock().map(|v| v.clone()).unwrap_or_default();
    assert_eq!(
        planned,
        vec![2_000, 32_000],
        "the new plan starts only when the send in flight has finished"
    );
    let sends = h.sends();
    let texts: Vec<&str> = sends.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(texts, ["one", "two", "three"]);
    h.stop().await?;
    Ok(())
}

/// A planner on the harness's clock that takes `secs` of virtual time per call (the first
/// `slow_calls` calls), counting how many calls run at once.
struct TimedPlanner {
    clock: personad::ports::clock::SharedClock,
    secs: u64,
    slow_calls: usize,
    calls: std::sync::atomic::AtomicUsize,
    running: std::sync::atomic::AtomicUsize,
    max_running: std::sync::atomic::AtomicUsize,
    started: std::sync::Mutex<Vec<i64>>,
}

impl TimedPlanner {
    fn new(
        clock: personad::ports::clock::SharedClock,
        secs: u64,
        slow_calls: usize,
    ) -> TimedPlanner {
        TimedPlanner {
            clock,
            secs,
            slow_calls,
            calls: Default::default(),
            running: Default::default(),
            max_running: Default::default(),
            started: Default::default(),
        }
    }
}

impl personad::ports::planner::Planner for TimedPlanner {
    fn plan<'a>(
        &'a self,
        req: personad::core::plan::PlanRequest<'a>,
    ) -> personad::core::time::BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        use std::sync::atomic::Ordering::SeqCst;
        Box::pin(async move {
            let n = self.calls.fetch_add(1, SeqCst);
            let now_running = self.running.fetch_add(1, SeqCst) + 1;
            self.max_running.fetch_max(now_running, SeqCst);
            if let Ok(mut v) = self.started.lock() {
                v.push(ms_since_t0(req.now));
            }
            if n < self.slow_calls {
                personad::ports::clock::pause(self.clock.as_ref(), secs(self.secs)).await;
            }
            self.running.fetch_sub(1, SeqCst);
            Ok(vec![send(&format!("reply {}", req.chat.id))])
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_running_past_its_timeout_fails_and_is_retried() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(52);
    let mut cfg = config();
    cfg.task_timeout = secs(60);
    let slot: Arc<std::sync::Mutex<Option<Arc<TimedPlanner>>>> = Default::default();
    let keep = Arc::clone(&slot);
    let mut h = Harness::start_with(
        dir.path(),
        move |clock| {
            // The first call would take 300 s.
            let p = Arc::new(TimedPlanner::new(clock, 300, 1));
            if let Ok(mut s) = keep.lock() {
                *s = Some(Arc::clone(&p));
            }
            p
        },
        cfg,
        std::slice::from_ref(&chat),
    );
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    let planner = slot.lock().ok().and_then(|s| s.clone()).ok_or("planner")?;
    let started = planner
        .started
        .lock()
        .map(|v| v.clone())
        .unwrap_or_default();
    assert_eq!(
        started,
        vec![2_000, 72_000],
        "timed out at 62 s, retried after the 10 s interval"
    );
    assert_eq!(
        h.sends(),
        vec![(ChatId(52), "reply 52".to_string(), 72_000)]
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_in_flight_above_one_runs_that_many_tasks_at_once_and_no_more() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chats: Vec<_> = (61..=65).map(dm).collect();
    let mut cfg = config();
    cfg.max_in_flight = 2;
    let slot: Arc<std::sync::Mutex<Option<Arc<TimedPlanner>>>> = Default::default();
    let keep = Arc::clone(&slot);
    let mut h = Harness::start_with(
        dir.path(),
        move |clock| {
            let p = Arc::new(TimedPlanner::new(clock, 10, usize::MAX));
            if let Ok(mut s) = keep.lock() {
                *s = Some(Arc::clone(&p));
            }
            p
        },
        cfg,
        &chats,
    );
    for c in &chats {
        h.say(c, "Bob", "hi").await;
    }
    h.settle().await;
    let planner = slot.lock().ok().and_then(|s| s.clone()).ok_or("planner")?;
    let started = planner
        .started
        .lock()
        .map(|v| v.clone())
        .unwrap_or_default();
    assert_eq!(
        started,
        vec![2_000, 2_000, 12_000, 12_000, 22_000],
        "two 10 s plans at a time"
    );
    assert_eq!(
        planner
            .max_running
            .load(std::sync::atomic::Ordering::SeqCst),
        2
    );
    assert_eq!(h.sends().len(), 5);
    h.stop().await?;
    Ok(())
}

#[test]
fn a_failed_save_stops_the_daemon_with_exit_code_74() -> TestResult {
    use std::io::Write as _;
    let dir = tempfile::tempdir()?;
    let state = dir.path().join("state");
    // Where the playground keeps Wren's graphs, a file stands in for the directory: loading
    // (which skips it) works, the first save cannot create its directory.
    let graphs = state.join("Wren").join("playground").join("graphs");
    std::fs::create_dir_all(&graphs)?;
    for d in [
        state.join("Wren"),
        state.join("Wren").join("playground"),
        graphs.clone(),
    ] {
        std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
    }
    // The agent's journal cannot be made: no state change can be made durable.
    let agent_dir = state.join("Wren").join("playground").join("Wren");
    std::fs::create_dir_all(&agent_dir)?;
    std::fs::set_permissions(
        &agent_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )?;
    std::fs::write(agent_dir.join("journal"), "not a directory")?;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.args(["--state"])
        .arg(&state)
        .args(["--agents"])
        .arg(root.join("agents"))
        .args(["--prompts"])
        .arg(root.join("prompts"))
        .args([
            "chat",
            "--agent",
            "Wren",
            "--jsonl",
            "--fast",
            "--planner",
            "echo",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    clear_env(&mut cmd);
    let mut child = cmd.spawn()?;
    child
        .stdin
        .take()
        .ok_or("stdin")?
        .write_all(b"{\"text\":\"hello\"}\n")?;
    let out = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(74), "{stderr}");
    assert!(stderr.contains("could not be saved"), "{stderr}");
    Ok(())
}
