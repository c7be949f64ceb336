//! `personad doctor`: checks a setup and says what to fix.

use crate::app::cli::{DoctorArgs, GlobalArgs};
use crate::app::commands::CmdResult;

pub(super) async fn doctor(global: GlobalArgs, args: DoctorArgs) -> CmdResult {
    crate::app::doctor::doctor(global, args).await
}
