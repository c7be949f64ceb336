//! The real web fetcher ([`HttpRetriever`]), SSRF-safe: it resolves each host itself and
//! refuses the fetch when any of its addresses is not public (`guard`), then connects only to
//! the addresses it checked (pinned in the hop's client, so a second DNS answer cannot swap
//! them); it never uses a proxy; it follows redirects by hand (reqwest's own policy is off),
//! checking every hop the same way, at most [`Limits::max_redirects`]; it reads only text
//! (`text/html`, `text/plain`, `application/xhtml+xml`, `application/json`, `text/markdown`,
//! …), stops reading past [`Limits::max_bytes`] (refused as too large: a 50 MB body is never
//! buffered), gives up after [`Limits::total`] in all, and turns HTML into readable text
//! (`html`), of which it keeps [`Limits::max_chars`] characters. Metering and the daily cap are
//! `metered`'s. The tests' local server is reachable only through a constructor of
//! `test-hooks` builds, never from configuration.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::time::Instant;

use super::guard::may_connect;
use super::html;
use crate::core::retrieve::{MAX_DOC_CHARS, excerpt};
use crate::core::time::BoxFuture;
use crate::ports::retrieve::{Page, RetrieveError, RetrieveRequest, Retriever};

/// The fetcher's caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most body bytes read; a longer body is refused.
    pub max_bytes: u64,
    /// Most characters of text kept.
    pub max_chars: usize,
    /// The whole fetch, redirects included.
    pub total: Duration,
    pub max_redirects: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_bytes: 2 * 1024 * 1024,
            max_chars: MAX_DOC_CHARS,
            total: Duration::from_secs(20),
            max_redirects: 5,
        }
    }
}

/// Media types read, and whether they are HTML.
const TEXT_TYPES: [(&str, bool); 9] = [
    ("text/html", true),
    ("application/xhtml+xml", true),
    ("text/plain", false),
    ("text/markdown", false),
    ("text/x-markdown", false),
    ("application/json", false),
    ("text/csv", false),
    ("text/xml", false),
    ("application/xml", false),
];

/// Fetches public web pages (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct HttpRetriever {
    limits: Limits,
    /// Exact addresses allowed beside public ones: the tests' local server only.
    allowed: Vec<SocketAddr>,
}

impl HttpRetriever {
    pub fn new() -> HttpRetriever {
        HttpRetriever::default()
    }

    pub fn with_limits(mut self, limits: Limits) -> HttpRetriever {
        self.limits = limits;
        self
    }

    /// Lets this fetcher reach `addr` (a test's server on 127.0.0.1) exactly: that address and
    /// port, nothing else of loopback. Only in `test-hooks` builds.
    #[cfg(feature = "test-hooks")]
    pub fn allowing_for_tests(mut self, addr: SocketAddr) -> HttpRetriever {
        self.allowed.push(addr);
        self
    }

    async fn get(&self, start: &str) -> Result<Page, RetrieveError> {
        let deadline = Instant::now() + self.limits.total;
        let timed_out = RetrieveError::TimedOut(self.limits.total.as_secs());
        let mut url =
            reqwest::Url::parse(start).map_err(|_| RetrieveError::BadUrl(excerpt(start)))?;
        for _hop in 0..=self.limits.max_redirects {
            let (host, addrs) = tokio::time::timeout_at(deadline, self.checked_addrs(&url))
                .await
                .map_err(|_| timed_out.clone())??;
            let left = deadline.saturating_duration_since(Instant::now());
            let client = client(&host, &addrs, left)?;
            let request = client
                .get(url.clone())
                .header(
                    reqwest::header::ACCEPT,
                    "text/html, text/plain;q=0.9, application/json;q=0.8, */*;q=0.1",
                )
                .send();
            let response = tokio::time::timeout_at(deadline, request)
                .await
                .map_err(|_| timed_out.clone())?
                .map_err(|e| transport(&e, &self.limits))?;
            let status = response.status();
            if status.is_redirection() {
                let next = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                    .ok_or(RetrieveError::BadRedirect)?;
                tracing::debug!(from = %excerpt(url.as_str()), to = %excerpt(next.as_str()), "retrieve: following a redirect");
                url = next;
                continue;
            }
            if !status.is_success() {
                return Err(RetrieveError::Status(status.as_u16()));
            }
            return tokio::time::timeout_at(deadline, self.read(response, &url))
                .await
                .map_err(|_| timed_out)?;
        }
        Err(RetrieveError::TooManyRedirects(self.limits.max_redirects))
    }

    /// The URL's host and its addresses, each one checked: a refusal names the first address
    /// that is not public.
    async fn checked_addrs(
        &self,
        url: &reqwest::Url,
    ) -> Result<(String, Vec<SocketAddr>), RetrieveError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(RetrieveError::BadUrl(excerpt(url.as_str())));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| RetrieveError::BadUrl(excerpt(url.as_str())))?
            .to_owned();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| RetrieveError::BadUrl(excerpt(url.as_str())))?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::net::lookup_host((bare, port))
                .await
                .map_err(|_| RetrieveError::NoAddress(excerpt(bare)))?
                .collect(),
        };
        if addrs.is_empty() {
            return Err(RetrieveError::NoAddress(excerpt(bare)));
        }
        if let Some(bad) = addrs.iter().find(|a| !may_connect(**a, &self.allowed)) {
            return Err(RetrieveError::Address {
                host: excerpt(bare),
                addr: bad.ip(),
            });
        }
        Ok((bare.to_owned(), addrs))
    }

    /// Reads a text body up to the cap and makes it readable.
    async fn read(
        &self,
        mut response: reqwest::Response,
        url: &reqwest::Url,
    ) -> Result<Page, RetrieveError> {
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let Some((_, is_html)) = TEXT_TYPES.iter().find(|(t, _)| *t == content_type) else {
            return Err(RetrieveError::ContentType(excerpt(&content_type)));
        };
        let cap = self.limits.max_bytes;
        if response.content_length().is_some_and(|n| n > cap) {
            return Err(RetrieveError::TooLarge(cap));
        }
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| transport(&e, &self.limits))?
        {
            if body.len() as u64 + chunk.len() as u64 > cap {
                // Read no further: the rest is never buffered.
                return Err(RetrieveError::TooLarge(cap));
            }
            body.extend_from_slice(&chunk);
        }
        let raw = String::from_utf8_lossy(&body);
        let text = if *is_html {
            html::to_text(&raw)
        } else {
            html::tidy(&raw)
        };
        Ok(Page {
            final_url: url.to_string(),
            content_type,
            text: text.chars().take(self.limits.max_chars).collect(),
            bytes: body.len() as u64,
        })
    }
}

impl Retriever for HttpRetriever {
    fn fetch<'a>(&'a self, req: RetrieveRequest<'a>) -> BoxFuture<'a, Result<Page, RetrieveError>> {
        Box::pin(self.get(req.url))
    }
}

/// One hop's client: no proxy, no redirects, the host pinned to the addresses checked.
fn client(
    host: &str,
    addrs: &[SocketAddr],
    left: Duration,
) -> Result<reqwest::Client, RetrieveError> {
    // reqwest is built without a bundled crypto provider; make ring the process default.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(left.min(Duration::from_secs(10)))
        .timeout(left)
        .user_agent(concat!("personad/", env!("CARGO_PKG_VERSION")));
    if host.parse::<IpAddr>().is_err() {
        builder = builder.resolve_to_addrs(host, addrs);
    }
    builder
        .build()
        .map_err(|e| RetrieveError::Network(format!("cannot build the HTTP client: {e}")))
}

/// A transport failure, without the URL.
fn transport(e: &reqwest::Error, limits: &Limits) -> RetrieveError {
    if e.is_timeout() {
        return RetrieveError::TimedOut(limits.total.as_secs());
    }
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    RetrieveError::Network(excerpt(&why))
}
