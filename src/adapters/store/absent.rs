//! Which memory files are known to be absent, so planning does not ask the kernel for the
//! same missing files at every message (a failing `open` or `stat` of the persona's facts,
//! the person's, the chat's notes, plans and summaries: ten per plan before this cache).
//!
//! Absence is remembered per directory, together with the directory's stamp (modification
//! and change times, inode) taken *before* the failing read. Creating, removing or renaming
//! a file in a directory changes its stamp, so the directory is stat'ed again at most once
//! per [`RECHECK`] on the project's clock, and a changed stamp forgets every absence
//! remembered in it: a memory file made by hand is seen within a second. The store's own
//! writes forget the file's absence at once ([`Absent::written`]). A directory found absent
//! makes every file in it absent without a read (the memory of a chat nobody wrote about).
//! [`Absent::known`] answers from what is remembered alone, with no system call, so a plan
//! whose memory files are all known absent skips the blocking pool. Bounded: at most
//! [`NAMES_PER_DIR`] names per directory and [`DIRS`] directories, then started again.
//!
//! It reads directory metadata only and never a file; it decides nothing about content.
//! Called by [`super::facts::FileFacts`] around each read and write of a memory file.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use jiff::Timestamp;

use crate::ports::clock::SharedClock;

/// Longest a hand-made file in a directory stays unseen: the directory is stat'ed again
/// when its last check is this old.
pub const RECHECK: jiff::SignedDuration = jiff::SignedDuration::from_secs(1);
/// Most absent names remembered per directory.
pub const NAMES_PER_DIR: usize = 65_536;
/// Most directories remembered.
pub const DIRS: usize = 1024;

/// What identifies one version of a directory's listing (`None`: the directory is absent).
type DirStamp = Option<((i64, i64), (i64, i64), (u64, u64))>;

fn dir_stamp(dir: &Path) -> DirStamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(dir).ok()?;
    Some((
        (m.mtime(), m.mtime_nsec()),
        (m.ctime(), m.ctime_nsec()),
        (m.dev(), m.ino()),
    ))
}

struct Dir {
    stamp: DirStamp,
    checked: Timestamp,
    /// Bumped whenever `names` is cleared: an absence seen under an older generation is
    /// not recorded.
    generation: u64,
    names: HashSet<OsString>,
}

/// What the cache knows of one path before it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// Known absent: do not read.
    Absent,
    /// Not known: read it, and report an absence with [`Absent::absent`] and this token.
    Read(u64),
}

/// The absent memory files of one store.
pub struct Absent {
    clock: SharedClock,
    dirs: Mutex<HashMap<PathBuf, Dir>>,
    /// Reads that found a file absent on disk (the cache's misses), for tests and benches.
    misses: AtomicU64,
}

impl Absent {
    pub fn new(clock: SharedClock) -> Absent {
        Absent {
            clock,
            dirs: Mutex::default(),
            misses: AtomicU64::new(0),
        }
    }

    /// Absent files found on disk so far (each a failing system call a cache hit saves).
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Whether `path` is known absent; re-stats its directory when the last check is
    /// [`RECHECK`] old (or it was never checked), forgetting the directory's absences when it
    /// changed.
    pub fn lookup(&self, path: &Path) -> Lookup {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Lookup::Read(0);
        };
        let now = self.clock.now();
        let mut dirs = self.dirs.lock().unwrap_or_else(PoisonError::into_inner);
        if !dirs.contains_key(dir) && dirs.len() >= DIRS {
            dirs.clear();
        }
        let entry = dirs.entry(dir.to_path_buf()).or_insert_with(|| Dir {
            stamp: dir_stamp(dir),
            checked: now,
            generation: 0,
            names: HashSet::new(),
        });
        let since = now.duration_since(entry.checked);
        if since >= RECHECK || since.is_negative() {
            let stamp = dir_stamp(dir);
            if stamp != entry.stamp {
                entry.stamp = stamp;
                entry.names.clear();
                entry.generation += 1;
            }
            entry.checked = now;
        }
        // An absent directory holds no file: nothing in it is read until it appears.
        if entry.stamp.is_none() || entry.names.contains(name) {
            Lookup::Absent
        } else {
            Lookup::Read(entry.generation)
        }
    }

    /// Whether every one of `paths` is known absent now, from what is remembered alone: its
    /// directory was checked less than [`RECHECK`] ago and is absent or found the file
    /// absent. Makes no system call (`false` also when a check is due: [`Absent::lookup`]).
    pub fn known(&self, paths: &[PathBuf]) -> bool {
        let now = self.clock.now();
        let dirs = self.dirs.lock().unwrap_or_else(PoisonError::into_inner);
        paths.iter().all(|path| {
            let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
                return false;
            };
            dirs.get(dir).is_some_and(|entry| {
                let since = now.duration_since(entry.checked);
                !since.is_negative()
                    && since < RECHECK
                    && (entry.stamp.is_none() || entry.names.contains(name))
            })
        })
    }

    /// `path` was read and is not there: remembered, unless its directory changed since the
    /// lookup that returned `token`.
    pub fn absent(&self, path: &Path, token: Lookup) {
        self.misses.fetch_add(1, Ordering::Relaxed);
        let (Some(dir), Some(name), Lookup::Read(generation)) =
            (path.parent(), path.file_name(), token)
        else {
            return;
        };
        let mut dirs = self.dirs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = dirs.get_mut(dir)
            && entry.generation == generation
        {
            if entry.names.len() >= NAMES_PER_DIR {
                entry.names.clear();
            }
            entry.names.insert(name.to_os_string());
        }
    }

    /// The store wrote (or moved a file to) `path`: it is no longer absent.
    pub fn written(&self, path: &Path) {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return;
        };
        let mut dirs = self.dirs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = dirs.get_mut(dir) {
            if entry.stamp.is_none() {
                // The directory was made for it: looked at again on the next lookup.
                dirs.remove(dir);
            } else {
                entry.names.remove(name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use super::super::facts::FileFacts;
    use super::super::layout::StateDir;
    use crate::core::facts::{FactScope, FactWrite, Source};
    use crate::core::model::ChatId;
    use crate::core::summaries::SummaryFile;
    use crate::ports::clock::VirtualClock;
    use crate::ports::facts::FactStore;

    type Res = Result<(), Box<dyn std::error::Error>>;

    const CHAT: ChatId = ChatId(42);
    const PERSON: i64 = 42;

    fn store(tmp: &Path) -> (FileFacts, VirtualClock) {
        let clock = VirtualClock::new(jiff::Timestamp::UNIX_EPOCH, false);
        let facts = FileFacts::new(StateDir::new(tmp)).with_absent_cache(Arc::new(clock.clone()));
        (facts, clock)
    }

    /// What one plan of a direct chat reads of memory (`runtime::handlers::received`).
    fn plan_reads(facts: &FileFacts) -> Result<String, Box<dyn std::error::Error>> {
        let mut seen = facts.summaries("Tess", CHAT)?.prompt_text();
        for scope in [
            FactScope::Chat(CHAT),
            FactScope::Intentions,
            FactScope::Plans(CHAT),
            FactScope::Person(PERSON),
        ] {
            seen.push_str(&facts.read("Tess", scope)?.prompt_lines(4096));
        }
        seen.push_str(&facts.persona_text("Tess")?);
        Ok(seen)
    }

    fn remember(facts: &FileFacts, content: &str) -> Res {
        let source = Source {
            task: "remember-1".into(),
            name: Some("Alice".into()),
            chat: CHAT,
            message: None,
            at: jiff::Timestamp::UNIX_EPOCH,
        };
        let write = FactWrite {
            id: None,
            content: content.into(),
        };
        facts
            .apply("Tess", FactScope::Person(PERSON), &write, &source)?
            .map_err(|r| format!("{r:?}"))?;
        Ok(())
    }

    /// After the first plan of a chat, more plans (the clock moving on, as messages do)
    /// ask the disk for no absent memory file: the six misses of the first plan are all.
    /// Where the memory directories are absent, even the first plan opens no file.
    #[test]
    fn plans_after_the_first_ask_the_disk_for_no_absent_memory_file() -> Res {
        let tmp = tempfile::tempdir()?;
        let (facts, clock) = store(tmp.path());
        plan_reads(&facts)?;
        assert_eq!(facts.absent_misses(), 0, "no directory, no file opened");
        let dir = StateDir::new(tmp.path());
        for scope in [
            FactScope::Chat(CHAT),
            FactScope::Plans(CHAT),
            FactScope::Person(1),
        ] {
            std::fs::create_dir_all(dir.facts_path("Tess", scope).parent().ok_or("root")?)?;
        }
        std::fs::create_dir_all(dir.summaries_path("Tess", CHAT).parent().ok_or("root")?)?;
        clock.advance(super::RECHECK.unsigned_abs());
        plan_reads(&facts)?;
        let first = facts.absent_misses();
        assert_eq!(first, 6, "the first plan's absent files");
        for _ in 0..50 {
            clock.advance(Duration::from_millis(300));
            plan_reads(&facts)?;
        }
        assert_eq!(facts.absent_misses(), first, "absent files asked again");
        Ok(())
    }

    /// A memory file made by hand (an owner's `persona.md`, a person's facts) is seen
    /// within [`RECHECK`] of the project's clock.
    #[test]
    fn a_memory_file_made_by_hand_is_seen_within_a_second() -> Res {
        let tmp = tempfile::tempdir()?;
        let (facts, clock) = store(tmp.path());
        let dir = StateDir::new(tmp.path());
        // The person's directory exists (another person's facts), so its stamp is a
        // directory's, not "absent".
        std::fs::create_dir_all(
            dir.facts_path("Tess", FactScope::Person(1))
                .parent()
                .ok_or("no parent")?,
        )?;
        plan_reads(&facts)?;
        std::fs::write(
            dir.facts_path("Tess", FactScope::Persona),
            "I keep bees on the roof.\n",
        )?;
        std::fs::write(
            dir.facts_path("Tess", FactScope::Person(PERSON)),
            "# Facts about Alice\n\n## fact-cello\n\nPlays the cello.\n",
        )?;
        clock.advance(Duration::from_millis(999));
        plan_reads(&facts)?;
        clock.advance(Duration::from_millis(1));
        let seen = plan_reads(&facts)?;
        assert!(
            seen.contains("bees"),
            "a hand-made persona.md unseen: {seen}"
        );
        assert!(
            seen.contains("cello"),
            "a hand-made facts file unseen: {seen}"
        );
        Ok(())
    }

    /// The store's own writes are read back at once, on the same instant of the clock.
    #[test]
    fn a_write_by_the_store_is_read_back_at_once() -> Res {
        let tmp = tempfile::tempdir()?;
        let (facts, _clock) = store(tmp.path());
        plan_reads(&facts)?;
        remember(&facts, "likes tea")?;
        let mut summaries = SummaryFile::parse(
            "# Summaries\n\n## messages 1–2\n\nThey met.\n\n<!-- watermark=2 -->\n",
        )?;
        summaries.watermark = Some(crate::core::model::MessageId(2));
        facts.save_summaries("Tess", CHAT, &summaries)?;
        let seen = plan_reads(&facts)?;
        assert!(
            seen.contains("likes tea"),
            "the store's fact unseen: {seen}"
        );
        assert!(
            seen.contains("They met"),
            "the store's summary unseen: {seen}"
        );
        Ok(())
    }

    /// A file made by hand just before the store writes it is kept: a fact is added to it,
    /// and a summary saved over what the cache took for absent is refused.
    #[test]
    fn a_file_made_by_hand_just_before_a_write_is_never_replaced() -> Res {
        let tmp = tempfile::tempdir()?;
        let (facts, _clock) = store(tmp.path());
        let dir = StateDir::new(tmp.path());
        plan_reads(&facts)?;
        let person = dir.facts_path("Tess", FactScope::Person(PERSON));
        let summaries = dir.summaries_path("Tess", CHAT);
        for file in [&person, &summaries] {
            std::fs::create_dir_all(file.parent().ok_or("no parent")?)?;
        }
        std::fs::write(
            &person,
            "# Facts about Alice\n\n## fact-cello\n\nPlays the cello.\n",
        )?;
        let summaries = dir.summaries_path("Tess", CHAT);
        std::fs::write(
            &summaries,
            "# Summaries\n\n## messages 1–2\n\nBy hand.\n\n<!-- watermark=2 -->\n",
        )?;
        remember(&facts, "likes tea")?;
        let seen = plan_reads(&facts)?;
        assert!(
            seen.contains("cello") && seen.contains("likes tea"),
            "{seen}"
        );
        let saved = facts.save_summaries("Tess", CHAT, &SummaryFile::default());
        assert!(saved.is_err(), "a hand-made summaries file was overwritten");
        assert!(std::fs::read_to_string(&summaries)?.contains("By hand."));
        Ok(())
    }
}
