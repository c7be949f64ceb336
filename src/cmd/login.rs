//! `personad login`: signs an agent's account in (or out) interactively.

use crate::app::cli::{GlobalArgs, LoginArgs};
use crate::app::commands::CmdResult;
use crate::app::daemon;

pub(super) async fn login(global: GlobalArgs, args: LoginArgs) -> CmdResult {
    daemon::login(global, args).await
}
