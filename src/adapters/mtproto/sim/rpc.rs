//! The simulated Telegram's request handlers: one TL request of an account in, its TL answer
//! (or the RPC error Telegram would give) out, applied to the [`World`]. Access hashes are
//! checked per account, texts against Telegram's length limit, entities against their text,
//! random ids against duplicates (uploads and media sends are in [`super::upload`]), slow mode and the flood waits a test asked for. It owns no
//! state and no socket; called by [`super::wire`] with the world locked.

use grammers_client::tl::{self, Deserializable, Identifiable, Serializable};

use super::deliver::dialog_messages;
use super::input::{input_channel, input_peer, message_ids};
use super::world::{Msg, Peer, RpcFailure, World};

type Answer = Result<Vec<u8>, RpcFailure>;

fn ok(value: impl Serializable) -> Answer {
    Ok(value.to_bytes())
}

fn fail(code: i32, name: &str) -> RpcFailure {
    RpcFailure::new(code, name)
}

fn decode<R: Deserializable>(body: &[u8]) -> Result<R, RpcFailure> {
    R::from_bytes(body.get(4..).unwrap_or_default()).map_err(|_| fail(400, "INPUT_REQUEST_INVALID"))
}

fn bool_true() -> Answer {
    ok(true)
}

/// Answers one request `body` of `account`, then runs the hooks waiting for it.
pub(super) fn answer(w: &mut World, account: i64, body: &[u8]) -> Answer {
    let answer = answer_only(w, account, body);
    let name = w.requests.last().map(|(_, n)| *n).unwrap_or_default();
    let mut i = 0;
    while i < w.hooks.len() {
        if w.hooks[i].0 == account && w.hooks[i].1 == name {
            let (_, _, hook) = w.hooks.remove(i);
            hook(w);
        } else {
            i += 1;
        }
    }
    answer
}

fn answer_only(w: &mut World, account: i64, body: &[u8]) -> Answer {
    let id = body
        .get(..4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    w.requests.push((account, tl::name_for_id(id)));
    if let Some(flood) = w.take_flood(account, id) {
        return Err(flood);
    }
    use tl::functions as f;
    match id {
        f::help::GetConfig::CONSTRUCTOR_ID => {
            let (ip, port) = w.addr.clone();
            ok(super::tl::config(w.now(), &ip, port))
        }
        f::users::GetUsers::CONSTRUCTOR_ID => get_users(w, account, decode(body)?),
        f::updates::GetState::CONSTRUCTOR_ID => ok(w.state(account)),
        f::updates::GetDifference::CONSTRUCTOR_ID => {
            let r: f::updates::GetDifference = decode(body)?;
            ok(w.difference(account, r.pts, r.date))
        }
        f::updates::GetChannelDifference::CONSTRUCTOR_ID => {
            let r: f::updates::GetChannelDifference = decode(body)?;
            let channel = input_channel(w, account, &r.channel)?;
            ok(w.channel_difference(account, channel, r.pts)?)
        }
        f::messages::SendMessage::CONSTRUCTOR_ID => {
            super::send::send_message(w, account, decode(body)?)
        }
        f::messages::SendMedia::CONSTRUCTOR_ID => {
            super::upload::send_media(w, account, decode(body)?)
        }
        f::upload::SaveFilePart::CONSTRUCTOR_ID => {
            super::upload::save_file_part(w, account, decode(body)?)
        }
        f::messages::GetHistory::CONSTRUCTOR_ID => get_history(w, account, decode(body)?),
        f::messages::GetMessages::CONSTRUCTOR_ID => {
            let r: f::messages::GetMessages = decode(body)?;
            let ids = message_ids(&r.id);
            let a = w
                .accounts
                .get(&account)
                .ok_or_else(|| fail(401, "AUTH_KEY_UNREGISTERED"))?;
            let msgs: Vec<Msg> = ids
                .iter()
                .filter_map(|i| a.messages.get(i).cloned())
                .collect();
            ok(messages_answer(w, account, &msgs, None))
        }
        f::channels::GetMessages::CONSTRUCTOR_ID => {
            let r: f::channels::GetMessages = decode(body)?;
            let channel = input_channel(w, account, &r.channel)?;
            let ids = message_ids(&r.id);
            let msgs: Vec<Msg> = w
                .channels
                .get(&channel)
                .map(|c| {
                    ids.iter()
                        .filter_map(|i| c.messages.get(i).cloned())
                        .collect()
                })
                .unwrap_or_default();
            ok(messages_answer(w, account, &msgs, Some(channel)))
        }
        f::messages::ReadHistory::CONSTRUCTOR_ID => {
            let r: f::messages::ReadHistory = decode(body)?;
            let peer = input_peer(w, account, &r.peer)?;
            read_inbox(w, account, peer, r.max_id)
        }
        f::channels::ReadHistory::CONSTRUCTOR_ID => {
            let r: f::channels::ReadHistory = decode(body)?;
            let channel = input_channel(w, account, &r.channel)?;
            if let Some(c) = w.channels.get_mut(&channel) {
                c.read_inbox.insert(account, r.max_id);
            }
            w.events.push((
                account,
                format!("read {} {}", Peer::Channel(channel).chat_id(), r.max_id),
            ));
            bool_true()
        }
        f::messages::ReadMentions::CONSTRUCTOR_ID => read_mentions(w, account, body),
        f::messages::DeleteHistory::CONSTRUCTOR_ID => {
            super::send::delete_history(w, account, decode(body)?)
        }
        f::messages::SetTyping::CONSTRUCTOR_ID => set_typing(w, account, decode(body)?),
        f::account::UpdateStatus::CONSTRUCTOR_ID => {
            let r: f::account::UpdateStatus = decode(body)?;
            let status = if r.offline { "offline" } else { "online" };
            w.events.push((account, status.to_string()));
            bool_true()
        }
        f::account::GetNotifySettings::CONSTRUCTOR_ID => notify_settings(w, account, body),
        f::contacts::GetBlocked::CONSTRUCTOR_ID => blocked(w, account),
        f::contacts::Block::CONSTRUCTOR_ID | f::contacts::Unblock::CONSTRUCTOR_ID => {
            block(w, account, id, body)
        }
        f::messages::GetDialogs::CONSTRUCTOR_ID => super::send::dialogs(w, account, decode(body)?),
        f::messages::MarkDialogUnread::CONSTRUCTOR_ID => bool_true(),
        f::messages::SendReaction::CONSTRUCTOR_ID => super::send::react(w, account, decode(body)?),
        f::messages::GetStickerSet::CONSTRUCTOR_ID => Err(fail(406, "STICKERSET_INVALID")),
        f::messages::GetFullChat::CONSTRUCTOR_ID => {
            let r: f::messages::GetFullChat = decode(body)?;
            let peer = input_peer(
                w,
                account,
                &tl::types::InputPeerChat { chat_id: r.chat_id }.into(),
            )?;
            let chat = w.chat_tl(account, peer);
            ok(tl::enums::messages::ChatFull::Full(
                tl::types::messages::ChatFull {
                    full_chat: super::tl::full_chat(r.chat_id, None),
                    chats: chat.into_iter().collect(),
                    users: Vec::new(),
                },
            ))
        }
        f::channels::GetFullChannel::CONSTRUCTOR_ID => {
            let r: f::channels::GetFullChannel = decode(body)?;
            let channel = input_channel(w, account, &r.channel)?;
            let Some(c) = w.channels.get(&channel) else {
                return Err(fail(400, "CHANNEL_INVALID"));
            };
            let full = super::tl::full_channel(channel, c.pts, c.slow_mode, c.reactions.as_deref());
            ok(tl::enums::messages::ChatFull::Full(
                tl::types::messages::ChatFull {
                    full_chat: full,
                    chats: w
                        .chat_tl(account, Peer::Channel(channel))
                        .into_iter()
                        .collect(),
                    users: Vec::new(),
                },
            ))
        }
        f::upload::GetFile::CONSTRUCTOR_ID => get_file(w, decode(body)?),
        f::messages::GetAvailableReactions::CONSTRUCTOR_ID => {
            ok(tl::enums::messages::AvailableReactions::NotModified)
        }
        other => {
            tracing::debug!(
                event = "sim_unsupported",
                request = tl::name_for_id(other),
                "the simulated Telegram does not model this request"
            );
            Err(fail(400, "METHOD_INVALID"))
        }
    }
}

/// `messages.setTyping`: an event naming the action (typing, recording a voice note).
fn set_typing(w: &mut World, account: i64, r: tl::functions::messages::SetTyping) -> Answer {
    let peer = input_peer(w, account, &r.peer)?;
    let top = r
        .top_msg_id
        .map(|t| format!(" topic {t}"))
        .unwrap_or_default();
    let action = match r.action {
        tl::enums::SendMessageAction::SendMessageRecordAudioAction => "recording_voice",
        _ => "typing",
    };
    w.events
        .push((account, format!("{action} {}{top}", peer.chat_id())));
    bool_true()
}

fn get_users(w: &World, account: i64, r: tl::functions::users::GetUsers) -> Answer {
    let mut out = Vec::new();
    for input in &r.id {
        let id = match input {
            tl::enums::InputUser::UserSelf => account,
            tl::enums::InputUser::User(u) if w.check_hash(account, u.user_id, u.access_hash) => {
                u.user_id
            }
            tl::enums::InputUser::FromMessage(u) => u.user_id,
            _ => continue,
        };
        if let Some(u) = w.user_tl(account, id) {
            out.push(u);
        }
    }
    ok(out)
}

/// `messages.messages` (or a channel's `messages.channelMessages`) holding `msgs`.
pub(super) fn messages_answer(
    w: &World,
    account: i64,
    msgs: &[Msg],
    channel: Option<i64>,
) -> tl::enums::messages::Messages {
    messages_page(w, account, msgs, channel, msgs.len())
}

fn messages_page(
    w: &World,
    account: i64,
    msgs: &[Msg],
    channel: Option<i64>,
    count: usize,
) -> tl::enums::messages::Messages {
    let refs: Vec<&Msg> = msgs.iter().collect();
    let (users, chats) = w.refs(account, &refs);
    let messages = msgs.iter().map(|m| m.tl(account)).collect();
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    match channel {
        Some(c) => tl::types::messages::ChannelMessages {
            inexact: false,
            pts: w.channels.get(&c).map_or(0, |c| c.pts),
            count,
            offset_id_offset: None,
            messages,
            topics: Vec::new(),
            chats,
            users,
        }
        .into(),
        None if count as usize == msgs.len() => tl::types::messages::Messages {
            messages,
            topics: Vec::new(),
            chats,
            users,
        }
        .into(),
        None => tl::types::messages::MessagesSlice {
            inexact: false,
            count,
            next_rate: None,
            offset_id_offset: None,
            search_flood: None,
            messages,
            topics: Vec::new(),
            chats,
            users,
        }
        .into(),
    }
}

fn get_history(w: &World, account: i64, r: tl::functions::messages::GetHistory) -> Answer {
    let peer = input_peer(w, account, &r.peer)?;
    let all = dialog_messages(w, account, peer);
    let page: Vec<Msg> = all
        .iter()
        .filter(|m| r.offset_id <= 0 || m.id < r.offset_id)
        .filter(|m| r.max_id <= 0 || m.id < r.max_id)
        .filter(|m| m.id > r.min_id)
        .skip(usize::try_from(r.add_offset).unwrap_or(0))
        .take(usize::try_from(r.limit.clamp(1, 100)).unwrap_or(100))
        .cloned()
        .collect();
    let channel = match peer {
        Peer::Channel(c) => Some(c),
        _ => None,
    };
    ok(messages_page(w, account, &page, channel, all.len()))
}

fn read_inbox(w: &mut World, account: i64, peer: Peer, max_id: i32) -> Answer {
    if let Some(a) = w.accounts.get_mut(&account) {
        a.read_inbox.insert(peer, max_id);
    }
    w.events
        .push((account, format!("read {} {max_id}", peer.chat_id())));
    let pts = w.log(account, 1, |pts| {
        tl::types::UpdateReadHistoryInbox {
            folder_id: None,
            peer: peer.tl(),
            top_msg_id: None,
            max_id,
            still_unread_count: 0,
            pts,
            pts_count: 1,
        }
        .into()
    });
    ok(tl::enums::messages::AffectedMessages::Messages(
        tl::types::messages::AffectedMessages { pts, pts_count: 1 },
    ))
}

fn read_mentions(w: &mut World, account: i64, body: &[u8]) -> Answer {
    use tl::functions as f;
    let r: f::messages::ReadMentions = decode(body)?;
    let peer = input_peer(w, account, &r.peer)?;
    w.events
        .push((account, format!("read_mentions {}", peer.chat_id())));
    let pts = w.log(account, 1, |pts| {
        tl::types::UpdateReadMessagesContents {
            messages: Vec::new(),
            pts,
            pts_count: 1,
            date: None,
        }
        .into()
    });
    ok(tl::enums::messages::AffectedHistory::History(
        tl::types::messages::AffectedHistory {
            pts,
            pts_count: 1,
            offset: 0,
        },
    ))
}

fn notify_settings(w: &mut World, account: i64, body: &[u8]) -> Answer {
    use tl::functions as f;
    let r: f::account::GetNotifySettings = decode(body)?;
    let until = match &r.peer {
        tl::enums::InputNotifyPeer::Peer(p) => {
            let peer = input_peer(w, account, &p.peer)?;
            w.accounts
                .get(&account)
                .and_then(|a| a.mute_until.get(&peer).copied())
        }
        _ => None,
    };
    w.events.push((account, "get_notify_settings".to_string()));
    ok(super::tl::notify_settings(until.unwrap_or(0)))
}

fn blocked(w: &mut World, account: i64) -> Answer {
    let now = w.now();
    let blocked: Vec<i64> = w
        .accounts
        .get(&account)
        .map(|a| a.blocked.iter().copied().collect())
        .unwrap_or_default();
    ok(tl::enums::contacts::Blocked::Blocked(
        tl::types::contacts::Blocked {
            blocked: blocked
                .iter()
                .map(|u| {
                    tl::types::PeerBlocked {
                        peer_id: Peer::User(*u).tl(),
                        date: now,
                    }
                    .into()
                })
                .collect(),
            chats: Vec::new(),
            users: w.users_tl(account, blocked.iter().copied()),
        },
    ))
}

/// `contacts.block` or `contacts.unblock` (`id` says which).
fn block(w: &mut World, account: i64, id: u32, body: &[u8]) -> Answer {
    use tl::functions as f;
    let block = id == f::contacts::Block::CONSTRUCTOR_ID;
    let target = if block {
        let r: f::contacts::Block = decode(body)?;
        input_peer(w, account, &r.id)?
    } else {
        let r: f::contacts::Unblock = decode(body)?;
        input_peer(w, account, &r.id)?
    };
    let Peer::User(user) = target else {
        return Err(fail(400, "PEER_ID_INVALID"));
    };
    if let Some(a) = w.accounts.get_mut(&account) {
        if block {
            a.blocked.insert(user);
        } else {
            a.blocked.remove(&user);
        }
    }
    w.events.push((
        account,
        format!("{} {user}", if block { "block" } else { "unblock" }),
    ));
    bool_true()
}

/// `upload.getFile`: a part of a stored file, if the reference is still valid.
fn get_file(w: &World, r: tl::functions::upload::GetFile) -> Answer {
    let tl::enums::InputFileLocation::InputDocumentFileLocation(loc) = &r.location else {
        return Err(fail(400, "LOCATION_INVALID"));
    };
    let file = w
        .files
        .get(&loc.id)
        .filter(|f| f.access_hash == loc.access_hash)
        .ok_or_else(|| fail(400, "FILE_ID_INVALID"))?;
    if file.file_reference != loc.file_reference {
        return Err(fail(400, "FILE_REFERENCE_EXPIRED"));
    }
    if r.limit <= 0 || r.limit > 1024 * 1024 || r.offset < 0 || r.offset % 4096 != 0 {
        return Err(fail(400, "LIMIT_INVALID"));
    }
    let start = usize::try_from(r.offset)
        .unwrap_or(usize::MAX)
        .min(file.bytes.len());
    let end = start
        .saturating_add(usize::try_from(r.limit).unwrap_or(0))
        .min(file.bytes.len());
    ok(tl::enums::upload::File::File(tl::types::upload::File {
        r#type: tl::enums::storage::FileType::FileUnknown,
        mtime: file.date,
        bytes: file.bytes[start..end].to_vec(),
    }))
}
