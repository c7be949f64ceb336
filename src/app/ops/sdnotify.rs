//! systemd notifications (`sd_notify(3)`): the message formats of the `sd-notify` crate, sent
//! by this module over one non-blocking datagram socket. Without `NOTIFY_SOCKET` every call
//! is a no-op. A service manager that stops reading never stalls the caller (the tick loop's
//! heartbeat sends the watchdog pings): a notification that does not fit is dropped and
//! counted. Owns the sending only; `daemon` decides when to send.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sd_notify::NotifyState;

/// Sends lifecycle notifications to the service manager.
#[derive(Debug, Clone, Default)]
pub(crate) struct Notifier {
    target: Option<Arc<Target>>,
}

#[derive(Debug)]
struct Target {
    path: PathBuf,
    socket: Mutex<Option<UnixDatagram>>,
    /// Notifications dropped because the service manager's queue was full.
    dropped: AtomicU64,
}

impl Notifier {
    /// Enabled when `NOTIFY_SOCKET` names a socket path.
    pub(crate) fn from_env() -> Notifier {
        let target = std::env::var_os("NOTIFY_SOCKET")
            .filter(|v| !v.is_empty())
            .map(|path| {
                Arc::new(Target {
                    path: PathBuf::from(path),
                    socket: Mutex::new(None),
                    dropped: AtomicU64::new(0),
                })
            });
        Notifier { target }
    }

    fn send(&self, states: &[NotifyState<'_>]) {
        let Some(target) = &self.target else { return };
        let msg: String = states.iter().map(|s| format!("{s}\n")).collect();
        if let Err(e) = target.send(msg.as_bytes()) {
            if e.kind() == std::io::ErrorKind::WouldBlock {
                // Logged on the first drop of a burst (the count says how many followed).
                let n = target.dropped.fetch_add(1, Ordering::Relaxed);
                if n.is_power_of_two() || n == 0 {
                    tracing::warn!(
                        event = "sd_notify_dropped",
                        dropped = n + 1,
                        "the service manager is not reading its notifications: dropped"
                    );
                }
            } else {
                tracing::warn!(event = "sd_notify_failed", error = %e, "could not notify the service manager");
            }
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

impl Target {
    /// Sends one datagram without blocking, connecting (again) when needed.
    fn send(&self, msg: &[u8]) -> std::io::Result<()> {
        let mut socket = self.socket.lock().unwrap_or_else(PoisonError::into_inner);
        if socket.is_none() {
            let s = UnixDatagram::unbound()?;
            s.set_nonblocking(true)?;
            s.connect(&self.path)?;
            *socket = Some(s);
        }
        let result = socket.as_ref().map_or(Ok(0), |s| s.send(msg));
        match result {
            Ok(n) if n == msg.len() => Ok(()),
            Ok(_) => Err(std::io::Error::new(
                std::io::ErrorKind::WriteZero,
                "incomplete notification",
            )),
            Err(e) => {
                if e.kind() != std::io::ErrorKind::WouldBlock {
                    // The manager may have re-created its socket: connect anew next time.
                    *socket = None;
                }
                Err(e)
            }
        }
    }
}
