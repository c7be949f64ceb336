//! What the bench measures the process and the disk with: CPU time from `getrusage` (user
//! and system, microseconds), peak RSS, a background writer that keeps the same disk busy
//! (`--disk-noise`), and startup timed in a fresh process on files evicted from the page
//! cache (`posix_fadvise(DONTNEED)` after a `syncfs`, which needs no privileges). Part of
//! `bench`; nothing here touches the runtime.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use crate::app::commands::CommandError;

/// User and system CPU time of this process so far, in ms (`getrusage`, microsecond
/// resolution). Zero where unavailable.
pub(super) fn cpu_ms() -> (f64, f64) {
    use nix::sys::resource::{UsageWho, getrusage};
    match getrusage(UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let ms = |t: nix::sys::time::TimeVal| {
                t.tv_sec() as f64 * 1000.0 + t.tv_usec() as f64 / 1000.0
            };
            (ms(u.user_time()), ms(u.system_time()))
        }
        Err(_) => (0.0, 0.0),
    }
}

/// Peak resident set size (`VmHWM`), in MB.
pub(super) fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A writer on its own thread that keeps the disk busy: 1 MiB written and synced in a loop
/// into one file of the bench's directory (so on the same disk), until dropped.
pub(super) struct DiskNoise {
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DiskNoise {
    pub(super) fn start(dir: &Path) -> Result<DiskNoise, CommandError> {
        let path = dir.join("disk-noise.bin");
        let mut file = std::fs::File::create(&path)
            .map_err(|e| CommandError::Io(format!("{}: {e}", path.display())))?;
        let stop = Arc::new(AtomicBool::new(false));
        let written = Arc::new(AtomicU64::new(0));
        let (s, w) = (Arc::clone(&stop), Arc::clone(&written));
        let thread = std::thread::Builder::new()
            .name("bench-disk-noise".into())
            .spawn(move || {
                let chunk = vec![0x5a_u8; 1 << 20];
                let mut round = 0u64;
                while !s.load(Ordering::Relaxed) {
                    // A 64 MiB ring: rewrite from the start, synced every MiB.
                    if round.is_multiple_of(64) && std::io::Seek::rewind(&mut file).is_err() {
                        break;
                    }
                    if file
                        .write_all(&chunk)
                        .and_then(|()| file.sync_data())
                        .is_err()
                    {
                        break;
                    }
                    w.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    round += 1;
                }
            })
            .map_err(|e| CommandError::Failed(format!("disk noise thread: {e}")))?;
        Ok(DiskNoise {
            stop,
            written,
            thread: Some(thread),
        })
    }

    /// MiB written so far.
    pub(super) fn written_mib(&self) -> f64 {
        self.written.load(Ordering::Relaxed) as f64 / f64::from(1 << 20)
    }
}

impl Drop for DiskNoise {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Evicts the graph files under `state` from the page cache (they are synced first, since
/// dirty pages cannot be dropped). Returns whether every file could be advised.
pub(super) fn evict(state: &Path) -> bool {
    use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
    let files = graph_files(state);
    if let Some(first) = files.first()
        && let Ok(f) = std::fs::File::open(first)
        && nix::unistd::syncfs(&f).is_err()
    {
        return false;
    }
    files.iter().all(|path| {
        std::fs::File::open(path)
            .is_ok_and(|f| posix_fadvise(&f, 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED).is_ok())
    })
}

fn graph_files(state: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![state.join("graphs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Loads the graphs under `state` the way the daemon's startup does, and returns how long it
/// took (the `--startup-probe` child: a fresh process, nothing warm but the binary).
pub fn startup_probe(state: &Path) -> Result<f64, CommandError> {
    let started = Instant::now();
    let store =
        crate::adapters::store::GraphStore::new(crate::adapters::store::StateDir::new(state));
    let loaded = store
        .load_all(jiff::Timestamp::now())
        .map_err(|e| CommandError::Io(e.to_string()))?;
    std::hint::black_box(loaded.graphs.len());
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Runs `personad bench --startup-probe STATE` in a fresh process on files evicted from the
/// page cache; returns its load time and whether the files were cold.
pub(super) fn cold_startup(state: &Path) -> Result<(f64, bool), CommandError> {
    let cold = evict(state);
    let exe = std::env::current_exe().map_err(|e| CommandError::Io(e.to_string()))?;
    let out = std::process::Command::new(exe)
        .arg("bench")
        .arg("--startup-probe")
        .arg(state)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| CommandError::Io(format!("startup probe: {e}")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ms = text
        .trim()
        .parse::<f64>()
        .map_err(|_| CommandError::Failed(format!("startup probe printed {text:?}")))?;
    Ok((ms, cold))
}
