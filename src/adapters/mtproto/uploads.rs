//! The album items this account has uploaded: per content hash (SHA-256 of the file), the
//! photo or document Telegram made of it (id, access hash, file reference), so the next send
//! of the same bytes goes by reference instead of uploading again. Kept in the agent's state
//! folder (`album-uploads.json`); a reference that no longer works (FILE_REFERENCE_EXPIRED,
//! an invalid media) is forgotten by the send path, which uploads again.
//!
//! It is plain data plus a file: no grammers, no network. The album send path
//! (`backend::album`) reads and records it. A damaged file is moved aside with a WARN.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// At most this many uploads are remembered (the oldest stored first is dropped).
pub(crate) const MAX_UPLOADS: usize = 2000;

/// What Telegram made of an upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredUpload {
    /// A photo (`InputPhoto`), else a document (`InputDocument`).
    pub photo: bool,
    pub id: i64,
    pub access_hash: i64,
    pub file_reference: Vec<u8>,
    /// When it was stored (a counter: the oldest goes first when the store is full).
    #[serde(default)]
    pub seq: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct UploadsFile {
    #[serde(default)]
    uploads: BTreeMap<String, StoredUpload>,
}

/// One account's uploads.
pub struct UploadStore {
    inner: Mutex<BTreeMap<String, StoredUpload>>,
    /// Held from the snapshot to the end of its write (saves land in order).
    writing: tokio::sync::Mutex<()>,
    path: Option<PathBuf>,
}

impl UploadStore {
    /// An empty store kept in memory only.
    pub fn in_memory() -> Arc<UploadStore> {
        Arc::new(UploadStore {
            inner: Mutex::new(BTreeMap::new()),
            writing: tokio::sync::Mutex::new(()),
            path: None,
        })
    }

    /// Loads the store from `path` (blocking). A missing file is an empty store; a damaged
    /// one is moved aside with a WARN (its items are uploaded again when next sent).
    pub fn load(path: PathBuf) -> Arc<UploadStore> {
        let uploads = match crate::adapters::store::read_optional(&path) {
            Ok(None) => BTreeMap::new(),
            Ok(Some(text)) => match serde_json::from_str::<UploadsFile>(&text) {
                Ok(f) => f.uploads,
                Err(e) => {
                    let aside = path.with_extension("json.damaged");
                    tracing::warn!(file = %path.display(), error = %e, moved_to = %aside.display(), "the album's upload record is damaged; items will be uploaded again");
                    if let Err(e) = crate::adapters::store::move_file(&path, &aside) {
                        tracing::warn!(file = %path.display(), error = %e, "could not move the damaged upload record aside");
                    }
                    BTreeMap::new()
                }
            },
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "cannot read the album's upload record; items will be uploaded again");
                BTreeMap::new()
            }
        };
        Arc::new(UploadStore {
            inner: Mutex::new(uploads),
            writing: tokio::sync::Mutex::new(()),
            path: Some(path),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, StoredUpload>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the bytes hashed `content_hash` were uploaded as, if they were.
    pub fn get(&self, content_hash: &str) -> Option<StoredUpload> {
        self.lock().get(content_hash).cloned()
    }

    /// Records (or refreshes) an upload and saves the store.
    pub async fn put(&self, content_hash: &str, mut upload: StoredUpload) {
        {
            let mut inner = self.lock();
            upload.seq = inner.values().map(|u| u.seq).max().unwrap_or(0) + 1;
            inner.insert(content_hash.to_owned(), upload);
            while inner.len() > MAX_UPLOADS {
                let oldest = inner
                    .iter()
                    .min_by_key(|(_, u)| u.seq)
                    .map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => inner.remove(&k),
                    None => break,
                };
            }
        }
        self.save().await;
    }

    /// Forgets an upload whose reference no longer works, and saves the store.
    pub async fn forget(&self, content_hash: &str) {
        let removed = self.lock().remove(content_hash).is_some();
        if removed {
            self.save().await;
        }
    }

    /// How many uploads are remembered.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    async fn save(&self) {
        let Some(path) = self.path.clone() else {
            return;
        };
        let _order = self.writing.lock().await;
        let file = UploadsFile {
            uploads: self.lock().clone(),
        };
        let saved =
            tokio::task::spawn_blocking(move || crate::adapters::store::write_json(&path, &file))
                .await;
        match saved {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "could not save the album's upload record");
            }
            Err(e) => tracing::warn!(error = %e, "could not save the album's upload record"),
        }
    }
}
