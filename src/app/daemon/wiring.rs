//! The pieces `run` is assembled from: the Telegram backend it was asked for, the planner
//! stack with its route checks, the agents' connections, the owner controls, the reloader
//! task, file watching and the control socket, and the wind-down after the runtime ends.

use super::*;

/// After the runtime ended: the reloader hands the fleet back and its pumps get a moment to
/// stop; the control socket and the metrics endpoint a shorter one.
pub(super) async fn wind_down(
    reloader: JoinHandle<Fleet>,
    servers: [Option<JoinHandle<()>>; 3],
    usage: &crate::adapters::llm::usage::UsageMeter,
) {
    // The usage counts since the last save (they are saved at most every few seconds).
    if let Err(e) = usage.flush().await {
        tracing::warn!(event = "usage_not_saved", error = %e, "usage totals not saved at exit");
    }
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

/// The metrics endpoint and the web console, each when asked for; either failing to bind
/// stops the start (the operator asked for it).
pub(super) async fn web_endpoints(
    args: &RunArgs,
    state: &StateDir,
    health: &Arc<metrics::Health>,
    controller: &Arc<Controller>,
    handle: &RuntimeHandle,
    usage: &Arc<crate::adapters::llm::usage::UsageMeter>,
    stop: &CancellationToken,
) -> Result<[Option<JoinHandle<()>>; 2], crate::app::ops::OpError> {
    let metrics_task = match args.metrics_addr {
        Some(addr) => Some(metrics::serve(addr, Arc::clone(health), stop.clone()).await?),
        None => None,
    };
    let console_task = match args.console_addr {
        Some(addr) => Some(
            crate::app::console::serve(
                addr,
                state,
                Arc::clone(controller),
                handle.clone(),
                Arc::clone(usage),
                stop.clone(),
            )
            .await?,
        ),
        None => None,
    };
    Ok([metrics_task, console_task])
}

/// File watching (unless `--no-watch`) and, last, the control socket: once `personad ctl`
/// answers, watching and metrics are in place. Neither is fatal: each logs why it is missing.
pub(super) async fn watch_and_ctl(
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
pub(super) fn agent_handles(opened: &[Opened]) -> Vec<AgentHandle> {
    opened
        .iter()
        .map(|(_, persona, seat, _)| AgentHandle {
            persona: Arc::clone(persona),
            telegram: Arc::clone(&seat.telegram),
        })
        .collect()
}

/// The Telegram backend `run` was asked for, with its credentials and limits.
pub(super) fn backend_for(args: &mut RunArgs) -> Result<Backend, CommandError> {
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
            world: crate::adapters::memory::World::new(),
            send_delay: Duration::from_millis(args.memory_send_delay_ms),
        },
    })
}

/// What plans and pays: the planner (LLM or echo), the LLM stack under it, the usage meter.
pub(super) struct PlannerStack {
    pub(super) planner: SharedPlanner,
    pub(super) llm: Arc<dyn Llm>,
    pub(super) usage: Arc<crate::adapters::llm::usage::UsageMeter>,
    /// Whether the LLM plans (and so describes media and classifies group messages).
    pub(super) use_llm: bool,
}

/// Builds the planner stack and checks every active persona's LLM route: with some usable,
/// each unusable persona is reported; with none, the one error says why.
pub(super) async fn planner_stack(
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
            .map_err(CommandError::unexpected)?,
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
pub(super) type Opened = (PathBuf, Arc<Persona>, Seat, Option<Connected>);

/// Connects every enabled persona's account, one at a time (each asking systemd for more
/// start-up time); fails only when none could start.
pub(super) async fn open_agents(
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
pub(super) fn controller_for(
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
    crate::app::services::spending_caps(usage, handle);
    controller
}

/// The one task that owns the agents: applies each reload request (coalesced) and hands the
/// fleet back when the channel closes.
pub(super) fn spawn_reloader(
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
pub(super) async fn signal_loop(
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
