//! The commands: one module per subcommand of `personad`, each a thin call into `app` (the
//! composition root and the commands' shared code), and [`execute`], the one dispatch the
//! binary calls. Commands parse nothing themselves (clap did) and wire nothing (app does).

mod bench;
mod chat;
mod check;
#[cfg(feature = "test-hooks")]
mod crash_child;
mod ctl;
mod doctor;
mod login;
mod replay;
mod run;
#[cfg(feature = "test-hooks")]
mod save_loop;
mod state;

use std::future::Future;
use std::process::ExitCode;
use std::time::Duration;

use crate::app::cli::{Cli, Command};
use crate::app::commands::{CmdResult, CommandError};

/// Runs the command the command line names.
pub fn execute(cli: Cli) -> CmdResult {
    let global = cli.global;
    match cli.command {
        Command::Check(args) => check::check(&global, &args),
        Command::Doctor(args) => on_runtime(doctor::doctor(global, args)),
        Command::State(cmd) => state::state(&global, &cmd),
        #[cfg(feature = "test-hooks")]
        Command::SaveLoop(args) => save_loop::save_loop(&global, &args),
        Command::Bench(args) => on_runtime(bench::bench(global, args)),
        #[cfg(feature = "test-hooks")]
        Command::CrashChild(args) => on_runtime(crash_child::crash_child(global, args)),
        Command::Run(args) => on_runtime(run::run(global, args)),
        Command::Login(args) => on_runtime(login::login(global, args)),
        Command::Chat(args) => on_runtime(chat::chat(global, args)),
        Command::Replay(args) => on_runtime(replay::replay(global, args)),
        Command::Ctl(cmd) => on_runtime(ctl::ctl(global, cmd)),
        Command::Shards(args) => crate::app::shards::shards_command(&global, &args),
    }
}

/// The commands' async runtime: one thread runs every task (the loop, the adapters' network
/// I/O, the control socket); blocking file work runs on tokio's blocking pool. A second
/// worker thread only added hand-offs between threads: each reply woke both (see
/// docs/performance.md, "One thread for the async side").
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// Runs a command on a fresh runtime. Blocking work still running when the command returns
/// (a save, a file read) gets a moment to finish; nothing waits longer.
fn on_runtime<F: Future<Output = CmdResult>>(fut: F) -> Result<ExitCode, CommandError> {
    let rt = runtime().map_err(|e| CommandError::Io(e).doing("cannot start the async runtime"))?;
    let result = rt.block_on(fut);
    rt.shutdown_timeout(Duration::from_secs(2));
    result
}

#[cfg(test)]
mod tests {
    /// Commands, the daemon among them, run their async side on one thread.
    #[test]
    fn commands_run_on_one_thread() -> std::io::Result<()> {
        let rt = super::runtime()?;
        assert_eq!(
            rt.handle().runtime_flavor(),
            tokio::runtime::RuntimeFlavor::CurrentThread
        );
        Ok(())
    }
}
