//! The daemon's session leases: one taken before an agent connects (refused: the agent does
//! not start, the others do), each renewed every third of its time to live on the daemon's
//! clock, re-checked before each renewal (found taken by another owner: that agent stops at
//! once), released when the agent stops or the daemon stops cleanly. The file I/O is
//! `adapters::lease`; the rules are `core::lease`. Called by the fleet (take, release) and
//! the daemon (the renewal task, the release at the end).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;

use crate::adapters::lease::{Leases, Renewed, TakeRefused, Taken};
use crate::core::lease::renew_every;
use crate::ports::clock::SharedClock;

/// A lease this process holds.
struct Held {
    acquired: Timestamp,
    /// Cancelled when the lease is found taken by another owner.
    lost: CancellationToken,
}

/// The leases of this process's agents.
pub(crate) struct LeaseKeeper {
    leases: Arc<dyn Leases>,
    clock: SharedClock,
    held: Mutex<BTreeMap<String, Held>>,
}

/// What the keeper tells the daemon when a lease was lost.
pub(crate) type OnLost = Box<dyn Fn(&str, &str) + Send + Sync>;

impl LeaseKeeper {
    pub(crate) fn new(leases: Arc<dyn Leases>, clock: SharedClock) -> Arc<LeaseKeeper> {
        Arc::new(LeaseKeeper {
            leases,
            clock,
            held: Mutex::new(BTreeMap::new()),
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the agent's lease; `Err` with the operator's line when another process holds
    /// it (or the file cannot be written: no lease, no start).
    pub(crate) async fn take(&self, agent: &str) -> Result<(), TakeRefused> {
        let now = self.clock.now();
        let (leases, name) = (Arc::clone(&self.leases), agent.to_string());
        let taken = match tokio::task::spawn_blocking(move || leases.take(&name, now)).await {
            Ok(t) => t,
            Err(e) => Err(crate::adapters::lease::other_error(
                std::path::Path::new(agent),
                std::io::Error::other(e),
            )),
        };
        match taken {
            Ok(Taken::Ours(r)) => {
                tracing::info!(event = "lease_taken", agent = %agent, expires = %r.expires, "session lease taken");
                self.held().insert(
                    agent.to_string(),
                    Held {
                        acquired: r.acquired,
                        lost: CancellationToken::new(),
                    },
                );
                Ok(())
            }
            Ok(Taken::Refused(lease)) => {
                let refused = TakeRefused::Held {
                    agent: agent.to_string(),
                    lease,
                };
                tracing::error!(event = "lease_held", agent = %agent, "{refused}");
                Err(refused)
            }
            Err(source) => {
                tracing::error!(event = "lease_unavailable", agent = %agent, error = %source, "the session lease cannot be taken; not started");
                Err(TakeRefused::Unavailable {
                    agent: agent.to_string(),
                    source,
                })
            }
        }
    }

    /// The token cancelled when the agent's lease is lost (none when not held).
    pub(crate) fn lost_token(&self, agent: &str) -> Option<CancellationToken> {
        self.held().get(agent).map(|h| h.lost.clone())
    }

    /// Releases the agent's lease (it stopped).
    pub(crate) async fn release(&self, agent: &str) {
        if self.held().remove(agent).is_none() {
            return;
        }
        let (leases, name) = (Arc::clone(&self.leases), agent.to_string());
        match tokio::task::spawn_blocking(move || leases.release(&name)).await {
            Ok(Ok(())) => {
                tracing::info!(event = "lease_released", agent = %agent, "session lease released");
            }
            Ok(Err(e)) => {
                tracing::warn!(event = "lease_not_released", agent = %agent, error = %e, "session lease not released: it lapses at its expiry");
            }
            Err(e) => {
                tracing::warn!(event = "lease_not_released", agent = %agent, error = %e, "session lease not released")
            }
        }
    }

    /// Releases every lease held (a clean stop).
    pub(crate) async fn release_all(&self) {
        let names: Vec<String> = self.held().keys().cloned().collect();
        for name in names {
            self.release(&name).await;
        }
    }

    /// Renews every held lease once; a lease found taken is dropped, its token cancelled and
    /// `on_lost` told.
    pub(crate) async fn renew_all(&self, on_lost: &OnLost) {
        let now = self.clock.now();
        let due: Vec<(String, Timestamp)> = self
            .held()
            .iter()
            .map(|(n, h)| (n.clone(), h.acquired))
            .collect();
        for (name, acquired) in due {
            let (leases, n) = (Arc::clone(&self.leases), name.clone());
            let renewed =
                tokio::task::spawn_blocking(move || leases.renew(&n, acquired, now)).await;
            match renewed {
                Ok(Ok(Renewed::Ours(_))) => {}
                Ok(Ok(Renewed::Lost(r))) => {
                    let reason = format!(
                        "its session lease was taken by host {} pid {} (until {})",
                        r.host, r.pid, r.expires
                    );
                    tracing::error!(event = "lease_lost", agent = %name, host = %r.host, pid = r.pid, "agent {name}: {reason}; stopping this agent at once");
                    if let Some(h) = self.held().remove(&name) {
                        h.lost.cancel();
                    }
                    on_lost(&name, &reason);
                }
                Ok(Err(e)) => {
                    tracing::warn!(event = "lease_not_renewed", agent = %name, error = %e, "session lease not renewed: trying again at the next renewal");
                }
                Err(e) => {
                    tracing::warn!(event = "lease_not_renewed", agent = %name, error = %e, "session lease not renewed");
                }
            }
        }
    }

    /// Renews the held leases every third of their time to live until `stop`.
    pub(crate) async fn keep(self: Arc<Self>, stop: CancellationToken, on_lost: OnLost) {
        let every = renew_every(self.leases.ttl());
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = crate::ports::clock::pause(self.clock.as_ref(), every) => {}
            }
            self.renew_all(&on_lost).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use jiff::Timestamp;
    use tokio_util::sync::CancellationToken;

    use super::{LeaseKeeper, OnLost};
    use crate::adapters::lease::{FileLeases, Leases as _, Taken};
    use crate::adapters::store::StateDir;
    use crate::core::lease::{LeaseRecord, Owner};
    use crate::ports::clock::{Clock as _, SharedClock, VirtualClock};

    const TTL: Duration = Duration::from_secs(60);

    fn owner(id: &str, pid: u32) -> Owner {
        Owner {
            id: id.into(),
            host: format!("host-{id}"),
            pid,
        }
    }

    fn read(state: &StateDir, agent: &str) -> Option<LeaseRecord> {
        let bytes = std::fs::read(state.lease_path(agent)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Lets the other tasks (and their blocking file work) run until `done`, bounded.
    async fn settle(mut done: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if done() {
                return true;
            }
            tokio::task::yield_now().await;
        }
        done()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn held_leases_are_renewed_on_the_clock_and_a_lost_one_stops_its_agent() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let state = StateDir::new(dir.path());
        let t0 = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let virt = Arc::new(VirtualClock::new(t0, false));
        let clock: SharedClock = Arc::clone(&virt) as SharedClock;
        let ours = Arc::new(FileLeases::new(state.clone(), owner("a", 1), TTL));
        let keeper = LeaseKeeper::new(ours, Arc::clone(&clock));
        assert!(keeper.take("tess").await.is_ok());
        assert!(keeper.take("ivy").await.is_ok());
        let first = read(&state, "tess").map(|r| r.expires);
        assert_eq!(first, Some(crate::core::time::add(t0, TTL)));
        let (lost_tx, mut lost_rx) = tokio::sync::mpsc::unbounded_channel();
        let on_lost: OnLost = Box::new(move |agent, reason| {
            let _ = lost_tx.send((agent.to_string(), reason.to_string()));
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(Arc::clone(&keeper).keep(stop.clone(), on_lost));
        assert!(settle(|| virt.sleepers() == 1).await);
        // A third of the TTL later, both leases are written again with a later expiry.
        virt.advance(Duration::from_secs(20));
        let renewed = crate::core::time::add(t0, Duration::from_secs(80));
        assert!(
            settle(|| read(&state, "tess").map(|r| r.expires) == Some(renewed)
                && read(&state, "ivy").map(|r| r.expires) == Some(renewed))
            .await
        );
        // Another process takes tess's lease (as if ours had lapsed): the next renewal finds
        // it and stops the agent at once, leaving the other owner's lease alone.
        let lost = keeper.lost_token("tess");
        assert!(settle(|| virt.sleepers() == 1).await);
        let theirs = LeaseRecord::new(&owner("b", 2), t0, virt.now(), TTL);
        let text = serde_json::to_vec(&theirs).unwrap_or_default();
        std::fs::write(state.lease_path("tess"), text).unwrap_or_else(|e| panic!("{e}"));
        virt.advance(Duration::from_secs(20));
        let (agent, reason) = lost_rx.recv().await.unwrap_or_default();
        assert_eq!(agent, "tess");
        assert!(reason.contains("host-b pid 2"), "{reason}");
        assert!(lost.is_some_and(|t| t.is_cancelled()));
        assert!(keeper.lost_token("tess").is_none());
        assert_eq!(read(&state, "tess"), Some(theirs.clone()));
        // A clean stop releases ours and never removes theirs.
        stop.cancel();
        let _ = task.await;
        keeper.release_all().await;
        assert_eq!(read(&state, "ivy"), None);
        assert_eq!(read(&state, "tess"), Some(theirs));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_held_elsewhere_refuses_the_agent_with_host_pid_and_expiry() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let state = StateDir::new(dir.path());
        let t0 = Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
        let clock: SharedClock = Arc::new(VirtualClock::new(t0, false));
        let other = FileLeases::new(state.clone(), owner("b", 42), TTL);
        assert!(matches!(other.take("tess", t0), Ok(Taken::Ours(_))));
        let keeper = LeaseKeeper::new(
            Arc::new(FileLeases::new(state.clone(), owner("a", 1), TTL)),
            clock,
        );
        let line = keeper
            .take("tess")
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert_eq!(
            line,
            format!(
                "agent tess's session is held by host host-b pid 42 until {}; not started",
                crate::core::time::add(t0, TTL)
            )
        );
        assert!(keeper.lost_token("tess").is_none());
    }
}
