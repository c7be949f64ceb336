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
