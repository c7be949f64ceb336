//! The one lock implementation: an exclusive `flock` taken without waiting on a private lock
//! file (created 0600, never through a link, opened without blocking so a FIFO in its place
//! fails at once). The kernel drops it when the process ends, however it ends (kill -9
//! included), so a stale lock file never blocks a restart.
//!
//! Used for the state directory ([`StateLock`], here) and for each Telegram session
//! (`adapters::mtproto::session::lock`). Callers word their own errors from [`LockFailure`].

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::StoreError;
use super::files::{Refused, Symlinks, ensure_private_dir, file_kind, io_err, read_file};
use super::layout::StateDir;

/// An exclusive lock on a file, held for as long as the value lives.
#[derive(Debug)]
pub struct FileLock {
    file: File,
}

/// Why [`FileLock::try_acquire`] got no lock.
#[derive(Debug)]
pub enum LockFailure {
    /// Another process holds it.
    Held,
    /// The lock file could not be opened or created.
    Open(io::Error),
    /// `flock` failed for another reason.
    Lock(io::Error),
}

impl FileLock {
    /// Takes the lock on `path` (created if missing) without waiting.
    /// Anything but a regular file in its place (a FIFO, a directory) fails as
    /// [`LockFailure::Open`].
    pub(crate) fn try_acquire(path: &Path) -> Result<FileLock, LockFailure> {
        Self::try_acquire_as(path, false)
    }

    /// As [`FileLock::try_acquire`], a shared lock when `shared` (many shared holders, no
    /// exclusive one).
    fn try_acquire_as(path: &Path, shared: bool) -> Result<FileLock, LockFailure> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
            .map_err(LockFailure::Open)?;
        let meta = file.metadata().map_err(LockFailure::Open)?;
        if !meta.is_file() {
            return Err(LockFailure::Open(io::Error::new(
                io::ErrorKind::InvalidData,
                Refused::NotRegular(file_kind(&meta)),
            )));
        }
        let locked = if shared {
            file.try_lock_shared()
        } else {
            file.try_lock()
        };
        match locked {
            Ok(()) => Ok(FileLock { file }),
            Err(fs::TryLockError::WouldBlock) => Err(LockFailure::Held),
            Err(fs::TryLockError::Error(e)) => Err(LockFailure::Lock(e)),
        }
    }

    /// Replaces the lock file's content with `text` (the holder's pid), synced.
    fn record(&mut self, text: &str) -> io::Result<()> {
        self.file.set_len(0)?;
        writeln!(self.file, "{text}")?;
        self.file.sync_all()
    }
}

/// Why the state directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error(
        "state directory {dir} is in use by another personad (pid {pid}); stop it first, or give this one another --state"
    )]
    Held { dir: PathBuf, pid: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The lock that makes one process the only user of a state directory (`run`, `chat`, the
/// crash harness's child): a [`FileLock`] on `<state>/lock`, which holds the owner's pid.
/// Held until dropped.
#[derive(Debug)]
pub struct StateLock {
    _lock: FileLock,
    /// The state directory and the lock file as they were when the lock was taken.
    identity: Identity,
    /// The first failed check: once gone, always gone.
    gone: std::sync::OnceLock<StateGone>,
    /// Woken by the first failed check (see [`StateLock::until_gone`]).
    wake: tokio::sync::Notify,
}

/// A file's identity (device and inode): a directory deleted and made again, or a lock file
/// replaced, has another.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    root: PathBuf,
    lock: PathBuf,
    root_id: (u64, u64),
    lock_id: (u64, u64),
}

fn identity_of(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).map(|m| (m.dev(), m.ino()))
}

pub use crate::ports::store::StateGone;

impl StateLock {
    /// Takes the lock without waiting; a second process gets [`LockError::Held`] naming the
    /// holder's pid.
    pub fn acquire(dir: &StateDir) -> Result<StateLock, LockError> {
        Self::acquire_as(dir, false)
    }

    /// The lock of one shard (`run --shard`, `--agent`): shared with the other shards on
    /// the same directory (each agent's session lease keeps them apart), exclusive of a
    /// process that runs every agent and of the offline commands.
    pub fn acquire_shared(dir: &StateDir) -> Result<StateLock, LockError> {
        Self::acquire_as(dir, true)
    }

    fn acquire_as(dir: &StateDir, shared: bool) -> Result<StateLock, LockError> {
        ensure_private_dir(dir.root())?;
        let path = dir.lock_path();
        let mut lock = match FileLock::try_acquire_as(&path, shared) {
            Ok(lock) => lock,
            Err(LockFailure::Held) => {
                let pid = read_file(&path, 64, Symlinks::Refuse)
                    .ok()
                    .map(|b| String::from_utf8_lossy(&b).trim().to_string())
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| "unknown".into());
                return Err(LockError::Held {
                    dir: dir.root().to_path_buf(),
                    pid,
                });
            }
            Err(LockFailure::Open(e)) => {
                return Err(io_err("cannot open lock file", &path)(e).into());
            }
            Err(LockFailure::Lock(e)) => return Err(io_err("cannot lock", &path)(e).into()),
        };
        lock.record(&std::process::id().to_string())
            .map_err(io_err("cannot write lock file", &path))?;
        let identity = Identity {
            root: dir.root().to_path_buf(),
            root_id: identity_of(dir.root()).map_err(io_err("cannot stat", dir.root()))?,
            lock_id: identity_of(&path).map_err(io_err("cannot stat", &path))?,
            lock: path,
        };
        Ok(StateLock {
            _lock: lock,
            identity,
            gone: std::sync::OnceLock::new(),
            wake: tokio::sync::Notify::new(),
        })
    }

    /// Whether the state directory and its lock file are still the ones locked (blocking:
    /// two `stat` calls). A removed, moved or replaced directory or lock file is
    /// [`StateGone`]: the lock no longer guards anything, and a second daemon could start.
    /// The first failure is remembered and wakes [`StateLock::until_gone`].
    pub fn check(&self) -> Result<(), StateGone> {
        if let Some(gone) = self.gone.get() {
            return Err(gone.clone());
        }
        let checked = self.check_identity();
        if let Err(gone) = &checked
            && self.gone.set(gone.clone()).is_ok()
        {
            self.wake.notify_one();
        }
        checked
    }

    /// Resolves once a check (the daemon's periodic one, or one before a write batch)
    /// found the directory gone.
    pub async fn until_gone(&self) -> StateGone {
        loop {
            if let Some(gone) = self.gone.get() {
                return gone.clone();
            }
            self.wake.notified().await;
        }
    }

    fn check_identity(&self) -> Result<(), StateGone> {
        let id = &self.identity;
        let gone = |what| StateGone {
            dir: id.root.clone(),
            what,
        };
        match identity_of(&id.root) {
            Err(_) => return Err(gone("removed")),
            Ok(now) if now != id.root_id => return Err(gone("replaced")),
            Ok(_) => {}
        }
        match identity_of(&id.lock) {
            Err(_) => Err(gone("emptied (its lock file is gone)")),
            Ok(now) if now != id.lock_id => Err(gone("replaced (its lock file is another)")),
            Ok(_) => Ok(()),
        }
    }
}

impl super::layout::DirGuard for StateLock {
    fn check(&self) -> Result<(), StateGone> {
        StateLock::check(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_state_lock_is_refused_naming_the_holder() -> Result<(), Box<dyn std::error::Error>>
    {
        let tmp = tempfile::tempdir()?;
        let dir = StateDir::new(tmp.path());
        let _held = StateLock::acquire(&dir)?;
        let err = StateLock::acquire(&dir).err().map(|e| e.to_string());
        let pid = std::process::id().to_string();
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("in use") && e.contains(&pid)),
            "{err:?}"
        );
        Ok(())
    }

    #[test]
    fn a_fifo_as_the_state_lock_fails_at_once() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let dir = StateDir::new(tmp.path());
        let status = std::process::Command::new("mkfifo")
            .arg(dir.lock_path())
            .status()?;
        assert!(status.success());
        assert!(matches!(
            StateLock::acquire(&dir),
            Err(LockError::Store(StoreError::Io { .. }))
        ));
        Ok(())
    }
}
