//! HTTP plumbing shared by the LLM provider clients: the one way to build their reqwest client
//! (rustls with ring, no redirects so an auth header can never follow to another host, no proxy
//! for loopback endpoints), base URL validation, `Retry-After` parsing and error-text helpers
//! that never include a URL. No provider wire format lives here; `gemini` and `openai` call it,
//! and so do the speech clients (`adapters::speech`).

use std::time::Duration;

use reqwest::header::{DATE, HeaderMap, RETRY_AFTER};

use crate::ports::llm::LlmError;

/// The HTTP client of a provider at `base_url` (already normalised).
pub(crate) fn http_client(
    base_url: &str,
    connect_timeout: Duration,
    request_timeout: Duration,
) -> Result<reqwest::Client, LlmError> {
    // reqwest is built without a bundled crypto provider; make ring the process default.
    // An error only means some provider is installed already, which reqwest then uses.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder();
    if is_loopback(base_url) {
        // A local endpoint (a test double, a local gateway, Ollama) is never reached via a proxy.
        builder = builder.no_proxy();
    }
    builder
        .connect_timeout(connect_timeout)
        .timeout(request_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("personad/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {}", chain(e))))
}

/// How much of a provider's response body is read by default (8 MiB): a chat answer is a
/// few KB, so this only stops a runaway body from taking the process's memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// The environment variable that changes [`DEFAULT_MAX_RESPONSE_BYTES`] (in MiB).
pub const MAX_RESPONSE_ENV: &str = "PERSONAD_LLM_MAX_RESPONSE_MB";

/// The body cap from `lookup` ([`MAX_RESPONSE_ENV`], whole MiB, at least 1), else the
/// default. A value that is not a number is a configuration error naming the variable.
pub(crate) fn max_response_bytes(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<usize, LlmError> {
    match lookup(MAX_RESPONSE_ENV).filter(|v| !v.trim().is_empty()) {
        None => Ok(DEFAULT_MAX_RESPONSE_BYTES),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(mb) if (1..=1024).contains(&mb) => Ok(mb * 1024 * 1024),
            _ => Err(LlmError::Config(format!(
                "{MAX_RESPONSE_ENV} must be a whole number of MiB from 1 to 1024"
            ))),
        },
    }
}

/// Why an exchange brought no body.
pub(crate) enum ExchangeError {
    /// The connection failed (sending or reading).
    Transport(reqwest::Error),
    /// The body is longer than the cap (it was not read further); the status it came with.
    TooLarge(u16),
}

/// What came back: the status, the server's `Retry-After`, the body, and the request's
/// usage guard (keep it until the response's usage is reported).
pub(crate) struct Answer {
    pub(crate) status: reqwest::StatusCode,
    pub(crate) retry_after: Option<Duration>,
    pub(crate) body: Vec<u8>,
    pub(crate) in_flight: crate::adapters::llm::usage::InFlight,
}

/// Sends one request to `model` and reads its answer, the body up to `max` bytes. The
/// request is metered (`usage::InFlight`): if this future is dropped before the answer is
/// read, it is counted as discarded.
pub(crate) async fn exchange(
    request: reqwest::RequestBuilder,
    model: &str,
    max: usize,
) -> Result<Answer, ExchangeError> {
    let mut in_flight = crate::adapters::llm::usage::sending(model);
    let result = send_and_read(request, max).await;
    in_flight.answered();
    result.map(|(status, retry_after, body)| Answer {
        status,
        retry_after,
        body,
        in_flight,
    })
}

tokio::task_local! {
    /// The `Date` header of the latest response read in a [`with_server_date`] scope.
    static SERVER_DATE: std::cell::RefCell<Option<String>>;
}

/// Runs `f` and returns, with its output, the `Date` header of the latest provider response
/// it read (`doctor` compares it with the local clock). Outside such a scope nothing is kept.
pub async fn with_server_date<F: std::future::Future>(f: F) -> (F::Output, Option<String>) {
    SERVER_DATE
        .scope(std::cell::RefCell::new(None), async move {
            let out = f.await;
            let date = SERVER_DATE.with(|d| d.borrow_mut().take());
            (out, date)
        })
        .await
}

/// [`exchange`] without its metering guard (speech meters each attempt in its own wrapper):
/// the status, the server's `Retry-After` and the body, up to `max` bytes.
pub(crate) async fn send_and_read(
    request: reqwest::RequestBuilder,
    max: usize,
) -> Result<(reqwest::StatusCode, Option<Duration>, Vec<u8>), ExchangeError> {
    let mut response = request.send().await.map_err(ExchangeError::Transport)?;
    let status = response.status();
    let retry_after = parse_retry_after(response.headers());
    let _ = SERVER_DATE.try_with(|d| {
        *d.borrow_mut() = response
            .headers()
            .get(DATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
    });
    // A declared length over the cap is refused before reading anything.
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(ExchangeError::TooLarge(status.as_u16()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(ExchangeError::Transport)? {
        if body.len() + chunk.len() > max {
            return Err(ExchangeError::TooLarge(status.as_u16()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((status, retry_after, body))
}

/// The error of a body over the cap: permanent (the same request would stream the same
/// runaway body again), naming the provider and the cap.
pub(crate) fn too_large(provider: &str, status: u16, max: usize) -> LlmError {
    LlmError::Permanent {
        status: Some(status),
        message: format!(
            "the {provider} response is larger than the {} MiB cap ({MAX_RESPONSE_ENV}); it was not read",
            max / (1024 * 1024)
        ),
    }
}

/// A base URL without its trailing slash; http(s) only, no query or fragment (where a key
/// could hide). `provider` names it in the error.
pub(crate) fn normalise_base_url(provider: &str, raw: &str) -> Result<String, LlmError> {
    let trimmed = raw.trim().trim_end_matches('/');
    let bad = |why: &str| LlmError::Config(format!("invalid {provider} base URL: {why}"));
    let url = reqwest::Url::parse(trimmed).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("it must not have a query or fragment"));
    }
    Ok(trimmed.to_owned())
}

/// True when the (already validated) base URL points at this machine.
pub(crate) fn is_loopback(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A reqwest error and its causes as one line, without the URL.
pub fn chain(err: reqwest::Error) -> String {
    let err = err.without_url();
    let mut text = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Whitespace runs collapsed to one space, cut to `max` characters (with an ellipsis).
pub(crate) fn truncate(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut chars = 0usize;
    for word in text.split_whitespace() {
        if chars > 0 {
            if chars >= max {
                out.push('…');
                return out;
            }
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= max {
                out.push('…');
                return out;
            }
            out.push(c);
            chars += 1;
        }
    }
    out
}

/// `Retry-After` in (possibly fractional) seconds; HTTP dates are ignored.
pub(crate) fn parse_retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    let secs: f64 = value.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| crate::core::time::secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_is_char_safe_and_one_line() {
        assert_eq!(truncate("a  b\n\nc", 10), "a b c");
        assert_eq!(truncate("ééééé", 3), "ééé…");
        assert_eq!(truncate("ab cd", 2), "ab…");
        assert_eq!(truncate("", 2), "");
    }

    #[test]
    fn base_urls() {
        assert_eq!(
            normalise_base_url("Gemini", "http://127.0.0.1:9/ ")
                .ok()
                .as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert!(normalise_base_url("Gemini", "ftp://x").is_err());
        assert!(normalise_base_url("Gemini", "https://x/?key=1").is_err());
        assert!(normalise_base_url("Gemini", "nonsense").is_err());
    }

    #[test]
    fn loopback_detection() {
        assert!(is_loopback("http://127.0.0.1:8080"));
        assert!(is_loopback("http://localhost"));
        assert!(is_loopback("http://[::1]:9"));
        assert!(!is_loopback("https://generativelanguage.googleapis.com"));
        assert!(!is_loopback("http://10.0.0.1"));
    }
}
