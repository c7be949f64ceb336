//! How `run` reaches Telegram: the backend it was asked for (MTProto with its credentials,
//! flood and catch-up settings and the account-safety governor's limits, or the in-memory
//! Telegram of one shared world), and the secrets it reads from systemd's credentials
//! directory (`LoadCredential=`): never logged, never exported. Called by `daemon`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::adapters::governor::GovernorConfig;
use crate::adapters::mtproto::sim::{Sim, SimServer};
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
        /// With `--telegram sim`: the simulated Telegram the accounts connect to.
        sim: Option<SimLink>,
    },
    Memory {
        send_delay: Duration,
        /// Every persona's in-memory account is in this one world: they meet in groups and
        /// can write to each other.
        world: Arc<crate::adapters::memory::World>,
    },
}

/// The simulated Telegram of `run --telegram sim`: where it listens, and its control side
/// when it runs inside this daemon (then `ctl say` writes through it and each persona's
/// account is made in it at start).
#[derive(Clone)]
pub(crate) struct SimLink {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) server: Option<Arc<SimServer>>,
}

impl SimLink {
    /// The control side, when the simulator runs in this daemon.
    pub(crate) fn sim(&self) -> Option<Sim> {
        self.server.as_ref().map(|s| s.sim.clone())
    }
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
    let read = |name: &str| crate::app::credentials::systemd_credential(&dir, name);
    if global.api_hash.is_none() {
        global.api_hash = read("telegram_api_hash");
    }
    if global.api_id.is_none() {
        global.api_id = read("telegram_api_id").and_then(|s| s.parse().ok());
    }
}

/// The Telegram backend `run` was asked for, with its credentials and limits (with
/// `--telegram sim` and no `--sim-addr`, the simulator is started here).
pub(crate) async fn backend_for(
    args: &mut RunArgs,
    clock: &crate::ports::clock::SharedClock,
) -> Result<Backend, CommandError> {
    let opts = ConnectOptions {
        flood_sleep_threshold: Duration::from_secs(args.flood_sleep_secs),
        max_catch_up_age: Duration::from_secs(args.catch_up_minutes.saturating_mul(60)),
    };
    let governor = GovernorConfig {
        chat_min_gap: Duration::from_secs(args.send_gap_secs),
        chat_per_minute: args.chat_sends_per_minute,
        account_per_minute: args.account_sends_per_minute,
        max_wait: Duration::from_secs(args.max_pacing_wait_secs),
        ..GovernorConfig::default()
    };
    Ok(match args.telegram {
        TelegramChoice::Mtproto => {
            credentials_from_systemd(&mut args.credentials);
            Backend::Mtproto {
                creds: credentials(&args.credentials)?,
                opts,
                governor,
                sim: None,
            }
        }
        TelegramChoice::Sim => {
            let link = match args.sim_addr {
                Some(addr) => SimLink { addr, server: None },
                None => {
                    let local = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
                    let server = SimServer::start(Arc::clone(clock), local)
                        .await
                        .map_err(|e| CommandError::While {
                            doing: "starting the simulated Telegram".into(),
                            source: Box::new(CommandError::Io(e)),
                        })?;
                    SimLink {
                        addr: server.addr,
                        server: Some(Arc::new(server)),
                    }
                }
            };
            Backend::Mtproto {
                creds: Credentials {
                    api_id: 1,
                    api_hash: ApiHash::new("sim"),
                    servers: mtproto::Servers::Sim,
                },
                opts,
                governor,
                sim: Some(link),
            }
        }
        TelegramChoice::Memory => Backend::Memory {
            world: crate::adapters::memory::World::new(),
            send_delay: Duration::from_millis(args.memory_send_delay_ms),
        },
    })
}
