use super::*;
use crate::core::model::{Chat, ChatKind};

fn at() -> jiff::Timestamp {
    jiff::Timestamp::UNIX_EPOCH
}

#[test]
fn modes_say_which_chats_wait() {
    use ApprovalMode::*;
    assert!(!Off.requires(true, false));
    assert!(NewContacts.requires(true, false));
    assert!(!NewContacts.requires(true, true), "a known contact");
    assert!(
        !NewContacts.requires(false, false),
        "groups are not contacts"
    );
    assert!(Groups.requires(false, true) && !Groups.requires(true, false));
    assert!(All.requires(true, true) && All.requires(false, true));
    assert_eq!(
        "New Contacts".parse::<ApprovalMode>().ok(),
        Some(NewContacts)
    );
    assert!("sometimes".parse::<ApprovalMode>().is_err());
}

#[test]
fn the_owners_reply_reads_as_a_decision() {
    assert_eq!(Decision::from_reply(" OK! "), Some(Decision::Send));
    assert_eq!(Decision::from_reply("👍"), Some(Decision::Send));
    assert_eq!(Decision::from_reply("👍\u{fe0f}"), Some(Decision::Send));
    assert_eq!(Decision::from_reply("no"), Some(Decision::Drop));
    assert_eq!(Decision::from_reply("👎"), Some(Decision::Drop));
    assert_eq!(Decision::from_reply("later"), Some(Decision::Later));
    assert_eq!(
        Decision::from_reply("Not tonight, sorry"),
        Some(Decision::Edit {
            text: "Not tonight, sorry".into()
        })
    );
    assert_eq!(Decision::from_reply("  "), None);
    // The usual ways of saying no never go out as text.
    for no in ["nope", "No thanks", "don't send", "Don’t send", "stop."] {
        assert_eq!(Decision::from_reply(no), Some(Decision::Drop), "{no}");
    }
    assert_eq!(Decision::from_reply("Ok 👍"), Some(Decision::Send));
    assert_eq!(
        Decision::from_reply("send: no"),
        Some(Decision::Edit { text: "no".into() })
    );
    assert_eq!(Decision::from_reply("edit:   "), None);
}

#[test]
fn timeouts_parse_with_what_happens_then() {
    assert_eq!(
        parse_timeout("30m").ok(),
        Some((Duration::from_secs(1800), OnTimeout::Drop))
    );
    assert_eq!(
        parse_timeout("2h, then send").ok(),
        Some((Duration::from_secs(7200), OnTimeout::Send))
    );
    assert!(parse_timeout("soon").is_err());
    assert!(parse_timeout("8d").is_err());
    assert!(parse_timeout("1h then shout").is_err());
}

#[test]
fn ids_match_whole_or_by_a_prefix_of_four_or_more() {
    let id = "draft-3f2a9c000001";
    assert!(matches_id(id, id));
    assert!(matches_id(id, "3f2a"));
    assert!(matches_id(id, "draft-3f2a9c"));
    assert!(!matches_id(id, "3f2"), "too short");
    assert!(!matches_id(id, "draft-"), "the prefix alone names no draft");
    assert!(!matches_id(id, "draft-3f2"));
    assert!(!matches_id(id, "3f2b"));
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
            on_timeout: OnTimeout::Drop,
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
