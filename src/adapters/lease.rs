//! The session lease file, `<state>/<agent>/session.lease`: the file I/O behind the rules of
//! `core::lease`. It works across hosts that share the state volume, where the per-session
//! `flock` (which protects one host) may not.
//!
//! How a lease is written, and why:
//! - taking a free lease writes the record to a temp file of our own, synced, then
//!   hard-links it to `session.lease`: `link` never replaces an existing file, so of two
//!   processes racing only one gets the name (atomic on local filesystems and over NFS,
//!   where `link` is the classic safe create-exclusive). The file is then read back to
//!   confirm it names us;
//! - taking over an expired lease first renames it aside (atomic), checks that what was
//!   moved is the expired record it decided on (else it puts that file back and refuses),
//!   then takes the free name as above;
//! - renewing re-reads the file first (another owner there: the lease is lost), then writes
//!   a temp file and renames it over the lease (an atomic replace);
//! - releasing removes the file only when it still names us.
//!
//! A lease of another process of this host (same host name) whose pid no longer runs, or
//! whose pid is ours, is stale at once (`core::lease::decide`): a restart after a crash on
//! one host does not wait for the expiry.
//!
//! An unreadable lease file (damaged, half written by something else) counts as held by an
//! unknown owner until its modification time plus the TTL. Used by the daemon (its fleet
//! takes a lease before connecting an agent and renews it); it must not decide anything
//! itself (`core::lease` does).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;

use crate::adapters::store::StateDir;
use crate::core::lease::{Decision, LeaseRecord, Owner, decide};

/// Why a lease file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("session lease {path}: {what}: {source}")]
pub struct LeaseError {
    path: PathBuf,
    what: &'static str,
    #[source]
    source: std::io::Error,
}

/// A lease error from a failure outside the file (a task that did not finish).
pub fn other_error(path: &Path, source: std::io::Error) -> LeaseError {
    err(path, "cannot take")(source)
}

fn err(path: &Path, what: &'static str) -> impl FnOnce(std::io::Error) -> LeaseError + use<> {
    let path = path.to_path_buf();
    move |source| LeaseError { path, what, source }
}

/// Why an agent does not start: its lease is held elsewhere, or cannot be taken.
#[derive(Debug, thiserror::Error)]
pub enum TakeRefused {
    #[error(
        "agent {agent}'s session is held by host {} pid {} until {}; not started",
        lease.host,
        lease.pid,
        lease.expires
    )]
    Held { agent: String, lease: LeaseRecord },
    #[error("agent {agent}'s session lease cannot be taken; not started: {source}")]
    Unavailable {
        agent: String,
        #[source]
        source: LeaseError,
    },
}

/// What taking a lease came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// It is ours (new, taken over after expiry, or already ours).
    Ours(LeaseRecord),
    /// Another owner holds it and it has not expired.
    Refused(LeaseRecord),
}

/// What renewing a lease came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewed {
    /// Still ours, with a later expiry.
    Ours(LeaseRecord),
    /// Another owner holds it now.
    Lost(LeaseRecord),
}

/// The lease operations the daemon needs (a trait so a test can count or fail them).
pub trait Leases: Send + Sync + 'static {
    /// Who this process is.
    fn owner(&self) -> &Owner;
    /// The time to live of a lease.
    fn ttl(&self) -> Duration;
    /// Takes the agent's lease at `now`, unless another owner holds it unexpired.
    fn take(&self, agent: &str, now: Timestamp) -> Result<Taken, LeaseError>;
    /// Renews the agent's lease we hold (`acquired` when we took it).
    fn renew(
        &self,
        agent: &str,
        acquired: Timestamp,
        now: Timestamp,
    ) -> Result<Renewed, LeaseError>;
    /// Removes the agent's lease if it still names us.
    fn release(&self, agent: &str) -> Result<(), LeaseError>;
}

/// Lease files in a state directory.
#[derive(Debug, Clone)]
pub struct FileLeases {
    state: StateDir,
    owner: Owner,
    ttl: Duration,
}

impl FileLeases {
    pub fn new(state: StateDir, owner: Owner, ttl: Duration) -> FileLeases {
        FileLeases { state, owner, ttl }
    }

    /// Reads the lease file: `None` when absent; a damaged one is held by "unknown" until
    /// its modification time plus the TTL.
    fn read(&self, path: &Path) -> Result<Option<LeaseRecord>, LeaseError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(err(path, "cannot read")(e)),
        };
        if let Ok(r) = serde_json::from_slice::<LeaseRecord>(&bytes) {
            return Ok(Some(r));
        }
        let modified = std::fs::metadata(path)
            .and_then(|m| m.modified())
            .map_err(err(path, "cannot stat"))?;
        let at = Timestamp::try_from(modified).unwrap_or(Timestamp::UNIX_EPOCH);
        Ok(Some(LeaseRecord {
            owner: "unknown (unreadable lease file)".into(),
            host: "unknown".into(),
            pid: 0,
            acquired: at,
            expires: crate::core::time::add(at, self.ttl),
        }))
    }

    /// Writes `record` to a synced temp file beside `path`, named for our owner id.
    fn write_temp(&self, path: &Path, record: &LeaseRecord) -> Result<PathBuf, LeaseError> {
        let tmp = path.with_extension(format!("lease.{}.tmp", self.owner.id));
        let text = serde_json::to_vec_pretty(record).map_err(|e| LeaseError {
            path: tmp.clone(),
            what: "cannot encode",
            source: std::io::Error::other(e),
        })?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(err(&tmp, "cannot create"))?;
        f.write_all(&text)
            .and_then(|()| f.sync_all())
            .map_err(err(&tmp, "cannot write"))?;
        Ok(tmp)
    }

    /// Links a new record to the free name; `false` when another process got it first.
    fn link_new(&self, path: &Path, record: &LeaseRecord) -> Result<bool, LeaseError> {
        let tmp = self.write_temp(path, record)?;
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(err(path, "cannot create")(e)),
        }
    }

    /// Moves an expired lease of another owner aside; `false` when the file there was no
    /// longer that record (it is put back, or another process has the name already).
    fn move_expired(&self, path: &Path, seen: &LeaseRecord) -> Result<bool, LeaseError> {
        let aside = path.with_extension(format!("lease.{}.expired", self.owner.id));
        match std::fs::rename(path, &aside) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(true),
            Err(e) => return Err(err(path, "cannot move the expired lease")(e)),
        }
        let moved = self.read(&aside)?;
        if moved
            .as_ref()
            .is_some_and(|m| m.owner == seen.owner && m.expires == seen.expires)
        {
            let _ = std::fs::remove_file(&aside);
            return Ok(true);
        }
        // Not the one we decided on: another process took the name meanwhile. Put it back.
        let _ = std::fs::hard_link(&aside, path);
        let _ = std::fs::remove_file(&aside);
        Ok(false)
    }
}

impl Leases for FileLeases {
    fn owner(&self) -> &Owner {
        &self.owner
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn take(&self, agent: &str, now: Timestamp) -> Result<Taken, LeaseError> {
        let dir = self.state.agent_dir(agent);
        crate::adapters::store::ensure_private_dir(&dir).map_err(|e| LeaseError {
            path: dir.clone(),
            what: "cannot make the agent directory",
            source: std::io::Error::other(e),
        })?;
        let path = self.state.lease_path(agent);
        // A few rounds: each lost race reads the file again.
        for _ in 0..4 {
            let current = self.read(&path)?;
            match decide(current.as_ref(), now, &self.owner, false, &pid_alive) {
                Decision::Refused(r) | Decision::Lost(r) => return Ok(Taken::Refused(r)),
                Decision::Renew => {
                    let acquired = current.map_or(now, |r| r.acquired);
                    return match self.renew(agent, acquired, now)? {
                        Renewed::Ours(r) => Ok(Taken::Ours(r)),
                        Renewed::Lost(r) => Ok(Taken::Refused(r)),
                    };
                }
                Decision::Take => {
                    if let Some(seen) = &current
                        && !self.move_expired(&path, seen)?
                    {
                        continue;
                    }
                    let record = LeaseRecord::new(&self.owner, now, now, self.ttl);
                    if !self.link_new(&path, &record)? {
                        continue;
                    }
                    // Confirm: the name is ours.
                    match self.read(&path)? {
                        Some(r) if r.owner == self.owner.id => return Ok(Taken::Ours(r)),
                        Some(r) => return Ok(Taken::Refused(r)),
                        None => continue,
                    }
                }
            }
        }
        match self.read(&path)? {
            Some(r) if r.owner != self.owner.id => Ok(Taken::Refused(r)),
            _ => Err(err(&path, "cannot take")(std::io::Error::other(
                "the lease file kept changing",
            ))),
        }
    }

    fn renew(
        &self,
        agent: &str,
        acquired: Timestamp,
        now: Timestamp,
    ) -> Result<Renewed, LeaseError> {
        let path = self.state.lease_path(agent);
        let current = self.read(&path)?;
        match decide(current.as_ref(), now, &self.owner, true, &pid_alive) {
            Decision::Lost(r) | Decision::Refused(r) => Ok(Renewed::Lost(r)),
            Decision::Renew | Decision::Take => {
                let record = LeaseRecord::new(&self.owner, acquired, now, self.ttl);
                let tmp = self.write_temp(&path, &record)?;
                std::fs::rename(&tmp, &path).map_err(err(&path, "cannot renew"))?;
                Ok(Renewed::Ours(record))
            }
        }
    }

    fn release(&self, agent: &str) -> Result<(), LeaseError> {
        let path = self.state.lease_path(agent);
        match self.read(&path)? {
            Some(r) if r.owner == self.owner.id => match std::fs::remove_file(&path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(err(&path, "cannot remove")(e)),
            },
            _ => Ok(()),
        }
    }
}

/// This process as its leases name it: a random id, the host name, the pid.
pub fn this_process() -> Owner {
    let mut bytes = [0u8; 8];
    // Without randomness the pid and the time still tell processes apart.
    if getrandom::fill(&mut bytes).is_err() {
        let t = Timestamp::now().as_nanosecond().to_be_bytes();
        bytes.copy_from_slice(&t[8..]);
    }
    let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Owner {
        id: format!("{id}-{}", std::process::id()),
        host: host_name(),
        pid: std::process::id(),
    }
}

/// Whether a process of this host has the pid (`kill(pid, 0)`: it exists, even if it is
/// another user's). Pid 0 (an unknown owner) counts as alive.
fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return true;
    };
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The host name (`gethostname`), or "unknown".
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
