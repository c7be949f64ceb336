//! Walking an account's dialogs: the unread scan on every (re)connect (each dialog's newest
//! unread message from others, handed to the pump's admission), the peer-cache warm-up after
//! `login`, and putting back the update state a walk overwrote (every channel's pts, which
//! would erase the gaps catch-up must fill). grammers can panic inside the walk, so each walk
//! runs in a task of its own. Called by the connection adaptor (`mod.rs`) and `login`.

use std::fmt;
use std::sync::Arc;

use grammers_client::Client;

use crate::adapters::mtproto::backend::{self, MtprotoTelegram};
use crate::adapters::mtproto::{map, pump};

/// On connect: finds chats with unread messages from others, unread mentions, or the
/// "marked unread" flag, and returns each one's newest message for the pump's admission
/// (the same rules as live updates: age, blocklist, mute, sender; a mention or the mark
/// counts as addressing the agent, so it is answered in a muted chat too). Each dialog's
/// own notify settings answer the mute look-up, and what `mark_read` must clear later is
/// noted. Walking the dialogs writes every channel's current pts into the session, which
/// would erase the gaps catch-up must fill: the saved update state is restored afterwards,
/// without broadcast channels (we never answer there, so their differences are not worth
/// fetching). The walk runs in a task of its own: a panic inside the library is contained.
/// `saved`: the update state read before the walk, put back after it.
pub async fn scan_unread<S>(
    agent: &str,
    client: Client,
    session: &S,
    telegram: Arc<MtprotoTelegram>,
    saved: Option<grammers_client::session::types::UpdatesState>,
) -> Vec<pump::TgUpdate>
where
    S: grammers_client::session::Session,
    S::Error: fmt::Display,
{
    let walk = tokio::spawn(async move {
        let mut dialogs = client.iter_dialogs();
        let mut found = Vec::new();
        while let Ok(Some(dialog)) = dialogs.next().await {
            if let grammers_client::tl::enums::Dialog::Dialog(d) = &dialog.raw
                && let Some(last) = dialog.last_message.as_ref()
                && let Some(update) = unread_update(&telegram, d, last)
            {
                found.push(update);
            }
        }
        found
    });
    let found = match walk.await {
        Ok(found) => {
            tracing::info!(agent = %agent, chats = found.len(), "unread scan done");
            found
        }
        Err(e) => {
            tracing::warn!(agent = %agent, error = %e, "unread scan failed");
            Vec::new()
        }
    };
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
pub async fn spawn_scan<S>(
    agent: String,
    client: Client,
    session: Arc<S>,
    telegram: Arc<MtprotoTelegram>,
) -> Scan
where
    S: grammers_client::session::Session + Send + Sync + 'static,
    S::Error: fmt::Display,
{
    let saved = session.updates_state().await.ok();
    let (tx, found) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let finds = scan_unread(&agent, client, session.as_ref(), telegram, saved).await;
        let _ = tx.send(finds);
    });
    Scan { task, found }
}

/// The update the unread scan hands to admission for one dialog, if it has anything unread
/// from someone else.
pub fn unread_update(
    telegram: &MtprotoTelegram,
    dialog: &grammers_client::tl::types::Dialog,
    last: &grammers_client::message::Message,
) -> Option<pump::TgUpdate> {
    if dialog.unread_count == 0 && dialog.unread_mentions_count == 0 && !dialog.unread_mark {
        return None;
    }
    let mapped = telegram.map(last).ok()?;
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
/// The walk runs in a task of its own (the library can panic on unknown peers). Walking
/// writes each channel's current pts: after a fresh login that is where catch-up starts
/// (minus broadcast channels); on a session logged in before, the saved state is put back,
/// so what the daemon missed meanwhile is still fetched.
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
    let client = client.clone();
    let walk = tokio::spawn(async move {
        let mut dialogs = client.iter_dialogs();
        let mut n = 0usize;
        while let Ok(Some(_)) = dialogs.next().await {
            n += 1;
        }
        n
    });
    match walk.await {
        Ok(n) => tracing::info!(agent = %agent, dialogs = n, "peer cache warmed"),
        Err(e) => tracing::warn!(agent = %agent, error = %e, "walking the dialogs failed"),
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
