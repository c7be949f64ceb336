//! Operations: what makes `personad run` a service an operator can install, watch and
//! steer. Each submodule owns one concern and is wired by `daemon`; none of them plans or
//! talks to an LLM, and the runtime knows them only through its small hooks (an inbound
//! gate, a heartbeat, agent upserts).
//!
//! - [`sdnotify`]: systemd readiness, status, watchdog, reloading and stopping notifications.
//! - [`controls`]: owner commands (`/status`, `/pause`, ...) and their persisted pauses; the
//!   inbound gate that accepts commands only from Saved Messages (and admin chats).
//! - [`ctl`]: the local control socket (`<state>/ctl.sock`, mode 0600) and `personad ctl`.
//! - [`listen`]: the listeners' connection budgets and accept back-off; the descriptor limit.
//! - [`watch`]: debounced file watching of persona and role-prompt directories.
//! - [`metrics`]: the opt-in Prometheus endpoint (`/metrics`, `/healthz`).
//! - [`web`]: the HTTP server (hyper) of the metrics endpoint and the web console.

pub mod controls;
pub mod ctl;
pub(crate) mod listen;
pub mod metrics;
pub(crate) mod reload;
pub(crate) mod sdnotify;
pub(crate) mod signals;
pub(crate) mod watch;
pub(crate) mod web;

/// Why an operation of the operator's surface (an owner command, the control socket, the
/// metrics endpoint, the console, file watching) could not be carried out. Its text is what
/// the owner or the log sees; a failure of another part keeps that part's error as its source.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The operation cannot be done as asked, said in words for the owner (an unknown agent
    /// or chat, a wrong argument, a usage line).
    #[error("{0}")]
    Refused(String),
    /// An agent's session lease is held elsewhere or cannot be taken: it does not start.
    #[error(transparent)]
    Lease(#[from] crate::adapters::lease::TakeRefused),
    /// The runtime does not run the agent (it stopped, or never had it).
    #[error("the runtime is not running this agent")]
    NotRunning,
    /// Telegram (or the in-memory backend) refused or failed.
    #[error("{0}")]
    Telegram(#[from] crate::core::model::TelegramError),
    /// A state file could not be read or written.
    #[error("{0}")]
    Store(#[from] crate::ports::store::StoreError),
    /// The agent's memory files.
    #[error("{0}")]
    Memory(#[from] crate::ports::facts::FactError),
    /// Blocking work stopped before it answered.
    #[error("{0}")]
    Join(#[from] tokio::task::JoinError),
    /// A socket, listener or file of the operator's surface: what was being done, and why it
    /// failed.
    #[error("{doing}: {source}")]
    Io {
        doing: String,
        #[source]
        source: std::io::Error,
    },
    /// An account could not be connected.
    #[error("{0}")]
    Connect(#[from] crate::adapters::mtproto::ConnectError),
    /// File watching could not start.
    #[error("{doing}: {source}")]
    Watch {
        doing: String,
        #[source]
        source: notify::Error,
    },
    /// A control request that does not decode.
    #[error("bad request: {0}")]
    Request(#[from] serde_json::Error),
}

impl OpError {
    /// A refusal in the owner's words.
    pub(crate) fn refused(text: impl Into<String>) -> OpError {
        OpError::Refused(text.into())
    }

    /// An I/O failure while doing `doing`.
    pub(crate) fn io(doing: impl Into<String>) -> impl FnOnce(std::io::Error) -> OpError {
        let doing = doing.into();
        move |source| OpError::Io { doing, source }
    }
}
