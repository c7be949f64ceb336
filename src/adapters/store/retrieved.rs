//! The documents each chat's `retrieve` tasks kept (`<agent>/retrieved/<chat>.json`,
//! `core::retrieve::Documents`), the file implementation of the retrieve port's document
//! store. Each save replaces the file crash-safely (`files::write_json`); a file that does not
//! read as documents is moved to `quarantine/` (logged) and the chat starts with none, so a
//! later save never overwrites it. Blocking; the handlers call it through `spawn_blocking`.

use super::files::{ensure_private_dir, quarantine, read_optional, write_json};
use super::layout::{StateDir, fs_name};
use crate::core::model::ChatId;
use crate::core::retrieve::Documents;
use crate::ports::retrieve::DocumentStore;
use crate::ports::store::StoreError;

/// The chats' documents under a state directory.
#[derive(Debug, Clone)]
pub struct FileDocuments {
    dir: StateDir,
}

impl FileDocuments {
    pub fn new(dir: StateDir) -> FileDocuments {
        FileDocuments { dir }
    }
}

impl DocumentStore for FileDocuments {
    fn read(&self, agent: &str, chat: ChatId) -> Result<Documents, StoreError> {
        let path = self.dir.retrieved_path(agent, chat);
        let Some(text) = read_optional(&path)? else {
            return Ok(Documents::default());
        };
        match serde_json::from_str::<Documents>(&text) {
            Ok(docs) => Ok(docs),
            Err(e) => {
                let reason = format!("not retrieved documents: {e}");
                let moved_to = self
                    .dir
                    .quarantine_path(&fs_name(agent), &format!("retrieved-{chat}.json"));
                quarantine(&path, &moved_to, &reason)?;
                tracing::warn!(agent = %agent, chat = %chat, file = %path.display(), moved_to = %moved_to.display(), reason = %reason, "unreadable retrieved documents moved aside");
                Ok(Documents::default())
            }
        }
    }

    fn save(&self, agent: &str, chat: ChatId, docs: &Documents) -> Result<(), StoreError> {
        self.dir.check_guard()?;
        let path = self.dir.retrieved_path(agent, chat);
        if let Some(parent) = path.parent() {
            ensure_private_dir(parent)?;
        }
        write_json(&path, docs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::retrieve::Document;

    #[test]
    fn documents_round_trip_and_a_damaged_file_is_moved_aside() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let dir = StateDir::new(tmp.path());
        let store = FileDocuments::new(dir.clone());
        let chat = ChatId(7);
        let empty = store.read("ann", chat).unwrap_or_else(|e| panic!("{e}"));
        assert!(empty.docs.is_empty());
        let mut docs = Documents::default();
        let at = jiff::Timestamp::UNIX_EPOCH;
        docs.add(Document::new("https://x.org", "t1", "hello", at), at);
        store
            .save("ann", chat, &docs)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(store.read("ann", chat).ok(), Some(docs));
        std::fs::write(dir.retrieved_path("ann", chat), "{broken")
            .unwrap_or_else(|e| panic!("{e}"));
        let read = store.read("ann", chat).unwrap_or_else(|e| panic!("{e}"));
        assert!(read.docs.is_empty());
        assert!(!dir.retrieved_path("ann", chat).exists());
    }
}
