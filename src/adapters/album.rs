//! Reads a persona's album folder (`core::album`): `<file stem>.media/` beside the persona
//! file, or the folder its `# Media Folder` names (relative to the file). Every regular file
//! there is an item unless it is a sidecar: `<file>.json` (or the original's `<id>.json`
//! naming its `media_file`), `<file>.md` or `<file>.txt` next to the file it describes. Each
//! sidecar is parsed then validated (`core::album`); a bad one is an error naming the sidecar,
//! which makes the persona unusable as any persona file error does. An item without a
//! description, a file over the upload cap and an album over its item cap are warnings. Files
//! are read through the store's safe reader (links followed, caps enforced) and hashed here
//! (SHA-256): the hash gives an item without a sidecar id its id, and keys its upload. Called
//! by the persona loader (blocking, off the async threads); it writes nothing.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::adapters::store::{self, Symlinks};
use crate::core::album::{
    Album, AlbumItem, MAX_ITEM_BYTES, MAX_ITEMS, Sidecar, content_id, guess, parse_json_sidecar,
    parse_text_sidecar,
};
use crate::core::persona::{Persona, Problem, Severity};

/// The largest sidecar read.
const MAX_SIDECAR_BYTES: u64 = 64 * 1024;

/// The folder a persona's album is read from, and whether the persona named it.
pub fn album_folder(persona_file: &Path, persona: &Persona) -> (PathBuf, bool) {
    let dir = persona_file.parent().unwrap_or_else(|| Path::new("."));
    match &persona.media_folder {
        Some(rel) => (dir.join(rel), true),
        None => {
            let stem = persona_file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (dir.join(format!("{stem}.media")), false)
        }
    }
}

fn problem(file: &Path, severity: Severity, message: String) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line: None,
        severity,
        message,
    }
}

/// Reads the album of the persona in `persona_file`: the album, and its problems (errors
/// name the sidecar or folder at fault).
pub fn load_album(persona_file: &Path, persona: &Persona) -> (Album, Vec<Problem>) {
    let (folder, named) = album_folder(persona_file, persona);
    let mut problems = Vec::new();
    if !folder.is_dir() {
        if named {
            problems.push(problem(
                persona_file,
                Severity::Error,
                format!("# Media Folder: `{}` is not a folder", folder.display()),
            ));
        }
        return (Album::default(), problems);
    }
    let names = match list(&folder) {
        Ok(n) => n,
        Err(e) => {
            problems.push(problem(
                &folder,
                Severity::Error,
                format!("cannot list the media folder: {e}"),
            ));
            return (Album::default(), problems);
        }
    };
    let all: HashSet<&str> = names.iter().map(String::as_str).collect();
    // File name → its sidecar (what it says, and the sidecar's own path).
    let mut sidecars: BTreeMap<String, (Sidecar, PathBuf)> = BTreeMap::new();
    let mut media: Vec<&str> = Vec::new();
    for name in &names {
        let path = folder.join(name);
        let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
        let ext = ext.to_ascii_lowercase();
        let text_sidecar = matches!(ext.as_str(), "md" | "txt") && all.contains(stem);
        if ext != "json" && !text_sidecar {
            media.push(name);
            continue;
        }
        let text = match read_sidecar(&path) {
            Ok(t) => t,
            Err(e) => {
                problems.push(problem(
                    &path,
                    Severity::Error,
                    format!("media sidecar {}", chain(&e)),
                ));
                continue;
            }
        };
        let parsed = if ext == "json" {
            match parse_json_sidecar(&text) {
                Ok(s) => s,
                Err(e) => {
                    problems.push(problem(
                        &path,
                        Severity::Error,
                        format!("media sidecar {}", chain(&e)),
                    ));
                    continue;
                }
            }
        } else {
            parse_text_sidecar(&text)
        };
        let target = parsed.media_file.clone().unwrap_or_else(|| stem.to_owned());
        if !all.contains(target.as_str()) {
            problems.push(problem(
                &path,
                Severity::Error,
                format!("media sidecar describes `{target}`, which is not in the folder"),
            ));
            continue;
        }
        sidecars.insert(target, (parsed, path));
    }
    let mut items = Vec::new();
    let mut ids = HashSet::new();
    for name in media {
        let path = folder.join(name);
        let side = sidecars.remove(name);
        match item(&path, name, side.as_ref().map(|(s, _)| s)) {
            Ok(item) => {
                if item.description.is_none() {
                    problems.push(problem(
                        &path,
                        Severity::Warning,
                        "album item has no description (add a sidecar `<file>.json`, `.md` or `.txt`); it is listed by its file name".into(),
                    ));
                }
                if !ids.insert(item.id.clone()) {
                    problems.push(problem(
                        &path,
                        Severity::Warning,
                        format!(
                            "album id {:?} is used by an earlier item; this one is left out",
                            item.id
                        ),
                    ));
                    continue;
                }
                if items.len() >= MAX_ITEMS {
                    problems.push(problem(
                        &path,
                        Severity::Warning,
                        format!("the album lists at most {MAX_ITEMS} items; this one is left out"),
                    ));
                    continue;
                }
                items.push(item);
            }
            Err(why) => problems.push(problem(
                &path,
                Severity::Warning,
                format!("album item {}", chain(&why)),
            )),
        }
    }
    (
        Album {
            folder: Some(folder),
            items,
        },
        problems,
    )
}

/// The folder's regular files (links followed), hidden ones left out, sorted by name.
fn list(folder: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(folder)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_file() {
            continue;
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// Why a sidecar or an item could not be used.
#[derive(Debug, thiserror::Error)]
enum FileError {
    #[error("cannot be read")]
    Metadata(#[source] std::io::Error),
    #[error("cannot be read")]
    Read(#[source] store::StoreError),
    #[error("is not UTF-8 text")]
    NotUtf8(#[source] std::string::FromUtf8Error),
    #[error("is {size} bytes, over the {MAX_ITEM_BYTES} byte upload cap; it is left out")]
    TooLarge { size: u64 },
    #[error("is empty; it is left out")]
    Empty,
}

/// An error and its sources, for a problem's message.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn read_sidecar(path: &Path) -> Result<String, FileError> {
    let bytes =
        store::read_file(path, MAX_SIDECAR_BYTES, Symlinks::Follow).map_err(FileError::Read)?;
    String::from_utf8(bytes).map_err(FileError::NotUtf8)
}

/// One item: its bytes hashed, its kind, type and id from the sidecar or its name. A file
/// over the cap (or unreadable) is left out with the reason.
fn item(path: &Path, name: &str, side: Option<&Sidecar>) -> Result<AlbumItem, FileError> {
    let size = std::fs::metadata(path).map_err(FileError::Metadata)?.len();
    if size > MAX_ITEM_BYTES {
        return Err(FileError::TooLarge { size });
    }
    if size == 0 {
        return Err(FileError::Empty);
    }
    let bytes =
        store::read_file(path, MAX_ITEM_BYTES, Symlinks::Follow).map_err(FileError::Read)?;
    let hash: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let (kind, mime) = guess(name);
    let side = side.cloned().unwrap_or_default();
    Ok(AlbumItem {
        id: side.unique_id.unwrap_or_else(|| content_id(&hash)),
        kind: side.kind.unwrap_or(kind),
        description: side.description,
        path: path.to_path_buf(),
        file_name: name.to_owned(),
        mime: side.mime.unwrap_or_else(|| mime.to_owned()),
        size: u64::try_from(bytes.len()).unwrap_or(size),
        content_hash: hash,
    })
}

/// One line about an album for `check`: its folder, how many items, how many described.
pub fn summary(album: &Album) -> String {
    let described = album
        .items
        .iter()
        .filter(|i| i.description.is_some())
        .count();
    match &album.folder {
        None => "no album".to_owned(),
        Some(f) => format!(
            "album {}: {} item(s), {} described",
            f.display(),
            album.items.len(),
            described
        ),
    }
}
