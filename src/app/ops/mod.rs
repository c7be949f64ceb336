//! Operations: what makes `personad run` a service an operator can install, watch and
//! steer. Each submodule owns one concern and is wired by `daemon`; none of them plans or
//! talks to an LLM, and the runtime knows them only through its small hooks (an inbound
//! gate, a heartbeat, agent upserts).
//!
//! - [`sdnotify`]: systemd readiness, status, watchdog, reloading and stopping notifications.
//! - [`controls`]: owner commands (`/status`, `/pause`, ...) and their persisted pauses; the
//!   inbound gate that accepts commands only from Saved Messages (and admin chats).
//! - [`ctl`]: the local control socket (`<state>/ctl.sock`, mode 0600) and `personad ctl`.
//! - [`watch`]: debounced file watching of persona and role-prompt directories.
//! - [`metrics`]: the opt-in Prometheus endpoint (`/metrics`, `/healthz`).

pub mod controls;
pub mod ctl;
pub mod metrics;
pub mod sdnotify;
pub mod watch;
