//! The state directory as `doctor` sees it: there or creatable, private (0700, ours),
//! writable, room on its disk, and whether a daemon holds its lock. Reads only: a missing
//! directory is not created, a loose one is not tightened (`run` does both; this says so).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use super::Finding;
use crate::adapters::store::{FileLock, LockFailure, StateDir};
use crate::app::commands::{CommandError, exit};

/// Less free space than this on the state directory's disk is a warning.
pub(crate) const LOW_SPACE: u64 = 100 * 1024 * 1024;

/// Every state directory check, off the async threads.
pub(crate) async fn check(root: &Path) -> Result<Vec<Finding>, CommandError> {
    let root = root.to_path_buf();
    Ok(tokio::task::spawn_blocking(move || checks(&root)).await?)
}

fn checks(root: &Path) -> Vec<Finding> {
    let shown = root.display().to_string();
    let check = "state directory";
    let meta = match std::fs::symlink_metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = root
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let mut out = vec![if writable(parent) {
                Finding::ok(
                    check,
                    format!("{shown} does not exist yet; `run` creates it (mode 0700)"),
                )
            } else {
                Finding::fail(
                    check,
                    format!(
                        "{shown} does not exist and {} is not writable",
                        parent.display()
                    ),
                    format!(
                        "create it as the daemon's user: mkdir -m 700 {shown}, or give --state a writable place"
                    ),
                    exit::IO,
                )
            }];
            out.push(space(parent));
            out.push(Finding::ok("daemon", "none runs (no state directory yet)"));
            return out;
        }
        Err(e) => {
            return vec![Finding::fail(
                check,
                format!("cannot inspect {shown}: {e}"),
                "check the path and its parents' permissions",
                exit::IO,
            )];
        }
    };
    if !meta.is_dir() {
        return vec![Finding::fail(
            check,
            format!(
                "{shown} is {}, not a directory",
                crate::adapters::store::file_kind(&meta)
            ),
            "move it away, or give --state a directory",
            exit::IO,
        )];
    }
    let mut out = Vec::new();
    let mode = meta.permissions().mode() & 0o777;
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        out.push(Finding::fail(
            check,
            format!("{shown} belongs to user {} (this is user {me})", meta.uid()),
            format!("run as its owner, or chown -R {me} {shown}"),
            exit::IO,
        ));
    } else if mode & 0o077 != 0 {
        out.push(Finding::fail(
            check,
            format!(
                "{shown} has mode {mode:04o}: other users can reach the sessions and conversations in it"
            ),
            format!("chmod 700 {shown}"),
            exit::IO,
        ));
    } else if !writable(root) {
        out.push(Finding::fail(
            check,
            format!("{shown} is not writable"),
            format!("chmod u+rwx {shown}"),
            exit::IO,
        ));
    } else {
        out.push(Finding::ok(
            check,
            format!("{shown} (mode {mode:04o}, yours, writable)"),
        ));
    }
    out.push(space(root));
    out.push(lock(root));
    out
}

/// Whether this process may create files in `dir`.
fn writable(dir: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_ok()
}

/// The free space on `dir`'s disk.
fn space(dir: &Path) -> Finding {
    let check = "free space";
    match nix::sys::statvfs::statvfs(dir) {
        Ok(s) => {
            let free = s.blocks_available().saturating_mul(s.fragment_size());
            let text = format!("{} free on the disk of {}", size(free), dir.display());
            if free < LOW_SPACE {
                Finding::warn(
                    check,
                    format!("only {text}: graphs and sessions stop saving when it is full"),
                    "free some space, or move --state to a larger disk",
                )
            } else {
                Finding::ok(check, text)
            }
        }
        Err(e) => Finding::warn(
            check,
            format!("cannot tell for {}: {e}", dir.display()),
            "check the disk with df",
        ),
    }
}

/// Bytes as MiB or GiB, one decimal.
fn size(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    let mib = bytes as f64 / MIB;
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

/// Whether a daemon holds the state directory's lock (taken and let go at once when free;
/// never created).
fn lock(root: &Path) -> Finding {
    let check = "daemon";
    let path = StateDir::new(root).lock_path();
    if !path.exists() {
        return Finding::ok(check, "none runs on this state directory");
    }
    match FileLock::try_acquire(&path) {
        Ok(_free) => Finding::ok(check, "none runs on this state directory"),
        Err(LockFailure::Held) => {
            let pid = std::fs::read_to_string(&path)
                .ok()
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "unknown".into());
            Finding::info(
                check,
                format!("a daemon is running on this state directory (pid {pid})"),
            )
        }
        Err(LockFailure::Open(e) | LockFailure::Lock(e)) => Finding::fail(
            check,
            format!("cannot check the lock {}: {e}", path.display()),
            format!("move {} away (a daemon makes it again)", path.display()),
            exit::IO,
        ),
    }
}
