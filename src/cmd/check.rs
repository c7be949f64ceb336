//! `personad check`: validates persona files and settings without starting anything.

use crate::app::cli::{CheckArgs, GlobalArgs};
use crate::app::commands::{self, CmdResult};

pub(super) fn check(global: &GlobalArgs, args: &CheckArgs) -> CmdResult {
    commands::check(global, args)
}
