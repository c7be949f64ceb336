//! systemd notifications (`sd_notify(3)`) through the `sd-notify` crate. Without
//! `NOTIFY_SOCKET` every call is a no-op. Owns the message formats only; `daemon` decides
//! when to send them and the tick loop's heartbeat drives the watchdog pings.

use std::time::Duration;

use sd_notify::NotifyState;

/// Sends lifecycle notifications to the service manager.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notifier {
    enabled: bool,
}

impl Notifier {
    /// Enabled when `NOTIFY_SOCKET` is set.
    pub(crate) fn from_env() -> Notifier {
        Notifier {
            enabled: std::env::var_os("NOTIFY_SOCKET").is_some_and(|v| !v.is_empty()),
        }
    }

    fn send(&self, states: &[NotifyState<'_>]) {
        if !self.enabled {
            return;
        }
        if let Err(e) = sd_notify::notify(false, states) {
            tracing::warn!(event = "sd_notify_failed", error = %e, "could not notify the service manager");
        }
    }

    /// `READY=1` with a status line.
    pub(crate) fn ready(&self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    /// `EXTEND_TIMEOUT_USEC=...`: starting takes a while longer (an agent connecting).
    pub(crate) fn extend_timeout(&self, by: Duration, status: &str) {
        let usec = u32::try_from(by.as_micros()).unwrap_or(u32::MAX);
        self.send(&[
            NotifyState::ExtendTimeoutUsec(usec),
            NotifyState::Status(status),
        ]);
    }

    /// `STATUS=...`.
    pub(crate) fn status(&self, status: &str) {
        self.send(&[NotifyState::Status(status)]);
    }

    /// `WATCHDOG=1`.
    pub(crate) fn watchdog(&self) {
        self.send(&[NotifyState::Watchdog]);
    }

    /// `RELOADING=1` with `MONOTONIC_USEC` (as `Type=notify-reload` expects).
    pub(crate) fn reloading(&self) {
        match NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
        }
    }

    /// `STOPPING=1`.
    pub(crate) fn stopping(&self) {
        self.send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
    }
}

/// How often to ping the watchdog: half of `WATCHDOG_USEC`, when the service manager asks
/// for pings. `WATCHDOG_PID`, when set, must name this process (`sd_watchdog_enabled(3)`;
/// the `sd-notify` crate's own check wrongly requires it to be set).
pub(crate) fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.trim().parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.trim().parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    Some(Duration::from_micros(usec / 2)).filter(|d| !d.is_zero())
}
