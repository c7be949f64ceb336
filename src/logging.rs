//! Logging setup: a tracing subscriber writing to stderr, as human-readable text or as one
//! JSON object per line. The level comes from `-v`/`-q` unless `PERSONAD_LOG` holds a filter
//! directive (e.g. `personad=debug`). Called once, by the binary.

use tracing_subscriber::EnvFilter;

/// Output format of log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Maps the `-v`/`-q` balance to a level, starting from `base` (0 = info).
pub fn level_for(verbosity: i8) -> &'static str {
    match verbosity {
        i8::MIN..=-2 => "error",
        -1 => "warn",
        0 => "info",
        1 => "debug",
        _ => "trace",
    }
}

/// Installs the global subscriber. Returns false if one was already installed.
pub fn init(format: LogFormat, verbosity: i8) -> bool {
    let filter = std::env::var("PERSONAD_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .unwrap_or_else(|| EnvFilter::new(level_for(verbosity)));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    match format {
        LogFormat::Text => builder.try_init().is_ok(),
        LogFormat::Json => builder.json().flatten_event(true).try_init().is_ok(),
    }
}
