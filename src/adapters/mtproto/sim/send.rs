//! Posting in the simulated Telegram: one message by anyone (an account's `sendMessage`, a
//! person, the owner from another device) put into every box or channel that holds its
//! dialog, with the checks Telegram makes first (length, entities, random id, slow mode,
//! blocks); and the requests that read or change many messages at once (dialogs,
//! deleteHistory, reactions). Called by [`super::rpc`] and by the simulator's control API.

use grammers_client::tl::{self, Serializable};

use super::deliver::{Post, Posted, check_text, dialog_messages, post};
use super::input::input_peer;
use super::world::{Msg, Peer, RpcFailure, World};

type Answer = Result<Vec<u8>, RpcFailure>;

fn fail(code: i32, name: &str) -> RpcFailure {
    RpcFailure::new(code, name)
}

/// `messages.sendMessage`.
pub(super) fn send_message(
    w: &mut World,
    account: i64,
    r: tl::functions::messages::SendMessage,
) -> Answer {
    let peer = input_peer(w, account, &r.peer)?;
    check_text(&r.message, r.entities.as_ref())?;
    if w.knows_random_id(account, r.random_id) {
        return Err(fail(500, "RANDOM_ID_DUPLICATE"));
    }
    if let Peer::User(u) = peer
        && w.accounts
            .get(&u)
            .is_some_and(|a| a.blocked.contains(&account))
    {
        // Telegram accepts it and never delivers it; the sender cannot tell.
        tracing::debug!(
            event = "sim_blocked_send",
            "a message to a user who blocked the sender"
        );
    }
    let (reply_to, top) = match &r.reply_to {
        Some(tl::enums::InputReplyTo::Message(m)) => (Some(m.reply_to_msg_id), m.top_msg_id),
        _ => (None, None),
    };
    let forum = matches!(peer, Peer::Channel(c) if w.channels.get(&c).is_some_and(|c| c.forum));
    // In a forum, a reply's topic is its message's topic; a plain message goes to General.
    let top = if forum {
        top.or_else(|| reply_to.and_then(|r| w.topic_of(peer, r)))
    } else {
        None
    };
    let posted = post(
        w,
        account,
        peer,
        &Post {
            text: r.message.clone(),
            reply_to: reply_to.filter(|r| Some(*r) != top || !forum),
            top,
            topic_title: None,
            file: None,
            stored: None,
        },
        Some(account),
    )?;
    let id = posted.id_for(account).unwrap_or(0);
    w.mark_random_id(account, r.random_id, (peer, id));
    sent_answer(w, account, peer, &posted, r.random_id, true)
}

/// What Telegram answers the sender of a new message `posted` in `peer`: in a direct chat
/// `updateShortSentMessage` when `short` (a text), else (media, groups) the new message with
/// its `updateMessageID`; in a channel its channel update.
pub(super) fn sent_answer(
    w: &World,
    account: i64,
    peer: Peer,
    posted: &Posted,
    random_id: i64,
    short: bool,
) -> Answer {
    let id = posted.id_for(account).unwrap_or(0);
    let date = w.now();
    match (peer, posted.channel) {
        (Peer::User(_), _) if short => {
            let pts = posted
                .copies
                .iter()
                .find(|(a, _, _)| *a == account)
                .map_or(0, |(_, _, p)| *p);
            Ok(
                tl::enums::Updates::UpdateShortSentMessage(tl::types::UpdateShortSentMessage {
                    out: true,
                    id,
                    pts,
                    pts_count: 1,
                    date,
                    media: None,
                    entities: None,
                    ttl_period: None,
                })
                .to_bytes(),
            )
        }
        (Peer::Channel(c), Some((id, pts))) => {
            let msg = w
                .channels
                .get(&c)
                .and_then(|ch| ch.messages.get(&id))
                .cloned();
            let Some(msg) = msg else {
                return Err(fail(500, "INTERNAL"));
            };
            let mut updates = w.channel_update(account, &msg, pts);
            if let tl::enums::Updates::Updates(u) = &mut updates {
                u.updates
                    .insert(0, tl::types::UpdateMessageId { id, random_id }.into());
            }
            Ok(updates.to_bytes())
        }
        _ => {
            let Some((_, id, pts)) = posted
                .copies
                .iter()
                .find(|(a, _, _)| *a == account)
                .copied()
            else {
                return Err(fail(500, "INTERNAL"));
            };
            let msg = w
                .accounts
                .get(&account)
                .and_then(|a| a.messages.get(&id))
                .cloned();
            let Some(msg) = msg else {
                return Err(fail(500, "INTERNAL"));
            };
            let (users, chats) = w.refs(account, &[&msg]);
            Ok(w.updates(
                vec![
                    tl::types::UpdateMessageId { id, random_id }.into(),
                    tl::types::UpdateNewMessage {
                        message: msg.tl(account),
                        pts,
                        pts_count: 1,
                    }
                    .into(),
                ],
                users,
                chats,
            )
            .to_bytes())
        }
    }
}

/// `messages.deleteHistory`: up to 100 messages a call; `offset` > 0 while more are left.
pub(super) fn delete_history(
    w: &mut World,
    account: i64,
    r: tl::functions::messages::DeleteHistory,
) -> Answer {
    let peer = input_peer(w, account, &r.peer)?;
    let mut ids: Vec<i32> = w
        .accounts
        .get(&account)
        .map(|a| {
            a.messages
                .values()
                .filter(|m| m.peer == peer && (r.max_id <= 0 || m.id <= r.max_id))
                .map(|m| m.id)
                .collect()
        })
        .unwrap_or_default();
    let more = ids.len() > 100;
    ids.truncate(100);
    let globals = w.remove(account, &ids);
    w.events.push((
        account,
        format!(
            "delete_history {} {}{}",
            peer.chat_id(),
            ids.len(),
            if r.revoke { " revoke" } else { "" }
        ),
    ));
    let count = i32::try_from(ids.len()).unwrap_or(0).max(1);
    let pts = w.log(account, count, |pts| deleted(ids, pts, count));
    if r.revoke
        && let Peer::User(other) = peer
        && w.accounts.contains_key(&other)
    {
        let theirs: Vec<i32> = globals
            .iter()
            .filter_map(|g| w.local_of(other, *g))
            .collect();
        if !theirs.is_empty() {
            w.remove(other, &theirs);
            let n = i32::try_from(theirs.len()).unwrap_or(1);
            let pts = w.log(other, n, |pts| deleted(theirs.clone(), pts, n));
            let update = tl::types::UpdateShort {
                update: deleted(theirs, pts, n),
                date: w.now(),
            };
            w.push(other, &update.into());
        }
    }
    Ok(
        tl::enums::messages::AffectedHistory::History(tl::types::messages::AffectedHistory {
            pts,
            pts_count: count,
            offset: i32::from(more),
        })
        .to_bytes(),
    )
}

/// The update for messages deleted from a box under `pts`.
fn deleted(messages: Vec<i32>, pts: i32, count: i32) -> tl::enums::Update {
    tl::types::UpdateDeleteMessages {
        messages,
        pts,
        pts_count: count,
    }
    .into()
}

/// `messages.getDialogs`: every dialog in one page (a later page is empty).
pub(super) fn dialogs(w: &World, account: i64, r: tl::functions::messages::GetDialogs) -> Answer {
    let empty = || {
        tl::enums::messages::Dialogs::Dialogs(tl::types::messages::Dialogs {
            dialogs: Vec::new(),
            messages: Vec::new(),
            chats: Vec::new(),
            users: Vec::new(),
        })
    };
    if !matches!(r.offset_peer, tl::enums::InputPeer::Empty) || r.offset_id != 0 {
        return Ok(empty().to_bytes());
    }
    let Some(a) = w.accounts.get(&account) else {
        return Ok(empty().to_bytes());
    };
    let mut peers: Vec<Peer> = a.messages.values().map(|m| m.peer).collect();
    peers.extend(
        w.channels
            .values()
            .filter(|c| c.members.contains(&account))
            .map(|c| Peer::Channel(c.id)),
    );
    peers.sort();
    peers.dedup();
    let mut dialogs = Vec::new();
    let mut tops = Vec::new();
    for peer in peers {
        let msgs = dialog_messages(w, account, peer);
        let Some(top) = msgs.first().cloned() else {
            continue;
        };
        let read = match peer {
            Peer::Channel(c) => w
                .channels
                .get(&c)
                .and_then(|c| c.read_inbox.get(&account).copied())
                .unwrap_or(0),
            _ => a.read_inbox.get(&peer).copied().unwrap_or(0),
        };
        let unread: Vec<&Msg> = msgs
            .iter()
            .filter(|m| m.id > read && !m.out && m.from != account)
            .collect();
        let mentions = unread
            .iter()
            .filter(|m| w.mentions(account, m) || m.mentioned)
            .count();
        dialogs.push(
            tl::types::Dialog {
                pinned: false,
                unread_mark: false,
                view_forum_as_messages: false,
                peer: peer.tl(),
                top_message: top.id,
                read_inbox_max_id: read,
                read_outbox_max_id: 0,
                unread_count: i32::try_from(unread.len()).unwrap_or(0),
                unread_mentions_count: i32::try_from(mentions).unwrap_or(0),
                unread_reactions_count: 0,
                unread_poll_votes_count: 0,
                notify_settings: super::tl::notify_settings(
                    a.mute_until.get(&peer).copied().unwrap_or(0),
                ),
                pts: match peer {
                    Peer::Channel(c) => w.channels.get(&c).map(|c| c.pts),
                    _ => None,
                },
                draft: None,
                folder_id: None,
                ttl_period: None,
            }
            .into(),
        );
        tops.push(top);
    }
    let refs: Vec<&Msg> = tops.iter().collect();
    let (users, chats) = w.refs(account, &refs);
    Ok(
        tl::enums::messages::Dialogs::Dialogs(tl::types::messages::Dialogs {
            dialogs,
            messages: tops.iter().map(|m| m.tl(account)).collect(),
            chats,
            users,
        })
        .to_bytes(),
    )
}

/// `messages.sendReaction`: checked against the chat's allowed reactions.
pub(super) fn react(
    w: &mut World,
    account: i64,
    r: tl::functions::messages::SendReaction,
) -> Answer {
    let peer = input_peer(w, account, &r.peer)?;
    let emoji: Vec<String> = r
        .reaction
        .iter()
        .flatten()
        .filter_map(|x| match x {
            tl::enums::Reaction::Emoji(e) => Some(e.emoticon.clone()),
            _ => None,
        })
        .collect();
    if let Peer::Channel(c) = peer
        && let Some(allowed) = w.channels.get(&c).and_then(|c| c.reactions.clone())
        && emoji.iter().any(|e| !allowed.contains(e))
    {
        return Err(fail(400, "REACTION_INVALID"));
    }
    let found = w.set_reactions(account, peer, r.msg_id, &emoji);
    if !found {
        return Err(fail(400, "MESSAGE_ID_INVALID"));
    }
    w.events.push((
        account,
        format!("react {} {} {}", peer.chat_id(), r.msg_id, emoji.join(",")),
    ));
    Ok(w.updates(Vec::new(), Vec::new(), Vec::new()).to_bytes())
}
