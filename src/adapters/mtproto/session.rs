//! The agent's Telegram session file: where it lives, who may read it, and the lock that
//! keeps two processes from using it at once (Telegram kills a key used twice with
//! AUTH_KEY_DUPLICATED). The file is created 0600 inside a 0700 directory before the library
//! writes to it; before SQLite opens it, [`check_file`] refuses anything but a private regular
//! file (a FIFO, a device, a directory, a symbolic link, a file or directory others can read).
//! Its paths come from the store's layout and its lock is the store's `FileLock`. A
//! `--test-dc` session is pointed at Telegram's test datacenters here ([`point_at`]) every
//! time it is opened, without losing the auth keys it holds.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::adapters::store::{self, FileLock, LockFailure, StateDir};

/// Why a session cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(
        "no Telegram session for agent {agent:?} at {path}; log in first: personad login --agent {agent:?}{flag}"
    )]
    Missing {
        agent: String,
        path: PathBuf,
        /// ` --test-dc` for a test-server session, else empty.
        flag: &'static str,
    },
    #[error(
        "{path} is readable by other users (mode {mode:o}); it gives full control of the account. Fix it with: chmod 600 {path} && chmod 700 {dir}"
    )]
    Insecure {
        path: PathBuf,
        dir: PathBuf,
        mode: u32,
    },
    #[error(
        "{path} is {kind}, not {expected}; a Telegram session must be a plain file in a plain directory (symbolic links are refused too): move it away and log in again"
    )]
    NotRegular {
        path: PathBuf,
        kind: &'static str,
        expected: &'static str,
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

/// Where an agent's session file lives (a separate one for Telegram's test servers).
pub fn session_path(state: &StateDir, agent: &str, servers: Servers) -> PathBuf {
    match servers {
        Servers::Production => state.session_path(agent),
        Servers::Test => state.test_session_path(agent),
        Servers::Sim => state.sim_session_path(agent),
    }
}

/// Which Telegram an account lives on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Servers {
    /// Telegram itself.
    #[default]
    Production,
    /// Telegram's test servers (`--test-dc`): test phone numbers, no real account at risk.
    Test,
    /// The simulated Telegram (`run --telegram sim`): the real MTProto client against a
    /// local server; its sessions are made by the simulator, never by `login`.
    Sim,
}

impl Servers {
    /// The flag that chooses these servers on the command line (empty for production).
    pub fn flag(self) -> &'static str {
        match self {
            Servers::Production => "",
            Servers::Test => " --test-dc",
            Servers::Sim => " --telegram sim",
        }
    }
}

/// Telegram's test datacenters (DC 1 to 3), where `--test-dc` sessions connect.
const TEST_DCS: [(i32, [u8; 4]); 3] = [
    (1, [149, 154, 175, 10]),
    (2, [149, 154, 167, 40]),
    (3, [149, 154, 175, 117]),
];

/// Points a session at Telegram's test servers (for `Servers::Test`): each test DC's address
/// replaces the one stored. The auth key stored for that DC is kept: grammers rewrites every
/// DC's address from `help.getConfig` at each connect (keeping the key), so a logged-in
/// test session rarely holds our address, and dropping the key there would log it out at
/// every start. Only a key stored with one of grammers' built-in production addresses (never
/// a test DC's) is dropped. Production sessions are left alone.
pub(crate) async fn point_at<S>(session: &S, servers: Servers) -> Result<(), S::Error>
where
    S: grammers_client::session::Session,
{
    use grammers_client::session::types::DcOption;
    use std::net::{SocketAddrV4, SocketAddrV6};
    if servers != Servers::Test {
        return Ok(());
    }
    let production = grammers_session::SessionData::default().dc_options;
    for (id, ip) in TEST_DCS {
        let ipv4 = SocketAddrV4::new(ip.into(), 443);
        let known = session.dc_option(id)?;
        if known.as_ref().is_some_and(|o| o.ipv4 == ipv4) {
            continue;
        }
        let auth_key = known.and_then(|o| {
            let built_in = production.get(&id).is_some_and(|p| p.ipv4 == o.ipv4);
            if built_in { None } else { o.auth_key }
        });
        let option = DcOption {
            id,
            ipv4,
            ipv6: SocketAddrV6::new(ipv4.ip().to_ipv6_mapped(), 443, 0, 0),
            auth_key,
        };
        session.set_dc_option(&option).await?;
    }
    Ok(())
}

/// What [`check_file`] found at a session path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionFile {
    /// Nothing there yet: `login` creates it (`run` refuses to start the agent).
    Absent,
    /// A private regular file in a private directory.
    Present,
}

/// Checks a session path before it is handed to SQLite, without opening or reading it (its
/// content is the account's key and never appears in an error): it must be absent, or a
/// regular file (not a FIFO, a device, a directory, nor a symbolic link, even one into the
/// state directory: a link could point at a session someone else can swap) that only the
/// owner can read or write, in a directory only the owner can use. SQLite's journal and WAL
/// files next to it, when present, must be regular files too. Loose permissions are refused
/// with the `chmod` to run, never tightened quietly: a session others could read may have
/// been copied.
pub(crate) fn check_file(path: &Path) -> Result<SessionFile, SessionError> {
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let inspect = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SessionError::Io {
            action: "cannot inspect",
            path: p.to_path_buf(),
            source,
        }),
    };
    let insecure = |p: &Path, mode: u32| SessionError::Insecure {
        path: p.to_path_buf(),
        dir: dir.clone(),
        mode,
    };
    let main = inspect(path)?;
    let mut files: Vec<_> = main
        .clone()
        .map(|m| (path.to_path_buf(), m))
        .into_iter()
        .collect();
    for p in store::layout::session_sidecars(path) {
        if let Some(m) = inspect(&p)? {
            files.push((p, m));
        }
    }
    for (p, m) in &files {
        if !m.file_type().is_file() {
            return Err(SessionError::NotRegular {
                path: p.clone(),
                kind: store::file_kind(m),
                expected: "a regular file",
            });
        }
        let mode = m.mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(insecure(p, mode));
        }
    }
    if let Some(m) = inspect(&dir)? {
        let mode = m.mode() & 0o777;
        if !m.file_type().is_dir() {
            return Err(SessionError::NotRegular {
                path: dir.clone(),
                kind: store::file_kind(&m),
                expected: "a directory",
            });
        }
        if mode & 0o077 != 0 {
            return Err(insecure(&dir, mode));
        }
    }
    Ok(if main.is_some() {
        SessionFile::Present
    } else {
        SessionFile::Absent
    })
}

/// Makes sure a session file exists with mode 0600 in a 0700 directory (for `login`), after
/// [`check_file`] found nothing wrong with what is there.
pub fn create_private(path: &Path) -> Result<(), SessionError> {
    if check_file(path)? == SessionFile::Absent {
        store::create_private_file(path)?;
    }
    check_file(path).map(|_| ())
}

/// An exclusive lock on the session, held for as long as the value lives.
#[derive(Debug)]
pub struct SessionLock {
    _lock: FileLock,
}

/// Takes the session's lock (`<session>.lock`, the store's one lock implementation),
/// failing at once if another process has it.
pub fn lock(path: &Path) -> Result<SessionLock, SessionError> {
    let lock_path = store::layout::session_lock_path(path);
    match FileLock::try_acquire(&lock_path) {
        Ok(lock) => Ok(SessionLock { _lock: lock }),
        Err(LockFailure::Held) => Err(SessionError::Locked {
            path: path.to_path_buf(),
        }),
        Err(LockFailure::Open(source)) => Err(SessionError::Io {
            action: "cannot open",
            path: lock_path,
            source,
        }),
        Err(LockFailure::Lock(source)) => Err(SessionError::Io {
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

    /// A logged-in `--test-dc` session keeps its auth key across restarts: grammers wrote the
    /// test DC's address from its getConfig (another address than ours, the key kept), and
    /// pointing the session at the test servers again must not drop the key (a new login at
    /// every start). A key stored with grammers' built-in production address is dropped.
    #[tokio::test]
    async fn a_logged_in_test_session_keeps_its_key_across_restarts()
    -> Result<(), Box<dyn std::error::Error>> {
        use grammers_client::session::Session;
        use grammers_client::session::storages::SqliteSession;
        use grammers_client::session::types::DcOption;
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("test.session");
        let key = [7u8; 256];
        {
            let session = SqliteSession::open(&path).await?;
            point_at(&session, Servers::Test).await?;
            let fresh = session.dc_option(2)?.ok_or("no DC 2")?;
            assert_eq!(fresh.ipv4.to_string(), "149.154.167.40:443");
            assert!(fresh.auth_key.is_none());
            // What grammers' connect writes: the key, then the address from getConfig.
            let config_addr: std::net::SocketAddrV4 = "149.154.167.40:80".parse()?;
            session
                .set_dc_option(&DcOption {
                    ipv4: config_addr,
                    auth_key: Some(key),
                    ..fresh
                })
                .await?;
            // DC 1 holding a key made with production's built-in address.
            let prod: std::net::SocketAddrV4 = "149.154.175.53:443".parse()?;
            let dc1 = session.dc_option(1)?.ok_or("no DC 1")?;
            session
                .set_dc_option(&DcOption {
                    ipv4: prod,
                    auth_key: Some([9u8; 256]),
                    ..dc1
                })
                .await?;
        }
        let session = SqliteSession::open(&path).await?;
        point_at(&session, Servers::Test).await?;
        let dc2 = session.dc_option(2)?.ok_or("no DC 2")?;
        assert_eq!(dc2.ipv4.to_string(), "149.154.167.40:443");
        assert_eq!(dc2.auth_key, Some(key), "the login survives the restart");
        let dc1 = session.dc_option(1)?.ok_or("no DC 1")?;
        assert_eq!(dc1.ipv4.to_string(), "149.154.175.10:443");
        assert!(
            dc1.auth_key.is_none(),
            "a production key is not used on the test DC"
        );
        Ok(())
    }

    #[test]
    fn a_world_readable_session_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let state = StateDir::new(dir.path());
        let path = session_path(&state, "Ann", Servers::Production);
        create_private(&path)?;
        check_file(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        let err = check_file(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("readable by other users") && err.contains("644"),
            "{err}"
        );
        Ok(())
    }

    fn mkfifo(path: &Path) -> Result<(), Box<dyn std::error::Error>> {
        let status = std::process::Command::new("mkfifo").arg(path).status()?;
        assert!(status.success(), "mkfifo {}", path.display());
        Ok(())
    }

    /// A private session directory holding `telegram.session` made by `make`.
    fn session_with(
        make: impl FnOnce(&Path) -> std::io::Result<()>,
    ) -> Result<(tempfile::TempDir, PathBuf), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = session_path(&StateDir::new(dir.path()), "Ann", Servers::Production);
        store::ensure_private_dir(path.parent().ok_or("no parent")?)?;
        make(&path)?;
        Ok((dir, path))
    }

    fn refusal(path: &Path) -> String {
        check_file(path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn an_absent_session_is_fine_and_a_private_file_is_present()
    -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, path) = session_with(|_| Ok(()))?;
        assert_eq!(check_file(&path)?, SessionFile::Absent);
        create_private(&path)?;
        assert_eq!(check_file(&path)?, SessionFile::Present);
        Ok(())
    }

    #[test]
    fn a_fifo_a_directory_or_a_link_as_the_session_is_refused_by_name()
    -> Result<(), Box<dyn std::error::Error>> {
        let (_d1, fifo) =
            session_with(|p| mkfifo(p).map_err(|e| std::io::Error::other(e.to_string())))?;
        let (_d2, dir) = session_with(|p| std::fs::create_dir(p))?;
        let (d3, link) = session_with(|_| Ok(()))?;
        // A link to a private file inside the same state directory is refused all the same.
        let target = d3.path().join("Ann").join("other.session");
        std::fs::write(&target, b"")?;
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600))?;
        std::os::unix::fs::symlink(&target, &link)?;
        for (path, kind) in [
            (&fifo, "a FIFO"),
            (&dir, "a directory"),
            (&link, "a symbolic link"),
        ] {
            let err = refusal(path);
            assert!(
                err.contains(&path.display().to_string()) && err.contains(kind),
                "{kind}: {err}"
            );
            // `login` does not create over it either.
            assert!(create_private(path).is_err(), "{kind}");
        }
        Ok(())
    }

    #[test]
    fn a_symlinked_session_directory_is_refused() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let elsewhere = dir.path().join("elsewhere");
        store::ensure_private_dir(&elsewhere)?;
        std::os::unix::fs::symlink(&elsewhere, dir.path().join("Ann"))?;
        let path = session_path(&StateDir::new(dir.path()), "Ann", Servers::Production);
        let err = refusal(&path);
        assert!(err.contains("is a symbolic link, not a directory"), "{err}");
        Ok(())
    }

    #[test]
    fn a_fifo_in_place_of_the_sqlite_journal_is_refused() -> Result<(), Box<dyn std::error::Error>>
    {
        let (_dir, path) = session_with(|p| {
            store::create_private_file(p)
                .map(drop)
                .map_err(std::io::Error::other)
        })?;
        let journal = path.with_file_name("telegram.session-journal");
        mkfifo(&journal)?;
        let err = refusal(&path);
        assert!(
            err.contains("telegram.session-journal") && err.contains("a FIFO"),
            "{err}"
        );
        Ok(())
    }

    #[test]
    fn a_loose_session_is_refused_naming_it_without_its_content()
    -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, path) = session_with(|p| std::fs::write(p, b"SECRET-AUTH-KEY"))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640))?;
        let err = refusal(&path);
        assert!(
            err.contains(&path.display().to_string())
                && err.contains("640")
                && err.contains("chmod 600")
                && !err.contains("SECRET"),
            "{err}"
        );
        // Still refused, not quietly fixed: the mode is left for the operator to see.
        assert_eq!(
            std::fs::metadata(&path)?.permissions().mode() & 0o777,
            0o640
        );
        Ok(())
    }

    #[test]
    fn a_fifo_as_the_lock_file_fails_at_once() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, path) = session_with(|_| Ok(()))?;
        mkfifo(&path.with_extension("session.lock"))?;
        assert!(matches!(lock(&path), Err(SessionError::Io { .. })));
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
