//! Everything the daemon writes to disk goes through this module: crash-safe whole-file
//! replacement (temp file in the same directory, fsync, rename, fsync the directory), private
//! permissions (files 0600, directories 0700), and the layout of the state directory. On top
//! of that it owns the graph files: saving, deleting, loading them all at startup, moving
//! unreadable ones to `quarantine/` and removing stale temp files.
//!
//! All functions block; async callers run them through `tokio::task::spawn_blocking`. Other
//! modules must not write files themselves.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::core::agent_state::{self, AgentState};
use crate::core::graph::codec::{self, CodecError};
use crate::core::graph::{ConversationKey, TaskGraph};
use crate::core::model::ChatId;

/// Threads syncing the files of one batch side by side.
const SYNC_THREADS: usize = 16;

/// Prefix of temp files; anything starting with it is debris from an interrupted write.
const TEMP_PREFIX: &str = ".personad-tmp-";

/// A filesystem failure, naming the path involved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("could not encode graph {key}: {source}")]
    Encode {
        key: String,
        #[source]
        source: CodecError,
    },
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// Creates `dir` and its missing parents with mode 0700.
pub fn ensure_private_dir(dir: &Path) -> Result<(), StoreError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io_err("cannot create directory", dir))
}

/// Replaces `path` with `bytes` so that after a crash at any moment the file holds either
/// the old or the new content, never a mix. Creates the parent directory (0700) if needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    ensure_private_dir(dir)?;
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .permissions(fs::Permissions::from_mode(0o600))
        .tempfile_in(dir)
        .map_err(io_err("cannot create temp file in", dir))?;
    tmp.write_all(bytes)
        .map_err(io_err("cannot write temp file for", path))?;
    tmp.as_file()
        .sync_all()
        .map_err(io_err("cannot sync temp file for", path))?;
    tmp.persist(path).map_err(|e| StoreError::Io {
        action: "cannot rename temp file onto",
        path: path.to_path_buf(),
        source: e.error,
    })?;
    sync_dir(dir)
}

/// One write of a batch (see [`GraphStore::write_batch`]).
#[derive(Debug)]
pub enum Write {
    Graph(Box<TaskGraph>),
    DeleteGraph(ConversationKey),
    AgentState(String, Box<AgentState>),
}

/// Applies many whole-file replacements and removals with the same guarantee as
/// [`write_atomic`] for each file, but sharing the expensive part: every temp file is
/// written first, then synced (the first sync commits the others' data with it), renamed
/// over its target, and each directory involved is synced once at the end. Returns once
/// all of it is durable.
pub fn apply_batch(ops: Vec<(PathBuf, Option<Vec<u8>>)>) -> Result<(), StoreError> {
    let mut dirs: std::collections::BTreeSet<PathBuf> = std::collections::BTreeSet::new();
    let mut made: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut temps = Vec::new();
    for (path, bytes) in ops {
        let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
        match bytes {
            Some(bytes) => {
                if made.insert(dir.clone()) {
                    ensure_private_dir(&dir)?;
                }
                let mut tmp = tempfile::Builder::new()
                    .prefix(TEMP_PREFIX)
                    .permissions(fs::Permissions::from_mode(0o600))
                    .tempfile_in(&dir)
                    .map_err(io_err("cannot create temp file in", &dir))?;
                tmp.write_all(&bytes)
                    .map_err(io_err("cannot write temp file for", &path))?;
                temps.push((tmp, path));
            }
            None => match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io_err("cannot remove", &path)(e)),
            },
        }
        dirs.insert(dir);
    }
    // Syncs run side by side: the filesystem folds concurrent syncs into shared journal
    // commits, where one after another each would pay for its own.
    let per_thread = temps.len().div_ceil(SYNC_THREADS).max(1);
    std::thread::scope(|s| {
        let workers: Vec<_> = temps
            .chunks(per_thread)
            .map(|chunk| {
                s.spawn(move || {
                    for (tmp, path) in chunk {
                        tmp.as_file()
                            .sync_all()
                            .map_err(io_err("cannot sync temp file for", path))?;
                    }
                    Ok::<(), StoreError>(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join().unwrap_or_else(|_| {
                Err(StoreError::Io {
                    action: "sync thread failed for",
                    path: PathBuf::new(),
                    source: io::Error::other("panicked"),
                })
            })
        })
    })?;
    for (tmp, path) in temps {
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

/// Removes `path` (absent is fine) and makes the removal durable.
pub fn remove(path: &Path) -> Result<(), StoreError> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("cannot remove", path)(e)),
    }
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Moves `from` to `to` (same filesystem), durable in both directories.
pub fn move_file(from: &Path, to: &Path) -> Result<(), StoreError> {
    if let Some(dir) = to.parent() {
        ensure_private_dir(dir)?;
    }
    fs::rename(from, to).map_err(io_err("cannot move", from))?;
    if let Some(dir) = to.parent() {
        sync_dir(dir)?;
    }
    sync_dir(from.parent().unwrap_or(Path::new(".")))
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
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
        StoreError::Encode { .. } => None,
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
        Ok(f) => f,
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

fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, StoreError> {
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

fn optional(read: Result<String, StoreError>) -> Result<Option<String>, StoreError> {
    match read {
        Ok(t) => Ok(Some(t)),
        Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The file of one media record inside `dir` (generated or curated): `<unique_id>.json`,
/// the id escaped like agent names.
pub fn media_record_path(dir: &Path, unique_id: &str) -> PathBuf {
    dir.join(format!("{}.json", fs_name(unique_id)))
}

/// Saves one generated media record crash-safely under `state/media/`.
pub fn save_media_record(
    dir: &StateDir,
    record: &crate::core::media::MediaRecord,
) -> Result<(), StoreError> {
    let path = media_record_path(&dir.media_dir(), &record.unique_id);
    let bytes = serde_json::to_vec_pretty(record).map_err(|e| StoreError::Io {
        action: "cannot encode",
        path: path.clone(),
        source: io::Error::other(e),
    })?;
    write_atomic(&path, &bytes)
}

/// Turns an agent name into a directory name: ASCII letters, digits, `_` and `-` stay, every
/// other byte becomes `%XX`, so distinct names never share a directory.
pub fn fs_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

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

/// Telegram session files are left as they are: a session others could read may have been
/// copied, so `run` refuses it with its own message rather than having it fixed quietly.
fn is_session_file(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|n| n.to_string_lossy().starts_with("telegram.session"))
}

/// Name of the lock file in the state directory.
pub const LOCK_FILE: &str = "lock";

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
/// crash harness's child): an exclusive `flock` on `<state>/lock`, which holds the owner's
/// pid. The kernel drops it when the process ends, however it ends (kill -9 included), so a
/// stale lock file never blocks a restart. Held until dropped.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
}

impl StateLock {
    /// Takes the lock without waiting; a second process gets [`LockError::Held`] naming the
    /// holder's pid.
    pub fn acquire(dir: &StateDir) -> Result<StateLock, LockError> {
        ensure_private_dir(dir.root())?;
        let path = dir.root().join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(io_err("cannot open lock file", &path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
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
            Err(fs::TryLockError::Error(e)) => return Err(io_err("cannot lock", &path)(e).into()),
        }
        file.set_len(0)
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .and_then(|()| file.sync_all())
            .map_err(io_err("cannot write lock file", &path))?;
        Ok(StateLock { _file: file })
    }
}

/// The layout of the state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    pub fn new(root: impl Into<PathBuf>) -> StateDir {
        StateDir { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn graphs_dir(&self) -> PathBuf {
        self.root.join("graphs")
    }

    pub fn quarantine_dir(&self) -> PathBuf {
        self.root.join("quarantine")
    }

    /// Generated media description records (`media/<unique_id>.json`).
    pub fn media_dir(&self) -> PathBuf {
        self.root.join("media")
    }

    /// Per-agent private data (session file, playground transcripts).
    pub fn agent_dir(&self, agent: &str) -> PathBuf {
        self.root.join(fs_name(agent))
    }

    pub fn graph_path(&self, key: &ConversationKey) -> PathBuf {
        self.graphs_dir()
            .join(fs_name(&key.agent))
            .join(format!("{}.md", key.chat))
    }
}

/// Loads an agent's persisted safety state. A missing file is a fresh state; an unreadable
/// one is moved to `quarantine/` (returned so the caller can log it) and a fresh state used.
pub fn load_agent_state(
    dir: &StateDir,
    agent: &str,
) -> Result<(AgentState, Option<Quarantined>), StoreError> {
    let path = dir.agent_dir(agent).join(agent_state::FILE_NAME);
    let parsed = match read_optional(&path) {
        Ok(None) => return Ok((AgentState::default(), None)),
        Ok(Some(text)) => serde_json::from_str(&text).map_err(|e| e.to_string()),
        // Not a regular file, too big, a link, not UTF-8: moved aside like bad JSON.
        Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::InvalidData => {
            Err(source.to_string())
        }
        Err(e) => return Err(e),
    };
    match parsed {
        Ok(state) => Ok((state, None)),
        Err(e) => {
            let moved_to = dir.quarantine_dir().join(format!(
                "{}--{}--{}",
                fs_name(agent),
                jiff::Timestamp::now().as_millisecond(),
                agent_state::FILE_NAME
            ));
            move_file(&path, &moved_to)?;
            write_quarantine_reason(&moved_to, &e)?;
            Ok((
                AgentState::default(),
                Some(Quarantined {
                    original: path,
                    moved_to,
                    reason: e,
                }),
            ))
        }
    }
}

/// Every agent state file under the state directory, by agent directory name, for display.
pub fn list_agent_states(dir: &StateDir) -> Vec<(String, Result<AgentState, String>)> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir.root()) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path().join(agent_state::FILE_NAME);
        if fs::symlink_metadata(&path).is_err() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let state = read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()));
        out.push((name, state));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Saves an agent's safety state crash-safely.
pub fn save_agent_state(dir: &StateDir, agent: &str, state: &AgentState) -> Result<(), StoreError> {
    let path = dir.agent_dir(agent).join(agent_state::FILE_NAME);
    let bytes = serde_json::to_vec_pretty(state).map_err(|e| StoreError::Io {
        action: "cannot encode",
        path: path.clone(),
        source: io::Error::other(e),
    })?;
    write_atomic(&path, &bytes)
}

/// Suffix of the note kept next to a quarantined file, saying why it was moved there.
pub const REASON_SUFFIX: &str = ".reason";

/// Records why `moved_to` was quarantined, in `<moved_to>.reason`.
fn write_quarantine_reason(moved_to: &Path, reason: &str) -> Result<(), StoreError> {
    let mut note = moved_to.as_os_str().to_owned();
    note.push(REASON_SUFFIX);
    write_atomic(Path::new(&note), format!("{reason}\n").as_bytes())
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

/// A graph file that could not be read and was moved aside.
#[derive(Debug, Clone)]
pub struct Quarantined {
    pub original: PathBuf,
    pub moved_to: PathBuf,
    pub reason: String,
}

/// Everything found in the state directory at startup.
#[derive(Debug, Default)]
pub struct LoadedGraphs {
    pub graphs: Vec<TaskGraph>,
    pub quarantined: Vec<Quarantined>,
    pub stale_temp_files_removed: usize,
}

/// One graph file as read by `state list`/`show`: parsed, or the reason it is not.
#[derive(Debug)]
pub struct GraphFile {
    pub path: PathBuf,
    pub graph: Result<TaskGraph, String>,
}

/// Reads and writes graph files.
#[derive(Debug, Clone)]
pub struct GraphStore {
    dir: StateDir,
}

impl GraphStore {
    pub fn new(dir: StateDir) -> GraphStore {
        GraphStore { dir }
    }

    pub fn state_dir(&self) -> &StateDir {
        &self.dir
    }

    /// Writes the graph crash-safely.
    pub fn save(&self, graph: &TaskGraph) -> Result<(), StoreError> {
        let key = graph.key();
        let text = codec::encode(graph).map_err(|source| StoreError::Encode {
            key: key.to_string(),
            source,
        })?;
        write_atomic(&self.dir.graph_path(&key), text.as_bytes())
    }

    /// Carries out a batch of writes durably (see [`apply_batch`]).
    pub fn write_batch(&self, writes: Vec<Write>) -> Result<(), StoreError> {
        let mut ops = Vec::with_capacity(writes.len());
        for w in writes {
            ops.push(match w {
                Write::Graph(g) => {
                    let key = g.key();
                    let text = codec::encode(&g).map_err(|source| StoreError::Encode {
                        key: key.to_string(),
                        source,
                    })?;
                    (self.dir.graph_path(&key), Some(text.into_bytes()))
                }
                Write::DeleteGraph(key) => (self.dir.graph_path(&key), None),
                Write::AgentState(agent, state) => {
                    let path = self.dir.agent_dir(&agent).join(agent_state::FILE_NAME);
                    let bytes = serde_json::to_vec_pretty(&state).map_err(|e| StoreError::Io {
                        action: "cannot encode",
                        path: path.clone(),
                        source: io::Error::other(e),
                    })?;
                    (path, Some(bytes))
                }
            });
        }
        apply_batch(ops)
    }

    /// Writes the graph without fsync or rename: only for preparing benchmark and test
    /// state directories in bulk, never for the daemon's own saves.
    pub fn save_unsynced(&self, graph: &TaskGraph) -> Result<(), StoreError> {
        let key = graph.key();
        let text = codec::encode(graph).map_err(|source| StoreError::Encode {
            key: key.to_string(),
            source,
        })?;
        let path = self.dir.graph_path(&key);
        if let Some(dir) = path.parent() {
            ensure_private_dir(dir)?;
        }
        fs::write(&path, text).map_err(io_err("cannot write", &path))
    }

    /// Deletes the graph file of a conversation.
    pub fn delete(&self, key: &ConversationKey) -> Result<(), StoreError> {
        remove(&self.dir.graph_path(key))
    }

    /// Lists every graph file without changing anything (for `state list`/`show`).
    /// Files are read and decoded on a few threads side by side (startup with thousands
    /// of graphs); the result keeps the sorted path order.
    pub fn scan(&self) -> Result<Vec<GraphFile>, StoreError> {
        let paths = self.graph_files()?;
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4);
        let per_thread = paths.len().div_ceil(threads).max(64);
        let read = |path: &PathBuf| GraphFile {
            path: path.clone(),
            graph: read_file(path, GRAPH_FILE_CAP, Symlinks::Refuse)
                .and_then(|bytes| utf8(path, bytes))
                .map_err(|e| e.to_string())
                .and_then(|text| self.decode_at(path, &text)),
        };
        if paths.len() <= per_thread {
            return Ok(paths.iter().map(read).collect());
        }
        let out = std::thread::scope(|s| {
            let workers: Vec<_> = paths
                .chunks(per_thread)
                .map(|chunk| s.spawn(move || chunk.iter().map(read).collect::<Vec<_>>()))
                .collect();
            workers
                .into_iter()
                .map(|w| w.join())
                .collect::<Result<Vec<_>, _>>()
        });
        match out {
            Ok(parts) => Ok(parts.into_iter().flatten().collect()),
            // A decoder panic is a bug; read sequentially rather than lose the files.
            Err(_) => Ok(paths.iter().map(read).collect()),
        }
    }

    /// Startup load: removes stale temp files, parses every graph, and moves files that do
    /// not parse to `quarantine/` (never deleting them).
    pub fn load_all(&self) -> Result<LoadedGraphs, StoreError> {
        let mut loaded = LoadedGraphs {
            stale_temp_files_removed: self.remove_stale_temp_files()?,
            ..LoadedGraphs::default()
        };
        let mut seen = std::collections::HashSet::new();
        for file in self.scan()? {
            let verdict = file.graph.and_then(|g| {
                if seen.insert(g.key()) {
                    Ok(g)
                } else {
                    Err(format!("a second file for conversation {}", g.key()))
                }
            });
            match verdict {
                Ok(g) => loaded.graphs.push(g),
                Err(reason) => {
                    let moved_to = self.quarantine(&file.path)?;
                    write_quarantine_reason(&moved_to, &reason)?;
                    loaded.quarantined.push(Quarantined {
                        original: file.path,
                        moved_to,
                        reason,
                    });
                }
            }
        }
        Ok(loaded)
    }

    /// Removes every chat's graph file of one agent's chat (used by `state clear`).
    pub fn clear(&self, agent: Option<&str>, chat: Option<ChatId>) -> Result<usize, StoreError> {
        let mut removed = 0;
        for file in self.scan()? {
            let matches = match &file.graph {
                Ok(g) => agent.is_none_or(|a| a == g.agent) && chat.is_none_or(|c| c == g.chat.id),
                // Unreadable files are only cleared by a clear-everything request.
                Err(_) => agent.is_none() && chat.is_none(),
            };
            if matches {
                remove(&file.path)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    fn decode_at(&self, path: &Path, text: &str) -> Result<TaskGraph, String> {
        let graph = codec::decode(text).map_err(|e| e.to_string())?;
        let expected = self.dir.graph_path(&graph.key());
        if expected != path {
            return Err(format!(
                "it describes conversation {} whose file is {}",
                graph.key(),
                expected.display()
            ));
        }
        Ok(graph)
    }

    fn quarantine(&self, path: &Path) -> Result<PathBuf, StoreError> {
        let agent_dir = path
            .parent()
            .and_then(Path::file_name)
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let file = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stamp = jiff::Timestamp::now().as_millisecond();
        let target = self
            .dir
            .quarantine_dir()
            .join(format!("{agent_dir}--{stamp}--{file}"));
        move_file(path, &target)?;
        Ok(target)
    }

    fn agent_dirs(&self) -> Result<Vec<PathBuf>, StoreError> {
        let root = self.dir.graphs_dir();
        let entries = match fs::read_dir(&root) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_err("cannot list", &root)(e)),
        };
        let mut dirs = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io_err("cannot list", &root))?;
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
        dirs.sort();
        Ok(dirs)
    }

    fn graph_files(&self) -> Result<Vec<PathBuf>, StoreError> {
        let mut files = Vec::new();
        for dir in self.agent_dirs()? {
            for entry in fs::read_dir(&dir).map_err(io_err("cannot list", &dir))? {
                let entry = entry.map_err(io_err("cannot list", &dir))?;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                if name.ends_with(".md") && !name.starts_with('.') {
                    files.push(entry.path());
                }
            }
        }
        files.sort();
        Ok(files)
    }

    fn remove_stale_temp_files(&self) -> Result<usize, StoreError> {
        let mut removed = 0;
        let mut dirs = self.agent_dirs()?;
        dirs.push(self.dir.graphs_dir());
        for dir in dirs {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
                    remove(&entry.path())?;
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_name_keeps_distinct_names_distinct() {
        assert_eq!(fs_name("Mary"), "Mary");
        assert_eq!(fs_name("a/b"), "a%2Fb");
        assert_ne!(fs_name("a b"), fs_name("a_b"));
        assert_eq!(fs_name(".."), "%2E%2E");
    }

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
