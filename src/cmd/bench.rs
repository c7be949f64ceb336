//! `personad bench`: the runtime measured on the in-memory backend (see `app::bench`).

use crate::app::bench;
use crate::app::cli::{BenchArgs, GlobalArgs};
use crate::app::commands::CmdResult;

pub(super) async fn bench(global: GlobalArgs, args: BenchArgs) -> CmdResult {
    bench::bench(global, args).await
}
