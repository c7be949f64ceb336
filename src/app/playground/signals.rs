//! The playground's stop and reload signals: SIGINT/SIGTERM become stop requests (the first
//! stops intake and lets the task in flight finish, a second exits at once), SIGHUP becomes a
//! reload request, and the end of input stops the runtime once it is quiet.

use tokio::sync::mpsc;

use super::{EXIT_SIGINT, EXIT_SIGTERM};
use crate::runtime::RuntimeHandle;

/// After the input ended (or a stop signal came): waits until the runtime is quiet (a
/// classifier batch, a delayed answer or a plan may still run, all of them tasks), unless a
/// signal comes first, then asks it to stop. Returns the signal that stopped the session.
pub(super) async fn settle_and_stop(
    handle: &RuntimeHandle,
    signals: &mut mpsc::UnboundedReceiver<&'static str>,
    mut stopped_by: Option<&'static str>,
) -> Option<&'static str> {
    if stopped_by.is_none() {
        // A classifier batch, a delayed answer or a plan may still be running (all of them
        // tasks of the runtime): the loop stops by itself once it is quiet (judged in the
        // loop, so virtual time never runs on past the last plan), unless a signal comes.
        handle.stop_when_idle("end of input");
        tokio::select! {
            () = handle.wait_until(|_| false) => return None,
            Some(name) = signals.recv() => stopped_by = Some(name),
        }
    }
    if let Some(name) = stopped_by {
        tracing::warn!(
            event = "signal_stop",
            signal = name,
            "stopping: the task in flight may finish within the grace period (a second signal exits at once)"
        );
        handle.shutdown(&format!("{name} received"));
    }
    stopped_by
}

/// The documented exit code for a stop signal.
pub(super) fn signal_exit_code(name: &str) -> u8 {
    if name == "SIGTERM" {
        EXIT_SIGTERM
    } else {
        EXIT_SIGINT
    }
}

/// Turns SIGINT and SIGTERM into stop requests, every time they arrive. If signals cannot
/// be listened to, nothing is ever sent (and the sender stays open).
pub(super) async fn forward_stop_signals(stops: mpsc::UnboundedSender<&'static str>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::error!(
                event = "signals_unavailable",
                "cannot listen for SIGINT/SIGTERM"
            );
            std::future::pending::<()>().await;
            return;
        };
        loop {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            if stops.send(name).is_err() {
                return;
            }
        }
    }
    #[cfg(not(unix))]
    {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = stops.send("SIGINT");
        }
        std::future::pending::<()>().await;
    }
}

/// Turns SIGHUP into reload requests.
pub(super) async fn forward_hangups(reload: mpsc::UnboundedSender<()>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return;
        };
        while hup.recv().await.is_some() {
            if reload.send(()).is_err() {
                return;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = reload;
    }
}
