//! The MTProto backend on grammers 0.11: the only module tree that imports grammers (its
//! grammers-free parts say so). It owns connecting an agent's account (private, locked
//! session file; logged-in checked offline), the interactive login and logout, the grammers
//! adaptor of the update pump (a [`pump::SourceFactory`] that rebuilds the connection pool,
//! runs the unread scan and opens grammers' update stream; a [`pump::UpdateSource`] that maps
//! each update), and the `Telegram` trait implementation in [`backend`]. The pump core
//! ([`pump`]), the sent-message ledger ([`sent`]) and the send path's recovery rules
//! ([`recover`]) are free of grammers and tested with fakes; mapping (`map`), outbound
//! formatting (`format`), error classification (`errors`) and the session layer
//! ([`guarded`]) are tested offline on raw TL objects. Called by the `run` and `login`
//! commands. It plans nothing: admitted updates go to the runtime's queue.

pub mod backend;
pub mod dialogs;
pub mod errors;
pub mod format;
pub mod guarded;
pub mod invoker;
pub mod login;
pub mod map;
pub mod pump;
pub mod reactions;
pub mod recover;
pub mod sent;
pub mod session;
pub mod sim;
pub mod uploads;
pub mod whoami;

use std::fmt;
use std::num::{NonZeroU32, NonZeroUsize};
use std::sync::Arc;
use std::time::Duration;

use grammers_client::session::storages::SqliteSession;
use grammers_client::{Client, SenderPool};
use grammers_mtsender::{AutoSleep, ConnectionParams, UpdatesConfiguration};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub(crate) use backend::MtprotoTelegram;
pub use dialogs::{
    restore_update_state, scan_unread, spawn_scan, unread_update, warm_peer_cache, without_channels,
};
use errors::classify;
use guarded::GuardedSession;
pub use session::Servers;
use session::{SessionError, SessionLock};

use crate::adapters::store::StateDir;
use crate::core::model::TelegramError;
use crate::core::time::BoxFuture;
use crate::ports::clock::SharedClock;
use grammers_client::session::types::PeerId;

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

/// The application's credentials (from my.telegram.org), and which Telegram they are used
/// on (the same credentials work on the test servers).
#[derive(Debug, Clone)]
pub struct Credentials {
    pub api_id: i32,
    pub api_hash: ApiHash,
    pub servers: Servers,
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
        "agent {agent:?} is not logged in (or its session was revoked); log in again: personad login --agent {agent:?}{flag}"
    )]
    NotAuthorized {
        agent: String,
        /// ` --test-dc` for a test-server session, else empty.
        flag: &'static str,
    },
    #[error("Telegram: {0}")]
    Telegram(#[from] TelegramError),
    #[error("login: {0}")]
    Login(#[from] login::LoginError),
    /// A worker thread of the connection (opening the session, loading the sent ledger,
    /// removing the session files) stopped before it answered.
    #[error("login: {0}")]
    Worker(#[from] tokio::task::JoinError),
}

type Updates = tokio::sync::mpsc::Receiver<UpdatesLike>;

/// A connected agent.
pub struct Connected {
    pub telegram: Arc<MtprotoTelegram>,
    session: Arc<GuardedSession>,
    client: Client,
    updates: Option<Updates>,
    pool_task: JoinHandle<()>,
    creds: Credentials,
    _lock: SessionLock,
}

/// Opens a session file, pointed at the servers it is for (see [`point_at`]).
async fn open_session(
    path: &std::path::Path,
    servers: Servers,
) -> Result<Arc<GuardedSession>, ConnectError> {
    let open_error = |message: String| ConnectError::Open {
        path: path.display().to_string(),
        message,
    };
    let session = SqliteSession::open(path)
        .await
        .map(|s| Arc::new(GuardedSession::new(s)))
        .map_err(|e| open_error(e.to_string()))?;
    session::point_at(session.as_ref(), servers)
        .await
        .map_err(|e| open_error(e.to_string()))?;
    Ok(session)
}

/// Room for update batches between the connection pool and the stream.
const UPDATES_CAPACITY: usize = 10_000;

/// Starts a connection pool on a session: the runner task, a client, and the update channel.
fn start_pool(
    session: &Arc<GuardedSession>,
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
        updates_channel_capacity: NonZeroUsize::new(UPDATES_CAPACITY).unwrap_or(NonZeroUsize::MIN),
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

/// Puts a relay between grammers' update channel and its update stream, so the backend can
/// hand the stream the pts of its own `AffectedHistory` answers (see `backend::feed`). The
/// backend holds the relay's channel weakly: when grammers' channel closes, the relay ends
/// and the stream sees the close as before.
fn relay_updates(
    mut updates: Updates,
) -> (
    Updates,
    tokio::sync::mpsc::WeakSender<grammers_client::session::updates::UpdatesLike>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(10_000);
    let feed = tx.downgrade();
    tokio::spawn(async move {
        while let Some(update) = updates.recv().await {
            if tx.send(update).await.is_err() {
                break;
            }
        }
    });
    (rx, feed)
}

/// The agent's session file, which must exist and be private.
fn existing_session(
    state: &StateDir,
    agent: &str,
    servers: Servers,
) -> Result<std::path::PathBuf, ConnectError> {
    let path = session::session_path(state, agent, servers);
    match session::check_file(&path)? {
        session::SessionFile::Present => Ok(path),
        session::SessionFile::Absent => Err(SessionError::Missing {
            agent: agent.to_string(),
            path,
            flag: servers.flag(),
        }
        .into()),
    }
}

/// Runs the (small, blocking) session file checks off the async threads: the file must
/// exist (unless `create`), be private, and not be locked by another process.
async fn prepare_session(
    state: &StateDir,
    agent: &str,
    create: bool,
    servers: Servers,
) -> Result<(std::path::PathBuf, SessionLock), ConnectError> {
    let (state, agent) = (state.clone(), agent.to_string());
    tokio::task::spawn_blocking(move || {
        let path = if create {
            let path = session::session_path(&state, &agent, servers);
            session::create_private(&path)?;
            path
        } else {
            existing_session(&state, &agent, servers)?
        };
        let lock = session::lock(&path)?;
        Ok((path, lock))
    })
    .await
    .map_err(ConnectError::Worker)?
}

/// How long `connect` waits for Telegram to say who the account is before starting anyway.
const GET_ME_TIMEOUT: Duration = Duration::from_secs(15);

/// An agent's session, opened and locked, with the account's own user id.
pub struct OpenAccount {
    pub session: Arc<GuardedSession>,
    pub lock: SessionLock,
    pub self_id: i64,
}

/// Opens an agent's session without the network: the file must exist, be private and not
/// be in use, and know its own user (logged in). So an agent whose network is down at start
/// still starts, and its pump keeps reconnecting.
pub async fn open_account(
    state: &StateDir,
    agent: &str,
    servers: Servers,
) -> Result<OpenAccount, ConnectError> {
    use grammers_client::session::Session;
    use grammers_client::session::types::PeerInfo;
    let (path, lock) = prepare_session(state, agent, false, servers).await?;
    let session = open_session(&path, servers).await?;
    match session.peer(PeerId::self_user()).await {
        Ok(Some(PeerInfo::User { id, .. })) => Ok(OpenAccount {
            session,
            lock,
            self_id: id,
        }),
        _ => Err(ConnectError::NotAuthorized {
            agent: agent.to_string(),
            flag: servers.flag(),
        }),
    }
}

/// Where an account keeps its album uploads: beside its session, one file per Telegram
/// (`telegram-album.json`, `telegram-test-album.json`, …), as references are per server.
pub fn uploads_path(state: &StateDir, agent: &str, servers: Servers) -> std::path::PathBuf {
    let session = session::session_path(state, agent, servers);
    let stem = session.file_stem().map_or_else(
        || "telegram".to_owned(),
        |s| s.to_string_lossy().into_owned(),
    );
    session.with_file_name(format!("{stem}-album.json"))
}

/// Connects an agent whose session exists and is private; refuses otherwise.
pub async fn connect(
    state: &StateDir,
    agent: &str,
    creds: &Credentials,
    opts: ConnectOptions,
    clock: SharedClock,
) -> Result<Connected, ConnectError> {
    let account = open_account(state, agent, creds.servers).await?;
    let (session, lock, self_id) = (account.session, account.lock, account.self_id);
    let (client, updates, pool_task) = start_pool(&session, creds, opts);
    let (updates, feed) = relay_updates(updates);
    // Bounded on the project clock: a black-holed network must not hold up the start.
    let me = tokio::select! {
        me = client.get_me() => Some(me),
        () = crate::ports::clock::pause(clock.as_ref(), GET_ME_TIMEOUT) => None,
    };
    let username = match me {
        None => {
            tracing::warn!(agent = %agent, timeout_secs = GET_ME_TIMEOUT.as_secs(), "Telegram did not answer in time; the agent starts and keeps reconnecting");
            None
        }
        Some(Ok(me)) => me.username().map(str::to_string),
        Some(Err(e)) => match classify(&e) {
            TelegramError::Unauthorized(_) => {
                client.disconnect();
                return Err(ConnectError::NotAuthorized {
                    agent: agent.to_string(),
                    flag: creds.servers.flag(),
                });
            }
            other => {
                tracing::warn!(agent = %agent, error = %other, "Telegram is not reachable now; the agent starts and keeps reconnecting");
                None
            }
        },
    };
    let ledger_path = state.sent_ledger_path(agent);
    let ledger_clock = Arc::clone(&clock);
    let ledger =
        tokio::task::spawn_blocking(move || sent::SentLedger::load(ledger_path, ledger_clock))
            .await
            .map_err(ConnectError::Worker)?;
    let uploads_path = uploads_path(state, agent, creds.servers);
    let uploads = tokio::task::spawn_blocking(move || uploads::UploadStore::load(uploads_path))
        .await
        .map_err(ConnectError::Worker)?;
    let telegram = Arc::new(
        MtprotoTelegram::new(
            client.clone(),
            Arc::clone(&session),
            self_id,
            username,
            clock,
            ledger,
        )
        .with_uploads(uploads),
    );
    telegram.feed_updates_weak(feed);
    Ok(Connected {
        telegram,
        session,
        client,
        updates: Some(updates),
        pool_task,
        creds: creds.clone(),
        _lock: lock,
    })
}

impl Connected {
    /// Serves the agent until `stop`: runs the update pump (see [`pump`]) on this
    /// connection, which scans unread chats on every (re)connect, and rebuilds the connection
    /// with backoff when its pool ends or its reader fails. A dead session stops the agent in
    /// the runtime and ends this function with an error.
    pub async fn serve(
        self,
        agent: String,
        sink: Arc<dyn pump::Sink>,
        opts: ConnectOptions,
        clock: SharedClock,
        stop: CancellationToken,
    ) -> Result<(), ConnectError> {
        let Connected {
            telegram,
            session,
            client,
            updates,
            pool_task,
            creds,
            _lock,
        } = self;
        let factory = Arc::new(GrammersFactory {
            agent: agent.clone(),
            session,
            creds,
            opts,
            telegram: Arc::clone(&telegram),
            clock: Arc::clone(&clock),
            scan: std::sync::Mutex::new(None),
            pool: tokio::sync::Mutex::new(Pool {
                client,
                updates,
                task: Some(pool_task),
            }),
        });
        let pump = pump::Pump {
            agent: agent.clone(),
            factory: Arc::clone(&factory) as Arc<dyn pump::SourceFactory>,
            lookups: Arc::clone(&telegram) as Arc<dyn pump::Lookups>,
            sink,
            ledger: Arc::clone(telegram.ledger()),
            clock,
            opts: pump::PumpOptions {
                max_catch_up_age: opts.max_catch_up_age,
                channel_wait_limit: pump::channel_wait_limit(opts.flood_sleep_threshold),
            },
        };
        let flag = factory.creds.servers.flag();
        let end = pump.run(stop).await;
        factory.shutdown().await;
        match end {
            pump::PumpEnd::Stopped => Ok(()),
            pump::PumpEnd::Unauthorized(_) => Err(ConnectError::NotAuthorized { agent, flag }),
        }
    }
}

/// The current connection pool of an agent.
struct Pool {
    client: Client,
    /// The update channel, until a stream takes it.
    updates: Option<Updates>,
    task: Option<JoinHandle<()>>,
}

/// Opens update streams on an agent's connection, rebuilding the pool when the previous
/// stream used it up (or it died).
struct GrammersFactory {
    agent: String,
    session: Arc<GuardedSession>,
    creds: Credentials,
    opts: ConnectOptions,
    telegram: Arc<MtprotoTelegram>,
    clock: SharedClock,
    /// The unread scan of the last open, which outlives a stop in its middle (so the
    /// update state it walked over is always restored): shutdown waits for it.
    scan: std::sync::Mutex<Option<JoinHandle<()>>>,
    pool: tokio::sync::Mutex<Pool>,
}

impl GrammersFactory {
    async fn shutdown(&self) {
        let mut pool = self.pool.lock().await;
        pool.client.disconnect();
        let scan = self
            .scan
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(scan) = scan {
            let _ = scan.await;
        }
        if let Some(task) = pool.task.take() {
            let _ = task.await;
        }
    }

    /// Learns the account's username if the start could not (Telegram was not reachable):
    /// without it, @username callouts never match.
    async fn refresh_username(&self) {
        if self.telegram.self_username().is_some() {
            return;
        }
        tokio::select! {
            () = self.telegram.refresh_self_username() => {}
            () = crate::ports::clock::pause(self.clock.as_ref(), GET_ME_TIMEOUT) => {}
        }
    }

    /// Runs the unread scan in a task of its own and waits for its finds. The task restores
    /// the update state even when this wait is dropped (a stop during the scan).
    async fn scan(&self) -> Vec<pump::TgUpdate> {
        let scan = dialogs::spawn_scan(
            self.agent.clone(),
            Arc::clone(&self.session),
            Arc::clone(&self.telegram),
        )
        .await;
        *self
            .scan
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(scan.task);
        scan.found.await.unwrap_or_default()
    }
}

impl pump::SourceFactory for GrammersFactory {
    fn open(&self) -> BoxFuture<'_, Result<Box<dyn pump::UpdateSource>, pump::SourceError>> {
        Box::pin(async move {
            let (client, updates) = {
                let mut pool = self.pool.lock().await;
                if pool.updates.is_none() {
                    // The previous stream used this pool up (or it died): start a new one.
                    pool.client.disconnect();
                    if let Some(task) = pool.task.take() {
                        let _ = task.await;
                    }
                    let (client, updates, task) = start_pool(&self.session, &self.creds, self.opts);
                    let (updates, feed) = relay_updates(updates);
                    self.telegram.replace_client(client.clone());
                    self.telegram.feed_updates_weak(feed);
                    *pool = Pool {
                        client,
                        updates: Some(updates),
                        task: Some(task),
                    };
                }
                let updates = pool.updates.take().ok_or(pump::SourceError::Closed)?;
                (pool.client.clone(), updates)
            };
            self.refresh_username().await;
            dialogs::seed_update_state(&self.agent, self.session.as_ref(), &self.telegram).await;
            let backlog = self.scan().await;
            let source = GrammersSource::start(
                &client,
                updates,
                UpdatesConfiguration { catch_up: true },
                Arc::clone(&self.telegram),
                Arc::clone(&self.session),
            )
            .await
            .map_err(|e| {
                pump::SourceError::transient(format!("cannot open the update stream: {e}"))
            })?
            .with_backlog(backlog);
            Ok(Box::new(source) as Box<dyn pump::UpdateSource>)
        })
    }

    fn close(&self) {
        // Ends the reader's `next` once it has handed over what it holds.
        if let Ok(pool) = self.pool.try_lock() {
            pool.client.disconnect();
        } else {
            self.telegram.client().disconnect();
        }
    }
}

/// grammers' update stream as a pump source: first the unread scan's messages (so they pass
/// the pump's admission like any update), then the stream.
pub struct GrammersSource {
    stream: grammers_client::client::UpdateStream,
    telegram: Arc<MtprotoTelegram>,
    session: Arc<GuardedSession>,
    backlog: std::collections::VecDeque<pump::TgUpdate>,
    /// The stream's own update channel (weak: it never keeps the stream open), for the
    /// empty update that makes grammers move on after a give-up (see [`Self::start`]).
    nudge: Option<tokio::sync::mpsc::WeakSender<UpdatesLike>>,
}

type UpdatesLike = grammers_client::session::updates::UpdatesLike;

impl GrammersSource {
    /// A source over `stream`.
    pub fn new(
        stream: grammers_client::client::UpdateStream,
        telegram: Arc<MtprotoTelegram>,
        session: Arc<GuardedSession>,
    ) -> GrammersSource {
        GrammersSource {
            stream,
            telegram,
            session,
            backlog: std::collections::VecDeque::new(),
            nudge: None,
        }
    }

    /// Opens grammers' update stream on `updates` (the connection pool's update channel) as a
    /// source that can nudge it. grammers tries the next pending channel difference only
    /// after the socket delivers something: once a channel is given up (its look-up answers
    /// without a hash, see `guarded`), it would wait for the next socket update, up to its
    /// 15-minute deadline on a quiet account, with every other channel's catch-up behind it.
    /// So the pool's updates are forwarded through a channel of our own, into which
    /// [`UpdateSource::skip_channel`] puts an empty update container (no pts, no seq: grammers
    /// applies nothing and goes round its loop once more).
    pub async fn start(
        client: &Client,
        mut updates: tokio::sync::mpsc::Receiver<UpdatesLike>,
        config: UpdatesConfiguration,
        telegram: Arc<MtprotoTelegram>,
        session: Arc<GuardedSession>,
    ) -> Result<GrammersSource, Box<dyn std::error::Error + Send + Sync>> {
        let (tx, rx) = tokio::sync::mpsc::channel(UPDATES_CAPACITY);
        let nudge = tx.downgrade();
        tokio::spawn(async move {
            // Ends when the pool closes its channel (the stream then ends too) or the stream
            // is gone.
            while let Some(batch) = updates.recv().await {
                if tx.send(batch).await.is_err() {
                    break;
                }
            }
        });
        let stream = client.stream_updates(rx, config).await?;
        let mut source = GrammersSource::new(stream, telegram, session);
        source.nudge = Some(nudge);
        Ok(source)
    }

    /// The same source with `backlog` (the unread scan's finds) handed over before anything
    /// else.
    pub fn with_backlog(mut self, backlog: Vec<pump::TgUpdate>) -> GrammersSource {
        self.backlog.extend(backlog);
        self
    }
}

impl pump::UpdateSource for GrammersSource {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<pump::TgUpdate>, pump::SourceError>> {
        Box::pin(async move {
            if let Some(update) = self.backlog.pop_front() {
                return Ok(Some(update));
            }
            match guarded::in_update_machinery(self.stream.next()).await {
                Ok(update) => {
                    self.session.clear_difference_channel();
                    // Mute changes are pushed: learnt here, never looked up per message.
                    if let Some((target, until)) = map::notify_settings(update.raw()) {
                        self.telegram.note_notify_settings(target, until);
                    }
                    Ok(self.telegram.to_update(&update))
                }
                Err(e) => Err(errors::stream_error(&e, || {
                    self.session.difference_channel()
                })),
            }
        })
    }

    fn save_state(&mut self) -> BoxFuture<'_, Result<(), pump::SaveError>> {
        Box::pin(async move {
            self.stream
                .sync_update_state()
                .await
                .map_err(pump::SaveError::of)
        })
    }

    fn skip_channel(&mut self, channel: i64) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            use grammers_client::session::Session;
            // grammers ends the difference of a channel it has no access hash for: the
            // session answers its next look-up of this channel without one.
            self.session.skip_channel(channel);
            // grammers ends that difference at its next attempt; the empty update makes that
            // attempt come now and the next channel's difference right after it.
            if let Some(tx) = self.nudge.as_ref().and_then(|w| w.upgrade()) {
                let _ = tx.try_send(empty_updates());
            }
            // And a restart must not ask for it again.
            match self.session.updates_state().await {
                Ok(state) => {
                    let state = without_channels(state, &std::iter::once(channel).collect());
                    if let Err(e) = self
                        .session
                        .set_update_state(grammers_client::session::types::UpdateState::All(state))
                        .await
                    {
                        tracing::warn!(channel, error = %e, "could not drop the channel from the saved update state");
                    }
                }
                Err(e) => {
                    tracing::warn!(channel, error = %e, "could not read the saved update state")
                }
            }
        })
    }
}

/// An update container with nothing in it (no pts, no seq, no date): grammers' message box
/// applies nothing from it.
fn empty_updates() -> UpdatesLike {
    use grammers_client::tl;
    UpdatesLike::Updates(tl::enums::Updates::Updates(tl::types::Updates {
        updates: Vec::new(),
        users: Vec::new(),
        chats: Vec::new(),
        date: 0,
        seq: 0,
    }))
}

/// `personad login`: interactive sign-in in one process run, then one walk over the dialogs
/// to warm the peer cache (broadcast channels are then taken out of the update state, so
/// catch-up never asks for their difference).
pub async fn login(
    state: &StateDir,
    agent: &str,
    phone: &str,
    creds: &Credentials,
) -> Result<String, ConnectError> {
    let (path, _lock) = prepare_session(state, agent, true, creds.servers).await?;
    let session = open_session(&path, creds.servers).await?;
    let (client, _updates, pool_task) = start_pool(&session, creds, ConnectOptions::default());
    let before = {
        use grammers_client::session::Session;
        session.updates_state().await.ok()
    };
    let result = sign_in(&client, &session, phone, creds).await;
    if let Ok(signed) = &result {
        let saved = before.filter(|_| !signed.fresh);
        warm_peer_cache(agent, &client, session.as_ref(), saved).await;
    }
    client.disconnect();
    let _ = pool_task.await;
    result.map(|signed| signed.said)
}

/// What signing in did.
struct SignedIn {
    /// What to tell the operator.
    said: String,
    /// A new login (`false`: the session was logged in already).
    fresh: bool,
}

async fn sign_in(
    client: &Client,
    session: &Arc<GuardedSession>,
    phone: &str,
    creds: &Credentials,
) -> Result<SignedIn, ConnectError> {
    if client.is_authorized().await.map_err(|e| classify(&e))? {
        return Ok(SignedIn {
            said: "already logged in".into(),
            fresh: false,
        });
    }
    let api = login::GrammersLogin {
        client: client.clone(),
        session: Arc::clone(session),
        api_id: creds.api_id,
        api_hash: creds.api_hash.expose().to_string(),
    };
    login::run_login(&api, &login::Terminal, phone)
        .await
        .map(|said| SignedIn { said, fresh: true })
        .map_err(ConnectError::Login)
}

/// `personad login --logout`: signs out, then deletes the session (see
/// [`login::run_logout`]: a failed sign-out keeps the file).
pub(crate) async fn logout(
    state: &StateDir,
    agent: &str,
    creds: &Credentials,
) -> Result<login::LoggedOut, ConnectError> {
    let (path, lock) = prepare_session(state, agent, false, creds.servers).await?;
    let session = open_session(&path, creds.servers).await?;
    let (client, _updates, pool_task) = start_pool(&session, creds, ConnectOptions::default());
    let api = login::GrammersLogout(client.clone());
    let remove = || async move {
        client.disconnect();
        let _ = pool_task.await;
        drop(session);
        drop(lock);
        remove_session_files(path)
            .await
            .map_err(crate::core::model::LocalFailure::new)
    };
    let done = login::run_logout(&api, remove).await;
    if done.is_err() {
        api.0.disconnect();
    }
    Ok(done?)
}

/// Deletes a session file with its journal and lock file.
async fn remove_session_files(path: std::path::PathBuf) -> Result<(), ConnectError> {
    let [journal, ..] = crate::adapters::store::layout::session_sidecars(&path);
    let files = [
        journal,
        crate::adapters::store::layout::session_lock_path(&path),
        path,
    ];
    tokio::task::spawn_blocking(move || {
        files
            .iter()
            .try_for_each(|p| crate::adapters::store::remove(p).map_err(SessionError::from))
    })
    .await
    .map_err(ConnectError::Worker)??;
    Ok(())
}
