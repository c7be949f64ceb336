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

pub mod controls;
pub mod ctl;
pub(crate) mod listen;
pub mod metrics;
pub(crate) mod reload;
pub(crate) mod sdnotify;
pub(crate) mod signals;
pub(crate) mod watch;

/// Why an operation of the operator's surface (an owner command, the control socket, the
/// metrics endpoint, file watching) could not be carried out. Its text is what the owner or
/// the log sees, naming the cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OpError(pub String);

impl OpError {
    /// The error of a failed step, in its own words.
    pub fn of(e: impl std::fmt::Display) -> OpError {
        OpError(e.to_string())
    }
}

impl From<String> for OpError {
    fn from(message: String) -> OpError {
        OpError(message)
    }
}

impl From<&str> for OpError {
    fn from(message: &str) -> OpError {
        OpError(message.to_string())
    }
}
