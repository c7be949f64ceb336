//! `personad ctl`: one request to the running daemon's control socket.

use crate::app::cli::{CtlArgs, GlobalArgs};
use crate::app::commands::CmdResult;
use crate::app::ops::ctl;

pub(super) async fn ctl(global: GlobalArgs, cmd: CtlArgs) -> CmdResult {
    ctl::client(global, cmd).await
}
