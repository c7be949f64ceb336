//! The session store the connection uses: grammers' SQLite session with a thin layer that
//! lets the update pump drop a channel from catch-up. grammers 0.11 keeps its message box
//! private, so a channel whose `getChannelDifference` keeps failing (a long FLOOD_WAIT,
//! CHANNEL_INVALID, ...) would block every update behind it. grammers prepares each channel
//! difference by looking up the channel (`peer(channel)`) and then the self user; this layer
//! remembers the channel of that pair (the difference in progress), and, when the pump asks
//! to skip it, answers the next look-up of that channel without its access hash once, which
//! makes grammers end that channel's difference (as it does for channels it has no hash
//! for). Only look-ups made inside grammers' update machinery count for that pair: the update
//! source polls the stream inside [`in_update_machinery`], so a concurrent look-up of another
//! task (a send's peer, `enrich`) can never be taken for the difference's channel.
//! Everything else is passed through unchanged. It owns no data of its own.

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

use grammers_client::session::Session;
use grammers_client::session::storages::SqliteSession;
use grammers_client::session::types::{
    DcOption, PeerId, PeerInfo, PeerKind, UpdateState, UpdatesState,
};

type SessionResult<T> = Result<T, <SqliteSession as Session>::Error>;
type BoxFut<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

tokio::task_local! {
    /// Set while grammers' update machinery runs (see [`in_update_machinery`]).
    static UPDATE_MACHINERY: ();
}

/// Runs `f` (a poll of grammers' update stream) so that the session look-ups it makes are
/// known to be the update machinery's own.
pub async fn in_update_machinery<F: std::future::Future>(f: F) -> F::Output {
    UPDATE_MACHINERY.scope((), f).await
}

/// Whether the current task is inside [`in_update_machinery`].
fn from_update_machinery() -> bool {
    UPDATE_MACHINERY.try_with(|()| ()).is_ok()
}

#[derive(Default)]
struct Guard {
    /// The channel looked up last (a difference in preparation, if the self user follows).
    last_channel: Option<i64>,
    /// The channel whose difference was prepared last.
    diff_channel: Option<i64>,
    /// Channels whose next look-up answers without an access hash.
    hide_once: HashSet<i64>,
}

/// grammers' SQLite session plus the channel-skip layer.
pub struct GuardedSession {
    inner: SqliteSession,
    guard: Mutex<Guard>,
}

impl GuardedSession {
    pub fn new(inner: SqliteSession) -> GuardedSession {
        GuardedSession {
            inner,
            guard: Mutex::new(Guard::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Guard> {
        self.guard.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The channel whose difference grammers prepared last (bare id), if any.
    pub fn difference_channel(&self) -> Option<i64> {
        self.lock().diff_channel
    }

    /// Forgets the channel of the last difference (it succeeded).
    pub(crate) fn clear_difference_channel(&self) {
        self.lock().diff_channel = None;
    }

    /// Makes grammers end the difference of `channel` (bare id) at its next attempt.
    pub fn skip_channel(&self, channel: i64) {
        let mut guard = self.lock();
        guard.hide_once.insert(channel);
        if guard.diff_channel == Some(channel) {
            guard.diff_channel = None;
        }
    }
}

impl Session for GuardedSession {
    type Error = <SqliteSession as Session>::Error;

    fn home_dc_id(&self) -> SessionResult<i32> {
        self.inner.home_dc_id()
    }

    fn set_home_dc_id(&self, dc_id: i32) -> BoxFut<'_, SessionResult<()>> {
        self.inner.set_home_dc_id(dc_id)
    }

    fn dc_option(&self, dc_id: i32) -> SessionResult<Option<DcOption>> {
        self.inner.dc_option(dc_id)
    }

    fn set_dc_option(&self, dc_option: &DcOption) -> BoxFut<'_, SessionResult<()>> {
        self.inner.set_dc_option(dc_option)
    }

    fn peer(&self, peer: PeerId) -> BoxFut<'_, SessionResult<Option<PeerInfo>>> {
        Box::pin(async move {
            let mut info = self.inner.peer(peer).await?;
            let mut guard = self.lock();
            if !from_update_machinery() {
                // Another task's look-up (a send, `enrich`): it says nothing about the
                // difference in progress, and a hidden hash stays for grammers' own.
            } else if peer == PeerId::self_user() {
                if let Some(channel) = guard.last_channel.take() {
                    guard.diff_channel = Some(channel);
                }
            } else if peer.kind() == PeerKind::Channel {
                let bare = peer.bare_id();
                guard.last_channel = bare;
                if let Some(bare) = bare
                    && guard.hide_once.remove(&bare)
                    && let Some(PeerInfo::Channel { auth, .. }) = info.as_mut()
                {
                    *auth = None;
                }
            } else {
                guard.last_channel = None;
            }
            Ok(info)
        })
    }

    fn cache_peer(&self, peer: PeerInfo) -> BoxFut<'_, SessionResult<()>> {
        self.inner.cache_peer(peer)
    }

    fn cache_peers(&self, peers: Vec<PeerInfo>) -> BoxFut<'_, SessionResult<()>> {
        self.inner.cache_peers(peers)
    }

    fn updates_state(&self) -> BoxFut<'_, SessionResult<UpdatesState>> {
        self.inner.updates_state()
    }

    fn set_update_state(&self, update: UpdateState) -> BoxFut<'_, SessionResult<()>> {
        self.inner.set_update_state(update)
    }
}
