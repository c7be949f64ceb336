//! The `personad` binary: parses the command line, sets up logging, runs one command and
//! maps its outcome to an exit code (documented in README.md). All logic lives in the library.

use std::process::ExitCode;

use clap::Parser;
use personad::cli::{Cli, Command};
use personad::commands::{self, CommandError, exit};
use personad::{bench, crash_harness, daemon, logging, playground};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let quiet_by_default = matches!(
        cli.command,
        Command::Chat(_)
        | Command::SaveLoop(_)
        | Command::Bench(_)
        | Command::CrashChild(_)
        | Command::Replay(_)
    );
    let verbosity = cli.global.verbosity() - i8::from(quiet_by_default);
    logging::init(cli.global.log_format, verbosity);
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            let code = e
                .downcast_ref::<CommandError>()
                .map_or(exit::FAILURE, CommandError::exit_code);
            eprintln!("personad: {e:#}");
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
        Command::Bench(args) => runtime()?.block_on(bench::bench(global, args))?,
        Command::CrashChild(args) => {
            runtime()?.block_on(crash_harness::crash_child(global, args))?
        }
        Command::Run(args) => runtime()?.block_on(daemon::run(global, args))?,
        Command::Login(args) => runtime()?.block_on(daemon::login(global, args))?,
        Command::Chat(args) => runtime()?.block_on(playground::chat(global, args))?,
        Command::Replay(args) => runtime()?.block_on(personad::group::replay::run(global, args))?,
    };
    Ok(code)
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
}
