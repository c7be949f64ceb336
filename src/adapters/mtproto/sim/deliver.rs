//! Delivery in the simulated Telegram: a post by anyone (an account's send, a person, the owner
//! from another device) checked as Telegram checks it and put into every box or channel that
//! holds its dialog, logged under its pts and pushed as the update the server sends; the
//! migration of a basic group; removals and reactions. It decodes no request (that is
//! [`super::rpc`]) and owns no state of its own: these are the [`World`]'s methods that
//! change messages. Called by the request handlers and the control side.

use std::collections::{BTreeMap, BTreeSet};

use grammers_client::tl;

use super::tl as b;
use super::world::{Channel, Msg, Peer, RpcFailure, World};

fn fail(code: i32, name: &str) -> RpcFailure {
    RpcFailure::new(code, name)
}

impl World {
    /// Stores `msg` in the box of every account that holds the dialog, logs it and pushes it
    /// to all of them but `skip_push` (the sender, who has its answer). Returns the ids per
    /// account (and the new pts).
    pub(crate) fn deliver_box(
        &mut self,
        holders: &[(i64, Msg)],
        skip_push: Option<i64>,
    ) -> BTreeMap<i64, (i32, i32)> {
        let mut out = BTreeMap::new();
        for (account, msg) in holders {
            if msg.peer == Peer::User(msg.from)
                && !msg.out
                && self
                    .accounts
                    .get(account)
                    .is_some_and(|a| a.blocked.contains(&msg.from))
            {
                continue; // blocked: never delivered
            }
            let Some(id) = self.store(*account, msg.clone()) else {
                continue;
            };
            let Some(stored) = self
                .accounts
                .get(account)
                .and_then(|a| a.messages.get(&id))
                .cloned()
            else {
                continue;
            };
            let message = stored.tl(*account);
            let pts = self.log(*account, 1, |pts| {
                tl::types::UpdateNewMessage {
                    message,
                    pts,
                    pts_count: 1,
                }
                .into()
            });
            out.insert(*account, (id, pts));
            if Some(*account) != skip_push {
                let short = self.short_update(*account, &stored, pts);
                self.push(*account, &short);
            }
        }
        out
    }

    /// The update the server pushes for a new message in an account's box.
    fn short_update(&self, account: i64, m: &Msg, pts: i32) -> tl::enums::Updates {
        let reply_to = m.reply_to.map(|r| b::reply_header(Some(r), None));
        match m.peer {
            Peer::User(u) if u != account && m.migrated_to.is_none() => {
                tl::types::UpdateShortMessage {
                    out: m.out,
                    mentioned: m.mentioned,
                    media_unread: false,
                    silent: false,
                    id: m.id,
                    user_id: u,
                    message: m.text.clone(),
                    pts,
                    pts_count: 1,
                    date: m.date,
                    fwd_from: None,
                    via_bot_id: None,
                    reply_to,
                    entities: None,
                    ttl_period: None,
                }
                .into()
            }
            Peer::Chat(c) if m.migrated_to.is_none() && !m.out => {
                tl::types::UpdateShortChatMessage {
                    out: m.out,
                    mentioned: m.mentioned,
                    media_unread: false,
                    silent: false,
                    id: m.id,
                    from_id: m.from,
                    chat_id: c,
                    message: m.text.clone(),
                    pts,
                    pts_count: 1,
                    date: m.date,
                    fwd_from: None,
                    via_bot_id: None,
                    reply_to,
                    entities: None,
                    ttl_period: None,
                }
                .into()
            }
            _ => {
                let (users, chats) = self.refs(account, &[m]);
                self.updates(
                    vec![
                        tl::types::UpdateNewMessage {
                            message: m.tl(account),
                            pts,
                            pts_count: 1,
                        }
                        .into(),
                    ],
                    users,
                    chats,
                )
            }
        }
    }

    pub(crate) fn updates(
        &self,
        updates: Vec<tl::enums::Update>,
        users: Vec<tl::enums::User>,
        chats: Vec<tl::enums::Chat>,
    ) -> tl::enums::Updates {
        tl::types::Updates {
            updates,
            users,
            chats,
            date: self.now(),
            seq: 0,
        }
        .into()
    }

    /// Adds `msg` to a channel (its next id and pts) and pushes it to every member account
    /// but `skip_push`. Returns (id, pts).
    pub(crate) fn deliver_channel(
        &mut self,
        channel: i64,
        mut msg: Msg,
        skip_push: Option<i64>,
    ) -> Option<(i32, i32)> {
        let c = self.channels.get_mut(&channel)?;
        msg.id = c.next_id;
        c.next_id += 1;
        c.pts += 1;
        let (id, pts) = (msg.id, c.pts);
        c.log.push((
            pts,
            1,
            tl::types::UpdateNewChannelMessage {
                message: msg.tl(0),
                pts,
                pts_count: 1,
            }
            .into(),
        ));
        c.messages.insert(id, msg.clone());
        let members: Vec<i64> = c.members.iter().copied().collect();
        for account in members {
            if Some(account) == skip_push || !self.accounts.contains_key(&account) {
                continue;
            }
            let update = self.channel_update(account, &msg, pts);
            self.push(account, &update);
        }
        Some((id, pts))
    }

    pub(crate) fn channel_update(&self, viewer: i64, m: &Msg, pts: i32) -> tl::enums::Updates {
        let (users, chats) = self.refs(viewer, &[m]);
        let mut tl_msg = m.tl(viewer);
        if let tl::enums::Message::Message(mm) = &mut tl_msg {
            mm.mentioned = self.mentions(viewer, m);
        }
        self.updates(
            vec![
                tl::types::UpdateNewChannelMessage {
                    message: tl_msg,
                    pts,
                    pts_count: 1,
                }
                .into(),
            ],
            users,
            chats,
        )
    }

    /// Whether `m` addresses `viewer`: names its @username, or answers one of its messages.
    pub(crate) fn mentions(&self, viewer: i64, m: &Msg) -> bool {
        if m.from == viewer {
            return false;
        }
        let named = self
            .users
            .get(&viewer)
            .and_then(|u| u.username.as_ref())
            .is_some_and(|name| m.text.to_lowercase().contains(&format!("@{name}")));
        let replied = m.reply_to.is_some_and(|r| match m.peer {
            Peer::Channel(c) => self
                .channels
                .get(&c)
                .and_then(|c| c.messages.get(&r))
                .is_some_and(|o| o.from == viewer),
            _ => self
                .accounts
                .get(&viewer)
                .and_then(|a| a.messages.get(&r))
                .is_some_and(|o| o.out),
        });
        named || replied
    }

    pub(crate) fn new_chat_id(&mut self) -> i64 {
        self.next_chat += 1;
        self.next_chat
    }

    pub(crate) fn new_channel(&mut self, title: &str, forum: bool, members: BTreeSet<i64>) -> i64 {
        let id = self.new_chat_id() + 1_000_000;
        let date = self.now();
        self.channels.insert(
            id,
            Channel {
                id,
                title: title.to_string(),
                forum,
                members,
                pts: 1,
                next_id: 1,
                messages: BTreeMap::new(),
                log: Vec::new(),
                slow_mode: 0,
                last_send: BTreeMap::new(),
                reactions: None,
                date,
                read_inbox: BTreeMap::new(),
            },
        );
        id
    }

    /// Slow mode: whether `user` may post in `channel` now (else the seconds left).
    pub(crate) fn slow_mode_left(&mut self, channel: i64, user: i64) -> Option<i32> {
        let now = self.now();
        let c = self.channels.get_mut(&channel)?;
        if c.slow_mode <= 0 {
            return None;
        }
        let last = c.last_send.get(&user).copied();
        match last {
            Some(t) if now - t < c.slow_mode => Some(c.slow_mode - (now - t)),
            _ => {
                c.last_send.insert(user, now);
                None
            }
        }
    }
    /// `from` posts in `peer` (see [`super::Sim::post`]).
    pub fn post(
        &mut self,
        from: i64,
        peer: Peer,
        post: super::Post,
    ) -> Result<super::Posted, RpcFailure> {
        self::post(self, from, peer, &post, None)
    }

    /// Loses (or delivers again) the pushes to `account` (see [`super::Sim::lose_pushes`]).
    pub fn lose_pushes(&mut self, account: i64, lose: bool) {
        if let Some(a) = self.accounts.get_mut(&account) {
            a.lose_pushes = lose;
        }
    }

    pub(crate) fn next_global(&mut self) -> u64 {
        self.next_global += 1;
        self.next_global
    }

    /// The world-wide identity of `account`'s message `id`.
    pub(crate) fn global_of(&self, account: i64, id: i32) -> Option<u64> {
        self.accounts
            .get(&account)?
            .messages
            .get(&id)
            .map(|m| m.global)
    }

    /// `account`'s id of the message `global`.
    pub(crate) fn local_of(&self, account: i64, global: u64) -> Option<i32> {
        self.accounts
            .get(&account)?
            .messages
            .values()
            .find(|m| m.global == global)
            .map(|m| m.id)
    }

    /// The forum topic of a channel's message `id`.
    pub(crate) fn topic_of(&self, peer: Peer, id: i32) -> Option<i32> {
        let Peer::Channel(c) = peer else {
            return None;
        };
        let m = self.channels.get(&c)?.messages.get(&id)?;
        m.top.or(m.topic_title.as_ref().map(|_| m.id))
    }

    /// Removes messages from `account`'s box; returns their world-wide identities.
    pub(crate) fn remove(&mut self, account: i64, ids: &[i32]) -> Vec<u64> {
        let Some(a) = self.accounts.get_mut(&account) else {
            return Vec::new();
        };
        ids.iter()
            .filter_map(|i| a.messages.remove(i))
            .map(|m| m.global)
            .collect()
    }

    /// Sets `account`'s reactions on a message; false when there is no such message.
    pub(crate) fn set_reactions(
        &mut self,
        account: i64,
        peer: Peer,
        id: i32,
        emoji: &[String],
    ) -> bool {
        let msg = match peer {
            Peer::Channel(c) => self
                .channels
                .get_mut(&c)
                .and_then(|c| c.messages.get_mut(&id)),
            _ => self
                .accounts
                .get_mut(&account)
                .and_then(|a| a.messages.get_mut(&id))
                .filter(|m| m.peer == peer),
        };
        let Some(msg) = msg else {
            return false;
        };
        msg.reactions.retain(|(who, _)| *who != account);
        msg.reactions
            .extend(emoji.iter().map(|e| (account, e.clone())));
        true
    }

    /// Migrates basic group `chat` to a new supergroup: the group is deactivated, every
    /// member account gets the service message that names the supergroup.
    pub(crate) fn migrate(&mut self, chat: i64) -> Option<i64> {
        let g = self.groups.get(&chat)?.clone();
        if g.migrated_to.is_some() {
            return g.migrated_to;
        }
        let channel = self.new_channel(&g.title, false, g.members.clone());
        if let Some(group) = self.groups.get_mut(&chat) {
            group.migrated_to = Some(channel);
        }
        let date = self.now();
        let global = self.next_global();
        let holders: Vec<(i64, Msg)> = g
            .members
            .iter()
            .copied()
            .filter(|a| self.accounts.contains_key(a))
            .map(|a| {
                (
                    a,
                    Msg {
                        id: 0,
                        peer: Peer::Chat(chat),
                        from: a,
                        out: true,
                        text: String::new(),
                        date,
                        reply_to: None,
                        top: None,
                        mentioned: false,
                        migrated_to: Some(channel),
                        topic_title: None,
                        media: None,
                        reactions: Vec::new(),
                        global,
                    },
                )
            })
            .collect();
        self.deliver_box(&holders, None);
        Some(channel)
    }
}

/// What is posted.
#[derive(Debug, Clone, Default)]
pub struct Post {
    pub text: String,
    /// The message answered, in the sender's ids (a box) or the channel's.
    pub reply_to: Option<i32>,
    /// The forum topic.
    pub top: Option<i32>,
    /// Opens a forum topic of this title (the post is the topic's service message).
    pub topic_title: Option<String>,
    /// A file sent with the text.
    pub file: Option<File>,
    /// A file stored before, sent again by reference (instead of `file`).
    pub stored: Option<super::world::Media>,
}

/// A file to send: its name, MIME type and bytes; `voice` for a voice note, with its length
/// in seconds and its waveform (Telegram's packed 5-bit form).
#[derive(Debug, Clone, Default)]
pub struct File {
    pub name: String,
    pub mime_type: String,
    pub bytes: Vec<u8>,
    pub voice: bool,
    pub duration: i32,
    pub waveform: Option<Vec<u8>>,
}

impl World {
    /// Stores a file; returns what a message carries of it.
    pub(crate) fn store_file(&mut self, f: &File) -> super::world::Media {
        self.store_file_as(f, false)
    }

    /// Stores a file, a photo when `photo`; returns what a message carries of it.
    pub(crate) fn store_file_as(&mut self, f: &File, photo: bool) -> super::world::Media {
        let id = i64::try_from(self.next_global()).unwrap_or(0) + 9_000_000;
        let access_hash = Self::access_hash(id, id);
        let file_reference = file_reference(id, 0);
        let date = self.now();
        self.files.insert(
            id,
            super::world::StoredFile {
                bytes: f.bytes.clone(),
                access_hash,
                file_reference: file_reference.clone(),
                date,
                name: f.name.clone(),
                mime_type: f.mime_type.clone(),
                photo,
            },
        );
        super::world::Media {
            id,
            access_hash,
            file_reference,
            mime_type: f.mime_type.clone(),
            name: f.name.clone(),
            size: i64::try_from(f.bytes.len()).unwrap_or(i64::MAX),
            voice: f.voice,
            duration: f.duration,
            waveform: f.waveform.clone(),
            photo,
        }
    }

    /// Every file reference expires: a download with an old one answers
    /// FILE_REFERENCE_EXPIRED, and messages read again carry the new ones.
    pub fn expire_file_references(&mut self) {
        let generation = self.next_global();
        let mut fresh = BTreeMap::new();
        for (id, f) in &mut self.files {
            f.file_reference = file_reference(*id, generation);
            fresh.insert(*id, f.file_reference.clone());
        }
        let renew = |m: &mut Msg| {
            if let Some(media) = &mut m.media
                && let Some(r) = fresh.get(&media.id)
            {
                media.file_reference = r.clone();
            }
        };
        for a in self.accounts.values_mut() {
            a.messages.values_mut().for_each(renew);
        }
        for c in self.channels.values_mut() {
            c.messages.values_mut().for_each(renew);
        }
    }
}

/// A file reference: opaque bytes that change when references expire.
fn file_reference(id: i64, generation: u64) -> Vec<u8> {
    let mut r = id.to_le_bytes().to_vec();
    r.extend_from_slice(&generation.to_le_bytes());
    r
}

/// Where a post went: per holder (account, message id, pts); for a channel its id and pts.
#[derive(Debug, Clone, Default)]
pub struct Posted {
    pub copies: Vec<(i64, i32, i32)>,
    pub channel: Option<(i32, i32)>,
}

impl Posted {
    /// The id `account` sees.
    pub fn id_for(&self, account: i64) -> Option<i32> {
        self.channel.map(|(id, _)| id).or_else(|| {
            self.copies
                .iter()
                .find(|(a, _, _)| *a == account)
                .map(|(_, id, _)| *id)
        })
    }
}

/// Checks a text as Telegram does (empty, too long, entities out of bounds).
pub(crate) fn check_text(
    text: &str,
    entities: Option<&Vec<tl::enums::MessageEntity>>,
) -> Result<(), RpcFailure> {
    let len = text.encode_utf16().count();
    if text.trim().is_empty() {
        return Err(fail(400, "MESSAGE_EMPTY"));
    }
    if len > super::MESSAGE_LIMIT {
        return Err(fail(400, "MESSAGE_TOO_LONG"));
    }
    for e in entities.into_iter().flatten() {
        let (offset, length) = entity_bounds(e);
        if offset < 0 || length <= 0 || (offset + length) as usize > len {
            return Err(fail(400, "ENTITY_BOUNDS_INVALID"));
        }
    }
    Ok(())
}

fn entity_bounds(e: &tl::enums::MessageEntity) -> (i32, i32) {
    use tl::enums::MessageEntity as E;
    match e {
        E::Bold(x) => (x.offset, x.length),
        E::Italic(x) => (x.offset, x.length),
        E::Underline(x) => (x.offset, x.length),
        E::Strike(x) => (x.offset, x.length),
        E::Spoiler(x) => (x.offset, x.length),
        E::Code(x) => (x.offset, x.length),
        E::Pre(x) => (x.offset, x.length),
        E::TextUrl(x) => (x.offset, x.length),
        E::Url(x) => (x.offset, x.length),
        E::Mention(x) => (x.offset, x.length),
        E::Blockquote(x) => (x.offset, x.length),
        _ => (0, 1),
    }
}

/// Posts `post` from `from` into `peer` (as the sender sees it); `skip_push`: the account
/// whose request this answers (it hears through its answer).
pub(crate) fn post(
    w: &mut World,
    from: i64,
    peer: Peer,
    post: &Post,
    skip_push: Option<i64>,
) -> Result<Posted, RpcFailure> {
    let date = w.now();
    let global = w.next_global();
    let base = Msg {
        id: 0,
        peer,
        from,
        out: false,
        text: post.text.clone(),
        date,
        reply_to: post.reply_to,
        top: post.top,
        mentioned: false,
        migrated_to: None,
        topic_title: post.topic_title.clone(),
        media: match (&post.stored, &post.file) {
            (Some(m), _) => Some(m.clone()),
            (None, Some(f)) => Some(w.store_file(f)),
            (None, None) => None,
        },
        reactions: Vec::new(),
        global,
    };
    if let Peer::Channel(c) = peer {
        if let Some(left) = w.slow_mode_left(c, from) {
            return Err(fail(420, &format!("SLOWMODE_WAIT_{left}")));
        }
        let (id, pts) = w
            .deliver_channel(c, base, skip_push)
            .ok_or_else(|| fail(400, "CHANNEL_INVALID"))?;
        return Ok(Posted {
            copies: Vec::new(),
            channel: Some((id, pts)),
        });
    }
    if let Peer::Chat(c) = peer
        && w.groups.get(&c).is_some_and(|g| g.migrated_to.is_some())
    {
        return Err(fail(400, "CHAT_ID_INVALID"));
    }
    // The message answered, as each holder numbers it.
    let answered = post.reply_to.and_then(|r| w.global_of(from, r));
    let holders: Vec<(i64, Msg)> = box_holders(w, peer, from)
        .into_iter()
        .map(|holder| {
            let mut m = base.clone();
            if holder != from {
                m.peer = match peer {
                    Peer::User(_) => Peer::User(from),
                    other => other,
                };
            }
            m.out = holder == from;
            m.reply_to = answered.and_then(|g| w.local_of(holder, g));
            m.mentioned = !m.out && w.mentions(holder, &m);
            (holder, m)
        })
        .collect();
    let copies = w.deliver_box(&holders, skip_push);
    Ok(Posted {
        copies: copies
            .into_iter()
            .map(|(a, (id, pts))| (a, id, pts))
            .collect(),
        channel: None,
    })
}

/// The messages of a dialog, newest first.
pub(crate) fn dialog_messages(w: &World, account: i64, peer: Peer) -> Vec<Msg> {
    let mut msgs: Vec<Msg> = match peer {
        Peer::Channel(c) => w
            .channels
            .get(&c)
            .map(|c| c.messages.values().cloned().collect())
            .unwrap_or_default(),
        _ => w
            .accounts
            .get(&account)
            .map(|a| {
                a.messages
                    .values()
                    .filter(|m| m.peer == peer)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default(),
    };
    msgs.reverse();
    msgs
}

/// Members of a dialog that are accounts (who get a copy in their box).
pub(crate) fn box_holders(w: &World, peer: Peer, sender: i64) -> BTreeSet<i64> {
    match peer {
        Peer::User(u) => [sender, u]
            .into_iter()
            .filter(|a| w.accounts.contains_key(a))
            .collect(),
        Peer::Chat(c) => w
            .groups
            .get(&c)
            .map(|g| {
                g.members
                    .iter()
                    .copied()
                    .filter(|a| w.accounts.contains_key(a))
                    .collect()
            })
            .unwrap_or_default(),
        Peer::Channel(_) => BTreeSet::new(),
    }
}
