//! `personad bench --daemon`: the daemon path, measured. The daemon `run --telegram memory
//! --planner echo` builds (its composition root, `app::daemon`: pumps and sinks, the
//! admission chain, the planner, the governor, the memory Telegram with its transcripts,
//! the control socket, the leases) runs in this process on a temp state directory inside
//! `--state` (so on the same disk), fed through its real control socket as `ctl say
//! --no-wait` does, chats in turn. Once it is quiet (every message applied, nothing in
//! flight, nothing left to write) it is stopped gracefully, every chat's transcript is read
//! back to check each message was answered, and the figures are: wall time and messages/s
//! to quiet; user and system CPU, the store's own syscalls (`io_stats`) and the process's
//! read/write syscalls and bytes (`/proc/self/io`), per message, from the first message to
//! the end of the graceful stop; peak RSS.
//!
//! It builds nothing of the daemon itself (it asks `app::daemon` to run), and it measures
//! whatever the wiring does. Called by `bench`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::adapters::memory::{MemoryTelegram, user_id_for};
use crate::adapters::store::io_stats::{self, IoCounts};
use crate::adapters::store::{self, StateDir};
use crate::app::bench::AGENT;
use crate::app::bench::probe::{self, ProcIo};
use crate::app::cli::{BenchArgs, Cli, Command, CtlCommand, GlobalArgs, RunArgs};
use crate::app::commands::CommandError;
use crate::app::ops::ctl;
use crate::core::model::ChatId;
use crate::ports::clock::{SharedClock, SystemClock};

/// Control connections the feeder keeps open at once (the socket serves 32).
const FEEDERS: usize = 8;
/// One `wait-quiet` waits this long at most (the daemon's cap), with this horizon (a
/// debounce pending is not quiet).
const QUIET_WAIT_SECS: u64 = 50;
const QUIET_HORIZON_SECS: u64 = 600;
/// How many `wait-quiet` rounds before the bench gives up (about an hour).
const QUIET_ROUNDS: usize = 72;

/// The store's own syscalls per message (`io_stats`).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(super) struct StoreIoPerMessage {
    pub fsync: f64,
    pub fdatasync: f64,
    pub rename: f64,
    pub open: f64,
    pub open_absent: f64,
    pub mkdir: f64,
    pub temp_file: f64,
}

/// Everything `bench --daemon` measures (the `--json` object).
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct DaemonReport {
    pub scenario: &'static str,
    pub chats: usize,
    pub messages_per_chat: usize,
    pub max_in_flight: usize,
    pub messages: u64,
    /// Messages an answer followed in their chat (every one, or the bench fails).
    pub answered: u64,
    /// Messages the persona sent.
    pub answers: u64,
    /// From the first message to quiet.
    pub total_s: f64,
    pub messages_per_s: f64,
    /// The graceful stop after quiet (inside the CPU and syscall window).
    pub stop_s: f64,
    pub user_cpu_ms_per_message: f64,
    pub sys_cpu_ms_per_message: f64,
    pub cpu_ms_per_message: f64,
    pub peak_rss_mb: f64,
    /// The store's syscalls over the window, in all and per message.
    pub store_io: IoCounts,
    pub store_io_per_message: StoreIoPerMessage,
    /// `/proc/self/io` over the window, per message.
    pub proc_io_per_message: ProcIo,
}

/// The counters of the measured window.
struct Counters {
    cpu: (f64, f64),
    store: IoCounts,
    proc_io: ProcIo,
}

impl Counters {
    fn now() -> Counters {
        Counters {
            cpu: probe::cpu_ms(),
            store: io_stats::snapshot(),
            proc_io: ProcIo::read(),
        }
    }
}

/// The chat user `i` writes in (a direct chat named after the user).
fn user(i: usize) -> String {
    format!("user{i}")
}

/// The bench's directories: the daemon's state, its agents (one persona), its prompts.
fn prepare(root: &Path) -> Result<(PathBuf, PathBuf, PathBuf), CommandError> {
    let (state, agents, prompts) = (
        root.join("state"),
        root.join("agents"),
        root.join("prompts"),
    );
    for dir in [&state, &agents, &prompts] {
        store::ensure_private_dir(dir)?;
    }
    std::fs::write(agents.join(format!("{AGENT}.md")), super::persona_source())
        .map_err(|e| CommandError::Io(e).doing("writing the bench persona"))?;
    Ok((state, agents, prompts))
}

/// The daemon's arguments: `run --telegram memory --planner echo`, no file watching, no
/// human pacing (sends go out at once), the bench's slots and debounce.
fn run_args(args: &BenchArgs) -> Result<RunArgs, CommandError> {
    let mut argv: Vec<String> = [
        "personad",
        "run",
        "--telegram",
        "memory",
        "--planner",
        "echo",
        "--no-watch",
        "--typing-speed",
        "100000",
        "--start-typing-delay",
        "0",
    ]
    .map(String::from)
    .to_vec();
    argv.extend([
        "--max-in-flight".into(),
        args.max_in_flight.max(1).to_string(),
    ]);
    if let Some(ms) = args.debounce_ms {
        argv.extend(["--debounce-ms".into(), ms.to_string()]);
    }
    match <Cli as clap::Parser>::try_parse_from(argv) {
        Ok(Cli {
            command: Command::Run(run),
            ..
        }) => Ok(run),
        Ok(_) => Err(CommandError::Internal(
            "the daemon's arguments are not `run`".into(),
        )),
        Err(e) => Err(CommandError::Internal(format!(
            "the daemon's arguments do not parse: {e}"
        ))),
    }
}

/// Runs the daemon bench and returns its figures.
pub(super) async fn run(
    global: &GlobalArgs,
    args: &BenchArgs,
) -> Result<DaemonReport, CommandError> {
    let tmp = super::temp_root(&global.state_dir, "personad-bench-daemon-")?;
    let (state, agents, prompts) = prepare(tmp.path())?;
    let daemon_global = GlobalArgs {
        agents_dir: agents,
        prompts_path: prompts.display().to_string(),
        state_dir: state.clone(),
        ..global.clone()
    };
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let daemon = crate::app::daemon::run_telling(daemon_global, run_args(args)?, Some(ready_tx));
    let socket = ctl::socket_path(&StateDir::new(&state), None);
    let drive = async {
        // The daemon did not start: its own error says why.
        if ready_rx.await.is_err() {
            return None;
        }
        let driven = drive(&socket, args).await;
        // Stopped in every case, so the daemon's future ends.
        let stop_began = Instant::now();
        let stopped = ask_ok(&socket, CtlCommand::Stop).await;
        Some((driven, stopped, stop_began))
    };
    let (ran, driven) = tokio::join!(daemon, drive);
    let ended = Instant::now();
    let after = Counters::now();
    ran?;
    let Some((driven, stopped, stop_began)) = driven else {
        return Err(CommandError::Internal(
            "the daemon ended before it was ready".into(),
        ));
    };
    let (before, total_time) = driven?;
    stopped?;
    let (answered, answers) = answers(&state, args).await?;
    let messages = (args.chats * args.messages_per_chat) as u64;
    if answered < messages {
        return Err(CommandError::Internal(format!(
            "only {answered} of {messages} messages were answered"
        )));
    }
    Ok(report(
        args,
        Window {
            before,
            after,
            total_time,
            stop_time: ended.duration_since(stop_began),
        },
        (answered, answers),
    ))
}

/// The measured window.
struct Window {
    before: Counters,
    after: Counters,
    total_time: Duration,
    stop_time: Duration,
}

fn report(args: &BenchArgs, w: Window, (answered, answers): (u64, u64)) -> DaemonReport {
    let messages = (args.chats * args.messages_per_chat) as u64;
    let per = |v: f64| {
        if messages == 0 {
            0.0
        } else {
            v / messages as f64
        }
    };
    let store_io = w.after.store.since(&w.before.store);
    let count = |v: u64| per(v as f64);
    let (user, sys) = (
        w.after.cpu.0 - w.before.cpu.0,
        w.after.cpu.1 - w.before.cpu.1,
    );
    DaemonReport {
        scenario: "daemon",
        chats: args.chats,
        messages_per_chat: args.messages_per_chat,
        max_in_flight: args.max_in_flight.max(1),
        messages,
        answered,
        answers,
        total_s: w.total_time.as_secs_f64(),
        messages_per_s: messages as f64 / w.total_time.as_secs_f64().max(1e-9),
        stop_s: w.stop_time.as_secs_f64(),
        user_cpu_ms_per_message: per(user),
        sys_cpu_ms_per_message: per(sys),
        cpu_ms_per_message: per(user + sys),
        peak_rss_mb: probe::peak_rss_mb(),
        store_io,
        store_io_per_message: StoreIoPerMessage {
            fsync: count(store_io.fsync),
            fdatasync: count(store_io.fdatasync),
            rename: count(store_io.rename),
            open: count(store_io.open),
            open_absent: count(store_io.open_absent),
            mkdir: count(store_io.mkdir),
            temp_file: count(store_io.temp_file),
        },
        proc_io_per_message: w.after.proc_io.per_message(&w.before.proc_io, per),
    }
}

/// Feeds every message through the control socket, chats in turn (message 0 to every chat,
/// then message 1, ...), and waits until the daemon is quiet. Returns the counters taken
/// before the first message and the time to quiet.
async fn drive(socket: &Path, args: &BenchArgs) -> Result<(Counters, Duration), CommandError> {
    let total = args.chats * args.messages_per_chat;
    let next = Arc::new(AtomicUsize::new(0));
    let before = Counters::now();
    let first = Instant::now();
    let chats = args.chats;
    let mut feeders = tokio::task::JoinSet::new();
    for _ in 0..FEEDERS.min(total.max(1)) {
        let (next, socket) = (Arc::clone(&next), socket.to_path_buf());
        feeders.spawn(async move {
            loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                if j >= total {
                    return Ok::<(), CommandError>(());
                }
                let (round, chat) = (j / chats, j % chats);
                ask_ok(&socket, say(user(chat), round)).await?;
            }
        });
    }
    while let Some(fed) = feeders.join_next().await {
        fed??;
    }
    for _ in 0..QUIET_ROUNDS {
        let quiet = CtlCommand::WaitQuiet {
            timeout: QUIET_WAIT_SECS,
            horizon: QUIET_HORIZON_SECS,
        };
        let response = ctl::ask(socket, &ctl::request_for(quiet)?).await?;
        if response.ok {
            return Ok((before, first.elapsed()));
        }
    }
    Err(CommandError::Unavailable(format!(
        "the daemon was not quiet after {} s",
        first.elapsed().as_secs()
    )))
}

/// `ctl say --no-wait --from <user> message <round>`.
fn say(from: String, round: usize) -> CtlCommand {
    CtlCommand::Say {
        agent: None,
        chat: None,
        from,
        group: None,
        reply_to: None,
        text: vec![format!("message {round}")],
        no_wait: true,
        wait: None,
    }
}

/// Sends one `ctl` command; a refusal is an error.
async fn ask_ok(socket: &Path, cmd: CtlCommand) -> Result<(), CommandError> {
    ctl::ask_ok(socket, &ctl::request_for(cmd)?).await.map(drop)
}

/// Reads the transcripts back (after the stop): how many messages an answer followed in
/// their chat, and how many answers were sent.
async fn answers(state: &Path, args: &BenchArgs) -> Result<(u64, u64), CommandError> {
    let dir = StateDir::new(state).memory_dir(AGENT);
    let chats = args.chats;
    tokio::task::spawn_blocking(move || -> Result<(u64, u64), CommandError> {
        let clock: SharedClock = Arc::new(SystemClock);
        let telegram = MemoryTelegram::new(AGENT, clock, Some(dir))?;
        let (mut answered, mut answers) = (0u64, 0u64);
        for i in 0..chats {
            let log = telegram.transcript(ChatId(user_id_for(&user(i))));
            let last_answer = log.iter().rposition(|m| m.outgoing);
            answers += log.iter().filter(|m| m.outgoing).count() as u64;
            answered +=
                last_answer.map_or(0, |at| log[..at].iter().filter(|m| !m.outgoing).count()) as u64;
        }
        Ok((answered, answers))
    })
    .await
    .map_err(|e| CommandError::Join(e).doing("reading the transcripts"))?
}

/// The human-readable table.
pub(super) fn render(r: &DaemonReport) -> String {
    let s = &r.store_io_per_message;
    let p = &r.proc_io_per_message;
    format!(
        "personad bench --daemon: {} chats x {} message(s) through `ctl say`, {} in flight\n\
         answered             {} of {} messages ({} answers sent)\n\
         total                {:>9.2} s to quiet ({:.0} messages/s), stop {:.2} s\n\
         CPU per message      {:.3} ms (user {:.3} ms, sys {:.3} ms)\n\
         peak RSS             {:>9.1} MB\n\
         store per message    fsync {:.2}, fdatasync {:.2}, rename {:.2}, open {:.2}, absent {:.2}, mkdir {:.2}, temp files {:.2}\n\
         process per message  {:.1} read and {:.1} write syscalls, {:.0} bytes written ({:.0} to storage)\n",
        r.chats,
        r.messages_per_chat,
        r.max_in_flight,
        r.answered,
        r.messages,
        r.answers,
        r.total_s,
        r.messages_per_s,
        r.stop_s,
        r.cpu_ms_per_message,
        r.user_cpu_ms_per_message,
        r.sys_cpu_ms_per_message,
        r.peak_rss_mb,
        s.fsync,
        s.fdatasync,
        s.rename,
        s.open,
        s.open_absent,
        s.mkdir,
        s.temp_file,
        p.syscr,
        p.syscw,
        p.wchar,
        p.write_bytes,
    )
}
