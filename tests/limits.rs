//! Resource limits at the process boundary: an LLM endpoint that answers 200 and then
//! streams a body without end (a broken gateway, a hostile endpoint) costs a bounded amount
//! of memory and time: the body is read up to its cap and the request fails naming the
//! provider and the cap. Real HTTP on 127.0.0.1; the server counts what it managed to send.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use personad::adapters::llm::gemini::{GeminiClient, GeminiConfig};
use personad::adapters::llm::openai::{OpenAiClient, OpenAiConfig, Preset};
use personad::core::llm::{LlmRequest, Turn};
use personad::ports::llm::{ApiKey, Llm, LlmError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A server on 127.0.0.1 that answers every request with 200 and a chunked body that never
/// ends; `sent` counts the body bytes the clients accepted.
struct Endless {
    addr: std::net::SocketAddr,
    sent: Arc<AtomicU64>,
}

async fn endless() -> Endless {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&sent);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                // Take the request (headers and a small body) without parsing it.
                let mut buf = vec![0u8; 64 * 1024];
                let _ = socket.read(&mut buf).await;
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b' '; 64 * 1024];
                let framed = [
                    format!("{:x}\r\n", chunk.len()).into_bytes(),
                    chunk,
                    b"\r\n".to_vec(),
                ]
                .concat();
                while socket.write_all(&framed).await.is_ok() {
                    counter.fetch_add(64 * 1024, Ordering::Relaxed);
                }
            });
        }
    });
    Endless { addr, sent }
}

fn request() -> LlmRequest {
    LlmRequest {
        model: "gemini-2.5-flash".to_owned(),
        system: "You are Bob.".to_owned(),
        turns: vec![Turn::user("hi")],
        temperature: None,
        max_output_tokens: None,
        response_schema: None,
    }
}

/// The provider error for a runaway body: permanent, naming the provider and the cap.
fn assert_capped(result: Result<personad::core::llm::LlmOutcome, LlmError>, provider: &str) {
    match result {
        Err(LlmError::Permanent {
            status: Some(200),
            message,
        }) => {
            assert!(message.contains(provider), "{message}");
            assert!(message.contains("1 MiB cap"), "{message}");
            assert!(
                message.contains("PERSONAD_LLM_MAX_RESPONSE_MB"),
                "{message}"
            );
        }
        other => panic!("not refused at the cap: {other:?}"),
    }
}

#[tokio::test]
async fn an_endless_gemini_body_is_cut_at_the_cap() {
    let server = endless().await;
    let mut config = GeminiConfig::new(ApiKey::new("k"));
    config.base_url = format!("http://{}", server.addr);
    config.max_response_bytes = 1024 * 1024;
    let client = GeminiClient::new(config).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(30), client.generate(&request()))
        .await
        .expect("the read stopped at the cap, long before the request timeout");
    assert_capped(result, "Gemini");
    // What the server could push past the cap is socket buffers, not the whole stream.
    let sent = server.sent.load(Ordering::Relaxed);
    assert!(sent < 64 * 1024 * 1024, "{sent} bytes were read");
}

#[tokio::test]
async fn an_endless_chat_completions_body_is_cut_at_the_cap() {
    let server = endless().await;
    let mut config = OpenAiConfig::new(Preset::OpenAi, Some(ApiKey::new("k")));
    config.base_url = format!("http://{}/v1", server.addr);
    config.base_url_overridden = true;
    config.max_response_bytes = 1024 * 1024;
    let client = OpenAiClient::new(config).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(30), client.generate(&request()))
        .await
        .expect("the read stopped at the cap");
    assert_capped(result, "openai");
}

/// The cap comes from `PERSONAD_LLM_MAX_RESPONSE_MB`; a value that is not a number of MiB
/// is a configuration error naming the variable.
#[test]
fn the_cap_is_set_in_mib_from_the_environment() {
    let lookup = |cap: &'static str| {
        move |name: &str| match name {
            "GEMINI_API_KEY" => Some("k".to_string()),
            "PERSONAD_LLM_MAX_RESPONSE_MB" => Some(cap.to_string()),
            _ => None,
        }
    };
    let config = GeminiConfig::from_lookup(lookup("3")).unwrap();
    assert_eq!(config.max_response_bytes, 3 * 1024 * 1024);
    let err = GeminiConfig::from_lookup(lookup("lots")).unwrap_err();
    assert!(
        err.to_string().contains("PERSONAD_LLM_MAX_RESPONSE_MB"),
        "{err}"
    );
    let default =
        GeminiConfig::from_lookup(|name| (name == "GEMINI_API_KEY").then(|| "k".to_string()))
            .unwrap();
    assert_eq!(default.max_response_bytes, 8 * 1024 * 1024);
}

/// Through the binary: the playground planning against an endless endpoint with a 1 MiB cap
/// ends on its own (the plan fails once, naming the cap; it is not retried) instead of
/// growing until the request timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_playground_against_an_endless_endpoint_fails_the_plan_at_the_cap() {
    let server = endless().await;
    let agents = tempfile::tempdir().unwrap();
    std::fs::write(
        agents.path().join("Tess.md"),
        "# Agent Name\nTess\n\n# Agent Phone\n+15550100042\n\n# Agent Instructions\nYou are Tess.\n",
    )
    .unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.arg("--agents")
        .arg(agents.path())
        .arg("--prompts")
        .arg(agents.path())
        .arg("--state")
        .arg(state.path())
        .args([
            "chat",
            "--agent",
            "Tess",
            "--jsonl",
            "--planner",
            "gemini",
            "--fast",
        ])
        .env("GEMINI_API_KEY", "k")
        .env("GEMINI_BASE_URL", format!("http://{}", server.addr))
        .env("PERSONAD_LLM_MAX_RESPONSE_MB", "1")
        .env_remove("GOOGLE_GEMINI_API_KEY")
        .env_remove("PERSONAD_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"{\"text\":\"hello\"}\n").unwrap();
    }
    let waiting = tokio::task::spawn_blocking(move || child.wait_with_output());
    let out = tokio::time::timeout(Duration::from_secs(60), waiting)
        .await
        .expect("the playground ended")
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 MiB cap"), "{stderr}");
    let sent = server.sent.load(Ordering::Relaxed);
    assert!(sent < 64 * 1024 * 1024, "{sent} bytes were read");
}

/// A request dropped while in flight (its plan was superseded by a newer message, the daemon
/// stopped) was sent and is billed: it is counted, as a discarded request, under the model
/// asked for; an answered one is counted with its tokens; `state usage` shows both.
#[tokio::test]
async fn a_request_dropped_in_flight_is_counted_as_discarded() {
    use personad::adapters::llm::usage::{self, CallKind, UsageMeter};
    use personad::adapters::store::StateDir;
    use personad::ports::clock::{SharedClock, VirtualClock};
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let answer = serde_json::json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 5}
    });
    // The first request hangs (its plan is superseded meanwhile); the second is answered.
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(answer.clone())
                .set_delay(Duration::from_secs(60)),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .mount(&server)
        .await;
    let mut config = GeminiConfig::new(ApiKey::new("k"));
    config.base_url = server.uri();
    let client = Arc::new(GeminiClient::new(config).unwrap());
    let state = tempfile::tempdir().unwrap();
    let clock: SharedClock = Arc::new(VirtualClock::new(
        jiff::Timestamp::from_second(1_750_000_000).unwrap(),
        true,
    ));
    let meter = Arc::new(UsageMeter::load(StateDir::new(state.path()), clock));
    let (c, m) = (Arc::clone(&client), Arc::clone(&meter));
    let superseded = tokio::spawn(async move {
        let req = request();
        usage::scoped("Wren", "42", CallKind::Plan, Some(m), c.generate(&req)).await
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server
        .received_requests()
        .await
        .unwrap_or_default()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the request never left"
        );
        tokio::task::yield_now().await;
    }
    superseded.abort();
    assert!(superseded.await.is_err(), "dropped, not answered");
    let req = request();
    let answered = usage::scoped(
        "Wren",
        "42",
        CallKind::Plan,
        Some(Arc::clone(&meter)),
        client.generate(&req),
    );
    assert!(answered.await.is_ok());
    let rows = meter.totals();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].requests, rows[0].discarded, rows[0].prompt_tokens),
        (2, 1, 100),
        "{rows:?}"
    );
    meter.flush().await.unwrap();
    let shown = usage::state_usage(&StateDir::new(state.path()), Some("Wren"), None).unwrap();
    let row = shown.lines().find(|l| l.starts_with("Wren")).unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[4..6], ["2", "1"], "{shown}");
}
