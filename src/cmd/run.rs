//! `personad run`: the daemon (see `app::daemon`).

use crate::app::cli::{GlobalArgs, RunArgs};
use crate::app::commands::CmdResult;
use crate::app::daemon;

pub(super) async fn run(global: GlobalArgs, args: RunArgs) -> CmdResult {
    daemon::run(global, args).await
}
