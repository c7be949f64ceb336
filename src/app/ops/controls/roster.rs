//! Who the owner controls: the running agents' seats (their Telegram, and the in-memory one
//! for `ctl say`) and the chats seen per agent (titles and usernames, so a command can name a
//! chat by `@username` or part of its title). Shared by the owner gate, which learns chats as
//! messages pass, and the [`super::Controller`], which reads them; the fleet adds and removes
//! agents as they start and stop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::adapters::memory::MemoryTelegram;
use crate::core::model::{Chat, Message};
use crate::ports::telegram::Telegram;

/// An agent the controller can answer for.
#[derive(Clone)]
pub struct Seat {
    pub telegram: Arc<dyn Telegram>,
    /// Set with `run --telegram memory`: where `say` delivers.
    pub memory: Option<Arc<MemoryTelegram>>,
    /// Set with `run --telegram sim` (the simulator in this daemon): where `say` delivers.
    pub sim: Option<SimSeat>,
}

/// An agent's account in the simulated Telegram run by this daemon.
#[derive(Clone)]
pub struct SimSeat {
    pub sim: crate::adapters::mtproto::sim::Sim,
    /// The account's user id.
    pub me: i64,
}

/// A chat as the owner may name it.
#[derive(Debug, Clone, Default)]
pub(crate) struct KnownChat {
    pub(crate) title: String,
    pub(crate) username: Option<String>,
}

/// The running agents and the chats seen of each.
#[derive(Default)]
pub struct Roster {
    seats: Mutex<BTreeMap<String, Seat>>,
    chats: Mutex<BTreeMap<String, BTreeMap<i64, KnownChat>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Roster {
    pub fn new() -> Arc<Roster> {
        Arc::new(Roster::default())
    }

    /// Makes an agent known (at start, and when hot reload starts one).
    pub fn add(&self, agent: &str, seat: Seat) {
        lock(&self.seats).insert(agent.to_string(), seat);
    }

    /// Forgets an agent (hot reload stopped it).
    pub fn remove(&self, agent: &str) {
        lock(&self.seats).remove(agent);
    }

    pub fn agents(&self) -> Vec<String> {
        lock(&self.seats).keys().cloned().collect()
    }

    pub(crate) fn seat(&self, agent: &str) -> Option<Seat> {
        lock(&self.seats).get(agent).cloned()
    }

    /// The account's own user id (its Saved Messages chat), if the agent runs.
    pub(crate) fn self_id(&self, agent: &str) -> Option<i64> {
        self.seat(agent).map(|s| s.telegram.self_id())
    }

    /// Learns a chat's title (and, in a direct chat, the other person's username).
    pub(crate) fn remember(&self, agent: &str, chat: &Chat, message: &Message) {
        let mut chats = lock(&self.chats);
        let entry = chats
            .entry(agent.to_string())
            .or_default()
            .entry(chat.id.0)
            .or_default();
        entry.title = chat.title.clone();
        if chat.kind.is_direct() && !message.outgoing && message.sender.username.is_some() {
            entry.username = message.sender.username.clone();
        }
    }

    /// The chats seen of `agent`.
    pub(crate) fn chats(&self, agent: &str) -> BTreeMap<i64, KnownChat> {
        lock(&self.chats).get(agent).cloned().unwrap_or_default()
    }
}
