//! Speech providers behind the one port, built by `speech_for` as the daemon builds them
//! (retry over metering over the client), against local mock servers (127.0.0.1 only) on a
//! virtual clock: the exact OpenAI and Gemini request bodies, Gemini's PCM at the rate its
//! MIME type names, a 5xx retried and a 4xx not, errors naming the URL and never the key,
//! usage rows of kind `speech` counting characters (and `state usage` showing them), the hold
//! at a reached daily cap through the runtime's own budget marks, and espeak-ng: the real
//! binary when installed (CI installs it), a missing one, and its time and output bounds.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use personad::adapters::llm::retry::RetryConfig;
use personad::adapters::llm::usage::{self, CallKind, Usage, UsageMeter, UsageRow};
use personad::adapters::speech::espeak::{Espeak, EspeakConfig, find_program};
use personad::adapters::speech::{SpeechEnv, speech_for, synthesize_for};
use personad::adapters::store::StateDir;
use personad::core::model::ChatId;
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::speech::{
    Speech, SpeechAudio, SpeechError, SpeechProviderKind, SpeechRequest,
};
use personad::ports::spend::CapHold;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use common::TestResult;

const OPENAI_KEY: &str = "SENTINEL_SPEECH_KEY_7";
const GEMINI_KEY: &str = "SENTINEL_GEMINI_SPEECH_KEY_9";
const OPENAI_PATH: &str = "/v1/audio/speech";
const GEMINI_PATH: &str = "/v1beta/models/gemini-2.5-flash-preview-tts:generateContent";
const OGG: &[u8] = b"OggS\0\x02fake opus pages";

fn virtual_clock() -> SharedClock {
    Arc::new(VirtualClock::new(common::t0(), true))
}

/// The environment of a process whose variables are `vars`.
fn env(vars: &[(&str, String)], clock: &SharedClock) -> SpeechEnv {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    SpeechEnv {
        lookup: Arc::new(move |name: &str| map.get(name).cloned()),
        clock: Arc::clone(clock),
        retry: RetryConfig::default(),
        meter: None,
        hold: None,
    }
}

fn openai_env(server: &MockServer, clock: &SharedClock) -> SpeechEnv {
    env(
        &[
            ("OPENAI_API_KEY", OPENAI_KEY.to_owned()),
            ("OPENAI_BASE_URL", format!("{}/v1", server.uri())),
        ],
        clock,
    )
}

fn gemini_env(server: &MockServer, clock: &SharedClock) -> SpeechEnv {
    env(
        &[
            ("GEMINI_API_KEY", GEMINI_KEY.to_owned()),
            ("GEMINI_BASE_URL", server.uri()),
        ],
        clock,
    )
}

fn build(kind: SpeechProviderKind, env: &SpeechEnv) -> Arc<dyn Speech> {
    speech_for(kind, env).unwrap_or_else(|e| panic!("speech_for {kind}: {e}"))
}

async fn serve(at: &str, responses: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    let last = responses.len().saturating_sub(1);
    for (n, response) in responses.into_iter().enumerate() {
        let mock = Mock::given(method("POST"))
            .and(path(at))
            .respond_with(response);
        // Each answer once, in order; the last one for good.
        let mock = if n < last {
            mock.up_to_n_times(1)
        } else {
            mock
        };
        mock.mount(&server).await;
    }
    server
}

async fn requests(server: &MockServer) -> Vec<(wiremock::Request, Value)> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            let body = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
            (r, body)
        })
        .collect()
}

fn meter(dir: &Path, clock: &SharedClock) -> Arc<UsageMeter> {
    Arc::new(UsageMeter::load(StateDir::new(dir), Arc::clone(clock)))
}

fn speech_rows(meter: &UsageMeter) -> Vec<UsageRow> {
    meter
        .totals()
        .into_iter()
        .filter(|r| r.kind == CallKind::Speech)
        .collect()
}

fn gemini_answer(mime: &str, samples: &[i16]) -> ResponseTemplate {
    let bytes: Vec<u8> = samples.iter().flat_map(|s| s.to_le_bytes()).collect();
    ResponseTemplate::new(200).set_body_json(json!({
        "candidates": [{
            "content": {"role": "model", "parts": [{"inlineData": {
                "mimeType": mime,
                "data": base64::engine::general_purpose::STANDARD.encode(bytes)
            }}]},
            "finishReason": "STOP"
        }],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 40}
    }))
}

/// `{model, input, voice, response_format: "opus"}` with the bearer key, the defaults from
/// the environment and the request's voice winning; the Ogg/Opus file comes back as sent.
#[tokio::test]
async fn openai_asks_for_opus_in_the_exact_body() -> TestResult {
    let server = serve(
        OPENAI_PATH,
        vec![ResponseTemplate::new(200).set_body_bytes(OGG)],
    )
    .await;
    let clock = virtual_clock();
    let speech = build(SpeechProviderKind::OpenAi, &openai_env(&server, &clock));
    let mut req = SpeechRequest::new("Hello, Bob!");
    assert_eq!(
        speech.synthesize(&req).await,
        Ok(SpeechAudio::OggOpus(OGG.to_vec()))
    );
    req.voice = Some("coral".into());
    req.language = Some("en".into());
    speech.synthesize(&req).await?;
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0].1,
        json!({"model": "gpt-4o-mini-tts", "input": "Hello, Bob!", "voice": "alloy", "response_format": "opus"})
    );
    assert_eq!(sent[1].1["voice"], "coral");
    let auth = sent[0].0.headers.get("authorization");
    assert_eq!(
        auth.and_then(|v| v.to_str().ok()),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    assert!(!sent[0].0.url.as_str().contains(OPENAI_KEY));
    let described = speech.describe();
    assert_eq!(
        described,
        format!("openai:gpt-4o-mini-tts at {}/v1/audio/speech", server.uri())
    );
    Ok(())
}

/// `OPENAI_SPEECH_FORMAT=pcm` (a server without Opus): 24 kHz samples; the model and voice
/// come from `OPENAI_SPEECH_MODEL` and `OPENAI_SPEECH_VOICE`.
#[tokio::test]
async fn openai_pcm_for_servers_without_opus() -> TestResult {
    let pcm: Vec<u8> = [1i16, -1, 1000]
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .collect();
    let server = serve(
        OPENAI_PATH,
        vec![ResponseTemplate::new(200).set_body_bytes(pcm)],
    )
    .await;
    let clock = virtual_clock();
    let e = env(
        &[
            ("OPENAI_BASE_URL", format!("{}/v1", server.uri())),
            ("OPENAI_SPEECH_FORMAT", "pcm".into()),
            ("OPENAI_SPEECH_MODEL", "kokoro".into()),
            ("OPENAI_SPEECH_VOICE", "af_sky".into()),
        ],
        &clock,
    );
    let audio = build(SpeechProviderKind::OpenAi, &e)
        .synthesize(&SpeechRequest::new("hi"))
        .await?;
    assert_eq!(
        audio,
        SpeechAudio::Pcm {
            rate_hz: 24_000,
            samples: vec![1, -1, 1000]
        }
    );
    let sent = requests(&server).await;
    assert_eq!(
        sent[0].1,
        json!({"model": "kokoro", "input": "hi", "voice": "af_sky", "response_format": "pcm"})
    );
    // A local server without a key gets no Authorization header.
    assert!(sent[0].0.headers.get("authorization").is_none());
    Ok(())
}

/// `generateContent` on the TTS model with audio asked for in the default voice; the inline
/// PCM is decoded at the rate its MIME type names.
#[tokio::test]
async fn gemini_asks_for_audio_and_decodes_the_pcm_at_its_rate() -> TestResult {
    let samples = [0i16, 12_000, -12_000, i16::MAX, i16::MIN];
    let server = serve(
        GEMINI_PATH,
        vec![gemini_answer("audio/L16;codec=pcm;rate=16000", &samples)],
    )
    .await;
    let clock = virtual_clock();
    let speech = build(SpeechProviderKind::Gemini, &gemini_env(&server, &clock));
    let audio = speech.synthesize(&SpeechRequest::new("Guten Tag")).await?;
    assert_eq!(
        audio,
        SpeechAudio::Pcm {
            rate_hz: 16_000,
            samples: samples.to_vec()
        }
    );
    let sent = requests(&server).await;
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].1,
        json!({
            "contents": [{"parts": [{"text": "Guten Tag"}]}],
            "generationConfig": {
                "responseModalities": ["AUDIO"],
                "speechConfig": {"voiceConfig": {"prebuiltVoiceConfig": {"voiceName": "Kore"}}}
            }
        })
    );
    let key = sent[0].0.headers.get("x-goog-api-key");
    assert_eq!(key.and_then(|v| v.to_str().ok()), Some(GEMINI_KEY));
    assert_eq!(sent[0].0.url.query(), None);
    assert!(
        speech
            .describe()
            .starts_with("gemini:gemini-2.5-flash-preview-tts at ")
    );
    // An answer without audio is permanent and says why.
    let refused = serve(
        GEMINI_PATH,
        vec![ResponseTemplate::new(200).set_body_json(json!({
            "candidates": [{"content": {"parts": [{"text": "no"}]}, "finishReason": "OTHER"}]
        }))],
    )
    .await;
    let err = build(SpeechProviderKind::Gemini, &gemini_env(&refused, &clock))
        .synthesize(&SpeechRequest::new("x"))
        .await
        .err();
    assert!(
        matches!(&err, Some(SpeechError::Permanent(m)) if m.contains("finish reason OTHER")),
        "{err:?}"
    );
    Ok(())
}

/// A 503 is retried (on the virtual clock) and the second answer wins; a 400 is not
/// retried; both errors name the URL and never the key, even when the server echoes it.
#[tokio::test]
async fn a_5xx_is_retried_a_4xx_is_not_and_errors_name_the_url_without_the_key() -> TestResult {
    let clock = virtual_clock();
    let flaky = serve(
        OPENAI_PATH,
        vec![
            ResponseTemplate::new(503).set_body_string("overloaded"),
            ResponseTemplate::new(200).set_body_bytes(OGG),
        ],
    )
    .await;
    let audio = build(SpeechProviderKind::OpenAi, &openai_env(&flaky, &clock))
        .synthesize(&SpeechRequest::new("again"))
        .await?;
    assert_eq!(audio, SpeechAudio::OggOpus(OGG.to_vec()));
    assert_eq!(requests(&flaky).await.len(), 2, "retried once");

    let echo = format!("{{\"error\":{{\"message\":\"bad voice for key {OPENAI_KEY}\"}}}}");
    let bad = serve(
        OPENAI_PATH,
        vec![ResponseTemplate::new(400).set_body_string(echo)],
    )
    .await;
    let err = build(SpeechProviderKind::OpenAi, &openai_env(&bad, &clock))
        .synthesize(&SpeechRequest::new("once"))
        .await
        .err()
        .ok_or("a 400 must fail")?;
    assert_eq!(requests(&bad).await.len(), 1, "a 4xx is not retried");
    let text = err.to_string();
    assert!(matches!(err, SpeechError::Permanent(_)), "{err:?}");
    assert!(
        text.contains(&format!("openai at {}/v1/audio/speech", bad.uri())),
        "{text}"
    );
    assert!(
        text.contains("HTTP 400") && text.contains("[redacted]"),
        "{text}"
    );
    assert!(!text.contains(OPENAI_KEY), "{text}");

    let denied = serve(GEMINI_PATH, vec![ResponseTemplate::new(403)]).await;
    let err = build(SpeechProviderKind::Gemini, &gemini_env(&denied, &clock))
        .synthesize(&SpeechRequest::new("x"))
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        err.contains(&format!("gemini at {}{GEMINI_PATH}", denied.uri()))
            && err.contains("GEMINI_API_KEY")
            && !err.contains(GEMINI_KEY),
        "{err}"
    );
    // Without a key (and no base URL of one's own) nothing is built.
    let none = speech_for(SpeechProviderKind::OpenAi, &env(&[], &clock)).err();
    assert!(
        matches!(&none, Some(SpeechError::NotConfigured(m)) if m.contains("OPENAI_API_KEY")),
        "{none:?}"
    );
    Ok(())
}

/// Every attempt is a request of kind `speech` under the caller's agent, and an answer adds
/// its characters (not tokens); `state usage` shows them in a column of their own, priced.
#[tokio::test]
async fn speech_is_metered_in_requests_and_characters() -> TestResult {
    let dir = tempfile::tempdir()?;
    let clock = virtual_clock();
    let meter = meter(dir.path(), &clock);
    let server = serve(
        OPENAI_PATH,
        vec![
            ResponseTemplate::new(502),
            ResponseTemplate::new(200).set_body_bytes(OGG),
        ],
    )
    .await;
    let speech = build(
        SpeechProviderKind::OpenAi,
        &openai_env(&server, &clock).with_meter(Arc::clone(&meter)),
    );
    let req = SpeechRequest::new("Grüß dich, Bob"); // 14 characters, 16 bytes
    synthesize_for(speech.as_ref(), "wren", ChatId(42), &req).await?;
    let rows = speech_rows(&meter);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(
        (row.agent.as_str(), row.model.as_str(), row.requests),
        ("wren", "gpt-4o-mini-tts", 2)
    );
    assert_eq!(row.characters, 14);
    assert_eq!((row.prompt_tokens, row.output_tokens), (0, 0));
    // Priced by the character: 14 × $15 per million.
    let (own, _) = meter.spend_today("wren");
    assert!((own.usd - 14.0 * 15.0 / 1e6).abs() < 1e-12, "{own:?}");
    meter.flush().await?;
    let table = usage::state_usage(&StateDir::new(dir.path()), Some("wren"), None)?;
    let header = table.lines().next().unwrap_or_default();
    assert!(header.contains("CHARACTERS"), "{table}");
    let line = table
        .lines()
        .find(|l| l.contains("speech"))
        .ok_or("no speech row")?;
    assert!(line.contains(" 14 ") && line.contains("0.0002"), "{table}");
    Ok(())
}

/// The hold: an agent whose persona's daily cap was reached gets `CapReached` before any
/// request (the runtime's own budget marks, published to its handle, decide it); an agent
/// not at a cap speaks. Without the hold the capped agent's request reaches the server.
#[tokio::test]
async fn speech_is_held_at_a_reached_cap_before_any_request() -> TestResult {
    let state = tempfile::tempdir()?;
    let usage_dir = tempfile::tempdir()?;
    let persona = common::persona_with(common::AGENT, "# Daily Budget\n1000 tokens\n");
    let mut h = common::Harness::start_as(
        persona,
        state.path(),
        |_| Arc::new(common::reply_with("hi")),
        common::config(),
        &[],
        None,
        None,
    );
    h.started().await;
    let meter = Arc::new(
        UsageMeter::load(StateDir::new(usage_dir.path()), Arc::clone(&h.shared_clock))
            .with_spend_sink(Arc::new(h.handle.clone())),
    );
    let server = serve(
        OPENAI_PATH,
        vec![ResponseTemplate::new(200).set_body_bytes(OGG)],
    )
    .await;
    let hold: Arc<dyn CapHold> = Arc::new(h.handle.clone());
    let speech = build(
        SpeechProviderKind::OpenAi,
        &openai_env(&server, &h.shared_clock)
            .with_meter(Arc::clone(&meter))
            .with_hold(hold),
    );
    let req = SpeechRequest::new("one more thing");
    // Under the cap: spoken.
    synthesize_for(speech.as_ref(), common::AGENT, ChatId(7), &req).await?;
    // The planner's tokens reach the cap; the runtime marks it, as it does to hold planning.
    let spent = Usage {
        prompt_tokens: 1200,
        cached_tokens: 0,
        output_tokens: 0,
    };
    meter.add(common::AGENT, "gemini-flash-latest", CallKind::Plan, spent);
    let today = common::t0().to_zoned(jiff::tz::TimeZone::UTC).date();
    for _ in 0..10_000 {
        if h.handle
            .agent_state(common::AGENT)
            .is_some_and(|s| s.budget_holds(today))
        {
            break;
        }
        h.pass(Duration::from_millis(1)).await;
    }
    assert!(
        h.handle
            .agent_state(common::AGENT)
            .is_some_and(|s| s.budget_holds(today))
    );
    let held = synthesize_for(speech.as_ref(), common::AGENT, ChatId(7), &req).await;
    assert_eq!(
        held,
        Err(SpeechError::CapReached {
            agent: common::AGENT.to_owned()
        })
    );
    assert_eq!(requests(&server).await.len(), 1, "no request at the cap");
    let rows = speech_rows(&meter);
    assert_eq!(
        rows.iter()
            .map(|r| (r.requests, r.characters))
            .collect::<Vec<_>>(),
        vec![(1, 14)],
        "nothing counted at the cap"
    );
    // Another agent, at no cap, still speaks.
    synthesize_for(speech.as_ref(), "bo", ChatId(8), &req).await?;
    assert_eq!(requests(&server).await.len(), 2);
    h.stop().await?;
    Ok(())
}

/// espeak-ng itself (skipped, saying so, where it is not installed; CI installs it and sets
/// `PERSONAD_REQUIRE_ESPEAK`): real speech as 16-bit PCM at its rate, metered as free.
#[tokio::test]
async fn espeak_ng_speaks_when_installed() -> TestResult {
    if find_program(Path::new("espeak-ng")).is_none() {
        if std::env::var_os("PERSONAD_REQUIRE_ESPEAK").is_some() {
            return Err("espeak-ng is required here but not installed".into());
        }
        println!("SKIPPED: espeak-ng not installed");
        return Ok(());
    }
    assert!(personad::adapters::speech::espeak_available());
    let dir = tempfile::tempdir()?;
    let clock = virtual_clock();
    let meter = meter(dir.path(), &clock);
    let speech = build(
        SpeechProviderKind::Espeak,
        &env(&[], &clock).with_meter(Arc::clone(&meter)),
    );
    assert!(
        speech.describe().starts_with("espeak:espeak-ng at "),
        "{}",
        speech.describe()
    );
    let req = SpeechRequest {
        text: "Hello there, this is a voice note.".into(),
        voice: None,
        language: Some("en-GB".into()),
    };
    let audio = synthesize_for(speech.as_ref(), "wren", ChatId(1), &req).await?;
    let SpeechAudio::Pcm { rate_hz, samples } = audio else {
        return Err("espeak-ng gives PCM".into());
    };
    let seconds = samples.len() as f64 / f64::from(rate_hz);
    assert!((8_000..=48_000).contains(&rate_hz), "{rate_hz}");
    assert!((1.0..10.0).contains(&seconds), "{seconds} s");
    assert!(samples.iter().any(|s| s.unsigned_abs() > 1000), "silence");
    let rows = speech_rows(&meter);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].model.as_str(), rows[0].characters),
        ("espeak-ng", 34)
    );
    assert_eq!(meter.spend_today("wren").0.usd, 0.0);
    // A voice it does not have is permanent, naming the program and the voice.
    let err = speech
        .synthesize(&SpeechRequest {
            voice: Some("xx-nowhere".into()),
            ..req
        })
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("espeak-ng -v xx-nowhere failed"), "{err}");
    Ok(())
}

/// A program that is not there is `EngineMissing`, saying what to install, and `describe`
/// (for `check`) says so too.
#[tokio::test]
async fn a_missing_engine_says_what_to_install() {
    let clock = virtual_clock();
    let e = env(
        &[("PERSONAD_ESPEAK", "/nonexistent/espeak-ng".into())],
        &clock,
    );
    let speech = build(SpeechProviderKind::Espeak, &e);
    assert!(
        speech.describe().contains("not installed"),
        "{}",
        speech.describe()
    );
    let err = speech.synthesize(&SpeechRequest::new("hi")).await;
    assert!(
        matches!(&err, Err(SpeechError::EngineMissing(m)) if m.contains("/nonexistent/espeak-ng") && m.contains("install espeak-ng")),
        "{err:?}"
    );
}

/// A stand-in engine: a shell script ignoring its arguments.
fn script(dir: &Path, name: &str, body: &str) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// A run that hangs is killed at the time limit; one that writes too much at the cap.
#[tokio::test]
async fn the_engine_is_bounded_in_time_and_output() -> TestResult {
    let dir = tempfile::tempdir()?;
    let hangs = Espeak::new(EspeakConfig {
        program: script(dir.path(), "hangs", "exec sleep 30")?,
        timeout: Duration::from_millis(50),
        max_output: 1 << 20,
    });
    let err = hangs.synthesize(&SpeechRequest::new("hi")).await.err();
    assert!(
        matches!(&err, Some(SpeechError::Permanent(m)) if m.contains("took longer")),
        "{err:?}"
    );
    let floods = Espeak::new(EspeakConfig {
        program: script(dir.path(), "floods", "exec head -c 100000 /dev/zero")?,
        timeout: Duration::from_secs(10),
        max_output: 1000,
    });
    let err = floods.synthesize(&SpeechRequest::new("hi")).await.err();
    assert!(
        matches!(&err, Some(SpeechError::Permanent(m)) if m.contains("more than 1000 bytes")),
        "{err:?}"
    );
    Ok(())
}
