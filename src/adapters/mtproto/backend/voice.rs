//! Voice notes over MTProto: the Ogg/Opus file uploaded in parts (`upload.saveFilePart`,
//! a random file id), then one `messages.sendMedia` with an uploaded document marked as a
//! voice note (`DocumentAttributeAudio { voice, duration, waveform }`, no caption), keyed by
//! the task's idempotency key as `random_id` like every send; and the "recording voice" chat
//! action. A send retried after a crash uploads the parts again (harmless: unreferenced parts
//! expire) and is answered RANDOM_ID_DUPLICATE, resolved to the message the earlier run sent.
//! Helpers of the backend's `Telegram` implementation: they neither pace nor fall back to
//! text (the governor and the runtime do), and report a refused voice as Telegram names it
//! (`ContentRefused` through `errors::classify`).

use grammers_client::tl;

use super::{MtprotoTelegram, SendAnswer};
use crate::adapters::mtproto::errors::classify;
use crate::adapters::mtproto::recover::{self, CallError};
use crate::core::model::{
    ChatId, MediaInfo, MediaKind, Message, OutgoingVoice, TelegramError, TgResult,
};

/// The size of an uploaded part: Telegram's largest (512 KiB); the last part may be smaller.
pub(crate) const PART_BYTES: usize = 512 * 1024;
/// The largest file `upload.saveFilePart` takes (a bigger one needs the big-file calls, which
/// a voice note never does).
pub(crate) const MAX_SMALL_FILE: usize = 10 * 1024 * 1024;
/// The name the uploaded voice note carries.
pub(crate) const VOICE_FILE_NAME: &str = "voice.ogg";
/// The MIME type of a voice note.
pub(crate) const VOICE_MIME: &str = "audio/ogg";

impl MtprotoTelegram {
    /// Sends a voice note (see the module docs): upload, send, record the id, and the message
    /// as our history keeps it (the transcript as its text).
    pub(super) async fn voice(&self, msg: OutgoingVoice) -> TgResult<Message> {
        // Until this send returns, an outgoing voice echo in this chat is ours.
        let _in_flight = self.ledger.begin_voice(msg.chat);
        let file = self.upload(&msg.ogg).await?;
        let answer = recover::with_peer_retry(self, msg.chat, || self.raw_send_voice(&msg, &file))
            .await
            .map_err(CallError::into_error)?;
        let (answer, document) = answer;
        let id = match answer {
            SendAnswer::Sent(id) => {
                let id = crate::core::model::MessageId(i64::from(id.unwrap_or(0)));
                self.remember_sent(msg.chat, id, msg.idempotency_key).await;
                id
            }
            SendAnswer::Duplicate => {
                tracing::info!(chat = %msg.chat, "voice note was already sent before a restart");
                self.resolve_duplicate_with(msg.chat, msg.idempotency_key, &is_our_voice)
                    .await
            }
        };
        let id = i32::try_from(id.0).unwrap_or(0);
        let mut message = self.outgoing(msg.chat, id, msg.text.clone(), msg.reply_to);
        message.media = Some(Box::new(MediaInfo {
            kind: MediaKind::Voice,
            unique_id: document
                .map_or_else(|| format!("voice-upload-{}", file.id), |d| d.to_string()),
            mime: Some(VOICE_MIME.to_string()),
            size: u64::try_from(msg.ogg.len()).ok(),
            duration_secs: Some(msg.duration_secs),
            file_name: None,
            sticker: None,
        }));
        Ok(message)
    }

    /// Uploads a voice note (see [`Self::upload_named`]).
    async fn upload(&self, bytes: &[u8]) -> TgResult<tl::types::InputFile> {
        self.upload_named(bytes, VOICE_FILE_NAME, "voice note")
            .await
    }

    /// Uploads `bytes` as a small file named `name` in parts of [`PART_BYTES`] under a random
    /// file id (`what` names it in a refusal).
    pub(super) async fn upload_named(
        &self,
        bytes: &[u8],
        name: &str,
        what: &str,
    ) -> TgResult<tl::types::InputFile> {
        if bytes.is_empty() {
            return Err(TelegramError::Invalid(format!("an empty {what}")));
        }
        if bytes.len() > MAX_SMALL_FILE {
            return Err(TelegramError::Invalid(format!(
                "a {what} of {} bytes, over the {MAX_SMALL_FILE} byte upload cap",
                bytes.len()
            )));
        }
        let file_id = fastrand::i64(..);
        let mut parts = 0i32;
        for (i, chunk) in bytes.chunks(PART_BYTES).enumerate() {
            let file_part = i32::try_from(i)
                .map_err(|_| TelegramError::Invalid("too many upload parts".into()))?;
            let saved = self
                .call(&tl::functions::upload::SaveFilePart {
                    file_id,
                    file_part,
                    bytes: chunk.to_vec(),
                })
                .await
                .map_err(|e| classify(&e))?;
            if !saved {
                return Err(TelegramError::Other(format!(
                    "Telegram did not save part {file_part} of an upload"
                )));
            }
            parts = file_part + 1;
        }
        Ok(tl::types::InputFile {
            id: file_id,
            parts,
            name: name.to_string(),
            md5_checksum: String::new(),
        })
    }

    /// One `messages.sendMedia` of an uploaded voice note: what Telegram answered, and the
    /// document id of the new message when the answer carries it.
    async fn raw_send_voice(
        &self,
        msg: &OutgoingVoice,
        file: &tl::types::InputFile,
    ) -> Result<(SendAnswer, Option<i64>), CallError> {
        let peer = self.input_peer(msg.chat).await?;
        let request = send_voice_request(
            peer,
            self.reply_to(msg.chat, msg.reply_to),
            msg,
            file.clone(),
        );
        match self.call(&request).await {
            Ok(updates) => Ok((
                SendAnswer::Sent(Self::sent_id(&updates, msg.idempotency_key)),
                document_in(&updates),
            )),
            Err(e) if Self::is_duplicate(&e) => Ok((SendAnswer::Duplicate, None)),
            Err(e) => Err(Self::call_error(&e)),
        }
    }

    /// The "recording voice" chat action.
    pub(super) async fn record_audio_action(&self, chat: ChatId) -> TgResult<()> {
        self.chat_action(
            chat,
            tl::enums::SendMessageAction::SendMessageRecordAudioAction,
        )
        .await
    }

    /// A chat action (typing, recording voice), shown in the topic of the newest message from
    /// others.
    pub(super) async fn chat_action(
        &self,
        chat: ChatId,
        action: tl::enums::SendMessageAction,
    ) -> TgResult<()> {
        let top_msg_id = self.current_topic(chat);
        recover::with_peer_retry(self, chat, || async {
            let peer = self.input_peer(chat).await?;
            self.call(&tl::functions::messages::SetTyping {
                peer,
                top_msg_id,
                action: action.clone(),
            })
            .await
            .map(|_| ())
            .map_err(|e| Self::call_error(&e))
        })
        .await
        .map_err(CallError::into_error)
    }
}

/// The `messages.sendMedia` request of a voice note: an uploaded `audio/ogg` document marked
/// as a voice note with its duration and waveform, no caption, the idempotency key as
/// `random_id`.
pub(crate) fn send_voice_request(
    peer: tl::enums::InputPeer,
    reply_to: Option<tl::enums::InputReplyTo>,
    msg: &OutgoingVoice,
    file: tl::types::InputFile,
) -> tl::functions::messages::SendMedia {
    let media = tl::types::InputMediaUploadedDocument {
        nosound_video: false,
        force_file: false,
        spoiler: false,
        file: file.into(),
        thumb: None,
        mime_type: VOICE_MIME.to_string(),
        attributes: vec![
            tl::types::DocumentAttributeAudio {
                voice: true,
                duration: i32::try_from(msg.duration_secs).unwrap_or(i32::MAX),
                title: None,
                performer: None,
                waveform: Some(msg.waveform.clone()),
            }
            .into(),
        ],
        stickers: None,
        video_cover: None,
        video_timestamp: None,
        ttl_seconds: None,
    };
    super::send::send_media_request(peer, reply_to, media.into(), msg.idempotency_key)
}

/// Whether a message of ours is a voice note without text (what an earlier run's voice send
/// left in the history).
fn is_our_voice(m: &tl::types::Message) -> bool {
    m.message.is_empty()
        && matches!(&m.media, Some(tl::enums::MessageMedia::Document(d)) if d.voice
            || matches!(&d.document, Some(tl::enums::Document::Document(doc))
                if doc.attributes.iter().any(|a| matches!(a, tl::enums::DocumentAttribute::Audio(a) if a.voice))))
}

/// The document id of the new message an answer to a send carries, if any.
fn document_in(updates: &tl::enums::Updates) -> Option<i64> {
    media_in(updates, |media| match media {
        tl::enums::MessageMedia::Document(d) => match &d.document {
            Some(tl::enums::Document::Document(doc)) => Some(doc.id),
            _ => None,
        },
        _ => None,
    })
}

/// What `from_media` finds in the media of the new message an answer to a send carries: the
/// short answer's media, or the first new message's among the updates.
pub(super) fn media_in<T>(
    updates: &tl::enums::Updates,
    from_media: impl Fn(&tl::enums::MessageMedia) -> Option<T>,
) -> Option<T> {
    let from_message = |m: &tl::enums::Message| match m {
        tl::enums::Message::Message(m) => m.media.as_ref().and_then(&from_media),
        _ => None,
    };
    let in_list = |list: &[tl::enums::Update]| {
        list.iter().find_map(|u| match u {
            tl::enums::Update::NewMessage(n) => from_message(&n.message),
            tl::enums::Update::NewChannelMessage(n) => from_message(&n.message),
            _ => None,
        })
    };
    match updates {
        tl::enums::Updates::UpdateShortSentMessage(u) => u.media.as_ref().and_then(&from_media),
        tl::enums::Updates::Updates(u) => in_list(&u.updates),
        tl::enums::Updates::Combined(u) => in_list(&u.updates),
        _ => None,
    }
}
