//! A plan held for the owner (draft mode), as operations on its graph: which tasks a draft
//! is about ([`consequential`]), the text the owner reads ([`render`]), and the owner's own
//! text put in place of the plan's ([`apply_edit`]). The vocabulary of draft mode (modes,
//! timeouts, the owner's reply) is `core::approval`, which knows nothing of graphs. Pure: the
//! `received` handler builds drafts with it, the scheduler applies the owner's edit.

use crate::core::graph::{Task, TaskGraph, TaskKind, TaskSpec, TaskStatus};

/// Kinds a draft is about: what is done in the owner's name.
pub fn consequential(kind: TaskKind) -> bool {
    matches!(
        kind,
        TaskKind::Send
            | TaskKind::Sticker
            | TaskKind::Voice
            | TaskKind::SendMedia
            | TaskKind::React
            | TaskKind::Block
            | TaskKind::Unblock
            | TaskKind::ClearConversation
    )
}

/// The draft the owner reads: the chat, the message the plan answers, then each action of
/// the plan, numbered.
pub fn render(chat: &str, answers: Option<(&str, &str)>, tasks: &[Task]) -> String {
    let mut out = format!("in {chat}");
    if let Some((who, text)) = answers {
        let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let cut: String = one.chars().take(200).collect();
        let more = if cut.len() < one.len() { "…" } else { "" };
        out.push_str(&format!(", answering {who}: \"{cut}{more}\""));
    }
    let mut n = 0;
    for t in tasks.iter().filter(|t| consequential(t.kind())) {
        n += 1;
        let what = match &t.spec {
            TaskSpec::Send { text, .. } => format!("send: {text}"),
            TaskSpec::Voice { text, .. } => format!("voice note: {text}"),
            other => format!("{}: {}", other.kind(), other.summary()),
        };
        out.push_str(&format!("\n{n}. {}", what.trim_end()));
    }
    out
}

/// Applies the owner's edit to a plan: the first text the plan sends becomes `text`; its
/// other texts go, each with the typing pauses that led up to it. A plan without a text (a
/// reaction, a sticker) gets the owner's text as a reply right after the draft.
pub fn apply_edit(graph: &mut TaskGraph, draft_id: &str, text: &str) {
    let sends: Vec<String> = graph
        .tasks
        .iter()
        .filter(|t| t.kind() == TaskKind::Send && t.status == TaskStatus::Pending)
        .map(|t| t.id.clone())
        .collect();
    let Some((first, rest)) = sends.split_first() else {
        let reply_to = graph.tasks.iter().find_map(|t| match &t.spec {
            TaskSpec::Draft { answers, .. } => *answers,
            _ => None,
        });
        let now = graph
            .task(draft_id)
            .map_or(graph.created_at, |t| t.updated_at);
        let mut send = Task::new(TaskSpec::send(text, reply_to), now);
        send.depends_on = vec![draft_id.to_string()];
        // Whatever followed the draft now follows the send.
        let send_id = send.id.clone();
        for t in &mut graph.tasks {
            for d in &mut t.depends_on {
                if d == draft_id {
                    *d = send_id.clone();
                }
            }
        }
        graph.tasks.push(send);
        return;
    };
    for t in &mut graph.tasks {
        if t.id == *first
            && let TaskSpec::Send { text: old, .. } = &mut t.spec
        {
            *old = text.to_string();
        }
    }
    for id in rest {
        // The typing pauses right before a dropped text go with it.
        let mut doomed = vec![id.clone()];
        let mut at = id.clone();
        while let Some(prev) = graph
            .task(&at)
            .and_then(|t| t.depends_on.first().cloned())
            .filter(|p| graph.task(p).is_some_and(|t| t.kind() == TaskKind::Wait))
        {
            doomed.push(prev.clone());
            at = prev;
        }
        for d in doomed {
            remove_task(graph, &d);
        }
    }
}

/// Takes a task out of a chain: whatever depended on it depends on its dependencies.
fn remove_task(graph: &mut TaskGraph, id: &str) {
    let Some(pos) = graph.tasks.iter().position(|t| t.id == id) else {
        return;
    };
    let gone = graph.tasks.remove(pos);
    for t in &mut graph.tasks {
        if let Some(i) = t.depends_on.iter().position(|d| d == id) {
            t.depends_on.remove(i);
            for d in &gone.depends_on {
                if !t.depends_on.contains(d) {
                    t.depends_on.push(d.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::{Chat, ChatId, ChatKind, MessageId};

    fn at() -> jiff::Timestamp {
        jiff::Timestamp::UNIX_EPOCH
    }

    fn plan(texts: &[&str]) -> (TaskGraph, String) {
        let chat = Chat {
            id: ChatId(5),
            kind: ChatKind::Direct,
            title: "Ann".into(),
        };
        let draft = Task::new(
            TaskSpec::Draft {
                answers: Some(MessageId(3)),
                draft: String::new(),
                idempotency_key: crate::core::graph::IdempotencyKey(1),
                timeout_secs: 60,
                on_timeout: crate::core::approval::OnTimeout::Drop,
                posted: None,
                decision: None,
            },
            at(),
        );
        let draft_id = draft.id.clone();
        let mut tasks = vec![draft];
        for t in texts {
            tasks.push(Task::new(TaskSpec::wait(0.0, true), at()));
            tasks.push(Task::new(TaskSpec::send(*t, None), at()));
        }
        tasks.push(Task::new(
            TaskSpec::React {
                message_id: MessageId(3),
                emoji: "👍".into(),
            },
            at(),
        ));
        (TaskGraph::with_tasks("a", chat, at(), tasks), draft_id)
    }

    fn texts(g: &TaskGraph) -> Vec<String> {
        g.tasks
            .iter()
            .filter_map(|t| match &t.spec {
                TaskSpec::Send { text, .. } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    /// An edit replaces the first text and drops the others with their typing pauses; the chain
    /// stays whole (the reaction still follows) and valid.
    #[test]
    fn an_edit_sends_the_owners_text_once_and_keeps_the_chain_whole() {
        let (mut g, draft) = plan(&["one", "two", "three"]);
        apply_edit(&mut g, &draft, "mine");
        assert_eq!(texts(&g), ["mine"]);
        assert_eq!(
            g.tasks
                .iter()
                .filter(|t| t.kind() == TaskKind::Wait)
                .count(),
            1
        );
        assert!(g.validate().is_ok());
        let react = g.tasks.iter().find(|t| t.kind() == TaskKind::React);
        let send = g.tasks.iter().find(|t| t.kind() == TaskKind::Send);
        assert_eq!(
            react.map(|t| t.depends_on.clone()),
            send.map(|t| vec![t.id.clone()])
        );
        // A plan with no text (a reaction only) gets the owner's text as a reply after the draft.
        let (mut g, draft) = plan(&[]);
        apply_edit(&mut g, &draft, "hi");
        assert_eq!(texts(&g), ["hi"]);
        assert!(g.validate().is_ok());
        let send = g.tasks.iter().find(|t| t.kind() == TaskKind::Send);
        assert_eq!(
            send.map(|t| t.depends_on.clone()),
            Some(vec![draft.clone()])
        );
        assert_eq!(send.and_then(|t| t.spec.reply_to()), Some(MessageId(3)));
    }

    #[test]
    fn a_draft_lists_the_plan_numbered() {
        let (g, _) = plan(&["hello there"]);
        let text = render("Ann", Some(("Ann", "hi   you")), &g.tasks);
        assert_eq!(
            text,
            "in Ann, answering Ann: \"hi you\"\n1. send: hello there\n2. react: 👍 on #3"
        );
    }
}
