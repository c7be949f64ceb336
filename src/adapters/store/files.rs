//! Crash-safe file primitives of the store, by path: whole-file replacement (temp file in
//! the same directory, fsync, rename, fsync the directory), batches of such replacements
//! sharing their syncs, durable removal and moves, private permissions (files 0600,
//! directories 0700), capped reads that refuse links, FIFOs and oversized files, and the
//! quarantine of unreadable files with the reason noted next to them.
//!
//! It knows no record: callers serialize their own data and hand bytes over. Every function
//! blocks; async callers run them on the blocking pool.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::StoreError;
use super::io_stats::{self, Op};
use super::known_dirs;
use super::layout::StateDir;

/// Prefix of temp files; anything starting with it is debris from an interrupted write.
pub(crate) const TEMP_PREFIX: &str = ".personad-tmp-";

pub(super) fn io_err<'a>(
    action: &'static str,
    path: &'a Path,
) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Creates `dir` and its missing parents with mode 0700.
pub fn ensure_private_dir(dir: &Path) -> Result<(), StoreError> {
    io_stats::note(Op::Mkdir);
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err("cannot create directory", dir))
}

/// Runs `create`, which makes a file in `dir`, making `dir` first unless this process knows
/// it (`known_dirs`); a directory removed since this process made it (an operator's cleanup)
/// is made again, once. The outer error is making the directory, the inner one `create`'s.
pub(super) fn in_dir<T>(
    dir: &Path,
    create: impl Fn() -> io::Result<T>,
) -> Result<io::Result<T>, StoreError> {
    let known = known_dirs::contains(dir);
    if !known {
        ensure_private_dir(dir)?;
        known_dirs::insert(dir);
    }
    match create() {
        Err(e) if known && e.kind() == io::ErrorKind::NotFound => {
            known_dirs::forget(dir);
            ensure_private_dir(dir)?;
            known_dirs::insert(dir);
            Ok(create())
        }
        other => Ok(other),
    }
}

/// Replaces `path` with `bytes` so that after a crash at any moment the file holds either
/// the old or the new content, never a mix. Creates the parent directory (0700) if needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_atomic_with(path, |w| {
        w.write_all(bytes)
            .map_err(io_err("cannot write temp file for", path))
    })
}

/// [`write_atomic`] for content made as it is written: `fill` writes it to the temp file
/// (buffered), so a large file is never whole in memory. A failing `fill` leaves the old file.
pub(crate) fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn io::Write) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = in_dir(dir, || {
        tempfile::Builder::new()
            .prefix(TEMP_PREFIX)
            .permissions(fs::Permissions::from_mode(0o600))
            .tempfile_in(dir)
    })?
    .map_err(io_err("cannot create temp file in", dir))?;
    io_stats::note(Op::TempFile);
    {
        let mut out = io::BufWriter::with_capacity(64 << 10, tmp.as_file_mut());
        fill(&mut out)?;
        out.flush()
            .map_err(io_err("cannot write temp file for", path))?;
    }
    io_stats::note(Op::Fsync);
    tmp.as_file()
        .sync_all()
        .map_err(io_err("cannot sync temp file for", path))?;
    io_stats::note(Op::Rename);
    tmp.persist(path).map_err(|e| StoreError::Io {
        action: "cannot rename temp file onto",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    sync_dir(dir)
}

/// Applies many whole-file replacements and removals with the same guarantee as
/// [`write_atomic`] for each file, but sharing the expensive part (group commit): every
/// temp file is written first, then synced one after another on this thread (the first
/// sync commits the others' data with it, so the rest are cheap; no thread is started),
/// renamed over its target, and each directory involved is synced once at the end. Returns
/// once all of it is durable.
pub fn apply_batch(ops: Vec<(PathBuf, Option<Vec<u8>>)>) -> Result<(), StoreError> {
    let mut dirs: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
    let mut temps = Vec::new();
    for (path, bytes) in ops {
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        match bytes {
            Some(bytes) => {
                let mut tmp = in_dir(&dir, || {
                    tempfile::Builder::new()
                        .prefix(TEMP_PREFIX)
                        .permissions(fs::Permissions::from_mode(0o600))
                        .tempfile_in(&dir)
                })?
                .map_err(io_err("cannot create temp file in", &dir))?;
                io_stats::note(Op::TempFile);
                tmp.write_all(&bytes)
                    .map_err(io_err("cannot write temp file for", &path))?;
                temps.push((tmp, path));
            }
            None => {
                if !unlink(&path, "cannot remove")? {
                    continue;
                }
            }
        }
        dirs.insert(dir);
    }
    for (tmp, path) in &temps {
        io_stats::note(Op::Fdatasync);
        tmp.as_file()
            .sync_data()
            .map_err(io_err("cannot sync temp file for", path))?;
    }
    for (tmp, path) in temps {
        io_stats::note(Op::Rename);
        tmp.persist(&path).map_err(|e| StoreError::Io {
            action: "cannot rename temp file onto",
            path: path.clone(),
            source: e.error,
        })?;
    }
    for dir in dirs {
        sync_dir(&dir)?;
    }
    Ok(())
}

/// Removes `path` without syncing its directory; an absent file is fine. Returns whether
/// there was one; an error says `action`.
pub(super) fn unlink(path: &Path, action: &'static str) -> Result<bool, StoreError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err(action, path)(e)),
    }
}

/// Removes `path` (absent is fine) and makes the removal durable.
pub fn remove(path: &Path) -> Result<(), StoreError> {
    if !unlink(path, "cannot remove")? {
        return Ok(());
    }
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Moves `from` to `to` (same filesystem), durable in both directories.
pub fn move_file(from: &Path, to: &Path) -> Result<(), StoreError> {
    if let Some(dir) = to.parent() {
        ensure_private_dir(dir)?;
    }
    io_stats::note(Op::Rename);
    fs::rename(from, to).map_err(io_err("cannot move", from))?;
    if let Some(dir) = to.parent() {
        sync_dir(dir)?;
    }
    sync_dir(from.parent().unwrap_or(Path::new(".")))
}

pub(super) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    io_stats::note(Op::Fsync);
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("cannot sync directory", dir))
}

/// Creates a new private file (0600) that must not exist yet, for callers that need a file
/// handle (session files). Parent created 0700.
pub fn create_private_file(path: &Path) -> Result<File, StoreError> {
    if let Some(dir) = path.parent() {
        ensure_private_dir(dir)?;
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io_err("cannot create", path))
}

/// Appends `bytes` to `path` (created 0600 if absent, never through a link) and makes them
/// durable: the data synced, and the directory too when the file is new. A crash may leave
/// a prefix of `bytes` at the end; readers of such journals ignore a last line cut short.
pub fn append_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(io_err("cannot open for appending", path))?;
    io_stats::note(Op::Open);
    let was_empty = file
        .metadata()
        .map_err(io_err("cannot read the size of", path))?
        .len()
        == 0;
    file.write_all(bytes)
        .map_err(io_err("cannot append to", path))?;
    io_stats::note(Op::Fdatasync);
    file.sync_data().map_err(io_err("cannot sync", path))?;
    if was_empty {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Largest graph file read (a plan holds at most a few dozen tasks of a few KB each).
pub const GRAPH_FILE_CAP: u64 = 8 << 20;

/// Largest other state file read: agent state, media records, usage and window records, the
/// sent-message ledger, transcripts; also the default for operator files read through here.
pub const STATE_FILE_CAP: u64 = 64 << 20;

/// What [`read_file`] does with a symbolic link as the last component of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Symlinks {
    /// Refuse it: files in the state directory are written by us, never links (a link could
    /// point out of the directory, at `/dev/zero` or at someone else's file).
    Refuse,
    /// Follow it (operator files: prompts, curated records, media paths given as input); the
    /// target must still be a regular file under the cap.
    Follow,
}

/// Why [`read_file`] refused a file it could open (or a link it must not follow). Carried as
/// the `InvalidData` source of [`StoreError::Io`], so callers that word their own messages
/// (persona files) can tell an oversize file from the rest with [`refusal`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("is a symbolic link; state files must be regular files")]
    Symlink,
    /// A directory, FIFO, device or socket (the kind in words: "a FIFO").
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    /// Over the cap by its metadata.
    #[error("is {size} bytes, over the cap of {cap} bytes")]
    TooLarge { size: u64, cap: u64 },
    /// Metadata said it fit, but more than `cap` bytes could be read.
    #[error("is more than {cap} bytes, over the cap of {cap} bytes")]
    Grew { cap: u64 },
}

/// The [`Refused`] reason inside an error of [`read_file`], if that is why it failed.
pub fn refusal(error: &StoreError) -> Option<&Refused> {
    match error {
        StoreError::Io { source, .. } => source.get_ref()?.downcast_ref::<Refused>(),
        StoreError::Encode { .. } | StoreError::Gone(_) => None,
    }
}

/// Reads a whole file safely: opened without blocking (a FIFO cannot stall us) and, with
/// [`Symlinks::Refuse`], without following a link; the opened file must be a regular file of
/// at most `cap` bytes, and at most `cap + 1` bytes are ever read (metadata that says 0 bytes,
/// as `/proc` files do, cannot make us read more). Every state reader goes through here.
pub fn read_file(path: &Path, cap: u64, symlinks: Symlinks) -> Result<Vec<u8>, StoreError> {
    use std::io::Read as _;
    let refused = |why: Refused| StoreError::Io {
        action: "cannot read",
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, why),
    };
    let mut flags = libc::O_NONBLOCK;
    if symlinks == Symlinks::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => {
            io_stats::note(Op::Open);
            f
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            io_stats::note(Op::OpenAbsent);
            return Err(io_err("cannot read", path)(e));
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) && symlinks == Symlinks::Refuse => {
            return Err(refused(Refused::Symlink));
        }
        Err(e) => return Err(io_err("cannot read", path)(e)),
    };
    let meta = file.metadata().map_err(io_err("cannot read", path))?;
    if !meta.is_file() {
        return Err(refused(Refused::NotRegular(file_kind(&meta))));
    }
    if meta.len() > cap {
        return Err(refused(Refused::TooLarge {
            size: meta.len(),
            cap,
        }));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_err("cannot read", path))?;
    if bytes.len() as u64 > cap {
        return Err(refused(Refused::Grew { cap }));
    }
    Ok(bytes)
}

/// What a file that is not a regular file is, in words ("a FIFO").
pub fn file_kind(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    let t = meta.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "an unknown kind of file"
    }
}

pub(super) fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, StoreError> {
    String::from_utf8(bytes).map_err(|_| StoreError::Io {
        action: "cannot read",
        path: path.to_path_buf(),
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ),
    })
}

/// Reads a whole state file as text ([`read_file`] with [`STATE_FILE_CAP`], links refused),
/// naming it in the error.
pub fn read_to_string(path: &Path) -> Result<String, StoreError> {
    utf8(path, read_file(path, STATE_FILE_CAP, Symlinks::Refuse)?)
}

/// [`read_to_string`] if the file exists: `Ok(None)` when it does not.
pub fn read_optional(path: &Path) -> Result<Option<String>, StoreError> {
    optional(read_to_string(path))
}

/// Reads an operator's file (prompts, curated records, a price table) as text: links are
/// followed, the rest of [`read_file`]'s checks apply. `Ok(None)` when it does not exist.
pub fn read_operator_file(path: &Path) -> Result<Option<String>, StoreError> {
    optional(read_file(path, STATE_FILE_CAP, Symlinks::Follow).and_then(|bytes| utf8(path, bytes)))
}

/// `Ok(None)` for a file that is not there; other errors as they are.
pub(crate) fn optional<T>(read: Result<T, StoreError>) -> Result<Option<T>, StoreError> {
    match read {
        Ok(t) => Ok(Some(t)),
        Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Serializes `value` as pretty JSON and writes it with [`write_atomic`]; an encoding failure
/// names the path it was meant for.
pub fn write_json<T: serde::Serialize + ?Sized>(path: &Path, value: &T) -> Result<(), StoreError> {
    write_atomic(path, &json_bytes(path, value, true)?)
}

/// A graph's checkpoint file text (Markdown with its JSON block); an encoding failure names
/// the conversation.
pub(crate) fn encode_graph(graph: &crate::core::graph::TaskGraph) -> Result<String, StoreError> {
    crate::core::graph::codec::encode(graph).map_err(|source| StoreError::Encode {
        key: graph.key().to_string(),
        source,
    })
}

/// `value` as JSON (`pretty`: indented) for the file at `path`, which an encoding failure
/// names.
pub(crate) fn json_bytes<T: serde::Serialize + ?Sized>(
    path: &Path,
    value: &T,
    pretty: bool,
) -> Result<Vec<u8>, StoreError> {
    let bytes = if pretty {
        serde_json::to_vec_pretty(value)
    } else {
        serde_json::to_vec(value)
    };
    bytes.map_err(|e| StoreError::Io {
        action: "cannot encode",
        path: path.to_path_buf(),
        source: io::Error::other(e),
    })
}

/// Suffix of the note kept next to a quarantined file, saying why it was moved there.
pub const REASON_SUFFIX: &str = ".reason";

/// Most problems a reason (and the log line that repeats it) lists.
const REASONS_LISTED: usize = 20;
/// Longest problem a reason quotes, in characters.
const REASON_CHARS: usize = 200;
/// Longest reason note, in bytes (a backstop for reasons built elsewhere).
const REASON_BYTES: usize = 8 * 1024;

/// A list of problems as one bounded line: the first [`REASONS_LISTED`], each cut to
/// [`REASON_CHARS`] characters, joined by `; `, then how many more there were. A file with a
/// million bad lines must not become a megabyte log line or reason file.
pub fn capped_problems(problems: impl IntoIterator<Item = String>) -> String {
    let mut shown = Vec::new();
    let mut more = 0usize;
    for p in problems {
        if shown.len() == REASONS_LISTED {
            more += 1;
            continue;
        }
        let cut: String = p.chars().take(REASON_CHARS).collect();
        shown.push(if cut.len() < p.len() {
            format!("{cut}…")
        } else {
            cut
        });
    }
    let mut line = shown.join("; ");
    if more > 0 {
        line.push_str(&format!("; and {more} more"));
    }
    line
}

/// Records why `moved_to` was quarantined, in `<moved_to>.reason` (at most [`REASON_BYTES`]).
pub fn write_quarantine_reason(moved_to: &Path, reason: &str) -> Result<(), StoreError> {
    let mut note = moved_to.as_os_str().to_owned();
    note.push(REASON_SUFFIX);
    let mut end = reason.len().min(REASON_BYTES);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    write_atomic(Path::new(&note), format!("{}\n", &reason[..end]).as_bytes())
}

/// Every file in `quarantine/` with the reason it was moved there (when its note is
/// readable), sorted by name, for `state list`.
pub fn list_quarantined(dir: &StateDir) -> Vec<(PathBuf, Option<String>)> {
    let qdir = dir.quarantine_dir();
    let Ok(entries) = fs::read_dir(&qdir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, Option<String>)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with(REASON_SUFFIX))
        })
        .map(|p| {
            let mut note = p.as_os_str().to_owned();
            note.push(REASON_SUFFIX);
            let reason = read_optional(Path::new(&note))
                .ok()
                .flatten()
                .map(|r| r.trim().to_string());
            (p, reason)
        })
        .collect();
    out.sort();
    out
}

/// Moves an unreadable file to `moved_to` and notes `reason` beside it (never deleting it).
pub fn quarantine(path: &Path, moved_to: &Path, reason: &str) -> Result<(), StoreError> {
    move_file(path, moved_to)?;
    write_quarantine_reason(moved_to, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_creates_private_files_and_dirs() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let path = tmp.path().join("sub").join("f.md");
        write_atomic(&path, b"one")?;
        write_atomic(&path, b"two")?;
        assert_eq!(fs::read_to_string(&path)?, "two");
        let file_mode = fs::metadata(&path)?.permissions().mode() & 0o777;
        let dir_mode = fs::metadata(tmp.path().join("sub"))?.permissions().mode() & 0o777;
        assert_eq!((file_mode, dir_mode), (0o600, 0o700));
        let leftovers = fs::read_dir(tmp.path().join("sub"))?.count();
        assert_eq!(leftovers, 1, "no temp file may remain");
        Ok(())
    }
}
