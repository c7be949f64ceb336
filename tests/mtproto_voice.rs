//! Voice notes through the MTProto backend at the invoker seam, offline: the real
//! `MtprotoTelegram` uploads and sends against the scripted
//! [`Invoker`](personad::adapters::mtproto::invoker::Invoker) of `wire_support`, and each
//! request is decoded and checked: the parts of `upload.saveFilePart` reassemble to the file,
//! `messages.sendMedia` carries the voice document exactly (voice flag, duration, waveform,
//! mime, no caption, the idempotency key as random_id, the reply), a refused voice is
//! `ContentRefused` (the caller's cue to send the words as text), and a send retried after a
//! crash between upload and send is resolved to the one message the first run made.

mod common;
mod wire_support;

use std::sync::Arc;

use common::tl::{DATE, SELF_ID, message, peer_user};
use grammers_client::tl;
use personad::adapters::mtproto::sent::SentLedger;
use personad::adapters::mtproto::sim::tl::{Media, document};
use personad::core::model::{
    ChatId, MediaInfo, MediaKind, Message, MessageId, OutgoingVoice, Sender, TelegramError,
};
use personad::ports::clock::{SharedClock, VirtualClock};
use personad::ports::telegram::Telegram;
use wire_support::*;

const PART: usize = 512 * 1024;

fn ogg(len: usize) -> Arc<Vec<u8>> {
    Arc::new((0..len).map(|i| (i % 253) as u8).collect())
}

fn voice(key: i64, bytes: Arc<Vec<u8>>) -> OutgoingVoice {
    OutgoingVoice {
        chat: ChatId(ALICE),
        ogg: bytes,
        duration_secs: 4,
        waveform: vec![0x1f, 0x00, 0xa5, 0x42, 0x07],
        text: "see you at the station".into(),
        reply_to: Some(MessageId(41)),
        idempotency_key: key,
    }
}

fn saved() -> Answer {
    ok(true)
}

/// Every part uploaded, reassembled by part number for one file id; panics on a mix of
/// file ids or a part missing.
fn uploaded(a: &Account) -> (i64, Vec<u8>, usize) {
    let parts = a.wire.requests::<tl::functions::upload::SaveFilePart>();
    let id = parts.first().expect("no part uploaded").file_id;
    assert!(parts.iter().all(|p| p.file_id == id), "one file id");
    let mut sorted: Vec<_> = parts.iter().collect();
    sorted.sort_by_key(|p| p.file_part);
    for (i, p) in sorted.iter().enumerate() {
        assert_eq!(
            p.file_part, i as i32,
            "parts are numbered from 0 without a gap"
        );
        assert!(p.bytes.len() <= PART, "a part is at most 512 KiB");
    }
    let bytes = sorted.iter().flat_map(|p| p.bytes.clone()).collect();
    (id, bytes, parts.len())
}

/// A voice note is uploaded in 512 KiB parts and sent as one `messages.sendMedia` with an
/// uploaded `audio/ogg` document marked as a voice note (duration, waveform), no caption,
/// the task's idempotency key as random_id and the reply; the message returned is a voice
/// note whose text is the transcript, recorded as ours.
#[tokio::test]
async fn a_voice_note_is_uploaded_in_parts_and_sent_as_one_voice_document() {
    let a = account().await;
    let file = ogg(PART + 1000);
    a.wire
        .on::<tl::functions::upload::SaveFilePart>(|_| saved());
    a.wire
        .on::<tl::functions::upload::SaveFilePart>(|_| saved());
    a.wire
        .on::<tl::functions::messages::SendMedia>(|_| sent_message(88));
    let sent = a
        .telegram
        .send_voice(voice(4242, Arc::clone(&file)))
        .await
        .unwrap();

    assert_eq!(
        a.wire.names(),
        vec![
            "upload.saveFilePart",
            "upload.saveFilePart",
            "messages.sendMedia"
        ]
    );
    let (file_id, bytes, parts) = uploaded(&a);
    assert_eq!(bytes, *file, "the parts reassemble to the file");
    assert_eq!(parts, 2);

    let sends = a.wire.requests::<tl::functions::messages::SendMedia>();
    assert_eq!(sends.len(), 1);
    let req = &sends[0];
    assert_eq!(req.random_id, 4242);
    assert_eq!(req.message, "", "the transcript is not sent as a caption");
    assert_eq!(input_user(&req.peer), (ALICE, ALICE_HASH));
    match &req.reply_to {
        Some(tl::enums::InputReplyTo::Message(r)) => assert_eq!(r.reply_to_msg_id, 41),
        other => panic!("not a reply: {other:?}"),
    }
    let tl::enums::InputMedia::UploadedDocument(doc) = &req.media else {
        panic!("not an uploaded document: {:?}", req.media);
    };
    assert_eq!(doc.mime_type, "audio/ogg");
    assert!(!doc.force_file && !doc.spoiler && doc.thumb.is_none());
    let tl::enums::InputFile::File(input) = &doc.file else {
        panic!("not a small file: {:?}", doc.file);
    };
    assert_eq!((input.id, input.parts), (file_id, 2));
    assert_eq!(input.name, "voice.ogg");
    assert_eq!(doc.attributes.len(), 1);
    let tl::enums::DocumentAttribute::Audio(audio) = &doc.attributes[0] else {
        panic!("not an audio attribute: {:?}", doc.attributes[0]);
    };
    assert!(audio.voice);
    assert_eq!(audio.duration, 4);
    assert_eq!(
        audio.waveform.as_deref(),
        Some(&[0x1f, 0x00, 0xa5, 0x42, 0x07][..])
    );
    assert!(audio.title.is_none() && audio.performer.is_none());

    assert_eq!(sent.id, MessageId(88));
    assert!(sent.outgoing);
    assert_eq!(sent.text, "see you at the station");
    assert_eq!(sent.reply_to, Some(MessageId(41)));
    let media = sent.media.expect("a voice note");
    assert_eq!(media.kind, MediaKind::Voice);
    assert_eq!(media.mime.as_deref(), Some("audio/ogg"));
    assert_eq!(media.duration_secs, Some(4));
    assert!(a.telegram.ledger().recorded(ChatId(ALICE), MessageId(88)));
}

/// A chat that forbids voice notes, and a user who takes them from Premium accounts only,
/// refuse the voice as content (the runtime sends the same words as text); nothing is
/// recorded as sent.
#[tokio::test]
async fn a_refused_voice_note_is_content_refused() {
    for name in ["CHAT_SEND_VOICES_FORBIDDEN", "VOICE_MESSAGES_FORBIDDEN"] {
        let a = account().await;
        a.wire
            .on::<tl::functions::upload::SaveFilePart>(|_| saved());
        a.wire
            .on::<tl::functions::messages::SendMedia>(move |_| rpc(403, name, None));
        let err = a
            .telegram
            .send_voice(voice(7, ogg(2000)))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, TelegramError::ContentRefused(reason) if reason.contains(name)),
            "{name}: {err:?}"
        );
        assert!(a.telegram.ledger().is_empty());
    }
}

/// A flood wait on the upload reaches the runtime with its seconds, and nothing is sent.
#[tokio::test]
async fn a_flood_wait_on_the_upload_is_reported_and_nothing_is_sent() {
    let a = account().await;
    a.wire
        .on::<tl::functions::upload::SaveFilePart>(|_| rpc(420, "FLOOD_WAIT", Some(12)));
    let err = a
        .telegram
        .send_voice(voice(8, ogg(2000)))
        .await
        .unwrap_err();
    assert_eq!(err, TelegramError::FloodWait { secs: 12 });
    assert_eq!(a.wire.names(), vec!["upload.saveFilePart"]);
}

/// Our message with a file and no text as Telegram lists it in a history page: a voice
/// note, or another file (a sticker, a document).
fn file_in_history(id: i32, voice: bool) -> tl::types::Message {
    let mut m = message(id, peer_user(ALICE), Some(peer_user(SELF_ID)), "");
    m.out = true;
    m.media = Some(document(
        &Media {
            id: 9100 + i64::from(id),
            access_hash: 1,
            file_reference: vec![1],
            mime_type: if voice { "audio/ogg" } else { "image/webp" }.into(),
            name: if voice { "voice.ogg" } else { "sticker.webp" }.into(),
            size: 2000,
            voice,
            photo: false,
            duration: 4,
            waveform: None,
        },
        DATE,
    ));
    m
}

/// kill -9 between upload and send, or after a send whose answer was lost: the restarted
/// daemon (empty ledger) uploads again and sends with the same idempotency key; Telegram
/// answers RANDOM_ID_DUPLICATE and the voice note is the one already in the chat (found in
/// the recent history: our newest voice note, not a newer text or sticker), one message in
/// all.
#[tokio::test]
async fn a_voice_note_retried_after_a_crash_is_the_message_already_sent() {
    let a = account().await;
    a.wire
        .on::<tl::functions::upload::SaveFilePart>(|_| saved());
    a.wire
        .on::<tl::functions::messages::SendMedia>(|_| rpc(500, "RANDOM_ID_DUPLICATE", None));
    a.wire.on::<tl::functions::messages::GetHistory>(|_| {
        let mut text = message(92, peer_user(ALICE), Some(peer_user(SELF_ID)), "later!");
        text.out = true;
        let sticker = file_in_history(91, false);
        plain_messages(vec![text, sticker, file_in_history(90, true)], Vec::new())
    });
    let sent = a.telegram.send_voice(voice(5151, ogg(3000))).await.unwrap();
    assert_eq!(sent.id, MessageId(90));
    assert_eq!(sent.text, "see you at the station");
    assert_eq!(
        a.wire
            .requests::<tl::functions::messages::SendMedia>()
            .len(),
        1,
        "one send: Telegram refused the repeat"
    );
    assert_eq!(
        a.telegram.ledger().by_random_id(ChatId(ALICE), 5151),
        Some(MessageId(90))
    );

    // Retried again in the same run: the ledger answers, no history read.
    a.wire
        .on::<tl::functions::upload::SaveFilePart>(|_| saved());
    a.wire
        .on::<tl::functions::messages::SendMedia>(|_| rpc(500, "RANDOM_ID_DUPLICATE", None));
    let again = a.telegram.send_voice(voice(5151, ogg(3000))).await.unwrap();
    assert_eq!(again.id, MessageId(90));
    assert_eq!(
        a.wire
            .requests::<tl::functions::messages::GetHistory>()
            .len(),
        1
    );
}

/// "Recording voice" is messages.setTyping with the record-audio action.
#[tokio::test]
async fn recording_voice_is_the_record_audio_chat_action() {
    let a = account().await;
    a.wire
        .on::<tl::functions::messages::SetTyping>(|_| ok(true));
    a.telegram.recording_voice(ChatId(ALICE)).await.unwrap();
    let asked = a.wire.requests::<tl::functions::messages::SetTyping>();
    assert_eq!(asked.len(), 1);
    assert_eq!(input_user(&asked[0].peer), (ALICE, ALICE_HASH));
    assert!(matches!(
        asked[0].action,
        tl::enums::SendMessageAction::SendMessageRecordAudioAction
    ));
}

fn echo(text: &str, kind: Option<MediaKind>) -> Message {
    Message {
        id: MessageId(300),
        chat: ChatId(ALICE),
        sender: Sender {
            id: SELF_ID,
            name: String::new(),
            username: None,
            is_bot: false,
            service: false,
            deleted: false,
        },
        outgoing: true,
        text: text.into(),
        mentions: Vec::new(),
        reply_to: None,
        date: common::t0(),
        media: kind.map(|kind| {
            Box::new(MediaInfo {
                kind,
                unique_id: "1".into(),
                mime: None,
                size: None,
                duration_secs: None,
                file_name: None,
                sticker: None,
            })
        }),
    }
}

/// While a voice note is in flight, its echo (no text, a voice document) is ours; the
/// owner's sticker or empty-looking message meanwhile is not, and a text send in flight
/// does not claim a voice echo.
#[test]
fn the_echo_of_a_voice_note_in_flight_is_ours() {
    let clock: SharedClock = Arc::new(VirtualClock::new(common::t0(), true));
    let ledger = SentLedger::in_memory(clock);
    let voice_echo = echo("", Some(MediaKind::Voice));
    assert!(!ledger.is_own_message(&voice_echo));
    {
        let _text = ledger.begin(ChatId(ALICE), "");
        assert!(
            !ledger.is_own_message(&voice_echo),
            "a sticker send is not a voice"
        );
    }
    let guard = ledger.begin_voice(ChatId(ALICE));
    assert!(ledger.is_own_message(&voice_echo));
    assert!(!ledger.is_own_message(&echo("", Some(MediaKind::Sticker))));
    assert!(!ledger.is_own_message(&echo("hello", None)));
    drop(guard);
    assert!(!ledger.is_own_message(&voice_echo));
}
