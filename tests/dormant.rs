//! Dormant graphs through the real runtime on the in-memory Telegram and a virtual clock: a
//! plan that settles on a long wait leaves RAM once its state is durable (the status counts
//! it as dormant), and comes back from the store when its deadline comes, when a message
//! arrives in its chat, when the owner asks for every plan, and after a restart (read from
//! its checkpoint file). What it does then is what it would have done had it stayed.

mod common;

use common::logs::Logs;
use common::{AGENT, Harness, ScriptedPlanner, TestResult, config, dm, secs};
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::{ConversationKey, TaskStatus};
use personad::core::model::ChatId;
use personad::core::plan::Action;
use personad::core::scheduler::{OwnerReply, OwnerRequest};
use personad::ports::store::RuntimeStore;

/// Three hours: past the dormancy threshold (ten minutes) and within a wait's day.
const LATER_SECS: f64 = 3.0 * 3600.0;

/// The first message of a chat is answered now and again three hours later; every later
/// message with "again".
fn now_and_later() -> ScriptedPlanner {
    ScriptedPlanner::new(|_, n| {
        Ok(if n == 0 {
            vec![
                Action::Send {
                    text: "now".into(),
                    reply_to: None,
                },
                Action::Wait { secs: LATER_SECS },
                Action::Send {
                    text: "later".into(),
                    reply_to: None,
                },
            ]
        } else {
            vec![Action::Send {
                text: "again".into(),
                reply_to: None,
            }]
        })
    })
}

/// A runtime on `state` whose plan for chat 5 has sent "now" and waits three hours: it is
/// dormant.
async fn asleep(state: &std::path::Path) -> Harness {
    let mut h = Harness::start(state, now_and_later(), config(), &[dm(5)]);
    h.started().await;
    h.say(&dm(5), "bob", "hello").await;
    h.pass(secs(60)).await;
    assert_eq!(h.sends_to(ChatId(5)), ["now"]);
    let status = h.handle.status();
    assert_eq!(
        (status.graphs, status.dormant),
        (1, 1),
        "the waiting plan is counted and out of RAM"
    );
    h
}

fn never_replaced(logs: &Logs) {
    assert!(
        !logs.text().contains("dormant_graph_replaced"),
        "a dormant graph was changed without being read back: {}",
        logs.text()
    );
}

#[tokio::test]
async fn a_dormant_graph_comes_back_when_its_deadline_comes() -> TestResult {
    let (logs, _guard) = Logs::capture();
    let dir = tempfile::tempdir()?;
    let mut h = asleep(dir.path()).await;
    h.pass(secs(3 * 3600)).await;
    assert_eq!(h.sends_to(ChatId(5)), ["now", "later"]);
    let status = h.handle.status();
    assert_eq!((status.graphs, status.dormant), (0, 0));
    never_replaced(&logs);
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_message_to_a_dormant_chat_replans_over_the_graph_read_back() -> TestResult {
    let (logs, _guard) = Logs::capture();
    let dir = tempfile::tempdir()?;
    let mut h = asleep(dir.path()).await;
    h.say(&dm(5), "bob", "are you there?").await;
    h.pass(secs(60)).await;
    // As with the graph in RAM: the new plan replaces the one that waited.
    assert_eq!(h.sends_to(ChatId(5)), ["now", "again"]);
    never_replaced(&logs);
    h.pass(secs(4 * 3600)).await;
    assert_eq!(h.sends_to(ChatId(5)), ["now", "again"]);
    assert_eq!(h.handle.status().graphs, 0);
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn the_owners_list_of_plans_shows_a_dormant_plan() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut h = asleep(dir.path()).await;
    let reply = h
        .handle
        .owner(AGENT, OwnerRequest::Plans { chat: None })
        .await;
    let Some(OwnerReply::Plans(plans)) = reply else {
        return Err(format!("no list of plans: {reply:?}").into());
    };
    assert_eq!(plans.len(), 1, "the dormant plan is listed");
    let open: Vec<&str> = plans[0]
        .tasks
        .iter()
        .filter(|t| t.status != TaskStatus::Done)
        .map(|t| t.kind().as_str())
        .collect();
    assert_eq!(open, ["wait", "send"]);
    // Read back for the list, changed by nothing: out of RAM again after the pass.
    h.pass(secs(1)).await;
    assert_eq!(h.handle.status().dormant, 1);
    h.pass(secs(3 * 3600)).await;
    assert_eq!(h.sends_to(ChatId(5)), ["now", "later"]);
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_restart_keeps_a_settled_graph_out_of_ram_until_its_deadline() -> TestResult {
    let dir = tempfile::tempdir()?;
    let h = asleep(dir.path()).await;
    let at = h.shared_clock.now();
    h.stop().await?;
    // The stop leaves it in its checkpoint file, which is what the store reads back.
    let store = GraphStore::new(StateDir::new(dir.path()));
    let (graph, quarantined) = store.load_graph(&ConversationKey::new(AGENT, ChatId(5)), at)?;
    assert!(quarantined.is_none());
    assert!(
        graph.is_some(),
        "the checkpoint file holds the waiting plan"
    );

    let mut h = Harness::start_at(dir.path(), now_and_later(), config(), &[dm(5)], at);
    h.started().await;
    let status = h.handle.status();
    assert_eq!((status.graphs, status.dormant), (1, 1));
    h.pass(secs(3 * 3600)).await;
    // The first run's "now", and the second's "later" from the plan read back.
    assert_eq!(h.sends_to(ChatId(5)), ["later"]);
    assert_eq!(h.handle.status().graphs, 0);
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_dormant_graph_whose_file_does_not_read_is_moved_aside_when_it_wakes() -> TestResult {
    let (logs, _guard) = Logs::capture();
    let dir = tempfile::tempdir()?;
    let mut h = asleep(dir.path()).await;
    // Let the checkpoint write the file, then spoil it.
    h.pass(secs(5)).await;
    let path = StateDir::new(dir.path()).graph_path(&ConversationKey::new(AGENT, ChatId(5)));
    std::fs::write(&path, "not a graph")?;
    h.pass(secs(3 * 3600)).await;
    assert_eq!(h.sends_to(ChatId(5)), ["now"]);
    assert!(!path.exists(), "the unreadable file is moved aside");
    assert!(
        logs.text().contains("moved to quarantine"),
        "{}",
        logs.text()
    );
    assert_eq!(h.handle.status().graphs, 0);
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_crash_while_a_graph_is_dormant_loses_nothing_and_sends_nothing_twice() -> TestResult {
    let dir = tempfile::tempdir()?;
    let h = asleep(dir.path()).await;
    let at = h.shared_clock.now();
    let telegram = h.telegram.clone();
    // Killed where it stands: the dormant graph's state is only what reached the disk.
    h.crash().await;

    let mut h = Harness::start_at(dir.path(), now_and_later(), config(), &[dm(5)], at);
    h.started().await;
    assert_eq!(
        h.handle.status().dormant,
        1,
        "read back from disk, out of RAM again"
    );
    h.pass(secs(3 * 3600)).await;
    assert_eq!(
        h.sends_to(ChatId(5)),
        ["later"],
        "the second run sends the rest once"
    );
    assert_eq!(
        telegram
            .actions()
            .iter()
            .filter(|r| matches!(r.action, personad::adapters::memory::Action::Send { .. }))
            .count(),
        1,
        "the first run sent \"now\" once"
    );
    h.stop().await?;
    Ok(())
}
