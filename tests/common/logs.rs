//! Log capture: the lines a test's code logs on this thread (the test runtime has one) while
//! a capture's guard lives, as the fmt layer writes them (INFO and up, no colours).

use std::sync::{Arc, Mutex, PoisonError};

/// The captured log text.
#[derive(Clone, Default)]
pub(crate) struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures this thread's log lines until the guard is dropped.
    pub(crate) fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        (logs, tracing::subscriber::set_default(subscriber))
    }

    /// Everything captured so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }

    /// The captured lines that contain `what`.
    pub(crate) fn lines_with(&self, what: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|l| l.contains(what))
            .map(str::to_owned)
            .collect()
    }
}

/// Runs `f` and returns its result with the log text it wrote.
pub(crate) fn logged<T>(f: impl FnOnce() -> T) -> (T, String) {
    let (logs, guard) = Logs::capture();
    let out = f();
    drop(guard);
    (out, logs.text())
}
