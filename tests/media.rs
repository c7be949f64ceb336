//! Media understanding end to end: the real runtime on the in-memory Telegram, the LLM
//! planner and the media pipeline sharing one mock LLM that records every request.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use personad::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use personad::adapters::media::{MediaConfig, MediaPipeline, MediaPrompts};
use personad::adapters::memory::Incoming;
use personad::adapters::store::StateDir;
use personad::core::llm::{LlmOutcome, LlmRequest, Part};
use personad::core::model::{Chat, MediaInfo, MediaKind, Message};
use personad::core::time::BoxFuture;
use personad::ports::llm::{Llm, LlmError};
use personad::ports::planner::SharedPlanner;

const MEDIA_MODEL: &str = "media-test-model";

type Describe = dyn Fn(&LlmRequest) -> Result<LlmOutcome, LlmError> + Send + Sync;

/// Answers describe requests (the media model) with `describe`, planning requests with
/// silence; records both.
struct MockLlm {
    describe: Box<Describe>,
    requests: Mutex<Vec<LlmRequest>>,
}

impl MockLlm {
    fn new(
        describe: impl Fn(&LlmRequest) -> Result<LlmOutcome, LlmError> + Send + Sync + 'static,
    ) -> Arc<MockLlm> {
        Arc::new(MockLlm {
            describe: Box::new(describe),
            requests: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<LlmRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn describe_requests(&self) -> Vec<LlmRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.model == MEDIA_MODEL)
            .collect()
    }

    /// The planning requests, each flattened to its text.
    fn plan_prompts(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| r.model != MEDIA_MODEL)
            .map(|r| {
                r.turns
                    .iter()
                    .flat_map(|t| t.parts.iter())
                    .filter_map(|p| match p {
                        Part::Text(t) => Some(t.clone()),
                        Part::InlineData { .. } => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect()
    }
}

impl Llm for MockLlm {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        if let Ok(mut r) = self.requests.lock() {
            r.push(req.clone());
        }
        let out = if req.model == MEDIA_MODEL {
            (self.describe)(req)
        } else {
            Ok(LlmOutcome::Text(String::new()))
        };
        Box::pin(async move { out })
    }
}

/// Describes every image by its first distinguishing byte: "picture N".
fn describe_by_byte(req: &LlmRequest) -> Result<LlmOutcome, LlmError> {
    let n = req
        .turns
        .iter()
        .flat_map(|t| t.parts.iter())
        .find_map(|p| match p {
            Part::InlineData { data, .. } => data.get(4).copied(),
            Part::Text(_) => None,
        })
        .unwrap_or(0);
    Ok(LlmOutcome::Text(format!("picture {n}")))
}

/// A model that rejects every describe request with a permanent error.
fn failing_llm(message: &'static str) -> Arc<MockLlm> {
    MockLlm::new(move |_| {
        Err(LlmError::Permanent {
            status: Some(400),
            message: message.into(),
        })
    })
}

fn jpeg(n: u8) -> Vec<u8> {
    vec![0xFF, 0xD8, 0xFF, 0xE0, n, 1, 2, 3]
}

fn media_config(budget: usize) -> MediaConfig {
    MediaConfig {
        budget_per_pass: budget,
        model: MEDIA_MODEL.into(),
        ..MediaConfig::default()
    }
}

fn start(state: &std::path::Path, llm: &Arc<MockLlm>, media: MediaConfig, chat: &Chat) -> Harness {
    let (planner_llm, media_llm) = (Arc::clone(llm), Arc::clone(llm));
    let media_state = StateDir::new(state);
    Harness::start_with_media(
        state,
        move |_| -> SharedPlanner {
            Arc::new(LlmPlanner::new(planner_llm, LlmPlannerConfig::default()))
        },
        Some(Box::new(move |clock| {
            Arc::new(MediaPipeline::new(
                media,
                MediaPrompts::default(),
                media_llm,
                media_state,
                clock,
            ))
        })),
        config(),
        std::slice::from_ref(chat),
    )
}

fn photo(id: &str) -> MediaInfo {
    MediaInfo {
        kind: MediaKind::Photo,
        unique_id: id.into(),
        mime: None,
        size: None,
        duration_secs: None,
        file_name: None,
        sticker: None,
    }
}

/// A message carrying `media` (its bytes registered) arrives now.
async fn send_media(h: &Harness, chat: &Chat, media: MediaInfo, bytes: Vec<u8>) -> Message {
    h.telegram.put_media(&media.unique_id, bytes);
    let msg = h
        .telegram
        .inject(
            chat.id,
            Incoming {
                from: "bob".into(),
                media: Some(media),
                ..Incoming::default()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("inject: {e}"));
    h.handle
        .push_inbound(AGENT, chat.clone(), msg.clone(), true);
    msg
}

#[tokio::test]
async fn the_same_photo_in_100_messages_is_described_once() -> TestResult {
    let dir = tempfile::tempdir()?;
    let llm = MockLlm::new(describe_by_byte);
    let chat = dm(5);
    let mut h = start(dir.path(), &llm, media_config(8), &chat);
    for _ in 0..100 {
        send_media(&h, &chat, photo("p1"), jpeg(7)).await;
    }
    h.settle().await;
    // Another burst later: still no new description.
    send_media(&h, &chat, photo("p1"), jpeg(7)).await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 1);
    let prompts = llm.plan_prompts();
    assert_eq!(prompts.len(), 2, "one plan per burst");
    let last = prompts.last().cloned().unwrap_or_default();
    assert_eq!(
        last.matches("[photo description=\"picture 7\"]").count(),
        101
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn the_budget_limits_each_pass_and_later_passes_describe_the_rest() -> TestResult {
    let dir = tempfile::tempdir()?;
    let llm = MockLlm::new(describe_by_byte);
    let chat = dm(5);
    let mut h = start(dir.path(), &llm, media_config(2), &chat);
    for n in 1..=5u8 {
        send_media(&h, &chat, photo(&format!("p{n}")), jpeg(n)).await;
    }
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 2);
    let first = llm.plan_prompts().pop().unwrap_or_default();
    // Newest first: photos 5 and 4 are described, the rest wait.
    assert!(first.contains("picture 5") && first.contains("picture 4"));
    assert_eq!(first.matches("(not described yet)").count(), 3);
    h.say(&chat, "bob", "and?").await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 4);
    h.say(&chat, "bob", "well?").await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 5);
    let last = llm.plan_prompts().pop().unwrap_or_default();
    for n in 1..=5 {
        assert!(last.contains(&format!("picture {n}")), "{last}");
    }
    assert!(!last.contains("not described yet"));
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_failing_item_waits_for_its_backoff() -> TestResult {
    let dir = tempfile::tempdir()?;
    let llm = failing_llm("bad media");
    let chat = dm(5);
    let mut h = start(dir.path(), &llm, media_config(8), &chat);
    send_media(&h, &chat, photo("bad"), jpeg(1)).await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 1);
    // Within the first backoff (60 s): planning goes on, the item is not retried.
    h.pass(secs(10)).await;
    h.say(&chat, "bob", "hello?").await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 1);
    assert_eq!(llm.plan_prompts().len(), 2);
    // Past it: one more try, then the doubled backoff (120 s) holds again.
    h.pass(secs(60)).await;
    h.say(&chat, "bob", "now?").await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 2);
    h.pass(secs(70)).await;
    h.say(&chat, "bob", "again?").await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 2);
    let record = std::fs::read_to_string(dir.path().join("media/bad.json"))?;
    assert!(record.contains("\"status\": \"error\""), "{record}");
    assert!(record.contains("\"attempts\": 2"), "{record}");
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn the_disk_cache_survives_a_restart_and_curated_records_win() -> TestResult {
    let dir = tempfile::tempdir()?;
    let chat = dm(5);
    let llm = MockLlm::new(describe_by_byte);
    let mut h = start(dir.path(), &llm, media_config(8), &chat);
    send_media(&h, &chat, photo("p9"), jpeg(9)).await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 1);
    h.stop().await?;

    // A new process: the record is read from state/media, no new call.
    let curated = tempfile::tempdir()?;
    std::fs::write(
        curated.path().join("c1.json"),
        r#"{"unique_id":"c1","kind":"photo","description":"the operator's words"}"#,
    )?;
    let llm2 = MockLlm::new(describe_by_byte);
    let config = MediaConfig {
        curated_dir: Some(curated.path().to_path_buf()),
        ..media_config(8)
    };
    let mut h = start(dir.path(), &llm2, config, &chat);
    send_media(&h, &chat, photo("c1"), jpeg(3)).await;
    h.settle().await;
    assert_eq!(llm2.describe_requests().len(), 0);
    let prompt = llm2.plan_prompts().pop().unwrap_or_default();
    assert!(prompt.contains("picture 9"), "{prompt}");
    assert!(prompt.contains("the operator's words"), "{prompt}");
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_voice_note_is_transcribed_into_the_prompt() -> TestResult {
    let dir = tempfile::tempdir()?;
    let llm = MockLlm::new(|req| {
        let audio = req
            .turns
            .iter()
            .flat_map(|t| t.parts.iter())
            .any(|p| matches!(p, Part::InlineData { mime, .. } if mime == "audio/ogg"));
        Ok(LlmOutcome::Text(if audio {
            "see you at nine".into()
        } else {
            "not audio".into()
        }))
    });
    let chat = dm(5);
    let mut h = start(dir.path(), &llm, media_config(8), &chat);
    let voice = MediaInfo {
        kind: MediaKind::Voice,
        unique_id: "v1".into(),
        mime: None,
        size: Some(9),
        duration_secs: Some(4),
        file_name: None,
        sticker: None,
    };
    send_media(&h, &chat, voice, b"OggS\0\0abc".to_vec()).await;
    h.settle().await;
    let prompt = llm.plan_prompts().pop().unwrap_or_default();
    assert!(
        prompt.contains("[voice duration=4s transcript=\"see you at nine\"]"),
        "{prompt}"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_sticker_task_sends_a_known_sticker_and_falls_back_to_text() -> TestResult {
    use personad::adapters::memory::Action as Done;
    use personad::core::model::StickerChoice;
    use personad::core::plan::Action;
    let dir = tempfile::tempdir()?;
    let sets = tempfile::tempdir()?;
    std::fs::create_dir(sets.path().join("Cats"))?;
    std::fs::write(
        sets.path().join("Cats").join("👋.webp"),
        b"RIFF\0\0\0\0WEBP",
    )?;
    let pick = |name: &str| Action::Sticker {
        sticker: StickerChoice {
            set: "Cats".into(),
            name: name.into(),
        },
        reply_to: None,
    };
    let (known, unknown) = (pick("👋"), pick("🦖"));
    let planner = ScriptedPlanner::new(move |_, n| {
        Ok(vec![if n == 0 {
            known.clone()
        } else {
            unknown.clone()
        }])
    });
    let chat = dm(5);
    let mut h = Harness::start(dir.path(), planner, config(), std::slice::from_ref(&chat));
    assert_eq!(h.telegram.load_sticker_sets(sets.path())?, 1);
    h.say(&chat, "bob", "wave at me").await;
    h.settle().await;
    h.say(&chat, "bob", "now a dinosaur").await;
    h.settle().await;
    let sent: Vec<String> = h
        .telegram
        .actions()
        .into_iter()
        .filter_map(|r| match r.action {
            Done::Sticker { sticker, .. } => Some(format!("sticker {}", sticker.name)),
            Done::Send { message, .. } => Some(format!("text {}", message.text)),
            _ => None,
        })
        .collect();
    assert_eq!(sent, vec!["sticker 👋".to_string(), "text 🦖".to_string()]);
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_failing_sticker_set_is_not_re_described_sticker_by_sticker() -> TestResult {
    let dir = tempfile::tempdir()?;
    let llm = failing_llm("broken");
    let chat = dm(5);
    let mut h = start(dir.path(), &llm, media_config(8), &chat);
    let sticker = |name: &str| MediaInfo {
        kind: MediaKind::Sticker,
        unique_id: format!("st-{name}"),
        mime: Some("image/webp".into()),
        size: None,
        duration_secs: None,
        file_name: None,
        sticker: Some(personad::core::model::StickerInfo {
            set: Some("Broken".into()),
            name: name.into(),
            emoji: None,
        }),
    };
    send_media(&h, &chat, sticker("a"), b"RIFF\0\0\0\0WEBP".to_vec()).await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 1);
    // Another sticker of the same set, inside the set's backoff: not tried.
    h.pass(secs(10)).await;
    send_media(&h, &chat, sticker("b"), b"RIFF\0\0\0\0WEBP".to_vec()).await;
    h.settle().await;
    assert_eq!(llm.describe_requests().len(), 1);
    let prompt = llm.plan_prompts().pop().unwrap_or_default();
    assert!(
        prompt.contains("[sticker set=\"Broken\" name=\"b\" (not described yet)]"),
        "{prompt}"
    );
    h.stop().await?;
    Ok(())
}

// ---- acceptance: the playground binary against a mock Gemini ----

mod playground {

    use serde_json::{Value, json};
    use wiremock::matchers::{method, path_regex};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    use super::TestResult;

    fn answer(text: &str) -> ResponseTemplate {
        ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]
        }))
    }

    /// Describe requests (the media model) get `description`; plans get silence.
    async fn server(description: &str) -> MockServer {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path_regex(r"^/v1beta/models/media-mock:generateContent$"))
            .respond_with(answer(description))
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path_regex(r"^/v1beta/models/chat-mock:generateContent$"))
            .respond_with(answer("# «wait»\n1"))
            .mount(&server)
            .await;
        server
    }

    async fn run(
        server: &MockServer,
        state: &std::path::Path,
        budget: u32,
        input: String,
    ) -> Result<std::process::Output, String> {
        let agents = tempfile::tempdir().map_err(|e| e.to_string())?;
        std::fs::write(
            agents.path().join("Tess.md"),
            "# Agent Name\nTess\n\n# Agent Phone\n+15550100042\n\n# Agent Instructions\nYou are Tess.\n",
        )
        .map_err(|e| e.to_string())?;
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
        cmd.arg("--agents")
            .arg(agents.path())
            .arg("--prompts")
            .arg(agents.path())
            .arg("--state")
            .arg(state)
            .args(["chat", "--agent", "Tess", "--jsonl", "--fast"])
            .args(["--planner", "gemini", "--model", "chat-mock"])
            .args(["--media-model", "media-mock", "--media-budget"])
            .arg(budget.to_string())
            .env("GEMINI_API_KEY", "k")
            .env("GEMINI_BASE_URL", server.uri())
            .env_remove("GOOGLE_GEMINI_API_KEY")
            .env_remove("PERSONAD_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        super::common::run_to_end(cmd, input).await
    }

    /// (describe requests, plan request bodies as text), in order.
    async fn requests(server: &MockServer) -> (usize, Vec<String>) {
        let all = server.received_requests().await.unwrap_or_default();
        let describes = all
            .iter()
            .filter(|r| r.url.path().contains("media-mock"))
            .count();
        let plans = all
            .iter()
            .filter(|r| r.url.path().contains("chat-mock"))
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect();
        (describes, plans)
    }

    fn photo_line(path: &std::path::Path, after_ms: u64) -> String {
        let v: Value = json!({"media": {"kind": "photo", "path": path}, "after_ms": after_ms});
        format!("{v}\n")
    }

    #[tokio::test]
    async fn twenty_messages_with_one_photo_make_one_describe_request() -> TestResult {
        let server = server("a tabby cat on a sofa").await;
        let files = tempfile::tempdir()?;
        let photo = files.path().join("cat.jpg");
        std::fs::write(&photo, [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3])?;
        let state = tempfile::tempdir()?;
        let input: String = (0..20).map(|_| photo_line(&photo, 100)).collect();
        let out = run(&server, state.path(), 8, input).await?;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (describes, plans) = requests(&server).await;
        assert_eq!(describes, 1);
        assert_eq!(plans.len(), 1, "one plan for the burst");
        assert_eq!(plans[0].matches("a tabby cat on a sofa").count(), 20);
        Ok(())
    }

    #[tokio::test]
    async fn with_a_budget_of_two_five_photos_are_described_over_three_plans() -> TestResult {
        let server = server("a photo").await;
        let files = tempfile::tempdir()?;
        let mut input = String::new();
        for n in 1..=5u8 {
            let path = files.path().join(format!("p{n}.jpg"));
            std::fs::write(&path, [0xFF, 0xD8, 0xFF, 0xE0, n])?;
            input.push_str(&photo_line(&path, 100));
        }
        input.push_str(&format!(
            "{}\n",
            json!({"text": "and?", "after_ms": 60_000})
        ));
        input.push_str(&format!("{}\n", json!({"text": "so?", "after_ms": 60_000})));
        let state = tempfile::tempdir()?;
        let out = run(&server, state.path(), 2, input).await?;
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (describes, plans) = requests(&server).await;
        assert_eq!(describes, 5);
        assert_eq!(plans.len(), 3);
        let described = |p: &String| p.matches("a photo").count();
        assert_eq!(
            plans.iter().map(described).collect::<Vec<_>>(),
            vec![2, 4, 5]
        );
        Ok(())
    }
}

#[tokio::test]
async fn an_animated_sticker_is_described_from_its_emoji_and_set_without_a_model_call() -> TestResult
{
    let dir = tempfile::tempdir()?;
    let llm = MockLlm::new(describe_by_byte);
    let chat = dm(6);
    let mut h = start(dir.path(), &llm, media_config(8), &chat);
    let tgs = MediaInfo {
        kind: MediaKind::Sticker,
        unique_id: "tgs1".into(),
        mime: Some("application/x-tgsticker".into()),
        size: Some(20_000),
        duration_secs: None,
        file_name: None,
        sticker: Some(personad::core::model::StickerInfo {
            set: Some("Ducks".into()),
            name: "🦆".into(),
            emoji: Some("🦆".into()),
        }),
    };
    send_media(&h, &chat, tgs, b"\x1f\x8b lottie".to_vec()).await;
    h.settle().await;
    assert!(
        llm.describe_requests().is_empty(),
        "no model call for a tgs sticker"
    );
    let prompt = llm.plan_prompts().pop().unwrap_or_default();
    assert!(
        prompt.contains("an animated sticker expressing 🦆 from the set Ducks"),
        "{prompt}"
    );
    h.stop().await?;
    Ok(())
}
