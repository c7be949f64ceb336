//! The original's Heidi (head), unchanged from the shared data, with every action her role
//! prompts teach, driven through the real runtime, the real LLM planner and a mock Gemini that
//! answers in the original's JSON task format: one answer of hers keeps an intention and a
//! plan, leaves a note for Bob's chat (by his name), sends a photo of her album (the
//! original's media folder), changes her day and looks up a page and her album; each lands
//! where it should (the memory files, Bob's next request and no message, the album item sent
//! once, the day file as hers, the follow-up request with the page's text and the album's
//! listing). Skips (printing SKIPPED) when the shared data is absent.

mod common;

use std::sync::Arc;

use common::gemini::{answering_with_body, bodies, person, planner, reply};
use common::retrieve::boot;
use common::{AGENT, TestResult, shared_data};
use personad::adapters::memory::Action as Done;
use personad::adapters::retrieve::HttpRetriever;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Words only the page holds.
const PAGE_MARK: &str = "the Lascaux cave paintings are about 17,000 years old";
/// Words only the note to Bob holds.
const NOTE_MARK: &str = "lend Bob the anthropology book";
const PHOTO: &str = "4918428193711131585";

/// 2025-06-15 in Los Angeles (Heidi's zone), where the harness's clock starts (08:06 local).
const DAY: &str = "<!-- schedule: source=generated -->\n\n\
- 00:00–07:00 | 0 | Sleep | asleep\n\
- 07:00–08:00 | 60 | Breakfast | cereal and milk\n\
- 08:00–13:00 | 70 | Reading | at home, a Sunday\n\
- 13:00–22:00 | 80 | Home | homework and books\n\
- 22:00–24:00 | 0 | Sleep |\n";

#[tokio::test]
async fn heidi_carries_out_every_action_her_role_prompts_teach() -> TestResult {
    let Some(base) = shared_data("cw-telegram-agent/head") else {
        return Ok(());
    };
    let report = personad::adapters::persona_loader::load_dir(
        &base.join("agents"),
        &[base.join("prompts"), base.join("configprompts")],
    )?;
    let entry = report
        .entries
        .iter()
        .find(|e| e.name.as_deref() == Some("Heidi"))
        .ok_or("Heidi does not load")?;
    let mut heidi = entry.persona.clone().ok_or("Heidi is not usable")?;
    assert!(
        entry
            .problems
            .iter()
            .all(|p| !p.message.contains("does not support")),
        "{:?}",
        entry.problems
    );
    // What the owner would set for her: enabled, looking things up, her own album (the
    // original's media folder), changing her day.
    heidi.name = AGENT.into();
    heidi.disabled = false;
    heidi.typing_speed = None;
    heidi.start_typing_delay = None;
    heidi.allow_retrieve = true;
    heidi.allow_schedule_edits = true;
    heidi.media_folder = Some(base.join("media").to_string_lossy().into_owned());
    let (album, problems) = personad::adapters::album::load_album(&entry.path, &heidi);
    assert!(album.get(PHOTO).is_some(), "{problems:?}");
    heidi.album = Arc::new(album);

    let pages = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/lascaux"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            format!("<html><body><p>In short, {PAGE_MARK}.</p></body></html>"),
            "text/html",
        ))
        .mount(&pages)
        .await;
    let url = format!("{}/lascaux", pages.uri());
    let asked = url.clone();
    let llm = answering_with_body(move |body, newest| {
        if body.contains("You retrieved") {
            reply(r#"[{"kind": "send", "text": "They are about 17,000 years old!"}]"#)
        } else if newest.contains("cave paintings") {
            reply(&format!(
                r#"[{{"kind": "think", "text": "Lots to do."}},
                    {{"kind": "intend", "content": "Finish the book on cave art this week"}},
                    {{"kind": "plan", "content": "Show Alice the Lascaux photos next"}},
                    {{"kind": "xsend", "target_channel_id": "Bob", "intent": "Alice asked me to {NOTE_MARK}"}},
                    {{"kind": "send_media", "unique_id": "{PHOTO}"}},
                    {{"kind": "schedule", "id": "act-20250615-1300", "activity_name": "Drawing with Sylvia", "responsiveness": 60}},
                    {{"kind": "send", "text": "Let me check!"}},
                    {{"kind": "retrieve", "urls": ["{asked}", "file:media.json"]}}]"#
            ))
        } else {
            reply(r#"[{"kind": "send", "text": "Hey!"}]"#)
        }
    })
    .await;

    let dir = tempfile::tempdir()?;
    let state = dir.path();
    let days = state.join(AGENT).join("schedule");
    std::fs::create_dir_all(&days)?;
    for d in ["2025-06-15", "2025-06-16"] {
        std::fs::write(days.join(format!("{d}.md")), DAY)?;
    }
    let (alice, bob) = (person("Alice"), person("Bob"));
    let web = Arc::new(HttpRetriever::new().allowing_for_tests(*pages.address()));
    let (mut h, _) = boot(
        heidi,
        state,
        planner(llm.uri()),
        &[alice.clone(), bob.clone()],
        web,
    );
    h.started().await;
    h.say(&bob, "Bob", "hi Heidi").await;
    h.settle().await;
    h.say(&alice, "Alice", "how old are the Lascaux cave paintings?")
        .await;
    h.settle().await;
    h.say(&bob, "Bob", "what's up?").await;
    h.settle().await;

    // intend and plan: kept beside memory.
    let memory = state.join(AGENT).join("memory");
    let intentions = std::fs::read_to_string(memory.join("intentions.md"))?;
    assert!(
        intentions.contains("Finish the book on cave art"),
        "{intentions}"
    );
    let plans = std::fs::read_to_string(memory.join("plans").join(format!("{}.md", alice.id)))?;
    assert!(plans.contains("Show Alice the Lascaux photos"), "{plans}");
    // xsend by name: in one request of Bob's chat, in no message.
    let seen = bodies(&llm).await;
    let with_note: Vec<&String> = seen.iter().filter(|b| b.contains(NOTE_MARK)).collect();
    assert_eq!(with_note.len(), 1, "{seen:#?}");
    assert!(with_note[0].contains("what's up?") || with_note[0].contains("hi Heidi"));
    for (chat, text, _) in h.sends() {
        assert!(!text.contains(NOTE_MARK), "chat {chat} got the note");
    }
    // send_media: the album's photo, once, to Alice.
    let media: Vec<String> = h
        .telegram
        .actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Done::Media { chat, album_id, .. } if chat == alice.id => Some(album_id),
            _ => None,
        })
        .collect();
    assert_eq!(media, [PHOTO]);
    // schedule: her day changed, as hers.
    let today = std::fs::read_to_string(days.join("2025-06-15.md"))?;
    assert!(
        today.contains("source=edited by=persona") && today.contains("| 60 | Drawing with Sylvia"),
        "{today}"
    );
    // retrieve: the page's text and her album's listing reach the follow-up request, and
    // she answers with them.
    let follow_up = seen
        .iter()
        .find(|b| b.contains("You retrieved"))
        .ok_or("no follow-up request")?;
    assert!(
        follow_up.contains(PAGE_MARK),
        "the page is not in the follow-up"
    );
    assert!(
        follow_up.contains("charcoal drawings"),
        "the album's listing is not in the follow-up"
    );
    assert!(
        h.sends_to(alice.id)
            .iter()
            .any(|t| t.contains("17,000 years")),
        "{:?}",
        h.sends()
    );
    h.stop().await?;
    Ok(())
}
