//! The directories this process has made (or found) under the state directory, so a
//! whole-file write does not ask the kernel for its directory again: `mkdir -p` of a
//! directory that is there is a failing `mkdir` per write (three per message on the
//! in-memory Telegram's transcripts alone). Process-wide and bounded ([`CAP`] entries, then
//! forgotten and learnt again). A directory removed behind the process's back is made again
//! by the caller when its temp file cannot be created (`forget`, then `ensure`).
//!
//! It keeps paths only; it writes nothing itself but the directory. Called by
//! [`super::files::write_atomic`].

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::StoreError;
use super::files::ensure_private_dir;

/// Most directories remembered; past it the set starts again (one `mkdir` each).
pub const CAP: usize = 4096;

static KNOWN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Makes `dir` (0700, with its parents) unless this process already did; returns whether it
/// was known (so a missing directory found later means someone removed it).
pub fn ensure(dir: &Path) -> Result<bool, StoreError> {
    if KNOWN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .is_some_and(|k| k.contains(dir))
    {
        return Ok(true);
    }
    ensure_private_dir(dir)?;
    let mut known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    let known = known.get_or_insert_with(HashSet::new);
    if known.len() >= CAP {
        known.clear();
    }
    known.insert(dir.to_path_buf());
    Ok(false)
}

/// Forgets `dir` (found removed): the next [`ensure`] makes it again.
pub fn forget(dir: &Path) {
    if let Some(known) = KNOWN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_mut()
    {
        known.remove(dir);
    }
}

#[cfg(test)]
mod tests {
    use super::super::files::write_atomic;

    /// The second write into a directory makes no `mkdir`; a directory removed meanwhile is
    /// made again and the write succeeds.
    #[test]
    fn a_directory_is_made_once_and_again_after_removal() -> Result<(), Box<dyn std::error::Error>>
    {
        let tmp = tempfile::tempdir()?;
        let dir = tmp.path().join("a/b");
        write_atomic(&dir.join("one"), b"1")?;
        // Known after the first write: the next ones make no directory.
        assert!(super::ensure(&dir)?, "a written directory is not known");
        std::fs::remove_dir_all(tmp.path().join("a"))?;
        write_atomic(&dir.join("again"), b"2")?;
        assert_eq!(std::fs::read(dir.join("again"))?, b"2");
        assert!(super::ensure(&dir)?);
        Ok(())
    }
}
