//! The hidden `save-loop`: writes graphs in a loop for the crash-safety test.

use crate::app::cli::{GlobalArgs, SaveLoopArgs};
use crate::app::commands::{self, CmdResult};

pub(super) fn save_loop(global: &GlobalArgs, args: &SaveLoopArgs) -> CmdResult {
    commands::save_loop(global, args)
}
