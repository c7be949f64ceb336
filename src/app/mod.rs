//! The application: the composition root that wires adapters to the runtime, the commands'
//! shared code, operations (systemd, owner controls, ctl, metrics) and logging.

pub mod allocator;
pub mod bench;
pub mod bench_memory;
pub(crate) mod check;
pub mod cli;
pub mod commands;
pub(crate) mod console;
pub(crate) mod credentials;
/// The console's personas page, rendered without its server (tests compare it with `ctl`).
#[cfg(feature = "test-hooks")]
pub use console::personas_page_for_tests as console_personas_page;
#[cfg(feature = "test-hooks")]
pub mod crash_harness;
pub mod daemon;
pub(crate) mod doctor;
pub mod lifecycle;
pub mod logging;
pub mod memory_report;
pub mod ops;
pub mod playground;
pub mod presence_report;
pub mod replay;
pub(crate) mod services;
pub(crate) mod shards;
pub(crate) mod stdout;
