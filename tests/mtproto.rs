//! Offline tests of the MTProto backend's pure parts: inbound mapping (raw TL → domain),
//! outbound Markdown formatting (→ text + UTF-16 entities) and error classification.
//! Everything is built from raw TL objects; nothing touches the network.

mod common;

use common::tl::*;
use std::collections::HashSet;
use std::sync::Arc;

use grammers_client::tl;
use grammers_client::{Client, InvocationError, SenderPool};
use personad::adapters::mtproto::errors::classify;
use personad::adapters::mtproto::format::to_telegram;
use personad::adapters::mtproto::map::{
    Deleted, Ignored, Known, MapContext, Mapped, Origin, PeerCache, PeerClass, PeerDesc,
    StickerSetRef, chat_id_of, is_real_edit, map_deleted_raw, map_edit, map_message,
    map_message_with, map_raw, mentions, migration, topic_of, utf16_slice,
};
use personad::core::markdown::utf16_len;
use personad::core::model::{ChatId, ChatKind, MediaKind, Mention, MessageId, TelegramError};

// ---------------------------------------------------------------------------------------
// Fixtures: every TL constructor spelled out once, here.

const ALICE: i64 = 111;
const BOB: i64 = 222;

fn document(
    id: i64,
    mime: &str,
    size: i64,
    attributes: Vec<tl::enums::DocumentAttribute>,
) -> tl::enums::MessageMedia {
    document_flags(id, mime, size, attributes, false, false, false)
}

fn document_flags(
    id: i64,
    mime: &str,
    size: i64,
    attributes: Vec<tl::enums::DocumentAttribute>,
    video: bool,
    round: bool,
    voice: bool,
) -> tl::enums::MessageMedia {
    tl::types::MessageMediaDocument {
        nopremium: false,
        spoiler: false,
        video,
        round,
        voice,
        document: Some(
            tl::types::Document {
                id,
                access_hash: 1,
                file_reference: vec![1, 2, 3],
                date: DATE,
                mime_type: mime.to_string(),
                size,
                thumbs: None,
                video_thumbs: None,
                dc_id: 2,
                attributes,
            }
            .into(),
        ),
        alt_documents: None,
        video_cover: None,
        video_timestamp: None,
        ttl_seconds: None,
    }
    .into()
}

fn sticker_attr(alt: &str, set: tl::enums::InputStickerSet) -> tl::enums::DocumentAttribute {
    tl::types::DocumentAttributeSticker {
        mask: false,
        alt: alt.to_string(),
        stickerset: set,
        mask_coords: None,
    }
    .into()
}

fn short_name(name: &str) -> tl::enums::InputStickerSet {
    tl::types::InputStickerSetShortName {
        short_name: name.to_string(),
    }
    .into()
}

fn video_attr(duration: f64, round: bool) -> tl::enums::DocumentAttribute {
    tl::types::DocumentAttributeVideo {
        round_message: round,
        supports_streaming: true,
        nosound: false,
        duration,
        w: 240,
        h: 240,
        preload_prefix_size: None,
        video_start_ts: None,
        video_codec: None,
    }
    .into()
}

fn audio_attr(duration: i32, voice: bool, title: Option<&str>) -> tl::enums::DocumentAttribute {
    tl::types::DocumentAttributeAudio {
        voice,
        duration,
        title: title.map(str::to_string),
        performer: None,
        waveform: None,
    }
    .into()
}

fn filename_attr(name: &str) -> tl::enums::DocumentAttribute {
    tl::types::DocumentAttributeFilename {
        file_name: name.to_string(),
    }
    .into()
}

fn cache() -> PeerCache {
    let mut c = PeerCache::new();
    c.remember_user(&user(SELF_ID, "Persona", None, Some("PersonaBot"), false));
    c.remember_user(&user(ALICE, "Alice", Some("Smith"), Some("alice"), false));
    c.remember_user(&user(BOB, "Bob", None, None, true));
    c.remember_chat(&basic_group(42, "Book club"));
    c.remember_chat(&channel(555, "Big group", false));
    c.remember_chat(&channel(777, "News", true));
    c
}

fn ctx() -> MapContext {
    MapContext {
        self_id: SELF_ID,
        self_username: Some("PersonaBot".into()),
    }
}

fn map_with(
    raw: tl::types::Message,
    peers: &PeerCache,
    ours: &HashSet<(ChatId, MessageId)>,
) -> Result<Mapped, Ignored> {
    let is_own = |c: ChatId, m: MessageId| ours.contains(&(c, m));
    let known = Known {
        peers: Some(peers),
        is_own_message: Some(&is_own),
    };
    map_raw(&tl::enums::Message::Message(raw), &ctx(), &known)
}

fn map(raw: tl::types::Message) -> Mapped {
    match map_with(raw, &cache(), &HashSet::new()) {
        Ok(m) => m,
        Err(why) => panic!("unexpectedly ignored: {why}"),
    }
}

fn media_of(media: tl::enums::MessageMedia) -> Mapped {
    let mut raw = message(5, peer_user(ALICE), None, "");
    raw.media = Some(media);
    map(raw)
}

// ---------------------------------------------------------------------------------------
// Inbound mapping.

#[test]
fn text_dm_maps_chat_sender_and_date() {
    let m = map(message(10, peer_user(ALICE), None, "hello there"));
    assert_eq!(m.chat.id, ChatId(ALICE));
    assert_eq!(m.chat.kind, ChatKind::Direct);
    assert_eq!(m.chat.title, "Alice Smith");
    assert_eq!(m.message.id, MessageId(10));
    assert_eq!(m.message.chat, ChatId(ALICE));
    assert_eq!(m.message.text, "hello there");
    assert_eq!(m.message.sender.id, ALICE);
    assert_eq!(m.message.sender.name, "Alice Smith");
    assert_eq!(m.message.sender.username.as_deref(), Some("alice"));
    assert!(!m.message.sender.is_bot);
    assert!(!m.message.outgoing);
    assert_eq!(m.origin, Origin::Incoming);
    assert_eq!(m.message.date.as_second(), i64::from(DATE));
    assert!(!m.callout);
    assert!(m.message.media.is_none());
    assert!(m.missing_peers.is_empty());
}

#[test]
fn group_message_with_reply() {
    let mut raw = message(20, peer_chat(42), Some(peer_user(BOB)), "agreed");
    raw.reply_to = Some(reply_header(19));
    let m = map(raw);
    assert_eq!(m.chat.id, ChatId(-42));
    assert_eq!(m.chat.kind, ChatKind::Group);
    assert_eq!(m.chat.title, "Book club");
    assert_eq!(m.message.sender.id, BOB);
    assert_eq!(m.message.sender.name, "Bob");
    assert!(m.message.sender.is_bot);
    assert_eq!(m.message.reply_to, Some(MessageId(19)));
    assert!(
        !m.callout,
        "a reply to someone else's message is no callout"
    );
}

#[test]
fn supergroup_maps_to_group_with_channel_dialog_id() {
    let m = map(message(
        3,
        peer_channel(555),
        Some(peer_user(ALICE)),
        "hi all",
    ));
    assert_eq!(m.chat.id, ChatId(-1_000_000_000_555));
    assert_eq!(m.chat.kind, ChatKind::Group);
    assert_eq!(m.chat.title, "Big group");
    assert_eq!(m.message.sender.id, ALICE);
}

#[test]
fn mention_entity_after_emoji_is_a_callout() {
    // "😀👍 " is 5 UTF-16 units (two surrogate pairs + space), "hey " 4 more.
    let text = "😀👍 hey @personabot and 🎉 you";
    let mut raw = message(30, peer_chat(42), Some(peer_user(ALICE)), text);
    raw.entities = Some(vec![
        tl::types::MessageEntityMention {
            offset: 9,
            length: 11,
        }
        .into(),
        tl::types::MessageEntityMentionName {
            offset: 28,
            length: 3,
            user_id: 999,
        }
        .into(),
    ]);
    let m = map(raw);
    assert_eq!(
        m.message.mentions,
        vec![
            Mention {
                user_id: None,
                username: Some("personabot".into())
            },
            Mention {
                user_id: Some(999),
                username: None
            },
        ]
    );
    assert!(m.callout, "our username (any case) is a callout");
    assert_eq!(utf16_slice(text, 9, 11), Some("@personabot"));
    assert_eq!(utf16_slice(text, 28, 3), Some("you"));
}

#[test]
fn mention_by_user_id_is_a_callout() {
    let text = "🙂 Persona?";
    let mut raw = message(31, peer_channel(555), Some(peer_user(BOB)), text);
    raw.entities = Some(vec![
        tl::types::MessageEntityMentionName {
            offset: 3,
            length: 7,
            user_id: SELF_ID,
        }
        .into(),
    ]);
    let m = map(raw);
    assert_eq!(m.message.mentions[0].user_id, Some(SELF_ID));
    assert!(m.callout);
}

#[test]
fn mentioned_flag_is_a_callout_and_others_are_not() {
    let mut raw = message(32, peer_chat(42), Some(peer_user(ALICE)), "@alice look");
    raw.entities = Some(vec![
        tl::types::MessageEntityMention {
            offset: 0,
            length: 6,
        }
        .into(),
    ]);
    assert!(
        !map(raw.clone()).callout,
        "mentioning someone else is no callout"
    );
    raw.mentioned = true;
    assert!(map(raw).callout);
}

#[test]
fn reply_to_our_message_is_a_callout() {
    let mut raw = message(40, peer_chat(42), Some(peer_user(ALICE)), "why?");
    raw.reply_to = Some(reply_header(39));
    let ours: HashSet<_> = [(ChatId(-42), MessageId(39))].into();
    let m = map_with(raw.clone(), &cache(), &ours).expect("mapped");
    assert!(m.callout);
    let theirs: HashSet<_> = [(ChatId(-42), MessageId(38))].into();
    assert!(!map_with(raw, &cache(), &theirs).expect("mapped").callout);
}

#[test]
fn forum_topic_root_is_not_a_reply() {
    let mut raw = message(41, peer_channel(555), Some(peer_user(ALICE)), "in topic");
    if let Some(tl::enums::MessageReplyHeader::Header(h)) = {
        raw.reply_to = Some(reply_header(12));
        raw.reply_to.as_mut()
    } {
        h.forum_topic = true;
    }
    assert_eq!(map(raw).message.reply_to, None);
}

/// Messages in a forum topic name their topic: the topic root when they start a thread in
/// it, the top id when they reply inside it; the General topic and plain groups name none.
#[test]
fn forum_topic_of_a_message() {
    let mut root = message(41, peer_channel(555), Some(peer_user(ALICE)), "in topic");
    let mut header = reply_header(12);
    if let tl::enums::MessageReplyHeader::Header(h) = &mut header {
        h.forum_topic = true;
    }
    root.reply_to = Some(header.clone());
    assert_eq!(topic_of(&root.clone().into()), Some(12));
    let mut reply = root.clone();
    if let tl::enums::MessageReplyHeader::Header(h) = &mut header {
        h.reply_to_msg_id = Some(30);
        h.reply_to_top_id = Some(12);
    }
    reply.reply_to = Some(header);
    assert_eq!(topic_of(&reply.into()), Some(12));
    let mut plain = root;
    plain.reply_to = Some(reply_header(12));
    assert_eq!(topic_of(&plain.into()), None);
}

#[test]
fn outgoing_flag_marks_own_device_and_self_sender() {
    let mut raw = message(50, peer_user(ALICE), None, "sent from my phone");
    raw.out = true;
    raw.mentioned = true;
    let m = map(raw);
    assert!(m.message.outgoing);
    assert_eq!(m.origin, Origin::OwnDevice);
    assert_eq!(m.message.sender.id, SELF_ID);
    assert_eq!(m.message.sender.name, "Persona");
    assert_eq!(m.chat.id, ChatId(ALICE), "the chat is still the other user");
    assert!(!m.callout, "our own messages never call us out");
}

#[test]
fn group_message_from_self_is_outgoing() {
    let m = map(message(51, peer_chat(42), Some(peer_user(SELF_ID)), "me"));
    assert!(m.message.outgoing);
    assert_eq!(m.origin, Origin::OwnDevice);
}

#[test]
fn broadcast_channel_is_ignored() {
    let raw = message(60, peer_channel(777), None, "news!");
    assert!(matches!(
        map_with(raw, &cache(), &HashSet::new()),
        Err(Ignored(_))
    ));
    // Unknown channel: the `post` flag tells.
    let mut raw = message(61, peer_channel(888), None, "post");
    raw.post = true;
    assert!(matches!(
        map_with(raw, &cache(), &HashSet::new()),
        Err(Ignored(_))
    ));
}

#[test]
fn unknown_peers_are_reported_missing() {
    let m = map(message(70, peer_channel(889), Some(peer_user(333)), "who?"));
    assert_eq!(m.chat.kind, ChatKind::Group);
    assert_eq!(m.chat.title, "");
    assert_eq!(m.missing_peers, vec![-1_000_000_000_889, 333]);
}

#[test]
fn service_and_empty_messages_are_ignored() {
    let service = tl::types::MessageService {
        out: false,
        mentioned: false,
        media_unread: false,
        reactions_are_possible: false,
        silent: false,
        post: false,
        legacy: false,
        id: 1,
        from_id: None,
        peer_id: peer_chat(42),
        saved_peer_id: None,
        reply_to: None,
        date: DATE,
        action: tl::enums::MessageAction::Empty,
        reactions: None,
        ttl_period: None,
    };
    let peers = cache();
    let known = Known {
        peers: Some(&peers),
        is_own_message: None,
    };
    let ctx = ctx();
    assert!(matches!(
        map_raw(&service.into(), &ctx, &known),
        Err(Ignored(_))
    ));
    let empty = tl::types::MessageEmpty {
        id: 2,
        peer_id: None,
    };
    assert!(matches!(
        map_raw(&empty.into(), &ctx, &known),
        Err(Ignored(_))
    ));
    // Out-of-range ids are ignored, not a panic.
    let bad = message(3, peer_user(-5), None, "x");
    assert!(matches!(
        map_raw(&bad.into(), &ctx, &known),
        Err(Ignored(_))
    ));
}

/// A basic group upgraded to a supergroup announces its new id in a service message; the
/// update becomes a migration from the old chat id to the new one.
#[test]
fn migrated_group_maps_old_to_new_chat_id() {
    let service = tl::types::MessageService {
        out: false,
        mentioned: false,
        media_unread: false,
        reactions_are_possible: false,
        silent: false,
        post: false,
        legacy: false,
        id: 9,
        from_id: None,
        peer_id: peer_chat(42),
        saved_peer_id: None,
        reply_to: None,
        date: DATE,
        action: tl::types::MessageActionChatMigrateTo { channel_id: 777 }.into(),
        reactions: None,
        ttl_period: None,
    };
    assert_eq!(
        migration(&service.into()),
        Some((ChatId(-42), ChatId(-1000000000777)))
    );
    assert_eq!(
        migration(&message(1, peer_chat(42), None, "x").into()),
        None
    );
}

/// Reaction and view changes arrive as edits too; only a visible edit (an edit date, not
/// hidden) counts.
#[test]
fn only_visible_edits_count_as_edits() {
    let plain = message(1, peer_user(7), None, "x");
    assert!(!is_real_edit(&plain.clone().into()));
    let mut edited = plain.clone();
    edited.edit_date = Some(DATE + 5);
    assert!(is_real_edit(&edited.clone().into()));
    edited.edit_hide = true;
    assert!(!is_real_edit(&edited.into()));
}

/// The unread scan walks the dialogs, which writes every channel's current pts into the
/// session; the state saved before it is written back, minus broadcast channels, so
/// catch-up still fills the gaps and never asks for the difference of broadcast channels.
#[test]
fn update_state_restored_without_broadcast_channels() {
    use grammers_client::session::types::{ChannelState, UpdatesState};
    let saved = UpdatesState {
        pts: 10,
        qts: 0,
        date: DATE,
        seq: 3,
        channels: vec![
            ChannelState { id: 5, pts: 100 },
            ChannelState { id: 6, pts: 200 },
        ],
    };
    let kept = personad::adapters::mtproto::without_channels(saved, &[6].into());
    assert_eq!(kept.pts, 10);
    assert_eq!(kept.channels.len(), 1);
    assert_eq!((kept.channels[0].id, kept.channels[0].pts), (5, 100));
}

/// The same on a real session store: after a (simulated) dialog walk moved channel 5's pts
/// and added channel 9, the restore puts back the saved state and drops the broadcast
/// channel 6.
#[tokio::test]
async fn unread_scan_restore_keeps_the_gap_on_a_real_session() {
    use grammers_client::session::Session;
    use grammers_client::session::storages::SqliteSession;
    use grammers_client::session::types::{
        ChannelKind, ChannelState, PeerAuth, PeerInfo, UpdateState, UpdatesState,
    };
    let session = Arc::new(SqliteSession::open(":memory:").await.unwrap());
    let saved = UpdatesState {
        pts: 10,
        qts: 1,
        date: DATE,
        seq: 3,
        channels: vec![
            ChannelState { id: 5, pts: 100 },
            ChannelState { id: 6, pts: 200 },
        ],
    };
    session
        .set_update_state(UpdateState::All(saved.clone()))
        .await
        .unwrap();
    session
        .cache_peer(PeerInfo::Channel {
            id: 6,
            auth: Some(PeerAuth::from_hash(1)),
            kind: Some(ChannelKind::Broadcast),
        })
        .await
        .unwrap();
    // The dialog walk writes the current pts of every channel.
    for (id, pts) in [(5, 150), (9, 50)] {
        session
            .set_update_state(UpdateState::Channel { id, pts })
            .await
            .unwrap();
    }
    let walked = session.updates_state().await.unwrap();
    assert_eq!(walked.channels.len(), 3, "the walk moved the state");
    personad::adapters::mtproto::restore_update_state("agent", session.as_ref(), saved).await;
    let now = session.updates_state().await.unwrap();
    let channels: Vec<(i64, i32)> = now.channels.iter().map(|c| (c.id, c.pts)).collect();
    assert_eq!(channels, vec![(5, 100)]);
    assert_eq!(now.pts, 10);
}

#[test]
fn photo_uses_largest_size_and_photo_id() {
    let photo = tl::types::MessageMediaPhoto {
        spoiler: false,
        live_photo: false,
        photo: Some(
            tl::types::Photo {
                has_stickers: false,
                id: 987_654,
                access_hash: 1,
                file_reference: vec![],
                date: DATE,
                sizes: vec![
                    tl::types::PhotoStrippedSize {
                        r#type: "i".into(),
                        bytes: vec![0; 40],
                    }
                    .into(),
                    tl::types::PhotoSize {
                        r#type: "m".into(),
                        w: 320,
                        h: 240,
                        size: 12_000,
                    }
                    .into(),
                    tl::types::PhotoSizeProgressive {
                        r#type: "y".into(),
                        w: 1280,
                        h: 960,
                        sizes: vec![10_000, 50_000, 90_000],
                    }
                    .into(),
                ],
                video_sizes: None,
                dc_id: 2,
            }
            .into(),
        ),
        ttl_seconds: None,
        video: None,
    };
    let mut raw = message(80, peer_user(ALICE), None, "look 📷");
    raw.media = Some(photo.into());
    let media = map(raw).message.media.expect("photo");
    assert_eq!(media.kind, MediaKind::Photo);
    assert_eq!(media.unique_id, "987654");
    assert_eq!(media.size, Some(90_000));
    assert_eq!(media.mime.as_deref(), Some("image/jpeg"));
}

#[test]
fn expired_media_maps_to_none() {
    let media = tl::types::MessageMediaDocument {
        nopremium: false,
        spoiler: false,
        video: false,
        round: false,
        voice: false,
        document: None,
        alt_documents: None,
        video_cover: None,
        video_timestamp: None,
        ttl_seconds: Some(10),
    };
    assert!(media_of(media.into()).message.media.is_none());
}

#[test]
fn sticker_kinds_by_mime() {
    for (mime, id) in [
        ("image/webp", 1_i64),
        ("video/webm", 2),
        ("application/x-tgsticker", 3),
    ] {
        let m = media_of(document(
            id,
            mime,
            30_000,
            vec![
                tl::types::DocumentAttributeImageSize { w: 512, h: 512 }.into(),
                sticker_attr("🔥", short_name("HotStuff")),
            ],
        ));
        let media = m.message.media.expect("sticker");
        assert_eq!(media.kind, MediaKind::Sticker, "{mime}");
        assert_eq!(media.mime.as_deref(), Some(mime));
        assert_eq!(media.unique_id, id.to_string());
        assert_eq!(media.size, Some(30_000));
        let info = media.sticker.expect("sticker info");
        assert_eq!(info.set.as_deref(), Some("HotStuff"));
        assert_eq!(info.name, "🔥");
        assert_eq!(info.emoji.as_deref(), Some("🔥"));
        assert_eq!(
            m.sticker_set,
            Some(StickerSetRef::ShortName("HotStuff".into()))
        );
    }
}

#[test]
fn sticker_set_by_id_is_left_to_resolve() {
    let set = tl::types::InputStickerSetId {
        id: 55,
        access_hash: 66,
    };
    let m = media_of(document(
        4,
        "image/webp",
        1,
        vec![sticker_attr("😺", set.into())],
    ));
    let info = m.message.media.expect("media").sticker.expect("sticker");
    assert_eq!(info.set, None);
    assert_eq!(
        m.sticker_set,
        Some(StickerSetRef::Id {
            id: 55,
            access_hash: 66
        })
    );
    assert!(matches!(
        m.sticker_set.expect("set").to_input(),
        tl::enums::InputStickerSet::Id(_)
    ));
}

#[test]
fn gif_by_animated_attribute_or_mime() {
    let m = media_of(document(
        9,
        "video/mp4",
        200_000,
        vec![
            video_attr(2.0, false),
            tl::enums::DocumentAttribute::Animated,
        ],
    ));
    assert_eq!(m.message.media.expect("gif").kind, MediaKind::Gif);
    let m = media_of(document(10, "image/gif", 1000, vec![]));
    assert_eq!(m.message.media.expect("gif").kind, MediaKind::Gif);
}

#[test]
fn voice_note() {
    let m = media_of(document_flags(
        11,
        "audio/ogg",
        8_000,
        vec![audio_attr(7, true, None)],
        false,
        false,
        true,
    ));
    let media = m.message.media.expect("voice");
    assert_eq!(media.kind, MediaKind::Voice);
    assert_eq!(media.duration_secs, Some(7));
    assert_eq!(media.mime.as_deref(), Some("audio/ogg"));
}

#[test]
fn round_video() {
    let m = media_of(document(
        12,
        "video/mp4",
        500_000,
        vec![video_attr(4.6, true)],
    ));
    let media = m.message.media.expect("round");
    assert_eq!(media.kind, MediaKind::RoundVideo);
    assert_eq!(media.duration_secs, Some(5));
}

#[test]
fn plain_video() {
    let m = media_of(document(
        13,
        "video/mp4",
        5_000_000,
        vec![video_attr(61.2, false), filename_attr("clip.mp4")],
    ));
    let media = m.message.media.expect("video");
    assert_eq!(media.kind, MediaKind::Video);
    assert_eq!(media.duration_secs, Some(61));
    assert_eq!(media.file_name.as_deref(), Some("clip.mp4"));
}

#[test]
fn audio_track() {
    let m = media_of(document(
        14,
        "audio/mpeg",
        3_000_000,
        vec![
            audio_attr(180, false, Some("Song")),
            filename_attr("song.mp3"),
        ],
    ));
    let media = m.message.media.expect("audio");
    assert_eq!(media.kind, MediaKind::Audio);
    assert_eq!(media.duration_secs, Some(180));
    assert_eq!(media.file_name.as_deref(), Some("song.mp3"));
}

#[test]
fn document_with_file_name() {
    let m = media_of(document(
        15,
        "application/pdf",
        123_456,
        vec![filename_attr("report.pdf")],
    ));
    let media = m.message.media.expect("document");
    assert_eq!(media.kind, MediaKind::Document);
    assert_eq!(media.unique_id, "15");
    assert_eq!(media.size, Some(123_456));
    assert_eq!(media.mime.as_deref(), Some("application/pdf"));
    assert_eq!(media.file_name.as_deref(), Some("report.pdf"));
    assert_eq!(media.duration_secs, None);
    assert!(media.sticker.is_none());
}

#[test]
fn deletions_map_with_and_without_chat() {
    let dm = tl::types::UpdateDeleteMessages {
        messages: vec![1, 2],
        pts: 1,
        pts_count: 2,
    };
    assert_eq!(
        map_deleted_raw(&dm.into()),
        Some(Deleted {
            chat: None,
            ids: vec![MessageId(1), MessageId(2)]
        })
    );
    let ch = tl::types::UpdateDeleteChannelMessages {
        channel_id: 555,
        messages: vec![9],
        pts: 1,
        pts_count: 1,
    };
    assert_eq!(
        map_deleted_raw(&ch.into()),
        Some(Deleted {
            chat: Some(ChatId(-1_000_000_000_555)),
            ids: vec![MessageId(9)]
        })
    );
}

#[test]
fn chat_ids_use_bot_api_numbering() {
    assert_eq!(chat_id_of(&peer_user(5)), Some(ChatId(5)));
    assert_eq!(chat_id_of(&peer_chat(5)), Some(ChatId(-5)));
    assert_eq!(
        chat_id_of(&peer_channel(5)),
        Some(ChatId(-1_000_000_000_005))
    );
    assert_eq!(chat_id_of(&peer_user(0)), None);
}

#[test]
fn peer_cache_min_objects_keep_known_fields() {
    let mut c = PeerCache::new();
    c.remember_user(&user(ALICE, "Alice", None, Some("alice"), false));
    let mut min = user(ALICE, "", None, None, false);
    if let tl::enums::User::User(u) = &mut min {
        u.min = true;
        u.first_name = None;
    }
    c.remember_user(&min);
    let d = c.get(ALICE).expect("alice");
    assert_eq!(d.name, "Alice");
    assert_eq!(d.username.as_deref(), Some("alice"));
    assert_eq!(c.get(-42), None);
    c.remember_chat(&basic_group(42, "Club"));
    assert_eq!(c.get(-42).map(|d| d.class), Some(PeerClass::BasicGroup));
    assert_eq!(
        PeerDesc::from_chat(&channel(777, "News", true)).map(|d| d.class),
        Some(PeerClass::Broadcast)
    );
}

#[test]
fn utf16_slices_never_split_or_panic() {
    let text = "a😀b";
    assert_eq!(utf16_slice(text, 0, 1), Some("a"));
    assert_eq!(utf16_slice(text, 1, 2), Some("😀"));
    assert_eq!(utf16_slice(text, 3, 1), Some("b"));
    assert_eq!(utf16_slice(text, 4, 0), Some(""));
    assert_eq!(utf16_slice(text, 2, 1), None, "half a surrogate pair");
    assert_eq!(utf16_slice(text, 3, 5), None);
    assert_eq!(utf16_slice(text, -1, 2), None);
    assert_eq!(utf16_slice(text, i32::MAX, i32::MAX), None);
    let junk: Vec<tl::enums::MessageEntity> = vec![
        tl::types::MessageEntityMention {
            offset: 2,
            length: 1,
        }
        .into(),
        tl::types::MessageEntityMention {
            offset: -3,
            length: 9,
        }
        .into(),
    ];
    assert!(mentions(text, &junk).is_empty());
}

/// The update stream yields `update::Message`, which derefs to `message::Message`; that one
/// is built offline with the workaround from the reference (§7).
#[tokio::test]
async fn grammers_message_wrapper_maps_like_raw() {
    let SenderPool { runner, handle, .. } = SenderPool::new(
        Arc::new(grammers_client::session::storages::MemorySession::default()),
        1,
    );
    drop(runner);
    let client = Client::new(handle);
    let chat_ref = grammers_client::session::types::PeerId::chat(42)
        .expect("in range")
        .to_ambient_ref();
    let mut raw = message(90, peer_chat(42), Some(peer_user(ALICE)), "via wrapper");
    raw.reply_to = Some(reply_header(89));
    let mut m = grammers_message(&client, raw.clone(), chat_ref);
    let peers = cache();
    let is_own = |_: ChatId, id: MessageId| id == MessageId(89);
    let known = Known {
        peers: Some(&peers),
        is_own_message: Some(&is_own),
    };
    let ctx = ctx();
    let via_wrapper = map_message_with(&m, &ctx, &known);
    assert_eq!(
        via_wrapper,
        map_raw(&tl::enums::Message::Message(raw), &ctx, &known)
    );
    assert_eq!(via_wrapper, map_edit(&m, &ctx, &known));
    let mapped = via_wrapper.expect("mapped");
    assert!(mapped.callout);
    assert_eq!(mapped.message.sender.name, "Alice Smith");
    // Without a cache (and no peers in the update) names are empty and reported missing.
    let bare = map_message(&m, &ctx).expect("mapped");
    assert_eq!(bare.message.sender.name, "");
    assert_eq!(bare.missing_peers, vec![-42, ALICE]);
    assert!(
        !bare.callout,
        "no mentioned flag and no way to know our messages"
    );
    // An empty message with no peer must not reach grammers' panicking `peer_id()`.
    m.raw = tl::types::MessageEmpty {
        id: 3,
        peer_id: None,
    }
    .into();
    let mut c = PeerCache::new();
    c.remember_message(&m);
    assert!(c.is_empty());
    assert!(matches!(map_message(&m, &ctx), Err(Ignored(_))));
}

// ---------------------------------------------------------------------------------------
// Outbound formatting.

#[derive(Debug, PartialEq)]
enum E {
    Bold(i32, i32),
    Italic(i32, i32),
    Code(i32, i32),
    Pre(i32, i32, String),
    Strike(i32, i32),
    Spoiler(i32, i32),
    Url(i32, i32, String),
    Quote(i32, i32),
}

fn simple(entities: &[tl::enums::MessageEntity]) -> Vec<E> {
    entities
        .iter()
        .map(|e| match e {
            tl::enums::MessageEntity::Bold(e) => E::Bold(e.offset, e.length),
            tl::enums::MessageEntity::Italic(e) => E::Italic(e.offset, e.length),
            tl::enums::MessageEntity::Code(e) => E::Code(e.offset, e.length),
            tl::enums::MessageEntity::Pre(e) => E::Pre(e.offset, e.length, e.language.clone()),
            tl::enums::MessageEntity::Strike(e) => E::Strike(e.offset, e.length),
            tl::enums::MessageEntity::Spoiler(e) => E::Spoiler(e.offset, e.length),
            tl::enums::MessageEntity::TextUrl(e) => E::Url(e.offset, e.length, e.url.clone()),
            tl::enums::MessageEntity::Blockquote(e) => E::Quote(e.offset, e.length),
            other => panic!("unexpected entity {other:?}"),
        })
        .collect()
}

fn fmt(md: &str) -> (String, Vec<E>) {
    let (text, entities) = to_telegram(md);
    (text, simple(&entities))
}

#[test]
fn newlines_are_kept() {
    let (text, ents) = fmt("line one\nline two\n\nnew paragraph\nstill it");
    assert_eq!(text, "line one\nline two\n\nnew paragraph\nstill it");
    assert!(ents.is_empty());
    let (text, _) = fmt("hard  \nbreak\\\nagain");
    assert_eq!(text, "hard\nbreak\nagain");
}

#[test]
fn lists_render_as_lines() {
    let (text, _) = fmt("Shopping:\n\n- eggs\n- milk\n  - oat\n\n1. first\n2. second\n\nbye");
    assert_eq!(
        text,
        "Shopping:\n\n- eggs\n- milk\n  - oat\n\n1. first\n2. second\n\nbye"
    );
    let (text, _) = fmt("* a\n* b");
    assert_eq!(text, "- a\n- b");
    let (text, _) = fmt("3. three\n4. four");
    assert_eq!(text, "3. three\n4. four");
    // Loose list: items still one per line.
    let (text, _) = fmt("- a\n\n- b");
    assert_eq!(text, "- a\n- b");
}

#[test]
fn inline_entities_with_utf16_offsets() {
    // "😀 " is 3 UTF-16 units.
    let (text, ents) =
        fmt("😀 **bold** *it* __also it__ `code` ~~gone~~ ||secret|| [link](https://x.y/z)");
    assert_eq!(text, "😀 bold it also it code gone secret link");
    assert_eq!(
        ents,
        vec![
            E::Bold(3, 4),
            E::Italic(8, 2),
            E::Italic(11, 7),
            E::Code(19, 4),
            E::Strike(24, 4),
            E::Spoiler(29, 6),
            E::Url(36, 4, "https://x.y/z".into()),
        ]
    );
    assert_eq!(utf16_len(&text), 40);
}

#[test]
fn nested_entities_and_emoji_inside() {
    let (text, ents) = fmt("**a 🎉 *b* c**");
    assert_eq!(text, "a 🎉 b c");
    assert_eq!(ents, vec![E::Bold(0, 8), E::Italic(5, 1)]);
}

#[test]
fn fenced_code_block_is_pre_with_language() {
    let (text, ents) = fmt("Run:\n\n```rust\nfn main() {}\n  // 😀\n```\nDone");
    assert_eq!(text, "Run:\n\nfn main() {}\n  // 😀\n\nDone");
    assert_eq!(ents, vec![E::Pre(6, 20, "rust".into())]);
    let (text, ents) = fmt("```\n**not bold** ||no||\n```");
    assert_eq!(text, "**not bold** ||no||");
    assert_eq!(ents, vec![E::Pre(0, 19, String::new())]);
}

#[test]
fn heading_becomes_bold_line_and_quote_is_blockquote() {
    let (text, ents) = fmt("# Title\nbody\n\n> quoted\n> more");
    assert_eq!(text, "Title\n\nbody\n\nquoted\nmore");
    assert_eq!(ents, vec![E::Bold(0, 5), E::Quote(13, 11)]);
}

#[test]
fn spoiler_spanning_other_markup_and_odd_markers() {
    let (text, ents) = fmt("||a **b** c|| and ||dangling");
    assert_eq!(text, "a b c and ||dangling");
    assert_eq!(ents, vec![E::Spoiler(0, 5), E::Bold(2, 1)]);
    // Markers do not pair across paragraphs.
    let (text, ents) = fmt("x || y\n\nz || w");
    assert_eq!(text, "x || y\n\nz || w");
    assert!(ents.is_empty());
}

#[test]
fn malformed_markup_stays_literal() {
    for (md, want) in [
        ("**unclosed bold", "**unclosed bold"),
        ("~~half", "~~half"),
        ("[text](", "[text]("),
        ("a * b * c", "a * b * c"),
        ("`open code", "`open code"),
        ("snake_case_name", "snake_case_name"),
        ("[x](tg://user?id=abc)", "x"),
        ("<b>html</b>", "<b>html</b>"),
    ] {
        assert_eq!(fmt(md).0, want, "{md:?}");
    }
    // Nothing visible left: the input comes back verbatim.
    assert_eq!(fmt("[](https://x)").0, "[](https://x)");
}

fn check_entities(md: &str) {
    let (text, entities) = to_telegram(md);
    let total = utf16_len(&text);
    for e in &entities {
        let (offset, length) = match e {
            tl::enums::MessageEntity::Bold(e) => (e.offset, e.length),
            tl::enums::MessageEntity::Italic(e) => (e.offset, e.length),
            tl::enums::MessageEntity::Code(e) => (e.offset, e.length),
            tl::enums::MessageEntity::Pre(e) => (e.offset, e.length),
            tl::enums::MessageEntity::Strike(e) => (e.offset, e.length),
            tl::enums::MessageEntity::Spoiler(e) => (e.offset, e.length),
            tl::enums::MessageEntity::TextUrl(e) => (e.offset, e.length),
            tl::enums::MessageEntity::Blockquote(e) => (e.offset, e.length),
            other => panic!("unexpected entity {other:?}"),
        };
        assert!(offset >= 0 && length > 0, "{md:?}: {e:?}");
        assert!(offset + length <= total, "{md:?}: {e:?} beyond {total}");
        assert!(
            utf16_slice(&text, offset, length).is_some(),
            "{md:?}: {e:?} splits a character"
        );
    }
}

/// Splitting a long send measures the rendered text: a reply whose Markdown source is over
/// Telegram's 4096 UTF-16 units but renders shorter (link targets, markers) stays one
/// message, while one whose rendered text is over the limit is split into parts that fit.
#[test]
fn splitting_measures_the_rendered_text() {
    use personad::core::blocks::{ParseOptions, TELEGRAM_TEXT_LIMIT_UTF16, parse_reply};
    use personad::core::plan::Action;
    let link = format!("[see](https://example.com/{})", "a".repeat(200));
    let source = vec![link; 25].join(" ");
    assert!(utf16_len(&source) as usize > TELEGRAM_TEXT_LIMIT_UTF16);
    let parsed = parse_reply(&format!("# «send»\n{source}"), &ParseOptions::default());
    assert_eq!(parsed.actions.len(), 1, "{:?}", parsed.warnings);

    let long = "word ".repeat(1000);
    let parsed = parse_reply(&format!("# «send»\n{long}"), &ParseOptions::default());
    assert_eq!(parsed.actions.len(), 2);
    // An ordered list written with "1." everywhere renders its real numbers: longer than
    // the source, and still every part fits.
    let list: String = (0..680).map(|_| "1. ab\n").collect();
    assert!(utf16_len(&list) as usize <= TELEGRAM_TEXT_LIMIT_UTF16);
    assert!(utf16_len(&to_telegram(&list).0) as usize > TELEGRAM_TEXT_LIMIT_UTF16);
    let listed = parse_reply(&format!("# «send»\n{list}"), &ParseOptions::default());
    assert!(listed.actions.len() >= 2, "{:?}", listed.warnings);
    let mut actions = parsed.actions.clone();
    actions.extend(listed.actions);
    for action in &actions {
        let Action::Send { text, .. } = action else {
            panic!("not a send: {action:?}");
        };
        let (rendered, _) = to_telegram(text);
        assert!(utf16_len(&rendered) as usize <= TELEGRAM_TEXT_LIMIT_UTF16);
    }
}

#[test]
fn nasty_inputs_never_panic() {
    let nasty = [
        "",
        " ",
        "\n\n\n",
        "||",
        "||||",
        "|||",
        "**",
        "****",
        "__",
        "~~~~",
        "```",
        "```\n",
        "```rust",
        "> ",
        ">>>>> deep",
        "- ",
        "-\n-\n-",
        "1.",
        "1. \n2.",
        "[",
        "]",
        "[]()",
        "[a](<>)",
        "![img](x.png)",
        "<",
        "<!-- c",
        "\\",
        "\\\\",
        "`",
        "``",
        "* * *",
        "---",
        "***bold it***",
        "**a *b** c*",
        "||a **b|| c**",
        "😀||😀||😀",
        "\u{200d}\u{fe0f}",
        "#",
        "######",
        "# ||x||",
        "- ||a\n- b||",
        "\t\tcode",
        "    indented\n    code",
        "a\r\nb\rc",
        "[x](tg://user?id=)",
        "<https://auto.link>",
        "[^1]\n\n[^1]: note",
        "| a | b |\n|---|---|\n| 1 | 2 |",
    ];
    for md in nasty {
        check_entities(md);
    }
    let mut rng = fastrand::Rng::with_seed(7);
    let alphabet: Vec<char> = "*_~|`[]()<>#->!\\ \n\tab1.😀é".chars().collect();
    for _ in 0..3000 {
        let len = rng.usize(0..40);
        let s: String = (0..len)
            .map(|_| alphabet[rng.usize(0..alphabet.len())])
            .collect();
        check_entities(&s);
    }
}

proptest::proptest! {
    #[test]
    fn any_string_formats_without_panicking(s in "\\PC{0,80}") {
        check_entities(&s);
    }
}

// ---------------------------------------------------------------------------------------
// Error classification.

fn rpc(code: i32, message: &str) -> InvocationError {
    InvocationError::Rpc(
        tl::types::RpcError {
            error_code: code,
            error_message: message.to_string(),
        }
        .into(),
    )
}

#[test]
fn flood_and_slowmode_waits_carry_seconds() {
    assert_eq!(
        classify(&rpc(420, "FLOOD_WAIT_31")),
        TelegramError::FloodWait { secs: 31 }
    );
    assert_eq!(
        classify(&rpc(420, "FLOOD_PREMIUM_WAIT_5")),
        TelegramError::FloodWait { secs: 5 }
    );
    assert_eq!(
        classify(&rpc(400, "SLOWMODE_WAIT_120")),
        TelegramError::SlowmodeWait { secs: 120 }
    );
    assert!(
        matches!(classify(&rpc(420, "FLOOD_WAIT")), TelegramError::FloodWait { secs } if secs > 0)
    );
}

/// MESSAGE_TOO_LONG is its own class (the send path splits the text further and tries
/// again), not a plain invalid request that drops the plan.
#[test]
fn a_text_too_long_is_its_own_class() {
    assert!(matches!(
        classify(&rpc(400, "MESSAGE_TOO_LONG")),
        TelegramError::TooLong(_)
    ));
    assert!(matches!(
        classify(&rpc(400, "MESSAGE_EMPTY")),
        TelegramError::Invalid(_)
    ));
}

#[test]
fn account_limits() {
    for name in [
        "PEER_FLOOD",
        "USER_RESTRICTED",
        "FROZEN_METHOD_INVALID",
        "USER_BANNED_IN_CHANNEL",
    ] {
        let code = if name == "FROZEN_METHOD_INVALID" {
            420
        } else {
            400
        };
        assert!(
            matches!(classify(&rpc(code, name)), TelegramError::AccountLimited(_)),
            "{name}"
        );
    }
}

#[test]
fn forbidden_family() {
    for (code, name) in [
        (403, "CHAT_WRITE_FORBIDDEN"),
        (400, "CHANNEL_PRIVATE"),
        (400, "USER_IS_BLOCKED"),
        (400, "YOU_BLOCKED_USER"),
        (400, "CHAT_RESTRICTED"),
        (403, "CHAT_SEND_PLAIN_FORBIDDEN"),
        (403, "SOMETHING_NEW"),
    ] {
        assert!(
            matches!(classify(&rpc(code, name)), TelegramError::Forbidden(_)),
            "{name}"
        );
    }
}

/// A chat that refuses one kind of content (or a Premium-only item) refuses that item, not
/// the whole chat.
#[test]
fn content_refusals_are_per_item() {
    for (code, name) in [
        (403, "CHAT_SEND_STICKERS_FORBIDDEN"),
        (403, "CHAT_SEND_MEDIA_FORBIDDEN"),
        (403, "CHAT_SEND_GIFS_FORBIDDEN"),
        (403, "CHAT_SEND_VOICES_FORBIDDEN"),
        (400, "VOICE_MESSAGES_FORBIDDEN"),
        (400, "PREMIUM_ACCOUNT_REQUIRED"),
    ] {
        assert!(
            matches!(classify(&rpc(code, name)), TelegramError::ContentRefused(_)),
            "{name}"
        );
    }
}

/// The send path's recovery rules see PEER_ID_INVALID and grammers' "no peer ref" as an
/// unknown peer (learn it, retry once), ENTITY_* / URL_INVALID as rejected entities (send
/// plain), REACTION_INVALID as a rejected reaction (try the other spelling), everything else
/// as a plain error.
#[test]
fn send_path_errors_are_split_for_recovery() {
    use personad::adapters::mtproto::errors::call_error;
    use personad::adapters::mtproto::recover::CallError;
    assert!(matches!(
        call_error(&rpc(400, "PEER_ID_INVALID")),
        CallError::UnknownPeer(TelegramError::NotFound(_))
    ));
    assert!(matches!(
        call_error(&InvocationError::Dropped(
            "cannot invoke request without a peer ref"
        )),
        CallError::UnknownPeer(_)
    ));
    assert!(matches!(
        call_error(&rpc(400, "ENTITY_BOUNDS_INVALID")),
        CallError::BadEntities(_)
    ));
    assert!(matches!(
        call_error(&rpc(400, "URL_INVALID")),
        CallError::BadEntities(_)
    ));
    assert!(matches!(
        call_error(&rpc(400, "REACTION_INVALID")),
        CallError::BadReaction(TelegramError::Invalid(_))
    ));
    assert!(matches!(
        call_error(&rpc(403, "CHAT_WRITE_FORBIDDEN")),
        CallError::Other(TelegramError::Forbidden(_))
    ));
}

#[test]
fn unauthorized_family() {
    for (code, name) in [
        (401, "AUTH_KEY_UNREGISTERED"),
        (401, "SESSION_REVOKED"),
        (401, "USER_DEACTIVATED"),
        (401, "USER_DEACTIVATED_BAN"),
        (406, "AUTH_KEY_DUPLICATED"),
        (401, "ANYTHING_401"),
    ] {
        assert!(
            matches!(classify(&rpc(code, name)), TelegramError::Unauthorized(_)),
            "{name}"
        );
    }
    let transport =
        InvocationError::Transport(grammers_mtproto::transport::Error::BadStatus { status: 404 });
    assert!(matches!(
        classify(&transport),
        TelegramError::Unauthorized(_)
    ));
}

#[test]
fn not_found_and_invalid() {
    for name in ["PEER_ID_INVALID", "MESSAGE_ID_INVALID"] {
        assert!(
            matches!(classify(&rpc(400, name)), TelegramError::NotFound(_)),
            "{name}"
        );
    }
    for name in [
        "REACTION_INVALID",
        "MESSAGE_NOT_MODIFIED",
        "FILE_REFERENCE_EXPIRED",
    ] {
        assert!(
            matches!(classify(&rpc(400, name)), TelegramError::Invalid(_)),
            "{name}"
        );
    }
    let no_ref = InvocationError::Dropped("cannot invoke request without a peer ref");
    assert!(matches!(classify(&no_ref), TelegramError::NotFound(_)));
}

#[test]
fn network_and_other() {
    let io = InvocationError::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "secret-ish detail",
    ));
    let TelegramError::Network(msg) = classify(&io) else {
        panic!("io is network");
    };
    assert!(
        !msg.contains("secret"),
        "inner error text is not copied: {msg}"
    );
    assert!(matches!(
        classify(&InvocationError::Dropped("runner gone")),
        TelegramError::Network(_)
    ));
    let t =
        InvocationError::Transport(grammers_mtproto::transport::Error::BadStatus { status: 429 });
    assert!(matches!(classify(&t), TelegramError::Network(_)));
    assert!(matches!(
        classify(&rpc(500, "INTERNAL")),
        TelegramError::Other(_)
    ));
    assert!(matches!(
        classify(&InvocationError::InvalidDc),
        TelegramError::Other(_)
    ));
    assert!(classify(&rpc(500, "INTERNAL")).is_transient());
}

#[test]
fn error_messages_hold_names_and_codes_only() {
    let e = classify(&rpc(400, "CHAT_WRITE_FORBIDDEN"));
    assert_eq!(
        e,
        TelegramError::Forbidden("CHAT_WRITE_FORBIDDEN (400)".into())
    );
    let e = classify(&rpc(400, "WEIRD <script> name\nwith newline"));
    assert_eq!(
        e,
        TelegramError::Invalid("WEIRDscriptnamewithnewline (400)".into())
    );
}

#[test]
fn pathological_sizes_do_not_blow_up() {
    for md in [
        ">".repeat(5000) + " deep",
        "- ".repeat(3000) + "x",
        "*a ".repeat(5000),
        "||".repeat(5000),
        "[".repeat(5000) + &"]".repeat(5000),
        "**".repeat(5000),
        "😀".repeat(20000),
    ] {
        check_entities(&md);
    }
}

/// A channel whose difference keeps failing is dropped from catch-up through the session
/// layer: grammers prepares a channel difference by looking up the channel and then the
/// self user; that channel is the one the failure is attributed to, and skipping it answers
/// its next look-up once without an access hash (which makes grammers end its difference),
/// then normally again.
#[tokio::test]
async fn guarded_session_attributes_and_skips_a_failing_channel_difference() {
    use grammers_client::session::Session;
    use grammers_client::session::storages::SqliteSession;
    use grammers_client::session::types::{ChannelKind, PeerAuth, PeerId, PeerInfo};
    use personad::adapters::mtproto::guarded::GuardedSession;
    let session = GuardedSession::new(SqliteSession::open(":memory:").await.unwrap());
    session
        .cache_peer(PeerInfo::Channel {
            id: 77,
            auth: Some(PeerAuth::from_hash(5)),
            kind: Some(ChannelKind::Megagroup),
        })
        .await
        .unwrap();
    use personad::adapters::mtproto::guarded::in_update_machinery;
    let channel = PeerId::channel(77).unwrap();
    // A send looks the channel up, then a user: no difference in progress.
    session.peer(channel).await.unwrap();
    session.peer(PeerId::user(5).unwrap()).await.unwrap();
    assert_eq!(session.difference_channel(), None);
    // Another task's look-ups of the channel and the self user say nothing either.
    session.peer(channel).await.unwrap();
    session.peer(PeerId::self_user()).await.unwrap();
    assert_eq!(session.difference_channel(), None);
    // grammers' prepare_channel_difference, inside the update machinery: the channel, then
    // the self user.
    in_update_machinery(async {
        session.peer(channel).await.unwrap();
        session.peer(PeerId::self_user()).await.unwrap();
    })
    .await;
    assert_eq!(session.difference_channel(), Some(77));
    session.skip_channel(77);
    // A send's look-up keeps the hash; grammers' next one finds it hidden, once.
    let send = session.peer(channel).await.unwrap();
    assert!(matches!(
        send,
        Some(PeerInfo::Channel { auth: Some(_), .. })
    ));
    let hidden = in_update_machinery(session.peer(channel)).await.unwrap();
    assert!(matches!(hidden, Some(PeerInfo::Channel { auth: None, .. })));
    let again = in_update_machinery(session.peer(channel)).await.unwrap();
    assert!(matches!(
        again,
        Some(PeerInfo::Channel { auth: Some(_), .. })
    ));
}

/// An agent starts without the network: "logged in" is read from the session file (its own
/// user), so a network outage at start does not keep it from running (its pump keeps
/// reconnecting). A session without its own user is "not logged in"; one readable by others
/// is refused; one in use by another process is refused.
#[tokio::test]
async fn an_account_opens_offline_from_its_session() {
    use grammers_client::session::Session;
    use grammers_client::session::storages::SqliteSession;
    use grammers_client::session::types::{PeerAuth, PeerInfo};
    use personad::adapters::mtproto::{ConnectError, Servers, open_account, session};
    use personad::adapters::store::StateDir;
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let path = session::session_path(&state, "Wren", Servers::Production);
    session::create_private(&path).unwrap();
    {
        let s = SqliteSession::open(&path).await.unwrap();
        assert!(matches!(
            open_account(&state, "Wren", Servers::Production).await,
            Err(ConnectError::NotAuthorized { .. })
        ));
        s.cache_peer(PeerInfo::User {
            id: 4242,
            auth: Some(PeerAuth::from_hash(7)),
            bot: Some(false),
            is_self: Some(true),
        })
        .await
        .unwrap();
    }
    let account = open_account(&state, "Wren", Servers::Production)
        .await
        .unwrap();
    assert_eq!(account.self_id, 4242);
    assert!(
        open_account(&state, "Wren", Servers::Production)
            .await
            .is_err(),
        "a second user of the same session is refused"
    );
    drop(account);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(matches!(
        open_account(&state, "Wren", Servers::Production).await,
        Err(ConnectError::Session(_))
    ));
}

/// `--test-dc`: the agent's session on Telegram's test servers is a file of its own (a
/// production session is never touched or used for it), is missing until `login --test-dc`
/// (the error says so), and points every test DC at the test addresses, keeping an auth key
/// already made there.
#[tokio::test]
async fn a_test_dc_session_is_its_own_file_and_points_at_the_test_servers() {
    use grammers_client::session::Session;
    use grammers_client::session::storages::SqliteSession;
    use grammers_client::session::types::{PeerAuth, PeerInfo};
    use personad::adapters::mtproto::{Servers, open_account, session};
    use personad::adapters::store::StateDir;
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let production = session::session_path(&state, "Wren", Servers::Production);
    let test = session::session_path(&state, "Wren", Servers::Test);
    assert_ne!(production, test);
    assert!(
        test.ends_with("Wren/telegram-test.session"),
        "{}",
        test.display()
    );
    let self_user = PeerInfo::User {
        id: 4242,
        auth: Some(PeerAuth::from_hash(7)),
        bot: Some(false),
        is_self: Some(true),
    };
    session::create_private(&production).unwrap();
    {
        let s = SqliteSession::open(&production).await.unwrap();
        s.cache_peer(self_user.clone()).await.unwrap();
    }
    let missing = open_account(&state, "Wren", Servers::Test)
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        missing.contains("telegram-test.session") && missing.contains("--test-dc"),
        "{missing}"
    );
    session::create_private(&test).unwrap();
    {
        let s = SqliteSession::open(&test).await.unwrap();
        s.cache_peer(self_user).await.unwrap();
    }
    let account = open_account(&state, "Wren", Servers::Test).await.unwrap();
    let dc2 = account.session.dc_option(2).unwrap().unwrap();
    assert_eq!(dc2.ipv4.to_string(), "149.154.167.40:443");
    let mut keyed = dc2.clone();
    keyed.auth_key = Some([7; 256]);
    account.session.set_dc_option(&keyed).await.unwrap();
    drop(account);
    let again = open_account(&state, "Wren", Servers::Test).await.unwrap();
    assert_eq!(
        again.session.dc_option(2).unwrap().unwrap().auth_key,
        Some([7; 256]),
        "the test DC's auth key is kept"
    );
    drop(again);
    let prod = open_account(&state, "Wren", Servers::Production)
        .await
        .unwrap();
    let prod_dc2 = prod
        .session
        .dc_option(2)
        .unwrap()
        .map(|o| o.ipv4.to_string());
    assert_ne!(
        prod_dc2.as_deref(),
        Some("149.154.167.40:443"),
        "production untouched"
    );
}
