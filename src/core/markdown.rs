//! Outbound formatting: turns the Markdown a model writes into Telegram's plain text plus
//! formatting entities (offsets and lengths in UTF-16 code units).
//! It owns the dialect: CommonMark with strikethrough, `__x__` as italic (Telegram habit),
//! `||x||` spoilers, headings as bold lines, lists as `- item` / `1. item` lines, and line
//! breaks kept exactly as written (a soft break is a `\n`, paragraphs are separated by one
//! blank line). It must not use grammers' own markdown/html parsers (they drop newlines and
//! panic on malformed mention links), must not do I/O, and must never panic: malformed
//! markup stays literal. Pure: the MTProto adapter turns [`Entity`] into grammers' TL entities right before
//! sending (`adapters::mtproto::format`); `core::blocks` measures a send by [`rendered_text`].

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Nested list items are indented two spaces per level, up to this many levels.
const MAX_INDENT: usize = 6;

/// Converts model Markdown into Telegram text and entities (UTF-16 offsets).
///
/// Never panics. If the rendering would leave no visible text at all (say, `[](x)`), the
/// input is returned verbatim with no entities, so nothing the model wrote is lost.
/// The text Telegram shows for `markdown` (what its length limit counts), without entities.
pub fn rendered_text(markdown: &str) -> String {
    render(markdown).0
}

/// The rendered text and each entity's span as (offset, length) in UTF-16 code units, in
/// the order [`to_telegram`] gives them: what the `markdown` fuzz target checks.
#[cfg(feature = "fuzzing")]
pub(crate) fn entity_spans(markdown: &str) -> (String, Vec<(i32, i32)>) {
    let (text, entities) = render(markdown);
    (
        text,
        entities.iter().map(|e| (e.offset, e.length)).collect(),
    )
}

pub fn render(markdown: &str) -> (String, Vec<Entity>) {
    let events = merged_events(markdown);
    let markers = spoiler_markers(&events);
    let mut r = Renderer::default();
    for (index, (event, range)) in events.iter().enumerate() {
        r.event(index, event, range, markdown, &markers);
    }
    let (text, mut entities) = r.finish();
    if text.trim().is_empty() {
        return (markdown.to_string(), Vec::new());
    }
    // Telegram wants entities ordered by offset; an outer entity before an inner one.
    entities.sort_by_key(|e| (e.offset, std::cmp::Reverse(e.length)));
    (text, entities)
}

/// UTF-16 length of a string, as Telegram counts offsets and lengths.
pub fn utf16_len(s: &str) -> i32 {
    i32::try_from(s.encode_utf16().count()).unwrap_or(i32::MAX)
}

/// Parser events with adjacent text events merged (so `||` split across events is seen).
fn merged_events(markdown: &str) -> Vec<(Event<'_>, Range<usize>)> {
    let parser = Parser::new_ext(markdown, Options::ENABLE_STRIKETHROUGH).into_offset_iter();
    let mut out: Vec<(Event<'_>, Range<usize>)> = Vec::new();
    for (event, range) in parser {
        if let Event::Text(text) = &event
            && let Some((Event::Text(prev), prev_range)) = out.last_mut()
        {
            let mut joined = prev.to_string();
            joined.push_str(text);
            *prev = joined.into();
            prev_range.end = range.end;
            continue;
        }
        out.push((event, range));
    }
    out
}

/// Spoiler markers that pair up: `(event index, byte offset in that text event)`, in order.
/// Markers pair within one block; an odd one out stays literal.
fn spoiler_markers(events: &[(Event<'_>, Range<usize>)]) -> Vec<(usize, usize)> {
    let mut paired = Vec::new();
    let mut group: Vec<(usize, usize)> = Vec::new();
    let mut in_code = 0usize;
    let flush = |group: &mut Vec<(usize, usize)>, paired: &mut Vec<(usize, usize)>| {
        if group.len() % 2 == 1 {
            group.pop();
        }
        paired.append(group);
    };
    for (index, (event, _)) in events.iter().enumerate() {
        match event {
            Event::Start(tag) if is_block(tag) => {
                flush(&mut group, &mut paired);
                if matches!(tag, Tag::CodeBlock(_)) {
                    in_code += 1;
                }
            }
            Event::End(end) if is_block_end(end) => {
                flush(&mut group, &mut paired);
                if matches!(end, TagEnd::CodeBlock) {
                    in_code = in_code.saturating_sub(1);
                }
            }
            Event::Text(text) if in_code == 0 => {
                let mut from = 0;
                while let Some(pos) = text.get(from..).and_then(|rest| rest.find("||")) {
                    group.push((index, from + pos));
                    from += pos + 2;
                }
            }
            _ => {}
        }
    }
    flush(&mut group, &mut paired);
    paired
}

fn is_block(tag: &Tag<'_>) -> bool {
    !matches!(
        tag,
        Tag::Emphasis
            | Tag::Strong
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::Link { .. }
            | Tag::Image { .. }
    )
}

fn is_block_end(end: &TagEnd) -> bool {
    !matches!(
        end,
        TagEnd::Emphasis
            | TagEnd::Strong
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::Link
            | TagEnd::Image
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Bold,
    Italic,
    Strike,
    Spoiler,
    Code,
    Pre(String),
    TextUrl(String),
    Blockquote,
}

/// One formatting span of the rendered text (offset and length in UTF-16 code units).
#[derive(Debug)]
pub struct Entity {
    pub kind: Kind,
    pub offset: i32,
    pub length: i32,
}

/// What goes between two blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Sep {
    Line,
    Blank,
}

/// One open tag: the entity it will produce (if any) and where it started.
#[derive(Debug)]
struct Frame {
    kind: Option<Kind>,
    start: i32,
    /// Byte length of the output when a code block started (to trim its final newline).
    code_start: Option<usize>,
}

/// List state: the next number for ordered lists.
#[derive(Debug)]
struct ListState {
    next: Option<u64>,
}

#[derive(Debug, Default)]
struct Renderer {
    out: String,
    len16: i32,
    entities: Vec<Entity>,
    frames: Vec<Frame>,
    lists: Vec<ListState>,
    pending: Option<Sep>,
    /// Nothing written since the current block (or list item prefix) began.
    fresh: bool,
    spoiler: Option<i32>,
    in_code_block: usize,
    marker_cursor: usize,
}

impl Renderer {
    fn event(
        &mut self,
        index: usize,
        event: &Event<'_>,
        range: &Range<usize>,
        source: &str,
        markers: &[(usize, usize)],
    ) {
        match event {
            Event::Start(tag) => self.start(tag, range, source),
            Event::End(end) => self.end(end),
            Event::Text(text) => {
                if self.in_code_block > 0 {
                    self.write(text);
                } else {
                    self.text_with_spoilers(index, text, markers);
                }
            }
            Event::Code(code) => {
                self.flush();
                let start = self.len16;
                self.write(code);
                self.push_entity(Kind::Code, start);
            }
            Event::InlineMath(s) | Event::DisplayMath(s) => self.write(s),
            // The model wrote it; keep it verbatim rather than silently dropping it.
            Event::Html(s) | Event::InlineHtml(s) => self.write(s),
            Event::FootnoteReference(s) => {
                self.write("[^");
                self.write(s);
                self.write("]");
            }
            Event::SoftBreak | Event::HardBreak => self.write("\n"),
            Event::Rule => {
                self.block_sep(Sep::Blank);
                self.write("———");
            }
            Event::TaskListMarker(done) => self.write(if *done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: &Tag<'_>, range: &Range<usize>, source: &str) {
        let in_list = !self.lists.is_empty();
        let para = if in_list { Sep::Line } else { Sep::Blank };
        let kind = match tag {
            Tag::Paragraph | Tag::MetadataBlock(_) => {
                self.block_sep(para);
                None
            }
            Tag::HtmlBlock => {
                // Raw HTML lines end in '\n'; the last one is trimmed at the end, like code.
                self.block_sep(para);
                let start = self.len16;
                self.frames.push(Frame {
                    kind: None,
                    start,
                    code_start: Some(self.out.len()),
                });
                return;
            }
            Tag::Heading { .. } => {
                self.block_sep(para);
                self.begin_block();
                Some(Kind::Bold)
            }
            Tag::BlockQuote(_) => {
                self.block_sep(para);
                self.begin_block();
                Some(Kind::Blockquote)
            }
            Tag::CodeBlock(kind) => {
                self.block_sep(para);
                self.begin_block();
                self.in_code_block += 1;
                let language = match kind {
                    CodeBlockKind::Fenced(info) => {
                        info.split_whitespace().next().unwrap_or("").to_string()
                    }
                    CodeBlockKind::Indented => String::new(),
                };
                let start = self.len16;
                self.frames.push(Frame {
                    kind: Some(Kind::Pre(language)),
                    start,
                    code_start: Some(self.out.len()),
                });
                return;
            }
            Tag::List(first) => {
                self.block_sep(para);
                self.lists.push(ListState { next: *first });
                None
            }
            Tag::Item => {
                if !self.out.is_empty() {
                    self.pending = Some(self.pending.map_or(Sep::Line, |p| p.max(Sep::Line)));
                }
                self.flush();
                let depth = self.lists.len().saturating_sub(1).min(MAX_INDENT);
                let mut prefix = "  ".repeat(depth);
                match self.lists.last_mut() {
                    Some(ListState { next: Some(n) }) => {
                        prefix.push_str(&format!("{n}. "));
                        *n = n.saturating_add(1);
                    }
                    _ => prefix.push_str("- "),
                }
                self.write(&prefix);
                self.fresh = true;
                None
            }
            Tag::Emphasis => Some(Kind::Italic),
            Tag::Strong => {
                // `__x__` is italic in Telegram's own dialect; `**x**` is bold.
                if source
                    .get(range.start..)
                    .is_some_and(|s| s.starts_with("__"))
                {
                    Some(Kind::Italic)
                } else {
                    Some(Kind::Bold)
                }
            }
            Tag::Strikethrough => Some(Kind::Strike),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                let url = dest_url.trim();
                (!url.is_empty()).then(|| Kind::TextUrl(url.to_string()))
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Table(_)
            | Tag::TableHead
            | Tag::TableRow
            | Tag::TableCell => {
                self.block_sep(para);
                None
            }
            Tag::Superscript | Tag::Subscript => None,
        };
        if kind.is_some() {
            self.flush();
        }
        let start = self.len16;
        self.frames.push(Frame {
            kind,
            start,
            code_start: None,
        });
    }

    fn end(&mut self, end: &TagEnd) {
        match end {
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::CodeBlock => {
                self.in_code_block = self.in_code_block.saturating_sub(1);
            }
            _ => {}
        }
        if is_block_end(end) {
            // A spoiler never crosses blocks (markers are paired per block).
            self.spoiler = None;
        }
        let Some(frame) = self.frames.pop() else {
            return;
        };
        if let Some(code_start) = frame.code_start
            && self.out.len() > code_start
            && self.out.ends_with('\n')
        {
            self.out.pop();
            self.len16 -= 1;
        }
        if let Some(kind) = frame.kind {
            self.push_entity(kind, frame.start);
        }
    }

    fn text_with_spoilers(&mut self, index: usize, text: &str, markers: &[(usize, usize)]) {
        let mut from = 0;
        while let Some(&(marker_index, pos)) = markers.get(self.marker_cursor) {
            if marker_index != index {
                break;
            }
            self.marker_cursor += 1;
            if pos < from || pos > text.len() {
                continue;
            }
            if let Some(chunk) = text.get(from..pos) {
                self.write(chunk);
            }
            from = pos + 2;
            match self.spoiler.take() {
                None => {
                    self.flush();
                    self.spoiler = Some(self.len16);
                }
                Some(start) => self.push_entity(Kind::Spoiler, start),
            }
        }
        if let Some(rest) = text.get(from..) {
            self.write(rest);
        }
    }

    /// Asks for a separator before the next block, unless this block is the first thing
    /// inside its parent (a paragraph inside a quote or right after a list prefix).
    fn block_sep(&mut self, sep: Sep) {
        if !self.fresh {
            self.pending = Some(self.pending.map_or(sep, |p| p.max(sep)));
        }
    }

    /// A block entity starts here: write the separator now so the entity starts after it.
    fn begin_block(&mut self) {
        self.flush();
        self.fresh = true;
    }

    fn flush(&mut self) {
        if let Some(sep) = self.pending.take()
            && !self.out.is_empty()
        {
            match sep {
                Sep::Line => self.raw("\n"),
                Sep::Blank => self.raw("\n\n"),
            }
        }
    }

    fn write(&mut self, s: &str) {
        if s.is_empty() {
            return;
        }
        self.flush();
        self.raw(s);
        self.fresh = false;
    }

    fn raw(&mut self, s: &str) {
        self.out.push_str(s);
        self.len16 = self.len16.saturating_add(utf16_len(s));
    }

    fn push_entity(&mut self, kind: Kind, start: i32) {
        let length = self.len16.saturating_sub(start);
        if length > 0 {
            self.entities.push(Entity {
                kind,
                offset: start,
                length,
            });
        }
    }

    fn finish(self) -> (String, Vec<Entity>) {
        (self.out, self.entities)
    }
}
