//! `personad chat`: the playground, a persona on the in-memory backend (see `app::playground`).

use crate::app::cli::{ChatArgs, GlobalArgs};
use crate::app::commands::CmdResult;
use crate::app::playground;

pub(super) async fn chat(global: GlobalArgs, args: ChatArgs) -> CmdResult {
    playground::chat(global, args).await
}
