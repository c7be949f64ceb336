//! Durable writes off the loop. The driver submits writes (a graph snapshot, a graph
//! deletion, an agent's safety state); each runs on the blocking pool through `store`, at
//! most [`MAX_PARALLEL_WRITES`] at once, and reports back through the work queue as
//! [`Event::Saved`]. Writes for one file stay in order: while one is running, later ones
//! for the same file wait, and only the newest waiting one is written (each write replaces
//! the whole file, so older ones are moot). Every write gets a generation number, rising
//! across the process, so the driver can tell when a given state is durable (a side-effect
//! task starts only once its own `active` mark is).
//!
//! Each write holds the clock until its result is queued, so virtual time cannot run ahead
//! of the disk in tests. [`blocking`] is the one helper for blocking calls in the runtime.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::Semaphore;

use super::RuntimeError;
use super::queue::{Event, WorkQueue};
use crate::agent_state::AgentState;
use crate::clock::SharedClock;
use crate::graph::{ConversationKey, TaskGraph};
use crate::store::{self, GraphStore};

/// Writes running at once (each one is a few fsyncs).
pub const MAX_PARALLEL_WRITES: usize = 64;

/// Runs a blocking closure on tokio's blocking pool; a panic or cancellation there is a
/// [`RuntimeError::Join`] that keeps its source.
pub async fn blocking<T, F>(f: F) -> Result<T, RuntimeError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(tokio::task::spawn_blocking(f).await?)
}

/// Which file a write replaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Graph(ConversationKey),
    AgentState(String),
}

/// One write.
#[derive(Debug)]
pub enum Write {
    Save(Box<TaskGraph>),
    Delete(ConversationKey),
    AgentState(String, Box<AgentState>),
}

impl Write {
    fn run(self, store: &GraphStore) -> Result<(), store::StoreError> {
        match self {
            Write::Save(g) => store.save(&g),
            Write::Delete(key) => store.delete(&key),
            Write::AgentState(agent, state) => {
                store::save_agent_state(store.state_dir(), &agent, &state)
            }
        }
    }
}

#[derive(Default)]
struct Slot {
    running: bool,
    waiting: Option<(u64, Write)>,
}

/// The write scheduler. Owned by the driver; see the module documentation.
pub struct Persister {
    store: GraphStore,
    queue: Arc<WorkQueue>,
    clock: SharedClock,
    permits: Arc<Semaphore>,
    slots: HashMap<Target, Slot>,
    next_gen: u64,
    running: usize,
    written: u64,
}

impl Persister {
    pub fn new(store: GraphStore, queue: Arc<WorkQueue>, clock: SharedClock) -> Persister {
        Persister {
            store,
            queue,
            clock,
            permits: Arc::new(Semaphore::new(MAX_PARALLEL_WRITES)),
            slots: HashMap::new(),
            next_gen: 0,
            running: 0,
            written: 0,
        }
    }

    /// Queues a write; returns its generation.
    pub fn submit(&mut self, target: Target, write: Write) -> u64 {
        self.next_gen += 1;
        let generation = self.next_gen;
        let slot = self.slots.entry(target.clone()).or_default();
        if slot.running {
            // Replaces an older waiting write for the same file: it would be overwritten.
            slot.waiting = Some((generation, write));
        } else {
            slot.running = true;
            self.spawn(target, generation, write);
        }
        generation
    }

    /// Writes queued or running.
    pub fn pending(&self) -> usize {
        self.slots.len()
    }

    /// Writes completed so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Whether a write for `target` is queued or running.
    pub fn busy(&self, target: &Target) -> bool {
        self.slots.contains_key(target)
    }

    /// Records a finished write and starts the next one for the same file, if any.
    pub fn completed(&mut self, target: &Target) {
        self.running = self.running.saturating_sub(1);
        self.written += 1;
        let next = match self.slots.get_mut(target) {
            Some(slot) => slot.waiting.take(),
            None => None,
        };
        match next {
            Some((generation, write)) => self.spawn(target.clone(), generation, write),
            None => {
                self.slots.remove(target);
            }
        }
    }

    fn spawn(&mut self, target: Target, generation: u64, write: Write) {
        self.running += 1;
        let hold = self.clock.hold();
        let store = self.store.clone();
        let queue = Arc::clone(&self.queue);
        let permits = Arc::clone(&self.permits);
        tokio::spawn(async move {
            let result = match permits.acquire_owned().await {
                Ok(permit) => {
                    let r = blocking(move || write.run(&store)).await;
                    drop(permit);
                    r.and_then(|r| r.map_err(RuntimeError::from))
                }
                Err(_) => Err(RuntimeError::Stopped),
            };
            queue.push(Event::Saved {
                target,
                generation,
                result,
            });
            drop(hold);
        });
    }
}
