//! The Gemini client against a local wiremock server (127.0.0.1 only), wrapped in the retry
//! policy (`RetryingLlm`) as the daemon uses it, on a virtual clock in auto-advance mode so
//! retry delays cost no real time.

use std::io;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use personad::adapters::llm::gemini::{GeminiClient, GeminiConfig};
use personad::adapters::llm::retry::{RetryConfig, RetryingLlm};
use personad::core::llm::{LlmOutcome, LlmRequest, Part, Role, Turn};
use personad::ports::clock::{self, Clock, VirtualClock};
use personad::ports::llm::{ApiKey, Llm, LlmError};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "SENTINEL_KEY_123";
const MODEL: &str = "gemini-test";
const PATH: &str = "/v1beta/models/gemini-test:generateContent";

fn t0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap()
}

struct Fixture {
    server: MockServer,
    clock: VirtualClock,
    client: RetryingLlm,
}

/// The Gemini client wrapped in the retry policy (default settings unless tweaked).
fn retrying(config: GeminiConfig, retry: RetryConfig, clock: &VirtualClock) -> RetryingLlm {
    let client = GeminiClient::new(config).unwrap();
    RetryingLlm::new(Arc::new(client), retry, Arc::new(clock.clone()))
}

impl Fixture {
    async fn new() -> Fixture {
        Fixture::with(|_, _| {}).await
    }

    async fn with(tweak: impl FnOnce(&mut GeminiConfig, &mut RetryConfig)) -> Fixture {
        let server = MockServer::start().await;
        let clock = VirtualClock::new(t0(), true);
        let mut config = config(&server.uri());
        let mut retry = RetryConfig::default();
        tweak(&mut config, &mut retry);
        let client = retrying(config, retry, &clock);
        Fixture {
            server,
            clock,
            client,
        }
    }

    /// Mounts `response` for the generate path, for the first `times` requests (or forever).
    async fn respond(&self, response: ResponseTemplate, times: Option<u64>) {
        let mock = Mock::given(method("POST")).and(path(PATH));
        let mock = match times {
            Some(n) => mock.respond_with(response).up_to_n_times(n),
            None => mock.respond_with(response),
        };
        mock.mount(&self.server).await;
    }

    async fn generate(&self) -> Result<LlmOutcome, LlmError> {
        self.client.generate(&request()).await
    }

    async fn requests(&self) -> Vec<wiremock::Request> {
        self.server.received_requests().await.unwrap()
    }

    /// What every HTTP error of this fixture ends with: the address tried.
    fn posted(&self) -> String {
        format!(" (POST {}{PATH})", self.server.uri())
    }

    fn elapsed(&self) -> Duration {
        Duration::try_from(self.clock.now().duration_since(t0())).unwrap()
    }
}

fn config(base: &str) -> GeminiConfig {
    let mut config = GeminiConfig::new(ApiKey::new(KEY));
    config.base_url = base.to_owned();
    config
}

fn request() -> LlmRequest {
    LlmRequest {
        model: MODEL.to_owned(),
        system: "You are Bob.".to_owned(),
        turns: vec![
            Turn::user("hi"),
            Turn::model("hello"),
            Turn {
                role: Role::User,
                parts: vec![
                    Part::text("what is this?"),
                    Part::InlineData {
                        mime: "image/jpeg".to_owned(),
                        data: vec![0xff, 0xd8, 0xff, 0xe0, 0x00],
                    },
                ],
            },
        ],
        temperature: Some(0.5),
        max_output_tokens: Some(256),
        response_schema: None,
    }
}

fn answer(parts: Value, finish: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{
            "content": {"role": "model", "parts": parts},
            "finishReason": finish,
            "index": 0
        }],
        "usageMetadata": {"promptTokenCount": 10, "totalTokenCount": 12},
        "modelVersion": "gemini-test-001"
    }))
}

fn text(t: &str) -> ResponseTemplate {
    answer(json!([{"text": t}]), "STOP")
}

fn empty_stop() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{"content": {"role": "model"}, "finishReason": "STOP", "index": 0}]
    }))
}

fn error(code: u16, status: &str, message: &str, details: Value) -> ResponseTemplate {
    ResponseTemplate::new(code).set_body_json(json!({
        "error": {"code": code, "message": message, "status": status, "details": details}
    }))
}

fn retry_info(delay: &str) -> Value {
    json!([
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaMetric": "generate_content_free_tier_requests",
                         "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
    ])
}

fn keys(v: &Value) -> Vec<String> {
    let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    keys
}

#[tokio::test]
async fn request_shape() {
    let f = Fixture::new().await;
    f.respond(text("ok"), None).await;
    assert_eq!(f.generate().await.unwrap(), LlmOutcome::Text("ok".into()));

    let reqs = f.requests().await;
    assert_eq!(reqs.len(), 1);
    let req = &reqs[0];
    assert_eq!(req.method.as_str(), "POST");
    assert_eq!(req.url.path(), PATH);
    assert_eq!(
        req.url.query(),
        None,
        "nothing, least of all key=, in the query"
    );
    assert!(!req.url.as_str().contains(KEY));
    assert_eq!(req.headers.get("x-goog-api-key").unwrap(), KEY);
    assert!(
        req.headers
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );

    let body: Value = req.body_json().unwrap();
    assert_eq!(
        keys(&body),
        [
            "contents",
            "generationConfig",
            "safetySettings",
            "systemInstruction"
        ]
    );
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "You are Bob."}]})
    );
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3);
    for c in contents {
        assert_eq!(keys(c), ["parts", "role"]);
        assert!(matches!(c["role"].as_str(), Some("user" | "model")));
    }
    assert_eq!(
        contents[0],
        json!({"role": "user", "parts": [{"text": "hi"}]})
    );
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [{"text": "hello"}]})
    );
    assert_eq!(
        contents[2],
        json!({"role": "user", "parts": [
            {"text": "what is this?"},
            {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AA="}}
        ]})
    );
    let categories = [
        "HARM_CATEGORY_HARASSMENT",
        "HARM_CATEGORY_HATE_SPEECH",
        "HARM_CATEGORY_SEXUALLY_EXPLICIT",
        "HARM_CATEGORY_DANGEROUS_CONTENT",
    ];
    let expected: Vec<Value> = categories
        .iter()
        .map(|c| json!({"category": c, "threshold": "BLOCK_NONE"}))
        .collect();
    assert_eq!(body["safetySettings"], Value::Array(expected));
    assert_eq!(
        body["generationConfig"],
        json!({"temperature": 0.5, "maxOutputTokens": 256})
    );
}

#[tokio::test]
async fn optional_fields_are_left_out() {
    let f = Fixture::with(|c, _| c.safety_settings.clear()).await;
    f.respond(text("ok"), None).await;
    let req = LlmRequest {
        model: format!("models/{MODEL}"),
        system: "  ".to_owned(),
        turns: vec![Turn::user("hi")],
        temperature: None,
        max_output_tokens: None,
        response_schema: None,
    };
    f.client.generate(&req).await.unwrap();
    let body: Value = f.requests().await[0].body_json().unwrap();
    assert_eq!(keys(&body), ["contents"], "no empty systemInstruction etc.");
}

#[tokio::test]
async fn invalid_requests_are_refused_without_sending() {
    let f = Fixture::new().await;
    f.respond(text("ok"), None).await;
    let mut req = request();
    req.turns.clear();
    assert!(matches!(
        f.client.generate(&req).await,
        Err(LlmError::InvalidRequest(_))
    ));
    let mut req = request();
    req.model = "gemini?key=x".into();
    assert!(matches!(
        f.client.generate(&req).await,
        Err(LlmError::InvalidRequest(_))
    ));
    assert!(f.requests().await.is_empty());
}

#[tokio::test]
async fn text_answer() {
    let f = Fixture::new().await;
    f.respond(text("Hello there!"), None).await;
    assert_eq!(
        f.generate().await.unwrap(),
        LlmOutcome::Text("Hello there!".into())
    );
    assert_eq!(f.elapsed(), Duration::ZERO);
}

#[tokio::test]
async fn thought_parts_are_skipped_and_parts_concatenated() {
    let f = Fixture::new().await;
    let parts = json!([
        {"text": "Let me think about the user...", "thought": true},
        {"text": "Hello, "},
        {"text": "secret plan", "thought": true},
        {"text": "how are you?", "thought": false},
        {"thoughtSignature": "c2ln"}
    ]);
    f.respond(answer(parts, "STOP"), None).await;
    assert_eq!(
        f.generate().await.unwrap(),
        LlmOutcome::Text("Hello, how are you?".into())
    );
}

#[tokio::test]
async fn retry_info_delay_is_honoured() {
    let f = Fixture::new().await;
    f.respond(
        error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota.",
            retry_info("7s"),
        ),
        Some(1),
    )
    .await;
    f.respond(text("finally"), None).await;
    assert_eq!(
        f.generate().await.unwrap(),
        LlmOutcome::Text("finally".into())
    );
    assert_eq!(f.requests().await.len(), 2);
    assert!(f.elapsed() >= Duration::from_secs(7), "{:?}", f.elapsed());
    assert!(f.elapsed() <= Duration::from_secs(60));
}

/// The runtime runs each task holding the virtual clock; a retry delay inside such a task
/// must still let time move (and not deadlock).
#[tokio::test]
async fn retries_inside_a_task_holding_the_clock_let_time_move() {
    let f = Fixture::new().await;
    f.respond(
        error(429, "RESOURCE_EXHAUSTED", "slow down", retry_info("7s")),
        Some(1),
    )
    .await;
    f.respond(text("done"), None).await;
    let hold = f.clock.hold();
    // A real-time guard, so a regression fails instead of hanging.
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        clock::with_task_hold(hold, f.generate()),
    )
    .await
    .expect("generate stalled: the retry delay did not release the task's hold");
    assert_eq!(outcome.unwrap(), LlmOutcome::Text("done".into()));
    assert!(f.elapsed() >= Duration::from_secs(7), "{:?}", f.elapsed());
}

#[tokio::test]
async fn retry_after_header_is_honoured() {
    let f = Fixture::new().await;
    f.respond(
        ResponseTemplate::new(503)
            .insert_header("retry-after", "9")
            .set_body_string("busy"),
        Some(1),
    )
    .await;
    f.respond(text("ok"), None).await;
    assert_eq!(f.generate().await.unwrap(), LlmOutcome::Text("ok".into()));
    assert_eq!(f.requests().await.len(), 2);
    assert!(f.elapsed() >= Duration::from_secs(9), "{:?}", f.elapsed());
}

#[tokio::test]
async fn a_delay_beyond_the_cap_gives_up_at_once() {
    let f = Fixture::new().await;
    f.respond(
        error(
            429,
            "RESOURCE_EXHAUSTED",
            "Quota exceeded.",
            retry_info("3600s"),
        ),
        None,
    )
    .await;
    let err = f.generate().await.unwrap_err();
    assert!(err.is_transient());
    assert_eq!(err.status(), Some(429));
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3600)));
    assert_eq!(f.requests().await.len(), 1);
    assert_eq!(f.elapsed(), Duration::ZERO, "no sleeping");
}

#[tokio::test]
async fn a_spent_daily_quota_is_not_retried() {
    let f = Fixture::new().await;
    let details = json!([
        {"@type": "type.googleapis.com/google.rpc.QuotaFailure",
         "violations": [{"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]},
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "20s"}
    ]);
    f.respond(
        error(429, "RESOURCE_EXHAUSTED", "Daily quota exceeded.", details),
        None,
    )
    .await;
    let err = f.generate().await.unwrap_err();
    assert!(err.is_transient());
    assert_eq!(f.requests().await.len(), 1);
}

#[tokio::test]
async fn persistent_503_fails_after_max_attempts() {
    let f = Fixture::new().await;
    f.respond(
        error(
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
            json!([]),
        ),
        None,
    )
    .await;
    let err = f.generate().await.unwrap_err();
    match &err {
        LlmError::Transient {
            status, message, ..
        } => {
            assert_eq!(*status, Some(503));
            assert_eq!(
                *message,
                format!(
                    "The model is overloaded. Please try again later.{}",
                    f.posted()
                )
            );
        }
        other => panic!("expected Transient, got {other:?}"),
    }
    assert!(err.is_transient());
    assert_eq!(f.requests().await.len(), 3);
    // Two backoffs: 0–2 s, then 0–4 s (2 s base, doubled, full jitter).
    assert!(f.elapsed() <= Duration::from_secs(6), "{:?}", f.elapsed());
}

#[tokio::test]
async fn max_attempts_is_configurable() {
    let f = Fixture::with(|_, r| r.max_attempts = 5).await;
    f.respond(error(500, "INTERNAL", "oops", json!([])), None)
        .await;
    assert!(f.generate().await.unwrap_err().is_transient());
    assert_eq!(f.requests().await.len(), 5);
}

#[tokio::test]
async fn client_errors_are_permanent_and_not_retried() {
    let cases = [
        (
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
        ),
        (
            403,
            "PERMISSION_DENIED",
            "Your API key was reported as leaked.",
        ),
        (
            404,
            "NOT_FOUND",
            "models/gemini-test is not found for API version v1beta.",
        ),
    ];
    for (code, status_text, message) in cases {
        let f = Fixture::new().await;
        f.respond(error(code, status_text, message, json!([])), None)
            .await;
        let err = f.generate().await.unwrap_err();
        // A key problem names where the key comes from.
        let expected = if code == 404 {
            format!("{message}{}", f.posted())
        } else {
            format!(
                "{message}{} (check the key in GEMINI_API_KEY or GOOGLE_GEMINI_API_KEY)",
                f.posted()
            )
        };
        assert_eq!(
            err,
            LlmError::Permanent {
                status: Some(code),
                message: expected
            }
        );
        assert!(!err.is_transient());
        assert_eq!(
            f.requests().await.len(),
            1,
            "HTTP {code} must not be retried"
        );
        assert_eq!(f.elapsed(), Duration::ZERO);
    }
}

#[tokio::test]
async fn prompt_block_reason_is_blocked() {
    let f = Fixture::new().await;
    f.respond(
        ResponseTemplate::new(200).set_body_json(json!({
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT", "safetyRatings": []},
            "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5}
        })),
        None,
    )
    .await;
    assert_eq!(
        f.generate().await.unwrap(),
        LlmOutcome::Blocked {
            reason: "PROHIBITED_CONTENT".into()
        }
    );
    assert_eq!(f.requests().await.len(), 1);
}

#[tokio::test]
async fn safety_finish_reason_is_blocked() {
    let f = Fixture::new().await;
    f.respond(
        ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{
                "finishReason": "SAFETY",
                "index": 0,
                "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT",
                                   "probability": "HIGH", "blocked": true}]
            }]
        })),
        None,
    )
    .await;
    assert_eq!(
        f.generate().await.unwrap(),
        LlmOutcome::Blocked {
            reason: "SAFETY".into()
        }
    );
    assert_eq!(f.requests().await.len(), 1);
}

/// Silence is free: an empty answer is the model choosing to say nothing, so it costs exactly
/// one request and is never retried.
#[tokio::test]
async fn an_empty_stop_answer_is_silence_after_exactly_one_request() {
    let f = Fixture::new().await;
    f.respond(empty_stop(), Some(1)).await;
    f.respond(text("a retry must not happen"), None).await;
    assert_eq!(
        f.generate().await.unwrap(),
        LlmOutcome::Empty {
            finish_reason: Some("STOP".into())
        }
    );
    assert_eq!(f.requests().await.len(), 1);
}

#[tokio::test]
async fn empty_max_tokens_is_not_retried() {
    let f = Fixture::new().await;
    f.respond(
        ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS"}],
            "usageMetadata": {"promptTokenCount": 5, "thoughtsTokenCount": 256}
        })),
        None,
    )
    .await;
    assert_eq!(
        f.generate().await.unwrap(),
        LlmOutcome::Empty {
            finish_reason: Some("MAX_TOKENS".into())
        }
    );
    assert_eq!(f.requests().await.len(), 1);
}

#[tokio::test]
async fn unparseable_success_body_is_a_decode_error() {
    let f = Fixture::new().await;
    f.respond(
        ResponseTemplate::new(200).set_body_string("<html>surprise</html>"),
        None,
    )
    .await;
    assert!(matches!(f.generate().await, Err(LlmError::Decode(_))));
    assert_eq!(f.requests().await.len(), 1);
}

#[tokio::test]
async fn non_json_error_body_becomes_a_short_message() {
    let f = Fixture::new().await;
    let page = format!(
        "<html>\n<body>Bad gateway {}</body></html>",
        "x".repeat(5000)
    );
    f.respond(ResponseTemplate::new(502).set_body_string(page), None)
        .await;
    let err = f.generate().await.unwrap_err();
    let LlmError::Transient {
        status, message, ..
    } = &err
    else {
        panic!("expected Transient, got {err:?}");
    };
    assert_eq!(*status, Some(502));
    assert!(message.contains("Bad gateway"), "{message}");
    assert!(!message.contains('\n'));
    assert!(message.ends_with(&f.posted()), "{message}");
    assert!(
        message.chars().count() <= 301 + f.posted().chars().count(),
        "{}",
        message.len()
    );
    assert_eq!(f.requests().await.len(), 3);
}

#[tokio::test]
async fn connection_refused_is_transient_and_retried() {
    // Bind a port, then free it, so nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let clock = VirtualClock::new(t0(), true);
    let client = retrying(
        config(&format!("http://127.0.0.1:{port}")),
        RetryConfig::default(),
        &clock,
    );
    let err = client.generate(&request()).await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(err.status(), None);
    // The address tried is named, so an operator sees which server did not answer.
    assert!(
        err.to_string()
            .contains(&format!("(POST http://127.0.0.1:{port}{PATH})")),
        "{err}"
    );
}

#[tokio::test]
async fn request_timeout_is_transient() {
    let f = Fixture::with(|c, r| {
        c.request_timeout = Duration::from_millis(200);
        r.max_attempts = 2;
    })
    .await;
    f.respond(text("late").set_delay(Duration::from_secs(3)), None)
        .await;
    let err = f.generate().await.unwrap_err();
    assert!(err.is_transient(), "{err:?}");
    assert_eq!(err.status(), None);
    assert!(err.to_string().contains("timed out"), "{err}");
    assert_eq!(f.requests().await.len(), 2);
}

/// A `Write` into a shared buffer, for capturing tracing output.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Log capture needs this process to itself: tracing's per-callsite interest is shared with
/// the other tests' threads, so the test runs alone in a child process.
#[test]
fn the_key_never_leaks_into_errors_or_logs() {
    const CHILD: &str = "PERSONAD_KEY_LEAK_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(key_never_leaks());
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "the_key_never_leaks_into_errors_or_logs",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

async fn key_never_leaks() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let echo = format!("API key {KEY} not valid");
    let cases: Vec<ResponseTemplate> = vec![
        error(400, "INVALID_ARGUMENT", &echo, json!([])),
        error(403, "PERMISSION_DENIED", "denied", json!([])),
        error(404, "NOT_FOUND", "no such model", json!([])),
        error(429, "RESOURCE_EXHAUSTED", &echo, retry_info("2s")),
        error(429, "RESOURCE_EXHAUSTED", "quota", retry_info("999s")),
        error(503, "UNAVAILABLE", "overloaded", json!([])),
        ResponseTemplate::new(500).set_body_string(format!("proxy says key={KEY}")),
        ResponseTemplate::new(502).set_body_string(""),
        ResponseTemplate::new(200).set_body_string(format!("{{\"candidates\": \"{KEY}\"}}")),
        ResponseTemplate::new(200).set_body_string(format!("not json {KEY}")),
    ];
    let mut errors = Vec::new();
    for case in cases {
        let f = Fixture::new().await;
        f.respond(case, None).await;
        errors.push(f.generate().await.unwrap_err());
    }
    // And a transport failure.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = GeminiClient::new(config(&format!("http://127.0.0.1:{port}"))).unwrap();
    errors.push(client.generate(&request()).await.unwrap_err());
    assert!(!format!("{client:?}").contains(KEY));

    assert_eq!(errors.len(), 11);
    for err in &errors {
        let shown = format!("{err} / {err:?}");
        assert!(!shown.contains(KEY), "key leaked: {shown}");
    }
    assert!(
        errors[0].to_string().contains("[redacted]"),
        "{}",
        errors[0]
    );

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(
        logs.contains("retrying"),
        "the capture must have seen the retry warnings:\n{logs}"
    );
    assert!(logs.contains("WARN"));
    assert!(!logs.contains(KEY), "key leaked into logs:\n{logs}");
}

#[test]
fn missing_key_is_a_config_error_naming_both_variables() {
    let err = GeminiConfig::from_lookup(|_| None).unwrap_err();
    let LlmError::Config(message) = &err else {
        panic!("expected Config, got {err:?}");
    };
    assert!(message.contains("GEMINI_API_KEY"), "{message}");
    assert!(message.contains("GOOGLE_GEMINI_API_KEY"), "{message}");
    // Blank values count as unset.
    assert!(GeminiConfig::from_lookup(|_| Some("  ".into())).is_err());
}

#[test]
fn env_lookup_uses_the_fallback_and_base_url() {
    let config = GeminiConfig::from_lookup(|name| match name {
        "GOOGLE_GEMINI_API_KEY" => Some(KEY.into()),
        "GEMINI_BASE_URL" => Some("http://127.0.0.1:1234/".into()),
        _ => None,
    })
    .unwrap();
    assert_eq!(config.api_key.expose(), KEY);
    assert_eq!(config.base_url, "http://127.0.0.1:1234/");
    assert!(!format!("{config:?}").contains(KEY));
    let config = GeminiConfig::from_lookup(|name| match name {
        "GEMINI_API_KEY" => Some("primary".into()),
        "GOOGLE_GEMINI_API_KEY" => Some("fallback".into()),
        _ => None,
    })
    .unwrap();
    assert_eq!(config.api_key.expose(), "primary");
    assert_eq!(config.base_url, "https://generativelanguage.googleapis.com");
}

/// `from_env` itself, in a child process whose environment lacks both key variables (so this
/// process never has to mutate its own environment).
#[test]
fn from_env_without_a_key_is_a_config_error() {
    const CHILD: &str = "PERSONAD_TEST_FROM_ENV_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let err = GeminiConfig::from_env().unwrap_err();
        assert!(matches!(&err, LlmError::Config(m) if m.contains("GEMINI_API_KEY")));
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "from_env_without_a_key_is_a_config_error",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_GEMINI_API_KEY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed:\n{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[tokio::test]
async fn bad_configs_are_refused() {
    let empty = GeminiConfig::new(ApiKey::new(" "));
    assert!(matches!(
        GeminiClient::new(empty),
        Err(LlmError::Config(m)) if m.contains("GEMINI_API_KEY")
    ));
    let mut bad_url = config("ftp://example.invalid");
    bad_url.base_url = "ftp://example.invalid".into();
    assert!(matches!(
        GeminiClient::new(bad_url),
        Err(LlmError::Config(_))
    ));
    let header_breaker = GeminiConfig::new(ApiKey::new("abc\ndef"));
    let err = GeminiClient::new(header_breaker).unwrap_err();
    assert!(!err.to_string().contains("abc"));
}
