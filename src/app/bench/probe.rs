//! What the bench measures the process and the disk with: CPU time from `getrusage` (user
//! and system, microseconds), peak RSS, a background writer that keeps the same disk busy
//! (`--disk-noise`), and startup timed in a fresh process on files evicted from the page
//! cache (`posix_fadvise(DONTNEED)` after a `syncfs`, which needs no privileges). Part of
//! `bench`; nothing here touches the runtime.

use std::io::Write as _;
use std::path::{Path, PathBuf};
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

/// The process's I/O accounting (`/proc/self/io`): read and write syscalls (sockets and
/// pipes too), bytes passed to `write` and bytes sent to the storage layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub(super) struct ProcIo {
    pub syscr: f64,
    pub syscw: f64,
    pub wchar: f64,
    pub write_bytes: f64,
}

impl ProcIo {
    /// `/proc/self/io` (all threads of the process); zeros where it cannot be read.
    pub(super) fn read() -> ProcIo {
        let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        ProcIo {
            syscr: field("syscr"),
            syscw: field("syscw"),
            wchar: field("wchar"),
            write_bytes: field("write_bytes"),
        }
    }

    /// What changed since `before`, each count passed through `per` (per message).
    pub(super) fn per_message(&self, before: &ProcIo, per: impl Fn(f64) -> f64) -> ProcIo {
        ProcIo {
            syscr: per(self.syscr - before.syscr),
            syscw: per(self.syscw - before.syscw),
            wchar: per(self.wchar - before.wchar),
            write_bytes: per(self.write_bytes - before.write_bytes),
        }
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

/// A writer in a child process (`bench --noise-writer DIR`, so its CPU is not the bench's)
/// that keeps the disk busy: 1 MiB written and synced in a loop into one file of the bench's
/// directory (so on the same disk), until dropped.
pub(super) struct DiskNoise {
    dir: PathBuf,
    child: Option<std::process::Child>,
    written_mib: f64,
}

impl DiskNoise {
    pub(super) fn start(dir: &Path) -> Result<DiskNoise, CommandError> {
        let dir = dir.join("disk-noise");
        std::fs::create_dir_all(&dir)
            .map_err(|e| CommandError::Io(e).doing(dir.display().to_string()))?;
        let exe = std::env::current_exe()?;
        let child = std::process::Command::new(exe)
            .arg("bench")
            .arg("--noise-writer")
            .arg(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| CommandError::Io(e).doing("disk noise writer"))?;
        Ok(DiskNoise {
            dir,
            child: Some(child),
            written_mib: 0.0,
        })
    }

    /// Stops the writer; returns the MiB it wrote.
    pub(super) fn stop(mut self) -> f64 {
        self.finish();
        self.written_mib
    }

    fn finish(&mut self) {
        let Some(child) = self.child.take() else {
            return;
        };
        let _ = std::fs::write(self.dir.join("stop"), b"");
        if let Ok(out) = child.wait_with_output() {
            self.written_mib = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .unwrap_or(0.0);
        }
    }
}

impl Drop for DiskNoise {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The `--noise-writer DIR` child: writes and syncs 1 MiB at a time into a 64 MiB ring in
/// DIR until a file `stop` appears there, then prints the MiB written.
pub fn noise_writer(dir: &Path) -> Result<f64, CommandError> {
    let path = dir.join("disk-noise.bin");
    let mut file = std::fs::File::create(&path)
        .map_err(|e| CommandError::Io(e).doing(path.display().to_string()))?;
    let chunk = vec![0x5a_u8; 1 << 20];
    let mut round = 0u64;
    while !dir.join("stop").exists() {
        if round.is_multiple_of(64) {
            std::io::Seek::rewind(&mut file)?;
        }
        file.write_all(&chunk)
            .and_then(|()| file.sync_data())
            .map_err(CommandError::Io)?;
        round += 1;
    }
    Ok(round as f64)
}

/// Evicts every file under `state` (the graph files, their packs, the journals) from the
/// page cache (they are synced first, since dirty pages cannot be dropped). Returns whether
/// every file could be advised.
pub(super) fn evict(state: &Path) -> bool {
    use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};
    let files = state_files(state);
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

/// The regular files under `state`.
fn state_files(state: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![state.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                dirs.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path());
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
    let loaded = store.load_all(jiff::Timestamp::now())?;
    std::hint::black_box(loaded.graphs.len());
    Ok(started.elapsed().as_secs_f64() * 1000.0)
}

/// Runs `personad bench --startup-probe STATE` in a fresh process on files evicted from the
/// page cache; returns its load time and whether the files were cold.
pub(super) fn cold_startup(state: &Path) -> Result<(f64, bool), CommandError> {
    let cold = evict(state);
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(exe)
        .arg("bench")
        .arg("--startup-probe")
        .arg(state)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| CommandError::Io(e).doing("startup probe"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let ms = text
        .trim()
        .parse::<f64>()
        .map_err(|_| CommandError::Internal(format!("startup probe printed {text:?}")))?;
    Ok((ms, cold))
}
