//! `personad run` and `personad login`. `run` is a [`Daemon`]: built in dependency order
//! (settings, personas, the planner, the accounts, the services, the owner controls with the
//! admission chain, the fleet), then started (the runtime loop, the update pumps, the
//! endpoints, the control socket, file watching, the one reloader, all tasks of one
//! [`Lifecycle`]), run until it ends (the runtime stopped after a stop signal, `/stop` or
//! `ctl stop`; a second signal; the state directory gone) and stopped (everything tracked
//! is told to stop and given a moment). It tells systemd where it stands: `READY=1` once
//! graphs are loaded, `STATUS=` every 10 s, `WATCHDOG=1` from the tick loop's heartbeat,
//! `RELOADING=1`/`READY=1` around a reload, `STOPPING=1` on shutdown. An agent that cannot
//! start is reported and does not stop the others. Called by the binary.
//!
//! - `backend`: how agents reach Telegram, and the secrets from systemd's credentials;
//! - `planning`: the LLM stack, the route checks and the planner;
//! - `health`: the heartbeat, the status line;
//! - `fleet`: the accounts and the running agents (gates, pumps, reloads).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::adapters::mtproto;
use crate::adapters::store::{StateDir, StateLock};
use crate::app::cli::{GlobalArgs, LoginArgs, RunArgs};
use crate::app::commands::{CmdResult, CommandError, exit, find_persona, load_personas_async};
use crate::app::lifecycle::Lifecycle;
use crate::app::ops::controls::{Commands, Controller, ControlsConfig, Hooks};
use crate::app::ops::metrics::Health;
use crate::app::ops::reload::{self, ReloadRequests};
use crate::app::ops::sdnotify::{self, Notifier};
use crate::app::ops::signals::{self, Signal};
use crate::app::ops::{ctl, metrics, watch};
use crate::app::services::{Services, Spec};
use crate::ports::clock::{SharedClock, SystemClock};
use crate::runtime::{AgentHandle, Runtime, RuntimeError, RuntimeHandle, StopReport};

mod backend;
pub(crate) use backend::{credentials, credentials_from_systemd};
mod fleet;
mod health;
mod leases;
mod planning;

use backend::Backend;
use fleet::{Accounts, Fleet, GroupSettings, Opened};

/// Longest the tick loop sleeps without a watchdog (it bounds `/healthz` too).
const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(5);
/// Start-up time asked of systemd per agent connection (`EXTEND_TIMEOUT_USEC`).
const CONNECT_ALLOWANCE: Duration = Duration::from_secs(90);
/// Quiet time after the last file change before a reload.
const WATCH_QUIET: Duration = Duration::from_millis(300);
/// How long the pumps, endpoints and other tasks get to stop after the runtime ended.
const WIND_DOWN: Duration = Duration::from_secs(5);

/// The daemon, built and not yet running.
pub(crate) struct Daemon {
    global: GlobalArgs,
    args: RunArgs,
    state: StateDir,
    clock: SharedClock,
    notifier: Notifier,
    life: Lifecycle,
    lock: Arc<StateLock>,
    health: Arc<Health>,
    runtime: Runtime,
    handle: RuntimeHandle,
    usage: Arc<crate::adapters::llm::usage::UsageMeter>,
    controller: Arc<Controller>,
    commands: Commands,
    fleet: Fleet,
    opened: Vec<Opened>,
    reloads: (ReloadRequests, mpsc::UnboundedReceiver<()>),
    bound: Bound,
    /// This process's control socket label (a shard's), and its session leases.
    label: Option<String>,
    leases: Arc<leases::LeaseKeeper>,
}

/// The web endpoints' listeners, bound before anything else starts.
struct Bound {
    metrics: Option<tokio::net::TcpListener>,
    console: Option<tokio::net::TcpListener>,
}

/// How a run ended.
enum Ended {
    /// The runtime stopped (gracefully, or with an error).
    Runtime(Result<Result<StopReport, RuntimeError>, tokio::task::JoinError>),
    /// Exit at once with this result: a second signal, or the state directory gone.
    Now(CmdResult),
}

/// `personad run`.
pub async fn run(global: GlobalArgs, args: RunArgs) -> CmdResult {
    run_telling(global, args, None).await
}

/// `personad run`, telling `ready` once the daemon is ready (`READY=1`): the daemon bench
/// runs it in its own process and feeds it from then on.
pub(crate) async fn run_telling(
    global: GlobalArgs,
    args: RunArgs,
    ready: Option<tokio::sync::oneshot::Sender<()>>,
) -> CmdResult {
    let life = Lifecycle::new();
    // Signals are handled from here on (SIGHUP must not kill a starting daemon); a stop
    // signal while the accounts connect ends the start there.
    let mut signals = signals::listen(&life);
    let built = tokio::select! {
        built = Daemon::build(global, args, life.clone()) => built,
        name = first_stop(&mut signals) => {
            tracing::info!(event = "signal_stop", signal = name, "stopped while starting");
            life.wind_down(WIND_DOWN).await;
            return Ok(ExitCode::SUCCESS);
        }
    };
    match built {
        Ok(daemon) => daemon.start_and_run(signals, ready).await,
        Err(e) => {
            life.wind_down(WIND_DOWN).await;
            Err(e)
        }
    }
}

/// The first stop signal (a reload asked for while starting changes nothing: the personas
/// are being read anyway).
async fn first_stop(signals: &mut mpsc::UnboundedReceiver<Signal>) -> &'static str {
    loop {
        match signals.recv().await {
            Some(Signal::Stop(name)) => return name,
            Some(Signal::Reload) => {}
            None => std::future::pending::<()>().await,
        }
    }
}

impl Daemon {
    /// Everything the daemon needs, built in dependency order; nothing runs yet.
    async fn build(
        global: GlobalArgs,
        mut args: RunArgs,
        life: Lifecycle,
    ) -> Result<Daemon, CommandError> {
        let config = run_config(&args)?;
        let notifier = Notifier::from_env();
        let clock: SharedClock = Arc::new(SystemClock);
        let state = StateDir::new(&global.state_dir);
        let selection = crate::app::shards::selection(&args.shard)?;
        let label = crate::app::cli::socket_label(&selection);
        let backend = backend::backend_for(&mut args, &clock).await?;
        crate::app::ops::listen::raise_descriptor_limit();
        // A second daemon on the same state directory would fight over sessions and graphs.
        let socket = ctl::socket_path(&state, label.as_deref());
        if tokio::net::UnixStream::connect(&socket).await.is_ok() {
            return Err(CommandError::Unavailable(format!(
                "another personad is running on this state directory (it answers on {})",
                socket.display()
            )));
        }
        // Shards share the directory (the session leases keep their agents apart).
        let lock = Arc::new(crate::app::commands::lock_state_as(
            &global,
            selection.is_partial(),
        )?);
        // From here on, each write batch first checks that the directory is the one locked.
        let state = state.guarded(Arc::clone(&lock) as _);
        // A busy port fails the start here, before a token is written or an agent starts.
        let bound = bind(&args).await.map_err(CommandError::Endpoint)?;
        let mut report = load_personas_async(&global).await?;
        crate::app::shards::select(&mut report, &selection)?;
        if selection.is_partial() {
            let names: Vec<&str> = report.active().map(|p| p.name.as_str()).collect();
            tracing::info!(event = "shard", selection = %selection, agents = %names.join(","), "this process runs {selection}: {}", names.join(", "));
        }
        // Offline Telegrams (in memory, simulated) may plan with the echo planner.
        let memory = matches!(
            backend,
            Backend::Memory { .. } | Backend::Mtproto { sim: Some(_), .. }
        );
        let planning = planning::planning(&args, &config, &clock, &report, memory)?;
        let mut accounts = Accounts::new(global.clone(), backend, state.clone(), &clock);
        let chats = crate::app::ops::controls::ChatIndex::new(state.clone());
        accounts.chats = Some(Arc::clone(&chats));
        let leases = leases::LeaseKeeper::new(
            Arc::new(crate::adapters::lease::FileLeases::new(
                state.clone(),
                crate::adapters::lease::this_process(),
                Duration::from_millis(args.lease_ttl_ms.max(1)),
            )),
            Arc::clone(&clock),
        );
        accounts.leases = Some(Arc::clone(&leases));
        accounts.selection = selection;
        accounts.report_problems(&report, true, &Default::default());
        let opened = open_agents(&accounts, &report, &notifier).await?;
        let heartbeat_every =
            sdnotify::watchdog_interval().map_or(DEFAULT_HEARTBEAT, |w| w.min(DEFAULT_HEARTBEAT));
        let health = Arc::new(Health::new(heartbeat_every));
        let services = Services::build(Spec {
            config,
            agents: agent_handles(&opened),
            clock: Arc::clone(&clock),
            state: state.clone(),
            graphs: state.clone(),
            planner: planning.planner,
            media: planning.llm.as_ref().map(|_| &args.media),
            voice: Some(&args.voice),
            llm: planning.llm,
            heartbeat: Some(health::heartbeat(
                heartbeat_every,
                Arc::clone(&health),
                notifier.clone(),
                &args.debug_stall_loop,
            )),
            view_facts: None,
            // The real fetcher: public addresses only (each persona opts in with
            // `# Allow Retrieve`).
            web: Some(Arc::new(crate::adapters::retrieve::HttpRetriever::new())),
        })
        .await?;
        let reloads = reload::requests();
        let (controller, ingress, commands) = Controller::build(
            ControlsConfig {
                state: state.clone(),
                clock: Arc::clone(&clock),
                admin_chats: args.admin_chats.clone(),
                hooks: hooks(&services.handle, &notifier, &reloads.0),
                usage: Some(Arc::clone(&services.usage)),
                facts: Arc::clone(&services.facts),
                chats: Some(chats),
                selection: accounts
                    .selection
                    .is_partial()
                    .then(|| accounts.selection.to_string()),
            },
            services.handle.clone(),
            Arc::clone(&services.groups),
        );
        let fleet = Fleet::new(
            accounts,
            ingress,
            Arc::clone(&controller),
            life.clone(),
            notifier.clone(),
            GroupSettings {
                classifier: services.classifier.clone(),
                classifier_model: planning.classifier_model.clone(),
            },
        );
        Ok(Daemon {
            global,
            args,
            state,
            clock,
            notifier,
            life,
            lock,
            health,
            runtime: services.runtime,
            handle: services.handle,
            usage: services.usage,
            controller,
            commands,
            fleet,
            opened,
            reloads,
            bound,
            label,
            leases,
        })
    }

    /// Starts every part, runs until the end, and stops.
    async fn start_and_run(
        self,
        mut signals: mpsc::UnboundedReceiver<Signal>,
        ready: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> CmdResult {
        let Daemon {
            global,
            args,
            state,
            clock,
            notifier,
            life,
            lock,
            health,
            runtime,
            handle,
            usage,
            controller,
            commands,
            mut fleet,
            opened,
            reloads: (reload_tx, reload_rx),
            bound,
            label,
            leases,
        } = self;
        let mut run = life.spawn(runtime.run());
        {
            let c = Arc::clone(&controller);
            let stop = life.stop_token();
            life.spawn(async move { c.serve(commands, stop).await });
        }
        fleet.start(opened);
        if let Err(e) = endpoints(bound, &global, &state, &health, &controller, &usage, &life).await
        {
            life.cancel();
            handle.shutdown("a web endpoint is unavailable");
            let _ = run.await;
            life.wind_down(WIND_DOWN).await;
            return Err(CommandError::Endpoint(e));
        }
        let _watcher = watch_files(&args, &global, &life, &reload_tx);
        {
            let h = handle.clone();
            let on_lost: leases::OnLost =
                Box::new(move |agent, reason| h.remove_agent(agent, reason));
            life.spawn(Arc::clone(&leases).keep(life.stop_token(), on_lost));
        }
        if let Err(e) = ctl::serve(&state, label.as_deref(), Arc::clone(&controller), &life).await {
            tracing::error!(event = "ctl_unavailable", error = %e, "control socket unavailable: `personad ctl` will not work");
        }
        handle.wait_started().await;
        let st = handle.status();
        tracing::info!(
            event = "ready",
            agents = st.agents,
            graphs = st.graphs,
            "daemon ready"
        );
        notifier.ready(&health::status_line(&st));
        if let Some(ready) = ready {
            let _ = ready.send(());
        }
        life.spawn(reload::serve(fleet, reload_rx, life.stop_token()));
        let ended = until_end(
            &mut run,
            &mut signals,
            &handle,
            &notifier,
            &reload_tx,
            state_gone(
                lock,
                clock,
                Duration::from_millis(args.state_check_every_ms),
            ),
        )
        .await;
        notifier.stopping();
        let result = match ended {
            Ended::Runtime(r) => r,
            Ended::Now(code) => {
                life.cancel();
                return code;
            }
        };
        // The usage counts since the last save (they are saved at most every few seconds).
        if let Err(e) = usage.flush().await {
            tracing::warn!(event = "usage_not_saved", error = %e, "usage totals not saved at exit");
        }
        drop(reload_tx);
        life.wind_down(WIND_DOWN).await;
        // A clean stop hands every session back at once (a crash leaves it until expiry).
        leases.release_all().await;
        let result = result.map_err(|e| CommandError::Join(e).doing("runtime task failed"))?;
        match result {
            Ok(report) if report.no_agents_left => Ok(ExitCode::from(exit::UNAVAILABLE)),
            Ok(_) => Ok(ExitCode::SUCCESS),
            Err(e) => Err(CommandError::Runtime(e)),
        }
    }
}

/// What the owner's `/stop` and `reload` do.
fn hooks(handle: &RuntimeHandle, notifier: &Notifier, reloads: &ReloadRequests) -> Hooks {
    let (h, n, r) = (handle.clone(), notifier.clone(), reloads.clone());
    Hooks {
        stop: Box::new(move |reason| {
            n.stopping();
            h.shutdown(reason);
        }),
        reload: Box::new(move || {
            let _ = r.send(());
        }),
    }
}

/// Waits for the runtime to end, answering signals meanwhile: the first SIGTERM/SIGINT stops
/// gracefully, a second exits at once; SIGHUP reloads. The state directory gone ends it too.
async fn until_end(
    run: &mut tokio::task::JoinHandle<Result<StopReport, RuntimeError>>,
    signals: &mut mpsc::UnboundedReceiver<Signal>,
    handle: &RuntimeHandle,
    notifier: &Notifier,
    reloads: &ReloadRequests,
    gone: impl std::future::Future<Output = crate::adapters::store::StateGone>,
) -> Ended {
    tokio::pin!(gone);
    let mut stopping = false;
    loop {
        tokio::select! {
            r = &mut *run => return Ended::Runtime(r),
            Some(signal) = signals.recv() => match signal {
                Signal::Reload => {
                    tracing::info!(event = "sighup", "SIGHUP: reload");
                    let _ = reloads.send(());
                }
                Signal::Stop(_) if stopping => {
                    tracing::warn!(event = "exit_now", "second signal: exiting at once; tasks in flight run again after the next start");
                    return Ended::Now(Ok(ExitCode::SUCCESS));
                }
                Signal::Stop(name) => {
                    stopping = true;
                    tracing::info!(
                        event = "signal_stop",
                        signal = name,
                        "stopping: tasks in flight may finish within the grace period (a second signal exits at once)"
                    );
                    notifier.stopping();
                    handle.shutdown(&format!("{name} received"));
                }
            },
            gone = &mut gone => {
                // Nothing more is written: a graceful stop would make the directory again.
                tracing::error!(event = "state_directory_gone", error = %gone, "stopping");
                return Ended::Now(Err(CommandError::StateGone(gone)));
            }
        }
    }
}

/// Binds the metrics endpoint and the web console, each when asked for; either failing to
/// bind stops the start (the operator asked for it).
async fn bind(args: &RunArgs) -> Result<Bound, crate::app::ops::OpError> {
    let metrics = match args.metrics_addr {
        Some(addr) => Some(metrics::bind(addr).await?),
        None => None,
    };
    let console = match args.console_addr {
        Some(addr) => Some(crate::app::console::bind(addr).await?),
        None => None,
    };
    Ok(Bound { metrics, console })
}

/// Serves the bound metrics endpoint and web console.
async fn endpoints(
    bound: Bound,
    global: &GlobalArgs,
    state: &StateDir,
    health: &Arc<Health>,
    controller: &Arc<Controller>,
    usage: &Arc<crate::adapters::llm::usage::UsageMeter>,
    life: &Lifecycle,
) -> Result<(), crate::app::ops::OpError> {
    if let Some(listener) = bound.metrics {
        metrics::serve(listener, Arc::clone(health), life)?;
    }
    if let Some(listener) = bound.console {
        crate::app::console::serve(
            listener,
            state,
            Arc::clone(controller),
            Arc::clone(usage),
            global.clone(),
            life,
        )
        .await?;
    }
    Ok(())
}

/// File watching (unless `--no-watch`): edits become reload requests. Not fatal: it logs why
/// it is missing.
fn watch_files(
    args: &RunArgs,
    global: &GlobalArgs,
    life: &Lifecycle,
    reloads: &ReloadRequests,
) -> Option<watch::DirWatcher> {
    if args.no_watch {
        return None;
    }
    let mut dirs = vec![global.agents_dir.clone()];
    dirs.extend(global.prompt_dirs());
    match watch::watch(life, &dirs, WATCH_QUIET, reloads.clone()) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(event = "watch_unavailable", error = %e, "file watching unavailable: reload with SIGHUP or `personad ctl reload`");
            None
        }
    }
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

/// Connects every enabled persona's account, one at a time (each asking systemd for more
/// start-up time); fails only when none could start.
async fn open_agents(
    accounts: &Accounts,
    report: &crate::core::persona::LoadReport,
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
        match accounts.open(persona).await {
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

/// The runtime settings of `run`: the shared ones, the shutdown grace, the admin chats.
fn run_config(
    args: &RunArgs,
) -> Result<crate::core::config::RuntimeConfig, crate::core::config::ConfigError> {
    let mut config = args.runtime.raw().validate()?;
    config.shutdown_grace = Duration::from_secs(args.shutdown_grace_secs);
    config.draft_gap = Duration::from_secs(args.draft_gap_secs);
    config.admin_chats = args
        .admin_chats
        .iter()
        .copied()
        .map(crate::core::model::ChatId)
        .collect();
    if !config.admin_chats.is_empty() {
        tracing::warn!(
            event = "admin_chat_commands_only",
            chats = ?args.admin_chats,
            "--admin-chat: the owner's commands and replies to drafts are accepted there, but drafts and command answers go to Saved Messages unless a persona's `# Admin Chat` names the chat (its members would read them)"
        );
    }
    Ok(config)
}

/// Resolves when the state directory (or its lock file) was removed or replaced: found by
/// the check before a write batch, or by this check `every` (`--state-check-every-ms`) when
/// nothing is written.
async fn state_gone(
    lock: Arc<crate::adapters::store::StateLock>,
    clock: SharedClock,
    every: Duration,
) -> crate::adapters::store::StateGone {
    let tripped = lock.until_gone();
    tokio::pin!(tripped);
    loop {
        tokio::select! {
            gone = &mut tripped => return gone,
            () = crate::ports::clock::pause(clock.as_ref(), every) => {}
        }
        let lock = Arc::clone(&lock);
        if let Ok(Err(gone)) = tokio::task::spawn_blocking(move || lock.check()).await {
            return gone;
        }
    }
}

/// `personad login` (and `--logout`).
pub async fn login(global: GlobalArgs, mut args: LoginArgs) -> CmdResult {
    backend::credentials_from_systemd(&mut args.telegram);
    let creds = backend::credentials(&args.telegram)?;
    let report = load_personas_async(&global).await?;
    let persona = find_persona(&report, &args.agent)?;
    let state = StateDir::new(&global.state_dir);
    if args.logout {
        let done = mtproto::logout(&state, &persona.name, &creds)
            .await
            .map_err(CommandError::Login)?;
        let how = match done {
            mtproto::login::LoggedOut::SignedOut => "signed out",
            mtproto::login::LoggedOut::AlreadyEnded => {
                "Telegram no longer knew this session (already ended)"
            }
        };
        crate::app::stdout::line(format_args!(
            "{}: {how}; the session file is deleted",
            persona.name
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "Logging in {} ({}). Telegram sends a code to the account's other devices.",
        persona.name,
        persona.masked_phone()
    );
    let done = mtproto::login(&state, &persona.name, &persona.phone, &creds)
        .await
        .map_err(CommandError::Login)?;
    crate::app::stdout::line(format_args!("{}: {done}", persona.name))?;
    Ok(ExitCode::SUCCESS)
}
