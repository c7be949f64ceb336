//! The playground's session, built once: its clock (virtual with `--fast`), its chat (a
//! direct chat with the user, or a group), the persona's in-memory Telegram (transcripts
//! kept under the playground's own state directory), the planner, and the services the
//! runtime runs on (built by `services`, as for the daemon), with the group gate of a group
//! session and the admission chain every input line takes. Nothing runs until `chat` starts
//! it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::adapters::llm::usage::UsageMeter;
use crate::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig, llm_from_env};
use crate::adapters::memory::{MemoryTelegram, user_id_for};
use crate::adapters::store::{StateDir, StateLock};
use crate::app::cli::{ChatArgs, GlobalArgs, PlannerChoice};
use crate::app::commands::{
    CommandError, find_persona, load_personas_async, lock_state, playground_dir,
};
use crate::app::lifecycle::Lifecycle;
use crate::app::playground::output::observe_memory;
use crate::app::services::{MakePlanner, Services, Spec};
use crate::core::config::{ConfigError, RuntimeConfig};
use crate::core::model::{Chat, ChatId, ChatKind};
use crate::core::persona::Persona;
use crate::ingress::Ingress;
use crate::ingress::classifier::Classifier;
use crate::ingress::gate::{GateConfig, GroupGate, identity_for};
use crate::ports::clock::{SharedClock, SystemClock, VirtualClock};
use crate::ports::llm::Llm;
use crate::ports::planner::{EchoPlanner, SharedPlanner};
use crate::ports::telegram::Telegram;
use crate::runtime::{AgentHandle, Runtime, RuntimeHandle};

/// How long the task in flight may run on after a stop signal (on the run's clock).
const STOP_GRACE: Duration = Duration::from_secs(5);

/// A playground session, built and not yet running.
pub(super) struct Session {
    pub(super) persona: Arc<Persona>,
    pub(super) memory: Arc<MemoryTelegram>,
    pub(super) clock: SharedClock,
    pub(super) chat: Chat,
    /// The playground's own state directory (graphs, transcripts, memory).
    pub(super) dir: PathBuf,
    /// The group gate of a group session.
    pub(super) gate: Option<GroupGate>,
    pub(super) ingress: Ingress,
    pub(super) handle: RuntimeHandle,
    pub(super) usage: Arc<UsageMeter>,
    pub(super) runtime: Runtime,
    pub(super) start: Timestamp,
    pub(super) _lock: StateLock,
}

impl Session {
    pub(super) async fn build(
        global: &GlobalArgs,
        args: &ChatArgs,
        life: &Lifecycle,
    ) -> Result<Session, CommandError> {
        let mut config = args.runtime.raw().validate()?;
        config.shutdown_grace = STOP_GRACE;
        let lock = lock_state(global)?;
        let report = load_personas_async(global).await?;
        let persona = Arc::new(find_persona(&report, &args.agent)?);
        let clock = session_clock(args);
        let chat = session_chat(args);
        let dir = playground_dir(global, &persona.name);
        let memory = open_memory(&persona.name, &clock, &dir, args, &chat).await?;
        // Usage and media descriptions are shared with the daemon's records; graphs,
        // transcripts and memory are the playground's own: its chats exist only in the
        // in-memory backend, and the daemon's plans must never be run (and dropped) here.
        let state = StateDir::new(&global.state_dir);
        let Chosen {
            planner,
            llm,
            classifier_model,
        } = choose_planner(args, &persona, &config, Arc::clone(&clock))?;
        let services = Services::build(Spec {
            config,
            agents: vec![AgentHandle {
                persona: Arc::clone(&persona),
                telegram: memory.clone(),
            }],
            clock: Arc::clone(&clock),
            state,
            graphs: StateDir::new(&dir),
            planner,
            llm,
            media: Some(&args.media),
            voice: Some(&args.voice),
            heartbeat: None,
            view_facts: Some(observe_memory(life, args, &clock)),
            // The playground reaches no web: its twin answers every URL with 404.
            web: Some(Arc::new(crate::adapters::retrieve::MemoryRetriever::new())),
        })
        .await?;
        let gate = (!chat.kind.is_direct()).then(|| {
            group_gate(
                args,
                &persona,
                &memory,
                &services.handle,
                &clock,
                (services.classifier.clone(), classifier_model),
                &chat,
            )
        });
        if let Some(g) = &gate {
            services.groups.insert(&persona.name, g.clone());
        }
        let ingress = Ingress::new(services.handle.clone(), None, Arc::clone(&services.groups));
        Ok(Session {
            start: clock.now(),
            persona,
            memory,
            clock,
            chat,
            dir,
            gate,
            ingress,
            handle: services.handle,
            usage: services.usage,
            runtime: services.runtime,
            _lock: lock,
        })
    }
}

/// The session's clock: virtual (waits cost no real time) with `--fast`, else the system's.
fn session_clock(args: &ChatArgs) -> SharedClock {
    if args.fast {
        Arc::new(VirtualClock::new(
            args.start_at.unwrap_or_else(Timestamp::now),
            true,
        ))
    } else {
        Arc::new(SystemClock)
    }
}

/// The session's chat: a group by its title, or a direct chat with the user.
fn session_chat(args: &ChatArgs) -> Chat {
    match &args.group {
        Some(title) => Chat {
            id: ChatId(-user_id_for(title)),
            kind: ChatKind::Group,
            title: title.clone(),
        },
        None => Chat {
            id: ChatId(user_id_for(&args.user)),
            kind: ChatKind::Direct,
            title: args.user.clone(),
        },
    }
}

/// The session's in-memory Telegram (transcripts under `dir`, the `--stickers` sets loaded
/// off the runtime's threads), with the session's chat in it.
async fn open_memory(
    agent: &str,
    clock: &SharedClock,
    dir: &std::path::Path,
    args: &ChatArgs,
    chat: &Chat,
) -> Result<Arc<MemoryTelegram>, CommandError> {
    let memory = {
        let (name, c, d) = (agent.to_string(), Arc::clone(clock), dir.to_path_buf());
        let stickers = args.stickers.clone();
        tokio::task::spawn_blocking(move || {
            let memory = MemoryTelegram::new(&name, c, Some(d))?;
            if let Some(dir) = stickers {
                memory.load_sticker_sets(&dir)?;
            }
            Ok::<_, crate::adapters::store::StoreError>(memory)
        })
        .await
        .map_err(CommandError::Join)??
    };
    let memory = Arc::new(memory);
    memory.ensure_chat(chat.clone());
    Ok(memory)
}

/// The session's group gate (a group session only): the persona's names, the classifier, and
/// the `--mode` override for the session's chat.
fn group_gate(
    args: &ChatArgs,
    persona: &Arc<Persona>,
    memory: &Arc<MemoryTelegram>,
    base: &RuntimeHandle,
    clock: &SharedClock,
    (classifier, classifier_model): (Option<Classifier>, String),
    chat: &Chat,
) -> GroupGate {
    let mut modes = std::collections::HashMap::new();
    if let Some(mode) = args.groups.mode {
        modes.insert(chat.id, mode);
    }
    GroupGate::new(GateConfig {
        agent: persona.name.clone(),
        persona: Arc::clone(persona),
        // In the playground the persona's @username is its name.
        identity: identity_for(persona, memory.self_id(), Some(persona.name.clone())),
        telegram: memory.clone(),
        runtime: base.clone(),
        classifier,
        classifier_model: Some(classifier_model),
        clock: Arc::clone(clock),
        peers: crate::ingress::gate::peers([]),
        modes,
    })
}

/// The planner the playground runs: the persona's LLM when asked for (or when `auto` finds
/// its provider configured), otherwise the offline echo planner. With an LLM, the client is
/// returned too, for media descriptions and the group classifier.
fn choose_planner(
    args: &ChatArgs,
    persona: &Persona,
    runtime: &RuntimeConfig,
    clock: SharedClock,
) -> Result<Chosen, CommandError> {
    let llm_error = |reason: String| {
        CommandError::Config(ConfigError {
            name: "llm",
            reason,
        })
    };
    let echo = || -> MakePlanner { Box::new(|_| Arc::new(EchoPlanner) as SharedPlanner) };
    let asked = args.groups.classifier_model.clone();
    if args.planner == PlannerChoice::Echo {
        return Ok(Chosen {
            planner: echo(),
            llm: None,
            classifier_model: asked,
        });
    }
    let default_llm = args
        .llm
        .default_choice()
        .map_err(|e| llm_error(e.to_string()))?;
    let retry = crate::adapters::llm::retry::RetryConfig::within_task_timeout(
        runtime.task_timeout,
        args.llm.llm_attempts,
    );
    let (llm, router) = llm_from_env(retry, clock);
    let config = LlmPlannerConfig {
        default_llm,
        temperature: args.llm.temperature,
        max_output_tokens: args.llm.max_output_tokens,
        max_tasks: args.llm.max_tasks,
        history_size: runtime.history_limit,
        context_tokens: args.llm.context_tokens,
        json_plans: args.llm.plan_format == crate::app::cli::PlanFormat::Json,
        json_providers: router.json_plan_providers(),
    };
    let route = LlmPlanner::new(Arc::clone(&llm), config.clone()).route(persona);
    let default_route = config.default_llm.route();
    let available = router.check_route(&route);
    if let Err(why) = available {
        if args.planner == PlannerChoice::Auto {
            eprintln!(
                "{why}: using the offline echo planner (configure the provider, or pass --planner echo to silence this)."
            );
            return Ok(Chosen {
                planner: echo(),
                llm: None,
                classifier_model: asked,
            });
        }
        return Err(llm_error(why.to_string()));
    }
    // A local-only setup: the classifier follows the planner's route (as `run` does).
    let classifier_model = router.classifier_route(&asked, &default_route);
    let planner_llm = Arc::clone(&llm);
    let make: MakePlanner = Box::new(move |parts| {
        Arc::new(
            LlmPlanner::new(planner_llm, config)
                .with_window_records(Arc::clone(&parts.windows))
                .with_usage(Arc::clone(&parts.usage)),
        ) as SharedPlanner
    });
    Ok(Chosen {
        planner: make,
        llm: Some(llm),
        classifier_model,
    })
}

/// What the playground plans with: the planner, the LLM behind it (for media and the
/// classifier) and the classifier's route.
struct Chosen {
    planner: MakePlanner,
    llm: Option<Arc<dyn Llm>>,
    classifier_model: String,
}
