//! The web console of a daemon under test (`run --console-addr`): its address from the log,
//! its token file, an HTTP client that follows no redirect, and the checks every answer
//! passes (the security headers).

use std::time::Duration;

use serde_json::Value;

use super::daemon::{Scratch, poll};

/// The console's address, from the daemon's `console_listening` log line.
pub(crate) fn console_addr(s: &Scratch) -> Option<String> {
    nth_console_addr(s, 0)
}

/// The console's address of the daemon's `n`th start (from 0) on this scratch directory.
pub(crate) fn nth_console_addr(s: &Scratch, n: usize) -> Option<String> {
    poll(Duration::from_secs(20), || {
        s.log_text()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| {
                v["fields"]["event"] == "console_listening" || v["event"] == "console_listening"
            })
            .nth(n)
            .and_then(|v| {
                v["fields"]["addr"]
                    .as_str()
                    .or(v["addr"].as_str())
                    .map(str::to_string)
            })
    })
}

pub(crate) fn token(s: &Scratch) -> String {
    std::fs::read_to_string(s.state().join("console.token"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

pub(crate) fn client() -> reqwest::Client {
    // reqwest is built without a bundled crypto provider (as the daemon is); plain HTTP here.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The CSRF value of the first form of `html`.
pub(crate) fn csrf_of(html: &str) -> Option<String> {
    let at = html.find("name=\"csrf\" value=\"")? + "name=\"csrf\" value=\"".len();
    Some(html[at..].split('"').next()?.to_string())
}

/// The headers every console answer carries (a 401, a redirect, a page, a refusal alike): no
/// caching, no framing, no sniffing, no referrer, and a content security policy.
pub(crate) fn assert_guarded(r: &reqwest::Response, what: &str) {
    let h = r.headers();
    let value = |name: &str| {
        h.get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(value("cache-control"), "no-store", "{what}");
    assert_eq!(value("x-frame-options"), "DENY", "{what}");
    assert_eq!(value("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(value("referrer-policy"), "no-referrer", "{what}");
    let csp = value("content-security-policy");
    assert!(
        csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{what}: {csp:?}"
    );
}
