//! Album items over MTProto (`send_media`): an item this account sent before goes by the
//! reference Telegram made of it (`InputMediaPhoto` / `InputMediaDocument` from the upload
//! store); otherwise, or when that reference no longer works (FILE_REFERENCE_EXPIRED, an
//! invalid media: the stored reference is forgotten), the file is read, uploaded in parts
//! and sent as `InputMediaUploadedPhoto` (photos) or `InputMediaUploadedDocument` (the rest,
//! with its MIME type, file name and, for audio, video and stickers, their attribute), and
//! the reference in Telegram's answer is stored for the next time. Every send is one
//! `messages.sendMedia` keyed by the task's idempotency key as `random_id`, so a send retried
//! after a crash between upload and send (or after a lost answer) is answered
//! RANDOM_ID_DUPLICATE and resolved to the message the earlier run sent. Helpers of the
//! backend's `Telegram` implementation: no pacing (the governor), no fallback to text.

use grammers_client::tl;
use sha2::{Digest, Sha256};

use super::{MtprotoTelegram, SendAnswer};
use crate::adapters::mtproto::errors::classify;
use crate::adapters::mtproto::recover::{self, CallError};
use crate::adapters::mtproto::uploads::StoredUpload;
use crate::adapters::store::{self, Symlinks};
use crate::core::model::{
    LocalFailure, MediaInfo, MediaKind, Message, MessageId, OutgoingMedia, TelegramError, TgResult,
};

use super::voice::MAX_SMALL_FILE;

/// What one `messages.sendMedia` of an album item came to.
enum Answer {
    /// Sent (or a duplicate), with the reference the answer carries.
    Sent(SendAnswer, Option<StoredUpload>),
    /// The stored reference no longer works (Telegram's refusal): upload again.
    Stale(TelegramError),
}

impl MtprotoTelegram {
    /// Sends an album item (see the module docs).
    pub(super) async fn album_item(&self, msg: OutgoingMedia) -> TgResult<Message> {
        // Until this send returns, an outgoing echo without text in this chat is ours.
        let _in_flight = self.ledger.begin(msg.chat, "");
        let mut answer = None;
        if let Some(stored) = self.uploads.get(&msg.content_hash) {
            let media = by_reference(&stored);
            match self.send_album_media(&msg, media).await? {
                Answer::Sent(a, r) => answer = Some((a, r.or(Some(stored)))),
                Answer::Stale(why) => {
                    tracing::info!(chat = %msg.chat, item = %msg.album_id, reason = %why, "the album item's stored upload no longer works; uploading it again");
                    self.uploads.forget(&msg.content_hash).await;
                }
            }
        }
        let (answer, reference) = match answer {
            Some(a) => a,
            None => {
                let bytes = read_item(&msg).await?;
                let file = self
                    .upload_named(&bytes, &msg.file_name, "album item")
                    .await?;
                match self.send_album_media(&msg, uploaded(&msg, file)).await? {
                    Answer::Sent(a, r) => (a, r),
                    Answer::Stale(refused) => return Err(refused),
                }
            }
        };
        if let Some(r) = reference {
            self.uploads.put(&msg.content_hash, r).await;
        }
        let id = match answer {
            SendAnswer::Sent(id) => {
                let id = MessageId(i64::from(id.unwrap_or(0)));
                self.remember_sent(msg.chat, id, msg.idempotency_key).await;
                id
            }
            SendAnswer::Duplicate => {
                tracing::info!(chat = %msg.chat, item = %msg.album_id, "album item was already sent before a restart");
                self.resolve_duplicate_with(msg.chat, msg.idempotency_key, &is_our_media)
                    .await
            }
        };
        let id = i32::try_from(id.0).unwrap_or(0);
        let mut message = self.outgoing(msg.chat, id, String::new(), msg.reply_to);
        message.media = Some(Box::new(MediaInfo {
            kind: msg.kind,
            unique_id: msg.album_id.clone(),
            mime: Some(msg.mime.clone()),
            size: None,
            duration_secs: None,
            file_name: Some(msg.file_name.clone()),
            sticker: None,
        }));
        Ok(message)
    }

    /// One `messages.sendMedia` of `media` (learning an unknown peer once).
    async fn send_album_media(
        &self,
        msg: &OutgoingMedia,
        media: tl::enums::InputMedia,
    ) -> TgResult<Answer> {
        recover::with_peer_retry(self, msg.chat, || async {
            let peer = self.input_peer(msg.chat).await?;
            let request = super::send::send_media_request(
                peer,
                self.reply_to(msg.chat, msg.reply_to),
                media.clone(),
                msg.idempotency_key,
            );
            match self.call(&request).await {
                Ok(updates) => Ok(Answer::Sent(
                    SendAnswer::Sent(Self::sent_id(&updates, msg.idempotency_key)),
                    reference_in(&updates),
                )),
                Err(e) if Self::is_duplicate(&e) => Ok(Answer::Sent(SendAnswer::Duplicate, None)),
                Err(e) if stale(&e) => Ok(Answer::Stale(classify(&e))),
                Err(e) => Err(Self::call_error(&e)),
            }
        })
        .await
        .map_err(CallError::into_error)
    }
}

/// Whether Telegram refused a stored reference (upload again) rather than the send.
fn stale(e: &grammers_client::InvocationError) -> bool {
    [
        "FILE_REFERENCE_*",
        "MEDIA_INVALID",
        "MEDIA_EMPTY",
        "PHOTO_INVALID",
        "DOCUMENT_INVALID",
        "FILE_ID_INVALID",
    ]
    .iter()
    .any(|name| e.is(name))
}

/// The item's bytes (off the async threads, capped), checked against the album's hash: a file
/// changed since the album was read is still sent, with a WARN.
async fn read_item(msg: &OutgoingMedia) -> TgResult<Vec<u8>> {
    let path = msg.path.clone();
    let cap = u64::try_from(MAX_SMALL_FILE).unwrap_or(u64::MAX);
    let bytes = tokio::task::spawn_blocking(move || store::read_file(&path, cap, Symlinks::Follow))
        .await
        .map_err(|e| TelegramError::Local(LocalFailure::new(e)))?
        .map_err(|e| TelegramError::Local(LocalFailure::new(e)))?;
    let hash: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if hash != msg.content_hash {
        tracing::warn!(item = %msg.album_id, file = %msg.path.display(), "the album item changed on disk since the album was read; sending it as it is now");
    }
    Ok(bytes)
}

/// A stored upload as media to send.
fn by_reference(r: &StoredUpload) -> tl::enums::InputMedia {
    if r.photo {
        tl::types::InputMediaPhoto {
            spoiler: false,
            live_photo: false,
            id: tl::types::InputPhoto {
                id: r.id,
                access_hash: r.access_hash,
                file_reference: r.file_reference.clone(),
            }
            .into(),
            ttl_seconds: None,
            video: None,
        }
        .into()
    } else {
        tl::types::InputMediaDocument {
            spoiler: false,
            id: tl::types::InputDocument {
                id: r.id,
                access_hash: r.access_hash,
                file_reference: r.file_reference.clone(),
            }
            .into(),
            video_cover: None,
            video_timestamp: None,
            ttl_seconds: None,
            query: None,
        }
        .into()
    }
}

/// A freshly uploaded file as media to send: a photo, or a document with its type, name and
/// the attribute its kind calls for.
fn uploaded(msg: &OutgoingMedia, file: tl::types::InputFile) -> tl::enums::InputMedia {
    if msg.kind == MediaKind::Photo {
        return tl::types::InputMediaUploadedPhoto {
            spoiler: false,
            live_photo: false,
            file: file.into(),
            stickers: None,
            ttl_seconds: None,
            video: None,
        }
        .into();
    }
    let mut attributes: Vec<tl::enums::DocumentAttribute> = vec![
        tl::types::DocumentAttributeFilename {
            file_name: msg.file_name.clone(),
        }
        .into(),
    ];
    match msg.kind {
        MediaKind::Audio | MediaKind::Voice => attributes.push(
            tl::types::DocumentAttributeAudio {
                voice: msg.kind == MediaKind::Voice,
                duration: 0,
                title: None,
                performer: None,
                waveform: None,
            }
            .into(),
        ),
        MediaKind::Video | MediaKind::RoundVideo => attributes.push(
            tl::types::DocumentAttributeVideo {
                round_message: false,
                supports_streaming: true,
                nosound: false,
                duration: 0.0,
                w: 0,
                h: 0,
                preload_prefix_size: None,
                video_start_ts: None,
                video_codec: None,
            }
            .into(),
        ),
        MediaKind::Gif => attributes.push(tl::types::DocumentAttributeAnimated {}.into()),
        MediaKind::Sticker => attributes.push(
            tl::types::DocumentAttributeSticker {
                mask: false,
                alt: String::new(),
                stickerset: tl::enums::InputStickerSet::Empty,
                mask_coords: None,
            }
            .into(),
        ),
        MediaKind::Photo | MediaKind::Document => {}
    }
    tl::types::InputMediaUploadedDocument {
        nosound_video: false,
        force_file: msg.kind == MediaKind::Document,
        spoiler: false,
        file: file.into(),
        thumb: None,
        mime_type: msg.mime.clone(),
        attributes,
        stickers: None,
        video_cover: None,
        video_timestamp: None,
        ttl_seconds: None,
    }
    .into()
}

/// Whether a message of ours is media without text (what an earlier run's album send left in
/// the history).
fn is_our_media(m: &tl::types::Message) -> bool {
    m.message.is_empty()
        && matches!(
            &m.media,
            Some(tl::enums::MessageMedia::Photo(_) | tl::enums::MessageMedia::Document(_))
        )
}

/// The reference of the photo or document a send's answer carries, if any.
fn reference_in(updates: &tl::enums::Updates) -> Option<StoredUpload> {
    super::voice::media_in(updates, |media| match media {
        tl::enums::MessageMedia::Photo(p) => match &p.photo {
            Some(tl::enums::Photo::Photo(p)) => Some(StoredUpload {
                photo: true,
                id: p.id,
                access_hash: p.access_hash,
                file_reference: p.file_reference.clone(),
                seq: 0,
            }),
            _ => None,
        },
        tl::enums::MessageMedia::Document(d) => match &d.document {
            Some(tl::enums::Document::Document(doc)) => Some(StoredUpload {
                photo: false,
                id: doc.id,
                access_hash: doc.access_hash,
                file_reference: doc.file_reference.clone(),
                seq: 0,
            }),
            _ => None,
        },
        _ => None,
    })
}
