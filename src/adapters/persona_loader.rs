//! Loads the agents directory: lists `*.md` persona files, reads each through the safe reader
//! and hands the text to `core::persona` to parse and validate. It owns the directory scan
//! and its errors, nothing of the persona format. `check`, `run`, `chat` and reloads call it.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::adapters::store::{self, Refused, Symlinks};
use crate::core::persona::{
    LoadReport, MAX_FILE_BYTES, PersonaEntry, Problem, ReadError, ReadText, Severity, line_at_byte,
    parse_persona_inner, parse_persona_with, show, sort_problems,
};

/// The safe reader persona and role-prompt files are read through.
struct SafeFiles;

impl ReadText for SafeFiles {
    fn read_text(&self, path: &Path) -> Result<String, ReadError> {
        read_capped(path)
    }
}

/// Validates one persona file whose text has already been read, reading its role prompts
/// from `prompt_dirs` (in order) through the safe reader: see
/// `core::persona::parse_persona_with`.
pub fn parse_persona(path: &Path, source: &str, prompt_dirs: &[PathBuf]) -> PersonaEntry {
    let mut entry = parse_persona_with(path, source, prompt_dirs, &SafeFiles);
    with_album(&mut entry);
    entry
}

/// Reads the album of a usable entry's persona (`adapters::album`) into it: its problems
/// join the file's (an error makes the entry unusable), and its content joins the
/// fingerprint, so a reload sees an album that changed.
fn with_album(entry: &mut PersonaEntry) {
    let Some(persona) = entry.persona.as_mut() else {
        return;
    };
    let (album, problems) = crate::adapters::album::load_album(&entry.path, persona);
    if !album.is_empty() {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        entry.fingerprint.hash(&mut h);
        for item in &album.items {
            (&item.id, &item.content_hash, &item.description).hash(&mut h);
        }
        entry.fingerprint = h.finish();
    }
    persona.album = std::sync::Arc::new(album);
    if problems.iter().any(Problem::is_error) {
        entry.persona = None;
    }
    entry.problems.extend(problems);
    sort_problems(&mut entry.problems);
}

/// Reads a whole file as UTF-8 text through [`store::read_file`]: symlinks
/// are followed (operators link persona files), but the target must be a
/// regular file (a FIFO, a device or a directory named `*.md` is refused
/// without blocking) of at most [`MAX_FILE_BYTES`] (checked from metadata
/// first, and enforced while reading in case the file grows).
fn read_capped(path: &Path) -> Result<String, ReadError> {
    let buf =
        store::read_file(path, MAX_FILE_BYTES, Symlinks::Follow).map_err(
            |e| match store::refusal(&e) {
                Some(Refused::TooLarge { size, .. }) => ReadError::TooLarge(*size),
                Some(Refused::Grew { cap }) => ReadError::TooLarge(cap.saturating_add(1)),
                _ => match e {
                    store::StoreError::Io { source, .. } => ReadError::Io(source),
                    other => ReadError::Io(io::Error::other(other.to_string())),
                },
            },
        )?;
    String::from_utf8(buf).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let line = line_at_byte(e.as_bytes(), offset);
        ReadError::InvalidUtf8 { line, offset }
    })
}

/// The agents directory itself could not be listed. Problems with single
/// files are reported as [`Problem`]s instead.
///
/// The messages include the underlying I/O error, so it is not exposed again
/// as `source()`.
#[derive(Debug, thiserror::Error)]
pub enum PersonaDirError {
    /// The directory does not exist.
    #[error("agents directory `{}` does not exist: {error}", path.display())]
    Missing {
        /// The agents directory as given.
        path: PathBuf,
        /// The error from the filesystem.
        error: io::Error,
    },
    /// The path exists but is not a directory.
    #[error("agents directory `{}` is not a directory", path.display())]
    NotADirectory {
        /// The agents directory as given.
        path: PathBuf,
    },
    /// The directory exists but could not be read.
    #[error("cannot read agents directory `{}`: {error}", path.display())]
    Unreadable {
        /// The agents directory as given.
        path: PathBuf,
        /// The error from the filesystem.
        error: io::Error,
    },
}

/// Reads and validates every persona file directly inside `agents_dir`.
///
/// Every entry whose name ends in `.md` and does not start with `.` is
/// read through [`store::read_file`] (links followed); one that is not a
/// regular file (a FIFO, a device, a directory named `*.md`) or is over
/// [`MAX_FILE_BYTES`] becomes an unusable entry with a problem naming it,
/// without blocking. Sub-directories are not searched. The
/// entries are sorted by file name. Role prompts are looked up in
/// `prompt_dirs`, in order (the first directory containing `<name>.md`
/// wins). Besides the per-file checks of [`parse_persona`], this reports a
/// file whose agent name (compared ignoring case) is already used by an
/// earlier file, which makes the later file unusable.
///
/// Fails only when `agents_dir` itself cannot be listed.
pub fn load_dir(agents_dir: &Path, prompt_dirs: &[PathBuf]) -> Result<LoadReport, PersonaDirError> {
    load_dir_keeping(agents_dir, prompt_dirs, &HashMap::new())
}

/// [`load_dir`] for a reload: `keep` maps a running agent's lower-cased name to the file it
/// runs from. When two files claim one name, that file keeps it (a copy that sorts earlier,
/// or another running agent's file edited to the name, is the one reported and ignored);
/// when that file is gone (renamed), a file no other running agent runs from takes the name
/// before one that another agent runs from.
pub fn load_dir_keeping(
    agents_dir: &Path,
    prompt_dirs: &[PathBuf],
    keep: &HashMap<String, PathBuf>,
) -> Result<LoadReport, PersonaDirError> {
    let meta = fs::metadata(agents_dir).map_err(|error| {
        if error.kind() == io::ErrorKind::NotFound {
            PersonaDirError::Missing {
                path: agents_dir.to_path_buf(),
                error,
            }
        } else {
            PersonaDirError::Unreadable {
                path: agents_dir.to_path_buf(),
                error,
            }
        }
    })?;
    if !meta.is_dir() {
        return Err(PersonaDirError::NotADirectory {
            path: agents_dir.to_path_buf(),
        });
    }
    let unreadable = |error| PersonaDirError::Unreadable {
        path: agents_dir.to_path_buf(),
        error,
    };
    let mut files = Vec::new();
    for dir_entry in fs::read_dir(agents_dir).map_err(unreadable)? {
        let dir_entry = dir_entry.map_err(unreadable)?;
        let file_name = dir_entry.file_name();
        let bytes = file_name.as_encoded_bytes();
        if bytes.starts_with(b".") || !bytes.ends_with(b".md") {
            continue;
        }
        // Everything named `*.md` is read, so that a FIFO, a device, a
        // directory or a dangling link under that name is reported as a
        // problem of its own rather than skipped in silence.
        files.push((file_name, dir_entry.path()));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));

    let mut parsed = Vec::with_capacity(files.len());
    for (file_name, path) in files {
        let (entry, name_line) = match read_capped(&path) {
            Ok(text) => {
                let (mut entry, line) = parse_persona_inner(&path, &text, prompt_dirs, &SafeFiles);
                with_album(&mut entry);
                (entry, line)
            }
            Err(err) => {
                let problem = Problem {
                    file: path.clone(),
                    line: err.line(),
                    severity: Severity::Error,
                    message: err.describe("file", false),
                };
                let entry = PersonaEntry {
                    path,
                    name: None,
                    persona: None,
                    problems: vec![problem],
                    fingerprint: 0,
                };
                (entry, None)
            }
        };
        parsed.push((file_name.to_string_lossy().into_owned(), entry, name_line));
    }

    // Lower-cased agent name -> (name as written, file name of its owner). The owner is, in
    // this order: the file the name is kept by (if it still carries the name); the first
    // file by name that no other kept agent runs from; the first file by name.
    let rank = |key: &str, path: &PathBuf| {
        if keep.get(key).is_some_and(|p| p == path) {
            0
        } else if keep.values().any(|p| p == path) {
            2
        } else {
            1
        }
    };
    let mut owners: HashMap<String, (String, String)> = HashMap::new();
    for pass in 0..3 {
        for (file_name, entry, _) in &parsed {
            let Some(name) = &entry.name else { continue };
            let key = name.to_lowercase();
            if rank(&key, &entry.path) == pass && !owners.contains_key(&key) {
                owners.insert(key, (name.clone(), file_name.clone()));
            }
        }
    }

    let mut entries = Vec::with_capacity(parsed.len());
    for (file_name, mut entry, name_line) in parsed {
        if let Some(name) = entry.name.clone()
            && let Some((other_name, other_file)) = owners.get(&name.to_lowercase())
            && *other_file != file_name
        {
            let mut message = format!(
                "agent name {} is already used by `{}`; this file is ignored",
                show(&name),
                other_file
            );
            if *other_name != name {
                message.push_str(&format!(
                    " (names are compared ignoring case; there it is {})",
                    show(other_name)
                ));
            }
            entry.problems.push(Problem {
                file: entry.path.clone(),
                line: name_line,
                severity: Severity::Error,
                message,
            });
            entry.persona = None;
            sort_problems(&mut entry.problems);
        }
        match &entry.persona {
            Some(p) => tracing::debug!(
                file = %entry.path.display(),
                agent = %p.name,
                phone = %p.masked_phone(),
                disabled = p.disabled,
                warnings = entry.warning_count(),
                "persona file loaded"
            ),
            None => tracing::debug!(
                file = %entry.path.display(),
                errors = entry.error_count(),
                "persona file unusable"
            ),
        }
        entries.push(entry);
    }
    Ok(LoadReport { entries })
}
