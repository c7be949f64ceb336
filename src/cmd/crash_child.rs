//! The hidden `crash-child` (built with `test-hooks` only): the runtime under the kill -9
//! test (see `app::crash_harness`).

use crate::app::cli::{CrashChildArgs, GlobalArgs};
use crate::app::commands::CmdResult;
use crate::app::crash_harness;

pub(super) async fn crash_child(global: GlobalArgs, args: CrashChildArgs) -> CmdResult {
    crash_harness::crash_child(global, args).await
}
