//! The one reloader: persona and role-prompt edits (file watching), SIGHUP and `ctl reload`
//! all ask for a reload through one channel; a task of the entry's lifecycle applies them
//! one at a time, coalescing requests that arrive meanwhile. What a reload does is the
//! entry's ([`Reload`]): the daemon's fleet, the playground's one persona.

use std::future::Future;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What an entry does on a reload request.
pub(crate) trait Reload: Send + 'static {
    fn reload(&mut self) -> impl Future<Output = ()> + Send;
}

/// Where reload requests go.
pub(crate) type ReloadRequests = mpsc::UnboundedSender<()>;

/// A channel of reload requests.
pub(crate) fn requests() -> (ReloadRequests, mpsc::UnboundedReceiver<()>) {
    mpsc::unbounded_channel()
}

/// Applies reload requests to `target` until `stop` or until every sender is gone; hands
/// the target back.
pub(crate) async fn serve<R: Reload>(
    mut target: R,
    mut requests: mpsc::UnboundedReceiver<()>,
    stop: CancellationToken,
) -> R {
    loop {
        let asked = tokio::select! {
            () = stop.cancelled() => None,
            r = requests.recv() => r,
        };
        if asked.is_none() {
            return target;
        }
        // Requests that came meanwhile are one reload.
        while requests.try_recv().is_ok() {}
        target.reload().await;
    }
}
