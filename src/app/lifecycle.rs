//! The lifecycle every entry that runs the runtime shares (`run`, `chat`, `bench`, the crash
//! child): one [`TaskTracker`] that owns every task the entry spawns beside the runtime, and
//! one [`CancellationToken`] that tells them all to stop. An entry is built in dependency
//! order, started, run until its shutdown source fires, then wound down: the token is
//! cancelled and the tracked tasks get a bounded time to finish. Nothing here knows what the
//! tasks do.

use std::future::Future;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The tasks of one run and the token that stops them.
#[derive(Clone, Default)]
pub struct Lifecycle {
    tracker: TaskTracker,
    stop: CancellationToken,
}

impl Lifecycle {
    pub fn new() -> Lifecycle {
        Lifecycle::default()
    }

    /// Runs `task` as a task of this run.
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(task)
    }

    /// The token every task of this run watches.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Tells every task to stop (they see the token) without waiting.
    pub fn cancel(&self) {
        self.stop.cancel();
    }

    /// Tells every task to stop and waits at most `grace` for them to end; returns how many
    /// were still running then (they are left to the runtime's end).
    pub async fn wind_down(&self, grace: Duration) -> usize {
        self.stop.cancel();
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            let left = self.tracker.len();
            tracing::warn!(
                event = "tasks_left_running",
                count = left,
                "some tasks did not stop in time"
            );
            return left;
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Lifecycle;

    /// Winding down cancels the token every task watches and waits for them to end.
    #[tokio::test]
    async fn wind_down_stops_every_tracked_task() {
        let life = Lifecycle::new();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            let (stop, tx) = (life.stop_token(), tx.clone());
            life.spawn(async move {
                stop.cancelled().await;
                let _ = tx.send(i);
            });
        }
        drop(tx);
        assert_eq!(life.wind_down(Duration::from_secs(5)).await, 0);
        let mut seen = Vec::new();
        while let Some(i) = rx.recv().await {
            seen.push(i);
        }
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2]);
    }
}
