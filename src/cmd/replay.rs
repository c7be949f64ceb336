//! `personad replay`: a Telegram Desktop export through the group decision pipeline.

use crate::app::cli::{GlobalArgs, ReplayArgs};
use crate::app::commands::CmdResult;
use crate::app::replay;

pub(super) async fn replay(global: GlobalArgs, args: ReplayArgs) -> CmdResult {
    replay::run(global, args).await
}
