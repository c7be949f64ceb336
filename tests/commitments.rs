//! `intend` and `plan`, the original's commitments, through the real runtime, the real LLM
//! planner and a mock Gemini answering in the original's JSON task format: an intention made in
//! Alice's chat is shown in every chat's request (Bob's too), a plan made there only in
//! Alice's; deleting both by id takes them out of the next requests; both are kept as Markdown
//! beside memory, and `state memory` lists them.

mod common;

use common::gemini::*;
use common::{AGENT, Harness, TestResult, config};

/// Words only the intention holds.
const INTENTION: &str = "Ask Wendy about her rehearsal (a sea-otter costume)";
/// Words only the plan holds.
const PLAN: &str = "Suggest the lighthouse museum first";

#[tokio::test]
async fn an_intention_is_shown_everywhere_and_a_plan_only_in_its_chat_until_deleted() -> TestResult
{
    let (alice, bob) = (person("Alice"), person("Bob"));
    let server = common::gemini::answering(move |newest| {
        if newest.contains("weekend") {
            reply(&format!(
                r#"[{{"kind": "intend", "id": "intent-wendy", "content": "{INTENTION}"}},
                   {{"kind": "plan", "content": "{PLAN}"}},
                   {{"kind": "send", "text": "Let me think about it!"}}]"#
            ))
        } else {
            reply(r#"[{"kind": "send", "text": "Hi!"}]"#)
        }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let chats = [alice.clone(), bob.clone()];
    let mut h = Harness::start_with(dir.path(), planner(server.uri()), config(), &chats);
    h.started().await;
    h.say(&alice, "Alice", "any idea for the weekend?").await;
    h.settle().await;
    // The plan's generated id, read back from its file, so the test can delete it by id as
    // the model would after seeing it in its prompt.
    let plans = dir
        .path()
        .join(AGENT)
        .join("memory")
        .join("plans")
        .join(format!("{}.md", alice.id));
    let plan_file = std::fs::read_to_string(&plans)?;
    let plan_id = plan_file
        .lines()
        .find_map(|l| l.strip_prefix("## "))
        .ok_or("no plan in the file")?
        .to_string();
    assert!(plan_file.contains(PLAN), "{plan_file}");
    let intentions =
        std::fs::read_to_string(dir.path().join(AGENT).join("memory").join("intentions.md"))?;
    assert!(
        intentions.contains("## intent-wendy") && intentions.contains(INTENTION),
        "{intentions}"
    );

    h.say(&bob, "Bob", "hello there").await;
    h.settle().await;
    h.say(&alice, "Alice", "so?").await;
    h.settle().await;
    let seen = bodies(&server).await;
    let bob_body = seen
        .iter()
        .find(|b| b.contains("hello there"))
        .ok_or("no request for Bob")?;
    assert!(
        bob_body.contains(INTENTION),
        "Bob's request lacks the intention"
    );
    assert!(
        !bob_body.contains(PLAN),
        "Bob's request carries Alice's plan"
    );
    let alice_body = seen.last().ok_or("no request")?;
    assert!(
        alice_body.contains(INTENTION) && alice_body.contains(PLAN),
        "Alice's next request lacks her commitments: {alice_body}"
    );
    for (chat, text, _) in h.sends() {
        assert!(
            !text.contains(INTENTION) && !text.contains(PLAN),
            "chat {chat} got a commitment as a message: {text}"
        );
    }

    // The model deletes both by id (after a restart: they are kept on disk): the next
    // request shows neither.
    let plan_id_json = plan_id.clone();
    let server2 = common::gemini::answering(move |newest| {
        if newest.contains("all done") {
            reply(&format!(
                r#"[{{"kind": "intend", "id": "intent-wendy", "content": ""}},
                   {{"kind": "plan", "id": "{plan_id_json}", "content": ""}},
                   {{"kind": "send", "text": "Great."}}]"#
            ))
        } else {
            reply(r#"[{"kind": "send", "text": "Hi!"}]"#)
        }
    })
    .await;
    h.stop().await?;
    let mut h = Harness::start_with(dir.path(), planner(server2.uri()), config(), &chats);
    h.started().await;
    h.say(&alice, "Alice", "all done, thanks").await;
    h.settle().await;
    h.say(&alice, "Alice", "one more thing").await;
    h.settle().await;
    let last = bodies(&server2).await;
    let last = last.last().ok_or("no request")?;
    assert!(
        !last.contains(INTENTION) && !last.contains(PLAN),
        "deleted commitments still shown: {last}"
    );
    h.stop().await?;

    // `state memory` lists what is kept (made again to have something to list).
    let again = personad::core::facts::FactWrite {
        id: None,
        content: "Bring the atlas back to the library".into(),
    };
    let store = personad::adapters::store::facts::FileFacts::new(
        personad::adapters::store::layout::StateDir::new(dir.path()),
    );
    let source = personad::core::facts::Source {
        task: "intend-0123456789ab".into(),
        name: None,
        chat: alice.id,
        message: None,
        at: jiff::Timestamp::UNIX_EPOCH,
    };
    personad::ports::facts::FactStore::apply(
        &store,
        AGENT,
        personad::core::facts::FactScope::Intentions,
        &again,
        &source,
    )??;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut cmd);
    let out = cmd
        .arg("--state")
        .arg(dir.path())
        .args(["state", "memory", AGENT])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[intent-0123456789ab] Bring the atlas back"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}
