//! Draft mode end to end on `run --telegram memory`, steered as an owner would: messages come
//! in through `personad ctl say`, the owner answers drafts by replying to them in Saved
//! Messages (`ctl say --chat me --reply-to ID`) or with `ctl approve` / `ctl reject`, and the
//! tests read what each chat's transcript holds. The echo planner answers `Tess heard: TEXT`.

use std::time::Duration;

use personad::adapters::store::{GraphStore, StateDir};
use personad::core::graph::{TaskKind, TaskStatus};

mod common;
use common::daemon::*;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const WAIT: Duration = Duration::from_secs(15);

/// Tess, with drafts for people she has not written to yet.
fn tess(extra: &str) -> String {
    persona(
        "Tess",
        "+15550100042",
        &format!("# Approval\nnew-contacts\n\n{extra}"),
    )
}

/// The newest draft posted to the owner for the chat titled `title`: its message id and text.
fn draft_for(s: &Scratch, title: &str, skip: usize) -> Option<(i64, String)> {
    drafts_in(s, "Saved Messages", title).into_iter().nth(skip)
}

/// The drafts for `title` posted in the chat titled `place`: message id and text.
fn drafts_in(s: &Scratch, place: &str, title: &str) -> Vec<(i64, String)> {
    messages(s, "Tess", place)
        .into_iter()
        .filter_map(|m| {
            let text = m["text"].as_str()?.to_string();
            (text.starts_with("personad: draft ") && text.contains(&format!(" in {title}")))
                .then(|| Some((m["id"].as_i64()?, text)))
                .flatten()
        })
        .collect()
}

/// Waits for the `n`-th (from 0) draft of `title`.
fn wait_draft(s: &Scratch, title: &str, n: usize) -> Result<(i64, String), String> {
    poll(WAIT, || draft_for(s, title, n))
        .ok_or_else(|| format!("no draft #{n} for {title}; log:\n{}", s.log_text()))
}

/// What Tess wrote in the chat titled `title`.
fn sent(s: &Scratch, title: &str) -> Vec<String> {
    common::daemon::sent(s, "Tess", title)
}

/// The owner replies `text` to message `id` in Saved Messages.
fn reply(s: &Scratch, id: i64, text: &str) -> Result<(), std::io::Error> {
    ctl(
        s,
        &["say", "--chat", "me", "--reply-to", &id.to_string(), text],
    )
    .map(|_| ())
}

fn wait_sent(s: &Scratch, title: &str, text: &str) -> Result<(), String> {
    poll(WAIT, || {
        sent(s, title).iter().any(|t| t == text).then_some(())
    })
    .ok_or_else(|| format!("{title} never got {text:?}: {:?}", sent(s, title)))
}

/// A new contact's message makes a draft and no send; `ok` sends it exactly once; a reply
/// with other text sends that text; `no` drops the plan; a newer message voids a draft (its
/// replacement, after the draft gap, says what it replaces) and the replacement is approved
/// from the shell; a known contact is answered without a draft.
#[test]
fn drafts_wait_for_the_owner_and_each_answer_does_what_it_says() -> TestResult {
    let s = Scratch::new(&[("Tess.md", &tess(""))])?;
    let mut reaper = Reaper(Some(start(
        &s,
        &["--planner", "echo", "--draft-gap-secs", "1"],
        &[],
    )?));
    wait_up(&s)?;

    // A new contact: a draft, and nothing sent to her.
    let out = stdout(&ctl(
        &s,
        &["say", "--wait", "20", "--from", "Alice", "hello"],
    )?);
    assert!(out.contains("a draft waits for your approval"), "{out}");
    let (id, draft) = wait_draft(&s, "Alice", 0)?;
    assert!(
        draft.contains("answering Alice: \"hello\"")
            && draft.contains("1. send: Tess heard: hello"),
        "{draft}"
    );
    assert!(sent(&s, "Alice").is_empty(), "sent before approval");
    // `ok` sends it as planned, exactly once, even when said twice.
    reply(&s, id, "ok")?;
    wait_sent(&s, "Alice", "Tess heard: hello")?;
    reply(&s, id, "ok")?;
    poll(WAIT, || {
        texts(&s, "Tess", "Saved Messages")
            .iter()
            .any(|t| t.contains("approved: it goes out as planned"))
            .then_some(())
    })
    .ok_or("the owner was not told the draft went out")?;

    // An edit: the owner's text goes out instead of the plan's.
    ctl(&s, &["say", "--from", "Bob", "coming tonight?"])?;
    let (id, _) = wait_draft(&s, "Bob", 0)?;
    reply(&s, id, "Sure, see you at 8")?;
    wait_sent(&s, "Bob", "Sure, see you at 8")?;

    // `no`: nothing is sent, the plan is gone.
    ctl(&s, &["say", "--from", "Carol", "buy my course"])?;
    let (id, _) = wait_draft(&s, "Carol", 0)?;
    reply(&s, id, "no")?;
    let store = GraphStore::new(StateDir::new(s.state()));
    poll(WAIT, || {
        let files = store.scan().ok()?;
        (!files
            .iter()
            .any(|f| f.graph.as_ref().is_ok_and(|g| g.chat.title == "Carol")))
        .then_some(())
    })
    .ok_or("Carol's plan is still there")?;

    // A newer message voids the waiting draft; the new draft follows and says so.
    ctl(&s, &["say", "--from", "Dan", "one"])?;
    let (_, first) = wait_draft(&s, "Dan", 0)?;
    ctl(&s, &["say", "--from", "Dan", "two"])?;
    let (_, second) = wait_draft(&s, "Dan", 1)?;
    assert!(second.contains("Tess heard: two"), "{second}");
    let first_id = first
        .split_whitespace()
        .nth(2)
        .ok_or("no id in the first draft")?;
    assert!(
        second.contains(&format!("(replaces draft {first_id}: Dan wrote again")),
        "{second}"
    );
    // The shell sees the waiting draft and approves it by a prefix of its id.
    let listed = stdout(&ctl(&s, &["drafts"])?);
    let draft_id = listed
        .split_whitespace()
        .find(|w| w.starts_with("draft-"))
        .ok_or(format!("no draft listed: {listed}"))?
        .to_string();
    assert!(listed.contains("Tess heard: two"), "{listed}");
    let prefix = &draft_id["draft-".len().."draft-".len() + 6];
    let out = stdout(&ctl(&s, &["approve", prefix])?);
    assert!(out.contains("approved"), "{out}");
    wait_sent(&s, "Dan", "Tess heard: two")?;
    // Applied once: the approved draft no longer waits.
    let out = ctl(&s, &["reject", prefix])?;
    assert!(!out.status.success(), "{}", stdout(&out));

    // Alice is a contact now: answered at once, no second draft.
    ctl(&s, &["say", "--from", "Alice", "again"])?;
    wait_sent(&s, "Alice", "Tess heard: again")?;
    assert!(
        draft_for(&s, "Alice", 1).is_none(),
        "a known contact got a draft"
    );

    // Every answer went out once.
    stop_daemon(&mut reaper)?;
    assert_eq!(
        sent(&s, "Alice"),
        ["Tess heard: hello", "Tess heard: again"]
    );
    assert_eq!(sent(&s, "Bob"), ["Sure, see you at 8"]);
    assert!(sent(&s, "Carol").is_empty());
    assert_eq!(sent(&s, "Dan"), ["Tess heard: two"]);
    Ok(())
}

/// A draft too long for one message (a long answer to a long message) reaches the owner in
/// several messages, each within Telegram's limit (the in-memory Telegram refuses a longer
/// one, as Telegram does: before, the plan was dropped with no draft at all); `ok` in reply
/// to the last one, which says to reply to it, sends the whole answer.
#[test]
fn a_long_draft_reaches_the_owner_in_several_messages() -> TestResult {
    let s = Scratch::new(&[("Tess.md", &tess(""))])?;
    let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
    wait_up(&s)?;
    let long: String = (0..80)
        .map(|i| format!("Line {i} of a long story, told at length to see what a draft does."))
        .collect::<Vec<_>>()
        .join("\n\n");
    ctl(&s, &["say", "--from", "Alice", &long])?;
    let (first, head) = wait_draft(&s, "Alice", 0)?;
    assert!(head.contains("1. send: Tess heard: Line 0"), "{head}");
    let parts = poll(WAIT, || {
        let parts: Vec<(i64, String)> = messages(&s, "Tess", "Saved Messages")
            .into_iter()
            .filter_map(|m| Some((m["id"].as_i64()?, m["text"].as_str()?.to_string())))
            .filter(|(id, _)| *id >= first)
            .collect();
        parts
            .iter()
            .any(|(_, t)| t.contains("Reply to this message"))
            .then_some(parts)
    })
    .ok_or_else(|| format!("the draft's last part never came; log:\n{}", s.log_text()))?;
    assert!(parts.len() >= 2, "one message: {parts:?}");
    assert!(
        parts.iter().all(|(_, t)| t.encode_utf16().count() <= 4096),
        "a part over Telegram's limit"
    );
    let all: String = parts.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        all.contains("Line 79 of a long story"),
        "the draft lost its end"
    );
    let (last, _) = parts.last().ok_or("no parts")?;
    reply(&s, *last, "ok")?;
    poll(WAIT, || {
        sent(&s, "Alice")
            .concat()
            .contains("Line 79 of a long story")
            .then_some(())
    })
    .ok_or_else(|| format!("Alice never got the answer: {:?}", sent(&s, "Alice")))?;
    stop_daemon(&mut reaper)?;
    let answer = sent(&s, "Alice");
    assert!(
        answer.len() >= 2,
        "{} messages: {:?}",
        answer.len(),
        answer.iter().map(|a| a.chars().count()).collect::<Vec<_>>()
    );
    assert!(answer[0].starts_with("Tess heard: Line 0"), "{}", answer[0]);
    Ok(())
}

/// With `# Admin Chat` naming a group, drafts go there (and `ctl say` shows the draft it
/// posted there), and the owner's reply there decides them; a stranger's "ok" there decides
/// nothing. (Before, `--admin-chat` alone sent drafts there: see the next test.)
#[test]
fn with_a_persona_admin_chat_drafts_are_posted_and_answered_there() -> TestResult {
    let ops = (-personad::adapters::memory::user_id_for("Ops")).to_string();
    let s = Scratch::new(&[("Tess.md", &tess(&format!("# Admin Chat\n{ops}\n\n")))])?;
    let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
    wait_up(&s)?;
    // The admin group exists (someone wrote there).
    ctl(
        &s,
        &["say", "--group", "Ops", "--from", "Mallory", "morning"],
    )?;
    let out = stdout(&ctl(
        &s,
        &["say", "--wait", "20", "--from", "Alice", "hello"],
    )?);
    assert!(
        out.contains(&format!(
            "a draft waits for your approval in the admin chat {ops}"
        )) && out.contains("1. send: Tess heard: hello"),
        "{out}"
    );
    let posted = poll(WAIT, || drafts_in(&s, "Ops", "Alice").first().map(|d| d.0))
        .ok_or_else(|| format!("no draft in the admin chat; log:\n{}", s.log_text()))?;
    assert!(
        draft_for(&s, "Alice", 0).is_none(),
        "posted to Saved Messages too"
    );
    let id = posted.to_string();
    // A member's reply is not the owner's: after it (`say` waits until it is handled), the
    // draft still waits.
    ctl(
        &s,
        &[
            "say",
            "--wait",
            "5",
            "--group",
            "Ops",
            "--from",
            "Mallory",
            "--reply-to",
            &id,
            "ok",
        ],
    )?;
    let listed = stdout(&ctl(&s, &["drafts"])?);
    assert!(listed.contains("Tess heard: hello"), "{listed}");
    assert!(sent(&s, "Alice").is_empty());
    ctl(
        &s,
        &[
            "say",
            "--group",
            "Ops",
            "--from",
            "me",
            "--reply-to",
            &id,
            "ok",
        ],
    )?;
    wait_sent(&s, "Alice", "Tess heard: hello")?;
    stop_daemon(&mut reaper)?;
    assert_eq!(sent(&s, "Alice"), ["Tess heard: hello"]);
    Ok(())
}

/// `--admin-chat` without the persona naming that chat: the owner's commands are accepted
/// there, but drafts (private text) and command answers go to Saved Messages, never to the
/// group, whose members would read them; `ctl say` shows the draft in Saved Messages.
#[test]
fn with_only_an_admin_chat_flag_drafts_and_answers_go_to_saved_messages() -> TestResult {
    let s = Scratch::new(&[("Tess.md", &tess(""))])?;
    let ops = (-personad::adapters::memory::user_id_for("Ops")).to_string();
    let mut reaper = Reaper(Some(start(
        &s,
        &["--planner", "echo", "--admin-chat", &ops],
        &[],
    )?));
    wait_up(&s)?;
    ctl(
        &s,
        &["say", "--group", "Ops", "--from", "Mallory", "morning"],
    )?;
    let out = stdout(&ctl(
        &s,
        &["say", "--wait", "20", "--from", "Alice", "my secret"],
    )?);
    assert!(
        out.contains("a draft waits for your approval in Saved Messages"),
        "{out}"
    );
    let (id, _) = wait_draft(&s, "Alice", 0)?;
    // The owner commands in the group: carried out, answered in Saved Messages.
    ctl(&s, &["say", "--group", "Ops", "--from", "me", "/drafts"])?;
    poll(WAIT, || {
        texts(&s, "Tess", "Saved Messages")
            .iter()
            .any(|t| {
                t.starts_with("personad: ")
                    && t.contains("Tess heard: my secret")
                    && !t.starts_with("personad: draft ")
            })
            .then_some(())
    })
    .ok_or_else(|| format!("no answer in Saved Messages; log:\n{}", s.log_text()))?;
    reply(&s, id, "ok")?;
    wait_sent(&s, "Alice", "Tess heard: my secret")?;
    stop_daemon(&mut reaper)?;
    let group = texts(&s, "Tess", "Ops");
    assert!(
        !group
            .iter()
            .any(|t| t.contains("my secret") || t.starts_with("personad:")),
        "the group read it: {group:?}"
    );
    assert!(
        s.log_text().contains("admin_chat_commands_only"),
        "no warning about --admin-chat"
    );
    Ok(())
}

/// kill -9 after the owner's `ok` is durable and before the send: the next start sends the
/// answer once, and a third start sends nothing more.
#[test]
fn a_kill_9_between_the_owners_ok_and_the_send_sends_once() -> TestResult {
    // A long pause before the first message leaves time to kill the daemon in between.
    let s = Scratch::new(&[("Tess.md", &tess("# Start Typing Delay\n4\n\n"))])?;
    let mut reaper = Reaper(Some(start(&s, &["--planner", "echo"], &[])?));
    wait_up(&s)?;
    ctl(&s, &["say", "--from", "Eve", "hi"])?;
    let (id, _) = wait_draft(&s, "Eve", 0)?;
    reply(&s, id, "👍")?;
    let store = GraphStore::new(StateDir::new(s.state()));
    poll(WAIT, || {
        let files = store.scan().ok()?;
        files.iter().find_map(|f| {
            let g = f.graph.as_ref().ok()?;
            let approved = g
                .tasks
                .iter()
                .any(|t| t.kind() == TaskKind::Draft && t.status == TaskStatus::Done);
            let unsent = g
                .tasks
                .iter()
                .any(|t| t.kind() == TaskKind::Send && t.status == TaskStatus::Pending);
            (g.chat.title == "Eve" && approved && unsent).then_some(())
        })
    })
    .ok_or("the approval never reached the graph file")?;
    let child = reaper.0.as_mut().ok_or("no child")?;
    signal(child, "-KILL")?;
    wait_exit(child, Duration::from_secs(10)).ok_or("no exit")?;
    assert!(sent(&s, "Eve").is_empty(), "sent before the kill");
    reaper.0 = Some(start(&s, &["--planner", "echo"], &[])?);
    wait_up(&s)?;
    wait_sent(&s, "Eve", "Tess heard: hi")?;
    stop_daemon(&mut reaper)?;
    reaper.0 = Some(start(&s, &["--planner", "echo"], &[])?);
    let status = wait_up(&s)?;
    assert!(!status.contains("Eve"), "a plan is left for Eve: {status}");
    stop_daemon(&mut reaper)?;
    assert_eq!(sent(&s, "Eve"), ["Tess heard: hi"]);
    assert_eq!(
        draft_for(&s, "Eve", 1),
        None,
        "the approved draft was posted again"
    );
    Ok(())
}

/// The playground shows drafts as messages to the owner (`to_owner`), and a `from: "owner"`
/// line replying to one decides it: the plan then runs in the session's chat.
#[tokio::test]
async fn in_the_playground_the_owner_answers_a_draft_with_a_reply_line() -> TestResult {
    let agents = tempfile::tempdir()?;
    std::fs::write(agents.path().join("Tess.md"), tess(""))?;
    let state = tempfile::tempdir()?;
    let input = [
        serde_json::json!({"text": "hello"}),
        serde_json::json!({"from": "owner", "reply_to": 1, "text": "Hey you", "after_ms": 60_000}),
    ]
    .iter()
    .map(|v| format!("{v}\n"))
    .collect::<String>();
    let cmd = common::playground(
        agents.path(),
        state.path(),
        &[
            "--agent",
            "Tess",
            "--user",
            "Ola",
            "--jsonl",
            "--fast",
            "--planner",
            "echo",
        ],
    );
    let out = common::run_to_end(cmd, input).await?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = common::jsonl(&out.stdout);
    let draft = ev
        .iter()
        .find(|e| {
            e["event"] == "send"
                && e["to_owner"] == true
                && e["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("personad: draft "))
        })
        .ok_or(format!("no draft: {ev:?}"))?;
    assert_eq!(draft["id"], 1, "{draft}");
    let answers: Vec<&str> = ev
        .iter()
        .filter(|e| e["event"] == "send" && e["to_owner"] != true)
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(answers, ["Hey you"], "{ev:?}");
    assert!(
        ev.iter().any(|e| e["event"] == "draft_edited"),
        "the decision is an event: {ev:?}"
    );
    Ok(())
}

mod on_virtual_time {
    //! Draft timeouts on the harness's virtual clock: the runtime, the in-memory Telegram and
    //! a scripted planner in one process.

    use std::sync::Arc;

    use personad::core::approval::Decision;
    use personad::core::graph::{TaskSpec, TaskStatus};
    use personad::core::model::{ChatId, MessageId};
    use personad::core::scheduler::{DraftRef, OwnerReply, OwnerRequest};
    use personad::ports::planner::SharedPlanner;
    use personad::ports::telegram::Telegram;

    use super::common::*;

    fn harness(dir: &std::path::Path, timeout: &str) -> Harness {
        let persona = persona_with(
            AGENT,
            &format!("# Approval\nall\n\n# Approval Timeout\n{timeout}\n"),
        );
        let planner: SharedPlanner = Arc::new(reply_with("sure"));
        Harness::start_persona_at(persona, dir, move |_| planner, config(), &[dm(7)], t0())
    }

    /// Texts in the owner's Saved Messages.
    fn owner_texts(h: &Harness) -> Vec<String> {
        h.telegram
            .transcript(ChatId(h.telegram.self_id()))
            .into_iter()
            .map(|m| m.text)
            .collect()
    }

    fn sent_to_7(h: &Harness) -> usize {
        h.sends().iter().filter(|(c, _, _)| *c == ChatId(7)).count()
    }

    /// Tess answers the newest message of the history: `re: TEXT`.
    fn echo_newest() -> ScriptedPlanner {
        ScriptedPlanner::new(|req, _| {
            let newest = req
                .history
                .last()
                .map(|m| m.text.clone())
                .unwrap_or_default();
            Ok(vec![send(&format!("re: {newest}"))])
        })
    }

    fn drafting(dir: &std::path::Path, start: jiff::Timestamp) -> Harness {
        let persona = persona_with(AGENT, "# Approval\nall\n\n# Approval Timeout\n2h\n");
        let planner: SharedPlanner = Arc::new(echo_newest());
        Harness::start_persona_at(persona, dir, move |_| planner, config(), &[dm(7)], start)
    }

    /// The draft posts in the owner's Saved Messages: message id and text.
    fn draft_posts(h: &Harness) -> Vec<(MessageId, String)> {
        h.telegram
            .transcript(ChatId(h.telegram.self_id()))
            .into_iter()
            .filter(|m| m.text.starts_with("personad: draft ") && m.text.contains("Reply to"))
            .map(|m| (m.id, m.text))
            .collect()
    }

    /// The drafts that wait in the runtime's plans (posted or not yet).
    async fn waiting_drafts(h: &Harness) -> usize {
        match h
            .handle
            .owner(AGENT, OwnerRequest::Plans { chat: None })
            .await
        {
            Some(OwnerReply::Plans(plans)) => plans
                .iter()
                .flat_map(|g| &g.tasks)
                .filter(|t| {
                    t.status != TaskStatus::Done
                        && matches!(t.spec, TaskSpec::Draft { decision: None, .. })
                })
                .count(),
            _ => usize::MAX,
        }
    }

    /// A stranger's 10 quick messages (5 s apart) with `# Approval all`: one waiting draft for
    /// the chat all along, and the owner's Saved Messages get two draft posts (the first
    /// message's, then, once the 3-minute draft gap since it has passed, one replacement that
    /// names the draft it replaces and answers the newest message), no void notice per
    /// message. The owner's `ok` on the replaced post decides nothing (and says so); `ok` on
    /// the replacement sends one answer, to the newest message.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_of_messages_makes_one_waiting_draft_and_one_replacement_post() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut h = drafting(dir.path(), t0());
        h.started().await;
        for i in 1..=10 {
            h.say(&dm(7), "Bob", &format!("message {i}")).await;
            h.pass(secs(5)).await;
            assert_eq!(waiting_drafts(&h).await, 1, "after message {i}");
        }
        let posts = draft_posts(&h);
        assert_eq!(posts.len(), 1, "a post per message: {posts:?}");
        let (first, text) = posts[0].clone();
        assert!(text.contains("re: message 1"), "{text}");
        assert!(
            !owner_texts(&h).iter().any(|t| t.contains("is void")),
            "{:?}",
            owner_texts(&h)
        );
        // The gap since the first post passes: one replacement, for the newest message.
        h.pass(secs(3 * 60)).await;
        let posts = draft_posts(&h);
        assert_eq!(posts.len(), 2, "{posts:?}");
        let (second, text) = posts[1].clone();
        let first_id = posts[0].1.split_whitespace().nth(2).ok_or("no id")?;
        assert!(
            text.contains("re: message 10")
                && text.contains(&format!("(replaces draft {first_id}: user7 wrote again")),
            "{text}"
        );
        assert_eq!(waiting_drafts(&h).await, 1);
        // `ok` on the replaced post: nothing goes out, the owner is told why.
        let own = ChatId(h.telegram.self_id());
        let reply = |message| DraftRef::Reply { chat: own, message };
        h.handle.decide_draft(AGENT, reply(first), Decision::Send);
        h.pass(secs(10)).await;
        assert_eq!(sent_to_7(&h), 0, "a replaced draft was approved");
        assert!(
            owner_texts(&h)
                .iter()
                .any(|t| t.contains(&format!("draft {first_id} for user7 was replaced"))),
            "{:?}",
            owner_texts(&h)
        );
        h.handle.decide_draft(AGENT, reply(second), Decision::Send);
        h.pass(secs(10)).await;
        h.settle().await;
        assert_eq!(h.sends_to(ChatId(7)), ["re: message 10"]);
        assert_eq!(draft_posts(&h).len(), 2);
        assert_eq!(waiting_drafts(&h).await, 0);
        h.stop().await?;
        Ok(())
    }

    /// Pausing a chat with a waiting draft holds it: the draft stays (nothing is voided or
    /// sent while paused), and after resuming the owner's `ok` sends it, once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paused_chats_draft_waits_and_is_sent_after_resuming() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut h = drafting(dir.path(), t0());
        h.started().await;
        h.say(&dm(7), "Bob", "are you there").await;
        h.pass(secs(10)).await;
        let (post, _) = draft_posts(&h).pop().ok_or("no draft posted")?;
        let pause = personad::core::agent_state::Pause {
            since: t0(),
            until: None,
        };
        let reply = h
            .handle
            .owner(
                AGENT,
                OwnerRequest::Pause {
                    chat: Some(ChatId(7)),
                    pause,
                },
            )
            .await;
        assert_eq!(
            reply,
            Some(OwnerReply::Done {
                dropped: vec![],
                held: vec![ChatId(7)]
            })
        );
        h.pass(secs(60)).await;
        assert_eq!(waiting_drafts(&h).await, 1, "the pause dropped the draft");
        assert!(
            !owner_texts(&h).iter().any(|t| t.contains("void")),
            "{:?}",
            owner_texts(&h)
        );
        h.handle
            .owner(
                AGENT,
                OwnerRequest::Resume {
                    chat: Some(ChatId(7)),
                },
            )
            .await;
        let own = ChatId(h.telegram.self_id());
        h.handle.decide_draft(
            AGENT,
            DraftRef::Reply {
                chat: own,
                message: post,
            },
            Decision::Send,
        );
        h.pass(secs(10)).await;
        h.settle().await;
        assert_eq!(h.sends_to(ChatId(7)), ["re: are you there"]);
        assert_eq!(waiting_drafts(&h).await, 0);
        h.stop().await?;
        Ok(())
    }

    /// A newer message voids the waiting draft, and the plan made for it does nothing in the
    /// owner's name (no draft): once that plan is over the owner is told the draft is void.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_voided_draft_with_no_replacement_is_said_void() -> TestResult {
        let dir = tempfile::tempdir()?;
        let persona = persona_with(AGENT, "# Approval\nall\n");
        let planner: SharedPlanner = Arc::new(ScriptedPlanner::new(|_, n| {
            Ok(if n == 0 {
                vec![send("hello")]
            } else {
                Vec::new()
            })
        }));
        let mut h = Harness::start_persona_at(
            persona,
            dir.path(),
            move |_| planner,
            config(),
            &[dm(7)],
            t0(),
        );
        h.started().await;
        h.say(&dm(7), "Bob", "hi").await;
        h.pass(secs(5)).await;
        let posts = draft_posts(&h);
        assert_eq!(posts.len(), 1, "{posts:?}");
        let id = posts[0]
            .1
            .split_whitespace()
            .nth(2)
            .ok_or("no id")?
            .to_string();
        h.say(&dm(7), "Bob", "never mind").await;
        h.pass(secs(10)).await;
        h.settle().await;
        assert!(
            owner_texts(&h)
                .iter()
                .any(|t| t.contains(&format!("draft {id} for user7 is void"))
                    && t.contains("no new draft followed")),
            "{:?}",
            owner_texts(&h)
        );
        assert_eq!(draft_posts(&h).len(), 1);
        assert_eq!(sent_to_7(&h), 0);
        h.stop().await?;
        Ok(())
    }

    /// A crash while the replacement draft waits for the gap loses nothing and posts nothing
    /// twice: after the restart it is still held until the gap since the first post, then
    /// posted once (naming the replaced draft); approved, it sends one answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_crash_while_the_replacement_waits_keeps_the_gap_and_one_draft() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut h = drafting(dir.path(), t0());
        h.started().await;
        for i in 1..=4 {
            h.say(&dm(7), "Bob", &format!("message {i}")).await;
            h.pass(secs(5)).await;
        }
        assert_eq!(draft_posts(&h).len(), 1);
        let at = h.shared_clock.now();
        h.crash().await;
        let mut h = drafting(dir.path(), at);
        h.started().await;
        h.pass(secs(60)).await;
        assert_eq!(
            draft_posts(&h).len(),
            1,
            "the replacement went out before the gap after the restart"
        );
        assert_eq!(waiting_drafts(&h).await, 1);
        h.pass(secs(3 * 60)).await;
        let posts = draft_posts(&h);
        assert_eq!(posts.len(), 2, "{posts:?}");
        assert!(
            posts[1].1.contains("re: message 4") && posts[1].1.contains("(replaces draft "),
            "{}",
            posts[1].1
        );
        let own = ChatId(h.telegram.self_id());
        h.handle.decide_draft(
            AGENT,
            DraftRef::Reply {
                chat: own,
                message: posts[1].0,
            },
            Decision::Send,
        );
        h.pass(secs(10)).await;
        h.settle().await;
        assert_eq!(h.sends_to(ChatId(7)), ["re: message 4"]);
        assert_eq!(draft_posts(&h).len(), 2);
        h.stop().await?;
        Ok(())
    }

    /// `then send`: unanswered for the timeout, the plan goes out as drafted (not a minute
    /// early), and the owner is told.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unanswered_draft_is_sent_at_its_timeout_when_so_configured() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut h = harness(dir.path(), "30m then send");
        h.started().await;
        h.say(&dm(7), "Bob", "hi").await;
        h.pass(secs(29 * 60)).await;
        assert_eq!(sent_to_7(&h), 0, "sent before the timeout");
        assert!(
            owner_texts(&h)
                .iter()
                .any(|t| t.starts_with("personad: draft ")),
            "{:?}",
            owner_texts(&h)
        );
        h.pass(secs(2 * 60)).await;
        assert_eq!(sent_to_7(&h), 1);
        assert!(
            owner_texts(&h)
                .iter()
                .any(|t| t.contains("not answered in time: carried out")),
            "{:?}",
            owner_texts(&h)
        );
        h.stop().await?;
        Ok(())
    }

    /// `later` gives the draft its whole timeout again; then, unanswered, it is dropped (the
    /// default) and the owner is told; nothing is ever sent.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn later_waits_again_and_the_default_drops_an_unanswered_draft() -> TestResult {
        let dir = tempfile::tempdir()?;
        let mut h = harness(dir.path(), "30m");
        h.started().await;
        h.say(&dm(7), "Bob", "hi").await;
        h.pass(secs(20 * 60)).await;
        let id = h
            .telegram
            .transcript(ChatId(h.telegram.self_id()))
            .into_iter()
            .find(|m| m.text.starts_with("personad: draft "))
            .map(|m| m.id)
            .ok_or("no draft")?;
        h.handle.decide_draft(
            AGENT,
            DraftRef::Reply {
                chat: ChatId(h.telegram.self_id()),
                message: id,
            },
            Decision::Later,
        );
        h.pass(secs(29 * 60)).await;
        assert!(
            !owner_texts(&h).iter().any(|t| t.contains("not answered")),
            "timed out although the owner said later: {:?}",
            owner_texts(&h)
        );
        h.pass(secs(2 * 60)).await;
        assert!(
            owner_texts(&h)
                .iter()
                .any(|t| t.contains("not answered in time: dropped")),
            "{:?}",
            owner_texts(&h)
        );
        h.settle().await;
        assert_eq!(sent_to_7(&h), 0);
        assert_eq!(h.handle.status().graphs, 0, "the plan is gone");
        h.stop().await?;
        Ok(())
    }
}
