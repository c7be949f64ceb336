//! The graph pack: an agent's graph files in one file, `<agent>/graphs.pack`, written after a
//! full checkpoint (a clean stop, `state clear`) so that the next start reads one file
//! sequentially instead of one file per conversation (10,000 idle graphs are 10,000 random
//! reads on a cold disk).
//!
//! The Markdown files stay the truth and a pack only stands in for them: it holds their exact
//! bytes, and it is used only while the agent's graph folder holds exactly the files it names
//! (a file added or removed by hand makes it stale: the files are read and the pack removed).
//! Whatever writes or removes a graph file through the store removes the agent's pack first,
//! durably ([`Packs::remove`]), so a pack is never older than the files it stands for. Each
//! entry is checksummed; a pack that does not read whole is ignored, never trusted in part.
//! A file edited in place by hand while the daemon is stopped is not seen while the pack is
//! there (docs/state-format.md: remove the pack after such an edit).
//!
//! Format: a header line `personad-graph-pack 1 <entries>`, then per file a line
//! `<crc32 as 8 hex digits> <length> <file name>`, the file's bytes and a newline. It is not
//! Markdown: it is a cache the daemon reads; the files beside it are what people read.
//!
//! Callers: `graphs` (read at start, written after a full checkpoint, removed before its own
//! writes of graph files) and `journaled` (removed before a checkpoint writes a graph file).
//! It decides nothing about graphs and parses none.

use std::collections::HashSet;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::StoreError;
use super::files::{GRAPH_FILE_CAP, Symlinks, io_err, read_file, sync_dir, unlink};

/// The first word of a pack's header.
const MAGIC: &str = "personad-graph-pack";
/// The format version this build writes and reads.
const VERSION: u32 = 1;
/// A pack is at most this large (about 1 GiB): more than any agent's graphs.
const PACK_CAP: u64 = 1 << 30;

/// Why a pack was not used.
#[derive(Debug, thiserror::Error)]
pub enum PackProblem {
    #[error("its header is not a graph pack's")]
    Header,
    #[error("entry {0} is cut short or malformed")]
    Entry(usize),
    #[error("entry {0} fails its checksum")]
    Checksum(usize),
    #[error("it holds {packed} files and the graph folder {on_disk} (or other names)")]
    Files { packed: usize, on_disk: usize },
    #[error(transparent)]
    Read(#[from] StoreError),
}

/// A pack read and checked against its folder: each entry's file and text.
#[derive(Debug)]
pub(crate) struct Pack {
    bytes: Vec<u8>,
    entries: Vec<(PathBuf, Range<usize>)>,
}

impl Pack {
    /// Each entry's file (in the graph folder) and its text.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.entries.iter().map(|(path, range)| {
            let text = self
                .bytes
                .get(range.clone())
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default();
            (path.as_path(), text)
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

fn checksum(name: &str, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(name.as_bytes());
    h.update(b" ");
    h.update(bytes);
    h.finalize()
}

/// The entries of pack `bytes`: each file name and the range of its text (checked UTF-8).
pub fn parse(bytes: &[u8]) -> Result<Vec<(String, Range<usize>)>, PackProblem> {
    let line = |at: usize| -> Option<(&str, usize)> {
        let rest = bytes.get(at..)?;
        let end = rest.iter().position(|b| *b == b'\n')?;
        Some((std::str::from_utf8(&rest[..end]).ok()?, at + end + 1))
    };
    let (header, mut at) = line(0).ok_or(PackProblem::Header)?;
    let count = match header.split(' ').collect::<Vec<_>>()[..] {
        [MAGIC, version, count] if version.parse() == Ok(VERSION) => {
            count.parse::<usize>().map_err(|_| PackProblem::Header)?
        }
        _ => return Err(PackProblem::Header),
    };
    let mut out = Vec::with_capacity(count.min(1 << 20));
    for n in 1..=count {
        let (head, start) = line(at).ok_or(PackProblem::Entry(n))?;
        let mut parts = head.splitn(3, ' ');
        let (Some(crc), Some(len), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(PackProblem::Entry(n));
        };
        let crc = u32::from_str_radix(crc, 16).map_err(|_| PackProblem::Entry(n))?;
        let len: usize = len.parse().map_err(|_| PackProblem::Entry(n))?;
        let end = start.checked_add(len).ok_or(PackProblem::Entry(n))?;
        let text = bytes.get(start..end).ok_or(PackProblem::Entry(n))?;
        if !valid_name(name) || bytes.get(end) != Some(&b'\n') {
            return Err(PackProblem::Entry(n));
        }
        if checksum(name, text) != crc {
            return Err(PackProblem::Checksum(n));
        }
        std::str::from_utf8(text).map_err(|_| PackProblem::Entry(n))?;
        out.push((name.to_string(), start..end));
        at = end + 1;
    }
    if at != bytes.len() {
        return Err(PackProblem::Entry(count + 1));
    }
    Ok(out)
}

/// A pack's header line for `entries` files.
fn header(entries: usize) -> String {
    format!("{MAGIC} {VERSION} {entries}\n")
}

/// The line before a file's bytes in a pack.
fn entry_line(name: &str, bytes: &[u8]) -> String {
    format!("{:08x} {} {name}\n", checksum(name, bytes), bytes.len())
}

/// A pack of `files` (name, bytes) in memory: what [`write`] streams to disk.
pub fn encode(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = header(files.len()).into_bytes();
    for (name, bytes) in files {
        out.extend_from_slice(entry_line(name, bytes).as_bytes());
        out.extend_from_slice(bytes);
        out.push(b'\n');
    }
    out
}

/// A graph file's name: `<chat>.md`, nothing that leaves the folder.
fn valid_name(name: &str) -> bool {
    name.ends_with(".md") && !name.starts_with('.') && !name.contains(['/', '\0'])
}

/// Reads the pack at `path` for the graph folder `dir`, which holds `files` (sorted). `None`:
/// there is no pack. A pack that does not read, or names other files than the folder holds,
/// is a problem (the caller reads the files and removes the pack).
pub(crate) fn read(
    path: &Path,
    dir: &Path,
    files: &[PathBuf],
) -> Result<Option<Pack>, PackProblem> {
    let bytes = match read_file(path, PACK_CAP, Symlinks::Refuse) {
        Ok(b) => b,
        Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let mut entries: Vec<(PathBuf, Range<usize>)> = parse(&bytes)?
        .into_iter()
        .map(|(name, range)| (dir.join(name), range))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let same = entries.len() == files.len() && entries.iter().zip(files).all(|(e, f)| e.0 == *f);
    if !same {
        return Err(PackProblem::Files {
            packed: entries.len(),
            on_disk: files.len(),
        });
    }
    Ok(Some(Pack { bytes, entries }))
}

/// Writes the pack at `path` of `files` (a graph folder's, sorted), each read as it is now:
/// replaced whole (temp file, sync, rename), streamed, never whole in memory.
pub(crate) fn write(path: &Path, files: &[PathBuf]) -> Result<(), StoreError> {
    super::files::write_atomic_with(path, |out| {
        let put = |out: &mut dyn std::io::Write, bytes: &[u8]| {
            out.write_all(bytes)
                .map_err(io_err("cannot write temp file for", path))
        };
        put(out, header(files.len()).as_bytes())?;
        for file in files {
            let name = file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let bytes = read_file(file, GRAPH_FILE_CAP, Symlinks::Refuse)?;
            put(out, entry_line(&name, &bytes).as_bytes())?;
            put(out, &bytes)?;
            put(out, b"\n")?;
        }
        Ok(())
    })
}

/// Which packs this process knows are gone: a pack is removed (durably) before the first
/// write of its agent's graph files, once per process and pack.
#[derive(Debug, Default)]
pub(crate) struct Packs {
    gone: Mutex<HashSet<PathBuf>>,
}

impl Packs {
    /// Removes the pack at `path` and syncs its directory, unless this process knows it is
    /// gone. Called before a graph file of its agent is written or removed: a crash after
    /// that write can never find the pack standing for older files.
    pub(crate) fn remove(&self, path: &Path) -> Result<(), StoreError> {
        let mut gone = self.gone.lock().unwrap_or_else(PoisonError::into_inner);
        if gone.contains(path) {
            return Ok(());
        }
        if unlink(path, "cannot remove graph pack")? {
            sync_dir(path.parent().unwrap_or(Path::new(".")))?;
        }
        gone.insert(path.to_path_buf());
        Ok(())
    }

    /// Whether the pack at `path` is due: this process removed it, or there is none.
    pub(crate) fn due(&self, path: &Path) -> bool {
        self.gone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(path)
            || !path.exists()
    }

    /// The pack at `path` was written: it stands for its files again.
    pub(crate) fn written(&self, path: &Path) {
        self.gone
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn packed(files: &[(&str, &str)]) -> Vec<u8> {
        let files: Vec<(&str, &[u8])> = files.iter().map(|(n, t)| (*n, t.as_bytes())).collect();
        encode(&files)
    }

    #[test]
    fn a_pack_reads_back_each_file_exactly() -> TestResult {
        let bytes = packed(&[("1.md", "# one\n\nline\n"), ("-100.md", "")]);
        let entries = parse(&bytes)?;
        let texts: Vec<(&str, &[u8])> = entries
            .iter()
            .map(|(n, r)| (n.as_str(), &bytes[r.clone()]))
            .collect();
        assert_eq!(
            texts,
            vec![("1.md", &b"# one\n\nline\n"[..]), ("-100.md", &b""[..])]
        );
        Ok(())
    }

    #[test]
    fn the_committed_fuzz_seed_is_a_valid_pack() -> TestResult {
        let seed = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/seeds/graph_pack/valid.pack");
        let names: Vec<String> = parse(&std::fs::read(seed)?)?
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["12.md", "-100500.md", "7.md"]);
        Ok(())
    }

    #[test]
    fn a_cut_or_flipped_pack_is_refused_whole() {
        let bytes = packed(&[("1.md", "one"), ("2.md", "two")]);
        for cut in 0..bytes.len() {
            assert!(parse(&bytes[..cut]).is_err(), "cut at {cut} was accepted");
        }
        let mut flipped = bytes.clone();
        let at = flipped.len() - 2;
        flipped[at] ^= 0x01;
        assert!(matches!(parse(&flipped), Err(PackProblem::Checksum(2))));
        let mut extra = bytes;
        extra.extend_from_slice(b"x");
        assert!(parse(&extra).is_err());
        let escape = packed(&[("../x.md", "one")]);
        assert!(matches!(parse(&escape), Err(PackProblem::Entry(1))));
    }
}
