//! The console's HTTP conventions over the daemon's HTTP server (`ops::web`, hyper): the
//! limits of a console request (a head of at most 16 KiB, a form of at most 64 KiB, idle and
//! body timeouts), the security headers every console answer carries, and the
//! percent-encoding of the links the pages write. It knows nothing of pages or tokens.

use std::time::Duration;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

pub(crate) use crate::app::ops::web::{Request, Response, Unread};

/// A console connection's limits: its next request's head within 5 s of the accept or of the
/// last answer (idle and slow clients alike), its body (a form with a draft's text) within
/// 10 s and 64 KiB, its head within 16 KiB. Browsers keep the connection for the next page.
pub(crate) const LIMITS: crate::app::ops::web::Limits = crate::app::ops::web::Limits {
    idle: Duration::from_secs(5),
    body: Duration::from_secs(10),
    body_cap: 64 << 10,
    head_cap: 16 << 10,
    keep_alive: true,
};

/// What stays as it is in a link's path segment or query value (RFC 3986's unreserved).
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// What stays as it is in a whole path: the unreserved characters and `/`.
const PATH: &AsciiSet = &UNRESERVED.remove(b'/');

/// Percent-encoding of a whole path (its `/` kept).
pub(crate) fn encode_path(s: &str) -> String {
    utf8_percent_encode(s, PATH).to_string()
}

/// Percent-encoding of a path segment or a query value.
pub(crate) fn encode(s: &str) -> String {
    utf8_percent_encode(s, UNRESERVED).to_string()
}

/// `response` with the headers every console answer carries: no caching, no framing, no
/// sniffing, no referrer, scripts and styles from the console only.
pub(crate) fn guarded(response: Response) -> Response {
    response
        .with_header("Cache-Control", "no-store".into())
        .with_header("X-Frame-Options", "DENY".into())
        .with_header("X-Content-Type-Options", "nosniff".into())
        .with_header("Referrer-Policy", "no-referrer".into())
        .with_header(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'"
                .into(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_encoded_and_decode_back() {
        assert_eq!(encode("a b/é~-_."), "a%20b%2F%C3%A9~-_.");
        let back = percent_encoding::percent_decode_str(&encode("a b/é"))
            .decode_utf8_lossy()
            .into_owned();
        assert_eq!(back, "a b/é");
    }

    #[test]
    fn every_answer_is_guarded() {
        let r = guarded(Response::html(404, String::new()));
        let names: Vec<&str> = r.headers.iter().map(|(n, _)| *n).collect();
        for name in [
            "Cache-Control",
            "X-Frame-Options",
            "X-Content-Type-Options",
            "Referrer-Policy",
            "Content-Security-Policy",
        ] {
            assert!(names.contains(&name), "{name}");
        }
    }
}
