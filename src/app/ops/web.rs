//! The daemon's HTTP server, for the web console (`app::console`) and the metrics endpoint
//! (`ops::metrics`): hyper's HTTP/1.1 server behind a listener's connection budget
//! ([`listen::Budget`](super::listen::Budget)), with an idle timeout (hyper's header read
//! timeout, which runs from the accept or the end of the last answer to the end of the next
//! request's head, so it bounds idle and slow heads alike), a timeout and a size cap for a
//! request's body, and a cap on its head. When every slot is held, the next connection is
//! accepted anyway and the connection idle the longest (no request in hand) is closed to make
//! room, so idle or silent clients cannot keep the owner out. Requests reach the handler whole,
//! the path percent-decoded and the query decoded as a form; the handler's answer goes out as
//! it is. Also [`bind`], which the daemon calls before anything else starts, so that a busy
//! port fails the start at once. It knows nothing of pages, tokens or metrics.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::app::lifecycle::Lifecycle;
use crate::app::ops::OpError;
use crate::app::ops::listen::{self, Budget};

/// How a listener's requests are bounded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// How long a connection may wait for a request's whole head: from the accept, or from
    /// the end of its last answer (keep-alive), to the head's end.
    pub(crate) idle: Duration,
    /// How long a request's body may take to arrive once its head is in.
    pub(crate) body: Duration,
    /// The largest body read.
    pub(crate) body_cap: usize,
    /// The largest head read (at least 8 KiB: hyper's smallest buffer).
    pub(crate) head_cap: usize,
    /// Whether a connection may carry more than one request.
    pub(crate) keep_alive: bool,
}

/// One request, read whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) method: String,
    /// The path without the query, percent-decoded.
    pub(crate) path: String,
    /// The query's fields (the last of a repeated name wins).
    pub(crate) query: BTreeMap<String, String>,
    /// Header names in lower case; a repeated header's values joined by `, ` (`; ` for
    /// cookies).
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
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

    /// The fields of an `application/x-www-form-urlencoded` body.
    pub(crate) fn form(&self) -> BTreeMap<String, String> {
        form_urlencoded::parse(&self.body).into_owned().collect()
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
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

/// Why a request did not reach the handler whole (the handler still answers it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unread {
    /// The body is over the cap (413).
    TooLarge,
    /// The body did not arrive in time (408).
    TooSlow,
    /// The body broke off (400).
    Broken,
}

impl Unread {
    pub(crate) fn status(self) -> u16 {
        match self {
            Unread::TooLarge => 413,
            Unread::TooSlow => 408,
            Unread::Broken => 400,
        }
    }
}

/// Binds `addr` for `what` (`"the console"`, `"metrics"`).
pub(crate) async fn bind(addr: SocketAddr, what: &str) -> Result<TcpListener, OpError> {
    TcpListener::bind(addr)
        .await
        .map_err(OpError::io(format!("cannot listen on {addr} for {what}")))
}

/// One open connection, as the room maker sees it.
#[derive(Debug)]
struct Conn {
    /// Its listener's clock (milliseconds are counted from it).
    epoch: Instant,
    /// A request is being read or answered.
    busy: AtomicBool,
    /// It has answered a request (so closing it means finishing what it writes first).
    served: AtomicBool,
    /// Since when it waits for a request (milliseconds since `epoch`).
    idle_since_ms: AtomicU64,
    /// Cancelled to close it.
    close: CancellationToken,
}

/// The open connections of one listener.
#[derive(Debug)]
struct Open {
    start: Instant,
    next: AtomicU64,
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
}

impl Conn {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

impl Open {
    fn add(self: &Arc<Self>) -> (Arc<Conn>, Registered) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            epoch: self.start,
            busy: AtomicBool::new(false),
            served: AtomicBool::new(false),
            idle_since_ms: AtomicU64::new(
                u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX),
            ),
            close: CancellationToken::new(),
        });
        self.conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, Arc::clone(&conn));
        (
            conn,
            Registered {
                open: Arc::clone(self),
                id,
            },
        )
    }

    /// Closes the connection idle the longest (not already closing); whether there was one.
    fn close_longest_idle(&self) -> bool {
        let conns = self.conns.lock().unwrap_or_else(PoisonError::into_inner);
        let oldest = conns
            .values()
            .filter(|c| !c.busy.load(Ordering::Acquire) && !c.close.is_cancelled())
            .min_by_key(|c| c.idle_since_ms.load(Ordering::Relaxed));
        match oldest {
            Some(c) => {
                c.close.cancel();
                true
            }
            None => false,
        }
    }
}

/// Takes its connection out of the registry when the connection ends.
struct Registered {
    open: Arc<Open>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.open
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

/// Serves HTTP on `listener` until `life` stops, within `budget` and `limits`, each request
/// answered by `handler` (given the request, or why it could not be read whole).
pub(crate) async fn serve<H, F>(
    listener: TcpListener,
    budget: Budget,
    limits: Limits,
    life: Lifecycle,
    handler: H,
) where
    H: Fn(Result<Request, Unread>) -> F + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let open = Arc::new(Open {
        start: Instant::now(),
        next: AtomicU64::new(0),
        conns: Mutex::new(HashMap::new()),
    });
    let handler = Arc::new(handler);
    // A connection is asked to finish (its request answered, then closed) before the budget's
    // deadline cuts it: one idle time before it, or half of it when that is shorter.
    let finish_by = budget
        .deadline
        .saturating_sub(limits.idle)
        .max(budget.deadline / 2);
    let room = Arc::clone(&open);
    listen::serve_making_room(
        listener,
        budget,
        life,
        Some(Box::new(move || room.close_longest_idle())),
        move |stream| connection(stream, open.add(), limits, finish_by, Arc::clone(&handler)),
    )
    .await;
}

/// Serves one connection until it ends, is closed to make room, or reaches `finish_by`.
async fn connection<H, F>(
    stream: TcpStream,
    (conn, registered): (Arc<Conn>, Registered),
    limits: Limits,
    finish_by: Duration,
    handler: Arc<H>,
) where
    H: Fn(Result<Request, Unread>) -> F + Send + Sync + 'static,
    F: Future<Output = Response> + Send + 'static,
{
    let _registered = registered;
    let state = Arc::clone(&conn);
    let service = service_fn(move |request: hyper::Request<Incoming>| {
        let (state, handler) = (Arc::clone(&state), Arc::clone(&handler));
        async move {
            state.busy.store(true, Ordering::Release);
            let answer = handler(read(request, &limits).await).await;
            state.served.store(true, Ordering::Relaxed);
            state.idle_since_ms.store(state.now_ms(), Ordering::Relaxed);
            state.busy.store(false, Ordering::Release);
            Ok::<_, Infallible>(into_hyper(answer))
        }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle)
        .keep_alive(limits.keep_alive)
        .max_buf_size(limits.head_cap.max(8192))
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(served);
    tokio::select! {
        _ = served.as_mut() => return,
        () = conn.close.cancelled() => {}
        () = tokio::time::sleep(finish_by) => {}
    }
    if !conn.served.load(Ordering::Relaxed) && !conn.busy.load(Ordering::Acquire) {
        // It never had a request: nothing to finish.
        return;
    }
    // An idle connection closes at once; one that answers finishes its answer first.
    served.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(limits.idle, served).await;
}

/// The request with its body, read within the limits.
async fn read(request: hyper::Request<Incoming>, limits: &Limits) -> Result<Request, Unread> {
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limits.body_cap as u64) {
        return Err(Unread::TooLarge);
    }
    let body = match tokio::time::timeout(
        limits.body,
        Limited::new(body, limits.body_cap).collect(),
    )
    .await
    {
        Err(_) => return Err(Unread::TooSlow),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(Unread::TooLarge);
        }
        Ok(Err(_)) => return Err(Unread::Broken),
        Ok(Ok(collected)) => collected.to_bytes().to_vec(),
    };
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        let joint = if name == hyper::header::COOKIE {
            "; "
        } else {
            ", "
        };
        headers
            .entry(name.as_str().to_string())
            .and_modify(|v| {
                v.push_str(joint);
                v.push_str(&value);
            })
            .or_insert(value);
    }
    Ok(Request {
        method: parts.method.as_str().to_string(),
        path: percent_encoding::percent_decode_str(parts.uri.path())
            .decode_utf8_lossy()
            .into_owned(),
        query: form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect(),
        headers,
        body,
    })
}

/// The answer as hyper sends it; a header value that is not a valid one (a line break) loses
/// its control characters first, and is left out if still invalid.
fn into_hyper(answer: Response) -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(Bytes::from(answer.body)));
    *response.status_mut() = hyper::StatusCode::from_u16(answer.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(answer.content_type));
    for (name, value) in answer.headers {
        let value: String = value.chars().filter(|c| !c.is_control()).collect();
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            headers.append(name, value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_never_carries_a_line_break_in_a_header() {
        let r = into_hyper(
            Response::see_other("/a\r\nSet-Cookie: x=1").with_header("X-Test", "ok".into()),
        );
        assert_eq!(r.status().as_u16(), 303);
        let location = r.headers().get("location").map(HeaderValue::as_bytes);
        assert_eq!(location, Some(&b"/aSet-Cookie: x=1"[..]));
        assert!(r.headers().get("set-cookie").is_none());
        assert_eq!(
            r.headers().get("x-test").map(HeaderValue::as_bytes),
            Some(&b"ok"[..])
        );
    }

    #[test]
    fn cookies_and_forms_decode() {
        let mut r = Request {
            body: b"text=ok%21+yes&csrf=z&bad=%zz&text=last".to_vec(),
            ..Request::default()
        };
        r.headers
            .insert("cookie".into(), "a=1; personad_console=abc".into());
        assert_eq!(r.cookie("personad_console"), Some("abc"));
        assert_eq!(r.cookie("b"), None);
        let f = r.form();
        assert_eq!(f.get("text").map(String::as_str), Some("last"));
        assert_eq!(f.get("csrf").map(String::as_str), Some("z"));
        assert_eq!(f.get("bad").map(String::as_str), Some("%zz"));
    }

    #[test]
    fn the_longest_idle_connection_is_closed_and_a_busy_one_never() {
        let open = Arc::new(Open {
            start: Instant::now(),
            next: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let (a, _ra) = open.add();
        let (b, _rb) = open.add();
        let (c, rc) = open.add();
        a.busy.store(true, Ordering::Release);
        b.idle_since_ms.store(10, Ordering::Relaxed);
        c.idle_since_ms.store(5, Ordering::Relaxed);
        assert!(open.close_longest_idle());
        assert!(c.close.is_cancelled() && !b.close.is_cancelled());
        drop(rc);
        assert!(open.close_longest_idle());
        assert!(b.close.is_cancelled() && !a.close.is_cancelled());
        assert!(!open.close_longest_idle(), "only a busy one is left");
    }
}
