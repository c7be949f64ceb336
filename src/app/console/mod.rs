//! The local web console (`run --console-addr`): server-rendered pages of the running daemon
//! (personas, a persona's chats, a conversation with its plan, drafts, usage, incidents) and
//! forms for the owner's actions, served from the daemon itself.
//!
//! Access: a random token written to `<state>/console.token` (0600) at start, required as the
//! `personad_console` cookie (set by the login form) or an `Authorization: Bearer` header;
//! every other request answers 401. Every form carries a CSRF token (random per start,
//! rendered only to authenticated pages) and a post without it is refused (403), as is a post
//! whose `Origin` is another site. It binds to loopback unless the operator names another
//! address (then it warns).
//!
//! It reads through the controller (the same control paths as `ctl`: the runtime handle, the
//! graph store scan, each agent's Telegram seat) and the usage meter, and every action is one
//! [`Op`] handed to [`Controller::execute`]: one implementation of each action. It never
//! reads state files itself and never renders a secret (keys, api_hash, session data, phone
//! numbers). Wired by `daemon`.

mod http;
mod pages;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::adapters::llm::usage::UsageMeter;
use crate::adapters::store::{self, StateDir};
use crate::app::lifecycle::Lifecycle;
use crate::app::ops::OpError;
use crate::app::ops::controls::{Controller, Op};
use crate::core::model::{ChatId, MessageId};
use crate::runtime::{NotableEvent, RuntimeHandle};
use http::{Request, Response};

/// The cookie that carries the token.
const COOKIE: &str = "personad_console";
/// Incidents kept for the page.
const INCIDENTS_KEPT: usize = 200;
/// Messages of a conversation shown.
const HISTORY_SHOWN: usize = 50;
/// Chats whose last message the chats page reads (one history call each).
const LAST_MESSAGES_READ: usize = 10;
/// The largest voice note the console plays (a minute of Opus is about 200 KB).
const VOICE_BYTES: u64 = 2 * 1024 * 1024;

const STYLE: &str = include_str!("style.css");

/// How long a connection may take to send its whole request (head and body).
const REQUEST_READ_TIMEOUT: Duration = Duration::from_secs(5);

const BUDGET: crate::app::ops::listen::Budget = crate::app::ops::listen::Budget {
    name: "console",
    max_connections: 16,
    deadline: Duration::from_secs(30),
};

/// What the console serves from.
struct Console {
    token: String,
    csrf: String,
    controller: Arc<Controller>,
    usage: Arc<UsageMeter>,
    incidents: Arc<Mutex<VecDeque<NotableEvent>>>,
}

/// A fresh random secret: 16 bytes of the kernel's randomness as 32 hex digits (blocking).
fn secret() -> Result<String, OpError> {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(OpError::io("no randomness for the console's token"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `a` equals `b`, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Writes a new token to `<state>/console.token` (0600) and returns it with a CSRF secret.
fn write_token(state: &StateDir) -> Result<(String, String), OpError> {
    let token = secret()?;
    store::write_atomic(&state.console_token_path(), format!("{token}\n").as_bytes())?;
    Ok((token, secret()?))
}

/// Binds `addr` and serves the console as tasks of `life` until it stops. The token file is written first.
pub(crate) async fn serve(
    addr: SocketAddr,
    state: &StateDir,
    controller: Arc<Controller>,
    runtime: RuntimeHandle,
    usage: Arc<UsageMeter>,
    life: &Lifecycle,
) -> Result<JoinHandle<()>, OpError> {
    if !addr.ip().is_loopback() {
        tracing::warn!(event = "console_not_loopback", addr = %addr, "the console listens beyond this machine: anyone who can reach it and has the token controls the personas");
    }
    let st = state.clone();
    let (token, csrf) = tokio::task::spawn_blocking(move || write_token(&st)).await??;
    let listener = TcpListener::bind(addr).await.map_err(OpError::io(format!(
        "cannot listen on {addr} for the console"
    )))?;
    let local = listener
        .local_addr()
        .map_err(OpError::io("cannot read the console's address"))?;
    tracing::info!(event = "console_listening", addr = %local, token_file = %state.console_token_path().display(), "web console listening");
    let incidents = Arc::new(Mutex::new(VecDeque::new()));
    let mut notables = runtime.observe_notables();
    let kept = Arc::clone(&incidents);
    let s = life.stop_token();
    life.spawn(async move {
        loop {
            tokio::select! {
                () = s.cancelled() => return,
                next = notables.recv() => match next {
                    Some(e) => {
                        let mut q = kept.lock().unwrap_or_else(PoisonError::into_inner);
                        q.push_back(e);
                        while q.len() > INCIDENTS_KEPT {
                            q.pop_front();
                        }
                    }
                    None => return,
                },
            }
        }
    });
    let console = Arc::new(Console {
        token,
        csrf,
        controller,
        usage,
        incidents,
    });
    Ok(life.spawn(crate::app::ops::listen::serve(
        listener,
        BUDGET,
        life.clone(),
        move |mut stream| {
            let console = Arc::clone(&console);
            async move {
                // A client that sends nothing, or its head byte by byte, is dropped after
                // a few seconds: silent connections must not hold the slots until the
                // connection's deadline and lock everyone out.
                let read =
                    tokio::time::timeout(REQUEST_READ_TIMEOUT, http::read_request(&mut stream));
                let response = match read.await {
                    Err(_) => {
                        tracing::debug!(
                            event = "console_slow_request",
                            "connection closed: no whole request in time"
                        );
                        return;
                    }
                    Ok(Ok(request)) => console.respond(&request).await,
                    Ok(Err(http::ReadError::Closed)) => return,
                    Ok(Err(http::ReadError::Bad(status))) => {
                        Response::html(status, pages::layout("Bad request", None, ""))
                    }
                };
                let _ = http::write_response(&mut stream, &response).await;
            }
        },
    )))
}

/// The personas page (`/`): each running persona, its status and where it stands now.
async fn personas_page(c: &Controller, csrf: &str, note: Option<&str>) -> String {
    pages::personas(&c.agent_views().await, csrf, note)
}

/// The personas page as `/` serves it, without the server around it (for tests that compare
/// it with `ctl status`).
#[cfg(feature = "test-hooks")]
pub async fn personas_page_for_tests(c: &Controller) -> String {
    personas_page(c, "csrf", None).await
}

impl Console {
    fn authorized(&self, r: &Request) -> bool {
        let bearer = r
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        bearer
            .or_else(|| r.cookie(COOKIE))
            .is_some_and(|t| same(t, &self.token))
    }

    async fn respond(&self, r: &Request) -> Response {
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/login") => return Response::html(200, pages::login(false)),
            ("POST", "/login") => return self.login(r),
            ("GET", "/style.css") => {
                let mut css = Response::html(200, STYLE.to_string());
                css.content_type = "text/css; charset=utf-8";
                return css;
            }
            _ => {}
        }
        if !self.authorized(r) {
            return Response::html(
                401,
                pages::layout(
                    "Log in first",
                    None,
                    "<p>This console needs its token: <a href=\"/login\">log in</a>.</p>",
                ),
            )
            .with_header("WWW-Authenticate", "Bearer".into());
        }
        let note = r.query.get("done").map(String::as_str);
        match r.method.as_str() {
            "GET" => self.page(r, note).await,
            "POST" if r.path == "/action" => self.action(r).await,
            _ => Response::html(405, pages::layout("Not allowed", None, "")),
        }
    }

    fn login(&self, r: &Request) -> Response {
        let form = r.form();
        match form.get("token") {
            Some(t) if same(t.trim(), &self.token) => Response::see_other("/").with_header(
                "Set-Cookie",
                format!("{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/", self.token),
            ),
            _ => Response::html(401, pages::login(true)),
        }
    }

    async fn page(&self, r: &Request, note: Option<&str>) -> Response {
        let parts: Vec<&str> = r.path.split('/').filter(|p| !p.is_empty()).collect();
        let c = &self.controller;
        let html = match parts.as_slice() {
            [] => personas_page(c, &self.csrf, note).await,
            ["agent", agent] => {
                let plans = c.plans_of(agent).await;
                let mut known = c.known_chats(agent);
                for g in &plans {
                    if !known.iter().any(|(id, _)| *id == g.chat.id) {
                        known.push((g.chat.id, g.chat.title.clone()));
                    }
                }
                // Each chat's last message, read through the persona's Telegram (a few only).
                let mut last = BTreeMap::new();
                for (id, _) in known.iter().take(LAST_MESSAGES_READ) {
                    if let Ok((_, mut m)) = c.history(agent, *id, 1).await
                        && let Some(m) = m.pop()
                    {
                        last.insert(id.0, m);
                    }
                }
                pages::chats(agent, &known, &last, &plans, note)
            }
            ["agent", agent, "chat", id] => {
                let Ok(id) = id.parse::<i64>() else {
                    return not_found();
                };
                match c.history(agent, ChatId(id), HISTORY_SHOWN).await {
                    Ok((chat, messages)) => {
                        let plans = c.plans_of(agent).await;
                        let plan = plans.iter().find(|g| g.chat.id.0 == id);
                        let paused = c.is_paused(agent, ChatId(id));
                        pages::conversation(agent, &chat, &messages, plan, paused, &self.csrf, note)
                    }
                    Err(e) => {
                        return Response::html(
                            404,
                            pages::layout("No such chat", Some(&e.to_string()), ""),
                        );
                    }
                }
            }
            ["agent", agent, "chat", id, "voice", msg] => {
                return self.voice_note(agent, id, msg).await;
            }
            ["drafts"] => {
                let mut waiting = c.draft_views().await;
                waiting.retain(|d| !d.decided);
                pages::drafts(&waiting, &self.csrf, note)
            }
            ["usage"] => pages::usage(&self.usage.totals()),
            ["incidents"] => {
                let events: Vec<NotableEvent> = self
                    .incidents
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .cloned()
                    .collect();
                pages::incidents(&events)
            }
            _ => return not_found(),
        };
        Response::html(200, html)
    }

    /// A voice note of a chat, as `audio/ogg` for the conversation page's `<audio>` player,
    /// read through the persona's Telegram (at most a minute's worth of Opus and then some).
    async fn voice_note(&self, agent: &str, chat: &str, msg: &str) -> Response {
        let (Ok(chat), Ok(msg)) = (chat.parse::<i64>(), msg.parse::<i64>()) else {
            return not_found();
        };
        match self
            .controller
            .media_bytes(agent, ChatId(chat), MessageId(msg), VOICE_BYTES)
            .await
        {
            Ok(bytes) => Response {
                status: 200,
                content_type: "audio/ogg",
                headers: Vec::new(),
                body: bytes,
            },
            Err(_) => not_found(),
        }
    }

    /// A form: checked (CSRF, origin), turned into one [`Op`], carried out by the controller,
    /// then back to the page with what it answered.
    async fn action(&self, r: &Request) -> Response {
        let form = r.form();
        let csrf_ok = form.get("csrf").is_some_and(|t| same(t, &self.csrf));
        let host = r.header("host").unwrap_or("");
        let foreign = r
            .header("origin")
            .is_some_and(|o| o != "null" && o.split("://").nth(1) != Some(host));
        if !csrf_ok || foreign {
            return Response::html(
                403,
                pages::layout(
                    "Refused",
                    Some("The form's security token is missing or stale: reload the page."),
                    "",
                ),
            );
        }
        let field = |k: &str| form.get(k).cloned().filter(|v| !v.is_empty());
        let op = match field("op").as_deref() {
            Some("pause") => Op::Pause {
                chat: field("chat"),
                secs: None,
            },
            Some("resume") => Op::Resume {
                chat: field("chat"),
            },
            Some("mode") => match (field("chat"), field("mode")) {
                (Some(chat), Some(mode)) => Op::Mode { chat, mode },
                _ => return bad("mode needs a chat and a mode"),
            },
            Some("forget") => match field("chat") {
                Some(chat) => Op::Forget { chat },
                None => return bad("forget needs a chat"),
            },
            Some("approve") => match field("id") {
                Some(id) => Op::Approve {
                    id,
                    text: field("text"),
                },
                None => return bad("approve needs a draft id"),
            },
            Some("reject") => match field("id") {
                Some(id) => Op::Reject { id },
                None => return bad("reject needs a draft id"),
            },
            _ => return bad("unknown action"),
        };
        let answer = match self.controller.execute(field("agent").as_deref(), op).await {
            Ok(text) => text,
            Err(e) => format!("not done: {e}"),
        };
        let back = field("back")
            .filter(|b| safe_path(b))
            .unwrap_or_else(|| "/".into());
        let sep = if back.contains('?') { '&' } else { '?' };
        Response::see_other(&format!("{back}{sep}done={}", http::encode(&answer)))
    }
}

/// A local path to come back to: `/` then letters, digits and `/ _ . ~ % -` only (no `//`,
/// no `\`, no scheme, no control characters).
fn safe_path(p: &str) -> bool {
    p.starts_with('/')
        && !p.starts_with("//")
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_.~%-".contains(&b))
}

fn not_found() -> Response {
    Response::html(
        404,
        pages::layout("Not found", None, "<p><a href=\"/\">Personas</a></p>"),
    )
}

fn bad(why: &str) -> Response {
    Response::html(400, pages::layout("Bad request", Some(why), ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_back() {
        assert!(safe_path("/agent/Tess/chat/-42") && safe_path("/"));
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "https://x",
            "/a\r\nSet-Cookie: x",
            "x",
        ] {
            assert!(!safe_path(bad), "{bad:?}");
        }
    }

    #[test]
    fn secrets_are_fresh_and_compared_whole() {
        let (a, b) = (secret().unwrap_or_default(), secret().unwrap_or_default());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &b) && !same(&a, &a[..31]));
    }
}
