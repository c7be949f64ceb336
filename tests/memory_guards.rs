//! Memory's privacy and cost guards, each with a test that fails when the guard is taken
//! out: a `remember` whose `about:` names someone who is not of the chat is skipped (no fact
//! reaches that person's prompt), a group plan sees the facts of its 12 latest speakers only,
//! and an agent makes at most 200 summary calls a UTC day. The real runtime and LLM planner
//! against a mock Gemini on 127.0.0.1, on virtual time; checked on the files written and the
//! request bodies the mock received.

mod common;

use std::sync::Arc;

use common::gemini::*;
use common::*;
use personad::adapters::memory::user_id_for;
use personad::core::model::{Chat, Message};
use personad::ports::clock::SharedClock;
use personad::ports::planner::{Planner, SummaryRequest};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer};

/// The people file of `name` under the harness's state.
fn people_file(state: &std::path::Path, name: &str) -> std::path::PathBuf {
    state
        .join("ann/memory/people")
        .join(format!("{}.md", user_id_for(name)))
}

/// A `remember` may only be about someone of the chat it was planned in. In Alice's DM the
/// model writes one fact about Alice (kept) and one `about:` Bob, who is not in that chat
/// (skipped); in a group of Alice and Carol, one `about:` Dave, who never spoke there
/// (skipped). No file is written for Bob or Dave, and Bob's own DM request never carries the
/// planted fact.
#[tokio::test]
async fn a_remember_about_someone_not_of_the_chat_is_skipped() -> TestResult {
    let (bob, dave) = (user_id_for("Bob"), user_id_for("Dave"));
    let server = common::gemini::answering(move |newest| {
            if newest.contains("about Bob") {
                reply(&format!(
                    "# «remember»\nabout: {bob}\nBob's bank PIN is 4321.\n\n# «remember»\nAlice drinks green tea.\n\n# «send»\nnoted"
                ))
            } else if newest.contains("about Dave") {
                reply(&format!(
                    "# «remember»\nabout: {dave}\nDave's door code is 8765.\n\n# «send»\nnoted"
                ))
            } else {
                reply("# «send»\nok")
            }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let (alice_dm, bob_dm, club) = (person("Alice"), person("Bob"), group(-701));
    let chats = [alice_dm.clone(), bob_dm.clone(), club.clone()];
    let mut h = Harness::start_with(dir.path(), planner(server.uri()), config(), &chats);
    let steps = [
        (&alice_dm, "Alice", "remember this about Bob"),
        (&club, "Carol", "evening all"),
        (&club, "Alice", "remember this about Dave"),
        (&bob_dm, "Bob", "hi, how are you?"),
    ];
    for (chat, from, text) in steps {
        h.say(chat, from, text).await;
        h.settle().await;
    }
    h.stop().await?;
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 4, "one request per message");
    assert!(
        !sent[3].contains("4321"),
        "the fact planted about Bob reached Bob's DM request"
    );
    let alice = std::fs::read_to_string(people_file(dir.path(), "Alice"))?;
    assert!(alice.contains("green tea"), "the fact about Alice: {alice}");
    assert!(
        !alice.contains("4321") && !alice.contains("8765"),
        "{alice}"
    );
    for name in ["Bob", "Dave"] {
        assert!(
            !people_file(dir.path(), name).exists(),
            "a fact about {name}, who is not of the chat, was kept"
        );
    }
    Ok(())
}

/// A group plan sees the facts of the 12 people who spoke last, no more: 13 members each
/// have a fact (learnt in their own DMs), all 13 speak in turn, and the one plan's request
/// holds the facts of the latest 12 and not of the first speaker.
#[tokio::test]
async fn a_group_plan_sees_the_facts_of_its_12_latest_speakers_only() -> TestResult {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
        .respond_with(reply("# «send»\nhello all"))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir()?;
    let names: Vec<String> = (0..13).map(|i| format!("Member{i}")).collect();
    for name in &names {
        let id = user_id_for(name);
        let file = people_file(dir.path(), name);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(
            &file,
            format!(
                "# Facts about {name}\n\n## fact-{id}\n_2026-11-25T10:00:00Z · chat {id} · message 1_\n\n{name} collects stamps-of-{name}x.\n"
            ),
        )?;
    }
    let club = group(-702);
    let mut h = Harness::start_with(
        dir.path(),
        planner(server.uri()),
        config(),
        std::slice::from_ref(&club),
    );
    for name in &names {
        h.say(&club, name, &format!("{name} says hi")).await;
    }
    h.settle().await;
    h.stop().await?;
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 1, "one plan for the burst");
    let shown: Vec<bool> = names
        .iter()
        .map(|n| sent[0].contains(&format!("stamps-of-{n}x")))
        .collect();
    let mut expected = vec![true; 13];
    expected[0] = false;
    assert_eq!(shown, expected, "the facts of the 12 latest speakers only");
    Ok(())
}

fn message(chat: &Chat, id: i64) -> Message {
    common::numbered_message(chat, id, t0())
}

/// An agent makes at most 200 summary calls a UTC day: the 201st that day is answered "no
/// summary" without a request; the next day calls go out again.
#[tokio::test]
async fn summary_calls_stop_at_200_a_day_and_start_again_the_next_day() -> TestResult {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
        .respond_with(reply(
            "# «summarize»\nmin_message_id: 1\nmax_message_id: 2\nThey talked.",
        ))
        .mount(&server)
        .await;
    let clock: SharedClock = Arc::new(personad::ports::clock::VirtualClock::new(t0(), false));
    let planner = llm_planner(&server.uri(), clock);
    let persona = persona(AGENT);
    let bob = person("Bob");
    let messages = [message(&bob, 1), message(&bob, 2)];
    let media = Default::default();
    let ask = |now| {
        planner.summarize(SummaryRequest {
            persona: &persona,
            chat: &bob,
            earlier: "",
            messages: &messages,
            media: &media,
            now,
        })
    };
    let requests = || async { server.received_requests().await.unwrap_or_default().len() };
    for n in 0..200 {
        let answer = ask(t0()).await?;
        assert!(answer.is_some(), "call {n} got no summary");
    }
    assert_eq!(requests().await, 200);
    let past_cap = ask(t0()).await?;
    assert!(past_cap.is_none(), "a summary past the cap");
    assert_eq!(requests().await, 200, "the 201st call was made");
    let tomorrow = t0() + jiff::SignedDuration::from_hours(24);
    assert!(ask(tomorrow).await?.is_some(), "no summary the next day");
    assert_eq!(requests().await, 201);
    Ok(())
}
