//! The hidden `save-loop` (built with `test-hooks` only): writes graphs in a loop for the
//! crash-safety test (see `app::crash_harness`).

use crate::app::cli::{GlobalArgs, SaveLoopArgs};
use crate::app::commands::CmdResult;
use crate::app::crash_harness;

pub(super) fn save_loop(global: &GlobalArgs, args: &SaveLoopArgs) -> CmdResult {
    crash_harness::save_loop(global, args)
}
