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

use crate::adapters::lease::{Leases, Renewed, Taken};
use crate::core::lease::{LeaseRecord, renew_every};
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

/// The operator's line for a lease another process holds.
pub(crate) fn held_line(agent: &str, r: &LeaseRecord) -> String {
    format!(
        "agent {agent}'s session is held by host {} pid {} until {}; not started",
        r.host, r.pid, r.expires
    )
}

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
    pub(crate) async fn take(&self, agent: &str) -> Result<(), String> {
        let now = self.clock.now();
        let (leases, name) = (Arc::clone(&self.leases), agent.to_string());
        let taken = tokio::task::spawn_blocking(move || leases.take(&name, now))
            .await
            .map_err(|e| e.to_string())?;
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
            Ok(Taken::Refused(r)) => {
                let line = held_line(agent, &r);
                tracing::error!(event = "lease_held", agent = %agent, host = %r.host, pid = r.pid, until = %r.expires, "{line}");
                Err(line)
            }
            Err(e) => {
                tracing::error!(event = "lease_unavailable", agent = %agent, error = %e, "the session lease cannot be taken; not started");
                Err(e.to_string())
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
            Err(e) => tracing::warn!(event = "lease_not_released", agent = %agent, error = %e, "session lease not released"),
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
            let renewed = tokio::task::spawn_blocking(move || leases.renew(&n, acquired, now)).await;
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
