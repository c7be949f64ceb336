//! One in-memory world for several in-memory accounts: what one account sends into a group
//! reaches every other account of the world in its copy of that group, and what it sends to
//! another account's user id reaches that account as a direct message from it, each as
//! another user's message; a person's message put into a group ([`MemoryTelegram::inject`])
//! reaches every account. Message ids are allocated by the world per conversation (a group,
//! or a pair of accounts), so replies point at the same message in every copy. Each member
//! hands what it receives to its [`Sink`] (the runtime behind the admission chain, as the
//! MTProto pump does), and hears of its own sends (`own_sent`: share of voice, replies to
//! us).
//!
//! It holds the accounts weakly and never blocks: fan-out appends to each receiver's log and
//! calls its sink; no network, no clock. Used by `run --telegram memory` (every persona of the
//! daemon is in one world) and by tests.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::MemoryTelegram;
use crate::core::model::{Chat, ChatId, ChatKind, Message};
use crate::ports::updates::Sink;

/// A conversation whose message ids the world allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Conversation {
    Group(ChatId),
    /// Two accounts' direct chat (the smaller user id first).
    Pair(i64, i64),
}

/// A member a message goes to: its user id, account and sink.
type Receiver = (i64, Arc<MemoryTelegram>, Option<Arc<dyn Sink>>);

struct Member {
    account: Weak<MemoryTelegram>,
    sink: Option<Arc<dyn Sink>>,
}

#[derive(Default)]
struct Inner {
    members: BTreeMap<i64, Member>,
    next_ids: BTreeMap<Conversation, i64>,
}

/// Several in-memory accounts that see each other's messages.
#[derive(Default)]
pub struct World {
    inner: Mutex<Inner>,
}

impl World {
    pub fn new() -> Arc<World> {
        Arc::new(World::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `account` in the world (its sends are shared from now on).
    pub fn join(self: &Arc<World>, account: &Arc<MemoryTelegram>) {
        account.set_world(Arc::downgrade(self));
        // The ids the account's saved chats already hold (a restart starts a new world): new
        // messages of those conversations get higher ids than any of them.
        let me = account.self_id;
        let held = account.next_ids();
        let mut inner = self.lock();
        for (chat, next) in held {
            let conv = if chat.kind.is_direct() {
                Conversation::Pair(me.min(chat.id.0), me.max(chat.id.0))
            } else {
                Conversation::Group(chat.id)
            };
            let entry = inner.next_ids.entry(conv).or_insert(1);
            *entry = (*entry).max(next);
        }
        inner.members.insert(
            account.self_id,
            Member {
                account: Arc::downgrade(account),
                sink: None,
            },
        );
    }

    /// Where what the account `user_id` receives goes (its runtime).
    pub fn attach(&self, user_id: i64, sink: Arc<dyn Sink>) {
        if let Some(m) = self.lock().members.get_mut(&user_id) {
            m.sink = Some(sink);
        }
    }

    /// Takes the account `user_id` out of the world (its agent stopped).
    pub fn leave(&self, user_id: i64) {
        self.lock().members.remove(&user_id);
    }

    /// The conversation `chat` of account `me` is, if the world shares it: every group, and
    /// a direct chat with another member.
    fn conversation(&self, me: i64, chat: &Chat) -> Option<Conversation> {
        if !chat.kind.is_direct() {
            return Some(Conversation::Group(chat.id));
        }
        let other = chat.id.0;
        (other != me && self.lock().members.contains_key(&other))
            .then(|| Conversation::Pair(me.min(other), me.max(other)))
    }

    /// The id of a new message of `me` in `chat`, when the world shares that chat: at least
    /// `local_next` (the account's own next id), and above every id the world gave out there.
    pub(super) fn allocate(&self, me: i64, chat: &Chat, local_next: i64) -> Option<i64> {
        let conv = self.conversation(me, chat)?;
        let mut inner = self.lock();
        let next = inner.next_ids.entry(conv).or_insert(1);
        let id = (*next).max(local_next);
        *next = id + 1;
        Some(id)
    }

    /// Hands `message`, just added to `origin`'s copy of `chat` (its own send, or a person's
    /// message put there), to the other members that share the chat, as another user's
    /// message; and to `origin`'s own sink when it is `origin`'s send.
    pub(super) async fn fan_out(&self, origin: i64, chat: &Chat, message: &Message) {
        let Some(conv) = self.conversation(origin, chat) else {
            return;
        };
        if !message.outgoing {
            // A person's message put into a chat: only a group is shared with the others (a
            // direct chat is the account's own), and a message that claims to come from one
            // of the world's accounts is not handed to the others as that account's.
            let member = self.lock().members.contains_key(&message.sender.id);
            if matches!(conv, Conversation::Pair(..)) || member {
                return;
            }
        }
        let (receivers, own): (Vec<Receiver>, _) = {
            let inner = self.lock();
            let receivers = inner
                .members
                .iter()
                .filter(|(id, _)| **id != origin)
                .filter(|(id, _)| match conv {
                    Conversation::Group(_) => true,
                    Conversation::Pair(a, b) => **id == a || **id == b,
                })
                .filter_map(|(id, m)| Some((*id, m.account.upgrade()?, m.sink.clone())))
                .collect();
            let own = inner.members.get(&origin).and_then(|m| m.sink.clone());
            (receivers, own)
        };
        if let Some(sink) = own
            && message.outgoing
        {
            sink.own_sent(chat, message);
        }
        for (id, account, sink) in receivers {
            let view = match conv {
                Conversation::Group(_) => chat.clone(),
                Conversation::Pair(..) => Chat {
                    id: ChatId(origin),
                    kind: ChatKind::Direct,
                    title: message.sender.name.clone(),
                },
            };
            let copy = Message {
                chat: view.id,
                outgoing: false,
                ..message.clone()
            };
            match account.receive(view.clone(), copy.clone()).await {
                Ok(true) => {
                    if let Some(sink) = sink {
                        sink.inbound(view, copy, true);
                    }
                }
                Ok(false) => {
                    tracing::debug!(account = id, chat = %view.id, "in-memory world: the receiver blocked the sender");
                }
                Err(e) => {
                    tracing::warn!(account = id, chat = %view.id, error = %e, "in-memory world: a message did not reach an account");
                }
            }
        }
    }
}
