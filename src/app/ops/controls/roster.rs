//! Who the owner controls: the running agents' seats (their Telegram, and the in-memory one
//! for `ctl say`) and the chats known per agent (titles and usernames, so a command can name a
//! chat by `@username` or part of its title; kept across restarts by the [`ChatIndex`]). Shared by the owner gate, which learns chats as
//! messages pass, and the [`super::Controller`], which reads them; the fleet adds and removes
//! agents as they start and stop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::adapters::memory::MemoryTelegram;
use crate::app::ops::controls::chat_index::ChatIndex;
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

/// The running agents and the chats known of each.
pub struct Roster {
    seats: Mutex<BTreeMap<String, Seat>>,
    chats: Arc<ChatIndex>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Roster {
    /// The roster over `chats`, the chats each persona has known.
    pub fn new(chats: Arc<ChatIndex>) -> Arc<Roster> {
        Arc::new(Roster {
            seats: Mutex::default(),
            chats,
        })
    }

    /// The chats each persona has known.
    pub(crate) fn index(&self) -> &Arc<ChatIndex> {
        &self.chats
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

    /// Learns a chat's title (and, in a direct chat, the other person's username) and its
    /// newest message.
    pub(crate) fn remember(&self, agent: &str, chat: &Chat, message: &Message) {
        self.chats.seen(agent, chat, message);
    }

    /// The chats known of `agent`.
    pub(crate) fn chats(&self, agent: &str) -> BTreeMap<i64, KnownChat> {
        self.chats
            .chats(agent)
            .into_iter()
            .map(|(id, c)| {
                (
                    id,
                    KnownChat {
                        title: c.title,
                        username: c.username,
                    },
                )
            })
            .collect()
    }
}
