//! Downloading a message's media over raw TL calls through the invoker: the message is read
//! back by id (learning an unknown peer and retrying once, like sends), then its photo or
//! document is fetched with `upload.getFile` in 512 KiB parts from the datacenter that stores
//! it. A FILE_MIGRATE answer moves to the named datacenter, AUTH_KEY_UNREGISTERED there
//! copies the login over (`auth.exportAuthorization` / `auth.importAuthorization`) once, and
//! an expired file reference is refreshed by reading the message again, once. The byte cap
//! is checked before and during the download. A helper of the backend's `Telegram`
//! implementation; it caches nothing.

use grammers_client::InvocationError;
use grammers_client::tl;

use super::MtprotoTelegram;
use crate::adapters::mtproto::errors::classify;
use crate::adapters::mtproto::invoker;
use crate::adapters::mtproto::recover::{self, CallError};
use crate::core::model::{ChatId, MessageId, TelegramError, TgResult};

/// Bytes per `upload.getFile` part (Telegram's largest; a multiple of 4 KiB dividing 1 MiB).
pub(crate) const CHUNK: i32 = 512 * 1024;
/// Most datacenter moves one download follows.
const MAX_MIGRATIONS: usize = 3;

/// Where a message's media is stored.
#[derive(Debug, Clone)]
pub(crate) struct FileToFetch {
    pub location: tl::enums::InputFileLocation,
    pub dc: i32,
    /// The size Telegram announced, if any.
    pub size: Option<u64>,
    /// A tiny photo whose bytes came with the message (nothing to download).
    pub inline: Option<Vec<u8>>,
}

/// The file of a message's photo or document (`None`: no downloadable media).
pub(crate) fn file_of(raw: &tl::enums::Message) -> Option<FileToFetch> {
    let tl::enums::Message::Message(m) = raw else {
        return None;
    };
    match m.media.as_ref()? {
        tl::enums::MessageMedia::Photo(p) => {
            let tl::enums::Photo::Photo(photo) = p.photo.as_ref()? else {
                return None;
            };
            photo_file(photo)
        }
        tl::enums::MessageMedia::Document(d) => {
            let tl::enums::Document::Document(doc) = d.document.as_ref()? else {
                return None;
            };
            Some(FileToFetch {
                location: tl::types::InputDocumentFileLocation {
                    id: doc.id,
                    access_hash: doc.access_hash,
                    file_reference: doc.file_reference.clone(),
                    thumb_size: String::new(),
                }
                .into(),
                dc: doc.dc_id,
                size: u64::try_from(doc.size).ok(),
                inline: None,
            })
        }
        _ => None,
    }
}

/// A photo's largest size (or its cached bytes when that is all it has).
fn photo_file(photo: &tl::types::Photo) -> Option<FileToFetch> {
    let largest = photo
        .sizes
        .iter()
        .filter_map(|s| match s {
            tl::enums::PhotoSize::Size(s) => Some((s.r#type.clone(), i64::from(s.size))),
            tl::enums::PhotoSize::Progressive(s) => s
                .sizes
                .iter()
                .max()
                .map(|&n| (s.r#type.clone(), i64::from(n))),
            _ => None,
        })
        .max_by_key(|(_, size)| *size);
    let Some((thumb_size, size)) = largest else {
        let cached = photo.sizes.iter().find_map(|s| match s {
            tl::enums::PhotoSize::PhotoCachedSize(c) => Some(c.bytes.clone()),
            _ => None,
        })?;
        return Some(FileToFetch {
            location: tl::types::InputFileLocation {
                volume_id: 0,
                local_id: 0,
                secret: 0,
                file_reference: Vec::new(),
            }
            .into(),
            dc: photo.dc_id,
            size: u64::try_from(cached.len()).ok(),
            inline: Some(cached),
        });
    };
    Some(FileToFetch {
        location: tl::types::InputPhotoFileLocation {
            id: photo.id,
            access_hash: photo.access_hash,
            file_reference: photo.file_reference.clone(),
            thumb_size,
        }
        .into(),
        dc: photo.dc_id,
        size: u64::try_from(size).ok(),
        inline: None,
    })
}

fn over_cap(max_bytes: u64) -> TelegramError {
    TelegramError::Invalid(format!("media is over the {max_bytes} byte cap"))
}

impl MtprotoTelegram {
    /// Where the media of message `id` in `chat` is stored (read back now: fresh file
    /// reference). An unknown peer is learnt and the read retried once.
    async fn media_file(&self, chat: ChatId, id: i32) -> TgResult<FileToFetch> {
        let raw = recover::with_peer_retry(self, chat, || self.message_by_id(chat, id))
            .await
            .map_err(CallError::into_error)?;
        raw.as_ref()
            .and_then(file_of)
            .ok_or_else(|| TelegramError::NotFound(format!("no media in message {id}")))
    }

    /// Copies this account's login to datacenter `dc` (its files answered
    /// AUTH_KEY_UNREGISTERED there).
    async fn copy_auth_to(&self, dc: i32) -> Result<(), InvocationError> {
        let tl::enums::auth::ExportedAuthorization::Authorization(exported) = self
            .call(&tl::functions::auth::ExportAuthorization { dc_id: dc })
            .await?;
        invoker::call_in_dc(
            self.invoker.as_ref(),
            dc,
            &tl::functions::auth::ImportAuthorization {
                id: exported.id,
                bytes: exported.bytes,
            },
        )
        .await
        .map(|_| ())
    }

    /// Whether `dc` is the account's home datacenter.
    fn is_home(&self, dc: i32) -> bool {
        use grammers_client::session::Session;
        self.session.home_dc_id().ok() == Some(dc)
    }

    /// The bytes of a message's media, at most `max_bytes` of them.
    pub(super) async fn download(
        &self,
        chat: ChatId,
        message: MessageId,
        max_bytes: u64,
    ) -> TgResult<Vec<u8>> {
        let id = i32::try_from(message.0)
            .map_err(|_| TelegramError::Invalid(format!("message id {message}")))?;
        let mut file = self.media_file(chat, id).await?;
        if file.size.is_some_and(|s| s > max_bytes) {
            return Err(over_cap(max_bytes));
        }
        if let Some(bytes) = file.inline.take() {
            return Ok(bytes);
        }
        let mut dc = file.dc;
        let (mut migrations, mut refreshed, mut auth_copied) = (0, false, false);
        let mut bytes: Vec<u8> = Vec::new();
        loop {
            let request = tl::functions::upload::GetFile {
                precise: false,
                cdn_supported: false,
                location: file.location.clone(),
                offset: i64::try_from(bytes.len()).unwrap_or(i64::MAX),
                limit: CHUNK,
            };
            match invoker::call_in_dc(self.invoker.as_ref(), dc, &request).await {
                Ok(tl::enums::upload::File::File(part)) => {
                    let n = part.bytes.len();
                    bytes.extend_from_slice(&part.bytes);
                    if bytes.len() as u64 > max_bytes {
                        return Err(over_cap(max_bytes));
                    }
                    let whole = file.size.is_some_and(|s| bytes.len() as u64 >= s);
                    if n < CHUNK as usize || whole {
                        return Ok(bytes);
                    }
                }
                Ok(tl::enums::upload::File::CdnRedirect(_)) => {
                    return Err(TelegramError::Other(
                        "Telegram sent the file to a CDN although none was asked for".into(),
                    ));
                }
                Err(InvocationError::Rpc(e))
                    if e.code == 303 && e.value.is_some() && migrations < MAX_MIGRATIONS =>
                {
                    migrations += 1;
                    dc = i32::try_from(e.value.unwrap_or(0)).unwrap_or(dc);
                }
                Err(e) if e.is("FILE_REFERENCE_*") && !refreshed => {
                    // File references expire: the message read again carries a fresh one.
                    refreshed = true;
                    file = self.media_file(chat, id).await?;
                }
                Err(e) if e.is("AUTH_KEY_UNREGISTERED") && !auth_copied && !self.is_home(dc) => {
                    // Another datacenter does not know this login yet.
                    auth_copied = true;
                    self.copy_auth_to(dc).await.map_err(|e| classify(&e))?;
                }
                Err(e) => return Err(classify(&e)),
            }
        }
    }
}
