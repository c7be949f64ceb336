//! Persona files: this module owns reading and validating the Markdown files
//! that describe each agent (`agents/*.md`) together with the role prompts
//! they reference (`prompts/*.md` along a search path), and turning them into
//! validated [`Persona`] values plus a list of [`Problem`]s (errors and
//! warnings, each naming the file and, where it can, the 1-based line). It
//! must not touch the network, must not write anything, and must never log or
//! report a phone number in full (use [`mask_phone`] / [`Persona::masked_phone`];
//! `Persona`'s `Debug` output is masked too). Its callers are the CLI `check`
//! command and the daemon at startup. All functions here do blocking
//! filesystem reads; async callers should run them inside
//! `tokio::task::spawn_blocking`.
//!
//! # Format in short
//!
//! A persona file is a Markdown document whose level-1 headings (`# Agent
//! Name`, or setext `Agent Name` underlined with `===`) name fields. A
//! field's value is the raw Markdown source between its heading and the next
//! level-1 heading, trimmed; sub-headings, lists, emphasis and code blocks are
//! kept verbatim, and `#` lines inside code blocks, block quotes or lists are
//! not field headings. Heading names are compared after trimming, collapsing
//! whitespace and ignoring case. See `docs/persona-format.md` for the
//! operator-facing description of every field.
//!
//! # Entry points
//!
//! * [`load_dir`] reads every `*.md` file directly inside the agents
//!   directory (sorted by file name, dot-files ignored) and returns a
//!   [`LoadReport`] with one [`PersonaEntry`] per file.
//! * [`parse_persona`] validates one file's already-read text (it still reads
//!   role prompt files).
//! * [`apply_placeholders`] expands `{{char}}`, `{{user}}` and friends.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Largest persona or role prompt file accepted, in bytes (256 KiB).
///
/// A file of exactly this size is accepted; one byte more is an error. The
/// size is checked from the file's metadata before its content is read.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Longest accepted agent name, in characters (Unicode scalar values).
pub const MAX_AGENT_NAME_CHARS: usize = 64;

/// Agent names that cannot be used because the daemon uses them itself
/// (compared ignoring ASCII case).
pub const RESERVED_AGENT_NAMES: &[&str] = &["media"];

/// One sticker named in an `# Agent Stickers` line (`SET :: NAME`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StickerRef {
    /// Short name of the sticker set (the part after `t.me/addstickers/`).
    pub set: String,
    /// Name of the sticker inside the set, as written.
    pub name: String,
}

/// A role prompt that was found along the prompt search path and read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolePrompt {
    /// The name as listed under `# Role Prompt` (without `.md`).
    pub name: String,
    /// The file it was read from (the first prompt directory that had it).
    pub path: PathBuf,
    /// The file's content, line endings normalized to `\n`, trimmed.
    pub text: String,
}

/// A validated persona: only produced for files without errors.
///
/// Text values (`instructions`, `extra` values) are the raw Markdown source
/// of the field with line endings normalized to `\n`, trimmed at both ends.
/// Placeholders are *not* expanded here; see [`apply_placeholders`].
///
/// The `Debug` implementation masks the phone number.
#[derive(Clone)]
pub struct Persona {
    /// `# Agent Name`: a valid identifier (see [`validate_agent_name`]).
    pub name: String,
    /// `# Agent Phone`, trimmed, exactly as written. Never log it in full;
    /// use [`Persona::masked_phone`].
    pub phone: String,
    /// `# Agent Instructions`, raw Markdown.
    pub instructions: String,
    /// `# Role Prompt` entries, in the order listed (duplicates dropped).
    pub role_prompts: Vec<RolePrompt>,
    /// `# Agent Sticker Sets` (then legacy `# Agent Sticker Set`) short
    /// names, in order, duplicates dropped.
    pub sticker_sets: Vec<String>,
    /// `# Agent Stickers` entries, in order, duplicates dropped.
    pub stickers: Vec<StickerRef>,
    /// `# Agent Timezone`, resolved from the bundled time zone database.
    pub timezone: Option<jiff::tz::TimeZone>,
    /// `# Agent Timezone` as written (an IANA name).
    pub timezone_name: Option<String>,
    /// `# Typing Speed` in characters per second (finite, greater than 0).
    pub typing_speed: Option<f64>,
    /// `# Start Typing Delay` in seconds (finite, 0 or more).
    pub start_typing_delay: Option<f64>,
    /// `# LLM Model`: a model name (one line).
    pub llm_model: Option<String>,
    /// `# LLM`: a provider, a model or `provider:model` (one line, checked with
    /// `llm::provider::resolve`), as in the original's newer persona files.
    pub llm: Option<String>,
    /// `true` when a `# Disabled` heading is present and its value is not
    /// `false`, `no` or `0`.
    pub disabled: bool,
    /// `true` when a `# Allow Clear Conversation` heading is present (same values as
    /// `Disabled`): the model may then delete a direct chat's history.
    pub allow_clear_conversation: bool,
    /// The `# Group …` headings, `# Agent Nicknames` and `# Agent Description` (see
    /// docs/groups.md), with defaults for the ones not given.
    pub group: crate::core::group::settings::GroupSettings,
    /// Headings this version does not know, keyed by the heading as written
    /// (trimmed, inner whitespace collapsed), valued by their raw Markdown.
    pub extra: BTreeMap<String, String>,
    /// The persona file this was read from.
    pub source: PathBuf,
}

impl Persona {
    /// The phone number with all but the leading `+`, the first 4 digits and
    /// the last 2 digits replaced by `*` (for example `+1234*****01`). Safe
    /// to log.
    pub fn masked_phone(&self) -> String {
        mask_phone(&self.phone)
    }

    /// The texts of all role prompts in order, separated by a blank line.
    /// Empty when the persona has no role prompt.
    pub fn role_prompt_text(&self) -> String {
        let texts: Vec<&str> = self.role_prompts.iter().map(|p| p.text.as_str()).collect();
        texts.join("\n\n")
    }
}

impl fmt::Debug for Persona {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Persona")
            .field("name", &self.name)
            .field("phone", &self.masked_phone())
            .field("instructions", &self.instructions)
            .field("role_prompts", &self.role_prompts)
            .field("sticker_sets", &self.sticker_sets)
            .field("stickers", &self.stickers)
            .field("timezone_name", &self.timezone_name)
            .field("typing_speed", &self.typing_speed)
            .field("start_typing_delay", &self.start_typing_delay)
            .field("llm_model", &self.llm_model)
            .field("llm", &self.llm)
            .field("disabled", &self.disabled)
            .field("allow_clear_conversation", &self.allow_clear_conversation)
            .field("extra", &self.extra)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// How bad a [`Problem`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Severity {
    /// The file is unusable.
    Error,
    /// Worth fixing, but the file is still usable.
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// One finding about a persona file.
///
/// Displays as `path:line: error: message`, or `path: warning: message`
/// when there is no line. Messages never contain a full phone number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The persona file the problem belongs to (also for problems found in
    /// the role prompt files it references).
    pub file: PathBuf,
    /// 1-based line in `file`, when the problem has one.
    pub line: Option<usize>,
    /// Error or warning.
    pub severity: Severity,
    /// Human-readable description, without the file, line or severity.
    pub message: String,
}

impl Problem {
    /// Whether this is an error (makes the file unusable).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(
                f,
                "{}:{}: {}: {}",
                self.file.display(),
                line,
                self.severity,
                self.message
            ),
            None => write!(
                f,
                "{}: {}: {}",
                self.file.display(),
                self.severity,
                self.message
            ),
        }
    }
}

/// The outcome for one persona file.
#[derive(Clone, Debug)]
pub struct PersonaEntry {
    /// The persona file.
    pub path: PathBuf,
    /// The agent name, when the file declares a valid one (even if the file
    /// is unusable for other reasons).
    pub name: Option<String>,
    /// The validated persona; `Some` only when `problems` has no error.
    pub persona: Option<Persona>,
    /// All errors and warnings of the file, ordered by line (problems
    /// without a line first).
    pub problems: Vec<Problem>,
}

impl PersonaEntry {
    /// Whether the file produced a persona (it has no errors).
    pub fn is_usable(&self) -> bool {
        self.persona.is_some()
    }

    /// Number of error problems.
    pub fn error_count(&self) -> usize {
        self.problems.iter().filter(|p| p.is_error()).count()
    }

    /// Number of warning problems.
    pub fn warning_count(&self) -> usize {
        self.problems.len() - self.error_count()
    }
}

/// Result of [`load_dir`]: one entry per persona file, sorted by file name.
#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    /// One entry per `*.md` file of the agents directory.
    pub entries: Vec<PersonaEntry>,
}

impl LoadReport {
    /// All usable personas, including disabled ones, in file name order.
    pub fn usable(&self) -> impl Iterator<Item = &Persona> {
        self.entries.iter().filter_map(|e| e.persona.as_ref())
    }

    /// Usable personas that are not disabled, in file name order.
    pub fn active(&self) -> impl Iterator<Item = &Persona> {
        self.usable().filter(|p| !p.disabled)
    }

    /// Consumes the report, keeping the usable personas (including disabled
    /// ones) in file name order.
    pub fn into_usable(self) -> Vec<Persona> {
        self.entries.into_iter().filter_map(|e| e.persona).collect()
    }

    /// Every problem of every file, in file order then line order.
    pub fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.entries.iter().flat_map(|e| e.problems.iter())
    }

    /// Total number of errors.
    pub fn error_count(&self) -> usize {
        self.entries.iter().map(PersonaEntry::error_count).sum()
    }

    /// Total number of warnings.
    pub fn warning_count(&self) -> usize {
        self.entries.iter().map(PersonaEntry::warning_count).sum()
    }

    /// Whether at least one persona file is unusable.
    pub fn has_unusable(&self) -> bool {
        self.entries.iter().any(|e| !e.is_usable())
    }
}

/// Validates one persona file whose text has already been read.
///
/// `path` is only used to label problems and as [`Persona::source`]. Role
/// prompt files are read here, from `prompt_dirs` in order. All problems of
/// the file are collected; the returned entry has a persona only if none of
/// them is an error. A leading byte-order mark is ignored and line endings
/// are normalized to `\n` (line numbers are unaffected). Duplicate agent
/// names across files are checked by the loader's `load_dir`, not here. Role prompts are
/// read through `files`.
pub fn parse_persona_with(
    path: &Path,
    source: &str,
    prompt_dirs: &[PathBuf],
    files: &dyn ReadText,
) -> PersonaEntry {
    parse_persona_inner(path, source, prompt_dirs, files).0
}

/// Expands the placeholders of a persona or role prompt text.
///
/// `{{AGENT_NAME}}`, `{AGENT_NAME}`, `{{char}}`, `{char}`, `{{character}}`
/// and `{character}` become `agent_name`; `{{user}}` and `{user}` become
/// `user`. Matching is case-sensitive. The text is scanned once from left to
/// right and, at each position, double-brace forms are tried before
/// single-brace ones, so `{{char}}` never leaves stray braces. Inserted text
/// is not scanned again: a user called `{char}` stays `{char}`.
pub fn apply_placeholders(text: &str, agent_name: &str, user: &str) -> String {
    // Longest forms first, so that a double-brace form wins over the
    // single-brace form nested inside it.
    let table: [(&str, &str); 8] = [
        ("{{AGENT_NAME}}", agent_name),
        ("{{character}}", agent_name),
        ("{{char}}", agent_name),
        ("{{user}}", user),
        ("{AGENT_NAME}", agent_name),
        ("{character}", agent_name),
        ("{char}", agent_name),
        ("{user}", user),
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find('{') {
        out.push_str(&rest[..pos]);
        rest = &rest[pos..];
        match table.iter().find(|(token, _)| rest.starts_with(token)) {
            Some((token, replacement)) => {
                out.push_str(replacement);
                rest = &rest[token.len()..];
            }
            None => {
                out.push('{');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Masks a phone number for logs: keeps a leading `+`, the first 4 digits
/// and the last 2 digits, and replaces every other digit by `*`; other
/// characters (spaces, dashes) are dropped. Numbers with 6 digits or fewer
/// are masked completely. `+12345678901` becomes `+1234*****01`.
pub fn mask_phone(phone: &str) -> String {
    let digits: Vec<char> = phone.chars().filter(char::is_ascii_digit).collect();
    let plus = if phone.trim_start().starts_with('+') {
        "+"
    } else {
        ""
    };
    let n = digits.len();
    if n <= 6 {
        return format!("{plus}{}", "*".repeat(n));
    }
    let head: String = digits[..4].iter().collect();
    let tail: String = digits[n - 2..].iter().collect();
    format!("{plus}{head}{}{tail}", "*".repeat(n - 6))
}

/// Masks, as [`mask_phone`] does, every run of text that looks like a phone number: 7 or
/// more digits, optionally after a `+`, with spaces, dashes, dots or parentheses between
/// them. Shorter numbers (line numbers, counts, limits) are left alone.
pub fn redact_phones(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let starts =
            c.is_ascii_digit() || (c == '+' && chars.get(i + 1).is_some_and(char::is_ascii_digit));
        if !starts {
            out.push(c);
            i += 1;
            continue;
        }
        let mut end = i + 1;
        let mut j = i + 1;
        while let Some(&d) = chars.get(j) {
            if d.is_ascii_digit() {
                end = j + 1;
            } else if !matches!(d, ' ' | '-' | '.' | '(' | ')') {
                break;
            }
            j += 1;
        }
        let run: String = chars[i..end].iter().collect();
        if run.chars().filter(char::is_ascii_digit).count() >= 7 {
            out.push_str(&mask_phone(&run));
        } else {
            out.push_str(&run);
        }
        i = end;
    }
    out
}

/// Checks that `name` can be used as an agent identifier (it names state
/// directories and appears in logs). Returns the reason when it cannot:
/// empty, longer than [`MAX_AGENT_NAME_CHARS`] characters, more than one
/// line, containing `/`, `\`, NUL or another control character, `.` or
/// `..`, or reserved ([`RESERVED_AGENT_NAMES`], ignoring ASCII case).
pub fn validate_agent_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".to_owned());
    }
    if name.contains('\n') {
        return Err("it must be a single line".to_owned());
    }
    if name.chars().count() > MAX_AGENT_NAME_CHARS {
        return Err(format!(
            "it is longer than {MAX_AGENT_NAME_CHARS} characters"
        ));
    }
    if name.contains('/') || name.contains('\\') {
        return Err("it must not contain `/` or `\\`".to_owned());
    }
    if name.chars().any(char::is_control) {
        return Err("it must not contain NUL or other control characters".to_owned());
    }
    if name == "." || name == ".." {
        return Err("it must not be `.` or `..`".to_owned());
    }
    if let Some(reserved) = RESERVED_AGENT_NAMES
        .iter()
        .find(|r| r.eq_ignore_ascii_case(name))
    {
        return Err(format!("`{reserved}` is reserved"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Reading files
// ---------------------------------------------------------------------------

/// Why a file could not be turned into text.
#[derive(Debug)]
pub enum ReadError {
    Io(io::Error),
    TooLarge(u64),
    InvalidUtf8 { line: usize, offset: usize },
}

/// Reads the text files a persona names (its role prompts). The persona loader implements
/// it with the store's safe reader; the core never touches the disk itself.
pub trait ReadText {
    fn read_text(&self, path: &Path) -> Result<String, ReadError>;
}

impl ReadError {
    pub(crate) fn line(&self) -> Option<usize> {
        match self {
            ReadError::InvalidUtf8 { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// Describes the error; `what` names the file ("file", or "role prompt
    /// file `x`"); `with_line` adds the line of an invalid UTF-8 byte.
    pub(crate) fn describe(&self, what: &str, with_line: bool) -> String {
        match self {
            ReadError::Io(e) => format!("cannot read {what}: {e}"),
            ReadError::TooLarge(len) => {
                format!("{what} is {len} bytes, over the {MAX_FILE_BYTES}-byte (256 KiB) limit")
            }
            // A persona file's problem already carries this line; a role
            // prompt's problem carries the line of the persona file instead.
            ReadError::InvalidUtf8 { line, offset } if with_line => format!(
                "{what} is not valid UTF-8 (first invalid byte on line {line}, byte offset {offset})"
            ),
            ReadError::InvalidUtf8 { offset, .. } => {
                format!("{what} is not valid UTF-8 (first invalid byte at byte offset {offset})")
            }
        }
    }
}

/// 1-based line of byte `offset`, counting `\n`, `\r\n` and a lone `\r` as
/// line endings (as CommonMark does).
pub(crate) fn line_at_byte(bytes: &[u8], offset: usize) -> usize {
    let prefix = bytes.get(..offset).unwrap_or(bytes);
    let endings = prefix
        .iter()
        .enumerate()
        .filter(|&(i, &b)| b == b'\n' || (b == b'\r' && prefix.get(i + 1) != Some(&b'\n')))
        .count();
    endings + 1
}

/// Drops a leading byte-order mark and turns `\r\n` and lone `\r` into `\n`.
/// Line numbers are unchanged.
fn normalize(text: &str) -> Cow<'_, str> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.contains('\r') {
        Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        Cow::Borrowed(text)
    }
}

// ---------------------------------------------------------------------------
// Splitting into sections
// ---------------------------------------------------------------------------

/// Maps byte offsets of a `\n`-normalized text to 1-based lines.
struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines { starts }
    }

    fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

/// A level-1 heading at the top level of the document.
struct RawHeading {
    start: usize,
    end: usize,
    title: String,
}

/// Finds the top-level level-1 headings (ATX and setext). Headings nested in
/// block quotes or lists, and `#` lines in code blocks or HTML blocks, are
/// not reported.
fn find_headings(src: &str) -> Vec<RawHeading> {
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
struct Section<'a> {
    /// Heading text, trimmed, inner whitespace collapsed, case kept.
    title: String,
    /// `title` lower-cased: the key used for matching.
    key: String,
    /// Line of the heading.
    line: usize,
    /// Raw value, trimmed.
    value: &'a str,
    /// Line where `value` starts (the heading line when empty).
    value_line: usize,
}

impl<'a> Section<'a> {
    /// Non-blank value lines, trimmed, with their line numbers.
    fn lines(&self) -> impl Iterator<Item = (usize, &'a str)> + use<'a> {
        let first = self.value_line;
        self.value
            .split('\n')
            .enumerate()
            .map(move |(i, l)| (first + i, l.trim()))
            .filter(|(_, l)| !l.is_empty())
    }
}

// ---------------------------------------------------------------------------
// Fields
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Field {
    Name,
    Phone,
    Instructions,
    RolePrompt,
    StickerSets,
    StickerSetLegacy,
    Stickers,
    Timezone,
    TypingSpeed,
    StartTypingDelay,
    LlmModel,
    Llm,
    Disabled,
    AllowClearConversation,
    GroupTriggerMode,
    GroupConfidenceThreshold,
    GroupInterjectThreshold,
    Nicknames,
    Description,
    GroupReplyToBots,
    GroupMaxShare,
    GroupCooldown,
    GroupMaxPlansPerHour,
    GroupClassifierModel,
}

impl Field {
    const ALL: [Field; 24] = [
        Field::Name,
        Field::Phone,
        Field::Instructions,
        Field::RolePrompt,
        Field::StickerSets,
        Field::StickerSetLegacy,
        Field::Stickers,
        Field::Timezone,
        Field::TypingSpeed,
        Field::StartTypingDelay,
        Field::LlmModel,
        Field::Llm,
        Field::Disabled,
        Field::AllowClearConversation,
        Field::GroupTriggerMode,
        Field::GroupConfidenceThreshold,
        Field::GroupInterjectThreshold,
        Field::Nicknames,
        Field::Description,
        Field::GroupReplyToBots,
        Field::GroupMaxShare,
        Field::GroupCooldown,
        Field::GroupMaxPlansPerHour,
        Field::GroupClassifierModel,
    ];

    /// The canonical heading text.
    fn heading(self) -> &'static str {
        match self {
            Field::Name => "Agent Name",
            Field::Phone => "Agent Phone",
            Field::Instructions => "Agent Instructions",
            Field::RolePrompt => "Role Prompt",
            Field::StickerSets => "Agent Sticker Sets",
            Field::StickerSetLegacy => "Agent Sticker Set",
            Field::Stickers => "Agent Stickers",
            Field::Timezone => "Agent Timezone",
            Field::TypingSpeed => "Typing Speed",
            Field::StartTypingDelay => "Start Typing Delay",
            Field::LlmModel => "LLM Model",
            Field::Llm => "LLM",
            Field::Disabled => "Disabled",
            Field::AllowClearConversation => "Allow Clear Conversation",
            Field::GroupTriggerMode => "Group Trigger Mode",
            Field::GroupConfidenceThreshold => "Group Confidence Threshold",
            Field::GroupInterjectThreshold => "Group Interject Threshold",
            Field::Nicknames => "Agent Nicknames",
            Field::Description => "Agent Description",
            Field::GroupReplyToBots => "Group Reply To Bots",
            Field::GroupMaxShare => "Group Max Share",
            Field::GroupCooldown => "Group Cooldown",
            Field::GroupMaxPlansPerHour => "Group Max Plans Per Hour",
            Field::GroupClassifierModel => "Group Classifier Model",
        }
    }

    fn from_key(key: &str) -> Option<Field> {
        Field::ALL
            .into_iter()
            .find(|f| f.heading().eq_ignore_ascii_case(key))
    }
}

/// Collects problems for one file.
struct Report {
    file: PathBuf,
    problems: Vec<Problem>,
}

impl Report {
    fn push(&mut self, severity: Severity, line: Option<usize>, message: String) {
        self.problems.push(Problem {
            file: self.file.clone(),
            line,
            severity,
            message,
        });
    }

    fn error(&mut self, line: usize, message: String) {
        self.push(Severity::Error, Some(line), message);
    }

    fn warning(&mut self, line: usize, message: String) {
        self.push(Severity::Warning, Some(line), message);
    }

    fn has_errors(&self) -> bool {
        self.problems.iter().any(Problem::is_error)
    }
}

/// Stable sort by line, problems without a line first.
pub(crate) fn sort_problems(problems: &mut [Problem]) {
    problems.sort_by_key(|p| p.line.unwrap_or(0));
}

/// Quotes a value for a message: backticks, control characters escaped,
/// cut after 80 characters.
pub(crate) fn show(value: &str) -> String {
    let mut out = String::from("`");
    for (i, c) in redact_phones(value).chars().enumerate() {
        if i == 80 {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.push('`');
    out
}

fn heading(field: Field) -> String {
    format!("`# {}`", field.heading())
}

/// The value of a field that must be one line, or `None` after reporting.
fn single_line<'a>(report: &mut Report, field: Field, sec: &Section<'a>) -> Option<&'a str> {
    let mut lines = sec.lines();
    let Some((_, first)) = lines.next() else {
        report.error(sec.line, format!("{} is empty", heading(field)));
        return None;
    };
    if let Some((line, _)) = lines.next() {
        report.error(line, format!("{} must be a single line", heading(field)));
        return None;
    }
    Some(first)
}

/// A required field's section, or `None` after reporting it missing or empty.
fn required<'s, 'a>(
    report: &mut Report,
    fields: &HashMap<Field, &'s Section<'a>>,
    field: Field,
) -> Option<&'s Section<'a>> {
    match fields.get(&field) {
        None => {
            report.push(
                Severity::Error,
                None,
                format!("missing required {} heading", heading(field)),
            );
            None
        }
        Some(sec) if sec.value.is_empty() => {
            report.error(sec.line, format!("{} is empty", heading(field)));
            None
        }
        Some(sec) => Some(*sec),
    }
}

/// A yes/no heading: present with an empty value, `true`, `yes` or `1` means on; `false`, `no`
/// or `0` off; anything else warns and counts as on (the heading's presence shows intent).
fn parse_flag(report: &mut Report, field: Field, sec: &Section<'_>) -> bool {
    match sec.value.to_ascii_lowercase().as_str() {
        "false" | "no" | "0" => false,
        "" | "true" | "yes" | "1" => true,
        _ => {
            let meaning = if field == Field::Disabled {
                "the agent is disabled"
            } else {
                "taken as yes"
            };
            report.warning(
                sec.value_line,
                format!(
                    "{} value {} is not one of `true`, `yes`, `1`, `false`, `no`, `0` (or empty); {meaning}",
                    heading(field),
                    show(sec.value)
                ),
            );
            true
        }
    }
}

fn parse_number(report: &mut Report, field: Field, sec: &Section<'_>) -> Option<f64> {
    let value = single_line(report, field, sec)?;
    let number = value.parse::<f64>().ok().filter(|n| {
        n.is_finite()
            && if field == Field::TypingSpeed {
                *n > 0.0
            } else {
                *n >= 0.0
            }
    });
    if number.is_some() {
        return number;
    }
    let wanted = if field == Field::TypingSpeed {
        "a number of characters per second greater than 0, such as `5.0`"
    } else {
        "a number of seconds, 0 or more, such as `2.5`"
    };
    report.error(
        sec.value_line,
        format!(
            "invalid {} value {}: expected {wanted}",
            heading(field),
            show(value)
        ),
    );
    None
}

/// Telegram sticker set short names use only ASCII letters, digits and `_`.
fn valid_set_name(name: &str) -> bool {
    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn bad_set_name_message(name: &str) -> String {
    format!(
        "invalid sticker set name {}: a set's short name (the part after `t.me/addstickers/`) has only letters, digits and `_`",
        show(name)
    )
}

fn looks_like_phone(phone: &str) -> bool {
    let compact: String = phone
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '(' | ')' | '.'))
        .collect();
    let digits = compact.strip_prefix('+').unwrap_or(&compact);
    (7..=15).contains(&digits.len()) && digits.chars().all(|c| c.is_ascii_digit())
}

pub(crate) fn parse_persona_inner(
    path: &Path,
    source: &str,
    prompt_dirs: &[PathBuf],
    files: &dyn ReadText,
) -> (PersonaEntry, Option<usize>) {
    let text = normalize(source);
    let src: &str = &text;
    let lines = Lines::new(src);
    let mut report = Report {
        file: path.to_path_buf(),
        problems: Vec::new(),
    };

    let headings = find_headings(src);

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

    // Classify headings; report duplicates and unknown ones.
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    let mut fields: HashMap<Field, &Section<'_>> = HashMap::new();
    let mut extra = BTreeMap::new();
    for sec in &sections {
        if sec.key.is_empty() {
            report.warning(
                sec.line,
                "empty `#` heading; the text under it is ignored".to_owned(),
            );
            continue;
        }
        if let Some(first) = first_seen.get(sec.key.as_str()) {
            report.error(
                sec.line,
                format!(
                    "duplicate {} heading (first at line {first})",
                    show(&format!("# {}", sec.title))
                ),
            );
            continue;
        }
        first_seen.insert(&sec.key, sec.line);
        match Field::from_key(&sec.key) {
            Some(field) => {
                fields.insert(field, sec);
            }
            None => {
                report.warning(
                    sec.line,
                    format!(
                        "unknown heading {}: kept, but not used by this version",
                        show(&format!("# {}", sec.title))
                    ),
                );
                extra.insert(sec.title.clone(), sec.value.to_owned());
            }
        }
    }

    // Required text fields.
    let name_sec = required(&mut report, &fields, Field::Name);
    let phone_sec = required(&mut report, &fields, Field::Phone);
    let instructions_sec = required(&mut report, &fields, Field::Instructions);

    let mut name = None;
    let mut name_line = None;
    if let Some(sec) = name_sec {
        let value = sec.value;
        name_line = Some(sec.value_line);
        match validate_agent_name(value) {
            Ok(()) => name = Some(value.to_owned()),
            Err(reason) => report.error(
                sec.value_line,
                format!("agent name {} is not usable: {reason}", show(value)),
            ),
        }
    }

    let mut phone = None;
    if let Some(sec) = phone_sec
        && let Some(value) = single_line(&mut report, Field::Phone, sec)
    {
        if !looks_like_phone(value) {
            report.warning(
                sec.value_line,
                format!(
                    "{} does not look like an international phone number (`+` and 7 to 15 digits, e.g. `+1 555 010 0001`)",
                    heading(Field::Phone)
                ),
            );
        }
        phone = Some(value.to_owned());
    }

    let instructions = instructions_sec.map(|s| s.value.to_owned());

    // Role prompts.
    let mut role_prompts = Vec::new();
    if let Some(sec) = fields.get(&Field::RolePrompt) {
        if sec.value.is_empty() {
            report.error(sec.line, format!("{} is empty", heading(Field::RolePrompt)));
        }
        let mut listed: HashMap<String, usize> = HashMap::new();
        for (line, raw_name) in sec.lines() {
            let mut prompt_name = raw_name;
            if let Some(stem) = raw_name.strip_suffix(".md") {
                report.warning(
                    line,
                    format!(
                        "role prompt {}: write the name without `.md`",
                        show(raw_name)
                    ),
                );
                prompt_name = stem;
            }
            if prompt_name.is_empty()
                || prompt_name.contains(['/', '\\', '\0'])
                || prompt_name.contains("..")
                || prompt_name.chars().any(char::is_control)
            {
                report.error(
                    line,
                    format!(
                        "invalid role prompt name {}: it must not be empty or contain `/`, `\\`, `..`, NUL or control characters",
                        show(raw_name)
                    ),
                );
                continue;
            }
            if let Some(first) = listed.get(prompt_name) {
                report.warning(
                    line,
                    format!(
                        "role prompt {} is already listed at line {first}; ignoring this line",
                        show(prompt_name)
                    ),
                );
                continue;
            }
            listed.insert(prompt_name.to_owned(), line);
            if let Some(prompt) =
                load_role_prompt(&mut report, line, prompt_name, prompt_dirs, files)
            {
                role_prompts.push(prompt);
            }
        }
    }

    // Sticker sets (plural, then the legacy singular heading).
    let mut sticker_sets: Vec<String> = Vec::new();
    for field in [Field::StickerSets, Field::StickerSetLegacy] {
        let Some(sec) = fields.get(&field) else {
            continue;
        };
        if field == Field::StickerSetLegacy {
            report.warning(
                sec.line,
                format!(
                    "{} is the old spelling; use {} (one set per line)",
                    heading(field),
                    heading(Field::StickerSets)
                ),
            );
        }
        if sec.value.is_empty() {
            report.error(sec.line, format!("{} is empty", heading(field)));
        }
        for (line, set) in sec.lines() {
            if !valid_set_name(set) {
                report.error(line, bad_set_name_message(set));
            } else if sticker_sets.iter().any(|s| s == set) {
                report.warning(
                    line,
                    format!("sticker set {} is listed more than once", show(set)),
                );
            } else {
                sticker_sets.push(set.to_owned());
            }
        }
    }

    // Single stickers.
    let mut stickers: Vec<StickerRef> = Vec::new();
    if let Some(sec) = fields.get(&Field::Stickers) {
        if sec.value.is_empty() {
            report.error(sec.line, format!("{} is empty", heading(Field::Stickers)));
        }
        for (line, text) in sec.lines() {
            let parsed = text
                .split_once("::")
                .map(|(set, name)| (set.trim(), name.trim()))
                .filter(|(set, name)| !set.is_empty() && !name.is_empty());
            let Some((set, sticker_name)) = parsed else {
                report.error(
                    line,
                    format!(
                        "malformed sticker line {}: expected `SET :: NAME`",
                        show(text)
                    ),
                );
                continue;
            };
            if !valid_set_name(set) {
                report.error(line, bad_set_name_message(set));
                continue;
            }
            let sticker = StickerRef {
                set: set.to_owned(),
                name: sticker_name.to_owned(),
            };
            if stickers.contains(&sticker) {
                report.warning(
                    line,
                    format!("sticker {} is listed more than once", show(text)),
                );
            } else {
                stickers.push(sticker);
            }
        }
    }

    // Time zone.
    let mut timezone = None;
    let mut timezone_name = None;
    if let Some(sec) = fields.get(&Field::Timezone)
        && let Some(value) = single_line(&mut report, Field::Timezone, sec)
    {
        match jiff::tz::TimeZone::get(value) {
            Ok(tz) => {
                timezone = Some(tz);
                timezone_name = Some(value.to_owned());
            }
            Err(_) => report.error(
                sec.value_line,
                format!(
                    "unknown time zone {}: expected an IANA name such as `Europe/Berlin`",
                    show(value)
                ),
            ),
        }
    }

    let typing_speed = fields
        .get(&Field::TypingSpeed)
        .and_then(|sec| parse_number(&mut report, Field::TypingSpeed, sec));
    let start_typing_delay = fields
        .get(&Field::StartTypingDelay)
        .and_then(|sec| parse_number(&mut report, Field::StartTypingDelay, sec));
    let llm_model = fields
        .get(&Field::LlmModel)
        .and_then(|sec| single_line(&mut report, Field::LlmModel, sec))
        .map(str::to_owned);
    let mut llm = None;
    if let Some(sec) = fields.get(&Field::Llm)
        && let Some(value) = single_line(&mut report, Field::Llm, sec)
    {
        match crate::core::llm::resolve(value) {
            Ok(_) => llm = Some(value.trim().to_owned()),
            Err(e) => report.error(sec.value_line, e.to_string()),
        }
    }

    let disabled = fields
        .get(&Field::Disabled)
        .is_some_and(|sec| parse_flag(&mut report, Field::Disabled, sec));
    let allow_clear_conversation = fields
        .get(&Field::AllowClearConversation)
        .is_some_and(|sec| parse_flag(&mut report, Field::AllowClearConversation, sec));

    let group = parse_group(&mut report, &fields);

    let persona = match (report.has_errors(), &name, phone, instructions) {
        (false, Some(name), Some(phone), Some(instructions)) => Some(Persona {
            name: name.clone(),
            phone,
            instructions,
            role_prompts,
            sticker_sets,
            stickers,
            timezone,
            timezone_name,
            typing_speed,
            start_typing_delay,
            llm_model,
            llm,
            disabled,
            allow_clear_conversation,
            group,
            extra,
            source: path.to_path_buf(),
        }),
        _ => None,
    };

    let mut problems = report.problems;
    sort_problems(&mut problems);
    let entry = PersonaEntry {
        path: path.to_path_buf(),
        name,
        persona,
        problems,
    };
    (entry, name_line)
}

/// The group headings, each validated by its parser in `group::settings`.
fn parse_group(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> crate::core::group::settings::GroupSettings {
    use crate::core::group::settings as gs;
    let mut g = gs::GroupSettings::default();
    fn one<T>(
        report: &mut Report,
        fields: &HashMap<Field, &Section<'_>>,
        field: Field,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Option<T> {
        let sec = fields.get(&field)?;
        let value = single_line(report, field, sec)?;
        match parse(value) {
            Ok(v) => Some(v),
            Err(reason) => {
                report.error(
                    sec.value_line,
                    format!("{}: {}", heading(field), redact_phones(&reason)),
                );
                None
            }
        }
    }
    if let Some(m) = one(report, fields, Field::GroupTriggerMode, |v| v.parse()) {
        g.mode = m;
    }
    if let Some(t) = one(
        report,
        fields,
        Field::GroupConfidenceThreshold,
        gs::parse_threshold,
    ) {
        g.confidence_threshold = t;
    }
    if let Some(t) = one(
        report,
        fields,
        Field::GroupInterjectThreshold,
        gs::parse_threshold,
    ) {
        g.interject_threshold = t;
    }
    if let Some(p) = one(report, fields, Field::GroupMaxShare, gs::parse_percent) {
        g.max_share_percent = p;
    }
    if let Some(d) = one(report, fields, Field::GroupCooldown, gs::parse_seconds) {
        g.cooldown = d;
    }
    if let Some(n) = one(report, fields, Field::GroupMaxPlansPerHour, gs::parse_count) {
        g.max_plans_per_hour = n;
    }
    g.classifier_model = one(report, fields, Field::GroupClassifierModel, |v| {
        Ok::<_, String>(v.to_owned())
    });
    g.description = one(report, fields, Field::Description, |v| {
        Ok::<_, String>(v.to_owned())
    });
    if let Some(sec) = fields.get(&Field::GroupReplyToBots) {
        g.reply_to_bots = parse_flag(report, Field::GroupReplyToBots, sec);
    }
    if let Some(sec) = fields.get(&Field::Nicknames) {
        for (line, nick) in sec.lines() {
            let nick = nick.trim_start_matches(['-', '*']).trim();
            if nick.is_empty() || nick.chars().count() > 64 {
                report.error(line, format!("invalid nickname {}", show(nick)));
            } else if !g.nicknames.iter().any(|n| n.eq_ignore_ascii_case(nick)) {
                g.nicknames.push(nick.to_owned());
            }
        }
    }
    g
}

/// Finds `<name>.md` in the first prompt directory that has it and reads it.
fn load_role_prompt(
    report: &mut Report,
    line: usize,
    name: &str,
    prompt_dirs: &[PathBuf],
    files: &dyn ReadText,
) -> Option<RolePrompt> {
    if prompt_dirs.is_empty() {
        report.error(
            line,
            format!(
                "role prompt {} not found: no prompt directories are configured",
                show(name)
            ),
        );
        return None;
    }
    let file_name = format!("{name}.md");
    for dir in prompt_dirs {
        let candidate = dir.join(&file_name);
        return match files.read_text(&candidate) {
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => continue,
            Ok(text) => {
                let text = normalize(&text).trim().to_owned();
                if text.is_empty() {
                    report.warning(
                        line,
                        format!(
                            "role prompt file `{}` is empty",
                            redact_phones(&candidate.display().to_string())
                        ),
                    );
                }
                Some(RolePrompt {
                    name: name.to_owned(),
                    path: candidate,
                    text,
                })
            }
            Err(err) => {
                let what = format!(
                    "role prompt file `{}`",
                    redact_phones(&candidate.display().to_string())
                );
                report.error(line, err.describe(&what, true));
                None
            }
        };
    }
    let searched: Vec<String> = prompt_dirs
        .iter()
        .map(|d| format!("`{}`", d.display()))
        .collect();
    report.error(
        line,
        format!(
            "role prompt {} not found (searched {} for `{}`)",
            show(name),
            searched.join(", "),
            redact_phones(&file_name)
        ),
    );
    None
}
