//! The MTProto backend on grammers 0.11: the only module tree that imports grammers. It owns
//! connecting an agent's account (private, locked session file), the interactive login and
//! logout, the update pump that maps new messages into runtime events (and nothing else:
//! no planning, no I/O beyond the push), and the `Telegram` trait implementation in
//! [`backend`]. Mapping (`map`), outbound formatting (`format`) and error classification
//! (`errors`) are pure and tested offline. Called by the `run` and `login` commands.

pub mod backend;
pub mod errors;
pub mod format;
pub mod map;
pub mod reactions;
pub mod session;

use std::fmt;
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;
use std::time::Duration;

use grammers_client::session::storages::SqliteSession;
use grammers_client::update::Update;
use grammers_client::{Client, SenderPool, SignInError};
use grammers_mtsender::{AutoSleep, ConnectionParams, UpdatesConfiguration};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use backend::MtprotoTelegram;
use errors::classify;
use session::{SessionError, SessionLock};

use crate::clock::{self, SharedClock};
use crate::runtime::RuntimeHandle;
use crate::store::StateDir;
use crate::telegram::TelegramError;

/// The application's api_hash: a secret. Debug and Display never show it.
#[derive(Clone)]
pub struct ApiHash(String);

impl ApiHash {
    pub fn new(s: impl Into<String>) -> ApiHash {
        ApiHash(s.into())
    }
    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// The application's credentials (from my.telegram.org).
#[derive(Debug, Clone)]
pub struct Credentials {
    pub api_id: i32,
    pub api_hash: ApiHash,
}

/// Settings of a connection.
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    /// Flood waits up to this long are slept inside the library; longer ones reach the
    /// runtime, which parks the conversation.
    pub flood_sleep_threshold: Duration,
    /// Messages older than this when they arrive (catch-up after downtime) go into history
    /// without triggering a plan.
    pub max_catch_up_age: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            flood_sleep_threshold: Duration::from_secs(10),
            max_catch_up_age: Duration::from_secs(15 * 60),
        }
    }
}

/// Why an agent could not connect or log in.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error("cannot open the session database {path}: {message}")]
    Open { path: String, message: String },
    #[error(
        "agent {agent:?} is not logged in (or its session was revoked); log in again: personad login --agent {agent:?}"
    )]
    NotAuthorized { agent: String },
    #[error("Telegram: {0}")]
    Telegram(#[from] TelegramError),
    #[error("login: {0}")]
    Login(String),
}

type Updates = tokio::sync::mpsc::Receiver<grammers_client::session::updates::UpdatesLike>;

/// A connected agent.
pub struct Connected {
    pub telegram: Arc<MtprotoTelegram>,
    session: Arc<SqliteSession>,
    client: Client,
    updates: Option<Updates>,
    pool_task: JoinHandle<()>,
    creds: Credentials,
    _lock: SessionLock,
    /// Decides which group messages plan, react or stay history (`group::gate`).
    gate: Option<crate::group::gate::GroupGate>,
}

async fn open_session(path: &std::path::Path) -> Result<Arc<SqliteSession>, ConnectError> {
    SqliteSession::open(path)
        .await
        .map(Arc::new)
        .map_err(|e| ConnectError::Open {
            path: path.display().to_string(),
            message: e.to_string(),
        })
}

/// Starts a connection pool on a session: the runner task, a client, and the update channel.
fn start_pool(
    session: &Arc<SqliteSession>,
    creds: &Credentials,
    opts: ConnectOptions,
) -> (Client, Updates, JoinHandle<()>) {
    let params = ConnectionParams {
        device_model: "personad".into(),
        app_version: env!("CARGO_PKG_VERSION").into(),
        retry_policy: Box::new(AutoSleep {
            tries: NonZeroU32::new(2).unwrap_or(NonZeroU32::MIN),
            threshold: opts.flood_sleep_threshold,
            io_errors_as_flood_of: Some(Duration::from_secs(1)),
        }),
        // Never let the library drop updates because we were slow to take them.
        updates_channel_capacity: NonZeroUsize::new(10_000).unwrap_or(NonZeroUsize::MIN),
        ..Default::default()
    };
    let SenderPool {
        runner,
        handle,
        updates,
    } = SenderPool::with_configuration(Arc::clone(session), creds.api_id, params);
    let pool_task = tokio::spawn(async move {
        runner.run().await;
    });
    (Client::new(handle), updates, pool_task)
}

/// The agent's session file, which must exist and be private.
fn existing_session(state: &StateDir, agent: &str) -> Result<std::path::PathBuf, ConnectError> {
    let path = session::session_path(state, agent);
    if !path.exists() {
        return Err(SessionError::Missing {
            agent: agent.to_string(),
            path,
        }
        .into());
    }
    session::check_private(&path)?;
    Ok(path)
}

/// Runs the (small, blocking) session file checks off the async threads: the file must
/// exist (unless `create`), be private, and not be locked by another process.
async fn prepare_session(
    state: &StateDir,
    agent: &str,
    create: bool,
) -> Result<(std::path::PathBuf, SessionLock), ConnectError> {
    let (state, agent) = (state.clone(), agent.to_string());
    tokio::task::spawn_blocking(move || {
        let path = if create {
            let path = session::session_path(&state, &agent);
            session::create_private(&path)?;
            session::check_private(&path)?;
            path
        } else {
            existing_session(&state, &agent)?
        };
        let lock = session::lock(&path)?;
        Ok((path, lock))
    })
    .await
    .map_err(|e| ConnectError::Login(e.to_string()))?
}

/// Connects an agent whose session exists and is private; refuses otherwise.
pub async fn connect(
    state: &StateDir,
    agent: &str,
    creds: &Credentials,
    opts: ConnectOptions,
    clock: SharedClock,
) -> Result<Connected, ConnectError> {
    let (path, lock) = prepare_session(state, agent, false).await?;
    let session = open_session(&path).await?;
    let (client, updates, pool_task) = start_pool(&session, creds, opts);
    let authorized = client.is_authorized().await.map_err(|e| classify(&e))?;
    if !authorized {
        client.disconnect();
        return Err(ConnectError::NotAuthorized {
            agent: agent.to_string(),
        });
    }
    let me = client.get_me().await.map_err(|e| classify(&e))?;
    let telegram = Arc::new(MtprotoTelegram::new(
        client.clone(),
        Arc::clone(&session),
        me.id().bare_id().unwrap_or(0),
        me.username().map(str::to_string),
        clock,
    ));
    Ok(Connected {
        telegram,
        session,
        client,
        updates: Some(updates),
        pool_task,
        creds: creds.clone(),
        _lock: lock,
        gate: None,
    })
}

/// Why one run of the update pump ended.
enum PumpEnd {
    /// Asked to stop.
    Stopped,
    /// The connection pool ended on its own: rebuild it.
    PoolGone,
    /// The session is no longer valid.
    Unauthorized(String),
}

impl Connected {
    /// Serves the agent until `stop`: scans unread chats, pumps updates into the runtime, and
    /// rebuilds the connection with backoff when its pool ends unexpectedly. A dead session
    /// stops the agent in the runtime and ends this function with an error.
    /// Routes this agent's group messages through the group decision pipeline.
    pub fn with_group_gate(mut self, gate: crate::group::gate::GroupGate) -> Connected {
        self.gate = Some(gate);
        self
    }

    pub async fn serve(
        mut self,
        agent: String,
        runtime: RuntimeHandle,
        opts: ConnectOptions,
        clock: SharedClock,
        stop: CancellationToken,
    ) -> Result<(), ConnectError> {
        let mut restarts: u32 = 0;
        loop {
            self.scan_unread(&agent, &runtime).await;
            match self.pump(&agent, &runtime, opts, &clock, &stop).await {
                PumpEnd::Stopped => break,
                PumpEnd::Unauthorized(reason) => {
                    runtime.stop_agent(&agent, &reason);
                    self.client.disconnect();
                    return Err(ConnectError::NotAuthorized { agent });
                }
                PumpEnd::PoolGone => {
                    restarts = restarts.saturating_add(1);
                    let backoff =
                        Duration::from_secs(2u64.saturating_pow(restarts.min(8)).min(300));
                    tracing::warn!(agent = %agent, restart = restarts, backoff_secs = backoff.as_secs(), "connection pool ended; rebuilding it");
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = clock::pause(clock.as_ref(), backoff) => {}
                    }
                    let (client, updates, pool_task) = start_pool(&self.session, &self.creds, opts);
                    self.telegram.replace_client(client.clone());
                    self.client = client;
                    self.updates = Some(updates);
                    self.pool_task = pool_task;
                }
            }
        }
        self.client.disconnect();
        let _ = (&mut self.pool_task).await;
        Ok(())
    }

    /// On connect: replan chats with unread messages from others, unread mentions, or the
    /// "marked unread" flag. A muted chat counts only for mentions and the flag.
    async fn scan_unread(&self, agent: &str, runtime: &RuntimeHandle) {
        let client = self.client.clone();
        let telegram = Arc::clone(&self.telegram);
        let agent_name = agent.to_string();
        let runtime = runtime.clone();
        let gate = self.gate.clone();
        // Walking dialogs can panic inside the library on unknown peers: keep it contained.
        let scan = tokio::spawn(async move {
            let mut dialogs = client.iter_dialogs();
            let mut replanned = 0usize;
            while let Ok(Some(dialog)) = dialogs.next().await {
                let grammers_client::tl::enums::Dialog::Dialog(d) = &dialog.raw else {
                    continue;
                };
                if d.unread_count == 0 && d.unread_mentions_count == 0 && !d.unread_mark {
                    continue;
                }
                let Some(last) = dialog.last_message.as_ref() else {
                    continue;
                };
                let Ok(mapped) = telegram.map(last) else {
                    continue;
                };
                if mapped.message.outgoing {
                    continue;
                }
                if telegram.is_blocked(mapped.message.sender.id).await {
                    continue;
                }
                let strong = d.unread_mentions_count > 0 || d.unread_mark;
                let trigger = strong || !telegram.is_muted(mapped.chat.id).await;
                match gate
                    .as_ref()
                    .filter(|_| trigger && !mapped.chat.kind.is_direct())
                {
                    Some(g) => g.on_inbound(mapped.chat, mapped.message, false, strong),
                    None => runtime.push_inbound(&agent_name, mapped.chat, mapped.message, trigger),
                }
                if trigger {
                    replanned += 1;
                }
            }
            replanned
        });
        match scan.await {
            Ok(n) => tracing::info!(agent = %agent, chats = n, "unread scan done"),
            Err(e) => tracing::warn!(agent = %agent, error = %e, "unread scan failed"),
        }
    }

    /// Pumps updates into the runtime. New messages from others trigger plans (unless too old
    /// or from a blocked user; in a muted chat only callouts do); messages the owner typed
    /// elsewhere only join the history and cancel the pending plan.
    async fn pump(
        &mut self,
        agent: &str,
        runtime: &RuntimeHandle,
        opts: ConnectOptions,
        clock: &SharedClock,
        stop: &CancellationToken,
    ) -> PumpEnd {
        let Some(updates) = self.updates.take() else {
            return PumpEnd::PoolGone;
        };
        let mut stream = match self
            .client
            .stream_updates(updates, UpdatesConfiguration { catch_up: true })
            .await
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(agent = %agent, error = %e, "cannot open the update stream");
                return PumpEnd::PoolGone;
            }
        };
        let telegram = Arc::clone(&self.telegram);
        let (admit_tx, admission) = spawn_admission(
            agent.to_string(),
            Arc::clone(&telegram),
            runtime.clone(),
            Arc::clone(clock),
            opts.max_catch_up_age,
            self.gate.clone(),
        );
        let mut sync = tokio::time::interval(Duration::from_secs(60));
        let mut failures: u32 = 0;
        let end = loop {
            tokio::select! {
                () = stop.cancelled() => break PumpEnd::Stopped,
                _ = sync.tick() => {
                    if let Err(e) = stream.sync_update_state().await {
                        tracing::warn!(agent = %agent, error = %e, "could not save the update state");
                    }
                }
                next = stream.next() => match next {
                    Ok(Update::NewMessage(m)) => {
                        failures = 0;
                        let Ok(mapped) = telegram.map(&m) else { continue };
                        let chat_id = mapped.chat.id;
                        if mapped.message.outgoing {
                            if let Some(g) = &self.gate {
                                g.note_own(&mapped.chat, &mapped.message);
                            }
                            if !telegram.sent_by_us(chat_id, mapped.message.id) {
                                // The owner typed this on another device: a person took over.
                                runtime.push_inbound(agent, mapped.chat, mapped.message, false);
                                runtime.cancel_plan(agent, chat_id, "the owner wrote in this chat");
                            }
                            continue;
                        }
                        // Blocklist and mute look-ups may need the network: they happen in
                        // the admission task, in arrival order, never in this loop.
                        let _ = admit_tx.send(mapped);
                    }
                    Ok(Update::MessageDeleted(d)) => {
                        tracing::debug!(agent = %agent, count = d.messages().len(), "messages deleted");
                    }
                    Ok(_) => {}
                    Err(e) => {
                        if matches!(e, grammers_client::InvocationError::Dropped(_)) {
                            break PumpEnd::PoolGone;
                        }
                        let err = classify(&e);
                        if matches!(err, TelegramError::Unauthorized(_)) {
                            break PumpEnd::Unauthorized(err.to_string());
                        }
                        failures = failures.saturating_add(1);
                        let backoff = Duration::from_secs(u64::from(failures.min(6)).pow(2));
                        tracing::warn!(agent = %agent, error = %err, retry_in_secs = backoff.as_secs(), "update stream error");
                        clock::pause(clock.as_ref(), backoff).await;
                    }
                }
            }
        };
        if let Err(e) = stream.sync_update_state().await {
            tracing::warn!(agent = %agent, error = %e, "could not save the update state");
        }
        // Let the admission task hand over what it already took in.
        drop(admit_tx);
        let _ = admission.await;
        end
    }
}

/// The admission task: decides, in arrival order, whether a new message from someone else
/// plans a reply (fresh, not from a blocked user, and in a muted chat only when it calls us
/// out) and hands it to the runtime either way, unless the sender is blocked.
fn spawn_admission(
    agent: String,
    telegram: Arc<MtprotoTelegram>,
    runtime: RuntimeHandle,
    clock: SharedClock,
    max_age: Duration,
    gate: Option<crate::group::gate::GroupGate>,
) -> (
    tokio::sync::mpsc::UnboundedSender<map::Mapped>,
    JoinHandle<()>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<map::Mapped>();
    let task = tokio::spawn(async move {
        while let Some(mut mapped) = rx.recv().await {
            if telegram.is_blocked(mapped.message.sender.id).await {
                continue;
            }
            telegram.resolve_sticker_set(&mut mapped).await;
            let age = clock.now().duration_since(mapped.message.date);
            let fresh = age.as_secs() < max_age.as_secs() as i64;
            let wanted = mapped.callout || !telegram.is_muted(mapped.chat.id).await;
            let group = fresh && wanted && !mapped.chat.kind.is_direct();
            match gate.as_ref().filter(|_| group) {
                Some(g) => g.on_inbound(mapped.chat, mapped.message, false, mapped.callout),
                None => runtime.push_inbound(&agent, mapped.chat, mapped.message, fresh && wanted),
            }
        }
    });
    (tx, task)
}

/// Reads one line from the terminal (blocking, off the async threads).
async fn prompt(text: &'static str) -> Result<String, ConnectError> {
    tokio::task::spawn_blocking(move || -> Result<String, String> {
        use std::io::Write;
        let mut out = std::io::stderr();
        let _ = write!(out, "{text}");
        let _ = out.flush();
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        Ok(line.trim().to_string())
    })
    .await
    .map_err(|e| ConnectError::Login(e.to_string()))?
    .map_err(ConnectError::Login)
}

async fn prompt_password(hint: Option<String>) -> Result<String, ConnectError> {
    tokio::task::spawn_blocking(move || {
        let label = match hint {
            Some(h) if !h.is_empty() => format!("Two-step verification password (hint: {h}): "),
            _ => "Two-step verification password: ".to_string(),
        };
        rpassword::prompt_password(label).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| ConnectError::Login(e.to_string()))?
    .map_err(ConnectError::Login)
}

/// `personad login`: interactive sign-in in one process run, then one walk over the dialogs
/// to warm the peer cache.
pub async fn login(
    state: &StateDir,
    agent: &str,
    phone: &str,
    creds: &Credentials,
) -> Result<String, ConnectError> {
    let (path, _lock) = prepare_session(state, agent, true).await?;
    let session = open_session(&path).await?;
    let (client, _updates, pool_task) = start_pool(&session, creds, ConnectOptions::default());
    let result = sign_in(&client, phone, creds).await;
    if result.is_ok() {
        let mut dialogs = client.iter_dialogs();
        let mut n = 0usize;
        while let Ok(Some(_)) = dialogs.next().await {
            n += 1;
        }
        tracing::info!(agent = %agent, dialogs = n, "peer cache warmed");
    }
    client.disconnect();
    let _ = pool_task.await;
    result
}

async fn sign_in(
    client: &Client,
    phone: &str,
    creds: &Credentials,
) -> Result<String, ConnectError> {
    if client.is_authorized().await.map_err(|e| classify(&e))? {
        return Ok("already logged in".into());
    }
    // The library panics on some unusual answers to sendCode: keep that inside a task.
    let token = {
        let (c, p, h) = (
            client.clone(),
            phone.to_string(),
            creds.api_hash.expose().to_string(),
        );
        tokio::spawn(async move { c.request_login_code(&p, &h).await })
            .await
            .map_err(|_| {
                ConnectError::Login(
                    "Telegram gave an unexpected answer to the login code request".into(),
                )
            })?
            .map_err(|e| {
                ConnectError::Login(format!("could not request a login code: {}", classify(&e)))
            })?
    };
    for _ in 0..3 {
        let code = prompt("Login code (sent to your Telegram app): ").await?;
        match client.sign_in(&token, &code).await {
            Ok(user) => return Ok(format!("logged in as {}", user.full_name())),
            Err(SignInError::InvalidCode) => {
                eprintln!(
                    "That code is invalid or expired. Codes pasted into any Telegram chat stop working."
                );
            }
            Err(SignInError::PasswordRequired(mut pt)) => {
                for _ in 0..3 {
                    let password = prompt_password(pt.hint().map(str::to_string)).await?;
                    match client.check_password(pt, password.as_bytes()).await {
                        Ok(user) => return Ok(format!("logged in as {}", user.full_name())),
                        Err(SignInError::InvalidPassword(again)) => {
                            eprintln!("Wrong password.");
                            pt = again;
                        }
                        Err(e) => return Err(ConnectError::Login(sign_in_error(e))),
                    }
                }
                return Err(ConnectError::Login("wrong password, three times".into()));
            }
            Err(e) => return Err(ConnectError::Login(sign_in_error(e))),
        }
    }
    Err(ConnectError::Login(
        "no valid code after three tries".into(),
    ))
}

fn sign_in_error(e: SignInError) -> String {
    match e {
        SignInError::SignUpRequired => {
            "this phone number has no Telegram account; create one in an official app first".into()
        }
        SignInError::InvalidCode => "invalid or expired code".into(),
        SignInError::PasswordRequired(_) | SignInError::InvalidPassword(_) => {
            "two-step verification failed".into()
        }
        SignInError::Other(e) => classify(&e).to_string(),
    }
}

/// `personad login --logout`: signs out and deletes the session.
pub async fn logout(
    state: &StateDir,
    agent: &str,
    creds: &Credentials,
) -> Result<(), ConnectError> {
    let (path, lock) = prepare_session(state, agent, false).await?;
    {
        let _lock = lock;
        let session = open_session(&path).await?;
        let (client, _updates, pool_task) = start_pool(&session, creds, ConnectOptions::default());
        if let Err(e) = client.sign_out().await {
            tracing::warn!(agent = %agent, error = %classify(&e), "sign-out failed; deleting the session anyway");
        }
        client.disconnect();
        let _ = pool_task.await;
    }
    let files = [
        path.with_extension("session-journal"),
        path.with_extension("session.lock"),
        path,
    ];
    tokio::task::spawn_blocking(move || {
        files
            .iter()
            .try_for_each(|p| crate::store::remove(p).map_err(SessionError::from))
    })
    .await
    .map_err(|e| ConnectError::Login(e.to_string()))??;
    Ok(())
}
