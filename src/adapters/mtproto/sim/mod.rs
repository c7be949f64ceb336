//! A simulated Telegram at the TL level: a local MTProto server that the real grammers
//! client (and so the daemon's real MTProto adapter, its update pump and grammers' own update
//! machinery) connects to over TCP, with a small stateful model of the server behind it.
//! `run --telegram sim` runs the daemon on it; scenario tests drive it and read what the
//! accounts did. It speaks the TL objects grammers decodes and encrypts as a server does,
//! with auth keys it gives each account beforehand ([`auth_key_for`]; there is no key
//! exchange), so a session made by [`prepare_session`] connects with no login.
//!
//! - [`wire`]: the transport, encryption and message layer of the server side;
//! - [`world`]: the model (people, accounts with their own boxes and pts, basic groups,
//!   supergroups and forums with topics, read marks, notify settings, blocks, flood waits,
//!   slow mode, the service account 777000);
//! - [`deliver`]: posting (checked as Telegram checks it) and what it does to every box and
//!   channel; [`input`]: input peers resolved and checked;
//! - [`rpc`] and [`send`]: the requests the backend and grammers send, answered as Telegram
//!   does (including its errors: PEER_ID_INVALID, MESSAGE_TOO_LONG, FLOOD_WAIT_X, ...);
//!   [`upload`]: file parts and media sends (voice notes, CHAT_SEND_VOICES_FORBIDDEN);
//! - [`tl`]: the TL constructors, spelled out once.
//!
//! [`Sim`] is the control side (tests and `ctl say`): people write, the owner writes from
//! another device, groups migrate, chats are muted, gaps and `updatesTooLong` are provoked.
//! It never sleeps and keeps nothing on disk: it lives as long as its process.

pub mod deliver;
pub mod input;
pub mod rpc;
pub mod send;
pub mod tl;
pub mod upload;
pub mod wire;
pub mod world;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use grammers_client::session::Session as _;
use grammers_client::session::types::{DcOption, PeerAuth, PeerInfo};
use grammers_client::tl as gtl;
use sha2::Digest as _;
use tokio_util::sync::CancellationToken;

pub use deliver::{File, Post, Posted};
pub use world::{Msg, Peer, SERVICE_USER, World};

use crate::ports::clock::SharedClock;

/// The one data center of the simulator (the home DC of every session it makes).
pub const HOME_DC: i32 = 2;
/// Telegram's limit on a message's text, in UTF-16 code units.
pub const MESSAGE_LIMIT: usize = 4096;
/// Telegram's limit on a caption.
pub const CAPTION_LIMIT: usize = 1024;

pub(crate) type Shared = Arc<Mutex<World>>;

/// The user id of a person or account named `name` (the in-memory Telegram's too, so the
/// same names mean the same people on both twins).
pub fn user_id_for(name: &str) -> i64 {
    crate::adapters::memory::user_id_for(name)
}

/// The auth key the simulator gives the account `name` (derived from the name: the
/// simulator protects nothing).
pub fn auth_key_for(name: &str) -> [u8; 256] {
    let mut key = [0u8; 256];
    for (i, chunk) in key.chunks_mut(32).enumerate() {
        let block: [u8; 32] = sha2::Sha256::new()
            .chain_update(b"personad-sim")
            .chain_update(name.as_bytes())
            .chain_update([i as u8])
            .finalize()
            .into();
        chunk.copy_from_slice(&block);
    }
    key
}

/// The id of an auth key (the low 64 bits of its SHA-1).
pub(crate) fn key_id(key: &[u8; 256]) -> [u8; 8] {
    let sha: [u8; 20] = sha1::Sha1::digest(key).into();
    let mut id = [0; 8];
    id.copy_from_slice(&sha[12..20]);
    id
}

/// A running simulator: its address, and the handle to its world. Dropping it stops it.
pub struct SimServer {
    pub addr: SocketAddr,
    pub sim: Sim,
    stop: CancellationToken,
}

impl SimServer {
    /// Listens on `addr` (port 0: any free port) and serves until dropped.
    pub async fn start(clock: SharedClock, addr: SocketAddr) -> std::io::Result<SimServer> {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let mut world = World::new(clock);
        world.addr = (addr.ip().to_string(), addr.port());
        let world: Shared = Arc::new(Mutex::new(world));
        let stop = CancellationToken::new();
        tokio::spawn(wire::serve(listener, Arc::clone(&world), stop.clone()));
        tracing::info!(event = "sim_started", addr = %addr, "the simulated Telegram listens");
        Ok(SimServer {
            addr,
            sim: Sim { world },
            stop,
        })
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Why a session could not be made for the simulator.
#[derive(Debug, thiserror::Error)]
#[error("cannot prepare the simulated session {path}: {message}")]
pub struct PrepareError {
    pub path: String,
    pub message: String,
}

/// Writes (or re-points) the session at `path` for the simulator's account `name` at
/// `addr`: home DC, its address and auth key, and the account's own user (logged in).
pub async fn prepare_session(
    path: &Path,
    name: &str,
    addr: SocketAddr,
) -> Result<(), PrepareError> {
    let error = |message: String| PrepareError {
        path: path.display().to_string(),
        message,
    };
    crate::adapters::mtproto::session::create_private(path).map_err(|e| error(e.to_string()))?;
    let session = grammers_client::session::storages::SqliteSession::open(path)
        .await
        .map_err(|e| error(e.to_string()))?;
    let ipv4 = match addr {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(a) => SocketAddrV4::new(Ipv4Addr::LOCALHOST, a.port()),
    };
    session
        .set_dc_option(&DcOption {
            id: HOME_DC,
            ipv4,
            ipv6: SocketAddrV6::new(ipv4.ip().to_ipv6_mapped(), ipv4.port(), 0, 0),
            auth_key: Some(auth_key_for(name)),
        })
        .await
        .map_err(|e| error(e.to_string()))?;
    session
        .set_home_dc_id(HOME_DC)
        .await
        .map_err(|e| error(e.to_string()))?;
    let id = user_id_for(name);
    session
        .cache_peer(PeerInfo::User {
            id,
            auth: Some(PeerAuth::from_hash(World::access_hash(id, id))),
            bot: Some(false),
            is_self: Some(true),
        })
        .await
        .map_err(|e| error(e.to_string()))?;
    Ok(())
}

/// The control side of a simulator: what people, the owner and Telegram itself do, and what
/// the accounts did. Cheap to clone.
#[derive(Clone)]
pub struct Sim {
    world: Shared,
}

impl Sim {
    fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        f(&mut self.world.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The account `name` (created on first use); returns its user id.
    pub fn account(&self, name: &str) -> i64 {
        self.with(|w| w.account(name))
    }

    /// The person `name` (created on first use); returns its user id.
    pub fn person(&self, name: &str) -> i64 {
        self.with(|w| w.person(name))
    }

    /// Whether the account has a client connected.
    pub fn connected(&self, account: i64) -> bool {
        self.with(|w| w.connected(account))
    }

    /// `from` posts in `peer` (as `from` sees the dialog: a direct chat is `Peer::User` of the
    /// other side; Saved Messages is `Peer::User(from)`). The owner writing from another
    /// device is the account posting here.
    pub fn post(&self, from: i64, peer: Peer, post: Post) -> Result<Posted, world::RpcFailure> {
        self.with(|w| w.post(from, peer, post))
    }

    /// `from` writes `text` to `to` in their direct chat.
    pub fn dm(&self, from: i64, to: i64, text: &str) -> Result<Posted, world::RpcFailure> {
        self.post(
            from,
            Peer::User(to),
            Post {
                text: text.to_string(),
                ..Post::default()
            },
        )
    }

    /// A basic group titled `title` of `members` (created once per title).
    pub fn group(&self, title: &str, members: &[i64]) -> i64 {
        self.with(|w| {
            if let Some(g) = w
                .groups
                .values_mut()
                .find(|g| g.title == title && g.migrated_to.is_none())
            {
                g.members.extend(members.iter().copied());
                return g.id;
            }
            let id = w.new_chat_id();
            let date = w.now();
            w.groups.insert(
                id,
                world::Group {
                    id,
                    title: title.to_string(),
                    members: members.iter().copied().collect(),
                    migrated_to: None,
                    date,
                },
            );
            id
        })
    }

    /// A supergroup (a forum when `forum`) titled `title` of `members`.
    pub fn supergroup(&self, title: &str, members: &[i64], forum: bool) -> i64 {
        self.with(|w| w.new_channel(title, forum, members.iter().copied().collect()))
    }

    /// Opens a forum topic (its first message, by `from`); returns the topic's id.
    pub fn topic(&self, channel: i64, from: i64, title: &str) -> Result<i32, world::RpcFailure> {
        let posted = self.post(
            from,
            Peer::Channel(channel),
            Post {
                text: String::new(),
                topic_title: Some(title.to_string()),
                ..Post::default()
            },
        )?;
        Ok(posted.channel.map_or(0, |(id, _)| id))
    }

    /// Sets a supergroup's slow mode and its allowed reactions (`None`: all).
    pub fn restrict(&self, channel: i64, slow_mode_secs: i32, reactions: Option<Vec<String>>) {
        self.with(|w| {
            if let Some(c) = w.channels.get_mut(&channel) {
                c.slow_mode = slow_mode_secs;
                c.reactions = reactions;
            }
        });
    }

    /// Migrates a basic group to a new supergroup with the same members; every member
    /// account hears the migration as Telegram tells it. Returns the supergroup's id.
    pub fn migrate(&self, chat: i64) -> Option<i64> {
        self.with(|w| w.migrate(chat))
    }

    /// The account mutes (`until` in unix seconds; 0 unmutes) a dialog from another device:
    /// Telegram pushes `updateNotifySettings`.
    pub fn mute(&self, account: i64, peer: Peer, until: i32) {
        self.with(|w| {
            if let Some(a) = w.accounts.get_mut(&account) {
                a.mute_until.insert(peer, until);
            }
            let update = gtl::types::UpdateShort {
                update: gtl::types::UpdateNotifySettings {
                    peer: gtl::types::NotifyPeer { peer: peer.tl() }.into(),
                    notify_settings: tl::notify_settings(until),
                }
                .into(),
                date: w.now(),
            };
            w.push(account, &update.into());
        });
    }

    /// The next `calls` requests `method` (a TL constructor id) of `account` answer
    /// FLOOD_WAIT_`secs`.
    pub fn flood(&self, account: i64, method: u32, secs: i32, calls: u32) {
        self.with(|w| w.flood(account, method, secs, calls));
    }

    /// Loses (`true`) or delivers again (`false`) the pushes to `account`, as a network that
    /// drops packets: what was lost is found through the difference.
    pub fn lose_pushes(&self, account: i64, lose: bool) {
        self.with(|w| w.lose_pushes(account, lose));
    }

    /// Whether a dialog (as `peer` names it to the senders: a direct chat by its user, a
    /// group by itself) refuses voice notes (CHAT_SEND_VOICES_FORBIDDEN).
    pub fn forbid_voice(&self, peer: Peer, forbid: bool) {
        self.with(|w| w.forbid_voice(peer, forbid));
    }

    /// The bytes of a stored file, by the document id its messages carry.
    pub fn file_bytes(&self, id: i64) -> Option<Vec<u8>> {
        self.with(|w| w.file_bytes(id))
    }

    /// Every file reference expires (see [`World::expire_file_references`]).
    pub fn expire_file_references(&self) {
        self.with(World::expire_file_references);
    }

    /// Tells the account's clients `updatesTooLong` (they must fetch the difference).
    pub fn too_long(&self, account: i64) {
        self.with(|w| w.push(account, &gtl::enums::Updates::TooLong));
    }

    /// The messages of a dialog as `account` holds them, oldest first.
    pub fn transcript(&self, account: i64, peer: Peer) -> Vec<Msg> {
        self.with(|w| {
            let mut m = deliver::dialog_messages(w, account, peer);
            m.reverse();
            for msg in &mut m {
                msg.out = msg.out_for(account);
            }
            m
        })
    }

    /// What `account` did besides messages (typing, status, reads, blocks...), in order.
    pub fn events(&self, account: i64) -> Vec<String> {
        self.with(|w| {
            w.events
                .iter()
                .filter(|(a, _)| *a == account)
                .map(|(_, e)| e.clone())
                .collect()
        })
    }

    /// Runs `hook` once, right after `account`'s next request named `method` (a TL name such
    /// as `messages.getDialogs`) is answered: how a test puts an event in a precise window.
    /// The hook runs with the world locked, before the answer leaves.
    pub fn after(
        &self,
        account: i64,
        method: &'static str,
        hook: impl FnOnce(&mut World) + Send + 'static,
    ) {
        self.with(|w| w.hooks.push((account, method, Box::new(hook))));
    }

    /// Every request `account` sent so far, by TL name, in order.
    pub fn requests(&self, account: i64) -> Vec<&'static str> {
        self.with(|w| {
            w.requests
                .iter()
                .filter(|(a, _)| *a == account)
                .map(|(_, r)| *r)
                .collect()
        })
    }
}
