//! The local web console (`run --console-addr`): server-rendered pages of the running daemon
//! (personas, a persona's chats, a conversation with its plan, drafts, usage, incidents) and
//! forms for the owner's actions, served from the daemon itself over its HTTP server
//! (`ops::web`).
//!
//! Access (`access`): a random token in `<state>/console.token` (0600), kept across restarts
//! and rotated by `personad ctl console-token --rotate`, required as the `personad_console`
//! cookie (set by the login form, which returns to the page first asked for; a logout button
//! clears it) or an `Authorization: Bearer` header; every other request answers 401 with the
//! login form. Every form carries a CSRF value (derived from the token) and a post without it
//! is refused (403), as is a post whose `Origin` is another site. After an action the page
//! says what was done with one of a fixed set of banners (`done=`), never with text from the
//! address. It binds to loopback unless the operator names another address (then it warns);
//! the daemon binds it before anything else starts ([`bind`]).
//!
//! It reads through the controller (the same control paths as `ctl`: the runtime handle, the
//! graph store scan, each agent's Telegram seat), the usage meter and its incident log
//! (`incidents`), and every action is one [`Op`] handed to [`Controller::execute`]: one
//! implementation of each action. It never reads state files itself (but its token file and
//! incident log) and never renders a secret (keys, api_hash, session data, phone numbers).
//! Wired by `daemon`.

mod access;
mod http;
mod incidents;
mod pages;
mod views;

pub(crate) use access::command as console_token_command;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::adapters::llm::usage::UsageMeter;
use crate::adapters::store::StateDir;
use crate::app::lifecycle::Lifecycle;
use crate::app::ops::OpError;
use crate::app::ops::controls::{Controller, Op};
use crate::core::model::{ChatId, MessageId};
use access::{Keys, csrf_for, safe_path, same};
use http::{Request, Response, Unread};
use incidents::IncidentLog;

/// The cookie that carries the token.
const COOKIE: &str = "personad_console";
/// Messages of a conversation shown.
const HISTORY_SHOWN: usize = 50;
/// The largest voice note the console plays (a minute of Opus is about 200 KB).
const VOICE_BYTES: u64 = 2 * 1024 * 1024;

const STYLE: &str = include_str!("style.css");

const BUDGET: crate::app::ops::listen::Budget = crate::app::ops::listen::Budget {
    name: "console",
    max_connections: 16,
    deadline: Duration::from_secs(30),
};

/// What the console serves from.
struct Console {
    keys: Keys,
    controller: Arc<Controller>,
    usage: Arc<UsageMeter>,
    incidents: Arc<IncidentLog>,
    /// Where the persona files are (the personas page lists those that do not run).
    global: Option<crate::app::cli::GlobalArgs>,
}

/// Binds `addr` for the console (the daemon does it before it writes or starts anything, so a
/// busy port fails the start at once); warns when it is not a loopback address.
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, OpError> {
    if !addr.ip().is_loopback() {
        tracing::warn!(event = "console_not_loopback", addr = %addr, "the console listens beyond this machine: anyone who can reach it and has the token controls the personas");
    }
    crate::app::ops::web::bind(addr, "the console").await
}

/// Serves the console on the bound `listener` as tasks of `life` until it stops: the token
/// file kept or written, the incident log read back, then the listener served.
pub(crate) async fn serve(
    listener: TcpListener,
    state: &StateDir,
    controller: Arc<Controller>,
    usage: Arc<UsageMeter>,
    global: crate::app::cli::GlobalArgs,
    life: &Lifecycle,
) -> Result<JoinHandle<()>, OpError> {
    let st = state.clone();
    let ((token, kept), incidents) = tokio::task::spawn_blocking(move || {
        access::keep_or_create(&st).map(|token| (token, IncidentLog::open(&st)))
    })
    .await??;
    let local = listener
        .local_addr()
        .map_err(OpError::io("cannot read the console's address"))?;
    tracing::info!(event = "console_listening", addr = %local, token_file = %state.console_token_path().display(), token = if kept { "kept" } else { "new" }, "web console listening");
    let incidents = Arc::new(incidents);
    let names = Arc::clone(&controller);
    incidents::record(
        Arc::clone(&incidents),
        controller.observe_notables(),
        move |agent, chat| chat_name(&names, agent, chat),
        life,
    );
    let console = Arc::new(Console {
        keys: Keys::new(state.clone(), token),
        controller,
        usage,
        incidents,
        global: Some(global),
    });
    Ok(life.spawn(crate::app::ops::web::serve(
        listener,
        BUDGET,
        http::LIMITS,
        life.clone(),
        move |request| {
            let console = Arc::clone(&console);
            async move {
                let answer = match request {
                    Ok(request) => console.respond(&request).await,
                    Err(why) => Response::html(
                        why.status(),
                        pages::layout_with(unread(why), None, "", false),
                    ),
                };
                http::guarded(answer)
            }
        },
    )))
}

/// What a request that could not be read whole is answered with (its page's title).
fn unread(why: Unread) -> &'static str {
    match why {
        Unread::TooLarge => "Too large",
        Unread::TooSlow => "Too slow",
        Unread::Broken => "Bad request",
    }
}

/// A chat's name as the persona knows it now.
fn chat_name(c: &Controller, agent: &str, chat: i64) -> Option<String> {
    c.known_chats(agent)
        .into_iter()
        .find(|(id, _)| id.0 == chat)
        .map(|(_, title)| title)
}

/// The personas page as `/` serves it, without the server around it (for tests that compare
/// it with `ctl status`).
#[cfg(feature = "test-hooks")]
pub async fn personas_page_for_tests(c: &Controller) -> String {
    let f = pages::Frame {
        title: "Personas",
        note: None,
        drafts: 0,
        now: c.now(),
        persona: None,
        refresh: None,
    };
    pages::personas::render(&f, &c.agent_views().await, &[], "csrf")
}

/// The banner a `done=` code stands for: a fixed set, so no text of the address is ever shown.
fn banner(code: &str) -> Option<&'static str> {
    Some(match code {
        "paused" => "Paused.",
        "resumed" => "Resumed.",
        "mode-strict" => "Group mode set to strict.",
        "mode-smart" => "Group mode set to smart.",
        "mode-talkative" => "Group mode set to talkative.",
        "mode" => "Group mode set.",
        "forgotten" => "The chat's pending plan was dropped.",
        "fact-forgotten" => "The fact is forgotten.",
        "lifted" => "The spending cap is lifted for today (and every chat resumed).",
        "approved" => "Draft approved.",
        "rejected" => "Draft rejected.",
        "logged-out" => "Logged out.",
        _ => return None,
    })
}

/// The `done=` code of an action carried out (`lift`: a resume asked for as a cap's lift).
fn done_code(op: &Op, lift: bool) -> &'static str {
    match op {
        Op::Pause { .. } => "paused",
        Op::Resume { chat: None } if lift => "lifted",
        Op::Resume { .. } => "resumed",
        Op::Mode { mode, .. } => match mode.as_str() {
            "strict" => "mode-strict",
            "smart" => "mode-smart",
            "talkative" => "mode-talkative",
            _ => "mode",
        },
        Op::Forget { .. } => "forgotten",
        Op::ForgetFact { .. } => "fact-forgotten",
        Op::Approve { .. } => "approved",
        Op::Reject { .. } => "rejected",
        _ => "",
    }
}

impl Console {
    /// The CSRF value of the token in force, when the request carries that token.
    async fn authorized(&self, r: &Request) -> Option<String> {
        let bearer = r
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        let given = bearer.or_else(|| r.cookie(COOKIE))?;
        let token = self.keys.token().await;
        same(given, &token).then(|| csrf_for(&token))
    }

    async fn respond(&self, r: &Request) -> Response {
        let note = r.query.get("done").and_then(|c| banner(c));
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/login") => {
                let next = r.query.get("next").map_or("/", String::as_str);
                return Response::html(200, access::login_page(false, next, note));
            }
            ("POST", "/login") => return self.login(r).await,
            ("POST", "/logout") => return logout(r),
            ("GET", "/style.css") => {
                let mut css = Response::html(200, STYLE.to_string());
                css.content_type = "text/css; charset=utf-8";
                return css;
            }
            _ => {}
        }
        let Some(csrf) = self.authorized(r).await else {
            // A page asked for comes back after the login; a form goes to the start.
            let next = match r.method.as_str() {
                "GET" => asked(r),
                _ => "/".to_string(),
            };
            return Response::html(401, access::log_in_first(&next))
                .with_header("WWW-Authenticate", "Bearer".into());
        };
        match r.method.as_str() {
            "GET" => self.page(r, note, &csrf).await,
            "POST" if r.path == "/action" => self.action(r, &csrf).await,
            _ => Response::html(405, pages::layout("Not allowed", None, "")),
        }
    }

    async fn login(&self, r: &Request) -> Response {
        let form = r.form();
        let next = form
            .get("next")
            .filter(|n| safe_path(n))
            .map_or("/", String::as_str);
        let token = self.keys.token().await;
        match form.get("token") {
            Some(t) if same(t.trim(), &token) => Response::see_other(next).with_header(
                "Set-Cookie",
                format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"),
            ),
            _ => Response::html(401, access::login_page(true, next, None)),
        }
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
    /// then back to the page with a fixed banner; a refusal is shown at once with its reason.
    async fn action(&self, r: &Request, csrf: &str) -> Response {
        let form = r.form();
        let csrf_ok = form.get("csrf").is_some_and(|t| same(t, csrf));
        if !csrf_ok || foreign(r) {
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
            // Lifting a cap reached today is what resuming the whole persona does.
            Some("lift") => Op::Resume { chat: None },
            Some("forget-fact") => match field("id") {
                Some(id) => Op::ForgetFact { id },
                None => return bad("forget-fact needs a fact id"),
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
        let done = done_code(&op, field("op").as_deref() == Some("lift"));
        let back = field("back")
            .filter(|b| safe_path(b))
            .unwrap_or_else(|| "/".into());
        match self.controller.execute(field("agent").as_deref(), op).await {
            Ok(answer) => {
                tracing::info!(event = "console_action", done, answer = %answer, "console action carried out");
                let sep = if back.contains('?') { '&' } else { '?' };
                Response::see_other(&format!("{back}{sep}done={done}"))
            }
            Err(e) => Response::html(
                409,
                pages::layout(
                    "Not done",
                    Some(&e.to_string()),
                    &format!("<p><a href=\"{}\">Back</a></p>", pages::esc(&back)),
                ),
            ),
        }
    }
}

/// The path and query a GET asked for, to come back to after the login (`/` when unsafe).
fn asked(r: &Request) -> String {
    let mut at = http::encode_path(&r.path);
    if !r.query.is_empty() {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(r.query.iter().filter(|(k, _)| k.as_str() != "done"))
            .finish();
        if !query.is_empty() {
            at.push('?');
            at.push_str(&query);
        }
    }
    if safe_path(&at) { at } else { "/".into() }
}

/// Whether a post comes from another site (its `Origin` is not this host).
fn foreign(r: &Request) -> bool {
    let host = r.header("host").unwrap_or("");
    r.header("origin")
        .is_some_and(|o| o != "null" && o.split("://").nth(1) != Some(host))
}

/// `POST /logout`: the cookie cleared, back to the login page. No CSRF value is needed (a
/// forged logout only logs the owner out, and the cookie is `SameSite=Strict` anyway), but a
/// post from another site is refused.
fn logout(r: &Request) -> Response {
    if foreign(r) {
        return Response::html(403, pages::layout_with("Refused", None, "", false));
    }
    Response::see_other("/login?done=logged-out").with_header(
        "Set-Cookie",
        format!("{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"),
    )
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
    fn banners_come_from_a_fixed_set() {
        assert_eq!(banner("paused"), Some("Paused."));
        assert_eq!(banner("Your account is locked, call +1 555"), None);
        assert_eq!(banner("<script>"), None);
    }

    #[test]
    fn the_asked_page_is_kept_for_after_the_login() {
        let mut r = Request {
            method: "GET".into(),
            path: "/agent/Tess Ann/chat/-42".into(),
            ..Request::default()
        };
        assert_eq!(asked(&r), "/agent/Tess%20Ann/chat/-42");
        r.query.insert("q".into(), "a b".into());
        r.query.insert("done".into(), "paused".into());
        assert_eq!(asked(&r), "/agent/Tess%20Ann/chat/-42?q=a+b");
        r.path = "//evil.example".into();
        assert_eq!(asked(&r), "/");
    }
}
