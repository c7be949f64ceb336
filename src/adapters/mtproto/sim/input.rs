//! Input peers of a request, resolved against the simulated world and checked as Telegram
//! checks them: the access hash each account holds, membership, a channel's hash. Pure
//! look-ups; called by the request handlers.

use grammers_client::tl;

use super::world::{Peer, RpcFailure, World};

fn fail(code: i32, name: &str) -> RpcFailure {
    RpcFailure::new(code, name)
}

/// The ids of `getMessages`' input messages.
pub(super) fn message_ids(input: &[tl::enums::InputMessage]) -> Vec<i32> {
    input
        .iter()
        .filter_map(|m| match m {
            tl::enums::InputMessage::Id(i) => Some(i.id),
            tl::enums::InputMessage::ReplyTo(i) => Some(i.id),
            _ => None,
        })
        .collect()
}

/// The dialog an input peer names, checked: its access hash, the account's membership.
pub(super) fn input_peer(
    w: &World,
    account: i64,
    peer: &tl::enums::InputPeer,
) -> Result<Peer, RpcFailure> {
    let invalid = || fail(400, "PEER_ID_INVALID");
    match peer {
        tl::enums::InputPeer::PeerSelf => Ok(Peer::User(account)),
        tl::enums::InputPeer::User(u) => {
            if w.users.contains_key(&u.user_id) && w.check_hash(account, u.user_id, u.access_hash) {
                Ok(Peer::User(u.user_id))
            } else {
                Err(invalid())
            }
        }
        tl::enums::InputPeer::UserFromMessage(u) if w.users.contains_key(&u.user_id) => {
            Ok(Peer::User(u.user_id))
        }
        tl::enums::InputPeer::Chat(c) => match w.groups.get(&c.chat_id) {
            Some(g) if g.members.contains(&account) => Ok(Peer::Chat(c.chat_id)),
            _ => Err(fail(400, "CHAT_ID_INVALID")),
        },
        tl::enums::InputPeer::Channel(c) => {
            let id = input_channel(
                w,
                account,
                &tl::types::InputChannel {
                    channel_id: c.channel_id,
                    access_hash: c.access_hash,
                }
                .into(),
            )?;
            Ok(Peer::Channel(id))
        }
        _ => Err(invalid()),
    }
}

/// The channel an input channel names, checked.
pub(super) fn input_channel(
    w: &World,
    account: i64,
    channel: &tl::enums::InputChannel,
) -> Result<i64, RpcFailure> {
    let tl::enums::InputChannel::Channel(c) = channel else {
        return Err(fail(400, "CHANNEL_INVALID"));
    };
    match w.channels.get(&c.channel_id) {
        Some(_) if !w.check_hash(account, c.channel_id, c.access_hash) => {
            Err(fail(400, "CHANNEL_INVALID"))
        }
        Some(ch) if ch.members.contains(&account) => Ok(c.channel_id),
        Some(_) => Err(fail(400, "CHANNEL_PRIVATE")),
        None => Err(fail(400, "CHANNEL_INVALID")),
    }
}
