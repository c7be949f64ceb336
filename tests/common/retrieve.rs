//! A harness with a fetcher for `retrieve`: the real runtime on the in-memory Telegram with the
//! given fetcher (metered), the documents and long-term memory kept under the state directory.

use std::path::Path;
use std::sync::Arc;

use personad::adapters::llm::usage::UsageMeter;
use personad::adapters::memory::MemoryTelegram;
use personad::adapters::retrieve::MeteredRetriever;
use personad::adapters::stickers::StickerCatalog;
use personad::adapters::store::retrieved::FileDocuments;
use personad::adapters::store::{GraphStore, StateDir};
use personad::core::model::Chat;
use personad::core::persona::Persona;
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::planner::SharedPlanner;
use personad::ports::retrieve::{Retrieval, Retriever};
use personad::runtime::{AgentHandle, Runtime};

use super::{AGENT, Harness, ScriptedPlanner, config, t0};

/// The real runtime for `persona` with `web` as its fetcher (metered in the returned meter,
/// documents kept under `state`).
pub(crate) fn boot(
    persona: Persona,
    state: &Path,
    planner: impl FnOnce(SharedClock) -> SharedPlanner,
    chats: &[Chat],
    web: Arc<dyn Retriever>,
) -> (Harness, Arc<UsageMeter>) {
    let clock = VirtualClock::new(t0(), true);
    let shared: SharedClock = Arc::new(clock.clone());
    let hold = Some(shared.hold());
    let telegram = Arc::new(
        MemoryTelegram::new(AGENT, Arc::clone(&shared), Some(state.join("memory")))
            .unwrap_or_else(|e| panic!("memory backend: {e}")),
    );
    for c in chats {
        telegram.ensure_chat(c.clone());
    }
    let meter = Arc::new(UsageMeter::load(StateDir::new(state), Arc::clone(&shared)));
    let retrieval = Retrieval {
        fetcher: Arc::new(MeteredRetriever::new(
            web,
            Some(Arc::clone(&meter)),
            Arc::clone(&shared),
        )),
        documents: Arc::new(FileDocuments::new(StateDir::new(state))),
    };
    let groups = personad::ingress::Groups::new();
    let facts = Arc::new(
        personad::adapters::store::facts::FileFacts::new(StateDir::new(state))
            .with_absent_cache(Arc::clone(&shared)),
    );
    let runtime = Runtime::new(
        config(),
        vec![AgentHandle {
            persona: Arc::new(persona),
            telegram: telegram.clone(),
        }],
        planner(Arc::clone(&shared)),
        GraphStore::new(StateDir::new(state)),
        Arc::clone(&shared),
    )
    .with_groups(Arc::clone(&groups) as _)
    .with_stickers(Arc::new(StickerCatalog::new()))
    .with_facts(Arc::clone(&facts) as _)
    .with_retrieval(Arc::new(retrieval));
    let handle = runtime.handle();
    let run = tokio::spawn(runtime.run());
    let h = Harness {
        clock,
        shared_clock: shared,
        telegram,
        handle,
        state: state.to_path_buf(),
        run,
        planner: Arc::new(ScriptedPlanner::new(|_, _| Ok(Vec::new()))),
        hold,
        groups,
        facts,
    };
    (h, meter)
}
