//! The in-memory backend's persisted transcripts: reading one whole (refusing what is not a
//! small regular UTF-8 file holding a transcript journal, or the older whole-file form; see
//! `journal`) and moving an unusable one aside, at the paths the state layout gives. Called by
//! [`MemoryTelegram::new`](super::MemoryTelegram::new), by `persist` for messages older than
//! the RAM window, and by `personad state history`.

use std::path::{Path, PathBuf};

use super::journal::{self, BadJournal, Folded};
use crate::adapters::store::{self, layout};

/// Largest playground transcript read at start; a bigger file is quarantined.
pub(crate) const MAX_TRANSCRIPT_BYTES: u64 = 64 * 1024 * 1024;

/// Why a transcript file is unusable (it is quarantined).
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unusable {
    #[error("not a regular file")]
    NotRegular,
    #[error("larger than {MAX_TRANSCRIPT_BYTES} bytes")]
    TooLarge,
    #[error("not valid UTF-8 (at byte {0})")]
    NotUtf8(usize),
    #[error(transparent)]
    Journal(#[from] BadJournal),
}

/// Reads one persisted transcript whole (every message, not only the window). The inner
/// `Err` is why the file is unusable: the caller quarantines it. The outer error is an I/O
/// failure that says nothing about the file.
pub(super) fn read_transcript(path: &Path) -> Result<Result<Folded, Unusable>, store::StoreError> {
    use std::io::Read;
    let io = |source| store::StoreError::Io {
        action: "cannot read",
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    if !meta.file_type().is_file() {
        return Ok(Err(Unusable::NotRegular));
    }
    if meta.len() > MAX_TRANSCRIPT_BYTES {
        return Ok(Err(Unusable::TooLarge));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TRANSCRIPT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(io)?;
    if bytes.len() as u64 > MAX_TRANSCRIPT_BYTES {
        return Ok(Err(Unusable::TooLarge));
    }
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => return Ok(Err(Unusable::NotUtf8(e.utf8_error().valid_up_to()))),
    };
    Ok(journal::fold(&text).map_err(Unusable::from))
}

/// Takes a transcript read at start into RAM: a file in the older whole-file form is
/// rewritten once as a journal (its header line), a torn last line is cut off (it was never
/// acknowledged: its append did not return) with a warning, and the log keeps its newest
/// `window` messages.
pub(super) fn adopt(
    path: &Path,
    folded: Folded,
    window: usize,
) -> Result<journal::ChatLog, store::StoreError> {
    let mut log = folded.log;
    if folded.whole_file {
        let bytes = journal::header(&log).map_err(|e| store::StoreError::Io {
            action: "cannot encode transcript",
            path: path.to_path_buf(),
            source: std::io::Error::other(e),
        })?;
        store::write_atomic(path, &bytes)?;
        log.disk.lines = 1;
        log.disk.superseded = 0;
        tracing::info!(event = "transcript_converted", file = %path.display(), "transcript in the older whole-file form rewritten as a journal");
    } else if folded.torn {
        store::appender::cut_to(path, folded.valid_len as u64)?;
        tracing::warn!(
            event = "transcript_torn_tail",
            file = %path.display(),
            kept_bytes = folded.valid_len,
            "the transcript's last line was cut short (the process died while appending): it is dropped"
        );
    }
    log.disk.created = true;
    log.trim(window);
    Ok(log)
}

/// Moves an unusable transcript to `<dir>/quarantine/transcript--<ms>--<file>`.
pub(super) fn quarantine_transcript(dir: &Path, path: &Path) -> Result<PathBuf, store::StoreError> {
    let file = path
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = layout::transcript_quarantine_path(dir, &file);
    store::move_file(path, &target)?;
    Ok(target)
}

/// Why a chat's recorded history could not be read (`personad state history`).
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("{}: unusable transcript: {reason}", path.display())]
    Unusable { path: PathBuf, reason: String },
}

/// A chat's recorded history (its chat and messages, oldest first) from a transcript file of
/// the in-memory backend, read only.
pub fn read_history(
    path: &Path,
) -> Result<(crate::core::model::Chat, Vec<crate::core::model::Message>), HistoryError> {
    let log = read_log(path)?;
    Ok((log.chat, log.messages.into()))
}

fn read_log(path: &Path) -> Result<super::journal::ChatLog, HistoryError> {
    match read_transcript(path)? {
        Ok(folded) => Ok(folded.log),
        Err(e) => Err(HistoryError::Unusable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}

/// A transcript file folded into its whole-file form (`chat`, `next_id`, every message under
/// `messages`, `sent_keys`, `blocked`, `read_upto`) as JSON, read only: what tests and tools
/// that look at a chat's saved state read, whichever form the file is in.
pub fn read_folded_json(path: &Path) -> Result<serde_json::Value, HistoryError> {
    let log = read_log(path)?;
    serde_json::to_value(&log).map_err(|e| HistoryError::Unusable {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}
