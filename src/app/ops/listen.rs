//! Descriptor and connection budgets for the daemon's listeners (the control socket,
//! `ops::ctl`; the metrics endpoint, `ops::metrics`; the web console, `app::console`): one
//! accept loop that holds at most a fixed number of connections open (the next accept waits
//! for a free slot, so the kernel's backlog holds the rest without costing a descriptor),
//! closes a connection that is not done within its deadline (idle or slow peers; the HTTP
//! listeners also have an idle one closed to make room for the next, `serve_making_room`), and backs off
//! when accepting fails (out of descriptors) instead of spinning, logging the first failure of
//! a burst and the burst's count once accepting works again. Also the start-up step the daemon
//! runs that raises the soft descriptor limit to the hard one. The listeners' caps together
//! stay far below the limit, so the state store can always open its files. It knows nothing of
//! what the connections carry.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use crate::app::lifecycle::Lifecycle;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use tokio::sync::Semaphore;

/// A listener's budget.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    /// The listener's name in logs (`ctl`, `metrics`, `console`).
    pub(crate) name: &'static str,
    /// Connections open at once.
    pub(crate) max_connections: usize,
    /// How long one connection may take, from accept to close.
    pub(crate) deadline: Duration,
}

/// First pause after a failed accept, doubled up to [`ACCEPT_BACKOFF_MAX`].
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Something that accepts connections.
pub(crate) trait Accept: Send + 'static {
    type Conn: Send + 'static;
    fn accept_one(&self) -> impl Future<Output = io::Result<Self::Conn>> + Send;
}

impl Accept for tokio::net::TcpListener {
    type Conn = tokio::net::TcpStream;
    async fn accept_one(&self) -> io::Result<Self::Conn> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

impl Accept for tokio::net::UnixListener {
    type Conn = tokio::net::UnixStream;
    async fn accept_one(&self) -> io::Result<Self::Conn> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// Serves `listener` until `stop` within `budget`, each connection handled by `handle`.
pub(crate) async fn serve<L, H, F>(listener: L, budget: Budget, life: Lifecycle, handle: H)
where
    L: Accept,
    H: Fn(L::Conn) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    serve_making_room(listener, budget, life, None, handle).await;
}

/// Closes an idle connection to make room for a new one; says whether it did.
pub(crate) type MakeRoom = Box<dyn Fn() -> bool + Send>;

/// [`serve`], except that when every slot is held the next connection is accepted anyway (one
/// descriptor over the budget) and `make_room` is asked to close an idle one (the HTTP
/// listeners, `ops::web`); the new connection then waits for the slot that frees.
pub(crate) async fn serve_making_room<L, H, F>(
    listener: L,
    budget: Budget,
    life: Lifecycle,
    make_room: Option<MakeRoom>,
    handle: H,
) where
    L: Accept,
    H: Fn(L::Conn) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let stop = life.stop_token();
    let slots = Arc::new(Semaphore::new(budget.max_connections.max(1)));
    let mut failures: u64 = 0;
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let free = match &make_room {
            // Without a way to make room, the accept waits for a slot (the backlog holds the rest).
            None => tokio::select! {
                () = stop.cancelled() => return,
                slot = Arc::clone(&slots).acquire_owned() => match slot {
                    Ok(slot) => Some(slot),
                    Err(_) => return,
                },
            },
            Some(_) => Arc::clone(&slots).try_acquire_owned().ok(),
        };
        let (slot, accepted) = match free {
            Some(slot) => {
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept_one() => accepted,
                };
                (slot, accepted)
            }
            None => {
                // Every slot is held: take the next connection first, then room for it
                // (an idle connection closed when there is one, else the first to end).
                let accepted = tokio::select! {
                    () = stop.cancelled() => return,
                    accepted = listener.accept_one() => accepted,
                };
                if accepted.is_ok() && make_room.as_ref().is_some_and(|room| room()) {
                    tracing::debug!(
                        listener = budget.name,
                        "an idle connection closed to make room"
                    );
                }
                let slot = tokio::select! {
                    () = stop.cancelled() => return,
                    slot = Arc::clone(&slots).acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => return,
                    },
                };
                (slot, accepted)
            }
        };
        match accepted {
            Ok(conn) => {
                if failures > 0 {
                    tracing::warn!(
                        event = "accept_recovered",
                        listener = budget.name,
                        failures,
                        "accepting connections again"
                    );
                    failures = 0;
                    backoff = ACCEPT_BACKOFF_MIN;
                }
                let work = handle(conn);
                let name = budget.name;
                let stop = stop.clone();
                life.spawn(async move {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        done = tokio::time::timeout(budget.deadline, work) => {
                            if done.is_err() {
                                tracing::debug!(listener = name, "connection closed: over its deadline");
                            }
                        }
                    }
                    drop(slot);
                });
            }
            Err(e) => {
                drop(slot);
                if failures == 0 {
                    tracing::warn!(event = "accept_failed", listener = budget.name, error = %e, "cannot accept connections (backing off; the count follows when it works again)");
                }
                failures = failures.saturating_add(1);
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
    }
}

/// Raises the soft limit on open descriptors to the hard one and logs both; returns the
/// soft limit in force. Under systemd the unit's `LimitNOFILE` sets the hard limit.
pub(crate) fn raise_descriptor_limit() -> Option<u64> {
    match soft_limit_to_hard() {
        Ok((soft, hard)) => {
            tracing::info!(event = "descriptor_limit", soft, hard, "open file limit");
            if soft < 1024 {
                tracing::warn!(
                    event = "descriptor_limit_low",
                    soft,
                    "the open file limit is low; raise LimitNOFILE (docs/operations.md)"
                );
            }
            Some(soft)
        }
        Err(e) => {
            tracing::warn!(event = "descriptor_limit_unknown", error = %e, "cannot read or raise the open file limit");
            None
        }
    }
}

/// Sets the soft `RLIMIT_NOFILE` to the hard one when it is lower; returns the soft and hard
/// limits then in force.
fn soft_limit_to_hard() -> nix::Result<(u64, u64)> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok((hard, hard))
}

#[cfg(test)]
mod tests {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};

    use super::raise_descriptor_limit;

    /// A soft limit below the hard one is raised to it, and the limit in force is returned.
    #[test]
    fn the_soft_descriptor_limit_is_raised_to_the_hard_one() -> Result<(), nix::Error> {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
        // Lowered only to half (never under 256): the other tests of this process keep room.
        setrlimit(Resource::RLIMIT_NOFILE, (hard / 2).max(hard.min(256)), hard)?;
        assert_eq!(raise_descriptor_limit(), Some(hard));
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE)?, (hard, hard));
        Ok(())
    }
}
