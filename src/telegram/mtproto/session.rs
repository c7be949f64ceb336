//! The agent's Telegram session file: where it lives, who may read it, and the lock that
//! keeps two processes from using it at once (Telegram kills a key used twice with
//! AUTH_KEY_DUPLICATED). The file is created 0600 inside a 0700 directory before the library
//! writes to it; a session file or directory readable by others is refused.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::store::{self, StateDir};

/// Why a session cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "no Telegram session for agent {agent:?} at {path}; log in first: personad login --agent {agent:?}"
    )]
    Missing { agent: String, path: PathBuf },
    #[error(
        "{path} is readable by other users (mode {mode:o}); it gives full control of the account. Fix it with: chmod 600 {path} && chmod 700 {dir}"
    )]
    Insecure {
        path: PathBuf,
        dir: PathBuf,
        mode: u32,
    },
    #[error("the session {path} is in use by another personad process")]
    Locked { path: PathBuf },
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Store(#[from] store::StoreError),
}

/// Where an agent's session file lives.
pub fn session_path(state: &StateDir, agent: &str) -> PathBuf {
    state.agent_dir(agent).join("telegram.session")
}

fn mode_of(path: &Path) -> Result<u32, SessionError> {
    std::fs::metadata(path)
        .map(|m| m.mode() & 0o777)
        .map_err(|source| SessionError::Io {
            action: "cannot inspect",
            path: path.to_path_buf(),
            source,
        })
}

/// Refuses a session file or directory that anyone but the owner can read or write.
pub fn check_private(path: &Path) -> Result<(), SessionError> {
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    for p in [path, dir.as_path()] {
        let mode = mode_of(p)?;
        if mode & 0o077 != 0 {
            return Err(SessionError::Insecure {
                path: p.to_path_buf(),
                dir: dir.clone(),
                mode,
            });
        }
    }
    Ok(())
}

/// Makes sure a session file exists with mode 0600 in a 0700 directory (for `login`).
pub fn create_private(path: &Path) -> Result<(), SessionError> {
    if path.exists() {
        return Ok(());
    }
    store::create_private_file(path)?;
    Ok(())
}

/// An exclusive lock on the session, held for as long as the value lives.
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
}

/// Takes the session's lock (`<session>.lock`), failing at once if another process has it.
pub fn lock(path: &Path) -> Result<SessionLock, SessionError> {
    let lock_path = path.with_extension("session.lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
        .map_err(|source| SessionError::Io {
            action: "cannot open",
            path: lock_path.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(SessionLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(SessionError::Locked {
            path: path.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(SessionError::Io {
            action: "cannot lock",
            path: lock_path,
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_world_readable_session_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let state = StateDir::new(dir.path());
        let path = session_path(&state, "Ann");
        create_private(&path)?;
        check_private(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        let err = check_private(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("readable by other users") && err.contains("644"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn a_second_lock_on_the_same_session_fails() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("telegram.session");
        let _held = lock(&path)?;
        assert!(matches!(lock(&path), Err(SessionError::Locked { .. })));
        Ok(())
    }
}
