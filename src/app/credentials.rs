//! Secrets from systemd's credentials directory (`LoadCredential=`, `$CREDENTIALS_DIRECTORY`):
//! one file per secret, read like other operator files, never logged and never exported to
//! the environment. `run` reads the Telegram API settings and the LLM keys here; `check` reads
//! the same LLM keys, so that what it reports is what `run` will find. Nothing here decides;
//! it must not import the daemon or the commands (both call it).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// One credential file from systemd's credentials directory, trimmed; `None` when it is
/// absent or empty. Read like other operator files (`store::read_operator_file`: regular file,
/// capped, never blocking on a FIFO); one that cannot be read is logged by name (never its
/// content) and treated as absent.
pub(crate) fn systemd_credential(dir: &std::path::Path, name: &str) -> Option<String> {
    match crate::adapters::store::read_operator_file(&dir.join(name)) {
        Ok(text) => text.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
        Err(e) => {
            tracing::warn!(event = "credential_unreadable", error = %e, "ignoring a credential file");
            None
        }
    }
}

/// LLM keys from systemd's credentials directory (`LoadCredential=`): the file named after
/// the variable in lower case (`gemini_api_key`, `openai_api_key`, ...), for every variable the
/// environment leaves unset. Read once, never exported to the environment.
pub(crate) fn llm_keys_from_systemd() -> BTreeMap<String, String> {
    let mut keys = BTreeMap::new();
    let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from) else {
        return keys;
    };
    for name in crate::core::llm::KEY_VARIABLES {
        if std::env::var_os(name).is_some() {
            continue;
        }
        if let Some(key) = systemd_credential(&dir, &name.to_lowercase()) {
            keys.insert((*name).to_string(), key);
        }
    }
    keys
}

/// The LLM settings and keys as `run` and `check` look them up: the environment first, then a
/// key from systemd's credentials directory.
pub(crate) fn llm_lookup() -> impl Fn(&str) -> Option<String> + Send + Sync + 'static {
    let keys = llm_keys_from_systemd();
    move |name: &str| std::env::var(name).ok().or_else(|| keys.get(name).cloned())
}
