//! The one way a command writes its output to stdout (`check`, `state`, `ctl`, `login`,
//! `replay`, `bench`, the playground and the test hooks all call it). Each write is flushed.
//! A reader that went away (`personad ctl status | head -1`) is not a failure to report: the
//! write answers [`StdoutError::Closed`] (`CommandError::ClosedPipe` for the commands), which the binary turns into exit status 141
//! (128 + SIGPIPE, what other Unix tools give) without a message. It never writes to stderr
//! (logs go there through tracing) and never panics, as `println!` does on a closed pipe.

use std::io::{ErrorKind, Write};

/// Why stdout took no output.
#[derive(Debug, thiserror::Error)]
pub enum StdoutError {
    /// Its reader went away (a closed pipe): the command ends quietly.
    #[error("stdout is a closed pipe")]
    Closed,
    /// Any other failure.
    #[error("cannot write to stdout")]
    Io(#[source] std::io::Error),
}

/// Writes `text` to stdout as it is, and flushes.
pub(crate) fn write(text: &str) -> Result<(), StdoutError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| match e.kind() {
            ErrorKind::BrokenPipe => StdoutError::Closed,
            _ => StdoutError::Io(e),
        })
}

/// Writes `text` and a newline to stdout, and flushes.
pub(crate) fn line(text: impl std::fmt::Display) -> Result<(), StdoutError> {
    write(&format!("{text}\n"))
}
