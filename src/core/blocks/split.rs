//! Splitting a long send into Telegram-sized messages (4,096 UTF-16 units) at paragraph,
//! line, sentence and word boundaries, in that order of preference: the one splitting of
//! long sends (a model's sends at parse time, and every text the runtime sends, drafts and
//! notices to the owner included, through [`text_parts`]).

use super::MAX_JOINER_BACKOFF;
use crate::core::model::OutgoingText;

// ---------------------------------------------------------------------------------------------
// Splitting

/// Splits `text` into parts of at most `limit_utf16` UTF-16 code units, cutting at the last
/// paragraph boundary (blank line) that fits, else the last line break, else the last
/// whitespace, else hard at a `char` boundary (backing off a little so as not to separate an
/// emoji from its joiners or modifiers). The whitespace at each cut is dropped, so the parts
/// concatenate to the original modulo that whitespace. Text that fits is returned unchanged as
/// one part; blank text gives no parts; no part is blank. A part can exceed the limit only when
/// the limit is below 2 and a single `char` needs two units.
pub fn split_message(text: &str, limit_utf16: usize) -> Vec<String> {
    let limit = limit_utf16.max(1);
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.trim().is_empty() {
        let fit = fitting_prefix(rest, limit);
        if fit == rest.len() {
            parts.push(rest.to_owned());
            break;
        }
        let cut = choose_cut(rest, fit);
        let (head, tail) = rest.split_at(cut);
        let head = head.trim_end();
        if !head.is_empty() {
            parts.push(head.to_owned());
        }
        rest = tail.trim_start();
    }
    parts
}

/// Splits the Markdown `text` of a send into messages whose rendered text fits in `limit`
/// UTF-16 units, cutting as [`split_message`] does. Telegram's limit counts the rendered
/// text (Markdown markers and link targets do not count, list numbers do), so the text is
/// split only when its rendered text is over the limit, at a cut that shrinks until every
/// part's rendered text fits (down to an eighth of the limit). Text that fits is one part,
/// unchanged; blank text gives none. The one splitting of long sends: a model's sends, drafts
/// and notices to the owner (`text_parts`).
pub fn split_rendered(text: &str, limit: usize) -> Vec<String> {
    let rendered_len = |t: &str| utf16_len(&crate::core::markdown::rendered_text(t));
    if rendered_len(text) <= limit {
        return split_message(text, usize::MAX);
    }
    let floor = (limit / 8).max(1);
    let mut cut = limit.max(1);
    loop {
        let parts = split_message(text, cut);
        if cut <= floor || parts.iter().all(|p| rendered_len(p) <= limit) {
            return parts;
        }
        cut = (cut * 3 / 4).max(1);
    }
}

/// Length of `text` as Telegram counts it: UTF-16 code units.
pub fn utf16_len(text: &str) -> usize {
    text.chars().map(char::len_utf16).sum()
}

/// The messages `msg` takes at `limit` UTF-16 units each (as rendered): split exactly like a
/// model's long send ([`split_rendered`]: at a paragraph, a line, a space), the reply on the
/// first part only. The first part keeps the key and part `i` gets [`part_key`]`(key, i)`,
/// so a retry after a crash sends no part twice. Text that fits is `msg` itself, unchanged
/// (a blank text too: the caller refuses it).
pub fn text_parts(msg: &OutgoingText, limit: usize) -> Vec<OutgoingText> {
    let pieces = split_rendered(&msg.text, limit);
    if pieces.len() <= 1 {
        return vec![msg.clone()];
    }
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, text)| OutgoingText {
            chat: msg.chat,
            text,
            reply_to: if i == 0 { msg.reply_to } else { None },
            idempotency_key: part_key(msg.idempotency_key, i),
        })
        .collect()
}

/// The idempotency key of part `index` of a split text whose key is `key`: `key` itself for
/// the first part; for the others a stable mix of both, never zero and never `key`.
pub fn part_key(key: i64, index: usize) -> i64 {
    if index == 0 {
        return key;
    }
    // splitmix64 of the key and the index.
    let mut z = (key as u64) ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let mixed = z as i64;
    if mixed == 0 || mixed == key {
        key.wrapping_add(index as i64).max(1)
    } else {
        mixed
    }
}

/// Byte length of the longest prefix of `text` within `limit` UTF-16 units (at least one
/// char); `text.len()` exactly when the whole text fits (or is a single char).
pub(super) fn fitting_prefix(text: &str, limit: usize) -> usize {
    let mut units = 0;
    for (idx, c) in text.char_indices() {
        units += c.len_utf16();
        if units > limit {
            return if idx == 0 { c.len_utf8() } else { idx };
        }
    }
    text.len()
}

/// Where to cut `rest`, whose first `fit` bytes fit: the last paragraph break, else line break,
/// else whitespace at or before `fit` that leaves some text before it; else a hard cut.
pub(super) fn choose_cut(rest: &str, fit: usize) -> usize {
    let content_start = rest
        .find(|c: char| !c.is_whitespace())
        .unwrap_or(rest.len());
    let (mut paragraph, mut line, mut space) = (None, None, None);
    for (idx, c) in rest.char_indices() {
        if idx > fit {
            break;
        }
        if idx <= content_start {
            continue;
        }
        if c == '\n' {
            line = Some(idx);
            let next_line = rest
                .get(idx + 1..)
                .and_then(|after| after.split('\n').next())
                .unwrap_or("");
            if next_line.trim().is_empty() {
                paragraph = Some(idx);
            }
        } else if c.is_whitespace() {
            space = Some(idx);
        }
    }
    paragraph
        .or(line)
        .or(space)
        .unwrap_or_else(|| hard_cut(rest, fit))
}

/// `fit`, moved back a few chars if it would separate an emoji from a joiner, variation
/// selector, skin tone, keycap or combining mark.
pub(super) fn hard_cut(rest: &str, fit: usize) -> usize {
    let mut cut = fit;
    for _ in 0..MAX_JOINER_BACKOFF {
        let prev = rest.get(..cut).and_then(|s| s.chars().next_back());
        let next = rest.get(cut..).and_then(|s| s.chars().next());
        match (prev, next) {
            (Some(prev), Some(next)) if prev == '\u{200D}' || is_continuation(next) => {
                cut -= prev.len_utf8();
                if cut == 0 {
                    return fit;
                }
            }
            _ => return cut,
        }
    }
    fit
}

pub(super) fn is_continuation(c: char) -> bool {
    matches!(c,
        '\u{200D}'                      // zero-width joiner
        | '\u{FE00}'..='\u{FE0F}'       // variation selectors
        | '\u{0300}'..='\u{036F}'       // combining diacritics
        | '\u{20D0}'..='\u{20FF}'       // combining marks for symbols (keycap)
        | '\u{1F3FB}'..='\u{1F3FF}'     // skin tones
        | '\u{E0020}'..='\u{E007F}'     // tag sequences (subdivision flags)
    )
}
