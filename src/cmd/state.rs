//! `personad state`: inspects and clears the state directory.

use crate::app::cli::{GlobalArgs, StateCommand};
use crate::app::commands::{self, CmdResult};

pub(super) fn state(global: &GlobalArgs, cmd: &StateCommand) -> CmdResult {
    commands::state(global, cmd)
}
