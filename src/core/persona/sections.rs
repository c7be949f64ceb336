//! The raw side of a persona file: its text split into headings and their sections (with
//! line numbers), before any field is validated.

use super::*;

// ---------------------------------------------------------------------------
// Splitting into sections
// ---------------------------------------------------------------------------

/// Maps byte offsets of a `\n`-normalized text to 1-based lines.
pub(super) struct Lines {
    pub(super) starts: Vec<usize>,
}

impl Lines {
    pub(super) fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines { starts }
    }

    pub(super) fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

/// A level-1 heading at the top level of the document.
pub(super) struct RawHeading {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) title: String,
}

/// Finds the top-level level-1 headings (ATX and setext). Headings nested in
/// block quotes or lists, and `#` lines in code blocks or HTML blocks, are
/// not reported.
pub(super) fn find_headings(src: &str) -> Vec<RawHeading> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut current: Option<RawHeading> = None;
    for (event, range) in Parser::new_ext(src, Options::empty()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading {
                level: HeadingLevel::H1,
                ..
            }) if depth == 0 => {
                current = Some(RawHeading {
                    start: range.start,
                    end: range.end,
                    title: String::new(),
                });
                depth = 1;
            }
            Event::Start(_) => depth += 1,
            Event::End(TagEnd::Heading(HeadingLevel::H1)) if depth == 1 => {
                if let Some(h) = current.take() {
                    out.push(h);
                }
                depth = 0;
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = current.as_mut() {
                    h.title.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(h) = current.as_mut() {
                    h.title.push(' ');
                }
            }
            _ => {}
        }
    }
    out
}

/// One field: a heading and the raw Markdown under it.
pub(super) struct Section<'a> {
    /// Heading text, trimmed, inner whitespace collapsed, case kept.
    pub(super) title: String,
    /// `title` lower-cased: the key used for matching.
    pub(super) key: String,
    /// Line of the heading.
    pub(super) line: usize,
    /// Raw value, trimmed.
    pub(super) value: &'a str,
    /// Line where `value` starts (the heading line when empty).
    pub(super) value_line: usize,
}

impl<'a> Section<'a> {
    /// Non-blank value lines, trimmed, with their line numbers.
    pub(super) fn lines(&self) -> impl Iterator<Item = (usize, &'a str)> + use<'a> {
        let first = self.value_line;
        self.value
            .split('\n')
            .enumerate()
            .map(move |(i, l)| (first + i, l.trim()))
            .filter(|(_, l)| !l.is_empty())
    }
}
