//! The one signal loop of the process: SIGTERM and SIGINT become stop requests (each time
//! they arrive, so the entry can treat a second one as "exit now"), SIGHUP a reload request.
//! The daemon and the playground read the same stream and decide what a signal means to
//! them. It runs as a task of the entry's lifecycle and ends with it.

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::app::lifecycle::Lifecycle;

/// A signal, as the entry sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Signal {
    /// SIGTERM or SIGINT (its name).
    Stop(&'static str),
    /// SIGHUP.
    Reload,
}

/// Starts listening (from now on a signal no longer kills the process) and returns the
/// stream of signals. If signals cannot be listened to, the stream stays empty and open.
pub(crate) fn listen(life: &Lifecycle) -> mpsc::UnboundedReceiver<Signal> {
    let (tx, rx) = mpsc::unbounded_channel();
    let stop = life.stop_token();
    match Listeners::new() {
        Some(listeners) => {
            life.spawn(listeners.forward(tx, stop));
        }
        None => {
            tracing::error!(event = "signals_unavailable", "cannot listen for signals");
            // Keep the sender so the stream stays open (no signal ever comes).
            life.spawn(async move {
                stop.cancelled().await;
                drop(tx);
            });
        }
    }
    rx
}

struct Listeners {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Listeners {
    fn new() -> Option<Listeners> {
        use tokio::signal::unix::{SignalKind, signal};
        Some(Listeners {
            term: signal(SignalKind::terminate()).ok()?,
            int: signal(SignalKind::interrupt()).ok()?,
            hup: signal(SignalKind::hangup()).ok()?,
        })
    }

    async fn forward(mut self, tx: mpsc::UnboundedSender<Signal>, stop: CancellationToken) {
        loop {
            let signal = tokio::select! {
                () = stop.cancelled() => return,
                _ = self.term.recv() => Signal::Stop("SIGTERM"),
                _ = self.int.recv() => Signal::Stop("SIGINT"),
                _ = self.hup.recv() => Signal::Reload,
            };
            if tx.send(signal).is_err() {
                return;
            }
        }
    }
}
