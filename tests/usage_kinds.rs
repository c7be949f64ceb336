//! Every metered LLM call carries its kind into the usage totals: the planner's plan, summary
//! and schedule calls over a mock Gemini each land on a row of their own kind in the meter
//! and in `state usage` (the classifier's `classify` is in tests/budget.rs, media's `media`
//! in tests/openai.rs); usage files written before kinds were kept (a hand-written format-1
//! table and journal lines without `kind`) still load, their rows counted as `mixed`, and a
//! meter goes on from them.

mod common;

use std::sync::Arc;

use common::gemini::llm_planner;
use common::{AGENT, TestResult, dm, persona, t0};
use personad::adapters::llm::usage::{self, CallKind, Usage, UsageMeter, UsageRow};
use personad::adapters::store::StateDir;
use personad::core::model::{Chat, Message, MessageId};
use personad::core::plan::PlanRequest;
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::planner::{Planner, ScheduleRequest, SummaryRequest};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

fn message(chat: &Chat, id: i64) -> Message {
    common::numbered_message(chat, id, t0())
}

/// Requests of each kind in `rows` (of `agent`), in [`CallKind::ALL`]'s order.
fn requests_by_kind(rows: &[UsageRow], agent: &str) -> Vec<(CallKind, u64)> {
    CallKind::ALL
        .iter()
        .map(|k| {
            let n = rows
                .iter()
                .filter(|r| r.agent == agent && r.kind == *k)
                .map(|r| r.requests)
                .sum();
            (*k, n)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// One plan, two summaries and three schedule calls: three rows, one per kind, with those
/// counts (so no two kinds can be swapped unnoticed), and `state usage` names each kind.
#[tokio::test]
async fn plan_summary_and_schedule_calls_are_counted_under_their_own_kinds() -> TestResult {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "# «send»\nHi"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110}
        })))
        .mount(&server)
        .await;
    let state = tempfile::tempdir()?;
    let dir = StateDir::new(state.path());
    let clock: SharedClock = Arc::new(VirtualClock::new(t0(), false));
    let meter = Arc::new(UsageMeter::load(dir.clone(), Arc::clone(&clock)));
    let planner = llm_planner(&server.uri(), clock).with_usage(Arc::clone(&meter));
    let persona = persona(AGENT);
    let bob = dm(5);
    let history = [message(&bob, 1), message(&bob, 2)];
    let media = Default::default();
    planner
        .plan(PlanRequest {
            persona: &persona,
            chat: &bob,
            history: &history,
            target: Some(MessageId(2)),
            now: t0(),
            media: &media,
            quote: false,
            stickers: &[],
            memory: &Default::default(),
            moment: &Default::default(),
        })
        .await?;
    for _ in 0..2 {
        planner
            .summarize(SummaryRequest {
                persona: &persona,
                chat: &bob,
                earlier: "",
                messages: &history,
                media: &media,
                now: t0(),
            })
            .await?;
    }
    for _ in 0..3 {
        planner
            .schedule(ScheduleRequest {
                persona: &persona,
                prose: "Up at seven, asleep by eleven.",
                date: jiff::civil::date(2025, 6, 16),
                zone: "UTC",
                recent: &[],
                now: t0(),
            })
            .await?;
    }
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        6
    );
    let expected = vec![
        (CallKind::Plan, 1),
        (CallKind::Summary, 2),
        (CallKind::Schedule, 3),
    ];
    assert_eq!(requests_by_kind(&meter.totals(), AGENT), expected);
    meter.flush().await?;
    let (rows, problems) = usage::read_totals(&dir);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(requests_by_kind(&rows, AGENT), expected, "as saved");
    let shown = usage::state_usage(&dir, Some(AGENT), None)?;
    for (kind, n) in [("plan", "1"), ("summary", "2"), ("schedule", "3")] {
        let row = shown
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|cols| cols.first() == Some(&AGENT) && cols.get(2) == Some(&kind))
            .unwrap_or_else(|| panic!("no {kind} row: {shown}"));
        assert_eq!(row[4], n, "{shown}");
    }
    assert!(shown.contains("by kind: plan 1 request(s)"), "{shown}");
    Ok(())
}

/// A table of format 1 (no `kind` in its rows) and journal lines without `kind`, as an
/// earlier version wrote them: they load without a problem, every row counted as `mixed`
/// (they summed plans, summaries and schedule calls together); a meter folds them and goes
/// on, its new calls on rows of their own kinds beside the old ones.
#[tokio::test]
async fn usage_files_without_kinds_load_as_mixed_and_a_meter_goes_on_from_them() -> TestResult {
    let state = tempfile::tempdir()?;
    let dir = StateDir::new(state.path());
    let usage_dir = state.path().join("usage");
    std::fs::create_dir_all(&usage_dir)?;
    std::fs::write(
        usage_dir.join("Wren.json"),
        r#"{
  "format": 1,
  "agent": "Wren",
  "applied": 2,
  "rows": [
    {"agent": "Wren", "model": "gemini-flash-latest", "day": "2025-06-14", "requests": 5,
     "prompt_tokens": 1000, "cached_tokens": 0, "output_tokens": 100, "discarded": 1},
    {"agent": "Wren", "model": "gemini-flash-latest", "day": "2025-06-15", "requests": 2,
     "prompt_tokens": 200, "cached_tokens": 0, "output_tokens": 20}
  ]
}
"#,
    )?;
    std::fs::write(
        usage_dir.join("Wren.log"),
        concat!(
            // Already in the table (applied 2): not counted again.
            r#"{"seq":2,"agent":"Wren","model":"gemini-flash-latest","day":"2025-06-15","requests":1,"prompt_tokens":100,"output_tokens":10}"#,
            "\n",
            r#"{"seq":3,"agent":"Wren","model":"gemini-flash-latest","day":"2025-06-15","requests":1,"prompt_tokens":50,"output_tokens":5}"#,
            "\n",
        ),
    )?;
    let (rows, problems) = usage::read_totals(&dir);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r.kind == CallKind::Mixed), "{rows:?}");
    let day = |rows: &[UsageRow], d: &str, k: CallKind| {
        rows.iter()
            .find(|r| r.day == d && r.kind == k)
            .map(|r| (r.requests, r.prompt_tokens, r.discarded))
    };
    assert_eq!(
        day(&rows, "2025-06-14", CallKind::Mixed),
        Some((5, 1000, 1))
    );
    assert_eq!(day(&rows, "2025-06-15", CallKind::Mixed), Some((3, 250, 0)));
    let shown = usage::state_usage(&dir, None, None)?;
    assert!(!shown.contains("unreadable"), "{shown}");
    assert_eq!(
        shown.lines().filter(|l| l.contains(" mixed ")).count(),
        2,
        "{shown}"
    );

    // A meter starts from them (folding the journal), and adds a plan call of today's.
    let clock: SharedClock = Arc::new(VirtualClock::new(t0(), false));
    let meter = UsageMeter::load(dir.clone(), clock);
    assert!(
        !usage_dir.join("Wren.log").exists(),
        "the journal was folded"
    );
    let call = Usage {
        prompt_tokens: 7,
        cached_tokens: 0,
        output_tokens: 1,
    };
    meter.add("Wren", "gemini-flash-latest", CallKind::Plan, call);
    meter.flush().await?;
    let (rows, problems) = usage::read_totals(&dir);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(day(&rows, "2025-06-15", CallKind::Mixed), Some((3, 250, 0)));
    assert_eq!(day(&rows, "2025-06-15", CallKind::Plan), Some((1, 7, 0)));
    let table = std::fs::read_to_string(usage_dir.join("Wren.json"))?;
    assert!(table.contains("\"kind\": \"mixed\""), "{table}");
    assert!(!usage_dir.join("Wren.json.unreadable").exists());
    Ok(())
}

/// `--plan-format json` holds the summary and schedule calls to their schemas too: each
/// request carries its schema as `response_format` (an OpenAI-compatible server of one's own,
/// as llama.cpp's), and the JSON answers such a server returns become a summary and a day.
#[tokio::test]
async fn summary_and_schedule_calls_are_held_to_their_schemas_on_a_json_route() -> TestResult {
    use personad::adapters::llm::provider::Router;
    use personad::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|req: &wiremock::Request| {
            let body: serde_json::Value =
                serde_json::from_slice(&req.body).unwrap_or_default();
            let schema = &body["response_format"]["json_schema"]["schema"];
            // Answers in the schema it was given, as a constrained decoder would.
            let answer = if schema["properties"]["activities"]["type"] == json!("array") {
                json!({"activities": [
                    {"start": "00:00", "end": "07:00", "responsiveness": 0, "activity": "sleep", "description": "asleep"},
                    {"start": "07:00", "end": "24:00", "responsiveness": 80, "activity": "day", "description": "about town"}
                ]})
            } else if schema["required"] == json!(["kind", "min_message_id", "max_message_id", "content"]) {
                json!({"kind": "summarize", "min_message_id": 1, "max_message_id": 2, "content": "Bob said hello twice."})
            } else {
                json!("unconstrained: # «summarize» no fields")
            };
            ResponseTemplate::new(200).set_body_json(json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.to_string()}, "finish_reason": "stop"}]
            }))
        })
        .mount(&server)
        .await;
    let base = format!("{}/v1", server.uri());
    let env = |name: &str| match name {
        "OPENAI_BASE_URL" => Some(base.clone()),
        "OPENAI_MODEL" => Some("local".to_owned()),
        _ => None,
    };
    let router = Router::from_lookup(env, std::time::Duration::from_secs(10));
    let config = LlmPlannerConfig {
        default_llm: personad::core::llm::resolve("openai")?,
        json_plans: true,
        ..LlmPlannerConfig::default()
    };
    let planner = LlmPlanner::new(Arc::new(router), config);
    let persona = persona(AGENT);
    let bob = dm(5);
    let history = [message(&bob, 1), message(&bob, 2)];
    let media = Default::default();
    let summary = planner
        .summarize(SummaryRequest {
            persona: &persona,
            chat: &bob,
            earlier: "",
            messages: &history,
            media: &media,
            now: t0(),
        })
        .await?
        .ok_or("no summary")?;
    assert_eq!(summary.text, "Bob said hello twice.");
    assert_eq!((summary.first, summary.last), (Some(1), Some(2)));
    let date = jiff::civil::date(2025, 6, 16);
    let day = planner
        .schedule(ScheduleRequest {
            persona: &persona,
            prose: "Up at seven.",
            date,
            zone: "UTC",
            recent: &[],
            now: t0(),
        })
        .await?
        .ok_or("no day")?;
    let day = personad::core::presence::DaySchedule::parse(&day, date)
        .map_err(|p| format!("{p:?}: {day}"))?;
    assert_eq!(day.activities.len(), 2);
    assert_eq!(day.activities[1].name, "day");
    let requests = server.received_requests().await.unwrap_or_default();
    for r in &requests {
        let body: serde_json::Value = serde_json::from_slice(&r.body)?;
        let system = body["messages"][0]["content"].as_str().unwrap_or_default();
        assert!(system.contains("answer with one JSON object"), "{system}");
    }
    assert_eq!(requests.len(), 2);
    Ok(())
}
