//! The MTProto half of outbound formatting: `core::markdown` renders the model's Markdown into
//! text and entities; this turns them into grammers' TL entities right before sending. The
//! MTProto backend calls [`to_telegram`]; nothing else here.

use grammers_client::tl;

use crate::core::markdown::{Entity, Kind, render};

/// Converts model Markdown into Telegram text and entities (UTF-16 offsets).
///
/// Never panics. If the rendering would leave no visible text at all (say, `[](x)`), the
/// input is returned verbatim with no entities, so nothing the model wrote is lost.
pub fn to_telegram(markdown: &str) -> (String, Vec<tl::enums::MessageEntity>) {
    let (text, entities) = render(markdown);
    (text, entities.into_iter().map(into_tl).collect())
}

fn into_tl(e: Entity) -> tl::enums::MessageEntity {
    let (offset, length) = (e.offset, e.length);
    match e.kind {
        Kind::Bold => tl::types::MessageEntityBold { offset, length }.into(),
        Kind::Italic => tl::types::MessageEntityItalic { offset, length }.into(),
        Kind::Strike => tl::types::MessageEntityStrike { offset, length }.into(),
        Kind::Spoiler => tl::types::MessageEntitySpoiler { offset, length }.into(),
        Kind::Code => tl::types::MessageEntityCode { offset, length }.into(),
        Kind::Pre(language) => tl::types::MessageEntityPre {
            offset,
            length,
            language,
        }
        .into(),
        Kind::TextUrl(url) => tl::types::MessageEntityTextUrl {
            offset,
            length,
            url,
        }
        .into(),
        Kind::Blockquote => tl::types::MessageEntityBlockquote {
            collapsed: false,
            offset,
            length,
        }
        .into(),
    }
}
