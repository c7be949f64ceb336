//! Raw TL fixtures for the MTProto tests, on the simulator's constructors (spelled out once,
//! in `adapters::mtproto::sim::tl`), with the fixtures' own ids and date.

use grammers_client::tl;
use personad::adapters::mtproto::sim::tl as sim;

/// The account's own user id in these fixtures.
pub(crate) const SELF_ID: i64 = 1000;
/// The date every fixture message carries (unix seconds).
pub(crate) const DATE: i32 = 1_700_000_000;

pub(crate) fn user(
    id: i64,
    first: &str,
    last: Option<&str>,
    username: Option<&str>,
    bot: bool,
) -> tl::enums::User {
    let mut u = match sim::user(id, 42, first, username, id == SELF_ID, false) {
        tl::enums::User::User(u) => u,
        tl::enums::User::Empty(_) => unreachable!("the builder makes a full user"),
    };
    u.last_name = last.map(str::to_string);
    u.bot = bot;
    u.into()
}

pub(crate) fn basic_group(id: i64, title: &str) -> tl::enums::Chat {
    sim::basic_group(id, title, 3, DATE, None)
}

pub(crate) fn channel(id: i64, title: &str, broadcast: bool) -> tl::enums::Chat {
    let flags = sim::ChannelFlags {
        broadcast,
        forum: false,
        slow_mode: false,
    };
    sim::channel(id, 7, title, DATE, flags)
}

#[allow(unused_imports)] // not every test that shares these fixtures names a peer
pub(crate) use sim::{peer_channel, peer_chat, peer_user};

pub(crate) fn message(
    id: i32,
    peer: tl::enums::Peer,
    from: Option<tl::enums::Peer>,
    text: &str,
) -> tl::types::Message {
    sim::message(id, peer, from, text, DATE)
}

/// A grammers message built offline (grammers' own workaround: a short "sent" answer whose raw
/// message is then replaced); `peer` must be the ref of the raw message's chat.
pub(crate) fn grammers_message(
    client: &grammers_client::Client,
    raw: tl::types::Message,
    peer: grammers_client::session::types::PeerRef,
) -> grammers_client::message::Message {
    let mut m = grammers_client::message::Message::from_raw_short_updates(
        client,
        tl::types::UpdateShortSentMessage {
            out: false,
            id: raw.id,
            pts: 1,
            pts_count: 1,
            date: DATE,
            media: None,
            entities: None,
            ttl_period: None,
        },
        grammers_client::message::InputMessage::new(),
        peer,
    );
    m.raw = tl::enums::Message::Message(raw);
    m
}

/// A first page of dialogs that only introduces `users`.
pub(crate) fn dialogs_page(users: Vec<tl::enums::User>) -> tl::enums::messages::Dialogs {
    tl::enums::messages::Dialogs::Dialogs(tl::types::messages::Dialogs {
        dialogs: Vec::new(),
        messages: Vec::new(),
        chats: Vec::new(),
        users,
    })
}

/// A plain reply header pointing at message `to`.
pub(crate) fn reply_header(to: i32) -> tl::enums::MessageReplyHeader {
    sim::reply_header(Some(to), None)
}
