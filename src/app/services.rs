//! The composition root's shared pieces: every entry that runs the runtime (`run`, `chat`,
//! `bench`, the crash child) builds it here, from the adapters it chose (Telegram backend,
//! planner, store, clock), so the wiring the runtime needs (the curated sticker catalog, the
//! media pipeline over the LLM, the admission chain with its group gates) is written once.
//! Entries differ only in the adapters they pass.

use std::sync::Arc;

use crate::adapters::llm::usage::UsageMeter;
use crate::adapters::media::MediaPipeline;
use crate::adapters::stickers::StickerCatalog;
use crate::adapters::store::StateDir;
use crate::adapters::store::facts::FileFacts;
use crate::adapters::store::graphs::GraphStore;
use crate::app::cli::MediaArgs;
use crate::app::commands::CommandError;
use crate::core::config::RuntimeConfig;
use crate::ingress::chain::{Chain, Groups};
use crate::ports::clock::SharedClock;
use crate::ports::llm::Llm;
use crate::ports::planner::SharedPlanner;
use crate::runtime::{AgentHandle, InboundGate, Runtime, RuntimeHandle};

/// The runtime over the given adapters, with the process's curated sticker catalog and the
/// long-term memory kept beside the graphs (`<state>/<agent>/memory/`).
pub(crate) fn runtime(
    config: RuntimeConfig,
    agents: Vec<AgentHandle>,
    planner: SharedPlanner,
    store: GraphStore,
    clock: &SharedClock,
) -> Runtime {
    let facts = FileFacts::new(store.state_dir().clone()).with_scope_cap(config.memory_scope_bytes);
    Runtime::new(config, agents, planner, store, Arc::clone(clock))
        .with_stickers(Arc::new(StickerCatalog::new()))
        .with_facts(Arc::new(facts))
}

/// The media pipeline over the LLM (none without one): descriptions cached under `state`,
/// metered.
pub(crate) async fn media_pipeline(
    args: &MediaArgs,
    llm: Option<Arc<dyn Llm>>,
    state: StateDir,
    clock: &SharedClock,
    usage: &Arc<UsageMeter>,
) -> Result<Option<Arc<MediaPipeline>>, CommandError> {
    let Some(llm) = llm else {
        return Ok(None);
    };
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
    Ok(Some(Arc::new(pipeline)))
}

/// The admission chain in front of `handle` (owner controls, if any, then the group gates
/// in `groups`), with the runtime's `classify` tasks wired to the same gates. Every source
/// of inbound messages uses the returned handle.
pub(crate) fn admission(
    handle: &RuntimeHandle,
    controls: Option<Arc<dyn InboundGate>>,
    groups: &Arc<Groups>,
) -> RuntimeHandle {
    handle.set_groups(Arc::clone(groups) as _);
    handle
        .clone()
        .with_gate(Chain::new(controls, Arc::clone(groups)))
}

/// The spending caps: every request's spend of the day reaches the runtime, which decides
/// (warns at 80%, holds planning at 100%).
pub(crate) fn spending_caps(
    usage: &crate::adapters::llm::usage::UsageMeter,
    handle: &crate::runtime::RuntimeHandle,
) {
    let h = handle.clone();
    usage.on_spend(Arc::new(move |agent, day, spend, all| {
        h.report_spend(agent, day, spend, all);
    }));
}
