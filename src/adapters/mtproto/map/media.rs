//! Media of a message, mapped into the domain: photos, documents (stickers with their set,
//! voice notes, audio, video, animations, files) with their unique ids, sizes and durations.

use grammers_client::tl;

use super::StickerSetRef;
use crate::core::model::{MediaInfo, MediaKind, StickerInfo};

/// Media info of a raw message media, plus the sticker set to resolve if only its id is
/// known. Media the daemon does not describe (polls, locations, web pages, ...) is `None`.
pub(crate) fn map_media(
    media: &tl::enums::MessageMedia,
) -> (Option<MediaInfo>, Option<StickerSetRef>) {
    match media {
        tl::enums::MessageMedia::Photo(p) => (map_photo(p), None),
        tl::enums::MessageMedia::Document(d) => map_document(d),
        _ => (None, None),
    }
}

pub(super) fn map_photo(p: &tl::types::MessageMediaPhoto) -> Option<MediaInfo> {
    let Some(tl::enums::Photo::Photo(photo)) = &p.photo else {
        return None;
    };
    let size = photo
        .sizes
        .iter()
        .filter_map(|s| match s {
            tl::enums::PhotoSize::Size(s) => u64::try_from(s.size).ok(),
            tl::enums::PhotoSize::Progressive(s) => {
                s.sizes.iter().max().and_then(|&n| u64::try_from(n).ok())
            }
            tl::enums::PhotoSize::PhotoCachedSize(s) => u64::try_from(s.bytes.len()).ok(),
            _ => None,
        })
        .max();
    Some(MediaInfo {
        kind: MediaKind::Photo,
        unique_id: photo.id.to_string(),
        mime: Some("image/jpeg".to_string()),
        size,
        duration_secs: None,
        file_name: None,
        sticker: None,
    })
}

pub(super) fn secs(d: f64) -> Option<u32> {
    if d.is_finite() && d >= 0.0 {
        // Saturating float-to-int cast; rounding to whole seconds is all we need.
        Some(d.round().min(f64::from(u32::MAX)) as u32)
    } else {
        None
    }
}

pub(super) fn map_document(
    d: &tl::types::MessageMediaDocument,
) -> (Option<MediaInfo>, Option<StickerSetRef>) {
    let Some(tl::enums::Document::Document(doc)) = &d.document else {
        return (None, None);
    };
    let mime = doc.mime_type.trim().to_ascii_lowercase();
    let mut sticker = None;
    let (mut animated, mut round, mut video, mut voice, mut audio) =
        (false, d.round, d.video, d.voice, false);
    let (mut duration, mut file_name) = (None, None);
    for attr in &doc.attributes {
        match attr {
            tl::enums::DocumentAttribute::Sticker(s) => sticker = Some(s),
            tl::enums::DocumentAttribute::Animated => animated = true,
            tl::enums::DocumentAttribute::Video(v) => {
                video = true;
                round |= v.round_message;
                duration = duration.or(secs(v.duration));
            }
            tl::enums::DocumentAttribute::Audio(a) => {
                audio = true;
                voice |= a.voice;
                duration = duration.or(u32::try_from(a.duration).ok());
            }
            tl::enums::DocumentAttribute::Filename(f) if !f.file_name.is_empty() => {
                file_name = Some(f.file_name.clone());
            }
            _ => {}
        }
    }
    let mut set_ref = None;
    let kind = if let Some(s) = sticker {
        let (set, r) = match &s.stickerset {
            tl::enums::InputStickerSet::ShortName(n) => (
                Some(n.short_name.clone()),
                Some(StickerSetRef::ShortName(n.short_name.clone())),
            ),
            tl::enums::InputStickerSet::Id(i) => (
                None,
                Some(StickerSetRef::Id {
                    id: i.id,
                    access_hash: i.access_hash,
                }),
            ),
            _ => (None, None),
        };
        set_ref = r;
        let alt = s.alt.trim().to_string();
        let info = StickerInfo {
            set,
            emoji: (!alt.is_empty()).then(|| alt.clone()),
            name: alt,
        };
        return (
            Some(MediaInfo {
                kind: MediaKind::Sticker,
                unique_id: doc.id.to_string(),
                mime: (!mime.is_empty()).then_some(mime),
                size: u64::try_from(doc.size).ok(),
                duration_secs: duration,
                file_name,
                sticker: Some(info),
            }),
            set_ref,
        );
    } else if round {
        MediaKind::RoundVideo
    } else if voice {
        MediaKind::Voice
    } else if animated || mime == "image/gif" {
        MediaKind::Gif
    } else if video || mime.starts_with("video/") {
        MediaKind::Video
    } else if audio || mime.starts_with("audio/") {
        MediaKind::Audio
    } else {
        MediaKind::Document
    };
    (
        Some(MediaInfo {
            kind,
            unique_id: doc.id.to_string(),
            mime: (!mime.is_empty()).then_some(mime),
            size: u64::try_from(doc.size).ok(),
            duration_secs: duration,
            file_name,
            sticker: None,
        }),
        set_ref,
    )
}
