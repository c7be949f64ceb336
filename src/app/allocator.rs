//! The memory allocator's settings for a long-running process. Left to its defaults, glibc's
//! malloc gives the process's threads (tokio's workers and its blocking pool: dozens under
//! load) up to eight arenas per core, and raises its mmap threshold as large blocks are
//! freed, so freed memory stays in the arenas: the peak RSS grows with each burst and hardly
//! falls (`bench` at 16,000 msg/s: 88 MB at the peak over about 40 MB of live heap).
//! [`tune`] caps the arenas at two and fixes both thresholds at 128 KiB (a large block is
//! mapped on its own and given back when freed; a heap's top is trimmed past 128 KiB): 62 MB
//! in the same run (docs/performance.md).
//!
//! The operator's word wins: with `MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`,
//! `MALLOC_TRIM_THRESHOLD_` or malloc tunables in `GLIBC_TUNABLES` in the environment nothing
//! is changed (glibc read them at start). Other C libraries are left alone. `main` calls
//! [`tune`] first, before any thread starts; [`settings`] says what it did (the bench reports
//! it).

use std::sync::OnceLock;

/// What [`tune`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settings {
    /// Two arenas, mmap and trim thresholds at 128 KiB.
    Tuned,
    /// The environment sets malloc's parameters: left as they are.
    FromEnvironment,
    /// Not glibc, or `tune` was not called: the allocator's defaults.
    Defaults,
}

impl Settings {
    /// In words, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Settings::Tuned => "glibc malloc: 2 arenas, mmap and trim thresholds 128 KiB",
            Settings::FromEnvironment => "glibc malloc as the environment sets it",
            Settings::Defaults => "the allocator's defaults",
        }
    }
}

static APPLIED: OnceLock<Settings> = OnceLock::new();

/// The arenas a tuned process keeps.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS: libc::c_int = 2;
/// Blocks from this size up are mapped on their own; a heap's free top past it is trimmed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const THRESHOLD: libc::c_int = 128 * 1024;

/// Whether the environment names malloc parameters (then they are the operator's).
fn set_by_environment(var: impl Fn(&str) -> Option<String>) -> bool {
    [
        "MALLOC_ARENA_MAX",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TRIM_THRESHOLD_",
    ]
    .iter()
    .any(|name| var(name).is_some())
        || var("GLIBC_TUNABLES").is_some_and(|t| t.contains("glibc.malloc."))
}

/// Applies the settings (once; later calls return the first outcome).
pub fn tune() -> Settings {
    *APPLIED.get_or_init(|| {
        if set_by_environment(|name| std::env::var(name).ok()) {
            return Settings::FromEnvironment;
        }
        apply()
    })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn apply() -> Settings {
    // SAFETY: `mallopt` only sets malloc's parameters; it is called before any other thread
    // exists and takes plain integers.
    let ok = [
        (libc::M_ARENA_MAX, ARENAS),
        (libc::M_MMAP_THRESHOLD, THRESHOLD),
        (libc::M_TRIM_THRESHOLD, THRESHOLD),
    ]
    .iter()
    .all(|(param, value)| unsafe { libc::mallopt(*param, *value) } == 1);
    if ok {
        Settings::Tuned
    } else {
        Settings::Defaults
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn apply() -> Settings {
    Settings::Defaults
}

/// What [`tune`] did in this process ([`Settings::Defaults`] before it ran).
pub fn settings() -> Settings {
    APPLIED.get().copied().unwrap_or(Settings::Defaults)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malloc_settings_in_the_environment_are_left_to_the_operator() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        assert!(!set_by_environment(env(&[])));
        assert!(set_by_environment(env(&[("MALLOC_ARENA_MAX", "4")])));
        assert!(set_by_environment(env(&[("MALLOC_TRIM_THRESHOLD_", "0")])));
        assert!(set_by_environment(env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.arena_max=1"
        )])));
        assert!(!set_by_environment(env(&[(
            "GLIBC_TUNABLES",
            "glibc.pthread.rseq=0"
        )])));
    }
}
