//! Planning with an LLM, end to end: the real runtime and LLM planner talking to a mock
//! Gemini server on 127.0.0.1, on virtual time; the prompt's cache-stable layout; and the
//! playground binary against the same mock (burst → one request, kill mid-plan → resume
//! without duplicates, the API key never printed).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

use common::*;
use personad::adapters::llm::gemini::{GeminiClient, GeminiConfig};
use personad::adapters::llm::retry::{RetryConfig, RetryingLlm};
use personad::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use personad::core::config::RuntimeConfig;
use personad::core::llm::{LlmOutcome, LlmRequest};
use personad::core::model::{Chat, ChatId, Message, MessageId, Sender};
use personad::core::plan::PlanRequest;
use personad::core::time::BoxFuture;
use personad::ports::clock::SharedClock;
use personad::ports::llm::{ApiKey, Llm, LlmError};
use personad::ports::planner::{Planner, SharedPlanner};
use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "SENTINEL_KEY_7f3a";

fn answer(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]
    }))
}

async fn mock_with(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn gemini_planner(uri: String, attempts: u32) -> impl FnOnce(SharedClock) -> SharedPlanner {
    move |clock| {
        let mut cfg = GeminiConfig::new(ApiKey::new(KEY));
        cfg.base_url = uri;
        let client = GeminiClient::new(cfg).unwrap_or_else(|e| panic!("client: {e}"));
        let retry = RetryConfig {
            max_attempts: attempts,
            ..RetryConfig::default()
        };
        let llm = RetryingLlm::new(Arc::new(client), retry, clock);
        Arc::new(LlmPlanner::new(Arc::new(llm), LlmPlannerConfig::default()))
    }
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|r| serde_json::from_slice(&r.body).ok())
        .collect()
}

/// The request rules Gemini enforces: user/model roles only, a non-empty system
/// instruction, and contents ending with a user turn.
fn assert_well_formed(body: &Value) {
    let system = body["systemInstruction"]["parts"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        !system.trim().is_empty(),
        "systemInstruction must not be empty"
    );
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    assert!(!contents.is_empty());
    for c in &contents {
        let role = c["role"].as_str().unwrap_or("");
        assert!(role == "user" || role == "model", "role {role:?}");
    }
    assert_eq!(
        contents.last().map(|c| c["role"].clone()),
        Some(json!("user"))
    );
}

fn start(
    dir: &std::path::Path,
    server: &MockServer,
    cfg: RuntimeConfig,
    attempts: u32,
) -> (Harness, Chat) {
    let chat = dm(100);
    let h = Harness::start_with(
        dir,
        gemini_planner(server.uri(), attempts),
        cfg,
        std::slice::from_ref(&chat),
    );
    (h, chat)
}

#[tokio::test]
async fn a_dm_gets_an_answer_through_gemini() -> TestResult {
    let server = mock_with(answer("# «send»\nHello there!\n\n# «send»\nHow are you?")).await;
    let dir = tempfile::tempdir()?;
    let (mut h, chat) = start(dir.path(), &server, config(), 3);
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    let texts: Vec<String> = h.sends().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(
        texts,
        vec!["Hello there!".to_string(), "How are you?".to_string()]
    );
    let reqs = bodies(&server).await;
    assert_eq!(reqs.len(), 1);
    assert_well_formed(&reqs[0]);
    h.stop().await?;
    Ok(())
}

/// The window start of a chat is read from the state directory once per agent: the first
/// plan reads the agent's records (on the blocking pool), a new chat's plan after it knows
/// there is none without a read. Every start is saved, and with the records wired into the
/// runtime's store as the daemon wires them, by the store's own writes: no plan takes a trip
/// to the blocking pool to write one, and each is on file once the runtime is idle.
#[tokio::test]
async fn a_new_chats_window_start_is_known_without_a_read_and_written_without_a_trip() -> TestResult
{
    let server = mock_with(answer("# «send»\nHi!")).await;
    let dir = tempfile::tempdir()?;
    let chats = [dm(100), dm(101), dm(102)];
    let client = GeminiClient::new({
        let mut g = GeminiConfig::new(ApiKey::new(KEY));
        g.base_url = server.uri();
        g
    })
    .map_err(|e| format!("client: {e}"))?;
    let built = Arc::new(std::sync::OnceLock::new());
    let slot = Arc::clone(&built);
    let mut h = Harness::start_with_windows(
        dir.path(),
        move |_, windows| {
            let planner = Arc::new(
                LlmPlanner::new(Arc::new(client), LlmPlannerConfig::default())
                    .with_window_records(windows),
            );
            let _ = slot.set(Arc::clone(&planner));
            planner as SharedPlanner
        },
        config(),
        &chats,
    );
    let planner = built.get().cloned().ok_or("planner not built")?;
    let records = dir.path().join("windows").join(format!("{AGENT}.log"));
    for chat in &chats {
        h.say(chat, "Bob", "hi").await;
        h.settle().await;
        let text = std::fs::read_to_string(&records).unwrap_or_default();
        assert!(
            text.contains(&format!("\"chat\":{}", chat.id)),
            "on file before the stop: {text}"
        );
    }
    assert_eq!(bodies(&server).await.len(), 3);
    assert_eq!(
        planner.window_reads(),
        1,
        "read once, for the agent's first chat"
    );
    assert_eq!(planner.window_writes(), 0, "written by the store's batches");
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn reply_to_ids_from_the_model_are_honoured() -> TestResult {
    let server = mock_with(answer("# «send» 1\nyes, that one")).await;
    let dir = tempfile::tempdir()?;
    let (mut h, chat) = start(dir.path(), &server, config(), 3);
    h.say(&chat, "Bob", "which book?").await;
    h.say(&chat, "Bob", "the blue one?").await;
    h.settle().await;
    let ours: Vec<Message> = h
        .telegram
        .transcript(chat.id)
        .into_iter()
        .filter(|m| m.outgoing)
        .collect();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].reply_to, Some(MessageId(1)));
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_burst_inside_the_debounce_window_makes_one_request() -> TestResult {
    let server = mock_with(answer("ok")).await;
    let dir = tempfile::tempdir()?;
    let (mut h, chat) = start(dir.path(), &server, config(), 3);
    for i in 0..5 {
        h.say(&chat, "Bob", &format!("line {i}")).await;
        h.pass(secs(1)).await;
    }
    h.settle().await;
    let reqs = bodies(&server).await;
    assert_eq!(reqs.len(), 1, "one generateContent call for the burst");
    // Five history turns plus the final context turn.
    assert_eq!(reqs[0]["contents"].as_array().map(Vec::len), Some(6));
    assert_eq!(h.sends().len(), 1);
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn rate_limit_with_retry_delay_then_success() -> TestResult {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(429).set_body_json(json!({"error": {
            "code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "9s"}]
        }})))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(answer("back again"))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir()?;
    let (mut h, chat) = start(dir.path(), &server, config(), 3);
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    let sends = h.sends();
    assert_eq!(sends.len(), 1);
    assert!(
        sends[0].2 >= 11_000,
        "sent after the 2 s debounce and the 9 s retry delay: {sends:?}"
    );
    assert_eq!(bodies(&server).await.len(), 2);
    h.stop().await?;
    Ok(())
}

/// Nothing went to `chat`, and the owner got one notice (in Saved Messages) that its plan
/// was dropped: a plan never ends silently.
fn assert_only_the_owner_was_told(h: &Harness, chat: &Chat) {
    assert!(h.sends_to(chat.id).is_empty(), "{:?}", h.sends());
    let notices = h.owner_notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(notices[0].contains("was dropped after"), "{notices:?}");
}

/// A 503 storm with the default settings (3 attempts per call, 10 task attempts 10 s apart):
/// the first task attempt spends its 3 requests, then the outage guard makes the later task
/// attempts fail without a request except one probe per cooldown (30 s, then 60 s). Before
/// the retry wrapper this cost 30 requests; the documented bound is 3 + 10 − 1 = 12.
#[tokio::test]
async fn a_503_storm_costs_a_bounded_number_of_requests_per_plan() -> TestResult {
    let server = mock_with(ResponseTemplate::new(503).set_body_json(json!({"error": {
        "code": 503, "message": "The model is overloaded", "status": "UNAVAILABLE"
    }})))
    .await;
    let dir = tempfile::tempdir()?;
    let cfg = config();
    assert_eq!(cfg.retry.max_attempts, 10);
    let (mut h, chat) = start(dir.path(), &server, cfg, 3);
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    assert_only_the_owner_was_told(&h, &chat);
    let requests = bodies(&server).await.len();
    assert!(
        requests <= RetryConfig::default().worst_case_requests(10) as usize,
        "{requests} requests"
    );
    assert_eq!(requests, 5, "3 attempts, then probes at +30 s and +90 s");
    assert!(
        files_below(&dir.path().join("graphs")).is_empty(),
        "the plan was dropped"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_permanent_error_drops_the_plan_without_a_retry_storm() -> TestResult {
    let server = mock_with(ResponseTemplate::new(404).set_body_json(json!({"error": {
        "code": 404, "message": "models/nope is not found", "status": "NOT_FOUND"
    }})))
    .await;
    let dir = tempfile::tempdir()?;
    let (mut h, chat) = start(dir.path(), &server, config(), 3);
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    assert_only_the_owner_was_told(&h, &chat);
    assert_eq!(bodies(&server).await.len(), 1);
    h.stop().await?;
    Ok(())
}

/// Silence is free: an empty answer ends the plan in silence after exactly one request,
/// neither the client nor the task machinery tries again.
#[tokio::test]
async fn an_empty_answer_is_silence_after_exactly_one_request() -> TestResult {
    let server = mock_with(answer("")).await;
    let dir = tempfile::tempdir()?;
    let (mut h, chat) = start(dir.path(), &server, config(), 3);
    h.say(&chat, "Bob", "anything to add?").await;
    h.settle().await;
    assert!(h.sends().is_empty());
    assert_eq!(bodies(&server).await.len(), 1, "silence costs one request");
    assert!(files_below(&dir.path().join("graphs")).is_empty());
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_blocked_prompt_means_silence() -> TestResult {
    let server = mock_with(ResponseTemplate::new(200).set_body_json(json!({
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}
    })))
    .await;
    let dir = tempfile::tempdir()?;
    let (mut h, chat) = start(dir.path(), &server, config(), 3);
    h.say(&chat, "Bob", "something awful").await;
    h.settle().await;
    assert!(h.sends().is_empty());
    assert_eq!(bodies(&server).await.len(), 1, "a block is not retried");
    assert!(
        files_below(&dir.path().join("graphs")).is_empty(),
        "silence completes the plan"
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn malformed_blocks_are_skipped_and_the_rest_still_runs() -> TestResult {
    let reply = "# «sticker»\nonly-one-line\n\n# «teleport»\nsomewhere\n\n# «wait»\ndelay: soon\n\n# «send»\nstill here";
    let server = mock_with(answer(reply)).await;
    let dir = tempfile::tempdir()?;
    let (mut h, chat) = start(dir.path(), &server, config(), 3);
    h.say(&chat, "Bob", "hi").await;
    h.settle().await;
    let texts: Vec<String> = h.sends().into_iter().map(|(_, t, _)| t).collect();
    assert_eq!(texts, vec!["still here".to_string()]);
    h.stop().await?;
    Ok(())
}

/// Records every request and answers with silence.
#[derive(Default)]
struct RecordingLlm {
    requests: Mutex<Vec<LlmRequest>>,
}

impl Llm for RecordingLlm {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        if let Ok(mut r) = self.requests.lock() {
            r.push(req.clone());
        }
        Box::pin(async { Ok(LlmOutcome::Text(String::new())) })
    }
}

/// The request as bytes, the way the provider sees its prefix: system instruction, then
/// each turn in order. `upto` leaves out the final (volatile) turn.
fn serialized(req: &LlmRequest, without_last: bool) -> String {
    let n = if without_last {
        req.turns.len() - 1
    } else {
        req.turns.len()
    };
    let mut s = format!("{:?}\n", req.system);
    for t in &req.turns[..n] {
        s.push_str(&format!("{t:?}\n"));
    }
    s
}

fn conversation_message(i: i64) -> Message {
    let ours = i % 2 == 0;
    Message {
        id: MessageId(i),
        chat: ChatId(5),
        sender: Sender {
            id: if ours { 1 } else { 2 },
            name: if ours { "ann".into() } else { "Bob".into() },
            username: None,
            is_bot: false,
            service: false,
            deleted: false,
        },
        outgoing: ours,
        text: format!("message number {i} ```with a fence```"),
        mentions: vec![],
        reply_to: (i > 3).then(|| MessageId(i - 2)),
        date: personad::core::time::add(t0(), secs(i as u64 * 60)),
        media: None,
    }
}

/// Runs a scripted 30-turn conversation through the planner and returns the requests.
async fn thirty_turns(history_size: usize) -> Vec<LlmRequest> {
    let llm = Arc::new(RecordingLlm::default());
    let planner = LlmPlanner::new(
        llm.clone(),
        LlmPlannerConfig {
            history_size,
            ..LlmPlannerConfig::default()
        },
    );
    let persona = persona(AGENT);
    let chat = dm(5);
    let history: Vec<Message> = (1..=60).map(conversation_message).collect();
    for turn in 0..30 {
        let seen = &history[..(turn * 2 + 1)]; // Bob speaks; ann's answer joins next turn
        let req = PlanRequest {
            persona: &persona,
            chat: &chat,
            history: seen,
            target: seen.last().map(|m| m.id),
            now: personad::core::time::add(t0(), secs(turn as u64 * 3600 + 17)),
            media: &Default::default(),
            stickers: &[],
            quote: true,
            memory: &Default::default(),
            moment: &Default::default(),
        };
        let _ = planner.plan(req).await;
    }
    llm.requests.lock().map(|r| r.clone()).unwrap_or_default()
}

#[tokio::test]
async fn each_request_is_a_byte_prefix_of_the_next() {
    let reqs = thirty_turns(500).await;
    assert_eq!(reqs.len(), 30);
    for (i, pair) in reqs.windows(2).enumerate() {
        let (a, b) = (serialized(&pair[0], true), serialized(&pair[1], false));
        assert!(
            b.starts_with(&a),
            "request {i} is not a prefix of request {}",
            i + 1
        );
        assert_eq!(
            pair[0].system, pair[1].system,
            "the system instruction never changes"
        );
    }
}

#[tokio::test]
async fn a_capped_window_breaks_the_prefix_only_when_it_advances() {
    let reqs = thirty_turns(20).await;
    let mut advances = 0;
    for pair in reqs.windows(2) {
        let (a, b) = (serialized(&pair[0], true), serialized(&pair[1], false));
        if !b.starts_with(&a) {
            advances += 1;
            assert_ne!(
                pair[0].turns.first(),
                pair[1].turns.first(),
                "a broken prefix must come from a window that advanced"
            );
        }
        assert!(
            pair[1].turns.len() <= 21,
            "20 history turns at most, plus the context"
        );
    }
    // 59 messages through a window of 20 that drops 10 at a time: at most 10 advances,
    // so most consecutive requests still share their prefix.
    assert!((1..=10).contains(&advances), "{advances} advances");
}

/// Pins the metadata line every history turn opens with, the persona's own (model) turns
/// included, so "see my message #12" can be resolved: sender, sender id, message id, reply
/// link and the time in the persona's zone.
#[tokio::test]
async fn every_turn_opens_with_a_pinned_metadata_line_own_messages_included() {
    let llm = Arc::new(RecordingLlm::default());
    let planner = LlmPlanner::new(llm.clone(), LlmPlannerConfig::default());
    let persona = persona_with(AGENT, "# Agent Timezone\nEurope/Berlin\n");
    let chat = dm(5);
    let history: Vec<Message> = (1..=4).map(conversation_message).collect();
    let _ = planner
        .plan(PlanRequest {
            persona: &persona,
            chat: &chat,
            history: &history,
            target: Some(MessageId(3)),
            now: t0(),
            media: &Default::default(),
            stickers: &[],
            quote: true,
            memory: &Default::default(),
            moment: &Default::default(),
        })
        .await;
    let reqs = llm.requests.lock().map(|r| r.clone()).unwrap_or_default();
    let first_parts: Vec<String> = reqs[0]
        .turns
        .iter()
        .take(4)
        .map(|t| match t.parts.first() {
            Some(personad::core::llm::Part::Text(text)) => {
                text.lines().next().unwrap_or("").to_owned()
            }
            other => panic!("no text part: {other:?}"),
        })
        .collect();
    // t0 is 2025-06-15 15:06:40 UTC; message i is i minutes later; Berlin is UTC+2 then.
    assert_eq!(
        first_parts,
        [
            "[metadata] sender=\"Bob\" sender_id=2 message_id=1 time=\"2025-06-15 17:07\"",
            "[metadata] sender=\"ann\" sender_id=1 message_id=2 time=\"2025-06-15 17:08\"",
            "[metadata] sender=\"Bob\" sender_id=2 message_id=3 time=\"2025-06-15 17:09\"",
            "[metadata] sender=\"ann\" sender_id=1 message_id=4 reply_to=2 time=\"2025-06-15 17:10\"",
        ]
    );
    assert_eq!(reqs[0].turns[1].role, personad::core::llm::Role::Model);
}

// ---- prefix reuse over the wire, through the real runtime ----

/// The sample persona Wren (with its role prompt), renamed to the harness's agent.
fn wren() -> personad::core::persona::Persona {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(root.join("agents/Wren.md"))
        .unwrap_or_else(|e| panic!("Wren.md: {e}"))
        .replacen("\nWren\n", &format!("\n{AGENT}\n"), 1);
    personad::adapters::persona_loader::parse_persona(
        &root.join("agents/Wren.md"),
        &src,
        &[root.join("prompts")],
    )
    .persona
    .unwrap_or_else(|| panic!("Wren must parse"))
}

/// Length of the common byte prefix.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Mean prefix reuse of consecutive request bodies as sent: the share of each request's bytes
/// that the next request repeats as its prefix (what a provider's prompt cache can serve).
fn mean_prefix_reuse(bodies: &[Vec<u8>]) -> f64 {
    let shares: Vec<f64> = bodies
        .windows(2)
        .map(|p| common_prefix(&p[0], &p[1]) as f64 / p[0].len() as f64)
        .collect();
    shares.iter().sum::<f64>() / shares.len() as f64
}

/// The request body from `"systemInstruction"` on.
fn prompt_part(body: &[u8]) -> Vec<u8> {
    let key = b"\"systemInstruction\"";
    let at = body
        .windows(key.len())
        .position(|w| w == key)
        .unwrap_or_else(|| panic!("no systemInstruction in the body"));
    body[at..].to_vec()
}

/// Runs `turns` exchanges (Bob writes, the persona answers through the mock) with the given
/// history limit, restarting the daemon halfway, and returns the request bodies in order.
async fn conversation_over_the_wire(history_limit: usize, turns: usize) -> Vec<Vec<u8>> {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
        .respond_with(answer(
            "# «send»\nOh, that one is lovely. Have you read the sequel?",
        ))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let chat = dm(100);
    let mut cfg = config();
    cfg.history_limit = history_limit;
    let boot = |uri: String, state: std::path::PathBuf, cfg: RuntimeConfig| {
        let state_dir = personad::adapters::store::StateDir::new(&state);
        Harness::start_as(
            wren(),
            &state,
            move |clock| {
                let mut g = GeminiConfig::new(ApiKey::new(KEY));
                g.base_url = uri;
                let client = GeminiClient::new(g).unwrap_or_else(|e| panic!("client: {e}"));
                let llm = RetryingLlm::new(Arc::new(client), RetryConfig::default(), clock);
                let planner = LlmPlanner::new(
                    Arc::new(llm),
                    LlmPlannerConfig {
                        history_size: cfg.history_limit,
                        ..LlmPlannerConfig::default()
                    },
                )
                .with_state(state_dir);
                Arc::new(planner) as SharedPlanner
            },
            cfg,
            std::slice::from_ref(&chat),
            None,
            None,
        )
    };
    let mut h = boot(server.uri(), dir.path().to_path_buf(), cfg.clone());
    for turn in 0..turns {
        if turn == turns / 2 {
            // A restart: the window start must come back from the state dir.
            h.stop().await.unwrap_or_else(|e| panic!("{e}"));
            h = boot(server.uri(), dir.path().to_path_buf(), cfg.clone());
        }
        h.say(
            &chat,
            "Bob",
            &format!(
                "Turn {turn}: I finished the detective novel you suggested, any more like it?"
            ),
        )
        .await;
        h.settle().await;
    }
    h.stop().await.unwrap_or_else(|e| panic!("{e}"));
    let records = std::fs::read_to_string(dir.path().join("windows").join(format!("{AGENT}.log")))
        .unwrap_or_default();
    assert!(
        records.contains(&format!("\"chat\":{}", chat.id)),
        "the window start is persisted with the chat: {records}"
    );
    // Planning requests only: a short history limit also sets off summary calls (which the
    // mock declines), measured in tests/memory.rs.
    let summarizer = b"You keep the memory of a Telegram chat";
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| !b.windows(summarizer.len()).any(|w| w == summarizer))
        .collect()
}

/// The two prefix-reuse targets, measured on the request bodies as sent (Gemini wire format)
/// through the real runtime and its history fetch, across a restart: with `--history-limit
/// 20` over 60 turns the window steps 10 messages at a time (mean reuse at least 0.9, where a
/// window sliding on every request gave about 0.65), and with the default limit over 50 turns
/// the whole history stays (at least 0.95).
#[tokio::test]
async fn prefix_reuse_targets_hold_over_the_wire_and_across_a_restart() {
    let capped = conversation_over_the_wire(20, 60).await;
    assert_eq!(capped.len(), 60);
    // Across the restart (before turn 30) the prefix holds: the start came back from disk.
    // (Turns 29→30 are not a step: steps come every 5 turns from turn 5 on, at 9, 14, …)
    let across = common_prefix(&capped[29], &capped[30]) as f64 / capped[29].len() as f64;
    assert!(across > 0.9, "prefix reuse across the restart {across:.3}");
    let reuse = mean_prefix_reuse(&capped);
    println!("history limit 20, 60 turns: mean prefix reuse {reuse:.3}");
    assert!(
        reuse >= 0.9,
        "mean prefix reuse {reuse:.3} with a window of 20"
    );
    // The same on the prompt alone (system instruction and contents, without the settings
    // that precede them on the wire), closer to what a provider bills as cached tokens.
    let prompts: Vec<Vec<u8>> = capped.iter().map(|b| prompt_part(b)).collect();
    let reuse = mean_prefix_reuse(&prompts);
    println!("history limit 20, 60 turns: mean prefix reuse of the prompt alone {reuse:.3}");
    assert!(
        reuse >= 0.9,
        "prompt-only reuse {reuse:.3} with a window of 20"
    );

    let full = conversation_over_the_wire(500, 50).await;
    assert_eq!(full.len(), 50);
    let reuse = mean_prefix_reuse(&full);
    println!("default history limit, 50 turns: mean prefix reuse {reuse:.3}");
    assert!(
        reuse >= 0.95,
        "mean prefix reuse {reuse:.3} with the default window"
    );
}

// ---- the playground binary against the mock ----

fn playground(
    state: &std::path::Path,
    agents: &std::path::Path,
    server: &MockServer,
    fast: bool,
) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.arg("--agents")
        .arg(agents)
        .arg("--prompts")
        .arg(agents)
        .arg("--state")
        .arg(state)
        .args([
            "-vv",
            "chat",
            "--agent",
            "Tess",
            "--jsonl",
            "--planner",
            "gemini",
        ]);
    if fast {
        cmd.arg("--fast");
    }
    cmd.env("GEMINI_API_KEY", KEY)
        .env("GEMINI_BASE_URL", server.uri())
        .env_remove("GOOGLE_GEMINI_API_KEY")
        .env_remove("PERSONAD_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// A persona that types instantly, so real-time runs are quick.
fn tess_dir() -> Result<tempfile::TempDir, std::io::Error> {
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("Tess.md"),
        "# Agent Name\nTess\n\n# Agent Phone\n+15550100042\n\n# Typing Speed\n100000\n\n# Start Typing Delay\n0\n\n# Agent Instructions\nYou are Tess.\n",
    )?;
    Ok(dir)
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test]
async fn playground_burst_makes_one_well_formed_request_and_never_prints_the_key() -> TestResult {
    let server = mock_with(answer("# «send»\nhi from the mock")).await;
    let agents = tess_dir()?;
    let state = tempfile::tempdir()?;
    let input: String = (0..5)
        .map(|i| format!("{{\"text\":\"burst {i}\",\"after_ms\":200}}\n"))
        .collect();
    let out = run_to_end(
        playground(state.path(), agents.path(), &server, true),
        input,
    )
    .await?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let reqs = bodies(&server).await;
    assert_eq!(
        reqs.len(),
        1,
        "exactly one generateContent request for the burst"
    );
    assert_well_formed(&reqs[0]);
    let sends: Vec<Value> = json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["event"] == "send")
        .collect();
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0]["text"], "hi from the mock");
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "the key leaked into the output"
    );
    let received = server.received_requests().await.unwrap_or_default();
    assert!(
        received.iter().all(|r| !r.url.as_str().contains(KEY)),
        "the key must not be in a URL"
    );
    Ok(())
}

/// A `remember` and a `note` in the model's answer are printed as `remember` and `note`
/// events of the playground's JSON output, with what was kept.
#[tokio::test]
async fn playground_prints_memory_writes_as_events() -> TestResult {
    let server = mock_with(answer(
        "# «remember»\nLikes green tea.\n\n# «note»\nWe talk about tea here.\n\n# «send»\nnoted",
    ))
    .await;
    let agents = tess_dir()?;
    let state = tempfile::tempdir()?;
    let out = run_to_end(
        playground(state.path(), agents.path(), &server, true),
        "{\"text\":\"I love green tea\"}\n".into(),
    )
    .await?;
    let events = json_lines(&out.stdout);
    let of = |kind: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["event"] == kind)
            .cloned()
            .collect()
    };
    let remembered = of("remember");
    assert_eq!(remembered.len(), 1, "{events:?}");
    assert_eq!(remembered[0]["text"], "Likes green tea.");
    assert!(
        remembered[0]["outcome"]
            .as_str()
            .is_some_and(|o| o.starts_with("created fact-")),
        "{remembered:?}"
    );
    let noted = of("note");
    assert_eq!(noted.len(), 1, "{events:?}");
    assert_eq!(noted[0]["text"], "We talk about tea here.");
    assert_eq!(of("send").len(), 1);
    Ok(())
}

/// After enough messages the playground prints the chat's summary as a `summary` event.
#[tokio::test]
async fn playground_prints_a_summary_event() -> TestResult {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
        .respond_with(|req: &wiremock::Request| {
            let body = String::from_utf8_lossy(&req.body);
            if body.contains("You keep the memory of a Telegram chat") {
                answer("# «summarize»\nmin_message_id: 1\nmax_message_id: 100\nThey counted turns.")
            } else {
                answer("# «send»\nok")
            }
        })
        .mount(&server)
        .await;
    let agents = tess_dir()?;
    let state = tempfile::tempdir()?;
    let input: String = (0..62)
        .map(|i| format!("{{\"text\":\"turn {i}\",\"after_ms\":5000}}\n"))
        .collect();
    let out = run_to_end(
        playground(state.path(), agents.path(), &server, true),
        input,
    )
    .await?;
    let summaries: Vec<Value> = json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["event"] == "summary")
        .collect();
    assert_eq!(
        summaries.len(),
        1,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(summaries[0]["text"], "They counted turns.");
    assert_eq!(summaries[0]["outcome"], "messages 1–100");
    Ok(())
}

#[tokio::test]
async fn a_rejected_key_is_reported_without_printing_it() -> TestResult {
    let server = mock_with(ResponseTemplate::new(403).set_body_string(format!(
        "{{\"error\":{{\"code\":403,\"message\":\"API key {KEY} is not valid\",\"status\":\"PERMISSION_DENIED\"}}}}"
    )))
    .await;
    let agents = tess_dir()?;
    let state = tempfile::tempdir()?;
    let out = run_to_end(
        playground(state.path(), agents.path(), &server, true),
        "{\"text\":\"hi\"}\n".into(),
    )
    .await?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("403"), "the failure is logged: {stderr}");
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "the key leaked: {stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn a_playground_killed_mid_plan_finishes_it_after_restart_without_sending_twice() -> TestResult
{
    let server = mock_with(answer(
        "# «send»\none\n\n# «wait»\ndelay: 40\n\n# «send»\ntwo",
    ))
    .await;
    let agents = tess_dir()?;
    let state = tempfile::tempdir()?;
    // First run on real time: kill it once "one" was sent, while it waits 40 s.
    let mut cmd = playground(state.path(), agents.path(), &server, false);
    cmd.args(["--debounce-ms", "0"]);
    let first_send = tokio::task::spawn_blocking(move || -> Result<Value, String> {
        let mut child = cmd.spawn().map_err(|e| e.to_string())?;
        let mut stdin = child.stdin.take().ok_or("stdin")?;
        stdin
            .write_all(b"{\"text\":\"hello\"}\n")
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("stdout")?;
        let mut found = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| e.to_string())?;
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v["event"] == "send"
            {
                found = Some(v);
                break;
            }
        }
        child.kill().map_err(|e| e.to_string())?; // SIGKILL mid-plan
        let _ = child.wait();
        drop(stdin);
        found.ok_or_else(|| "no send before the kill".to_string())
    })
    .await??;
    assert_eq!(first_send["text"], "one");
    // Second run, no new input: the plan resumes (on virtual time) and finishes.
    let out = run_to_end(
        playground(state.path(), agents.path(), &server, true),
        String::new(),
    )
    .await?;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let texts: Vec<Value> = json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["event"] == "send")
        .map(|e| e["text"].clone())
        .collect();
    assert_eq!(
        texts,
        vec![json!("two")],
        "only the rest of the plan is sent"
    );
    assert_eq!(
        bodies(&server).await.len(),
        1,
        "resuming does not plan again"
    );
    // The persisted transcript holds each message exactly once.
    // (The playground's own state dir also keeps the agent's state, its handled-message
    // marks and its journal.)
    let transcripts: Vec<String> = files_below(&state.path().join("Tess").join("playground"))
        .into_iter()
        .filter(|f| {
            !f.ends_with("agent-state.json")
                && !f.ends_with("handled.json")
                && !f.contains("/journal/")
        })
        .collect();
    assert_eq!(transcripts.len(), 1, "{transcripts:?}");
    let log: Value = personad::adapters::memory::read_folded_json(
        &state
            .path()
            .join("Tess")
            .join("playground")
            .join(&transcripts[0]),
    )?;
    let ours: Vec<Value> = log["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m["outgoing"] == json!(true))
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(ours, vec![json!("one"), json!("two")]);
    Ok(())
}

/// A 200 answer Gemini gives without any candidate (an unknown shape), or with only thought
/// parts, is silence, and says so in the log instead of passing without a line.
#[tokio::test]
async fn an_answer_without_text_is_silence_with_a_log_line() -> TestResult {
    for (body, line) in [
        (json!({"candidates": []}), "holds no candidate"),
        (
            json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "hmm", "thought": true}]}, "finishReason": "STOP"}]}),
            "holds only thought parts",
        ),
    ] {
        let server = mock_with(ResponseTemplate::new(200).set_body_json(body)).await;
        let agents = tess_dir()?;
        let state = tempfile::tempdir()?;
        let out = run_to_end(
            playground(state.path(), agents.path(), &server, true),
            "{\"text\":\"hello\"}\n".to_string(),
        )
        .await?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(line), "{line}: {stderr}");
        let sends = json_lines(&out.stdout)
            .into_iter()
            .filter(|e| e["event"] == "send")
            .count();
        assert_eq!(sends, 0, "silence");
    }
    Ok(())
}

/// The interactive playground shows the model's escape sequences and bidi overrides as
/// `\u{..}` text: they never reach the terminal raw (no recolouring, no reordered lines).
#[tokio::test]
async fn the_interactive_playground_never_prints_escape_codes_or_bidi_overrides_raw() -> TestResult
{
    let server = mock_with(answer(
        "# «send»\n\u{1b}[2J\u{1b}]0;owned\u{7}red \u{202e}txet",
    ))
    .await;
    let agents = tess_dir()?;
    let state = tempfile::tempdir()?;
    let mut cmd = playground(state.path(), agents.path(), &server, true);
    // The same command in its human (interactive) form.
    let args: Vec<std::ffi::OsString> = cmd
        .get_args()
        .filter(|a| *a != "--jsonl")
        .map(std::ffi::OsStr::to_os_string)
        .collect();
    let mut human = std::process::Command::new(cmd.get_program());
    human.args(args);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => human.env(k, v),
            None => human.env_remove(k),
        };
    }
    human
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd = human;
    let out = run_to_end(cmd, "hello\n".to_string()).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("red "), "{stdout}");
    assert!(!stdout.contains('\u{1b}'), "raw escape: {stdout:?}");
    assert!(
        !stdout.contains('\u{202e}'),
        "raw bidi override: {stdout:?}"
    );
    assert!(!stdout.contains('\u{7}'), "raw bell: {stdout:?}");
    assert!(
        stdout.contains("\\u{1b}") && stdout.contains("\\u{202e}"),
        "{stdout}"
    );
    Ok(())
}
