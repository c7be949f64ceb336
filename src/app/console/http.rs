//! The console's HTTP/1.1, as small as a loopback console needs: one request per connection
//! (`Connection: close`), a head of at most 16 KiB, a body of at most 64 KiB read by its
//! `Content-Length`, `application/x-www-form-urlencoded` forms, and responses with the
//! security headers every page gets. Parsing is pure ([`parse_head`], [`form`]); reading and
//! writing are the two async functions. It knows nothing of pages or tokens.

use std::collections::BTreeMap;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest request head read.
const HEAD_CAP: usize = 16 << 10;
/// Largest request body read (a form with a draft's text).
const BODY_CAP: usize = 64 << 10;

/// One request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Request {
    pub method: String,
    /// The path without the query, percent-decoded.
    pub path: String,
    pub query: BTreeMap<String, String>,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Request {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// The value of cookie `name`.
    pub(crate) fn cookie(&self, name: &str) -> Option<&str> {
        self.header("cookie")?
            .split(';')
            .filter_map(|c| c.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
    }

    /// The form fields of a urlencoded body.
    pub(crate) fn form(&self) -> BTreeMap<String, String> {
        form(&String::from_utf8_lossy(&self.body))
    }
}

/// A response.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub(crate) fn html(status: u16, body: String) -> Response {
        Response {
            status,
            content_type: "text/html; charset=utf-8",
            headers: Vec::new(),
            body: body.into_bytes(),
        }
    }

    /// A redirect after a form (303: the browser follows with a GET).
    pub(crate) fn see_other(location: &str) -> Response {
        Response {
            status: 303,
            content_type: "text/plain; charset=utf-8",
            headers: vec![("Location", location.to_string())],
            body: Vec::new(),
        }
    }

    pub(crate) fn with_header(mut self, name: &'static str, value: String) -> Response {
        self.headers.push((name, value));
        self
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        303 => "See Other",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        _ => "Error",
    }
}

/// Why a request could not be read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The connection closed or failed before a whole request.
    Closed,
    /// Not HTTP as we take it (the status to answer with).
    Bad(u16),
}

/// Reads one request (head, then its body by `Content-Length`).
pub(crate) async fn read_request(
    stream: &mut (impl AsyncRead + Unpin),
) -> Result<Request, ReadError> {
    let mut buf = Vec::new();
    let end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > HEAD_CAP {
            return Err(ReadError::Bad(413));
        }
        read_more(stream, &mut buf).await?;
    };
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| ReadError::Bad(400))?;
    let mut request = parse_head(head).ok_or(ReadError::Bad(400))?;
    let length: usize = match request.header("content-length") {
        Some(v) => v.trim().parse().map_err(|_| ReadError::Bad(400))?,
        None => 0,
    };
    if length > BODY_CAP {
        return Err(ReadError::Bad(413));
    }
    let mut body = buf[end + 4..].to_vec();
    while body.len() < length {
        read_more(stream, &mut body).await?;
    }
    body.truncate(length);
    request.body = body;
    Ok(request)
}

/// Appends what the stream has next to `buf`; the connection ending first is `Closed`.
async fn read_more(
    stream: &mut (impl AsyncRead + Unpin),
    buf: &mut Vec<u8>,
) -> Result<(), ReadError> {
    let mut chunk = [0u8; 4096];
    let n = stream
        .read(&mut chunk)
        .await
        .map_err(|_| ReadError::Closed)?;
    if n == 0 {
        return Err(ReadError::Closed);
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// The request line and headers.
pub(crate) fn parse_head(head: &str) -> Option<Request> {
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, target, version) = (first.next()?, first.next()?, first.next()?);
    if !version.starts_with("HTTP/1.") || first.next().is_some() {
        return None;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut headers = BTreeMap::new();
    for line in lines {
        let (name, value) = line.split_once(':')?;
        headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    Some(Request {
        method: method.to_string(),
        path: decode(path),
        query: form(query),
        headers,
        body: Vec::new(),
    })
}

/// `a=1&b=x%20y` as fields (`+` is a space; the last of a repeated name wins).
pub(crate) fn form(text: &str) -> BTreeMap<String, String> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(&k.replace('+', " ")), decode(&v.replace('+', " ")))
        })
        .collect()
}

/// Percent-decoding (a bad escape stays as it is; invalid UTF-8 is replaced).
pub(crate) fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(h), Some(l)) if hex(*h).is_some() && hex(*l).is_some() => {
                out.push((hex(*h).unwrap_or(0) * 16 + hex(*l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encoding of a path segment or a query value.
pub(crate) fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Writes `response` with the headers every console answer carries: no caching, no framing,
/// no sniffing, scripts and styles from the console only.
pub(crate) async fn write_response(
    stream: &mut (impl AsyncWrite + Unpin),
    response: &Response,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\nX-Frame-Options: DENY\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\nContent-Security-Policy: default-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    for (name, value) in &response.headers {
        // A header value never carries a line break (no header injection).
        let value: String = value.chars().filter(|c| !c.is_control()).collect();
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&response.body).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_forms_and_cookies_parse() {
        let r = parse_head(
            "POST /agent/T%C3%A9a?x=1&y=a+b HTTP/1.1\r\nHost: x\r\nCookie: a=1; personad_console=abc\r\nContent-Length: 3",
        )
        .unwrap_or_default();
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/agent/Téa"));
        assert_eq!(r.query.get("y").map(String::as_str), Some("a b"));
        assert_eq!(r.cookie("personad_console"), Some("abc"));
        assert_eq!(r.cookie("b"), None);
        assert!(parse_head("GET / SPDY/3\r\n").is_none());
        assert!(parse_head("GET /\r\n").is_none());
        let f = form("text=ok%21+yes&csrf=z&bad=%zz");
        assert_eq!(f.get("text").map(String::as_str), Some("ok! yes"));
        assert_eq!(f.get("bad").map(String::as_str), Some("%zz"));
        assert_eq!(decode(&encode("a b/é")), "a b/é");
    }

    #[tokio::test]
    async fn a_body_is_read_by_its_length_and_an_oversize_one_refused() {
        let raw = b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello-extra".to_vec();
        let r = read_request(&mut raw.as_slice()).await.unwrap_or_default();
        assert_eq!(r.body, b"hello");
        let big = format!(
            "POST /a HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
            BODY_CAP + 1
        );
        assert_eq!(
            read_request(&mut big.as_bytes()).await,
            Err(ReadError::Bad(413))
        );
        assert_eq!(
            read_request(&mut &b"GET / HTTP/1.1\r\n"[..]).await,
            Err(ReadError::Closed)
        );
    }
}
