//! Loads the agents directory: lists `*.md` persona files, reads each through the safe reader
//! and hands the text to `core::persona` to parse and validate. It owns the directory scan
//! and its errors, nothing of the persona format. `check`, `run`, `chat` and reloads call it.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::adapters::store::{self, Refused, Symlinks};
use crate::core::persona::*;

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
    parse_persona_with(path, source, prompt_dirs, &SafeFiles)
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

    let mut entries = Vec::with_capacity(files.len());
    // Lower-cased agent name -> (name as written, file name of its owner).
    let mut owners: HashMap<String, (String, String)> = HashMap::new();
    for (file_name, path) in files {
        let (mut entry, name_line) = match read_capped(&path) {
            Ok(text) => parse_persona_inner(&path, &text, prompt_dirs, &SafeFiles),
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
        if let Some(name) = entry.name.clone() {
            let key = name.to_lowercase();
            let this_file = file_name.to_string_lossy().into_owned();
            match owners.get(&key) {
                Some((other_name, other_file)) => {
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
                None => {
                    owners.insert(key, (name, this_file));
                }
            }
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
