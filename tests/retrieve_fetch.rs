//! The real web fetcher alone, against local servers reached through its test allowance:
//! non-text content, the kept-text cap, a body announced over the byte cap, a redirect loop
//! (at most 5 hops), names and IPv6 forms that resolve to loopback, and the total time cap
//! are each refused (or cut) with a typed error; the in-memory twin serves what it was given.

use std::net::SocketAddr;
use std::time::Duration;

use personad::adapters::retrieve::{HttpRetriever, Limits, MemoryRetriever};
use personad::core::model::ChatId;
use personad::ports::retrieve::{Page, RetrieveError, RetrieveRequest, Retriever};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

type TestResult = Result<(), Box<dyn std::error::Error>>;

async fn fetch(r: &dyn Retriever, url: &str) -> Result<Page, RetrieveError> {
    r.fetch(RetrieveRequest {
        agent: "ann",
        chat: ChatId(1),
        url,
        daily_cap: 100,
    })
    .await
}

async fn serving(route: &str, response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(route))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn non_text_content_is_refused() -> TestResult {
    let server = serving(
        "/pic",
        ResponseTemplate::new(200).set_body_raw(vec![0x89, b'P', b'N', b'G'], "image/png"),
    )
    .await;
    let web = HttpRetriever::new().allowing_for_tests(*server.address());
    let got = fetch(&web, &format!("{}/pic", server.uri())).await;
    assert_eq!(got, Err(RetrieveError::ContentType("image/png".into())));
    Ok(())
}

#[tokio::test]
async fn only_the_first_characters_are_kept_and_a_long_announced_body_is_refused() -> TestResult {
    let server = serving(
        "/text",
        ResponseTemplate::new(200).set_body_raw("abcdefghijklmnopqrstuvwxyz", "text/plain"),
    )
    .await;
    let limits = Limits {
        max_chars: 10,
        ..Limits::default()
    };
    let web = HttpRetriever::new()
        .with_limits(limits)
        .allowing_for_tests(*server.address());
    let page = fetch(&web, &format!("{}/text", server.uri())).await?;
    assert_eq!(page.text, "abcdefghij");
    assert_eq!(page.bytes, 26);
    let small = Limits {
        max_bytes: 8,
        ..Limits::default()
    };
    let web = HttpRetriever::new()
        .with_limits(small)
        .allowing_for_tests(*server.address());
    let got = fetch(&web, &format!("{}/text", server.uri())).await;
    assert_eq!(got, Err(RetrieveError::TooLarge(8)));
    Ok(())
}

#[tokio::test]
async fn a_redirect_loop_stops_after_five_hops() -> TestResult {
    let server = serving(
        "/loop",
        ResponseTemplate::new(302).insert_header("location", "/loop"),
    )
    .await;
    let web = HttpRetriever::new().allowing_for_tests(*server.address());
    let got = fetch(&web, &format!("{}/loop", server.uri())).await;
    assert_eq!(got, Err(RetrieveError::TooManyRedirects(5)));
    assert_eq!(
        server.received_requests().await.unwrap_or_default().len(),
        6
    );
    Ok(())
}

#[tokio::test]
async fn names_and_ipv6_forms_of_loopback_are_refused() -> TestResult {
    let server = serving(
        "/",
        ResponseTemplate::new(200).set_body_raw("hi", "text/plain"),
    )
    .await;
    let port = server.address().port();
    // No allowance: the server is there, but no name or form of loopback reaches it.
    let web = HttpRetriever::new();
    for url in [
        format!("http://localhost:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://127.0.0.2:{port}/"),
        "http://0.0.0.0/".to_owned(),
        "http://[fe80::1]/".to_owned(),
        "http://[fd00::1]/".to_owned(),
        "http://100.64.0.1/".to_owned(),
        "http://192.168.0.1/".to_owned(),
        "http://172.16.0.1/".to_owned(),
    ] {
        let got = fetch(&web, &url).await;
        assert!(
            matches!(got, Err(RetrieveError::Address { .. })),
            "{url}: {got:?}"
        );
    }
    assert!(
        server
            .received_requests()
            .await
            .unwrap_or_default()
            .is_empty()
    );
    assert!(matches!(
        fetch(&web, "ftp://example.org/").await,
        Err(RetrieveError::BadUrl(_))
    ));
    Ok(())
}

/// A server that accepts and never answers: the total time cap ends the fetch (a short cap,
/// so the test waits a quarter of a second on the socket).
#[tokio::test]
async fn a_silent_server_hits_the_time_cap() -> TestResult {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr: SocketAddr = listener.local_addr()?;
    let held = tokio::spawn(async move {
        let conn = listener.accept().await;
        std::future::pending::<()>().await;
        drop(conn);
    });
    let limits = Limits {
        total: Duration::from_millis(250),
        ..Limits::default()
    };
    let web = HttpRetriever::new()
        .with_limits(limits)
        .allowing_for_tests(addr);
    let started = std::time::Instant::now();
    let got = fetch(&web, &format!("http://{addr}/")).await;
    assert_eq!(got, Err(RetrieveError::TimedOut(0)));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    held.abort();
    Ok(())
}

#[tokio::test]
async fn the_twin_serves_its_pages_and_nothing_else() -> TestResult {
    let twin = MemoryRetriever::new().with_page("https://example.org/a", "hello");
    assert_eq!(fetch(&twin, "https://example.org/a").await?.text, "hello");
    assert_eq!(
        fetch(&twin, "https://example.org/b").await,
        Err(RetrieveError::Status(404))
    );
    assert_eq!(twin.asked().len(), 2);
    Ok(())
}
