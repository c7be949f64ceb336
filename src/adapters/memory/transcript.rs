//! The in-memory backend's persisted transcripts: reading one at start (refusing what is not
//! a small regular UTF-8 file holding a transcript) and moving an unusable one aside, at the
//! paths the state layout gives. Called by [`MemoryTelegram::new`](super::MemoryTelegram::new).

use std::path::{Path, PathBuf};

use super::ChatLog;
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
    Json(#[from] serde_json::Error),
}

/// Reads one persisted transcript. The inner `Err` is why the file is unusable: the caller
/// quarantines it. The outer error is an I/O failure that says nothing about the file.
pub(super) fn read_transcript(path: &Path) -> Result<Result<ChatLog, Unusable>, store::StoreError> {
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
    Ok(serde_json::from_str::<ChatLog>(&text).map_err(Unusable::from))
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
    match read_transcript(path)? {
        Ok(log) => Ok((log.chat, log.messages)),
        Err(e) => Err(HistoryError::Unusable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        }),
    }
}
