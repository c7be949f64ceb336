//! The options of `personad doctor`: `check`'s own (the same configuration is checked), what
//! may reach the network, and the Telegram credentials for `--telegram`. Parsed by clap;
//! `app::doctor` carries the command out.

use std::path::PathBuf;

use clap::Args;

use crate::app::cli::{CheckArgs, TelegramArgs};

/// `personad doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub check: CheckArgs,
    /// Check nothing over the network: no LLM request (and no Telegram connect).
    #[arg(long)]
    pub offline: bool,
    /// Also connect each agent to Telegram with its session and ask who it is.
    #[arg(long, conflicts_with = "offline")]
    pub telegram: bool,
    #[command(flatten)]
    pub credentials: TelegramArgs,
    /// The systemd unit to compare with the shipped one, instead of the installed
    /// `personad.service` (system, then user) (tests).
    #[arg(long, value_name = "FILE", hide = true)]
    pub unit: Option<PathBuf>,
}
