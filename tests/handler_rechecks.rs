//! Handlers re-check what they depend on at the moment they act, not only when the plan was
//! made: a saved clear-conversation task runs only for a persona allowed to clear, and block,
//! unblock and clear never act in a group, whatever the saved graph says the chat is.

mod common;

use common::*;
use personad::adapters::memory::Action as Did;
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::{Task, TaskGraph, TaskSpec, TaskStatus};
use personad::core::model::{Chat, ChatKind};

/// Saves a graph for `chat` (as the graph file says it is) whose received task is done and
/// whose next task is `spec`.
fn save_plan(dir: &std::path::Path, chat: Chat, spec: TaskSpec) -> TestResult {
    let now = t0();
    let mut g = TaskGraph::with_received(AGENT, chat, now, None, now);
    g.tasks[0].status = TaskStatus::Done;
    let first = g.tasks[0].id.clone();
    g.append_chain(&first, vec![Task::new(spec, now)]);
    GraphStore::new(StateDir::new(dir)).save(&g)?;
    Ok(())
}

fn cleared_or_blocked(h: &Harness) -> usize {
    h.telegram
        .actions()
        .into_iter()
        .filter(|r| matches!(r.action, Did::Clear { .. } | Did::Block { .. }))
        .count()
}

/// For each clear: whether it deleted the history for the other side too.
fn clears(h: &Harness) -> Vec<bool> {
    h.telegram
        .actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Did::Clear { for_both_sides, .. } => Some(for_both_sides),
            _ => None,
        })
        .collect()
}

async fn run_saved(
    persona: personad::core::persona::Persona,
    chat: &Chat,
    saved_as: Chat,
    spec: TaskSpec,
) -> Result<(usize, Vec<bool>), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    save_plan(dir.path(), saved_as, spec)?;
    let mut h = Harness::start_as(
        persona,
        dir.path(),
        |_| std::sync::Arc::new(reply_with("unused")),
        config(),
        std::slice::from_ref(chat),
        None,
        None,
    );
    h.settle().await;
    let n = cleared_or_blocked(&h);
    let cleared = clears(&h);
    assert!(
        common::files_below(&dir.path().join("graphs")).is_empty(),
        "the refused task completes; its graph is finished"
    );
    drop(h.stop().await?);
    Ok((n, cleared))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_clear_conversation_runs_only_for_a_persona_allowed_to_clear() -> TestResult {
    let chat = dm(51);
    let refused = run_saved(
        persona(AGENT),
        &chat,
        chat.clone(),
        TaskSpec::ClearConversation,
    )
    .await?
    .0;
    assert_eq!(refused, 0, "no Allow Clear Conversation: nothing deleted");
    let allowed = persona_with(AGENT, "# Allow Clear Conversation\ntrue\n");
    let done = run_saved(allowed, &chat, chat.clone(), TaskSpec::ClearConversation)
        .await?
        .0;
    assert_eq!(done, 1, "with the permission the history is cleared");
    Ok(())
}

/// `# Allow Clear Conversation` with `true` deletes the history for both sides (revoke);
/// with `mine`, for this account only.
#[tokio::test]
async fn a_clear_deletes_for_both_sides_unless_the_persona_says_mine() -> TestResult {
    let chat = dm(53);
    for (value, both) in [("true", true), ("mine", false)] {
        let persona = persona_with(AGENT, &format!("# Allow Clear Conversation\n{value}\n"));
        let (n, cleared) =
            run_saved(persona, &chat, chat.clone(), TaskSpec::ClearConversation).await?;
        assert_eq!(n, 1, "{value}: cleared");
        assert_eq!(cleared, vec![both], "{value}");
    }
    Ok(())
}

/// A saved block or unblock runs only while the persona allows it: `# Allow Block` false
/// (set after the plan was made) refuses it.
#[tokio::test]
async fn a_saved_block_runs_only_while_the_persona_allows_blocking() -> TestResult {
    let chat = dm(54);
    for spec in [TaskSpec::Block, TaskSpec::Unblock] {
        let (n, _) = run_saved(persona(AGENT), &chat, chat.clone(), spec.clone()).await?;
        assert_eq!(
            n,
            usize::from(spec == TaskSpec::Block),
            "allowed by default"
        );
        let off = persona_with(AGENT, "# Allow Block\nfalse\n");
        let (n, _) = run_saved(off, &chat, chat.clone(), spec).await?;
        assert_eq!(n, 0, "refused when the persona turns blocking off");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_saved_for_a_group_is_refused_even_if_the_file_calls_it_direct() -> TestResult {
    let real = group(-52);
    let forged = Chat {
        kind: ChatKind::Direct,
        ..real.clone()
    };
    let n = run_saved(persona(AGENT), &real, forged.clone(), TaskSpec::Block)
        .await?
        .0;
    assert_eq!(n, 0, "no block in a group");
    let allowed = persona_with(AGENT, "# Allow Clear Conversation\ntrue\n");
    let n = run_saved(allowed, &real, forged, TaskSpec::ClearConversation)
        .await?
        .0;
    assert_eq!(n, 0, "no clear in a group");
    Ok(())
}
