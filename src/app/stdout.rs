//! The one way a command writes its output to stdout (`check`, `state`, `ctl`, `login`,
//! `replay`, `bench`, the playground and the test hooks all call it). Each write is flushed.
//! A reader that went away (`personad ctl status | head -1`) is not a failure to report: the
//! write answers [`CommandError::ClosedPipe`], which the binary turns into exit status 141
//! (128 + SIGPIPE, what other Unix tools give) without a message. It never writes to stderr
//! (logs go there through tracing) and never panics, as `println!` does on a closed pipe.

use std::io::{ErrorKind, Write};

use crate::app::commands::CommandError;

/// Writes `text` to stdout as it is, and flushes.
pub(crate) fn write(text: &str) -> Result<(), CommandError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| match e.kind() {
            ErrorKind::BrokenPipe => CommandError::ClosedPipe,
            _ => CommandError::Io(e).doing("cannot write to stdout"),
        })
}

/// Writes `text` and a newline to stdout, and flushes.
pub(crate) fn line(text: impl std::fmt::Display) -> Result<(), CommandError> {
    write(&format!("{text}\n"))
}

#[cfg(test)]
mod tests {
    use crate::app::commands::{CommandError, exit};

    #[test]
    fn a_closed_pipe_is_its_own_kind_with_the_sigpipe_status() {
        // Under any wrapper the binary still finds it (it looks at the innermost kind).
        let e = CommandError::unexpected(CommandError::ClosedPipe).doing("printing");
        assert!(matches!(e.innermost(), CommandError::ClosedPipe));
        assert_eq!(CommandError::ClosedPipe.exit_code(), exit::CLOSED_PIPE);
        assert_eq!(exit::CLOSED_PIPE, 141);
    }
}
