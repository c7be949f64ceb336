//! Keeps the state directory private: created 0700, and anything below it others could read
//! or write tightened once at start (Telegram session files excepted: those are refused by
//! the session check instead). Called by the commands that open a state directory.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::StoreError;
use super::files::{ensure_private_dir, io_err};
use super::layout::{StateDir, is_session_file};

/// What [`secure_state_dir`] changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tightened {
    /// The state directory's mode before, when it was loose.
    pub root_mode: Option<u32>,
    /// Directories set to 0700 and files set to 0600 (the root included).
    pub entries: usize,
}

/// Makes sure the state directory is private before anything is read from or written to it:
/// created 0700 when missing; when it or anything below it (links are not followed) can be
/// read or written by others (0755, 0777, files 0644), directories are set to 0700 and files
/// lose their group and other bits (Telegram session files excepted: see [`is_session_file`]). When that is not possible (the directory is not ours), the error says how to fix
/// it. Logs one WARN line when it changed something.
pub fn secure_state_dir(dir: &StateDir) -> Result<Tightened, StoreError> {
    let root = dir.root();
    let meta = match fs::symlink_metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            ensure_private_dir(root)?;
            return Ok(Tightened::default());
        }
        Err(e) => return Err(io_err("cannot inspect", root)(e)),
    };
    let mut done = Tightened::default();
    let root_mode = meta.permissions().mode() & 0o777;
    if root_mode & 0o077 != 0 {
        done.root_mode = Some(root_mode);
    }
    let refuse = |path: &Path, mode: u32, e: io::Error| StoreError::Io {
        action: "refusing a state directory others can use:",
        path: path.to_path_buf(),
        source: io::Error::new(
            e.kind(),
            format!(
                "mode {mode:04o} and it cannot be tightened ({e}); as its owner run `chmod -R go-rwx {}`, or give personad a state directory of its own",
                root.display()
            ),
        ),
    };
    let mut stack = vec![root.to_path_buf()];
    let mut first = true;
    while let Some(d) = stack.pop() {
        let m = if first {
            first = false;
            meta.clone()
        } else {
            fs::symlink_metadata(&d).map_err(io_err("cannot inspect", &d))?
        };
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            fs::set_permissions(&d, fs::Permissions::from_mode(0o700))
                .map_err(|e| refuse(&d, mode, e))?;
            done.entries += 1;
        }
        for entry in fs::read_dir(&d).map_err(io_err("cannot list", &d))? {
            let entry = entry.map_err(io_err("cannot list", &d))?;
            let t = entry.file_type().map_err(io_err("cannot inspect", &d))?;
            let path = entry.path();
            if t.is_dir() {
                stack.push(path);
            } else if t.is_file() && !is_session_file(&path) {
                let m = entry.metadata().map_err(io_err("cannot inspect", &path))?;
                let mode = m.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o700))
                        .map_err(|e| refuse(&path, mode, e))?;
                    done.entries += 1;
                }
            }
        }
    }
    if done.entries > 0 {
        tracing::warn!(
            event = "state_permissions_tightened",
            dir = %root.display(),
            was = %done.root_mode.map_or("-".to_string(), |m| format!("{m:04o}")),
            entries = done.entries,
            "the state directory was readable or writable by others: directories set to 0700, files to 0600"
        );
    }
    Ok(done)
}
