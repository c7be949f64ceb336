//! The state of the simulated Telegram: users (people and accounts), each account's own
//! message box (direct chats and basic groups, with its own message ids and pts, as on the
//! server), basic groups, channels (supergroups and forums with their topics, their own ids
//! and pts), read marks, notify settings, blocks, flood waits and slow mode, and the push
//! channels of the connected clients. It answers nothing on the wire (that is
//! [`super::rpc`]) and knows no socket (that is [`super::wire`]); every change that a client
//! would hear about is logged under its pts (for getDifference) and pushed to the account's
//! connections as the TL `Updates` the server sends.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use grammers_client::tl::{self, Serializable};

use super::tl as b;
pub use super::tl::Media;
use crate::ports::clock::SharedClock;

/// Something done to the world at a chosen moment (see [`World::hooks`]).
pub(crate) type Hook = Box<dyn FnOnce(&mut World) + Send>;

/// A connection's way to receive pushed updates (a serialized `Updates`).
pub(crate) type Push = Box<dyn Fn(&[u8]) + Send>;

/// A dialog as an account sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Peer {
    User(i64),
    Chat(i64),
    Channel(i64),
}

impl Peer {
    pub(crate) fn tl(self) -> tl::enums::Peer {
        match self {
            Peer::User(id) => b::peer_user(id),
            Peer::Chat(id) => b::peer_chat(id),
            Peer::Channel(id) => b::peer_channel(id),
        }
    }

    /// The Bot API form of the dialog's id (what the daemon calls a chat id).
    pub fn chat_id(self) -> i64 {
        match self {
            Peer::User(id) => id,
            Peer::Chat(id) => -id,
            Peer::Channel(id) => -1_000_000_000_000 - id,
        }
    }
}

/// A message, as stored in an account's box (DMs, basic groups) or a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub id: i32,
    pub peer: Peer,
    pub from: i64,
    /// Sent by the holder of the box (always false in a channel's list; see [`Msg::out_for`]).
    pub out: bool,
    pub text: String,
    pub date: i32,
    pub reply_to: Option<i32>,
    /// The forum topic (its first message's id).
    pub top: Option<i32>,
    pub mentioned: bool,
    /// A basic group's migration: the supergroup it became.
    pub migrated_to: Option<i64>,
    /// A forum topic's creation (its title): a service message whose id is the topic's.
    pub topic_title: Option<String>,
    pub reactions: Vec<(i64, String)>,
    /// A file sent with the message (a document: a photo as a file, a voice note, ...).
    pub media: Option<Media>,
    /// The same message in every box that holds a copy (each box numbers it its own way).
    pub global: u64,
}

impl Msg {
    pub(crate) fn out_for(&self, viewer: i64) -> bool {
        self.out || (matches!(self.peer, Peer::Channel(_)) && self.from == viewer)
    }

    /// The TL message as `viewer` sees it.
    pub(crate) fn tl(&self, viewer: i64) -> tl::enums::Message {
        let from = Some(b::peer_user(self.from));
        let action: Option<tl::enums::MessageAction> = match (&self.topic_title, self.migrated_to) {
            (Some(title), _) => Some(
                tl::types::MessageActionTopicCreate {
                    title_missing: false,
                    title: title.clone(),
                    icon_color: 0x6F_B9_F0,
                    icon_emoji_id: None,
                }
                .into(),
            ),
            (None, Some(channel_id)) => {
                Some(tl::types::MessageActionChatMigrateTo { channel_id }.into())
            }
            (None, None) => None,
        };
        if let Some(action) = action {
            return tl::types::MessageService {
                out: false,
                mentioned: false,
                media_unread: false,
                reactions_are_possible: false,
                silent: false,
                post: false,
                legacy: false,
                id: self.id,
                from_id: from,
                peer_id: self.peer.tl(),
                saved_peer_id: None,
                reply_to: None,
                date: self.date,
                action,
                reactions: None,
                ttl_period: None,
            }
            .into();
        }
        let mut m = b::message(self.id, self.peer.tl(), from, &self.text, self.date);
        m.out = self.out_for(viewer);
        m.mentioned = self.mentioned;
        if self.reply_to.is_some() || self.top.is_some() {
            m.reply_to = Some(b::reply_header(self.reply_to, self.top));
        }
        m.media = self.media.as_ref().map(|f| b::document(f, self.date));
        m.into()
    }
}

/// One account's files in progress (`upload.saveFilePart`): file id → parts by number,
/// oldest file first.
pub(crate) type Uploads = std::collections::VecDeque<(i64, BTreeMap<i32, Vec<u8>>)>;

/// A file stored by the simulator.
#[derive(Debug, Clone)]
pub(crate) struct StoredFile {
    pub(crate) bytes: Vec<u8>,
    pub(crate) access_hash: i64,
    pub(crate) file_reference: Vec<u8>,
    pub(crate) date: i32,
    /// What a message carries of it (to send it again by reference).
    pub(crate) name: String,
    pub(crate) mime_type: String,
    pub(crate) photo: bool,
}

/// A person or an account.
#[derive(Debug, Clone)]
pub struct User {
    pub id: i64,
    pub name: String,
    pub username: Option<String>,
}

/// A logged update: its pts, its pts_count, and the update itself.
type Logged = (i32, i32, tl::enums::Update);

/// An account: a user whose client connects.
pub struct Account {
    pub user: i64,
    pub key: [u8; 256],
    pub pts: i32,
    pub(crate) next_id: i32,
    /// The account's own box: direct chats and basic groups.
    pub messages: BTreeMap<i32, Msg>,
    pub(crate) log: Vec<Logged>,
    pub read_inbox: BTreeMap<Peer, i32>,
    pub mute_until: BTreeMap<Peer, i32>,
    pub blocked: BTreeSet<i64>,
    /// Users whose access hash the account holds (met in a direct chat or a basic group).
    pub met: BTreeSet<i64>,
    pub(crate) random_ids: BTreeMap<i64, (Peer, i32)>,
    pub(crate) pushes: Vec<(u64, Push)>,
    /// Pushes are lost (a network that drops them): the client finds the gap later.
    pub lose_pushes: bool,
}

/// A basic group.
#[derive(Debug, Clone)]
pub struct Group {
    pub id: i64,
    pub title: String,
    pub members: BTreeSet<i64>,
    pub migrated_to: Option<i64>,
    pub date: i32,
}

/// A supergroup or forum.
#[derive(Debug, Clone)]
pub struct Channel {
    pub id: i64,
    pub title: String,
    pub forum: bool,
    pub members: BTreeSet<i64>,
    pub pts: i32,
    pub(crate) next_id: i32,
    pub messages: BTreeMap<i32, Msg>,
    pub(crate) log: Vec<Logged>,
    /// Seconds between two messages of one member (0: off).
    pub slow_mode: i32,
    pub(crate) last_send: BTreeMap<i64, i32>,
    /// Reactions members may use (`None`: all).
    pub reactions: Option<Vec<String>>,
    pub date: i32,
    pub read_inbox: BTreeMap<i64, i32>,
}

/// Everything an action may fail with, as Telegram names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Telegram refused it: {name} ({code})")]
pub struct RpcFailure {
    pub code: i32,
    pub name: String,
}

impl RpcFailure {
    pub(crate) fn new(code: i32, name: impl Into<String>) -> RpcFailure {
        RpcFailure {
            code,
            name: name.into(),
        }
    }

    /// The message of the TL `rpc_error`.
    pub(crate) fn message(&self) -> String {
        self.name.clone()
    }
}

/// The whole simulated Telegram.
pub struct World {
    clock: SharedClock,
    pub users: BTreeMap<i64, User>,
    pub accounts: BTreeMap<i64, Account>,
    pub groups: BTreeMap<i64, Group>,
    pub channels: BTreeMap<i64, Channel>,
    keys: HashMap<[u8; 8], i64>,
    next_push: u64,
    pub(crate) next_chat: i64,
    pub(crate) next_global: u64,
    /// Flood waits asked per (account, request constructor): seconds, how many calls.
    floods: BTreeMap<(i64, u32), (i32, u32)>,
    /// What the accounts did besides messages, in order (typing, status, reads): for tests.
    pub events: Vec<(i64, String)>,
    /// Every request each account sent, by TL name, in order: for tests.
    pub requests: Vec<(i64, &'static str)>,
    /// Files by document id.
    pub(crate) files: BTreeMap<i64, StoredFile>,
    /// Uploads in progress per account (`upload.saveFilePart`), oldest first, bounded.
    pub(crate) uploads: BTreeMap<i64, Uploads>,
    /// Dialogs (as their senders name them: a direct chat by its other user) that refuse
    /// voice notes: a voice sent there answers CHAT_SEND_VOICES_FORBIDDEN.
    pub voice_forbidden: BTreeSet<Peer>,
    /// What happens right after an account's request of a TL name is answered (once each):
    /// how tests put an event in a precise window.
    pub(crate) hooks: Vec<(i64, &'static str, Hook)>,
    /// Where clients reach this world (for `help.getConfig`).
    pub addr: (String, u16),
}

/// The service account's user id.
pub const SERVICE_USER: i64 = 777_000;

impl World {
    pub(crate) fn new(clock: SharedClock) -> World {
        let mut w = World {
            clock,
            users: BTreeMap::new(),
            accounts: BTreeMap::new(),
            groups: BTreeMap::new(),
            channels: BTreeMap::new(),
            keys: HashMap::new(),
            next_push: 1,
            next_chat: 4_000,
            next_global: 1,
            floods: BTreeMap::new(),
            events: Vec::new(),
            requests: Vec::new(),
            hooks: Vec::new(),
            files: BTreeMap::new(),
            uploads: BTreeMap::new(),
            voice_forbidden: BTreeSet::new(),
            addr: ("127.0.0.1".into(), 0),
        };
        w.users.insert(
            SERVICE_USER,
            User {
                id: SERVICE_USER,
                name: "Telegram".into(),
                username: None,
            },
        );
        w
    }

    pub(crate) fn now(&self) -> i32 {
        i32::try_from(self.clock.now().as_second()).unwrap_or(i32::MAX)
    }

    /// The access hash `viewer` holds for `id` (per account, as on Telegram).
    pub fn access_hash(viewer: i64, id: i64) -> i64 {
        let mut x = (id as u64) ^ (viewer as u64).rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15;
        x ^= x >> 31;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (x >> 1) as i64
    }

    // ---- people, accounts, connections -------------------------------------------------

    /// A person (or an account's user) named `name`, created on first use.
    pub fn person(&mut self, name: &str) -> i64 {
        let id = super::user_id_for(name);
        self.users.entry(id).or_insert_with(|| User {
            id,
            name: name.to_string(),
            username: Some(name.to_lowercase().replace(' ', "_")),
        });
        id
    }

    /// An account for `name` (its key is [`super::auth_key_for`]), created on first use.
    pub fn account(&mut self, name: &str) -> i64 {
        let id = self.person(name);
        if !self.accounts.contains_key(&id) {
            let key = super::auth_key_for(name);
            self.keys.insert(super::key_id(&key), id);
            self.accounts.insert(
                id,
                Account {
                    user: id,
                    key,
                    pts: 1,
                    next_id: 1,
                    messages: BTreeMap::new(),
                    log: Vec::new(),
                    read_inbox: BTreeMap::new(),
                    mute_until: BTreeMap::new(),
                    blocked: BTreeSet::new(),
                    met: BTreeSet::from([id, SERVICE_USER]),
                    random_ids: BTreeMap::new(),
                    pushes: Vec::new(),
                    lose_pushes: false,
                },
            );
        }
        id
    }

    pub(crate) fn key(&self, id: [u8; 8]) -> Option<(i64, [u8; 256])> {
        let account = *self.keys.get(&id)?;
        Some((account, self.accounts.get(&account)?.key))
    }

    pub(crate) fn connect(&mut self, account: i64, push: Push) -> u64 {
        let id = self.next_push;
        self.next_push += 1;
        if let Some(a) = self.accounts.get_mut(&account) {
            a.pushes.push((id, push));
        }
        id
    }

    pub(crate) fn disconnect(&mut self, account: i64, id: u64) {
        if let Some(a) = self.accounts.get_mut(&account) {
            a.pushes.retain(|(i, _)| *i != id);
        }
    }

    /// Whether `account` has a live connection.
    pub fn connected(&self, account: i64) -> bool {
        self.accounts
            .get(&account)
            .is_some_and(|a| !a.pushes.is_empty())
    }

    pub(crate) fn push(&self, account: i64, updates: &tl::enums::Updates) {
        if let Some(a) = self.accounts.get(&account).filter(|a| !a.lose_pushes) {
            let bytes = updates.to_bytes();
            for (_, push) in &a.pushes {
                push(&bytes);
            }
        }
    }

    // ---- flood waits ---------------------------------------------------------------------

    /// The next `calls` requests of constructor `method` by `account` answer FLOOD_WAIT_`secs`.
    pub fn flood(&mut self, account: i64, method: u32, secs: i32, calls: u32) {
        self.floods.insert((account, method), (secs, calls));
    }

    pub(crate) fn take_flood(&mut self, account: i64, method: u32) -> Option<RpcFailure> {
        let entry = self.floods.get_mut(&(account, method))?;
        let secs = entry.0;
        entry.1 = entry.1.saturating_sub(1);
        if entry.1 == 0 {
            self.floods.remove(&(account, method));
        }
        Some(RpcFailure::new(420, format!("FLOOD_WAIT_{secs}")))
    }

    // ---- users and chats as an account sees them -----------------------------------------

    /// `id` as `viewer` sees it (min when the viewer never met it).
    pub(crate) fn user_tl(&self, viewer: i64, id: i64) -> Option<tl::enums::User> {
        let u = self.users.get(&id)?;
        let met = self
            .accounts
            .get(&viewer)
            .is_some_and(|a| a.met.contains(&id));
        Some(b::user(
            id,
            Self::access_hash(viewer, id),
            &u.name,
            u.username.as_deref(),
            id == viewer,
            !met,
        ))
    }

    pub(crate) fn users_tl(
        &self,
        viewer: i64,
        ids: impl IntoIterator<Item = i64>,
    ) -> Vec<tl::enums::User> {
        let ids: BTreeSet<i64> = ids.into_iter().collect();
        ids.into_iter()
            .filter_map(|id| self.user_tl(viewer, id))
            .collect()
    }

    pub(crate) fn chat_tl(&self, viewer: i64, peer: Peer) -> Option<tl::enums::Chat> {
        match peer {
            Peer::User(_) => None,
            Peer::Chat(id) => self.groups.get(&id).map(|g| {
                b::basic_group(
                    id,
                    &g.title,
                    i32::try_from(g.members.len()).unwrap_or(0),
                    g.date,
                    g.migrated_to.map(|c| (c, Self::access_hash(viewer, c))),
                )
            }),
            Peer::Channel(id) => self.channels.get(&id).map(|c| {
                b::channel(
                    id,
                    Self::access_hash(viewer, id),
                    &c.title,
                    c.date,
                    b::ChannelFlags {
                        broadcast: false,
                        forum: c.forum,
                        slow_mode: c.slow_mode > 0,
                    },
                )
            }),
        }
    }

    /// The users and chats that messages `msgs` name, as `viewer` sees them.
    pub(crate) fn refs(
        &self,
        viewer: i64,
        msgs: &[&Msg],
    ) -> (Vec<tl::enums::User>, Vec<tl::enums::Chat>) {
        let mut users = BTreeSet::from([viewer]);
        let mut chats = BTreeSet::new();
        for m in msgs {
            users.insert(m.from);
            match m.peer {
                Peer::User(u) => {
                    users.insert(u);
                }
                other => {
                    chats.insert(other);
                }
            }
            if let Some(c) = m.migrated_to {
                chats.insert(Peer::Channel(c));
            }
        }
        let chats = chats
            .into_iter()
            .filter_map(|p| self.chat_tl(viewer, p))
            .collect();
        (self.users_tl(viewer, users), chats)
    }

    /// Whether `viewer` may address `peer` with `access_hash`.
    pub(crate) fn check_hash(&self, viewer: i64, id: i64, access_hash: i64) -> bool {
        id == viewer || Self::access_hash(viewer, id) == access_hash
    }

    // ---- the account's box and log -------------------------------------------------------

    /// Logs the update `make` builds for the account's next pts (`count` events, so the
    /// update carries the pts it is logged under) and returns that pts.
    pub(crate) fn log(
        &mut self,
        account: i64,
        count: i32,
        make: impl FnOnce(i32) -> tl::enums::Update,
    ) -> i32 {
        let Some(a) = self.accounts.get_mut(&account) else {
            return 0;
        };
        a.pts += count;
        let update = make(a.pts);
        a.log.push((a.pts, count, update));
        a.pts
    }

    /// Stores a message in `account`'s box under its next id; returns the id.
    pub(crate) fn store(&mut self, account: i64, mut msg: Msg) -> Option<i32> {
        let a = self.accounts.get_mut(&account)?;
        msg.id = a.next_id;
        a.next_id += 1;
        if let Peer::User(u) = msg.peer {
            a.met.insert(u);
        }
        if let Peer::Chat(c) = msg.peer
            && let Some(g) = self.groups.get(&c)
        {
            a.met.extend(g.members.iter().copied());
        }
        let id = msg.id;
        a.messages.insert(id, msg);
        Some(id)
    }

    pub(crate) fn state(&self, account: i64) -> tl::enums::updates::State {
        tl::types::updates::State {
            pts: self.accounts.get(&account).map_or(0, |a| a.pts),
            qts: 0,
            date: self.now(),
            seq: 0,
            unread_count: 0,
        }
        .into()
    }

    /// Everything logged for `account` after `pts` (a difference); channels with messages
    /// since `date` are named by `updateChannelTooLong` (the client asks each for its own
    /// difference).
    pub(crate) fn difference(
        &self,
        account: i64,
        pts: i32,
        date: i32,
    ) -> tl::enums::updates::Difference {
        let Some(a) = self.accounts.get(&account) else {
            return tl::types::updates::DifferenceEmpty {
                date: self.now(),
                seq: 0,
            }
            .into();
        };
        let channels: Vec<tl::enums::Update> = self
            .channels
            .values()
            .filter(|c| c.members.contains(&account))
            .filter(|c| c.messages.values().any(|m| m.date >= date))
            .map(|c| {
                tl::types::UpdateChannelTooLong {
                    channel_id: c.id,
                    pts: None,
                }
                .into()
            })
            .collect();
        if pts >= a.pts && channels.is_empty() {
            return tl::types::updates::DifferenceEmpty {
                date: self.now(),
                seq: 0,
            }
            .into();
        }
        let mut new_messages = Vec::new();
        let mut other_updates = channels;
        let mut ids = Vec::new();
        for (_, _, u) in a.log.iter().filter(|(p, _, _)| *p > pts) {
            match u {
                tl::enums::Update::NewMessage(n) => {
                    new_messages.push(n.message.clone());
                    if let tl::enums::Message::Message(m) = &n.message {
                        ids.push(m.id);
                    }
                }
                other => other_updates.push(other.clone()),
            }
        }
        let msgs: Vec<&Msg> = ids.iter().filter_map(|i| a.messages.get(i)).collect();
        let (users, mut chats) = self.refs(account, &msgs);
        chats.extend(
            self.channels
                .values()
                .filter(|c| c.members.contains(&account))
                .filter_map(|c| self.chat_tl(account, Peer::Channel(c.id))),
        );
        tl::types::updates::Difference {
            new_messages,
            new_encrypted_messages: Vec::new(),
            other_updates,
            chats,
            users,
            state: self.state(account),
        }
        .into()
    }

    /// A channel's updates after `pts`, as `viewer` sees them.
    pub(crate) fn channel_difference(
        &self,
        viewer: i64,
        channel: i64,
        pts: i32,
    ) -> Result<tl::enums::updates::ChannelDifference, RpcFailure> {
        let c = self
            .channels
            .get(&channel)
            .filter(|c| c.members.contains(&viewer))
            .ok_or_else(|| RpcFailure::new(400, "CHANNEL_PRIVATE"))?;
        if pts >= c.pts {
            return Ok(tl::types::updates::ChannelDifferenceEmpty {
                r#final: true,
                pts: c.pts,
                timeout: Some(30),
            }
            .into());
        }
        let msgs: Vec<&Msg> = c.messages.values().filter(|m| {
            c.log.iter().any(|(p, _, u)| *p > pts && matches!(u, tl::enums::Update::NewChannelMessage(n) if msg_id(&n.message) == m.id))
        }).collect();
        let (users, chats) = self.refs(viewer, &msgs);
        Ok(tl::types::updates::ChannelDifference {
            r#final: true,
            pts: c.pts,
            timeout: Some(30),
            new_messages: msgs.iter().map(|m| m.tl(viewer)).collect(),
            other_updates: c
                .log
                .iter()
                .filter(|(p, _, u)| {
                    *p > pts && !matches!(u, tl::enums::Update::NewChannelMessage(_))
                })
                .map(|(_, _, u)| u.clone())
                .collect(),
            chats,
            users,
        }
        .into())
    }

    pub(crate) fn mark_random_id(&mut self, account: i64, random_id: i64, at: (Peer, i32)) -> bool {
        self.accounts
            .get_mut(&account)
            .is_some_and(|a| a.random_ids.insert(random_id, at).is_none())
    }

    pub(crate) fn knows_random_id(&self, account: i64, random_id: i64) -> bool {
        self.accounts
            .get(&account)
            .is_some_and(|a| a.random_ids.contains_key(&random_id))
    }
}

pub(crate) fn msg_id(m: &tl::enums::Message) -> i32 {
    match m {
        tl::enums::Message::Message(m) => m.id,
        tl::enums::Message::Service(m) => m.id,
        tl::enums::Message::Empty(m) => m.id,
    }
}
