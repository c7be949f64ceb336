//! The runtime: per-conversation task graphs and the loop that runs them, split along its
//! seams (the pure state machine it drives, `core::scheduler`, and the account safety it
//! keeps, `core::safety`, live in the core):
//! - [`handle`]: [`RuntimeHandle`], how the outside world feeds the runtime and watches it;
//! - [`queue`]: the locked work queue every event goes through;
//! - [`persistence`]: durable writes off the loop, ordered per file, parallel across files,
//!   and when the store's checkpoints are written;
//! - `startup`: an agent's safety state read before its loop runs (failing closed);
//! - [`driver`]: the thin async loop that feeds the scheduler and carries its effects out;
//! - [`handlers`]: one handler per task kind, registered in one place.
//!
//! The runtime owns its state: graphs, and per agent what the owner set (pauses, trigger and
//! draft modes) beside disabled chats and the breaker, saved through its one writer. It
//! imports nothing from `ingress` or `app`: the admission chain decides in front of it and
//! pushes plain events through the handle.
//!
//! Inbound events only land in the queue; the loop replaces a chat's graph by a fresh
//! `received` task, starts ready tasks (plans under way before new plans, round robin within
//! each), and spawns their handlers once their `active` mark is durable. Different
//! conversations run concurrently, one task per conversation at a time, under a global cap.
//! The runtime never talks to Telegram or an LLM itself: handlers do, through the traits in
//! their context. It imports no adapter: the durable store, the media pipeline and the sticker
//! catalog reach it as port trait objects (`ports::{store, media, stickers}`), gathered with
//! the config, agents, planner, clock and queue in one `Services` struct that [`Runtime`]
//! assembles and the driver owns.

pub(crate) mod driver;
pub mod handle;
pub(crate) mod handlers;
pub(crate) mod persistence;
pub mod queue;
pub(crate) mod startup;

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::watch;

use crate::core::config::RuntimeConfig;
use crate::core::persona::Persona;
use crate::ports::clock::SharedClock;
use crate::ports::facts::SharedFacts;
use crate::ports::groups::SharedGroups;
use crate::ports::media::SharedMedia;
use crate::ports::planner::SharedPlanner;
use crate::ports::stickers::{NoStickers, SharedStickers};
use crate::ports::store::{RuntimeStore, SharedStore, StoreError};
use crate::ports::telegram::Telegram;
pub use handle::{NotableEvent, RuntimeHandle, sender_allows};
pub(crate) use queue::WorkQueue;

/// One agent the runtime serves: its persona and its Telegram account.
#[derive(Clone)]
pub struct AgentHandle {
    pub persona: Arc<Persona>,
    pub telegram: Arc<dyn Telegram>,
}

impl std::fmt::Debug for AgentHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentHandle")
            .field("agent", &self.persona.name)
            .finish_non_exhaustive()
    }
}

/// The heartbeat's call: the status the loop just published, and the events waiting.
pub(crate) type Beat = Arc<dyn Fn(&Status, u64) + Send + Sync>;

/// Called by the loop after every pass (watchdog, health, gauges) with the status it just
/// published and the events waiting in the queue; the loop wakes at least every `every`, so a
/// hung loop is one that stops calling it.
#[derive(Clone)]
pub(crate) struct Heartbeat {
    pub every: std::time::Duration,
    pub beat: Beat,
    /// Fault injection for tests of what watches the loop (`run --debug-stall-loop`): asked
    /// after each beat; a length makes the loop stall that long (awaiting, running no pass
    /// and no beat), as a hung loop would. `None` in normal runs.
    pub stall: Option<Arc<dyn Fn() -> Option<std::time::Duration> + Send + Sync>>,
}

/// A snapshot of what the runtime is doing, published after every loop iteration (a
/// watchdog can watch `passes` move).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Conversations with unfinished graphs.
    pub graphs: usize,
    /// Of those, the ones settled out of RAM until their deadline or their chat's next event.
    pub dormant: usize,
    /// Tasks running right now (or waiting for their `active` mark to be durable).
    pub in_flight: usize,
    /// Graphs kept on disk for agents that are not running.
    pub orphaned: usize,
    /// Agents that run (stopped ones excluded).
    pub agents: usize,
    /// Persisted graphs have been loaded and the loop is running.
    pub started: bool,
    /// Events applied so far (compare with the queue's push count).
    pub applied: u64,
    /// Files with a write queued or running.
    pub writes_pending: usize,
    /// Writes completed so far.
    pub writes_done: u64,
    /// Inbound messages that (re)planned a conversation and whose graph is durable.
    pub inbound_durable: u64,
    /// Loop iterations so far.
    pub passes: u64,
    /// The loop has ended.
    pub stopped: bool,
    /// When the loop wakes next for work of its own (a task's time, a schedule's next
    /// activity), if it has any.
    pub next_wake: Option<jiff::Timestamp>,
    /// A task is due now but not started yet (every slot is taken).
    pub due: bool,
}

impl Status {
    /// Running, with no graph left to work on, nothing in flight and nothing left to write.
    pub(crate) fn idle(&self) -> bool {
        self.started && self.graphs == 0 && self.in_flight == 0 && self.writes_pending == 0
    }

    /// Running, with nothing in flight, nothing left to write and nothing due now: what is
    /// left waits for its time on the project clock (`next_wake`).
    pub fn quiet(&self) -> bool {
        self.started && self.in_flight == 0 && self.writes_pending == 0 && !self.due
    }
}

/// Why the runtime stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A graph could not be made durable: continuing could lose or duplicate work.
    #[error("state could not be saved: {0}")]
    Store(#[from] StoreError),
    #[error("a background task failed")]
    Join(#[from] tokio::task::JoinError),
    /// A blocking job handed to [`persistence::blocking_then`] panicked.
    #[error("a background task panicked")]
    Panicked,
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopReport {
    pub reason: String,
    /// Every agent had to stop (sessions gone): the daemon cannot go on.
    pub no_agents_left: bool,
}

/// What the runtime is given and shares with every pass of the loop: assembled by
/// [`Runtime`], then owned by the [`driver::Driver`].
pub(in crate::runtime) struct Services {
    pub(in crate::runtime) config: Arc<RuntimeConfig>,
    pub(in crate::runtime) agents: HashMap<String, AgentHandle>,
    pub(in crate::runtime) planner: SharedPlanner,
    /// The media description pipeline, when the process has one (it needs an LLM).
    pub(in crate::runtime) media: Option<SharedMedia>,
    /// What makes voice notes, when the process has it (`voice` tasks; without it they go as
    /// text).
    pub(in crate::runtime) voice: Option<crate::ports::voice::SharedVoice>,
    pub(in crate::runtime) stickers: SharedStickers,
    /// Long-term memory (facts), when the process keeps it.
    pub(in crate::runtime) facts: Option<SharedFacts>,
    /// The group pipeline `classify` tasks call (the admission chain's group gates).
    pub(in crate::runtime) groups: Option<SharedGroups>,
    /// The web fetcher and the chats' retrieved documents (`retrieve` tasks), when given.
    pub(in crate::runtime) retrieval: Option<crate::ports::retrieve::SharedRetrieval>,
    pub(in crate::runtime) store: SharedStore,
    pub(in crate::runtime) clock: SharedClock,
    pub(in crate::runtime) queue: Arc<WorkQueue>,
    pub(in crate::runtime) status_tx: watch::Sender<Status>,
    pub(in crate::runtime) heartbeat: Option<Heartbeat>,
    pub(in crate::runtime) published: handle::Published,
}

/// The runtime's front before the runtime itself: its queue, status channel and published
/// state, so what must hold a [`RuntimeHandle`] at construction (the usage meter's spend
/// reports, the admission chain, the heartbeat) is built before the runtime that needs them.
pub struct RuntimeSeed {
    queue: Arc<WorkQueue>,
    status_tx: watch::Sender<Status>,
    status_rx: watch::Receiver<Status>,
    published: handle::Published,
}

impl RuntimeSeed {
    /// A fresh seed on `clock`, and the handle every later runtime built from it answers to.
    pub fn new(clock: &SharedClock) -> (RuntimeSeed, RuntimeHandle) {
        let (status_tx, status_rx) = watch::channel(Status::default());
        let seed = RuntimeSeed {
            queue: Arc::new(WorkQueue::new(Arc::clone(clock))),
            status_tx,
            status_rx,
            published: handle::Published::default(),
        };
        let handle = seed.handle();
        (seed, handle)
    }

    fn handle(&self) -> RuntimeHandle {
        RuntimeHandle {
            queue: Arc::clone(&self.queue),
            status: self.status_rx.clone(),
            published: self.published.clone(),
        }
    }
}

/// Everything the loop needs, assembled before it runs.
pub struct Runtime {
    services: Services,
    status_rx: watch::Receiver<Status>,
}

impl Runtime {
    /// A runtime over `store` (the durable graphs and agent states), with no media pipeline
    /// and no curated stickers until given ([`Runtime::with_media`],
    /// [`Runtime::with_stickers`]).
    pub fn new(
        config: RuntimeConfig,
        agents: Vec<AgentHandle>,
        planner: SharedPlanner,
        store: impl RuntimeStore,
        clock: SharedClock,
    ) -> Runtime {
        let (seed, _) = RuntimeSeed::new(&clock);
        Runtime::from_seed(seed, config, agents, planner, store, clock)
    }

    /// As [`Runtime::new`], answering to the handle the seed gave out.
    pub fn from_seed(
        seed: RuntimeSeed,
        config: RuntimeConfig,
        agents: Vec<AgentHandle>,
        planner: SharedPlanner,
        store: impl RuntimeStore,
        clock: SharedClock,
    ) -> Runtime {
        seed.published
            .set_personas(agents.iter().map(|a| Arc::clone(&a.persona)));
        let services = Services {
            published: seed.published,
            config: Arc::new(config),
            agents: agents
                .into_iter()
                .map(|a| (a.persona.name.clone(), a))
                .collect(),
            planner,
            media: None,
            voice: None,
            stickers: Arc::new(NoStickers),
            facts: None,
            groups: None,
            retrieval: None,
            store: Arc::new(store),
            queue: seed.queue,
            clock,
            status_tx: seed.status_tx,
            heartbeat: None,
        };
        Runtime {
            services,
            status_rx: seed.status_rx,
        }
    }

    /// Makes the loop wake at least every `heartbeat.every` and call its beat each pass.
    pub(crate) fn with_heartbeat(mut self, heartbeat: Heartbeat) -> Runtime {
        self.services.heartbeat = Some(heartbeat);
        self
    }

    /// Gives the `received` handler a media pipeline (descriptions of photos, voice, …).
    pub fn with_media(mut self, media: SharedMedia) -> Runtime {
        self.services.media = Some(media);
        self
    }

    /// Gives the `voice` handler what makes voice notes.
    pub fn with_voice(mut self, voice: crate::ports::voice::SharedVoice) -> Runtime {
        self.services.voice = Some(voice);
        self
    }

    /// Gives the handlers the agents' curated stickers (the planner's list, name lookup).
    pub fn with_stickers(mut self, stickers: SharedStickers) -> Runtime {
        self.services.stickers = stickers;
        self
    }

    /// Gives the handlers long-term memory: `remember` and `note` tasks write it, planning
    /// shows what a chat may see of it.
    pub fn with_facts(mut self, facts: SharedFacts) -> Runtime {
        self.services.facts = Some(facts);
        self
    }

    /// Gives `classify` tasks the group pipeline (the admission chain's group gates).
    pub fn with_groups(mut self, groups: SharedGroups) -> Runtime {
        self.services.groups = Some(groups);
        self
    }

    /// Gives `retrieve` tasks their fetcher and planning the chats' retrieved documents
    /// (without it a persona's `retrieve` is refused with a warning).
    pub fn with_retrieval(mut self, retrieval: crate::ports::retrieve::SharedRetrieval) -> Runtime {
        self.services.retrieval = Some(retrieval);
        self
    }

    pub fn handle(&self) -> RuntimeHandle {
        RuntimeHandle {
            queue: Arc::clone(&self.services.queue),
            status: self.status_rx.clone(),
            published: self.services.published.clone(),
        }
    }

    /// Loads persisted graphs, then runs the loop until shutdown.
    pub async fn run(self) -> Result<StopReport, RuntimeError> {
        driver::Driver::new(self.services).run().await
    }
}
