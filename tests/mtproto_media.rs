//! Downloads and look-ups that learn an unknown peer, through the one seam: the real backend
//! against the scripted invoker of `wire_support` (messages read back by id, upload.getFile
//! parts in the file's datacenter, FILE_MIGRATE, the login copied, expired file references,
//! CHANNEL_INVALID learnt like PEER_ID_INVALID).

mod common;
mod wire_support;

use common::tl::{DATE, SELF_ID, message, peer_channel, peer_user, user};
use grammers_client::tl;
use personad::core::model::{ChatId, MessageId, TelegramError};
use personad::ports::telegram::Telegram;
use wire_support::*;

const FILE_SIZE: usize = 600 * 1024;
const CHUNK: usize = 512 * 1024;

fn document_message(id: i32, peer: tl::enums::Peer, file_reference: u8) -> tl::types::Message {
    let mut m = message(id, peer, Some(peer_user(ALICE)), "");
    m.media = Some(
        tl::types::MessageMediaDocument {
            nopremium: false,
            spoiler: false,
            video: false,
            round: false,
            voice: true,
            document: Some(
                tl::types::Document {
                    id: 7001,
                    access_hash: 7002,
                    file_reference: vec![file_reference],
                    date: DATE,
                    mime_type: "audio/ogg".into(),
                    size: FILE_SIZE as i64,
                    thumbs: None,
                    video_thumbs: None,
                    dc_id: 4,
                    attributes: Vec::new(),
                }
                .into(),
            ),
            alt_documents: None,
            video_cover: None,
            video_timestamp: None,
            ttl_seconds: None,
        }
        .into(),
    );
    m
}

fn file_part(len: usize) -> Answer {
    ok(tl::enums::upload::File::File(tl::types::upload::File {
        r#type: tl::enums::storage::FileType::FilePartial,
        mtime: 0,
        bytes: vec![7; len],
    }))
}

fn location_reference(req: &tl::functions::upload::GetFile) -> Vec<u8> {
    match &req.location {
        tl::enums::InputFileLocation::InputDocumentFileLocation(l) => l.file_reference.clone(),
        other => panic!("not the document: {other:?}"),
    }
}

/// A voice note is read back by id (messages.getMessages) and downloaded with
/// upload.getFile in 512 KiB parts from its datacenter: FILE_MIGRATE moves to the named one,
/// AUTH_KEY_UNREGISTERED there copies the login over, and an expired file reference is
/// refreshed by reading the message again.
#[tokio::test]
async fn media_is_downloaded_in_parts_following_migration_login_copy_and_fresh_references() {
    let a = account().await;
    let dm = ChatId(ALICE);
    a.wire.on::<tl::functions::messages::GetMessages>(|_| {
        plain_messages(vec![document_message(9, peer_user(ALICE), 1)], Vec::new())
    });
    a.wire
        .on::<tl::functions::upload::GetFile>(|_| rpc(303, "FILE_MIGRATE", Some(5)));
    a.wire
        .on::<tl::functions::upload::GetFile>(|_| rpc(401, "AUTH_KEY_UNREGISTERED", None));
    a.wire
        .on::<tl::functions::auth::ExportAuthorization>(|req| {
            assert_eq!(req.dc_id, 5);
            ok(tl::enums::auth::ExportedAuthorization::Authorization(
                tl::types::auth::ExportedAuthorization {
                    id: 31,
                    bytes: vec![1, 2, 3],
                },
            ))
        });
    a.wire
        .on::<tl::functions::auth::ImportAuthorization>(|req| {
            assert_eq!((req.id, req.bytes.clone()), (31, vec![1, 2, 3]));
            ok(tl::enums::auth::Authorization::Authorization(
                tl::types::auth::Authorization {
                    setup_password_required: false,
                    otherwise_relogin_days: None,
                    tmp_sessions: None,
                    future_auth_token: None,
                    user: user(SELF_ID, "Wren", None, None, false),
                },
            ))
        });
    a.wire.on::<tl::functions::upload::GetFile>(|req| {
        assert_eq!(req.offset, 0);
        file_part(CHUNK)
    });
    a.wire
        .on::<tl::functions::upload::GetFile>(|_| rpc(400, "FILE_REFERENCE_EXPIRED", None));
    a.wire.on::<tl::functions::messages::GetMessages>(|_| {
        plain_messages(vec![document_message(9, peer_user(ALICE), 2)], Vec::new())
    });
    a.wire.on::<tl::functions::upload::GetFile>(|req| {
        assert_eq!(req.offset, CHUNK as i64);
        assert_eq!(location_reference(&req), vec![2], "the fresh reference");
        file_part(FILE_SIZE - CHUNK)
    });
    let bytes = a
        .telegram
        .download_media(dm, MessageId(9), 1 << 20)
        .await
        .unwrap();
    assert_eq!(bytes.len(), FILE_SIZE);
    assert_eq!(
        a.wire.dcs_of::<tl::functions::upload::GetFile>(),
        vec![Some(4), Some(5), Some(5), Some(5), Some(5)]
    );
    assert_eq!(
        a.wire.dcs_of::<tl::functions::auth::ImportAuthorization>(),
        vec![Some(5)]
    );
    let gets = a.wire.requests::<tl::functions::upload::GetFile>();
    assert!(gets.iter().all(|g| g.limit == CHUNK as i32 && !g.precise));
}

/// A file over the cap is refused before any part is fetched; a message without media is
/// "not found".
#[tokio::test]
async fn media_over_the_cap_is_refused_before_downloading() {
    let a = account().await;
    a.wire.on::<tl::functions::messages::GetMessages>(|_| {
        plain_messages(vec![document_message(9, peer_user(ALICE), 1)], Vec::new())
    });
    let err = a
        .telegram
        .download_media(ChatId(ALICE), MessageId(9), 1000)
        .await
        .unwrap_err();
    assert!(matches!(err, TelegramError::Invalid(_)), "{err:?}");
    a.wire.on::<tl::functions::messages::GetMessages>(|_| {
        plain_messages(
            vec![message(9, peer_user(ALICE), Some(peer_user(ALICE)), "text")],
            Vec::new(),
        )
    });
    let err = a
        .telegram
        .download_media(ChatId(ALICE), MessageId(9), 1000)
        .await
        .unwrap_err();
    assert!(matches!(err, TelegramError::NotFound(_)), "{err:?}");
    assert_eq!(
        a.wire.names(),
        vec!["messages.getMessages", "messages.getMessages"]
    );
}

/// The first dialogs page names the supergroup with its access hash.
fn dialogs_with_channel() -> Answer {
    ok(tl::enums::messages::Dialogs::Dialogs(
        tl::types::messages::Dialogs {
            dialogs: Vec::new(),
            messages: Vec::new(),
            chats: vec![channel_with_hash(UNKNOWN_CHANNEL, UNKNOWN_CHANNEL_HASH)],
            users: Vec::new(),
        },
    ))
}

fn input_channel(c: &tl::enums::InputChannel) -> (i64, i64) {
    match c {
        tl::enums::InputChannel::Channel(c) => (c.channel_id, c.access_hash),
        other => panic!("not a channel: {other:?}"),
    }
}

/// A download from a supergroup the session has no hash for: channels.getMessages meets
/// CHANNEL_INVALID, the peer is learnt (first dialogs page) and the read retried with it.
#[tokio::test]
async fn a_download_learns_an_unknown_supergroup_and_retries() {
    let a = account().await;
    let chat = supergroup(UNKNOWN_CHANNEL);
    a.wire
        .on::<tl::functions::channels::GetMessages>(|_| rpc(400, "CHANNEL_INVALID", None));
    a.wire
        .on::<tl::functions::messages::GetDialogs>(|_| dialogs_with_channel());
    a.wire.on::<tl::functions::channels::GetMessages>(|_| {
        channel_messages(
            vec![document_message(9, peer_channel(UNKNOWN_CHANNEL), 1)],
            Vec::new(),
            vec![channel_with_hash(UNKNOWN_CHANNEL, UNKNOWN_CHANNEL_HASH)],
        )
    });
    a.wire
        .on::<tl::functions::upload::GetFile>(|_| file_part(FILE_SIZE));
    let bytes = a
        .telegram
        .download_media(chat, MessageId(9), 1 << 20)
        .await
        .unwrap();
    assert_eq!(bytes.len(), FILE_SIZE);
    let reads = a.wire.requests::<tl::functions::channels::GetMessages>();
    assert_eq!(input_channel(&reads[0].channel), (UNKNOWN_CHANNEL, 0));
    assert_eq!(
        input_channel(&reads[1].channel),
        (UNKNOWN_CHANNEL, UNKNOWN_CHANNEL_HASH)
    );
}

/// The reactions look-up of a supergroup the session has no hash for learns it and asks
/// again, like a send.
#[tokio::test]
async fn the_reactions_look_up_learns_an_unknown_supergroup_and_retries() {
    let a = account().await;
    let chat = supergroup(UNKNOWN_CHANNEL);
    a.wire
        .on::<tl::functions::channels::GetFullChannel>(|_| rpc(400, "CHANNEL_INVALID", None));
    a.wire
        .on::<tl::functions::messages::GetDialogs>(|_| dialogs_with_channel());
    a.wire
        .on::<tl::functions::channels::GetFullChannel>(|_| rpc(400, "CHAT_ADMIN_REQUIRED", None));
    let err = a.telegram.allowed_reactions(chat).await.unwrap_err();
    assert!(matches!(err, TelegramError::Forbidden(_)), "{err:?}");
    let asked = a.wire.requests::<tl::functions::channels::GetFullChannel>();
    assert_eq!(input_channel(&asked[0].channel), (UNKNOWN_CHANNEL, 0));
    assert_eq!(
        input_channel(&asked[1].channel),
        (UNKNOWN_CHANNEL, UNKNOWN_CHANNEL_HASH)
    );
}

/// A send to a supergroup the session has no hash for meets CHANNEL_INVALID: the peer is
/// learnt and the send retried once, like PEER_ID_INVALID.
#[tokio::test]
async fn channel_invalid_on_a_send_learns_the_supergroup() {
    let a = account().await;
    let chat = supergroup(UNKNOWN_CHANNEL);
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| rpc(400, "CHANNEL_INVALID", None));
    a.wire
        .on::<tl::functions::messages::GetDialogs>(|_| dialogs_with_channel());
    a.wire
        .on::<tl::functions::messages::SendMessage>(|_| sent_message(12));
    let sent = a.telegram.send_text(text(chat.0, "hi", 77)).await.unwrap();
    assert_eq!(sent.id, MessageId(12));
    let sends = a.wire.requests::<tl::functions::messages::SendMessage>();
    assert!(matches!(
        &sends[1].peer,
        tl::enums::InputPeer::Channel(c) if c.access_hash == UNKNOWN_CHANNEL_HASH
    ));
}
