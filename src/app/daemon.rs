//! `personad run` and `personad login`: the daemon's wiring and lifecycle. Loads personas and
//! settings, opens every enabled agent's account (MTProto, or the in-memory Telegram with
//! `--telegram memory`; an agent that cannot start is reported and does not stop the
//! others), starts the runtime with its heartbeat, the owner controls, the control socket,
//! the optional metrics endpoint and the file watcher, and tells systemd where it stands:
//! `READY=1` once graphs are loaded, `STATUS=` every 10 s, `WATCHDOG=1` from the tick loop's
//! heartbeat, `RELOADING=1`/`READY=1` around a reload, `STOPPING=1` on shutdown. One signal
//! task turns SIGTERM/SIGINT into a graceful stop (a second one exits at once) and SIGHUP
//! into a reload. It owns no logic beyond that wiring; called by the binary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::adapters::governor::{Governor, GovernorConfig};
use crate::adapters::llm::provider::Router;
use crate::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use crate::adapters::memory::MemoryTelegram;
use crate::adapters::mtproto::{self, ApiHash, ConnectOptions, Connected, Credentials};
use crate::adapters::store::{GraphStore, StateDir};
use crate::app::cli::{
    GlobalArgs, LoginArgs, PlannerChoice, RunArgs, TelegramArgs, TelegramChoice,
};
use crate::app::commands::{
    CmdResult, CommandError, exit, find_persona, load_personas_async, reload_personas,
};
use crate::app::ops::controls::{Controller, Hooks, Seat};
use crate::app::ops::metrics::Health;
use crate::app::ops::sdnotify::{self, Notifier};
use crate::app::ops::{ctl, metrics, watch};
use crate::app::services;
use crate::core::config::ConfigError;
use crate::core::persona::{LoadReport, Persona};
use crate::ingress::chain::Groups;
use crate::ingress::classifier::Classifier;
use crate::ingress::gate::{GateConfig, GroupGate, identity_for};
use crate::ingress::sink::RuntimeSink;
use crate::ports::clock::{SharedClock, SystemClock};
use crate::ports::llm::Llm;
use crate::ports::planner::{EchoPlanner, SharedPlanner};
use crate::ports::telegram::Telegram;
use crate::runtime::{AgentHandle, Heartbeat, RuntimeHandle, Status};
mod wiring;
use wiring::*;
mod fleet;

/// Longest the tick loop sleeps without a watchdog (it bounds `/healthz` too).
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
/// `STATUS=` lines go out at most this often.
const STATUS_EVERY: Duration = Duration::from_secs(10);
/// Start-up time asked of systemd per agent connection (`EXTEND_TIMEOUT_USEC`).
const CONNECT_ALLOWANCE: Duration = Duration::from_secs(90);
/// Quiet time after the last file change before a reload.
const WATCH_QUIET: Duration = Duration::from_millis(300);

fn credentials(args: &TelegramArgs) -> Result<Credentials, CommandError> {
    match (args.api_id, args.api_hash.as_deref()) {
        (Some(api_id), Some(hash)) if !hash.trim().is_empty() => Ok(Credentials {
            api_id,
            api_hash: ApiHash::new(hash.trim()),
            servers: if args.test_dc {
                mtproto::Servers::Test
            } else {
                mtproto::Servers::Production
            },
        }),
        _ => Err(CommandError::Config(ConfigError {
            name: "telegram",
            reason: "TELEGRAM_API_ID and TELEGRAM_API_HASH are required (get them at my.telegram.org; see docs/telegram.md)".into(),
        })),
    }
}

/// A secret from systemd's credentials directory (`LoadCredential=`), exported under the
/// environment variable the rest of the program reads, unless that is already set.
fn credentials_from_systemd(global: &mut TelegramArgs) {
    let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from) else {
        return;
    };
    let read = |name: &str| systemd_credential(&dir, name);
    if global.api_hash.is_none() {
        global.api_hash = read("telegram_api_hash");
    }
    if global.api_id.is_none() {
        global.api_id = read("telegram_api_id").and_then(|s| s.parse().ok());
    }
}

/// One credential file from systemd's credentials directory, trimmed; `None` when it is
/// absent or empty. Read like other operator files (`store::read_operator_file`: regular file,
/// capped, never blocking on a FIFO); one that cannot be read is logged by name (never its
/// content) and treated as absent.
fn systemd_credential(dir: &std::path::Path, name: &str) -> Option<String> {
    match crate::adapters::store::read_operator_file(&dir.join(name)) {
        Ok(text) => text.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
        Err(e) => {
            tracing::warn!(event = "credential_unreadable", error = %e, "ignoring a credential file");
            None
        }
    }
}

/// LLM keys from systemd's credentials directory (`LoadCredential=`): the file named after
/// the variable in lower case (`gemini_api_key`, `openai_api_key`, ...), for every variable the
/// environment leaves unset. Read once, never exported to the environment.
fn llm_keys_from_systemd() -> BTreeMap<String, String> {
    let mut keys = BTreeMap::new();
    let Some(dir) = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from) else {
        return keys;
    };
    for name in crate::core::llm::KEY_VARIABLES {
        if std::env::var_os(name).is_some() {
            continue;
        }
        if let Some(key) = systemd_credential(&dir, &name.to_lowercase()) {
            keys.insert((*name).to_string(), key);
        }
    }
    keys
}

/// The LLM stack of `run`: every provider the environment (or systemd's credentials) configures
/// behind the router, wrapped in the one retry policy and metered. The router is returned too,
/// to check each persona's provider.
fn llm_stack(
    retry: crate::adapters::llm::retry::RetryConfig,
    clock: SharedClock,
) -> (Arc<dyn Llm>, Arc<Router>) {
    let keys = llm_keys_from_systemd();
    let lookup = move |name: &str| std::env::var(name).ok().or_else(|| keys.get(name).cloned());
    let (llm, router) = crate::adapters::llm_planner::llm_from_lookup(lookup, retry, clock);
    (metrics::MeteredLlm::wrap(llm), router)
}

/// What group messages need: the classifier, the user ids of the daemon's personas (so they
/// never loop with each other) and the admission chain's gates.
#[derive(Clone)]
struct GroupWiring {
    classifier: Option<Classifier>,
    classifier_model: String,
    peers: Arc<Mutex<BTreeSet<i64>>>,
    /// The running gates by agent (the admission chain's group step; `/mode` applies at once).
    groups: Arc<Groups>,
}

/// How agents reach Telegram.
#[derive(Clone)]
enum Backend {
    Mtproto {
        creds: Credentials,
        opts: ConnectOptions,
        governor: GovernorConfig,
    },
    Memory {
        send_delay: Duration,
        /// Every persona's in-memory account is in this one world: they meet in groups and
        /// can write to each other.
        world: Arc<crate::adapters::memory::World>,
    },
}

/// One running agent.
struct Running {
    path: PathBuf,
    persona: Arc<Persona>,
    seat: Seat,
    pump_stop: Option<CancellationToken>,
}

/// The agents and what they need to start, stop and reload; owned by the reload task.
struct Fleet {
    global: GlobalArgs,
    backend: Backend,
    state: StateDir,
    clock: SharedClock,
    stop: CancellationToken,
    running: BTreeMap<String, Running>,
    /// Problems already logged, so a broken file is reported once, not at every reload.
    reported: BTreeSet<String>,
    pumps: Vec<JoinHandle<()>>,
    group: GroupWiring,
    /// Per MTProto agent: applies a persona's `# Send Limits` to its running governor.
    retune: std::sync::Mutex<BTreeMap<String, Retune>>,
}

/// Sets a running governor's limits from a persona's `# Send Limits`.
type Retune = Box<dyn Fn(&crate::core::persona::SendLimits) + Send>;

fn status_line(st: &Status) -> String {
    format!(
        "{} agent(s) up, {} chat(s) with plans, {} task(s) in flight",
        st.agents, st.graphs, st.in_flight
    )
}

/// The tick loop's heartbeat: marks the loop alive for `/healthz`, pings the watchdog (at
/// most every half interval), refreshes the gauges and sends `STATUS=` at most every 10 s.
fn heartbeat(
    every: Duration,
    health: Arc<Health>,
    notifier: Notifier,
    runtime: Arc<Mutex<Option<RuntimeHandle>>>,
    stall: &[u64],
) -> Heartbeat {
    let watchdog = sdnotify::watchdog_interval().is_some();
    let last = Mutex::new((None::<Instant>, None::<Instant>));
    let beat = move || {
        health.beat();
        let now = Instant::now();
        let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
        if watchdog && last.0.is_none_or(|t| now.duration_since(t) >= every / 2) {
            notifier.watchdog();
            last.0 = Some(now);
        }
        let handle = runtime
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(h) = handle {
            let st = h.status();
            ::metrics::gauge!("personad_agents").set(st.agents as f64);
            ::metrics::gauge!("personad_graphs_on_disk").set((st.graphs + st.orphaned) as f64);
            ::metrics::gauge!("personad_tasks_in_flight").set(st.in_flight as f64);
            ::metrics::gauge!("personad_queue_depth").set(h.queue_depth() as f64);
            if st.started && last.1.is_none_or(|t| now.duration_since(t) >= STATUS_EVERY) {
                notifier.status(&status_line(&st));
                last.1 = Some(now);
            }
        }
    };
    Heartbeat {
        every,
        beat: Arc::new(beat),
        stall: injected_stall(stall),
    }
}

/// `run --debug-stall-loop AFTER_MS,FOR_MS`: one stall of the tick loop, AFTER_MS after its
/// first beat.
fn injected_stall(stall: &[u64]) -> Option<Arc<dyn Fn() -> Option<Duration> + Send + Sync>> {
    let [after, length] = *stall else { return None };
    let (after, length) = (Duration::from_millis(after), Duration::from_millis(length));
    let first = Mutex::new((None::<Instant>, false));
    Some(Arc::new(move || {
        let mut first = first.lock().unwrap_or_else(PoisonError::into_inner);
        let started = *first.0.get_or_insert_with(Instant::now);
        if first.1 || started.elapsed() < after {
            return None;
        }
        first.1 = true;
        Some(length)
    }))
}

/// The runtime settings of `run`: the shared ones, the shutdown grace, where drafts go.
fn run_config(
    args: &RunArgs,
) -> Result<crate::core::config::RuntimeConfig, crate::core::config::ConfigError> {
    let mut config = args.runtime.raw().validate()?;
    config.shutdown_grace = Duration::from_secs(args.shutdown_grace_secs);
    config.drafts_chat = args
        .admin_chats
        .first()
        .copied()
        .map(crate::core::model::ChatId);
    Ok(config)
}

/// `personad run`.
pub async fn run(global: GlobalArgs, mut args: RunArgs) -> CmdResult {
    let config = run_config(&args)?;
    let notifier = Notifier::from_env();
    let clock: SharedClock = Arc::new(SystemClock);
    let state = StateDir::new(&global.state_dir);
    let backend = backend_for(&mut args)?;
    crate::app::ops::listen::raise_descriptor_limit();
    // A second daemon on the same state directory would fight over sessions and graphs.
    let socket = ctl::socket_path(&state);
    if tokio::net::UnixStream::connect(&socket).await.is_ok() {
        return Err(CommandError::Unavailable(format!(
            "another personad is running on this state directory (it answers on {})",
            socket.display()
        )));
    }
    let lock = Arc::new(crate::app::commands::lock_state(&global)?);
    let report = load_personas_async(&global).await?;
    let memory = matches!(backend, Backend::Memory { .. });
    let PlannerStack {
        planner,
        llm,
        usage,
        use_llm,
    } = planner_stack(&args, &config, &state, &clock, &report, memory).await?;
    let group = GroupWiring {
        classifier: use_llm.then(|| Classifier::new(Arc::clone(&llm), Arc::clone(&clock))),
        classifier_model: args.classifier_model.clone(),
        peers: Arc::new(Mutex::new(BTreeSet::new())),
        groups: Groups::new(),
    };
    let groups = Arc::clone(&group.groups);
    let stop = CancellationToken::new();
    let mut fleet = Fleet::new(
        global.clone(),
        backend,
        state.clone(),
        &clock,
        stop.clone(),
        group,
    );
    fleet.report_problems(&report, true);
    let opened = open_agents(&mut fleet, &report, &notifier).await?;
    let heartbeat_every =
        sdnotify::watchdog_interval().map_or(DEFAULT_HEARTBEAT, |w| w.min(DEFAULT_HEARTBEAT));
    let health = Arc::new(Health::new(heartbeat_every));
    let status_cell: Arc<Mutex<Option<RuntimeHandle>>> = Arc::new(Mutex::new(None));
    let mut runtime = services::runtime(
        config,
        agent_handles(&opened),
        planner,
        GraphStore::new(state.clone()),
        &clock,
    )
    .with_heartbeat(heartbeat(
        heartbeat_every,
        Arc::clone(&health),
        notifier.clone(),
        Arc::clone(&status_cell),
        &args.debug_stall_loop,
    ));
    let llm = use_llm.then_some(llm);
    if let Some(media) =
        services::media_pipeline(&args.media, llm, state.clone(), &clock, &usage).await?
    {
        runtime = runtime.with_media(media);
    }
    let handle = runtime.handle();
    *status_cell.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle.clone());
    let (reload_tx, reload_rx) = mpsc::unbounded_channel::<()>();
    let controller = controller_for(
        &args, &state, &handle, &clock, &notifier, &reload_tx, &groups, &usage,
    );
    // Signals are handled from here on (SIGHUP must not kill a starting daemon).
    let immediate = Arc::new(Notify::new());
    let signals = tokio::spawn(signal_loop(
        handle.clone(),
        notifier.clone(),
        reload_tx.clone(),
        Arc::clone(&immediate),
    ));
    // The admission chain every inbound message takes: owner controls, then the group gates.
    let gated = services::admission(&handle, Some(controller.gate()), &groups);
    controller.set_ingress(gated.clone());
    // Before the loop starts: the runtime learns the owner's pauses (as events queued ahead
    // of everything), so no scheduled intent fires in a paused chat at start.
    for (_, persona, seat, _) in &opened {
        controller.add_agent(&persona.name, seat.clone());
    }
    let run = tokio::spawn(runtime.run());
    for (path, persona, seat, connected) in opened {
        let pump_stop = fleet.pump(&persona, &seat, connected, gated.clone());
        fleet.running.insert(
            persona.name.clone(),
            Running {
                path,
                persona,
                seat,
                pump_stop,
            },
        );
    }
    let web = web_endpoints(&args, &state, &health, &controller, &handle, &usage, &stop).await;
    let [metrics_task, console_task] = match web {
        Ok(tasks) => tasks,
        Err(e) => {
            stop.cancel();
            handle.shutdown("a web endpoint is unavailable");
            let _ = run.await;
            return Err(CommandError::Unavailable(e.0));
        }
    };
    let (_watcher, ctl_task) =
        watch_and_ctl(&args, &global, &state, &controller, &reload_tx, &stop).await;
    handle.wait_started().await;
    let st = handle.status();
    tracing::info!(
        event = "ready",
        agents = st.agents,
        graphs = st.graphs,
        "daemon ready"
    );
    notifier.ready(&status_line(&st));
    let reloader = spawn_reloader(
        fleet,
        reload_rx,
        gated.clone(),
        notifier.clone(),
        Arc::clone(&controller),
    );
    let result = match until_end(run, &immediate, lock, clock).await {
        Ended::Runtime(r) => r,
        Ended::Now(code) => {
            stop.cancel();
            return code;
        }
    };
    notifier.stopping();
    stop.cancel();
    signals.abort();
    drop(reload_tx);
    drop(controller);
    wind_down(reloader, [ctl_task, metrics_task, console_task], &usage).await;
    let result = result.map_err(|e| CommandError::Join(e).doing("runtime task failed"))?;
    match result {
        Ok(report) if report.no_agents_left => Ok(ExitCode::from(exit::UNAVAILABLE)),
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(CommandError::Runtime(e)),
    }
}

/// How the daemon's run ended.
enum Ended {
    /// The runtime stopped (gracefully, or with an error).
    Runtime(
        Result<
            Result<crate::runtime::StopReport, crate::runtime::RuntimeError>,
            tokio::task::JoinError,
        >,
    ),
    /// Exit at once with this result: a second signal, or the state directory gone.
    Now(CmdResult),
}

/// Waits for the runtime to end, a second signal, or the state directory to go.
async fn until_end(
    run: tokio::task::JoinHandle<Result<crate::runtime::StopReport, crate::runtime::RuntimeError>>,
    immediate: &Notify,
    lock: Arc<crate::adapters::store::StateLock>,
    clock: SharedClock,
) -> Ended {
    tokio::select! {
        r = run => Ended::Runtime(r),
        () = immediate.notified() => {
            tracing::warn!(event = "exit_now", "second signal: exiting at once; tasks in flight run again after the next start");
            Ended::Now(Ok(ExitCode::SUCCESS))
        }
        gone = state_gone(lock, clock) => {
            // Nothing more is written: a graceful stop would make the directory again.
            tracing::error!(event = "state_directory_gone", error = %gone, "stopping");
            Ended::Now(Err(CommandError::StateGone(gone)))
        }
    }
}

/// How often the daemon checks that its state directory is still the one it locked.
const STATE_CHECK_EVERY: Duration = Duration::from_secs(2);

/// Resolves when the state directory (or its lock file) was removed or replaced.
async fn state_gone(
    lock: Arc<crate::adapters::store::StateLock>,
    clock: SharedClock,
) -> crate::adapters::store::StateGone {
    loop {
        crate::ports::clock::pause(clock.as_ref(), STATE_CHECK_EVERY).await;
        let lock = Arc::clone(&lock);
        if let Ok(Err(gone)) = tokio::task::spawn_blocking(move || lock.check()).await {
            return gone;
        }
    }
}

/// `personad login` (and `--logout`).
pub async fn login(global: GlobalArgs, mut args: LoginArgs) -> CmdResult {
    credentials_from_systemd(&mut args.telegram);
    let creds = credentials(&args.telegram)?;
    let report = load_personas_async(&global).await?;
    let persona = find_persona(&report, &args.agent)?;
    let state = StateDir::new(&global.state_dir);
    if args.logout {
        mtproto::logout(&state, &persona.name, &creds)
            .await
            .map_err(|e| CommandError::Unavailable(e.to_string()))?;
        println!("{}: signed out; the session file is deleted", persona.name);
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "Logging in {} ({}). Telegram sends a code to the account's other devices.",
        persona.name,
        persona.masked_phone()
    );
    let done = mtproto::login(&state, &persona.name, &persona.phone, &creds)
        .await
        .map_err(|e| CommandError::Unavailable(e.to_string()))?;
    println!("{}: {done}", persona.name);
    Ok(ExitCode::SUCCESS)
}
