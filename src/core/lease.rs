//! The session lease's rules: one Telegram session is used by one process at a time, on any
//! host that shares the state volume. A lease names its owner (an id drawn per process),
//! the host and pid, when it was taken and when it expires; the holder renews it every third
//! of its time to live, and another process may take it only once it has expired.
//!
//! Pure: [`decide`] turns the lease file's contents, the time and our id into what to do;
//! the file itself is read and written by `adapters::lease`, the renewals are scheduled by
//! the daemon. It must not read files or clocks.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The lease file's contents (`<state>/<agent>/session.lease`, JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRecord {
    /// The owning process's id: random, drawn once per process.
    pub owner: String,
    /// The owner's host name (for the operator).
    pub host: String,
    /// The owner's pid on that host (for the operator).
    pub pid: u32,
    /// When the owner took the lease.
    pub acquired: Timestamp,
    /// When it lapses unless renewed.
    pub expires: Timestamp,
}

impl LeaseRecord {
    /// A lease for `owner` taken or renewed at `now`, lasting `ttl`.
    pub fn new(me: &Owner, acquired: Timestamp, now: Timestamp, ttl: Duration) -> LeaseRecord {
        LeaseRecord {
            owner: me.id.clone(),
            host: me.host.clone(),
            pid: me.pid,
            acquired,
            expires: crate::core::time::add(now, ttl),
        }
    }

    /// Whether the lease has lapsed at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        now >= self.expires
    }
}

/// Who this process is, as its leases name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub id: String,
    pub host: String,
    pub pid: u32,
}

/// What to do with a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it (no file, or an expired one of another owner): write ours.
    Take,
    /// It is ours: write it again with a later expiry.
    Renew,
    /// Another owner holds it and it has not expired: do not start the agent.
    Refused(LeaseRecord),
    /// We held it, and now another owner does: stop the agent at once.
    Lost(LeaseRecord),
}

/// The decision for a lease file's `current` contents at `now`, for owner `me`, who holds
/// the lease (`held`: renewing) or wants it (starting the agent). `alive` says whether a
/// pid of this host runs: a lease of another owner on our own host whose process is gone
/// (or whose pid is ours: an earlier incarnation, as after a container restart) is stale at
/// once; one of another host lapses only at its expiry. (The adapter treats a damaged file
/// as held until its modification time plus the TTL.)
pub fn decide(
    current: Option<&LeaseRecord>,
    now: Timestamp,
    me: &Owner,
    held: bool,
    alive: &dyn Fn(u32) -> bool,
) -> Decision {
    match current {
        None => Decision::Take,
        Some(r) if r.owner == me.id => Decision::Renew,
        Some(r) if held => Decision::Lost(r.clone()),
        Some(r) if r.expired(now) => Decision::Take,
        Some(r) if r.host == me.host && (r.pid == me.pid || !alive(r.pid)) => Decision::Take,
        Some(r) => Decision::Refused(r.clone()),
    }
}

/// Whether Telegram's refusal says the session was used by two processes at once
/// (AUTH_KEY_DUPLICATED): the one failure the lease exists to prevent.
pub fn duplicated(reason: &str) -> bool {
    reason.contains("AUTH_KEY_DUPLICATED")
}

/// How often a held lease is renewed: a third of its time to live (so two renewals may fail
/// or come late before it lapses).
pub fn renew_every(ttl: Duration) -> Duration {
    (ttl / 3).max(Duration::from_millis(1))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use jiff::Timestamp;

    use super::{Decision, LeaseRecord, Owner, decide, renew_every};

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn owner(id: &str) -> Owner {
        Owner {
            id: id.into(),
            host: "h".into(),
            pid: 7,
        }
    }

    fn me() -> Owner {
        Owner {
            id: "me".into(),
            host: "here".into(),
            pid: 9,
        }
    }

    fn running(_: u32) -> bool {
        true
    }

    fn d(current: Option<&LeaseRecord>, at: i64, held: bool) -> Decision {
        decide(current, t(at), &me(), held, &running)
    }

    fn lease(id: &str, at: i64) -> LeaseRecord {
        LeaseRecord::new(&owner(id), t(at), t(at), Duration::from_secs(60))
    }

    #[test]
    fn an_absent_lease_is_taken_and_ours_renewed() {
        assert_eq!(d(None, 0, false), Decision::Take);
        assert_eq!(d(None, 0, true), Decision::Take);
        let mine = lease("me", 0);
        assert_eq!(d(Some(&mine), 10, true), Decision::Renew);
        // Ours even after expiry (a restart of this process never happens with one id).
        assert_eq!(d(Some(&mine), 100, true), Decision::Renew);
    }

    #[test]
    fn another_owner_refuses_until_expiry_then_yields() {
        let theirs = lease("them", 0);
        assert_eq!(
            d(Some(&theirs), 59, false),
            Decision::Refused(theirs.clone())
        );
        assert_eq!(d(Some(&theirs), 60, false), Decision::Take);
    }

    #[test]
    fn a_held_lease_found_taken_is_lost_even_when_expired() {
        let theirs = lease("them", 0);
        assert_eq!(d(Some(&theirs), 10, true), Decision::Lost(theirs.clone()));
        assert_eq!(d(Some(&theirs), 100, true), Decision::Lost(theirs));
    }

    #[test]
    fn renewals_come_every_third_of_the_ttl() {
        assert_eq!(
            renew_every(Duration::from_secs(60)),
            Duration::from_secs(20)
        );
        assert_eq!(renew_every(Duration::ZERO), Duration::from_millis(1));
        let r = lease("me", 0);
        assert_eq!(r.expires, t(60));
        assert!(!r.expired(t(59)) && r.expired(t(60)));
    }

    #[test]
    fn a_lease_of_a_gone_process_on_this_host_is_stale_at_once() {
        let mut mine_before = lease("old", 0);
        mine_before.host = "here".into();
        // Its process is gone: taken at once.
        let gone = |_: u32| false;
        assert_eq!(
            decide(Some(&mine_before), t(1), &me(), false, &gone),
            Decision::Take
        );
        // Our own pid under another id: an earlier incarnation (a restarted container).
        mine_before.pid = 9;
        assert_eq!(d(Some(&mine_before), 1, false), Decision::Take);
        // Alive on this host: refused until expiry.
        mine_before.pid = 8;
        assert_eq!(
            d(Some(&mine_before), 1, false),
            Decision::Refused(mine_before.clone())
        );
        // Another host's: its pid says nothing here.
        let theirs = lease("them", 0);
        assert_eq!(
            decide(Some(&theirs), t(1), &me(), false, &gone),
            Decision::Refused(theirs)
        );
    }
}
