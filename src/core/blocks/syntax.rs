//! The syntax of a task-block reply: headings (`# «kind» #id`), the segments they open, and
//! code fences (whose contents are never headings). Pure helpers of the block parser.

use super::block_kind;
use crate::core::model::MessageId;

// ---------------------------------------------------------------------------------------------
// Headings and segments

/// The message id after a heading's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdPart<'a> {
    Absent,
    Valid(MessageId),
    /// Digits that do not fit an `i64`.
    Invalid(&'a str),
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Heading<'a> {
    /// Between the guillemets (or the bare word), trimmed, as written.
    pub(super) kind: &'a str,
    pub(super) id: IdPart<'a>,
    /// Anything after the kind and id (never for bare headings).
    pub(super) trailing: &'a str,
    /// Written without guillemets.
    pub(super) bare: bool,
}

/// A heading (none for text before the first one) and the body up to the next heading.
pub(super) struct Segment<'a> {
    pub(super) heading: Option<Heading<'a>>,
    pub(super) body: &'a str,
}

/// Cuts the reply at heading lines outside code fences. The first segment (maybe empty) is the
/// text before the first heading; a reply without headings is one segment.
pub(super) fn segments(text: &str) -> Vec<Segment<'_>> {
    let lines = lines_of(text);
    let fences: Vec<Option<Fence>> = lines.iter().map(|line| fence(line.text)).collect();
    let in_code = code_mask(&fences);
    let mut segments = Vec::new();
    let mut heading = None;
    let mut body_start = 0;
    for (line, &code) in lines.iter().zip(&in_code) {
        if code {
            continue;
        }
        if let Some(next) = parse_heading(line.text) {
            segments.push(Segment {
                heading: heading.take(),
                body: text.get(body_start..line.start).unwrap_or(""),
            });
            heading = Some(next);
            body_start = line.next;
        }
    }
    segments.push(Segment {
        heading,
        body: text.get(body_start..).unwrap_or(""),
    });
    segments
}

pub(super) fn parse_heading(line: &str) -> Option<Heading<'_>> {
    let unindented = line.trim_start_matches(' ');
    if line.len() - unindented.len() > 3 {
        return None;
    }
    let rest = unindented.strip_prefix('#')?;
    let after_hash = rest.trim_start_matches([' ', '\t']);
    if let Some(inner) = after_hash.strip_prefix('«') {
        let (kind, after) = inner.split_once('»')?;
        let (id, trailing) = parse_id(after);
        return Some(Heading {
            kind: kind.trim(),
            id,
            trailing,
            bare: false,
        });
    }
    if after_hash.len() == rest.len() {
        return None; // `#word` is a hashtag, not a heading
    }
    let (word, after) = after_hash
        .split_once([' ', '\t'])
        .unwrap_or((after_hash, ""));
    block_kind(word)?;
    let (id, trailing) = parse_id(after);
    if !trailing.is_empty() {
        return None; // `# wait for it` is text
    }
    Some(Heading {
        kind: word,
        id,
        trailing,
        bare: true,
    })
}

/// Splits what follows a heading's kind into a message id (`1234` or `#1234`) and the rest.
pub(super) fn parse_id(after: &str) -> (IdPart<'_>, &str) {
    let after = after.trim();
    if after.is_empty() {
        return (IdPart::Absent, "");
    }
    let (token, trailing) = match after.split_once(char::is_whitespace) {
        Some((token, trailing)) => (token, trailing.trim()),
        None => (after, ""),
    };
    let digits = token.strip_prefix('#').unwrap_or(token);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return (IdPart::Absent, after);
    }
    match digits.parse::<i64>() {
        Ok(id) => (IdPart::Valid(MessageId(id)), trailing),
        Err(_) => (IdPart::Invalid(token), trailing),
    }
}

/// One line of the reply: byte offsets and its text without the line ending.
pub(super) struct Line<'a> {
    pub(super) start: usize,
    /// Offset of the next line (just past this line's `\n`).
    pub(super) next: usize,
    pub(super) text: &'a str,
}

pub(super) fn lines_of(text: &str) -> Vec<Line<'_>> {
    let mut lines = Vec::new();
    let mut start = 0;
    for raw in text.split_inclusive('\n') {
        let next = start + raw.len();
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        lines.push(Line {
            start,
            next,
            text: line,
        });
        start = next;
    }
    lines
}

// ---------------------------------------------------------------------------------------------
// Code fences

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fence {
    pub(super) ch: u8,
    pub(super) len: usize,
    pub(super) has_info: bool,
}

impl Fence {
    /// Whether `self` (a fence line) closes a block opened by `open`.
    pub(super) fn closes(self, open: Fence) -> bool {
        self.ch == open.ch && self.len >= open.len && !self.has_info
    }
}

/// A fence line: up to three spaces, then at least three backticks or tildes, then an
/// optional info string (which for backticks may not contain a backtick).
pub(super) fn fence(line: &str) -> Option<Fence> {
    let unindented = line.trim_start_matches(' ');
    if line.len() - unindented.len() > 3 {
        return None;
    }
    let ch = *unindented.as_bytes().first()?;
    if ch != b'`' && ch != b'~' {
        return None;
    }
    let len = unindented.bytes().take_while(|&b| b == ch).count();
    if len < 3 {
        return None;
    }
    let info = unindented.get(len..).unwrap_or("").trim();
    if ch == b'`' && info.contains('`') {
        return None;
    }
    Some(Fence {
        ch,
        len,
        has_info: !info.is_empty(),
    })
}

/// Which lines are inside a fenced code block (fence lines included). Unlike CommonMark, a
/// fence that is never closed opens nothing: a stray fence must not hide every later heading.
pub(super) fn code_mask(fences: &[Option<Fence>]) -> Vec<bool> {
    let mut mask = vec![false; fences.len()];
    // Per fence char, the shortest opening length known to have no closing fence after the
    // current position: openers at least that long are skipped without searching again. This
    // keeps adversarial runs of unclosed fences from taking quadratic time.
    let mut unclosable: [Option<usize>; 2] = [None, None];
    let mut i = 0;
    while i < fences.len() {
        if let Some(Some(open)) = fences.get(i) {
            let slot = usize::from(open.ch == b'~');
            let worth_searching = unclosable
                .get(slot)
                .copied()
                .flatten()
                .is_none_or(|min| open.len < min);
            if worth_searching {
                let close = fences
                    .iter()
                    .enumerate()
                    .skip(i + 1)
                    .find(|(_, f)| f.is_some_and(|f| f.closes(*open)))
                    .map(|(j, _)| j);
                match close {
                    Some(j) => {
                        if let Some(span) = mask.get_mut(i..=j) {
                            span.fill(true);
                        }
                        i = j + 1;
                        continue;
                    }
                    None => {
                        if let Some(known) = unclosable.get_mut(slot) {
                            *known = Some(open.len);
                        }
                    }
                }
            }
        }
        i += 1;
    }
    mask
}

/// Removes a fence wrapping the whole (trimmed) reply: ```` ```markdown ````, ```` ```md ````
/// or a bare fence, closed on the last line, with any fences inside it paired. A wrapper that
/// is never closed (a reply cut off by a token limit) is removed too.
pub(super) fn unwrap_fence(text: &str) -> &str {
    let Some((first, rest)) = text.split_once('\n') else {
        return text;
    };
    let first = first.trim_end_matches('\r');
    let Some(open) = fence(first) else {
        return text;
    };
    let info = first.trim().trim_start_matches(open.ch as char).trim();
    let wrapper =
        info.is_empty() || info.eq_ignore_ascii_case("markdown") || info.eq_ignore_ascii_case("md");
    if !wrapper {
        return text;
    }
    let (inner, last) = rest.rsplit_once('\n').unwrap_or(("", rest));
    if fence(last.trim_end_matches('\r')).is_some_and(|f| f.closes(open)) {
        let inner_fences: Vec<Option<Fence>> = lines_of(inner)
            .iter()
            .map(|line| fence(line.text))
            .collect();
        let mask = code_mask(&inner_fences);
        let stray_close = inner_fences
            .iter()
            .zip(&mask)
            .any(|(f, &code)| !code && f.is_some_and(|f| f.closes(open)));
        return if stray_close { text } else { inner };
    }
    let closed_later = lines_of(rest)
        .iter()
        .any(|line| fence(line.text).is_some_and(|f| f.closes(open)));
    if closed_later { text } else { rest }
}
