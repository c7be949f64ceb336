//! Uploads and media sends in the simulated Telegram: `upload.saveFilePart` keeps the parts
//! of each account's files in progress (bounded: a few files per account, Telegram's part
//! size and count limits), and `messages.sendMedia` with an uploaded document or photo puts
//! the reassembled file into a message (a voice note with its duration and waveform), or
//! sends a photo or document stored before by its reference, delivered like any post. It checks what Telegram checks for these (missing parts, a random id used
//! before, a dialog that refuses voice notes) and answers with Telegram's error names. Called
//! by [`super::rpc`] with the world locked; it owns no socket.

use std::collections::BTreeMap;

use grammers_client::tl::{self, Serializable};

use super::deliver::{File, Post, post};
use super::input::input_peer;
use super::send::sent_answer;
use super::world::{Peer, RpcFailure, World};

type Answer = Result<Vec<u8>, RpcFailure>;

/// The largest part Telegram takes (512 KiB).
pub const MAX_PART_BYTES: usize = 512 * 1024;
/// The most parts of a small file (10 MiB in 512 KiB parts).
pub const MAX_PARTS: i32 = 20;
/// The most files one account may have in progress; older ones are forgotten.
pub const MAX_UPLOADS: usize = 8;

fn fail(code: i32, name: &str) -> RpcFailure {
    RpcFailure::new(code, name)
}

/// `upload.saveFilePart`.
pub(super) fn save_file_part(
    w: &mut World,
    account: i64,
    r: tl::functions::upload::SaveFilePart,
) -> Answer {
    if !(0..MAX_PARTS).contains(&r.file_part) {
        return Err(fail(400, "FILE_PART_INVALID"));
    }
    if r.bytes.is_empty() {
        return Err(fail(400, "FILE_PART_EMPTY"));
    }
    if r.bytes.len() > MAX_PART_BYTES {
        return Err(fail(400, "FILE_PART_TOO_BIG"));
    }
    let uploads = w.uploads.entry(account).or_default();
    match uploads.iter_mut().find(|(id, _)| *id == r.file_id) {
        Some((_, parts)) => {
            parts.insert(r.file_part, r.bytes);
        }
        None => {
            if uploads.len() >= MAX_UPLOADS {
                uploads.pop_front();
            }
            uploads.push_back((r.file_id, BTreeMap::from([(r.file_part, r.bytes)])));
        }
    }
    Ok(true.to_bytes())
}

/// The bytes of an uploaded file, when all its `parts` arrived (each but the last full).
fn take_upload(w: &mut World, account: i64, file: &tl::types::InputFile) -> Option<Vec<u8>> {
    let uploads = w.uploads.get_mut(&account)?;
    let i = uploads.iter().position(|(id, _)| *id == file.id)?;
    let (_, parts) = &uploads[i];
    let complete = file.parts > 0
        && parts.len() == usize::try_from(file.parts).ok()?
        && (0..file.parts).all(|n| {
            parts
                .get(&n)
                .is_some_and(|p| n + 1 == file.parts || p.len() == MAX_PART_BYTES)
        });
    if !complete {
        return None;
    }
    let (_, parts) = uploads.remove(i)?;
    Some(parts.into_values().flatten().collect())
}

/// What a `messages.sendMedia` posts: a freshly uploaded file (a photo or a document), or
/// one stored before, by reference.
enum Sending {
    Upload { file: File, photo: bool },
    Stored(super::world::Media),
}

/// `messages.sendMedia` with an uploaded document (a voice note, a file), an uploaded photo,
/// or a photo or document sent before, by reference (its access hash and current file
/// reference checked: an old reference answers FILE_REFERENCE_EXPIRED). Other media are not
/// modelled: MEDIA_INVALID.
pub(super) fn send_media(
    w: &mut World,
    account: i64,
    r: tl::functions::messages::SendMedia,
) -> Answer {
    let peer = input_peer(w, account, &r.peer)?;
    let voice = match &r.media {
        tl::enums::InputMedia::UploadedDocument(doc) => doc
            .attributes
            .iter()
            .any(|a| matches!(a, tl::enums::DocumentAttribute::Audio(a) if a.voice)),
        _ => false,
    };
    if voice && w.voice_forbidden.contains(&peer) {
        return Err(fail(403, "CHAT_SEND_VOICES_FORBIDDEN"));
    }
    if r.message.encode_utf16().count() > super::CAPTION_LIMIT {
        return Err(fail(400, "MEDIA_CAPTION_TOO_LONG"));
    }
    if w.knows_random_id(account, r.random_id) {
        return Err(fail(500, "RANDOM_ID_DUPLICATE"));
    }
    let (sending, what) = match &r.media {
        tl::enums::InputMedia::UploadedDocument(doc) => (
            uploaded_document(w, account, doc)?,
            if voice { "voice" } else { "document" },
        ),
        tl::enums::InputMedia::UploadedPhoto(p) => {
            let tl::enums::InputFile::File(input) = &p.file else {
                return Err(fail(400, "FILE_PARTS_INVALID"));
            };
            let bytes =
                take_upload(w, account, input).ok_or_else(|| fail(400, "FILE_PARTS_INVALID"))?;
            let file = File {
                name: input.name.clone(),
                mime_type: "image/jpeg".into(),
                bytes,
                ..File::default()
            };
            (Sending::Upload { file, photo: true }, "photo")
        }
        tl::enums::InputMedia::Photo(p) => {
            let tl::enums::InputPhoto::Photo(p) = &p.id else {
                return Err(fail(400, "MEDIA_EMPTY"));
            };
            let m = stored(w, p.id, p.access_hash, &p.file_reference, true)?;
            (Sending::Stored(m), "photo by reference")
        }
        tl::enums::InputMedia::Document(d) => {
            let tl::enums::InputDocument::Document(d) = &d.id else {
                return Err(fail(400, "MEDIA_EMPTY"));
            };
            let m = stored(w, d.id, d.access_hash, &d.file_reference, false)?;
            (Sending::Stored(m), "document by reference")
        }
        _ => return Err(fail(400, "MEDIA_INVALID")),
    };
    let stored = match sending {
        Sending::Stored(m) => m,
        Sending::Upload { file, photo } => w.store_file_as(&file, photo),
    };
    let reply_to = match &r.reply_to {
        Some(tl::enums::InputReplyTo::Message(m)) => Some(m.reply_to_msg_id),
        _ => None,
    };
    let posted = post(
        w,
        account,
        peer,
        &Post {
            text: r.message.clone(),
            reply_to,
            stored: Some(stored),
            ..Post::default()
        },
        Some(account),
    )?;
    let id = posted.id_for(account).unwrap_or(0);
    w.mark_random_id(account, r.random_id, (peer, id));
    w.events
        .push((account, format!("send_media {} {what}", peer.chat_id())));
    sent_answer(w, account, peer, &posted, r.random_id, false)
}

/// An uploaded document's file: its parts reassembled, its name, type and voice attributes.
fn uploaded_document(
    w: &mut World,
    account: i64,
    doc: &tl::types::InputMediaUploadedDocument,
) -> Result<Sending, RpcFailure> {
    let audio = doc.attributes.iter().find_map(|a| match a {
        tl::enums::DocumentAttribute::Audio(a) => Some(a),
        _ => None,
    });
    let tl::enums::InputFile::File(input) = &doc.file else {
        return Err(fail(400, "FILE_PARTS_INVALID"));
    };
    let Some(bytes) = take_upload(w, account, input) else {
        return Err(fail(400, "FILE_PARTS_INVALID"));
    };
    let name = doc
        .attributes
        .iter()
        .find_map(|a| match a {
            tl::enums::DocumentAttribute::Filename(f) => Some(f.file_name.clone()),
            _ => None,
        })
        .unwrap_or_else(|| input.name.clone());
    Ok(Sending::Upload {
        file: File {
            name,
            mime_type: doc.mime_type.clone(),
            bytes,
            voice: audio.is_some_and(|a| a.voice),
            duration: audio.map_or(0, |a| a.duration),
            waveform: audio.and_then(|a| a.waveform.clone()),
        },
        photo: false,
    })
}

/// A file stored before, as a message carries it, when the reference to it holds: the id and
/// access hash of a photo (`photo`) or a document, and its current file reference.
fn stored(
    w: &World,
    id: i64,
    access_hash: i64,
    file_reference: &[u8],
    photo: bool,
) -> Result<super::world::Media, RpcFailure> {
    let invalid = if photo {
        "PHOTO_INVALID"
    } else {
        "DOCUMENT_INVALID"
    };
    let f = w
        .files
        .get(&id)
        .filter(|f| f.access_hash == access_hash && f.photo == photo)
        .ok_or_else(|| fail(400, invalid))?;
    if f.file_reference != file_reference {
        return Err(fail(400, "FILE_REFERENCE_EXPIRED"));
    }
    Ok(super::world::Media {
        id,
        access_hash,
        file_reference: f.file_reference.clone(),
        mime_type: f.mime_type.clone(),
        name: f.name.clone(),
        size: i64::try_from(f.bytes.len()).unwrap_or(i64::MAX),
        voice: false,
        duration: 0,
        waveform: None,
        photo,
    })
}

impl World {
    /// The bytes of a stored file (a document's id, as its message carries it).
    pub fn file_bytes(&self, id: i64) -> Option<Vec<u8>> {
        self.files.get(&id).map(|f| f.bytes.clone())
    }

    /// Whether `peer` (as a sender names it) refuses voice notes from now on.
    pub fn forbid_voice(&mut self, peer: Peer, forbid: bool) {
        if forbid {
            self.voice_forbidden.insert(peer);
        } else {
            self.voice_forbidden.remove(&peer);
        }
    }
}
