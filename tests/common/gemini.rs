//! A mock Gemini for the memory tests: its answers, the newest message of a request, the
//! request bodies it received, and the real LLM planner pointed at it.

use std::sync::Arc;

use personad::adapters::llm::gemini::{GeminiClient, GeminiConfig};
use personad::adapters::llm::retry::{RetryConfig, RetryingLlm};
use personad::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use personad::adapters::memory::user_id_for;
use personad::core::model::{Chat, ChatId, ChatKind};
use personad::ports::clock::SharedClock;
use personad::ports::llm::ApiKey;
use personad::ports::planner::SharedPlanner;
use serde_json::{Value, json};
use wiremock::matchers::{method, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A generateContent answer of one text part.
pub(crate) fn reply(text: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]
    }))
}

/// A mock Gemini whose every generateContent answer is `answer(the request's newest message)`.
pub(crate) async fn answering(
    answer: impl Fn(&str) -> ResponseTemplate + Send + Sync + 'static,
) -> MockServer {
    answering_with_body(move |_, newest| answer(newest)).await
}

/// A mock Gemini answering `answer(the whole request body, its newest message)`.
pub(crate) async fn answering_with_body(
    answer: impl Fn(&str, &str) -> ResponseTemplate + Send + Sync + 'static,
) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path_regex(r"^/v1beta/models/[^/]+:generateContent$"))
        .respond_with(move |req: &wiremock::Request| {
            let body = String::from_utf8_lossy(&req.body).into_owned();
            let json: Value = serde_json::from_str(&body).unwrap_or_default();
            answer(&body, &newest_message(&json))
        })
        .mount(&server)
        .await;
    server
}

/// The newest message of a request (the turn before the final `[context]` turn).
pub(crate) fn newest_message(body: &Value) -> String {
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    contents
        .iter()
        .rev()
        .nth(1)
        .and_then(|c| c["parts"][0]["text"].as_str())
        .unwrap_or("")
        .to_string()
}

/// The LLM planner on the mock at `uri`.
pub(crate) fn llm_planner(uri: &str, clock: SharedClock) -> LlmPlanner {
    let mut cfg = GeminiConfig::new(ApiKey::new("k"));
    cfg.base_url = uri.to_string();
    let client = GeminiClient::new(cfg).unwrap_or_else(|e| panic!("client: {e}"));
    let llm = RetryingLlm::new(Arc::new(client), RetryConfig::default(), clock);
    LlmPlanner::new(Arc::new(llm), LlmPlannerConfig::default())
}

/// A harness's planner: the LLM planner on the mock at `uri`.
pub(crate) fn planner(uri: String) -> impl FnOnce(SharedClock) -> SharedPlanner {
    move |clock| Arc::new(llm_planner(&uri, clock))
}

/// The direct chat with `name` (the in-memory Telegram's ids).
pub(crate) fn person(name: &str) -> Chat {
    Chat {
        id: ChatId(user_id_for(name)),
        kind: ChatKind::Direct,
        title: name.into(),
    }
}

/// Every request body the mock received, in order.
pub(crate) async fn bodies(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect()
}
