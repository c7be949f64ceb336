//! Walking an account's dialogs: the unread scan on every (re)connect (each dialog's newest
//! unread message from others, handed to the pump's admission), the peer-cache warm-up after
//! `login`, and putting back the update state a walk overwrote (every channel's pts, which
//! would erase the gaps catch-up must fill). A walk is raw `messages.getDialogs` pages
//! through the [`Invoker`] (offsets from each page's last dialog, as grammers' own iterator
//! does), each page's users and chats cached before its messages are mapped. Called by the
//! connection adaptor (`mod.rs`) and `login`.

use std::fmt;
use std::sync::Arc;

use grammers_client::tl;
use grammers_client::{Client, InvocationError};

use crate::adapters::mtproto::backend::{self, MtprotoTelegram};
use crate::adapters::mtproto::invoker::{self, Invoker};
use crate::adapters::mtproto::{map, pump};

/// Dialogs asked for per page (Telegram's largest).
const DIALOGS_PAGE: i32 = 100;
/// Most pages one walk reads (20,000 dialogs), so a server that never ends cannot hold a
/// connect forever.
const MAX_DIALOG_PAGES: usize = 200;

/// One page of dialogs with the messages, users and chats it names.
pub struct DialogPage {
    pub dialogs: Vec<tl::types::Dialog>,
    pub messages: Vec<tl::enums::Message>,
    pub users: Vec<tl::enums::User>,
    pub chats: Vec<tl::enums::Chat>,
}

impl DialogPage {
    /// The newest message of `dialog`, if the page carries it.
    pub fn last_message(&self, dialog: &tl::types::Dialog) -> Option<&tl::enums::Message> {
        self.messages.iter().find(|m| match m {
            tl::enums::Message::Message(m) => {
                m.id == dialog.top_message && m.peer_id == dialog.peer
            }
            tl::enums::Message::Service(m) => {
                m.id == dialog.top_message && m.peer_id == dialog.peer
            }
            tl::enums::Message::Empty(_) => false,
        })
    }

    /// The input peer of `peer` from the page's users and chats (hash 0 when absent).
    fn input_peer(&self, peer: &tl::enums::Peer) -> tl::enums::InputPeer {
        match peer {
            tl::enums::Peer::User(p) => {
                let access_hash = self
                    .users
                    .iter()
                    .find_map(|u| match u {
                        tl::enums::User::User(u) if u.id == p.user_id => u.access_hash,
                        _ => None,
                    })
                    .unwrap_or(0);
                tl::types::InputPeerUser {
                    user_id: p.user_id,
                    access_hash,
                }
                .into()
            }
            tl::enums::Peer::Chat(p) => tl::types::InputPeerChat { chat_id: p.chat_id }.into(),
            tl::enums::Peer::Channel(p) => {
                let access_hash = self
                    .chats
                    .iter()
                    .find_map(|c| match c {
                        tl::enums::Chat::Channel(c) if c.id == p.channel_id => c.access_hash,
                        tl::enums::Chat::ChannelForbidden(c) if c.id == p.channel_id => {
                            Some(c.access_hash)
                        }
                        _ => None,
                    })
                    .unwrap_or(0);
                tl::types::InputPeerChannel {
                    channel_id: p.channel_id,
                    access_hash,
                }
                .into()
            }
        }
    }
}

/// A walk over every dialog, one `messages.getDialogs` page at a time.
pub struct DialogWalk {
    request: tl::functions::messages::GetDialogs,
    pages: usize,
    done: bool,
}

impl Default for DialogWalk {
    fn default() -> Self {
        DialogWalk {
            request: tl::functions::messages::GetDialogs {
                exclude_pinned: false,
                folder_id: None,
                offset_date: 0,
                offset_id: 0,
                offset_peer: tl::enums::InputPeer::Empty,
                limit: DIALOGS_PAGE,
                hash: 0,
            },
            pages: 0,
            done: false,
        }
    }
}

impl DialogWalk {
    /// The next page (`None`: the walk is over). Like grammers' own walk, it writes each
    /// channel's current pts into `session` (restore the saved state afterwards where the
    /// gaps matter).
    pub async fn next<S>(
        &mut self,
        invoker: &dyn Invoker,
        session: &S,
    ) -> Result<Option<DialogPage>, InvocationError>
    where
        S: grammers_client::session::Session,
        S::Error: fmt::Display,
    {
        use grammers_client::session::types::UpdateState;
        if self.done || self.pages >= MAX_DIALOG_PAGES {
            return Ok(None);
        }
        self.pages += 1;
        let (dialogs, messages, users, chats, last) =
            match invoker::call(invoker, &self.request).await? {
                tl::enums::messages::Dialogs::Dialogs(d) => {
                    (d.dialogs, d.messages, d.users, d.chats, true)
                }
                tl::enums::messages::Dialogs::Slice(d) => {
                    let last = d.dialogs.len() < self.request.limit as usize;
                    (d.dialogs, d.messages, d.users, d.chats, last)
                }
                tl::enums::messages::Dialogs::NotModified(_) => {
                    self.done = true;
                    return Ok(None);
                }
            };
        let page = DialogPage {
            dialogs: dialogs
                .into_iter()
                .filter_map(|d| match d {
                    tl::enums::Dialog::Dialog(d) => Some(d),
                    _ => None,
                })
                .collect(),
            messages,
            users,
            chats,
        };
        for d in &page.dialogs {
            if let (tl::enums::Peer::Channel(c), Some(pts)) = (&d.peer, d.pts)
                && let Err(e) = session
                    .set_update_state(UpdateState::Channel {
                        id: c.channel_id,
                        pts,
                    })
                    .await
            {
                tracing::debug!(error = %e, "could not note a channel's pts");
            }
        }
        self.done = last || page.dialogs.is_empty() || !self.advance(&page);
        Ok(Some(page))
    }

    /// Moves the offsets past `page` (false: they would not move, the walk ends).
    fn advance(&mut self, page: &DialogPage) -> bool {
        let Some(tail) = page.dialogs.last() else {
            return false;
        };
        let before = (
            self.request.offset_date,
            self.request.offset_id,
            self.request.offset_peer.clone(),
        );
        self.request.exclude_pinned = true;
        if let Some(m) = page.dialogs.iter().rev().find_map(|d| page.last_message(d)) {
            let (id, date) = match m {
                tl::enums::Message::Message(m) => (m.id, m.date),
                tl::enums::Message::Service(m) => (m.id, m.date),
                tl::enums::Message::Empty(m) => (m.id, 0),
            };
            self.request.offset_id = id;
            self.request.offset_date = date;
        }
        self.request.offset_peer = page.input_peer(&tail.peer);
        before
            != (
                self.request.offset_date,
                self.request.offset_id,
                self.request.offset_peer.clone(),
            )
    }
}

/// On connect: finds chats with unread messages from others, unread mentions, or the
/// "marked unread" flag, and returns each one's newest message for the pump's admission
/// (the same rules as live updates: age, blocklist, mute, sender; a mention or the mark
/// counts as addressing the agent, so it is answered in a muted chat too). Each dialog's
/// own notify settings answer the mute look-up, and what `mark_read` must clear later is
/// noted. Walking the dialogs writes every channel's current pts into the session, which
/// would erase the gaps catch-up must fill: the saved update state is restored afterwards,
/// without broadcast channels (we never answer there, so their differences are not worth
/// fetching). `saved`: the update state read before the walk, put back after it.
pub async fn scan_unread<S>(
    agent: &str,
    session: &S,
    telegram: Arc<MtprotoTelegram>,
    saved: Option<grammers_client::session::types::UpdatesState>,
) -> Vec<pump::TgUpdate>
where
    S: grammers_client::session::Session,
    S::Error: fmt::Display,
{
    let mut walk = DialogWalk::default();
    let mut found = Vec::new();
    loop {
        match walk.next(telegram.invoker(), session).await {
            Ok(Some(page)) => {
                telegram
                    .cache_peers(page.users.clone(), page.chats.clone())
                    .await;
                for d in &page.dialogs {
                    if let Some(last) = page.last_message(d)
                        && let Some(update) = unread_update(&telegram, d, last)
                    {
                        found.push(update);
                    }
                }
            }
            Ok(None) => {
                tracing::info!(agent = %agent, chats = found.len(), "unread scan done");
                break;
            }
            Err(e) => {
                tracing::warn!(agent = %agent, error = %crate::adapters::mtproto::errors::classify(&e), chats = found.len(), "unread scan stopped early");
                break;
            }
        }
    }
    if let Some(saved) = saved {
        restore_update_state(agent, session, saved).await;
    }
    found
}

/// The unread scan running in a task of its own (see [`spawn_scan`]).
pub struct Scan {
    /// Ends once the update state is restored, whether or not anyone waits for `found`.
    pub task: tokio::task::JoinHandle<()>,
    /// The scan's finds.
    pub found: tokio::sync::oneshot::Receiver<Vec<pump::TgUpdate>>,
}

/// Starts the unread scan in a task of its own: the update state is read first and put back
/// after the walk even when the caller stops waiting (a stop during the scan), so the gaps
/// catch-up must fill are never lost.
pub async fn spawn_scan<S>(agent: String, session: Arc<S>, telegram: Arc<MtprotoTelegram>) -> Scan
where
    S: grammers_client::session::Session + Send + Sync + 'static,
    S::Error: fmt::Display,
{
    let saved = session.updates_state().await.ok();
    let (tx, found) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let finds = scan_unread(&agent, session.as_ref(), telegram, saved).await;
        let _ = tx.send(finds);
    });
    Scan { task, found }
}

/// The update the unread scan hands to admission for one dialog, if it has anything unread
/// from someone else.
pub fn unread_update(
    telegram: &MtprotoTelegram,
    dialog: &grammers_client::tl::types::Dialog,
    last: &tl::enums::Message,
) -> Option<pump::TgUpdate> {
    if dialog.unread_count == 0 && dialog.unread_mentions_count == 0 && !dialog.unread_mark {
        return None;
    }
    let mapped = telegram.map_fetched(last).ok()?;
    if mapped.message.outgoing {
        return None;
    }
    let grammers_client::tl::enums::PeerNotifySettings::Settings(notify) = &dialog.notify_settings;
    telegram.note_mute(mapped.chat.id, notify.mute_until);
    let flags = backend::UnreadFlags {
        mentions: dialog.unread_mentions_count > 0,
        marked: dialog.unread_mark,
    };
    telegram.note_unread(mapped.chat.id, flags);
    let mut incoming = backend::incoming(mapped);
    incoming.callout |= flags.mentions || flags.marked;
    Some(pump::TgUpdate::NewMessage(incoming))
}

/// Writes back an update state saved before a dialog walk, minus broadcast channels.
pub async fn restore_update_state<S>(
    agent: &str,
    session: &S,
    saved: grammers_client::session::types::UpdatesState,
) where
    S: grammers_client::session::Session,
    S::Error: fmt::Display,
{
    use grammers_client::session::types::{ChannelKind, PeerInfo, UpdateState};
    if saved.pts == 0 && saved.date == 0 && saved.channels.is_empty() {
        // Nothing saved yet (first run): the stream starts from the server's state.
        return;
    }
    let mut broadcast = std::collections::HashSet::new();
    for channel in &saved.channels {
        if let Some(id) = map::channel_peer(channel.id)
            && let Ok(Some(PeerInfo::Channel {
                kind: Some(ChannelKind::Broadcast),
                ..
            })) = session.peer(id).await
        {
            broadcast.insert(channel.id);
        }
    }
    let state = without_channels(saved, &broadcast);
    if let Err(e) = session.set_update_state(UpdateState::All(state)).await {
        tracing::warn!(agent = %agent, error = %e, "could not restore the update state after the unread scan");
    }
}

/// An update state without the given channels.
pub fn without_channels(
    mut state: grammers_client::session::types::UpdatesState,
    drop: &std::collections::HashSet<i64>,
) -> grammers_client::session::types::UpdatesState {
    state.channels.retain(|c| !drop.contains(&c.id));
    state
}

/// Walks every dialog once so the session knows the access hashes channel catch-up needs.
/// Walking writes each channel's current pts: after a fresh login that is where catch-up
/// starts (minus broadcast channels); on a session logged in before, the saved state is put
/// back, so what the daemon missed meanwhile is still fetched.
///
/// `saved`: the state to put back (a session logged in before), or `None` to keep what the
/// walk wrote (a fresh login).
pub async fn warm_peer_cache<S>(
    agent: &str,
    client: &Client,
    session: &S,
    saved: Option<grammers_client::session::types::UpdatesState>,
) where
    S: grammers_client::session::Session,
    S::Error: fmt::Display,
{
    let invoker = invoker::ClientInvoker(Arc::new(std::sync::RwLock::new(client.clone())));
    let mut walk = DialogWalk::default();
    let mut n = 0usize;
    loop {
        match walk.next(&invoker, session).await {
            Ok(Some(page)) => {
                n += page.dialogs.len();
                backend::store_peers(client, session, page.users, page.chats).await;
            }
            Ok(None) => {
                tracing::info!(agent = %agent, dialogs = n, "peer cache warmed");
                break;
            }
            Err(e) => {
                tracing::warn!(agent = %agent, error = %crate::adapters::mtproto::errors::classify(&e), dialogs = n, "walking the dialogs failed");
                break;
            }
        }
    }
    let keep = match saved {
        Some(saved) => Some(saved),
        None => session.updates_state().await.ok(),
    };
    if let Some(state) = keep {
        restore_update_state(agent, session, state).await;
    }
}

/// On a session that never saved an update state (the first start after a login), asks
/// Telegram for its state before the unread scan and saves it, so the stream starts from
/// there: a message that arrives between the scan and the stream's start is then fetched
/// by the first difference (without it grammers asks for the state after the scan, and
/// such a message is neither scanned nor streamed).
pub async fn seed_update_state<S>(agent: &str, session: &S, telegram: &MtprotoTelegram)
where
    S: grammers_client::session::Session,
    S::Error: fmt::Display,
{
    use grammers_client::session::types::{UpdateState, UpdatesState};
    let saved = session.updates_state().await;
    if !matches!(&saved, Ok(s) if s.pts == 0 && s.date == 0 && s.channels.is_empty()) {
        return;
    }
    let state = match telegram
        .call(&grammers_client::tl::functions::updates::GetState {})
        .await
    {
        Ok(grammers_client::tl::enums::updates::State::State(s)) => s,
        Err(e) => {
            tracing::warn!(agent = %agent, error = %crate::adapters::mtproto::errors::classify(&e), "could not read the update state before the unread scan");
            return;
        }
    };
    let state = UpdatesState {
        pts: state.pts,
        qts: state.qts,
        date: state.date,
        seq: state.seq,
        channels: Vec::new(),
    };
    if let Err(e) = session.set_update_state(UpdateState::All(state)).await {
        tracing::warn!(agent = %agent, error = %e, "could not save the update state before the unread scan");
    }
}
