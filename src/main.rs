//! The `personad` binary: parses the command line, sets up logging, runs one command
//! (`personad::cmd`) and maps its outcome to an exit code (documented in README.md and
//! docs/operations.md). All logic lives in the library.

use std::process::ExitCode;

use clap::Parser;
use personad::app::cli::{Cli, Command};
use personad::app::commands;
use personad::app::logging;

fn main() -> ExitCode {
    // Before any thread starts (glibc's arenas are made per thread).
    personad::app::allocator::tune();
    let cli = Cli::parse();
    // `chat` prints the conversation on the terminal: by default only warnings join it (and
    // so for the harnesses whose stdout is read). The flags mean the same everywhere: -v
    // debug, -vv trace, -q warn, -qq error.
    let quiet_by_default = match cli.command {
        Command::Chat(_) | Command::Bench(_) | Command::Replay(_) | Command::Doctor(_) => true,
        #[cfg(feature = "test-hooks")]
        Command::SaveLoop(_) | Command::CrashChild(_) => true,
        _ => false,
    };
    let verbosity = match cli.global.verbosity() {
        0 if quiet_by_default => -1,
        v => v,
    };
    logging::init(logging::resolve_format(cli.global.log_format), verbosity);
    match personad::cmd::execute(cli) {
        Ok(code) => code,
        // A closed stdout (`personad ctl status | head -1`) ends quietly, as other tools do.
        Err(e) if matches!(e.innermost(), commands::CommandError::ClosedPipe) => {
            ExitCode::from(commands::exit::CLOSED_PIPE)
        }
        Err(e) => {
            eprintln!("personad: {}", logging::inert(&commands::error_text(&e)));
            ExitCode::from(e.exit_code())
        }
    }
}
