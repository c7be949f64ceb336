//! An open append-only file the caller keeps between appends (the in-memory backend's
//! transcript journals): each append is one `write` of whole lines and one `fdatasync`, with
//! no temp file and no rename; a failed append is cut back to the length before it, so the
//! next one never joins a half-written line. Also the cut of a torn last line found at start.
//!
//! It knows no record: callers hand whole lines as bytes. A file is created new
//! ([`AppendFile::create`], or [`create_new`] for the journal's segments, which sync their
//! directory themselves) or opened existing. Every open and sync is counted in `io_stats`.
//! All functions block; async callers run them on the blocking pool.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::StoreError;
use super::files::io_err;
use super::io_stats::{self, Op};

/// An existing file opened for appending (never through a link).
#[derive(Debug)]
pub struct AppendFile {
    file: File,
    path: PathBuf,
    /// The file's length after the last complete append.
    len: u64,
}

impl AppendFile {
    /// Creates `path` (it must not exist; its directory is made if needed) with `bytes` as
    /// its first lines, not synced, and keeps it open for appending. `Ok(None)` when the file
    /// is already there (the caller replaces it whole instead).
    pub fn create(path: &Path, bytes: &[u8]) -> Result<Option<AppendFile>, StoreError> {
        let file = match create_new(path)? {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(io_err("cannot create", path)(e)),
        };
        io_stats::note(Op::Open);
        let mut out = AppendFile {
            file,
            path: path.to_path_buf(),
            len: 0,
        };
        out.append(bytes)?;
        Ok(Some(out))
    }

    /// Opens `path` for appending; it must exist.
    pub fn open(path: &Path) -> Result<AppendFile, StoreError> {
        let opened = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path);
        let file = match opened {
            Ok(f) => f,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::NotFound {
                    io_stats::note(Op::OpenAbsent);
                }
                return Err(io_err("cannot open for appending", path)(e));
            }
        };
        io_stats::note(Op::Open);
        let len = file
            .metadata()
            .map_err(io_err("cannot read the size of", path))?
            .len();
        Ok(AppendFile {
            file,
            path: path.to_path_buf(),
            len,
        })
    }

    /// Appends `bytes` (whole lines) and syncs the data. On failure the file is cut back to
    /// its length before the call (best effort) and the error returned.
    pub fn append_synced(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.append_with(bytes, true)
    }

    /// Appends `bytes` (whole lines) without syncing: in the file once this returns (a kill
    /// of the process keeps them), on the disk once the kernel writes it back.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), StoreError> {
        self.append_with(bytes, false)
    }

    fn append_with(&mut self, bytes: &[u8], sync: bool) -> Result<(), StoreError> {
        let written = self.file.write_all(bytes).and_then(|()| {
            if !sync {
                return Ok(());
            }
            io_stats::note(Op::Fdatasync);
            self.file.sync_data()
        });
        match written {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                if let Err(cut) = self.file.set_len(self.len) {
                    tracing::warn!(path = %self.path.display(), error = %cut, "a failed append could not be cut back; the reader will drop its torn line");
                }
                Err(io_err("cannot append to", &self.path)(e))
            }
        }
    }

    /// The file's length after the last complete append.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was ever written to the file.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Creates `path` for appending: a new file (never an existing one, never through a link),
/// 0600, its directory made if needed (once per process, `files::in_dir`). The outer error
/// is making the directory, the inner one creating the file.
pub(super) fn create_new(path: &Path) -> Result<std::io::Result<File>, StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    super::files::in_dir(dir, || {
        OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
    })
}

/// Cuts `path` to its first `len` bytes and syncs it (a torn last line found at start).
pub fn cut_to(path: &Path, len: u64) -> Result<(), StoreError> {
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_err("cannot open to cut", path))?;
    io_stats::note(Op::Open);
    file.set_len(len).map_err(io_err("cannot cut", path))?;
    io_stats::note(Op::Fdatasync);
    file.sync_data().map_err(io_err("cannot sync", path))
}

#[cfg(test)]
mod tests {
    use super::{AppendFile, cut_to};

    #[test]
    fn appends_keep_the_prefix_and_a_cut_drops_the_tail() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("j");
        std::fs::write(&path, b"one\n")?;
        let mut f = AppendFile::open(&path)?;
        f.append_synced(b"two\n")?;
        f.append_synced(b"thr")?;
        assert_eq!(std::fs::read(&path)?, b"one\ntwo\nthr");
        cut_to(&path, 8)?;
        assert_eq!(std::fs::read(&path)?, b"one\ntwo\n");
        assert!(AppendFile::open(&dir.path().join("absent")).is_err());
        Ok(())
    }
}
