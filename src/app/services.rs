//! The composition root: the one place that builds what the runtime runs on. Every entry
//! that runs the runtime (`run`, `chat`, `bench`, the crash child) describes its choices in a
//! [`Spec`] (the agents and their Telegram, where state lives, how it plans, whether an LLM
//! describes media and classifies group messages, the heartbeat) and gets [`Services`] back,
//! built in dependency order: the runtime's front first (so the usage meter reports spend to
//! it from its first request), then the usage meter, the planner over it, the media pipeline,
//! long-term memory (one store per process, shared with the owner's commands), the curated
//! stickers and the group gates' registry, and last the runtime itself, given all of them at
//! construction. Entries differ only in their `Spec` and in what stops them.

use std::sync::Arc;

use crate::adapters::llm::usage::UsageMeter;
use crate::adapters::media::MediaPipeline;
use crate::adapters::stickers::StickerCatalog;
use crate::adapters::store::StateDir;
use crate::adapters::store::facts::FileFacts;
use crate::adapters::store::graphs::GraphStore;
use crate::adapters::store::windows::WindowRecords;
use crate::app::cli::{MediaArgs, VoiceArgs};
use crate::app::commands::CommandError;
use crate::core::config::RuntimeConfig;
use crate::ingress::classifier::Classifier;
use crate::ingress::{Groups, Ingress};
use crate::ports::clock::SharedClock;
use crate::ports::facts::SharedFacts;
use crate::ports::llm::Llm;
use crate::ports::planner::SharedPlanner;
use crate::runtime::{AgentHandle, Heartbeat, Runtime, RuntimeHandle, RuntimeSeed};

/// Builds the entry's planner over the process's parts.
pub(crate) type MakePlanner = Box<dyn FnOnce(&PlannerParts) -> SharedPlanner + Send>;

/// What the process gives its planner.
pub(crate) struct PlannerParts {
    /// The usage meter every LLM call is metered in.
    pub usage: Arc<UsageMeter>,
    /// The window records, written behind the runtime store's batches.
    pub windows: Arc<WindowRecords>,
}

/// Shows the runtime the process's memory store through a view of the entry's (the
/// playground prints every write).
pub(crate) type ViewFacts = Box<dyn FnOnce(Arc<FileFacts>) -> SharedFacts + Send>;

/// What an entry chose.
pub(crate) struct Spec<'a> {
    pub config: RuntimeConfig,
    pub agents: Vec<AgentHandle>,
    pub clock: SharedClock,
    /// Usage totals, media descriptions and the planner's files.
    pub state: StateDir,
    /// Graphs, agent states and long-term memory (the playground keeps its own apart).
    pub graphs: StateDir,
    pub planner: MakePlanner,
    /// The LLM that describes media and classifies group messages (none: neither happens).
    pub llm: Option<Arc<dyn Llm>>,
    /// Media description settings (none: no media pipeline even with an LLM).
    pub media: Option<&'a MediaArgs>,
    /// Voice note settings (none: `voice` tasks send their words as text).
    pub voice: Option<&'a VoiceArgs>,
    pub heartbeat: Option<Heartbeat>,
    pub view_facts: Option<ViewFacts>,
    /// What fetches web pages for `retrieve` (none: a persona's `retrieve` is refused);
    /// metered and held to each persona's daily cap here.
    pub web: Option<Arc<dyn crate::ports::retrieve::Retriever>>,
}

impl Spec<'_> {
    /// The spec of an entry with no LLM beside its planner, no heartbeat and one state
    /// directory (the bench, the crash child).
    pub(crate) fn plain(
        config: RuntimeConfig,
        agents: Vec<AgentHandle>,
        clock: &SharedClock,
        state: &StateDir,
        planner: MakePlanner,
    ) -> Spec<'static> {
        Spec {
            config,
            agents,
            clock: Arc::clone(clock),
            state: state.clone(),
            graphs: state.clone(),
            planner,
            llm: None,
            media: None,
            voice: None,
            heartbeat: None,
            view_facts: None,
            web: None,
        }
    }
}

/// What the runtime runs on, and the runtime, built and not yet running.
pub(crate) struct Services {
    pub usage: Arc<UsageMeter>,
    /// The group classifier, when an LLM is configured.
    pub classifier: Option<Classifier>,
    /// The process's one long-term memory store.
    pub facts: Arc<FileFacts>,
    /// Every agent's group gate (the admission chain's group step, and `classify` tasks').
    pub groups: Arc<Groups>,
    /// The runtime's front: every handle the entry gives out is a clone of it.
    pub handle: RuntimeHandle,
    pub runtime: Runtime,
}

impl Services {
    /// Builds every service of `spec`, in dependency order.
    pub(crate) async fn build(spec: Spec<'_>) -> Result<Services, CommandError> {
        let Spec {
            config,
            agents,
            clock,
            state,
            graphs,
            planner,
            llm,
            media,
            voice,
            heartbeat,
            view_facts,
            web,
        } = spec;
        let (seed, handle) = RuntimeSeed::new(&clock);
        let usage = Arc::new(
            UsageMeter::load_async(
                state.clone(),
                Arc::clone(&clock),
                Some(Arc::new(handle.clone())),
            )
            .await
            .map_err(CommandError::unexpected)?,
        );
        let parts = PlannerParts {
            usage: Arc::clone(&usage),
            windows: Arc::new(WindowRecords::new(state.clone())),
        };
        let planner = planner(&parts);
        let media = match (media, &llm) {
            (Some(args), Some(llm)) => {
                Some(media_pipeline(args, Arc::clone(llm), state.clone(), &clock, &usage).await?)
            }
            _ => None,
        };
        let graphs_for_voice = graphs.clone();
        let graphs_for_documents = graphs.clone();
        let facts = Arc::new(
            FileFacts::new(graphs.clone())
                .with_scope_cap(config.memory_scope_bytes)
                .with_absent_cache(Arc::clone(&clock)),
        );
        let runtime_facts: SharedFacts = match view_facts {
            Some(view) => view(Arc::clone(&facts)),
            None => Arc::clone(&facts) as SharedFacts,
        };
        let groups = Groups::new();
        // Its calls are metered like the planner's, under the gate's agent and chat.
        let classifier = llm.map(|l| {
            Classifier::new(l, Arc::clone(&clock)).with_meter(Arc::new(Arc::clone(&usage)))
        });
        let mut runtime = Runtime::from_seed(
            seed,
            config,
            agents,
            planner,
            GraphStore::new(graphs).with_window_records(parts.windows),
            Arc::clone(&clock),
        )
        .with_stickers(Arc::new(StickerCatalog::new()))
        .with_facts(runtime_facts)
        .with_groups(Arc::clone(&groups) as _);
        if let Some(media) = media {
            runtime = runtime.with_media(media);
        }
        if let Some(args) = voice {
            let hold: Arc<dyn crate::ports::spend::CapHold> = Arc::new(handle.clone());
            let studio = voice_studio(
                args,
                &clock,
                Some((Arc::clone(&usage), hold)),
                Some(graphs_for_voice),
            )?;
            runtime = runtime.with_voice(Arc::new(studio));
        }
        if let Some(web) = web {
            runtime = runtime.with_retrieval(retrieval(web, &usage, &clock, &graphs_for_documents));
        }
        if let Some(heartbeat) = heartbeat {
            runtime = runtime.with_heartbeat(heartbeat);
        }
        Ok(Services {
            usage,
            classifier,
            facts,
            groups,
            handle,
            runtime,
        })
    }
}

impl Services {
    /// The door for inbound messages without owner controls (the playground, the bench,
    /// the crash child): the sender rule, then the group gates.
    pub(crate) fn plain_ingress(&self) -> Ingress {
        Ingress::new(self.handle.clone(), None, Arc::clone(&self.groups))
    }
}

/// `retrieve`'s fetcher, metered in `usage` and held to each persona's daily cap, with the
/// chats' documents kept under `graphs`.
fn retrieval(
    web: Arc<dyn crate::ports::retrieve::Retriever>,
    usage: &Arc<UsageMeter>,
    clock: &SharedClock,
    graphs: &StateDir,
) -> crate::ports::retrieve::SharedRetrieval {
    use crate::adapters::retrieve::MeteredRetriever;
    use crate::adapters::store::retrieved::FileDocuments;
    Arc::new(crate::ports::retrieve::Retrieval {
        fetcher: Arc::new(MeteredRetriever::new(
            web,
            Some(Arc::clone(usage)),
            Arc::clone(clock),
        )),
        documents: Arc::new(FileDocuments::new(graphs.clone())),
    })
}

/// The voice studio of `args`: engines from the environment and systemd's credentials (the
/// local engine's program from `--espeak-program`), metered and held at the cap by `meter`
/// when given, notes kept for a retry under `state` when given. `check` builds one without a
/// meter to ask whether each persona's voice can be made.
pub(crate) fn voice_studio(
    args: &VoiceArgs,
    clock: &SharedClock,
    meter: Option<(Arc<UsageMeter>, Arc<dyn crate::ports::spend::CapHold>)>,
    state: Option<StateDir>,
) -> Result<crate::adapters::voice_studio::VoiceStudio, CommandError> {
    use crate::adapters::speech::SpeechEnv;
    let default = args
        .voice_provider
        .parse()
        .map_err(|e: crate::core::Invalid| {
            CommandError::Config(crate::core::config::ConfigError {
                name: "voice-provider",
                reason: e.0,
            })
        })?;
    let program = args.espeak_program.display().to_string();
    let lookup = crate::app::credentials::llm_lookup();
    let mut env = SpeechEnv::from_env(Arc::clone(clock));
    env.lookup = Arc::new(move |name: &str| {
        if name == crate::adapters::speech::espeak::PROGRAM_ENV {
            Some(program.clone())
        } else {
            lookup(name)
        }
    });
    if let Some((usage, hold)) = meter {
        env = env.with_meter(usage).with_hold(hold);
    }
    Ok(crate::adapters::voice_studio::VoiceStudio::new(
        env, default, state,
    ))
}

/// The media pipeline over the LLM: descriptions cached under `state`, metered.
async fn media_pipeline(
    args: &MediaArgs,
    llm: Arc<dyn Llm>,
    state: StateDir,
    clock: &SharedClock,
    usage: &Arc<UsageMeter>,
) -> Result<Arc<MediaPipeline>, CommandError> {
    let pipeline = MediaPipeline::load(
        args.config(),
        args.media_prompts.clone(),
        llm,
        state,
        Arc::clone(clock),
    )
    .await
    .map_err(CommandError::Store)?
    .with_usage(Arc::clone(usage));
    Ok(Arc::new(pipeline))
}
