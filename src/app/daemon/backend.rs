//! How `run` reaches Telegram: the backend it was asked for (MTProto with its credentials,
//! flood and catch-up settings and the account-safety governor's limits, or the in-memory
//! Telegram of one shared world), and the secrets it reads from systemd's credentials
//! directory (`LoadCredential=`): never logged, never exported. Called by `daemon`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::adapters::governor::GovernorConfig;
use crate::adapters::mtproto::{self, ApiHash, ConnectOptions, Credentials};
use crate::app::cli::{RunArgs, TelegramArgs, TelegramChoice};
use crate::app::commands::CommandError;
use crate::core::config::ConfigError;

/// How agents reach Telegram.
#[derive(Clone)]
pub(crate) enum Backend {
    Mtproto {
        creds: Credentials,
        opts: ConnectOptions,
        governor: GovernorConfig,
    },
    Memory {
        send_delay: Duration,
        /// Every persona's in-memory account is in this one world: they meet in groups and
        /// can write to each other.
        world: Arc<crate::adapters::memory::World>,
    },
}

pub(crate) fn credentials(args: &TelegramArgs) -> Result<Credentials, CommandError> {
    match (args.api_id, args.api_hash.as_deref()) {
        (Some(api_id), Some(hash)) if !hash.trim().is_empty() => Ok(Credentials {
            api_id,
            api_hash: ApiHash::new(hash.trim()),
            servers: if args.test_dc {
                mtproto::Servers::Test
            } else {
                mtproto::Servers::Production
            },
        }),
        _ => Err(CommandError::Config(ConfigError {
            name: "telegram",
            reason: "TELEGRAM_API_ID and TELEGRAM_API_HASH are required (get them at my.telegram.org; see docs/telegram.md)".into(),
        })),
    }
}

/// A secret from systemd's credentials directory (`LoadCredential=`), exported under the
/// environment variable the rest of the program reads, unless that is already set.
pub(crate) fn credentials_from_systemd(global: &mut TelegramArgs) {
    let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from) else {
        return;
    };
    let read = |name: &str| systemd_credential(&dir, name);
    if global.api_hash.is_none() {
        global.api_hash = read("telegram_api_hash");
    }
    if global.api_id.is_none() {
        global.api_id = read("telegram_api_id").and_then(|s| s.parse().ok());
    }
}

/// One credential file from systemd's credentials directory, trimmed; `None` when it is
/// absent or empty. Read like other operator files (`store::read_operator_file`: regular file,
/// capped, never blocking on a FIFO); one that cannot be read is logged by name (never its
/// content) and treated as absent.
fn systemd_credential(dir: &std::path::Path, name: &str) -> Option<String> {
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

/// The Telegram backend `run` was asked for, with its credentials and limits.
pub(crate) fn backend_for(args: &mut RunArgs) -> Result<Backend, CommandError> {
    Ok(match args.telegram {
        TelegramChoice::Mtproto => {
            credentials_from_systemd(&mut args.credentials);
            Backend::Mtproto {
                creds: credentials(&args.credentials)?,
                opts: ConnectOptions {
                    flood_sleep_threshold: Duration::from_secs(args.flood_sleep_secs),
                    max_catch_up_age: Duration::from_secs(args.catch_up_minutes.saturating_mul(60)),
                },
                governor: GovernorConfig {
                    chat_min_gap: Duration::from_secs(args.send_gap_secs),
                    chat_per_minute: args.chat_sends_per_minute,
                    account_per_minute: args.account_sends_per_minute,
                    max_wait: Duration::from_secs(args.max_pacing_wait_secs),
                    ..GovernorConfig::default()
                },
            }
        }
        TelegramChoice::Memory => Backend::Memory {
            world: crate::adapters::memory::World::new(),
            send_delay: Duration::from_millis(args.memory_send_delay_ms),
        },
    })
}
