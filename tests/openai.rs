//! The OpenAI-compatible client against a local wiremock server (127.0.0.1 only): the request
//! shape (roles, content, bearer header, no key in the URL), the error envelopes (401/403,
//! 429 with Retry-After, 5xx, timeouts, finish reasons, empty choices), usage metering, the
//! provider resolution of every `LLM` form, and `personad chat` against `OPENAI_BASE_URL`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use personad::adapters::llm::openai::{
    LOCAL_MAX_OUTPUT_TOKENS, OpenAiClient, OpenAiConfig, Preset,
};
use personad::adapters::llm::provider::{self, Router};
use personad::adapters::llm::usage::{self, CallKind, UsageMeter};
use personad::adapters::store::StateDir;
use personad::core::llm::{LlmChoice, ProviderKind};
use personad::core::llm::{LlmOutcome, LlmRequest, Part, Role, Turn};
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::llm::{ApiKey, Llm, LlmError};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "SENTINEL_OPENAI_KEY_42";
const PATH: &str = "/v1/chat/completions";

fn client(server: &MockServer, key: Option<&str>) -> OpenAiClient {
    let mut c = OpenAiConfig::new(Preset::OpenAi, key.map(ApiKey::new));
    c.base_url = format!("{}/v1", server.uri());
    c.base_url_overridden = true;
    c.request_timeout = Duration::from_millis(500);
    OpenAiClient::new(c).unwrap_or_else(|e| panic!("client: {e}"))
}

fn request() -> LlmRequest {
    LlmRequest {
        model: "gpt-test".into(),
        system: "You are Wren.".into(),
        turns: vec![
            Turn::user("[metadata] sender=\"Bob\" message_id=1"),
            Turn {
                role: Role::Model,
                parts: vec![Part::text("[metadata] message_id=2"), Part::text("hi Bob")],
            },
            Turn::user("what now?"),
        ],
        temperature: Some(0.5),
        max_output_tokens: Some(300),
        response_schema: None,
    }
}

fn completion(content: Value, finish: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test-2025",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230,
                  "prompt_tokens_details": {"cached_tokens": 1024}}
    }))
}

async fn serve(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

async fn bodies(server: &MockServer) -> Vec<(wiremock::Request, Value)> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            (r, v)
        })
        .collect()
}

/// Roles map system → system, user → user, model → assistant; text parts join into one
/// string; the key is a bearer header and nowhere in the URL; optional fields go as the
/// compatible servers know them.
#[tokio::test]
async fn request_shape() {
    let server = serve(completion(json!("# «send»\nhello"), "stop")).await;
    let out = client(&server, Some(KEY)).generate(&request()).await;
    assert_eq!(out, Ok(LlmOutcome::Text("# «send»\nhello".into())));
    let reqs = bodies(&server).await;
    assert_eq!(reqs.len(), 1);
    let (req, body) = &reqs[0];
    assert_eq!(
        req.headers
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert!(!req.url.as_str().contains(KEY), "no key in the URL");
    assert_eq!(req.url.query(), None);
    assert_eq!(
        body,
        &json!({
            "model": "gpt-test",
            "messages": [
                {"role": "system", "content": "You are Wren."},
                {"role": "user", "content": "[metadata] sender=\"Bob\" message_id=1"},
                {"role": "assistant", "content": "[metadata] message_id=2\nhi Bob"},
                {"role": "user", "content": "what now?"}
            ],
            "temperature": 0.5,
            "max_tokens": 300,
            "stop": ["\n[metadata]", "\n[context]"]
        })
    );
    // A server of the operator's own gets a cap on the answer when none is configured.
    let uncapped = LlmRequest {
        max_output_tokens: None,
        ..request()
    };
    let _ = client(&server, Some(KEY)).generate(&uncapped).await;
    let reqs = bodies(&server).await;
    assert_eq!(reqs[1].1["max_tokens"], json!(LOCAL_MAX_OUTPUT_TOKENS));
}

/// An HTTP error and a refused connection name the address tried, without the credentials
/// a base URL may carry.
#[tokio::test]
async fn errors_name_the_address_tried() {
    let server = serve(ResponseTemplate::new(404)).await;
    let error_from = |base_url: String| async move {
        let mut c = OpenAiConfig::new(Preset::OpenAi, None);
        c.base_url = base_url;
        c.base_url_overridden = true;
        OpenAiClient::new(c)
            .unwrap_or_else(|e| panic!("client: {e}"))
            .generate(&request())
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let authority = server.uri().replacen("http://", "http://user:secret@", 1);
    let err = error_from(format!("{authority}/v1")).await;
    let url = format!("{}/v1/chat/completions", server.uri());
    assert!(err.contains("404") && err.contains(&url), "{err}");
    assert!(!err.contains("secret"), "{err}");
    let err = error_from("http://127.0.0.1:9/v1".into()).await;
    assert!(
        err.contains("http://127.0.0.1:9/v1/chat/completions"),
        "{err}"
    );
}

/// A request given up on, by its timeout or because the call was dropped (a superseded plan,
/// a stop), closes its connection: the server sees the end of the stream, which is how
/// llama.cpp's server and Ollama learn to stop generating for it, instead of a connection kept
/// open while the abandoned generation runs on and the retry waits behind it.
#[tokio::test]
async fn an_abandoned_request_closes_its_connection_so_the_server_can_stop() -> common::TestResult {
    use tokio::io::AsyncReadExt;
    for dropped in [false, true] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        // A server that reads the request, never answers, and reports when the client hangs up.
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await?;
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                if socket.read(&mut buf).await? == 0 {
                    return Ok::<bool, std::io::Error>(true);
                }
            }
        });
        let mut c = OpenAiConfig::new(Preset::OpenAi, None);
        c.base_url = format!("http://{addr}/v1");
        c.base_url_overridden = true;
        c.request_timeout = std::time::Duration::from_millis(if dropped { 60_000 } else { 300 });
        let client = OpenAiClient::new(c)?;
        let req = request();
        if dropped {
            // The caller goes away (the plan was superseded) well before any timeout.
            let call = client.generate(&req);
            let _ = tokio::time::timeout(std::time::Duration::from_millis(300), call).await;
        } else {
            let err = client.generate(&req).await.err().ok_or("no error")?;
            assert!(err.is_transient(), "{err}");
        }
        let hung_up = tokio::time::timeout(std::time::Duration::from_secs(10), server).await;
        assert!(
            matches!(hung_up, Ok(Ok(Ok(true)))),
            "dropped={dropped}: the connection stayed open: {hung_up:?}"
        );
    }
    Ok(())
}

/// Images go as data-URI parts (vision models); audio is refused before sending, and a
/// server without a key gets no `Authorization` header.
#[tokio::test]
async fn images_are_data_uris_and_audio_is_refused_unsent() {
    let server = serve(completion(json!("a cat"), "stop")).await;
    let c = client(&server, None);
    let mut req = request();
    req.turns = vec![Turn {
        role: Role::User,
        parts: vec![
            Part::InlineData {
                mime: "image/png".into(),
                data: vec![1, 2, 3],
            },
            Part::text("describe"),
        ],
    }];
    assert_eq!(c.generate(&req).await, Ok(LlmOutcome::Text("a cat".into())));
    let reqs = bodies(&server).await;
    assert!(
        reqs[0].0.headers.get("authorization").is_none(),
        "no key, no header"
    );
    assert_eq!(
        reqs[0].1["messages"][1]["content"],
        json!([
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AQID"}},
            {"type": "text", "text": "describe"}
        ])
    );
    req.turns[0].parts[0] = Part::InlineData {
        mime: "audio/ogg".into(),
        data: vec![1],
    };
    let err = c.generate(&req).await.unwrap_err();
    assert!(
        matches!(err, LlmError::InvalidRequest(ref m) if m.contains("audio/ogg")),
        "{err}"
    );
    assert_eq!(bodies(&server).await.len(), 1, "nothing sent for audio");
}

/// The error envelopes: 401/403 permanent naming the variable (never the key), 429 transient
/// with Retry-After, 5xx transient, 400 permanent, a timeout transient.
#[tokio::test]
async fn error_envelopes_are_classified() {
    let envelope = |code: u16, msg: &str| {
        ResponseTemplate::new(code).set_body_json(json!({"error": {
            "message": msg, "type": "invalid_request_error", "code": null
        }}))
    };
    let server = serve(envelope(401, &format!("Incorrect API key provided: {KEY}"))).await;
    let err = client(&server, Some(KEY))
        .generate(&request())
        .await
        .unwrap_err();
    assert!(!err.is_transient());
    assert_eq!(err.status(), Some(401));
    let shown = err.to_string();
    assert!(shown.contains("OPENAI_API_KEY"), "{shown}");
    assert!(!shown.contains(KEY), "{shown}");

    let server = serve(envelope(403, "forbidden")).await;
    let err = client(&server, Some(KEY))
        .generate(&request())
        .await
        .unwrap_err();
    assert!(!err.is_transient() && err.to_string().contains("OPENAI_API_KEY"));

    let server =
        serve(envelope(429, "Rate limit reached").insert_header("retry-after", "12")).await;
    let err = client(&server, Some(KEY))
        .generate(&request())
        .await
        .unwrap_err();
    assert!(err.is_transient());
    assert_eq!(err.retry_after(), Some(Duration::from_secs(12)));

    for code in [500u16, 502, 503] {
        let server = serve(envelope(code, "The server had an error")).await;
        let err = client(&server, Some(KEY))
            .generate(&request())
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{code}: {err}");
        assert_eq!(err.status(), Some(code));
    }

    let server = serve(envelope(400, "Unsupported parameter")).await;
    let err = client(&server, Some(KEY))
        .generate(&request())
        .await
        .unwrap_err();
    assert!(!err.is_transient());

    let server = serve(completion(json!("late"), "stop").set_delay(Duration::from_secs(3))).await;
    let err = client(&server, Some(KEY))
        .generate(&request())
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(err.status(), None);

    let server = serve(ResponseTemplate::new(200).set_body_string("not json")).await;
    let err = client(&server, Some(KEY))
        .generate(&request())
        .await
        .unwrap_err();
    assert!(matches!(err, LlmError::Decode(_)));
}

/// Finish reasons and odd bodies: `length` without text is empty (silence), `content_filter`
/// is blocked, empty `choices` is empty.
#[tokio::test]
async fn finish_reasons_and_empty_choices() {
    let server = serve(completion(Value::Null, "length")).await;
    assert_eq!(
        client(&server, Some(KEY)).generate(&request()).await,
        Ok(LlmOutcome::Empty {
            finish_reason: Some("length".into())
        })
    );
    let server = serve(completion(json!("…"), "content_filter")).await;
    assert_eq!(
        client(&server, Some(KEY)).generate(&request()).await,
        Ok(LlmOutcome::Blocked {
            reason: "content_filter".into()
        })
    );
    let server = serve(ResponseTemplate::new(200).set_body_json(json!({"choices": []}))).await;
    assert_eq!(
        client(&server, Some(KEY)).generate(&request()).await,
        Ok(LlmOutcome::Empty {
            finish_reason: None
        })
    );
}

/// Each response's prompt, cached and output tokens are summed per agent, model and day,
/// persisted in the state dir, and read back by the state command's renderer.
#[tokio::test]
async fn usage_is_summed_per_agent_model_and_day_and_persisted() {
    let server = serve(completion(json!("hi"), "stop")).await;
    let c = client(&server, Some(KEY));
    let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dir = StateDir::new(state.path());
    let clock: SharedClock = Arc::new(VirtualClock::new(common::t0(), true));
    let meter = Arc::new(UsageMeter::load(dir.clone(), Arc::clone(&clock)));
    for _ in 0..3 {
        let r = usage::scoped(
            "Wren",
            "42",
            CallKind::Plan,
            Some(Arc::clone(&meter)),
            c.generate(&request()),
        )
        .await;
        assert!(r.is_ok());
    }
    // Outside a scope usage is only logged.
    let _ = c.generate(&request()).await;
    meter.flush().await.unwrap_or_else(|e| panic!("{e}"));
    let rows = meter.totals();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(
        (r.agent.as_str(), r.model.as_str(), r.day.as_str()),
        ("Wren", "gpt-test-2025", "2025-06-15")
    );
    assert_eq!(
        (
            r.requests,
            r.prompt_tokens,
            r.cached_tokens,
            r.output_tokens
        ),
        (3, 3600, 3072, 90)
    );
    let (read, problems) = usage::read_totals(&dir);
    assert!(problems.is_empty());
    assert_eq!(read, rows);
    // A restarted meter continues the totals.
    let again = UsageMeter::load(dir.clone(), clock);
    assert_eq!(again.totals(), rows);
    let text = usage::state_usage(&dir, None, None).unwrap_or_default();
    assert!(
        text.contains("gpt-test-2025") && text.contains("3600"),
        "{text}"
    );
    let prices = state.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"gpt-test*": {"input": 1.0, "cached_input": 0.1, "output": 10.0}}"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let text = usage::state_usage(&dir, Some("Wren"), Some(&prices)).unwrap_or_default();
    // (3600 − 3072) × 1 + 3072 × 0.1 + 90 × 10 = 528 + 307.2 + 900 = 1735.2 per million.
    assert!(text.contains("0.0017"), "{text}");
}

/// Every form of the `LLM` heading resolves to the provider the original would use.
#[test]
fn provider_resolution_of_every_llm_form() {
    let r = |s: &str| provider::resolve(s).map(|c| (c.provider, c.model));
    use ProviderKind::*;
    assert_eq!(r("gemini"), Ok((Gemini, None)));
    assert_eq!(r("Gemini"), Ok((Gemini, None)));
    assert_eq!(r("gpt"), Ok((OpenAi, None)));
    assert_eq!(r("openai"), Ok((OpenAi, None)));
    assert_eq!(r("grok"), Ok((Grok, None)));
    assert_eq!(r("openrouter"), Ok((OpenRouter, None)));
    assert_eq!(r("ollama"), Ok((Ollama, None)));
    assert_eq!(
        r("gemini-2.5-pro"),
        Ok((Gemini, Some("gemini-2.5-pro".into())))
    );
    assert_eq!(r("gpt-5-mini"), Ok((OpenAi, Some("gpt-5-mini".into()))));
    assert_eq!(r("o4-mini"), Ok((OpenAi, Some("o4-mini".into()))));
    assert_eq!(r("grok-4-fast"), Ok((Grok, Some("grok-4-fast".into()))));
    assert_eq!(
        r("anthropic/claude-sonnet-4"),
        Ok((OpenRouter, Some("anthropic/claude-sonnet-4".into())))
    );
    assert_eq!(r("ollama:qwen3:8b"), Ok((Ollama, Some("qwen3:8b".into()))));
    assert_eq!(
        r("openai:my-local-model"),
        Ok((OpenAi, Some("my-local-model".into())))
    );
    for bad in ["", "llama3", "two words", "ollama:", "/x"] {
        assert!(r(bad).is_err(), "{bad:?}");
    }

    // Persona headings: `LLM` wins, `LLM Model` fills in its model, `LLM Model` alone keeps
    // working (unknown names go to the default provider), nothing means the default.
    let default = LlmChoice {
        provider: Ollama,
        model: None,
    };
    let p = |llm: Option<&str>, model: Option<&str>| {
        personad::core::llm::persona_choice(llm, model, &default).map(|c| c.route())
    };
    assert_eq!(p(Some("grok"), None), Ok("grok".into()));
    assert_eq!(p(Some("openai"), Some("gpt-5")), Ok("openai:gpt-5".into()));
    assert_eq!(
        p(None, Some("gemini-2.5-flash")),
        Ok("gemini:gemini-2.5-flash".into())
    );
    assert_eq!(p(None, Some("llama3.2")), Ok("ollama:llama3.2".into()));
    assert_eq!(p(None, None), Ok("ollama".into()));

    // A persona file with an `LLM` heading parses; a bad value names its line.
    let ok = common::persona_with("Wren", "# LLM\ngrok\n");
    assert_eq!(ok.llm.as_deref(), Some("grok"));
    let src = "# Agent Name\nX\n\n# Agent Phone\n+15550100001\n\n# Agent Instructions\nHi.\n\n# LLM\nnonsense model\n";
    let parsed =
        personad::adapters::persona_loader::parse_persona(std::path::Path::new("x.md"), src, &[]);
    assert!(parsed.persona.is_none());
    let shown = format!("{:?}", parsed.problems);
    assert!(
        shown.contains("unknown LLM") && shown.contains("line: Some(11)"),
        "{shown}"
    );
}

/// The router hands a request to the provider its route names, with the bare model, and a
/// provider without configuration answers with an error naming the variable.
#[tokio::test]
async fn the_router_dispatches_by_route_and_names_missing_keys() {
    let server = serve(completion(json!("routed"), "stop")).await;
    let uri = format!("{}/v1", server.uri());
    let env = move |name: &str| match name {
        "OLLAMA_BASE_URL" => Some(uri.clone()),
        "OLLAMA_MODEL" => Some("qwen3:8b".into()),
        _ => None,
    };
    let router = Router::from_lookup(env, Duration::from_secs(5));
    assert!(router.check(ProviderKind::Ollama).is_ok());
    let missing = router
        .check(ProviderKind::OpenRouter)
        .unwrap_err()
        .to_string();
    assert!(missing.contains("OPENROUTER_API_KEY"), "{missing}");
    assert!(
        router
            .check(ProviderKind::Gemini)
            .unwrap_err()
            .to_string()
            .contains("GEMINI_API_KEY")
    );

    let mut req = request();
    req.model = "ollama".into();
    assert_eq!(
        router.generate(&req).await,
        Ok(LlmOutcome::Text("routed".into()))
    );
    req.model = "ollama:llama3.2".into();
    let _ = router.generate(&req).await;
    let models: Vec<Value> = bodies(&server)
        .await
        .into_iter()
        .map(|(_, b)| b["model"].clone())
        .collect();
    assert_eq!(models, [json!("qwen3:8b"), json!("llama3.2")]);

    req.model = "grok".into();
    let err = router.generate(&req).await.unwrap_err();
    assert!(
        matches!(err, LlmError::Config(ref m) if m.contains("GROK_API_KEY")),
        "{err}"
    );
}

/// `personad chat --agent Wren` (the sample persona) against an OpenAI-compatible server
/// named by OPENAI_BASE_URL, as with Ollama or llama.cpp: the reply comes from the server,
/// the request carries Wren's persona, and the key is never printed.
#[tokio::test]
async fn the_playground_talks_to_an_openai_compatible_server() -> common::TestResult {
    let server = serve(completion(
        json!("# «send»\nhello from the compatible server"),
        "stop",
    ))
    .await;
    let state = tempfile::tempdir()?;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--state")
        .arg(state.path())
        .args([
            "-vv",
            "--log-format",
            "json",
            "chat",
            "--agent",
            "Wren",
            "--jsonl",
            "--fast",
        ])
        // The original's variable for the default LLM.
        .env("DEFAULT_AGENT_LLM", "openai")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_API_KEY", KEY)
        .env("OPENAI_MODEL", "local-model");
    for var in [
        "GEMINI_API_KEY",
        "GOOGLE_GEMINI_API_KEY",
        "PERSONAD_LLM",
        "PERSONAD_PRICES",
        "PERSONAD_MODEL",
        "PERSONAD_LOG",
        "PERSONAD_PLANNER",
        "PERSONAD_AGENTS_DIR",
        "PERSONAD_STATE_DIR",
    ] {
        cmd.env_remove(var);
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = common::run_to_end(cmd, "{\"text\":\"hi Wren\"}\n".into()).await?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("hello from the compatible server"),
        "{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains(KEY) && !stderr.contains(KEY),
        "the key never shows, even at -vv"
    );
    // Usage is logged at DEBUG with agent, chat, provider and model.
    let usage_line: Value = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["msg"] == json!("llm usage"))
        .unwrap_or_else(|| panic!("no usage line in:\n{stderr}"));
    let f = &usage_line;
    assert_eq!(usage_line["level"], json!("debug"));
    assert_eq!(
        (&f["agent"], &f["provider"], &f["model"]),
        (&json!("Wren"), &json!("openai"), &json!("gpt-test-2025"))
    );
    assert_eq!(
        (
            &f["prompt_tokens"],
            &f["cached_tokens"],
            &f["output_tokens"]
        ),
        (&json!(1200), &json!(1024), &json!(30))
    );
    assert!(
        f["chat"].is_i64(),
        "the chat is named by its id: {usage_line}"
    );
    let reqs = bodies(&server).await;
    assert_eq!(reqs.len(), 1, "{stderr}");
    let body = &reqs[0].1;
    assert_eq!(body["model"], json!("local-model"));
    assert_eq!(body["messages"][0]["role"], json!("system"));
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.contains("Wren")),
        "the persona is in the system message"
    );
    assert!(body["messages"].as_array().is_some_and(|m| m.len() >= 3));

    // The request's usage was summed for Wren and is shown by `personad state usage`.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_personad"))
        .arg("--state")
        .arg(state.path())
        .args(["state", "usage", "--agent", "Wren"])
        .env_remove("PERSONAD_PRICES")
        .output()?;
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let row = shown
        .lines()
        .find(|l| l.starts_with("Wren"))
        .unwrap_or_else(|| panic!("no row for Wren: {shown}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[1], "gpt-test-2025");
    assert_eq!(cols[2], "plan", "the kind of call: {row}");
    assert_eq!(&cols[4..9], ["1", "0", "1200", "1024", "30"], "{row}");
    assert_eq!(cols[9], "?", "no built-in price for this model");
    Ok(())
}

/// Media descriptions through an OpenAI-compatible vision model (`--media-model
/// openai:vision-mock`): the photo goes as a data-URI image part, its description reaches the
/// plan's prompt, and the describe call's usage is summed under `(media)`.
#[tokio::test]
async fn photos_are_described_by_an_openai_compatible_vision_model() -> common::TestResult {
    use wiremock::matchers::body_partial_json;
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .and(body_partial_json(json!({"model": "vision-mock"})))
        .respond_with(completion(
            json!("a tabby cat asleep on a poetry shelf"),
            "stop",
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(PATH))
        .and(body_partial_json(json!({"model": "chat-mock"})))
        .respond_with(completion(json!("# «send»\nWhat a cat!"), "stop"))
        .mount(&server)
        .await;
    let state = tempfile::tempdir()?;
    let files = tempfile::tempdir()?;
    let photo = files.path().join("cat.jpg");
    std::fs::write(&photo, [0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3])?;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--state")
        .arg(state.path())
        .args(["chat", "--agent", "Wren", "--jsonl", "--fast"])
        .args([
            "--llm",
            "openai:chat-mock",
            "--media-model",
            "openai:vision-mock",
        ])
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env_remove("OPENAI_API_KEY");
    for var in [
        "GEMINI_API_KEY",
        "GOOGLE_GEMINI_API_KEY",
        "DEFAULT_AGENT_LLM",
        "PERSONAD_MODEL",
        "PERSONAD_LOG",
        "PERSONAD_PLANNER",
        "PERSONAD_MEDIA_MODEL",
        "PERSONAD_AGENTS_DIR",
        "PERSONAD_STATE_DIR",
    ] {
        cmd.env_remove(var);
    }
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    // A voice note too: no OpenAI-compatible model takes audio here, so without Gemini it is
    // shown as not transcribed, and nothing is sent for it.
    let voice = files.path().join("note.ogg");
    std::fs::write(&voice, b"OggS\0\x02rest-of-an-ogg-file")?;
    let line = json!({"media": {"kind": "photo", "path": photo}});
    let voice_line = json!({"media": {"kind": "voice", "path": voice}});
    let out = common::run_to_end(cmd, format!("{line}\n{voice_line}\n")).await?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let reqs = bodies(&server).await;
    let describe: Vec<&Value> = reqs
        .iter()
        .map(|(_, b)| b)
        .filter(|b| b["model"] == json!("vision-mock"))
        .collect();
    assert_eq!(describe.len(), 1, "{stderr}");
    let parts = describe[0]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].clone())
        .unwrap_or_default();
    assert!(
        parts[0]["image_url"]["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("data:image/jpeg;base64,")),
        "{parts}"
    );
    let plan = reqs
        .iter()
        .map(|(_, b)| b)
        .find(|b| b["model"] == json!("chat-mock"))
        .map(|b| b.to_string())
        .unwrap_or_default();
    assert!(
        plan.contains("a tabby cat asleep on a poetry shelf"),
        "{plan}"
    );
    assert!(
        plan.contains("[voice file=\\\"note.ogg\\\" (not transcribed)]"),
        "{plan}"
    );
    assert!(stdout.contains("What a cat!"), "{stdout}");

    let (rows, _) = usage::read_totals(&StateDir::new(state.path()));
    let agents: Vec<&str> = rows.iter().map(|r| r.agent.as_str()).collect();
    assert!(
        agents.contains(&"(media)") && agents.contains(&"Wren"),
        "{rows:?}"
    );
    // Each under its own kind: the description as `media`, the plan as `plan`.
    for r in &rows {
        let kind = if r.agent == "(media)" {
            CallKind::Media
        } else {
            CallKind::Plan
        };
        assert_eq!(r.kind, kind, "{rows:?}");
    }
    Ok(())
}

/// `personad chat --agent Wren --jsonl --fast --llm openai` (and `extra`) in a clean
/// environment, on the OpenAI-compatible `server` (model `local`), its state under `state`.
fn local_chat(
    server: &MockServer,
    state: &std::path::Path,
    extra: &[&str],
) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_personad"));
    common::clear_env(&mut cmd);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("--state")
        .arg(state)
        .args([
            "chat", "--agent", "Wren", "--jsonl", "--fast", "--llm", "openai",
        ])
        .args(extra)
        .env("OPENAI_BASE_URL", format!("{}/v1", server.uri()))
        .env("OPENAI_MODEL", "local")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// What a small local model (SmolLM2-135M behind llama.cpp's server) was seen to answer,
/// replayed by a mock: it copies the history's `[metadata]` line, writes the other person's
/// next line, or answers with the `[context]` turn itself. Through the playground, only the
/// persona's own words are sent; an answer that is only scaffolding sends nothing and is
/// counted (`reply_scaffolding_only`), and the raw answer is logged at -v.
#[tokio::test]
async fn a_small_models_echoed_scaffolding_never_reaches_the_chat() -> common::TestResult {
    let server = MockServer::start().await;
    let answers = [
        "[metadata] sender=\"Alice\" sender_id=77 message_id=2 time=\"Saturday 10:00\"\nHi Alice! I'm painting today.\nAlice: that sounds lovely, what are you painting?\nWren: a heron.",
        "[context]\nCurrent time: Saturday, 27 November 2026.\nRespond to message 4.",
    ];
    // The later request carries both messages: its mock goes first.
    for (i, answer) in answers.iter().enumerate().rev() {
        Mock::given(method("POST"))
            .and(wiremock::matchers::body_string_contains(if i == 0 {
                "how are you"
            } else {
                "and now"
            }))
            .respond_with(completion(json!(answer), "stop"))
            .mount(&server)
            .await;
    }
    let state = tempfile::tempdir()?;
    let mut cmd = local_chat(
        &server,
        state.path(),
        &["--user", "Alice", "-v", "--log-format", "json"],
    );
    cmd.env("OPENAI_API_KEY", KEY);
    let input = "{\"text\":\"how are you?\"}\n{\"text\":\"and now?\",\"after_ms\":600000}\n";
    let out = common::run_to_end(cmd, input.into()).await?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("Hi Alice! I'm painting today."),
        "{stdout}\n{stderr}"
    );
    for echo in [
        "[metadata]",
        "sender_id",
        "[context]",
        "Current time",
        "Respond to message",
        "Alice:",
        "heron",
    ] {
        assert!(
            !stdout.contains(echo),
            "{echo:?} reached the chat:\n{stdout}"
        );
    }
    assert_eq!(bodies(&server).await.len(), 2, "{stderr}");
    let logged = |event: &str| {
        stderr
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["event"] == json!(event) || v["msg"] == json!(event))
            .count()
    };
    assert_eq!(logged("reply_scaffolding_only"), 1, "{stderr}");
    assert_eq!(logged("raw model answer"), 2, "{stderr}");
    Ok(())
}

/// A request with a response schema (the group classifier's) asks an OpenAI-compatible server
/// for structured output: `response_format` with the schema as JSON Schema (lower-case types,
/// a nullable field as `[type, "null"]`, no `propertyOrdering`, objects closed).
#[tokio::test]
async fn a_schema_goes_as_response_format_in_json_schema_form() {
    let server = serve(completion(json!("{}"), "stop")).await;
    let req = LlmRequest {
        response_schema: Some(personad::core::group::classifier::response_schema()),
        ..request()
    };
    let _ = client(&server, None).generate(&req).await;
    let reqs = bodies(&server).await;
    let format = &reqs[0].1["response_format"];
    assert_eq!(format["type"], json!("json_schema"), "{format}");
    let schema = &format["json_schema"]["schema"];
    assert_eq!(schema["type"], json!("object"), "{schema}");
    assert_eq!(schema["additionalProperties"], json!(false), "{schema}");
    assert_eq!(schema["properties"]["addressed"]["type"], json!("boolean"));
    assert_eq!(
        schema["properties"]["reaction"]["type"],
        json!(["string", "null"])
    );
    assert!(schema.get("propertyOrdering").is_none(), "{schema}");
    assert!(
        schema["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("addressed")))
    );
    // Without a schema, no response_format.
    let _ = client(&server, None).generate(&request()).await;
    assert!(bodies(&server).await[1].1.get("response_format").is_none());
    // llama-cpp-python's server takes the schema in its own form (OPENAI_RESPONSE_FORMAT).
    let config = OpenAiConfig::from_lookup(Preset::OpenAi, |name| match name {
        "OPENAI_BASE_URL" => Some(format!("{}/v1", server.uri())),
        "OPENAI_RESPONSE_FORMAT" => Some("json_object".into()),
        _ => None,
    });
    let local = OpenAiClient::new(config.unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("client: {e}"));
    let _ = local.generate(&req).await;
    let format = &bodies(&server).await[2].1["response_format"];
    assert_eq!(format["type"], json!("json_object"), "{format}");
    assert_eq!(
        format["schema"]["properties"]["addressed"]["type"],
        json!("boolean")
    );
    let bad = OpenAiConfig::from_lookup(Preset::OpenAi, |name| match name {
        "OPENAI_BASE_URL" => Some("http://127.0.0.1:9/v1".into()),
        "OPENAI_RESPONSE_FORMAT" => Some("yaml".into()),
        _ => None,
    });
    assert!(bad.is_err_and(|e| e.to_string().contains("OPENAI_RESPONSE_FORMAT")));
}

/// A 60-turn direct chat with a local server whose context is 8k tokens (it answers HTTP 400
/// to a longer prompt, as llama.cpp does, counting a token per 4 bytes of the request): with
/// `--context-tokens 8192` every turn is answered to the end; without it, the chat stops being
/// answered once its history outgrows the context.
#[tokio::test]
async fn a_long_chat_keeps_being_answered_within_a_small_context() -> common::TestResult {
    let server = MockServer::start().await;
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&served);
    Mock::given(method("POST"))
        .respond_with(move |req: &wiremock::Request| {
            if req.body.len() / 4 > 8192 {
                return ResponseTemplate::new(400).set_body_json(json!({"error": {
                    "message": "the request exceeds the available context size", "type": "invalid_request_error"}}));
            }
            let n = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            completion(json!(format!("# «send»\nreply {n}")), "stop")
        })
        .mount(&server)
        .await;
    let paragraph = "I keep thinking about the garden and what to plant next spring. ".repeat(16);
    let input: String = (0..60)
        .map(|i| format!("{{\"text\":\"turn {i}: {paragraph}\",\"after_ms\":60000}}\n"))
        .collect();
    let server = &server;
    let run = |budget: bool| {
        let state = tempfile::tempdir();
        let input = input.clone();
        async move {
            let state = state?;
            let budget: &[&str] = if budget {
                &["--context-tokens", "8192"]
            } else {
                &[]
            };
            let cmd = local_chat(server, state.path(), budget);
            let out = common::run_to_end(cmd, input).await?;
            let stdout = String::from_utf8_lossy(&out.stdout).to_string();
            let answers = stdout
                .lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|v| {
                    v["event"] == json!("send")
                        && v["text"].as_str().is_some_and(|t| t.starts_with("reply "))
                })
                .count();
            Ok::<_, Box<dyn std::error::Error>>(answers)
        }
    };
    let fitted = run(true).await?;
    assert_eq!(fitted, 60, "every turn is answered within the context");
    let unfitted = run(false).await?;
    assert!(
        unfitted < 40,
        "the check is not hollow: {unfitted} answers without a budget"
    );
    Ok(())
}

/// `--plan-format json` on an OpenAI-compatible route: the planning request carries the task
/// schema as `response_format` (and says so in the system instruction); a server that holds
/// the model to it (this mock answers in the schema's shape only when asked for it, and like
/// an unconstrained small model otherwise) gets an answer that parses, and its send goes out.
#[tokio::test]
async fn a_schema_constrained_route_plans_in_json_that_always_parses() -> common::TestResult {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(|req: &wiremock::Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            let send = &body["response_format"]["json_schema"]["schema"]["properties"]["tasks"]
                ["items"]["anyOf"][0];
            let constrained = send["properties"]["kind"]["enum"] == json!(["send"])
                && send["required"] == json!(["kind", "text"]);
            let answer = if constrained {
                json!({"tasks": [{"kind": "send", "text": "hello from the schema", "reply_to": null}]})
                    .to_string()
            } else {
                "[context]\nCurrent time: Saturday.\nRespond to message 1.".to_string()
            };
            completion(json!(answer), "stop")
        })
        .mount(&server)
        .await;
    // Asked for on the command line, or set for the provider's model in its settings
    // (`OPENAI_PLAN_FORMAT=json`) with no flag at all.
    for (flags, setting) in [
        (&["--plan-format", "json"][..], None),
        (&[][..], Some("json")),
    ] {
        let state = tempfile::tempdir()?;
        let mut cmd = local_chat(&server, state.path(), flags);
        if let Some(format) = setting {
            cmd.env("OPENAI_PLAN_FORMAT", format);
        }
        let out = common::run_to_end(cmd, "{\"text\":\"hi\"}\n".into()).await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("hello from the schema"),
            "{flags:?} {setting:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let reqs = bodies(&server).await;
        let system = reqs.last().map_or("", |r| {
            r.1["messages"][0]["content"].as_str().unwrap_or_default()
        });
        assert!(system.contains("{\"tasks\": [...]}"), "{system}");
    }
    Ok(())
}
