//! Uploads and media sends in the simulated Telegram: `upload.saveFilePart` keeps the parts
//! of each account's files in progress (bounded: a few files per account, Telegram's part
//! size and count limits), and `messages.sendMedia` with an uploaded document puts the
//! reassembled file into a message, a voice note with its duration and waveform, delivered
//! like any post. It checks what Telegram checks for these (missing parts, a random id used
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

/// `messages.sendMedia` with an uploaded document (a voice note, a file). Other media
/// (photos, documents by reference) are not modelled: MEDIA_INVALID.
pub(super) fn send_media(
    w: &mut World,
    account: i64,
    r: tl::functions::messages::SendMedia,
) -> Answer {
    let peer = input_peer(w, account, &r.peer)?;
    let tl::enums::InputMedia::UploadedDocument(doc) = &r.media else {
        return Err(fail(400, "MEDIA_INVALID"));
    };
    let audio = doc.attributes.iter().find_map(|a| match a {
        tl::enums::DocumentAttribute::Audio(a) => Some(a),
        _ => None,
    });
    let voice = audio.is_some_and(|a| a.voice);
    if voice && w.voice_forbidden.contains(&peer) {
        return Err(fail(403, "CHAT_SEND_VOICES_FORBIDDEN"));
    }
    if r.message.encode_utf16().count() > super::CAPTION_LIMIT {
        return Err(fail(400, "MEDIA_CAPTION_TOO_LONG"));
    }
    if w.knows_random_id(account, r.random_id) {
        return Err(fail(500, "RANDOM_ID_DUPLICATE"));
    }
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
            file: Some(File {
                name,
                mime_type: doc.mime_type.clone(),
                bytes,
                voice,
                duration: audio.map_or(0, |a| a.duration),
                waveform: audio.and_then(|a| a.waveform.clone()),
            }),
            ..Post::default()
        },
        Some(account),
    )?;
    let id = posted.id_for(account).unwrap_or(0);
    w.mark_random_id(account, r.random_id, (peer, id));
    w.events.push((
        account,
        format!(
            "send_media {} {}",
            peer.chat_id(),
            if voice { "voice" } else { "document" }
        ),
    ));
    sent_answer(w, account, peer, &posted, r.random_id, false)
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
