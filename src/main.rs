//! The `personad` binary: parses the command line, sets up logging, runs one command and
//! maps its outcome to an exit code (documented in README.md and docs/operations.md). All
//! logic lives in the library.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use personad::app::cli::{Cli, Command};
use personad::app::commands::{self, CommandError, exit};
use personad::app::{bench, crash_harness, daemon, logging, ops, playground};

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `chat` prints the conversation on the terminal: by default only warnings join it (and
    // so for the harnesses whose stdout is read). The flags mean the same everywhere: -v
    // debug, -vv trace, -q warn, -qq error.
    let quiet_by_default = matches!(
        cli.command,
        Command::Chat(_)
            | Command::SaveLoop(_)
            | Command::Bench(_)
            | Command::CrashChild(_)
            | Command::Replay(_)
    );
    let verbosity = match cli.global.verbosity() {
        0 if quiet_by_default => -1,
        v => v,
    };
    logging::init(logging::resolve_format(cli.global.log_format), verbosity);
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let code = e
                .downcast_ref::<CommandError>()
                .map_or(exit::FAILURE, CommandError::exit_code);
            let text = commands::error_text(e.as_ref());
            eprintln!("personad: {}", logging::inert(&text));
            ExitCode::from(code)
        }
    }
}

fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let global = cli.global;
    let code = match cli.command {
        Command::Check(args) => commands::check(&global, &args)?,
        Command::State(cmd) => commands::state(&global, &cmd)?,
        Command::SaveLoop(args) => commands::save_loop(&global, &args)?,
        Command::Bench(args) => on_runtime(bench::bench(global, args))?,
        Command::CrashChild(args) => on_runtime(crash_harness::crash_child(global, args))?,
        Command::Run(args) => on_runtime(daemon::run(global, args))?,
        Command::Login(args) => on_runtime(daemon::login(global, args))?,
        Command::Chat(args) => on_runtime(playground::chat(global, args))?,
        Command::Replay(args) => on_runtime(personad::app::replay::run(global, args))?,
        Command::Ctl(cmd) => on_runtime(ops::ctl::client(global, cmd))?,
    };
    Ok(code)
}

/// Runs a command on a fresh runtime. Blocking work still running when the command returns
/// (a save, a file read) gets a moment to finish; nothing waits longer.
fn on_runtime<F: std::future::Future<Output = commands::CmdResult>>(
    fut: F,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = rt.block_on(fut);
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(result?)
}
