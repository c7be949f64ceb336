//! `personad run` and `personad login`: the daemon's wiring. Loads personas and settings,
//! connects every valid agent's account (an agent that cannot start is reported with the
//! reason and does not stop the others), wraps each account in the safety governor, starts
//! the runtime and one update pump per agent, and turns SIGTERM/SIGINT into a graceful stop.
//! It owns no logic of its own beyond that wiring; called by the binary.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::cli::{GlobalArgs, LoginArgs, RunArgs, TelegramArgs};
use crate::clock::{SharedClock, SystemClock};
use crate::commands::{CmdResult, CommandError, exit, find_persona, load_personas_async};
use crate::config::ConfigError;
use crate::group::classifier::Classifier;
use crate::group::gate::{GateConfig, GroupGate, QuoteBook, identity_for};
use crate::llm_planner::{LlmPlanner, LlmPlannerConfig, llm_from_env};
use crate::media::MediaPipeline;
use crate::runtime::{AgentHandle, Runtime};
use crate::store::{GraphStore, StateDir};
use crate::telegram::governor::{Governor, GovernorConfig};
use crate::telegram::mtproto::{self, ApiHash, ConnectOptions, Credentials};

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

/// `personad run`.
pub async fn run(global: GlobalArgs, args: RunArgs) -> CmdResult {
    let config = args.runtime.raw().validate()?;
    let creds = credentials(&args.telegram)?;
    let report = load_personas_async(&global).await?;
    for entry in report.entries.iter().filter(|e| !e.is_usable()) {
        for p in entry.problems.iter().filter(|p| p.is_error()) {
            tracing::error!(problem = %p, "agent not started");
        }
    }
    let clock: SharedClock = Arc::new(SystemClock);
    let retry = crate::llm::retry::RetryConfig::within_task_timeout(
        config.task_timeout,
        args.llm.llm_attempts,
    );
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
    let (llm, router) = llm_from_env(retry, Arc::clone(&clock));
    let state = StateDir::new(&global.state_dir);
    let usage = Arc::new({
        let (s, c) = (state.clone(), Arc::clone(&clock));
        tokio::task::spawn_blocking(move || crate::llm::usage::UsageMeter::load(s, c))
            .await
            .map_err(|e| CommandError::Failed(e.to_string()))?
    });
    let quotes = QuoteBook::new();
    let planner = LlmPlanner::new(
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
    .with_usage(Arc::clone(&usage))
    .with_quote_book(Arc::clone(&quotes));
    // Every agent whose provider is not configured is reported; with none usable, stop here.
    let mut first_problem = None;
    let mut usable = 0usize;
    for persona in report.active() {
        let route = planner.route(persona);
        let check = crate::llm::provider::resolve(&route)
            .map_err(|e| e.to_string())
            .and_then(|choice| router.check(choice.provider));
        match check {
            Ok(()) => usable += 1,
            Err(why) => {
                tracing::error!(agent = %persona.name, llm = %route, "the persona's LLM is not configured: {why}");
                first_problem.get_or_insert(why);
            }
        }
    }
    if usable == 0
        && let Some(why) = first_problem
    {
        return Err(llm_error(why));
    }
    let classifier = Classifier::new(Arc::clone(&llm), Arc::clone(&clock));
    let opts = ConnectOptions {
        flood_sleep_threshold: Duration::from_secs(args.flood_sleep_secs),
        max_catch_up_age: Duration::from_secs(args.catch_up_minutes.saturating_mul(60)),
    };
    let governor = GovernorConfig {
        chat_min_gap: Duration::from_secs(args.send_gap_secs),
        chat_per_minute: args.chat_sends_per_minute,
        account_per_minute: args.account_sends_per_minute,
        max_wait: Duration::from_secs(args.max_pacing_wait_secs),
        ..GovernorConfig::default()
    };
    let mut agents = Vec::new();
    let mut connections = Vec::new();
    for persona in report.active() {
        match mtproto::connect(&state, &persona.name, &creds, opts, Arc::clone(&clock)).await {
            Ok(connected) => {
                tracing::info!(agent = %persona.name, "connected");
                let governed = Governor::new(
                    connected.telegram.clone(),
                    Arc::clone(&clock),
                    governor.clone(),
                );
                agents.push(AgentHandle {
                    persona: Arc::new(persona.clone()),
                    telegram: Arc::new(governed),
                });
                connections.push((persona.name.clone(), connected));
            }
            Err(e) => tracing::error!(agent = %persona.name, "cannot start: {e}"),
        }
    }
    if agents.is_empty() {
        return Err(CommandError::Unavailable(
            "no agent could start (see the errors above)".into(),
        ));
    }
    let media = MediaPipeline::load(
        args.media.config(),
        args.media.media_prompts.clone(),
        llm,
        state.clone(),
        Arc::clone(&clock),
    )
    .await
    .map_err(|e| CommandError::Io(e.to_string()))?
    .with_usage(usage);
    let debounce = config.debounce;
    let runtime = Runtime::new(
        config,
        agents.clone(),
        Arc::new(planner),
        GraphStore::new(state.clone()),
        Arc::clone(&clock),
    )
    .with_media(Arc::new(media));
    let handle = runtime.handle();
    let stop = CancellationToken::new();
    let run = tokio::spawn(runtime.run());
    let peers: Vec<i64> = agents.iter().map(|a| a.telegram.self_id()).collect();
    let mut pumps = Vec::new();
    for (agent, connected) in connections {
        let Some(handle_of) = agents.iter().find(|a| a.persona.name == agent) else {
            continue;
        };
        let modes = {
            let (dir, a) = (state.clone(), agent.clone());
            tokio::task::spawn_blocking(move || crate::store::load_agent_state(&dir, &a))
                .await
                .ok()
                .and_then(Result::ok)
                .map(|(s, _)| s.group_modes.into_iter().collect())
                .unwrap_or_default()
        };
        let me = handle_of.telegram.self_id();
        let gate = GroupGate::new(GateConfig {
            agent: agent.clone(),
            persona: Arc::clone(&handle_of.persona),
            // Telegram flags mentions of our @username as callouts.
            identity: identity_for(&handle_of.persona, me, None),
            telegram: Arc::clone(&handle_of.telegram),
            runtime: handle.clone(),
            classifier: Some(classifier.clone()),
            classifier_model: Some(args.classifier_model.clone()),
            clock: Arc::clone(&clock),
            quiet: debounce,
            peers: peers.iter().copied().filter(|p| *p != me).collect(),
            modes,
            quotes: Arc::clone(&quotes),
        });
        let connected = connected.with_group_gate(gate);
        let (h, c, s) = (handle.clone(), Arc::clone(&clock), stop.child_token());
        pumps.push(tokio::spawn(async move {
            if let Err(e) = connected.serve(agent.clone(), h, opts, c, s).await {
                tracing::error!(agent = %agent, "stopped: {e}");
            }
        }));
    }
    let signals = {
        let handle = handle.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            handle.shutdown("signal received");
        })
    };
    let result = run
        .await
        .map_err(|e| CommandError::Failed(format!("runtime task failed: {e}")))?;
    stop.cancel();
    signals.abort();
    for p in pumps {
        let _ = p.await;
    }
    match result {
        Ok(report) if report.no_agents_left => Ok(ExitCode::from(exit::UNAVAILABLE)),
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(CommandError::Io(e.to_string())),
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `personad login` (and `--logout`).
pub async fn login(global: GlobalArgs, args: LoginArgs) -> CmdResult {
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
