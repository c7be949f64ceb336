//! `personad check`: validates persona files and settings without starting anything.

use crate::app::cli::{CheckArgs, GlobalArgs};
use crate::app::commands::CmdResult;

pub(super) fn check(global: &GlobalArgs, args: &CheckArgs) -> CmdResult {
    crate::app::check::check(global, args)
}
