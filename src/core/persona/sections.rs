//! The raw side of a persona file: its text split into top-level level-1 headings (found with
//! pulldown-cmark, so `#` lines in code blocks, quotes or lists are not headings) and the
//! trimmed sections under them, with line numbers, before any field is validated. Called by
//! `validate`; the field rules read the [`Section`]s it makes.

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::report::Report;

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

/// The raw section tree: each heading with its title, key, line and trimmed value (the
/// text before the first heading is reported and ignored).
pub(super) fn raw_sections<'a>(
    src: &'a str,
    lines: &Lines,
    headings: &[RawHeading],
    report: &mut Report,
) -> Vec<Section<'a>> {
    // Text before the first heading.
    let preamble_end = headings.first().map_or(src.len(), |h| h.start);
    let preamble = src.get(..preamble_end).unwrap_or("");
    if let Some(pos) = preamble.find(|c: char| !c.is_whitespace()) {
        report.warning(
            lines.line_of(pos),
            "text before the first `#` heading is ignored".to_owned(),
        );
    }

    let mut sections = Vec::with_capacity(headings.len());
    for (i, h) in headings.iter().enumerate() {
        let value_end = headings.get(i + 1).map_or(src.len(), |n| n.start);
        let raw = src.get(h.end..value_end).unwrap_or("");
        let leading = raw.len() - raw.trim_start().len();
        let value = raw.trim();
        let line = lines.line_of(h.start);
        let title = h.title.split_whitespace().collect::<Vec<_>>().join(" ");
        sections.push(Section {
            key: title.to_lowercase(),
            title,
            line,
            value,
            value_line: if value.is_empty() {
                line
            } else {
                lines.line_of(h.end + leading)
            },
        });
    }
    sections
}
