//! Splitting a long send into Telegram-sized messages (4,096 UTF-16 units) at paragraph,
//! line, sentence and word boundaries, in that order of preference.

use super::MAX_JOINER_BACKOFF;

// ---------------------------------------------------------------------------------------------
// Splitting

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
