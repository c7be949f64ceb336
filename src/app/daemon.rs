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
use crate::app::commands::{CmdResult, CommandError, exit, find_persona, load_personas_async};
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
}

impl Fleet {
    /// Logs each new problem of the report once.
    fn report_problems(&mut self, report: &LoadReport, starting: bool) {
        // Forget problems that are gone, so the same mistake made again is reported again.
        let current: BTreeSet<String> = report
            .entries
            .iter()
            .flat_map(|e| e.problems.iter().filter(|p| p.is_error()))
            .map(ToString::to_string)
            .collect();
        self.reported.retain(|p| current.contains(p));
        for entry in &report.entries {
            for p in entry.problems.iter().filter(|p| p.is_error()) {
                let text = p.to_string();
                if self.reported.insert(text.clone()) {
                    let kept = entry
                        .name
                        .as_deref()
                        .is_some_and(|n| self.running.contains_key(n));
                    if starting {
                        tracing::error!(event = "agent_not_started", problem = %text, "agent not started");
                    } else if kept {
                        tracing::error!(event = "persona_edit_rejected", problem = %text, "persona edit rejected: the previous version keeps running");
                    } else {
                        tracing::error!(event = "persona_invalid", problem = %text, "persona file unusable");
                    }
                }
            }
        }
    }

    /// Opens an agent's account: MTProto (connected, not yet pumping) or in-memory.
    async fn open(&self, persona: &Persona) -> Result<(Seat, Option<Connected>), String> {
        match &self.backend {
            Backend::Mtproto {
                creds,
                opts,
                governor,
            } => {
                let connected = mtproto::connect(
                    &self.state,
                    &persona.name,
                    creds,
                    *opts,
                    Arc::clone(&self.clock),
                )
                .await
                .map_err(|e| e.to_string())?;
                let governed = Governor::new(
                    connected.telegram.clone(),
                    Arc::clone(&self.clock),
                    governor.clone(),
                );
                let seat = Seat {
                    telegram: Arc::new(governed),
                    memory: None,
                };
                Ok((seat, Some(connected)))
            }
            Backend::Memory { send_delay } => {
                let send_delay = *send_delay;
                let (name, clock) = (persona.name.clone(), Arc::clone(&self.clock));
                let dir = self.state.memory_dir(&persona.name);
                let memory = tokio::task::spawn_blocking(move || {
                    crate::adapters::store::ensure_private_dir(&dir)?;
                    MemoryTelegram::new(&name, clock, Some(dir))
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
                memory.set_send_delay(send_delay);
                let memory = Arc::new(memory);
                let seat = Seat {
                    telegram: memory.clone() as Arc<dyn Telegram>,
                    memory: Some(memory),
                };
                Ok((seat, None))
            }
        }
    }

    /// Builds the agent's group gate (trigger modes, classifier, share of voice) and, for an
    /// MTProto agent, starts its update pump with that gate; returns the pump's stop token.
    fn pump(
        &mut self,
        persona: &Arc<Persona>,
        seat: &Seat,
        connected: Option<Connected>,
        handle: RuntimeHandle,
    ) -> Option<CancellationToken> {
        let stop = self.stop.child_token();
        let opts = match &self.backend {
            Backend::Mtproto { opts, .. } => Some(*opts),
            Backend::Memory { .. } => None,
        };
        let me = seat.telegram.self_id();
        let peers: Vec<i64> = {
            let mut all = self
                .group
                .peers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            all.insert(me);
            all.iter().copied().filter(|p| *p != me).collect()
        };
        let (clock, s, agent) = (Arc::clone(&self.clock), stop.clone(), persona.name.clone());
        let group = self.group.clone();
        let gate = GroupGate::new(GateConfig {
            agent: agent.clone(),
            // Telegram flags mentions of our @username as callouts.
            identity: identity_for(persona, me, None),
            persona: Arc::clone(persona),
            telegram: Arc::clone(&seat.telegram),
            runtime: handle.clone(),
            classifier: group.classifier,
            classifier_model: Some(group.classifier_model),
            clock: Arc::clone(&clock),
            peers,
            // Per-chat overrides come from the agent state the runtime reads (no second read
            // of that file), through the handle.
            modes: Default::default(),
        });
        group.groups.insert(&agent, gate);
        let (Some(connected), Some(opts)) = (connected, opts) else {
            return None;
        };
        self.pumps.push(tokio::spawn(async move {
            // Let the runtime read the agent's state (its trigger modes) before the first
            // updates reach the gate.
            handle.wait_agent_state(&agent).await;
            let sink = Arc::new(RuntimeSink {
                agent: agent.clone(),
                runtime: handle,
                groups: group.groups,
            });
            if let Err(e) = connected.serve(agent.clone(), sink, opts, clock, s).await {
                tracing::error!(event = "pump_stopped", agent = %agent, error = %e, "update pump stopped");
            }
        }));
        Some(stop)
    }

    /// Re-reads persona and role-prompt files and applies the difference to the running
    /// agents: changed personas take effect from their next task, new ones start, removed
    /// or disabled ones stop (their graphs stay on disk), a broken edit keeps the previous
    /// version, and a changed `Agent Phone` is refused until a restart.
    async fn reload(&mut self, handle: &RuntimeHandle, controller: &Controller) {
        let report = match load_personas_async(&self.global).await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(event = "reload_failed", error = %e, "reload failed: every agent keeps running as it was");
                return;
            }
        };
        self.report_problems(&report, false);
        let mut keep: BTreeSet<String> = BTreeSet::new();
        for entry in &report.entries {
            let Some(p) = &entry.persona else {
                if let Some(name) = self
                    .running
                    .iter()
                    .find(|(_, r)| r.path == entry.path)
                    .map(|(n, _)| n.clone())
                {
                    keep.insert(name);
                }
                continue;
            };
            if p.disabled {
                continue;
            }
            keep.insert(p.name.clone());
            match self.running.get_mut(&p.name) {
                Some(r) if r.persona.phone != p.phone => {
                    tracing::error!(event = "reload_phone_refused", agent = %p.name, file = %entry.path.display(), "Agent Phone changed: that needs a restart; the previous persona keeps running");
                }
                Some(r) => {
                    if format!("{:?}", r.persona) != format!("{p:?}") {
                        r.persona = Arc::new(p.clone());
                        r.path = entry.path.clone();
                        handle.upsert_agent(AgentHandle {
                            persona: Arc::clone(&r.persona),
                            telegram: Arc::clone(&r.seat.telegram),
                        });
                    }
                }
                None => match self.open(p).await {
                    Ok((seat, connected)) => {
                        let persona = Arc::new(p.clone());
                        controller.add_agent(&p.name, seat.clone());
                        handle.upsert_agent(AgentHandle {
                            persona: Arc::clone(&persona),
                            telegram: Arc::clone(&seat.telegram),
                        });
                        let pump_stop = self.pump(&persona, &seat, connected, handle.clone());
                        self.running.insert(
                            p.name.clone(),
                            Running {
                                path: entry.path.clone(),
                                persona,
                                seat,
                                pump_stop,
                            },
                        );
                    }
                    Err(e) => {
                        tracing::error!(event = "agent_start_failed", agent = %p.name, error = %e, "new agent cannot start");
                    }
                },
            }
        }
        let gone: Vec<String> = self
            .running
            .keys()
            .filter(|n| !keep.contains(*n))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = self.running.remove(&name) {
                if let Some(s) = r.pump_stop {
                    s.cancel();
                }
                controller.remove_agent(&name);
                self.group.groups.remove(&name);
                handle.remove_agent(&name, "its persona file was removed or disabled");
            }
        }
    }
}

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
    }
}

/// `personad run`.
pub async fn run(global: GlobalArgs, mut args: RunArgs) -> CmdResult {
    let mut config = args.runtime.raw().validate()?;
    config.shutdown_grace = Duration::from_secs(args.shutdown_grace_secs);
    let notifier = Notifier::from_env();
    let clock: SharedClock = Arc::new(SystemClock);
    let state = StateDir::new(&global.state_dir);
    let backend = backend_for(&mut args)?;
    // A second daemon on the same state directory would fight over sessions and graphs.
    let socket = ctl::socket_path(&state);
    if tokio::net::UnixStream::connect(&socket).await.is_ok() {
        return Err(CommandError::Unavailable(format!(
            "another personad is running on this state directory (it answers on {})",
            socket.display()
        )));
    }
    let _lock = crate::app::commands::lock_state(&global)?;
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
    let mut fleet = Fleet {
        global: global.clone(),
        backend,
        state: state.clone(),
        clock: Arc::clone(&clock),
        stop: stop.clone(),
        running: BTreeMap::new(),
        reported: BTreeSet::new(),
        pumps: Vec::new(),
        group,
    };
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
    ));
    if use_llm {
        let media =
            services::media_pipeline(&args.media, llm, state.clone(), &clock, Arc::clone(&usage))
                .await?;
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
    let run = tokio::spawn(runtime.run());
    for (path, persona, seat, connected) in opened {
        controller.add_agent(&persona.name, seat.clone());
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
    let metrics_task = match args.metrics_addr {
        Some(addr) => match metrics::serve(addr, Arc::clone(&health), stop.clone()).await {
            Ok(t) => Some(t),
            Err(e) => {
                stop.cancel();
                handle.shutdown("metrics endpoint unavailable");
                let _ = run.await;
                return Err(CommandError::Unavailable(e));
            }
        },
        None => None,
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
    let result = tokio::select! {
        r = run => r,
        () = immediate.notified() => {
            tracing::warn!(event = "exit_now", "second signal: exiting at once; tasks in flight run again after the next start");
            stop.cancel();
            return Ok(ExitCode::SUCCESS);
        }
    };
    notifier.stopping();
    stop.cancel();
    signals.abort();
    drop(reload_tx);
    drop(controller);
    wind_down(reloader, [ctl_task, metrics_task]).await;
    let result = result.map_err(|e| CommandError::Failed(format!("runtime task failed: {e}")))?;
    match result {
        Ok(report) if report.no_agents_left => Ok(ExitCode::from(exit::UNAVAILABLE)),
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(CommandError::Io(e.to_string())),
    }
}

/// After the runtime ended: the reloader hands the fleet back and its pumps get a moment to
/// stop; the control socket and the metrics endpoint a shorter one.
async fn wind_down(reloader: JoinHandle<Fleet>, servers: [Option<JoinHandle<()>>; 2]) {
    reloader.abort();
    if let Ok(fleet) = reloader.await {
        for p in fleet.pumps {
            let _ = tokio::time::timeout(Duration::from_secs(5), p).await;
        }
    }
    for t in servers.into_iter().flatten() {
        let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
    }
}

/// File watching (unless `--no-watch`) and, last, the control socket: once `personad ctl`
/// answers, watching and metrics are in place. Neither is fatal: each logs why it is missing.
async fn watch_and_ctl(
    args: &RunArgs,
    global: &GlobalArgs,
    state: &StateDir,
    controller: &Arc<Controller>,
    reload_tx: &mpsc::UnboundedSender<()>,
    stop: &CancellationToken,
) -> (Option<watch::DirWatcher>, Option<JoinHandle<()>>) {
    let _watcher = if args.no_watch {
        None
    } else {
        let mut dirs = vec![global.agents_dir.clone()];
        dirs.extend(global.prompt_dirs());
        match watch::watch(&dirs, WATCH_QUIET, reload_tx.clone()) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(event = "watch_unavailable", error = %e, "file watching unavailable: reload with SIGHUP or `personad ctl reload`");
                None
            }
        }
    };
    let ctl_task = match ctl::serve(state, Arc::clone(controller), stop.clone()).await {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::error!(event = "ctl_unavailable", error = %e, "control socket unavailable: `personad ctl` will not work");
            None
        }
    };
    (_watcher, ctl_task)
}

/// What the runtime knows of each opened agent: its persona and its Telegram.
fn agent_handles(opened: &[Opened]) -> Vec<AgentHandle> {
    opened
        .iter()
        .map(|(_, persona, seat, _)| AgentHandle {
            persona: Arc::clone(persona),
            telegram: Arc::clone(&seat.telegram),
        })
        .collect()
}

/// The Telegram backend `run` was asked for, with its credentials and limits.
fn backend_for(args: &mut RunArgs) -> Result<Backend, CommandError> {
    Ok(match args.telegram {
        TelegramChoice::Mtproto => {
            credentials_from_systemd(&mut args.credentials);
            Backend::Mtproto {
                creds: credentials(&args.credentials)?,
                opts: ConnectOptions {
                    flood_sleep_threshold: Duration::from_secs(args.flood_sleep_secs),
                    max_catch_up_age: Duration::from_secs(args.catch_up_minutes.saturating_mul(60)),
                },
                governor: GovernorConfig {
                    chat_min_gap: Duration::from_secs(args.send_gap_secs),
                    chat_per_minute: args.chat_sends_per_minute,
                    account_per_minute: args.account_sends_per_minute,
                    max_wait: Duration::from_secs(args.max_pacing_wait_secs),
                    ..GovernorConfig::default()
                },
            }
        }
        TelegramChoice::Memory => Backend::Memory {
            send_delay: Duration::from_millis(args.memory_send_delay_ms),
        },
    })
}

/// What plans and pays: the planner (LLM or echo), the LLM stack under it, the usage meter.
struct PlannerStack {
    planner: SharedPlanner,
    llm: Arc<dyn Llm>,
    usage: Arc<crate::adapters::llm::usage::UsageMeter>,
    /// Whether the LLM plans (and so describes media and classifies group messages).
    use_llm: bool,
}

/// Builds the planner stack and checks every active persona's LLM route: with some usable,
/// each unusable persona is reported; with none, the one error says why.
async fn planner_stack(
    args: &RunArgs,
    config: &crate::core::config::RuntimeConfig,
    state: &StateDir,
    clock: &SharedClock,
    report: &LoadReport,
    memory: bool,
) -> Result<PlannerStack, CommandError> {
    let llm_error = |reason: String| {
        CommandError::Config(ConfigError {
            name: "llm",
            reason,
        })
    };
    let default_llm = args
        .llm
        .default_choice()
        .map_err(|e| llm_error(e.to_string()))?;
    let retry = crate::adapters::llm::retry::RetryConfig::within_task_timeout(
        config.task_timeout,
        args.llm.llm_attempts,
    );
    let (llm, router) = llm_stack(retry, Arc::clone(clock));
    let usage = Arc::new(
        crate::adapters::llm::usage::UsageMeter::load_async(state.clone(), Arc::clone(clock))
            .await
            .map_err(|e| CommandError::Failed(e.to_string()))?,
    );
    let llm_planner = LlmPlanner::new(
        Arc::clone(&llm),
        LlmPlannerConfig {
            default_llm,
            temperature: args.llm.temperature,
            max_output_tokens: args.llm.max_output_tokens,
            max_tasks: args.llm.max_tasks,
            history_size: config.history_limit,
        },
    )
    .with_state(state.clone())
    .with_usage(Arc::clone(&usage));
    // Every agent whose provider is not configured is reported; with none usable, MTProto
    // stops here and the in-memory backend falls back to the echo planner.
    let mut problems = Vec::new();
    let mut usable = 0usize;
    for persona in report.active() {
        let route = llm_planner.route(persona);
        match router.check_route(&route) {
            Ok(()) => usable += 1,
            Err(why) => problems.push((persona.name.clone(), route, why)),
        }
    }
    // With some providers usable, each unusable persona is reported; with none, the one
    // error below says why (printed once).
    if usable > 0 && args.planner != PlannerChoice::Echo {
        for (agent, route, why) in &problems {
            tracing::error!(event = "llm_not_configured", agent = %agent, llm = %route, "the persona's LLM is not configured: {why}");
        }
    }
    let first_problem = problems.into_iter().next().map(|(_, _, why)| why);
    let use_llm = match args.planner {
        PlannerChoice::Echo => !memory,
        PlannerChoice::Llm => true,
        PlannerChoice::Auto => usable > 0 || !memory,
    };
    if use_llm
        && usable == 0
        && let Some(why) = first_problem
    {
        return Err(llm_error(why.to_string()));
    }
    let planner: SharedPlanner = if use_llm {
        Arc::new(llm_planner)
    } else {
        tracing::info!(
            event = "echo_planner",
            "no LLM: the offline echo planner answers"
        );
        Arc::new(EchoPlanner)
    };
    Ok(PlannerStack {
        planner,
        llm,
        usage,
        use_llm,
    })
}

/// An agent whose account is connected, ready to join the runtime.
type Opened = (PathBuf, Arc<Persona>, Seat, Option<Connected>);

/// Connects every enabled persona's account, one at a time (each asking systemd for more
/// start-up time); fails only when none could start.
async fn open_agents(
    fleet: &mut Fleet,
    report: &LoadReport,
    notifier: &Notifier,
) -> Result<Vec<Opened>, CommandError> {
    let mut opened = Vec::new();
    for entry in &report.entries {
        let Some(persona) = entry.persona.as_ref().filter(|p| !p.disabled) else {
            continue;
        };
        // Each connection may take a while: ask systemd for more start-up time, one agent
        // at a time, so a stuck start still times out.
        notifier.extend_timeout(CONNECT_ALLOWANCE, &format!("connecting {}", persona.name));
        match fleet.open(persona).await {
            Ok((seat, connected)) => {
                tracing::info!(event = "agent_connected", agent = %persona.name, "connected");
                opened.push((
                    entry.path.clone(),
                    Arc::new(persona.clone()),
                    seat,
                    connected,
                ));
            }
            Err(e) => {
                tracing::error!(event = "agent_start_failed", agent = %persona.name, error = %e, "cannot start")
            }
        }
    }
    if opened.is_empty() {
        return Err(CommandError::Unavailable(
            "no agent could start (see the errors above)".into(),
        ));
    }
    Ok(opened)
}

/// The owner controls: commands, pauses, `/mode` reaching the running group gates, usage
/// for `/status`.
#[allow(clippy::too_many_arguments)]
fn controller_for(
    args: &RunArgs,
    state: &StateDir,
    handle: &RuntimeHandle,
    clock: &SharedClock,
    notifier: &Notifier,
    reload_tx: &mpsc::UnboundedSender<()>,
    groups: &Arc<Groups>,
    usage: &Arc<crate::adapters::llm::usage::UsageMeter>,
) -> Arc<Controller> {
    let controller = {
        let (h, n, r) = (handle.clone(), notifier.clone(), reload_tx.clone());
        Controller::new(
            state.clone(),
            handle.clone(),
            Arc::clone(clock),
            args.admin_chats.clone(),
            Hooks {
                stop: Box::new(move |reason| {
                    n.stopping();
                    h.shutdown(reason);
                }),
                reload: Box::new(move || {
                    let _ = r.send(());
                }),
            },
        )
    };
    {
        let groups = Arc::clone(groups);
        controller.set_mode_listener(Arc::new(move |agent, chat, mode| {
            if let Some(gate) = groups.get(agent) {
                gate.set_chat_mode(chat, Some(mode));
            }
        }));
    }
    {
        let usage = Arc::clone(usage);
        controller.set_usage_source(Arc::new(move |agent| usage.today_line(agent)));
    }
    controller
}

/// The one task that owns the agents: applies each reload request (coalesced) and hands the
/// fleet back when the channel closes.
fn spawn_reloader(
    mut fleet: Fleet,
    mut reload_rx: mpsc::UnboundedReceiver<()>,
    h: RuntimeHandle,
    n: Notifier,
    c: Arc<Controller>,
) -> JoinHandle<Fleet> {
    tokio::spawn(async move {
        while reload_rx.recv().await.is_some() {
            while reload_rx.try_recv().is_ok() {}
            n.reloading();
            tracing::info!(
                event = "reload_started",
                "reloading personas and role prompts"
            );
            fleet.reload(&h, &c).await;
            let st = h.status();
            n.ready(&status_line(&st));
            tracing::info!(
                event = "reload_done",
                agents = fleet.running.len(),
                "reload done"
            );
        }
        fleet
    })
}

/// The one signal task: SIGTERM/SIGINT stop gracefully (a second one asks for an immediate
/// exit), SIGHUP reloads.
async fn signal_loop(
    handle: RuntimeHandle,
    notifier: Notifier,
    reload: mpsc::UnboundedSender<()>,
    immediate: Arc<Notify>,
) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::error!(event = "signals_unavailable", "cannot listen for signals");
        return;
    };
    let mut stopping = false;
    loop {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            _ = hup.recv() => {
                tracing::info!(event = "sighup", "SIGHUP: reload");
                let _ = reload.send(());
                continue;
            }
        };
        if stopping {
            immediate.notify_one();
            return;
        }
        stopping = true;
        tracing::info!(
            event = "signal_stop",
            signal = name,
            "stopping: tasks in flight may finish within the grace period (a second signal exits at once)"
        );
        notifier.stopping();
        handle.shutdown(&format!("{name} received"));
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
