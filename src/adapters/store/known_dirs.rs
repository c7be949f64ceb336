//! The directories this process has made (or found) under the state directory, so a
//! whole-file write does not ask the kernel for its directory again: `mkdir -p` of a
//! directory that is there is a failing `mkdir` per write (three per message on the
//! in-memory Telegram's transcripts alone). Process-wide and bounded ([`CAP`] entries, then
//! forgotten and learnt again). A directory removed behind the process's back is made again
//! by the caller when its temp file cannot be created ([`forget`], then made).
//!
//! It keeps paths only and makes no system call. Called by
//! [`super::files::write_atomic`], which makes the directories.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// Most directories remembered; past it the set starts again (one `mkdir` each).
pub const CAP: usize = 4096;

static KNOWN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Whether this process made (or found) `dir` already.
pub fn contains(dir: &Path) -> bool {
    KNOWN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .is_some_and(|k| k.contains(dir))
}

/// `dir` is there now (just made).
pub fn insert(dir: &Path) {
    let mut known = KNOWN.lock().unwrap_or_else(PoisonError::into_inner);
    let known = known.get_or_insert_with(HashSet::new);
    if known.len() >= CAP {
        known.clear();
    }
    known.insert(dir.to_path_buf());
}

/// Forgets `dir` (found removed): the next write makes it again.
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
    use std::path::Path;

    /// Known once inserted, not after being forgotten; the set stays within its cap.
    #[test]
    fn a_directory_is_known_until_forgotten() {
        let dir = Path::new("/nonexistent/known-dirs-test");
        assert!(!super::contains(dir));
        super::insert(dir);
        assert!(super::contains(dir));
        super::forget(dir);
        assert!(!super::contains(dir));
    }
}
