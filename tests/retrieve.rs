//! `retrieve`, the persona looking something up, through the real runtime on the in-memory
//! Telegram, the real LLM planner against a mock Gemini, and the real fetcher against local
//! servers on 127.0.0.1 reached only through its test allowance (one exact address each):
//! a page's readable text reaches the follow-up request within the caps and the answer goes
//! out; the same URL asked again in the window is not fetched again and makes no other turn;
//! the metadata address, a private address and a redirect to loopback are refused, and so is
//! a 50 MB body (streamed: the fetcher stops reading at its cap); a persona without
//! `# Allow Retrieve` is never offered the action, in task blocks or in JSON, and its model's
//! retrieve fetches nothing; the daily cap and unknown `file:` names are refused.

mod common;

use common::logs::Logs;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::gemini::{answering_with_body as model, bodies, person, reply};
use common::retrieve::boot;
use common::{AGENT, ScriptedPlanner, TestResult, persona_with};
use personad::adapters::llm::gemini::{GeminiClient, GeminiConfig};
use personad::adapters::llm::retry::{RetryConfig, RetryingLlm};
use personad::adapters::llm::usage::CallKind;
use personad::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use personad::adapters::retrieve::HttpRetriever;
use personad::core::persona::Persona;
use personad::ports::clock::SharedClock;
use personad::ports::llm::ApiKey;
use personad::ports::planner::SharedPlanner;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Words only the page's readable text holds.
const PAGE_MARK: &str = "a lemon is a sour yellow citrus fruit";
/// Inside the page's script: never shown.
const SCRIPT_MARK: &str = "tracking_pixel_secret";
/// Past the character cap of the kept text: never shown.
const LATE_MARK: &str = "words past the cap";

/// The LLM planner on the mock at `uri` (in JSON with `json`).
fn llm_planner(uri: &str, json: bool) -> impl FnOnce(SharedClock) -> SharedPlanner {
    let uri = uri.to_owned();
    move |clock| -> SharedPlanner {
        let mut cfg = GeminiConfig::new(ApiKey::new("k"));
        cfg.base_url = uri;
        let client = GeminiClient::new(cfg).unwrap_or_else(|e| panic!("client: {e}"));
        let llm = RetryingLlm::new(Arc::new(client), RetryConfig::default(), clock);
        let config = LlmPlannerConfig {
            json_plans: json,
            ..LlmPlannerConfig::default()
        };
        Arc::new(LlmPlanner::new(Arc::new(llm), config))
    }
}

fn retriever_persona(extra: &str) -> Persona {
    persona_with(AGENT, &format!("# Allow Retrieve\n\n{extra}"))
}

/// The `retrieve_refused` reasons the operator saw, in order.
fn refusals(
    notables: &mut tokio::sync::mpsc::UnboundedReceiver<personad::runtime::NotableEvent>,
) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(e) = notables.try_recv() {
        if e.notable.event == "retrieve_refused" {
            out.push(e.notable.detail);
        }
    }
    out
}

/// A page of HTML with a script, navigation and more text than the cap keeps.
fn page() -> String {
    let filler = "lorem ipsum dolor sit amet ".repeat(400);
    format!(
        "<html><head><title>Lemon</title><script>var {SCRIPT_MARK} = 1;</script></head>\
         <body><nav>Home | Fruit</nav><h1>Lemon</h1><p>In short, {PAGE_MARK}.</p>\
         <p>{filler}</p><p>{LATE_MARK}</p></body></html>"
    )
}

#[tokio::test]
async fn a_page_reaches_the_follow_up_request_and_is_fetched_once_per_window() -> TestResult {
    let pages = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/lemon"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(page(), "text/html; charset=utf-8"))
        .mount(&pages)
        .await;
    let url = format!("{}/lemon", pages.uri());
    let asked = url.clone();
    let llm = model(move |body, newest| {
        if body.contains("You retrieved") {
            reply("# «send»\nLemons are sour, I looked it up.")
        } else if newest.contains("lemon") {
            reply(&format!("# «retrieve»\n{asked}"))
        } else {
            reply("# «send»\nok")
        }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let alice = person("Alice");
    let web = HttpRetriever::new().allowing_for_tests(*pages.address());
    let (mut h, meter) = boot(
        retriever_persona(""),
        dir.path(),
        llm_planner(&llm.uri(), false),
        std::slice::from_ref(&alice),
        Arc::new(web),
    );
    h.started().await;
    h.say(&alice, "Alice", "what is a lemon?").await;
    h.settle().await;

    let all = bodies(&llm).await;
    // Offered: the persona has `# Allow Retrieve`.
    assert!(all[0].contains("«retrieve»"), "{}", all[0]);
    let follow: Vec<&String> = all.iter().filter(|b| b.contains("You retrieved")).collect();
    assert_eq!(follow.len(), 1, "{all:#?}");
    let follow = follow[0];
    assert!(follow.contains(PAGE_MARK), "{follow}");
    assert!(follow.contains("[retrieved] url="), "{follow}");
    assert!(follow.contains("nobody in this chat wrote or sent it"));
    assert!(!follow.contains(SCRIPT_MARK), "the script was kept");
    assert!(!follow.contains("Home | Fruit"), "the navigation was kept");
    assert!(!follow.contains(LATE_MARK), "text past the cap was kept");
    assert!(
        h.sends_to(alice.id)
            .iter()
            .any(|t| t.contains("Lemons are sour")),
        "{:?}",
        h.sends()
    );
    // Metered like an LLM call: one fetch, its bytes.
    let rows: Vec<_> = meter
        .totals()
        .into_iter()
        .filter(|r| r.kind == CallKind::Retrieve)
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].requests, 1);
    assert!(rows[0].bytes > 10_000, "{rows:?}");
    assert!(dir.path().join(AGENT).join("retrieved").exists());

    // Asked again in the window: not fetched again, no other turn.
    h.say(&alice, "Alice", "and what is a lemon, again?").await;
    h.settle().await;
    let fetched = pages.received_requests().await.unwrap_or_default().len();
    assert_eq!(fetched, 1, "the page was fetched again");
    let all = bodies(&llm).await;
    let follow_ups = all.iter().filter(|b| b.contains("You retrieved")).count();
    assert_eq!(follow_ups, 1, "a second follow-up turn: {all:#?}");
    // The document is still at the start of the conversation for the later request.
    assert!(all.last().is_some_and(|b| b.contains(PAGE_MARK)));
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn metadata_private_and_redirected_loopback_addresses_are_refused() -> TestResult {
    let (logs, _guard) = Logs::capture();
    // The server the fetcher may reach redirects to another local one it may not.
    let hidden = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("secret"))
        .mount(&hidden)
        .await;
    let front = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/hop"))
        .respond_with(ResponseTemplate::new(302).insert_header(
            "location",
            format!("http://127.0.0.1:{}/secret", hidden.address().port()).as_str(),
        ))
        .mount(&front)
        .await;
    let hop = format!("{}/hop", front.uri());
    let llm = model(move |_, newest| {
        if newest.contains("look") {
            reply(&format!(
                "# «retrieve»\nhttp://169.254.169.254/latest/meta-data/\nhttp://10.0.0.1/\n{hop}"
            ))
        } else {
            reply("# «send»\nok")
        }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let alice = person("Alice");
    let web = HttpRetriever::new().allowing_for_tests(*front.address());
    let (mut h, _) = boot(
        retriever_persona(""),
        dir.path(),
        llm_planner(&llm.uri(), false),
        std::slice::from_ref(&alice),
        Arc::new(web),
    );
    let mut notables = h.handle.observe_notables();
    h.started().await;
    h.say(&alice, "Alice", "look these up").await;
    h.settle().await;
    let refused = refusals(&mut notables);
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(refused[0].contains("169.254.169.254"), "{refused:?}");
    assert!(refused[1].contains("10.0.0.1"), "{refused:?}");
    assert!(refused[2].contains("127.0.0.1"), "{refused:?}");
    for why in &refused {
        assert!(why.contains("non-public address"), "{why}");
    }
    assert_eq!(front.received_requests().await.unwrap_or_default().len(), 1);
    assert!(
        hidden
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty(),
        "the redirect reached loopback"
    );
    assert_eq!(logs.lines_with("retrieve_refused").len(), 3);
    let all = bodies(&llm).await;
    assert!(!all.iter().any(|b| b.contains("You retrieved")), "{all:#?}");
    h.stop().await?;
    Ok(())
}

/// A server on 127.0.0.1 streaming a chunked text body of 50 MB; it counts what it wrote
/// until the client hung up.
async fn endless_body() -> std::io::Result<(std::net::SocketAddr, Arc<AtomicU64>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let written = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&written);
    tokio::spawn(async move {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        let mut request = vec![0u8; 4096];
        let _ = socket.read(&mut request).await;
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
        if socket.write_all(head.as_bytes()).await.is_err() {
            return;
        }
        let chunk = vec![b'a'; 64 * 1024];
        let frame = [
            format!("{:x}\r\n", chunk.len()).into_bytes(),
            chunk,
            b"\r\n".to_vec(),
        ]
        .concat();
        while count.load(Ordering::SeqCst) < 50 * 1024 * 1024 {
            if socket.write_all(&frame).await.is_err() {
                return;
            }
            count.fetch_add(64 * 1024, Ordering::SeqCst);
        }
        let _ = socket.write_all(b"0\r\n\r\n").await;
    });
    Ok((addr, written))
}

#[tokio::test]
async fn a_50_mb_body_is_refused_without_being_read_whole() -> TestResult {
    let (logs, _guard) = Logs::capture();
    let (addr, written) = endless_body().await?;
    let url = format!("http://{addr}/big");
    let llm = model(move |_, newest| {
        if newest.contains("big") {
            reply(&format!("# «retrieve»\n{url}"))
        } else {
            reply("# «send»\nok")
        }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let alice = person("Alice");
    let web = HttpRetriever::new().allowing_for_tests(addr);
    let (mut h, _) = boot(
        retriever_persona(""),
        dir.path(),
        llm_planner(&llm.uri(), false),
        std::slice::from_ref(&alice),
        Arc::new(web),
    );
    let mut notables = h.handle.observe_notables();
    h.started().await;
    h.say(&alice, "Alice", "fetch the big one").await;
    h.settle().await;
    let refused = refusals(&mut notables);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("over the cap of 2097152 bytes"),
        "{refused:?}"
    );
    assert_eq!(logs.lines_with("retrieve_refused").len(), 1);
    let sent = written.load(Ordering::SeqCst);
    assert!(
        sent < 50 * 1024 * 1024,
        "the whole body was read: {sent} bytes"
    );
    assert!(
        !bodies(&llm)
            .await
            .iter()
            .any(|b| b.contains("You retrieved"))
    );
    h.stop().await?;
    Ok(())
}

#[tokio::test]
async fn a_persona_without_allow_retrieve_is_never_offered_it() -> TestResult {
    let (logs, _guard) = Logs::capture();
    let pages = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string(PAGE_MARK))
        .mount(&pages)
        .await;
    let url = format!("{}/lemon", pages.uri());
    for json in [false, true] {
        let asked = url.clone();
        let llm = model(move |_, _| {
            if json {
                reply(&format!(
                    r#"{{"tasks": [{{"kind": "retrieve", "urls": ["{asked}"]}}, {{"kind": "send", "text": "hi"}}]}}"#
                ))
            } else {
                reply(&format!("# «retrieve»\n{asked}\n\n# «send»\nhi"))
            }
        })
        .await;
        let dir = tempfile::tempdir()?;
        let alice = person("Alice");
        let web = HttpRetriever::new().allowing_for_tests(*pages.address());
        let (mut h, _) = boot(
            persona_with(AGENT, ""),
            dir.path(),
            llm_planner(&llm.uri(), json),
            std::slice::from_ref(&alice),
            Arc::new(web),
        );
        h.started().await;
        h.say(&alice, "Alice", "what is a lemon?").await;
        h.settle().await;
        let all = bodies(&llm).await;
        assert!(!all.is_empty());
        for body in &all {
            assert!(
                !body.to_lowercase().contains("retrieve"),
                "offered (json: {json}): {body}"
            );
        }
        assert_eq!(h.sends_to(alice.id), ["hi"]);
        h.stop().await?;
    }
    assert!(
        pages
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
    );
    assert_eq!(
        logs.lines_with("retrieve is not enabled for this persona")
            .len(),
        2
    );
    Ok(())
}

#[tokio::test]
async fn the_daily_cap_and_unknown_files_are_refused() -> TestResult {
    let pages = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string(PAGE_MARK))
        .mount(&pages)
        .await;
    let (one, two) = (
        format!("{}/one", pages.uri()),
        format!("{}/two", pages.uri()),
    );
    let llm = model(move |body, newest| {
        if body.contains("You retrieved") {
            reply("# «send»\nread it")
        } else if newest.contains("look") {
            reply(&format!("# «retrieve»\n{one}\n{two}\nfile:secrets.json"))
        } else {
            reply("# «send»\nok")
        }
    })
    .await;
    let dir = tempfile::tempdir()?;
    let alice = person("Alice");
    let web = HttpRetriever::new().allowing_for_tests(*pages.address());
    let (mut h, _) = boot(
        retriever_persona("# Retrieve Daily Cap\n1\n"),
        dir.path(),
        llm_planner(&llm.uri(), false),
        std::slice::from_ref(&alice),
        Arc::new(web),
    );
    let mut notables = h.handle.observe_notables();
    h.started().await;
    h.say(&alice, "Alice", "look these up").await;
    h.settle().await;
    let refused = refusals(&mut notables);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused[0].contains("daily cap of 1"), "{refused:?}");
    assert!(refused[1].contains("no such file resource"), "{refused:?}");
    assert_eq!(pages.received_requests().await.unwrap_or_default().len(), 1);
    assert_eq!(h.sends_to(alice.id), ["read it"]);
    h.stop().await?;
    Ok(())
}

/// The handler holds the persona as it is now: a retrieve that reached a plan (an older plan,
/// a hand-edited graph) for a persona without `# Allow Retrieve` fetches nothing.
#[tokio::test]
async fn the_handler_refuses_for_a_persona_without_the_switch() -> TestResult {
    let pages = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string(PAGE_MARK))
        .mount(&pages)
        .await;
    let url = format!("{}/lemon", pages.uri());
    let dir = tempfile::tempdir()?;
    let alice = person("Alice");
    let web = HttpRetriever::new().allowing_for_tests(*pages.address());
    let scripted = ScriptedPlanner::new(move |_, n| {
        Ok(if n == 0 {
            vec![personad::core::plan::Action::Retrieve {
                urls: vec![url.clone()],
            }]
        } else {
            Vec::new()
        })
    });
    let (mut h, _) = boot(
        persona_with(AGENT, ""),
        dir.path(),
        move |_| Arc::new(scripted) as SharedPlanner,
        std::slice::from_ref(&alice),
        Arc::new(web),
    );
    let mut notables = h.handle.observe_notables();
    h.started().await;
    h.say(&alice, "Alice", "what is a lemon?").await;
    h.settle().await;
    let refused = refusals(&mut notables);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(refused[0].contains("Allow Retrieve"), "{refused:?}");
    assert!(
        pages
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
    );
    h.stop().await?;
    Ok(())
}
