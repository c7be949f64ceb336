//! Persona files: this module owns the format of the Markdown files that describe each agent
//! (`agents/*.md`) and of the role prompts they reference (`prompts/*.md` along a search
//! path): validating one file's text into a [`Persona`] plus a list of [`Problem`]s (errors
//! and warnings, each naming the file and, where it can, the 1-based line), the placeholders,
//! and phone masking. It does no I/O of its own: it never lists directories or opens files
//! (role prompts are read through the `ReadText` its caller hands over), touches no network,
//! writes nothing, and never logs or reports a phone number in full (use [`mask_phone`] /
//! [`Persona::masked_phone`]; `Persona`'s `Debug` output is masked too). The reading lives
//! in `adapters::persona_loader` (`load_dir`, `load_dir_keeping`, `parse_persona`): blocking
//! reads through the store's safe reader, the text then handed here. `check`, `run`, `chat`
//! and reloads reach that loader through `app::commands` (`load_personas`, and off the async
//! threads `load_personas_async` / `reload_personas`, which use `spawn_blocking`); the prompt
//! builder (`core::prompt`) reads the validated [`Persona`].
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
//! * `parse_persona_with` validates one file's already-read text, reading its role prompts
//!   through a `ReadText`; the steps are in `validate`, each group of headings in a module
//!   of its own (`identity`, `role_prompts`, `stickers`, `settings`, `group`, `presence`,
//!   `owner`), the field rules in `fields` and the split into sections in `sections`.
//! * [`apply_placeholders`] expands `{{char}}`, `{{user}}` and friends.
//! * [`mask_phone`] and [`redact_phones`] keep phone numbers out of logs.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

mod fields;
mod group;
mod identity;
mod owner;
mod presence;
mod report;
mod role_prompts;
mod sections;
mod settings;
mod stickers;
mod validate;

pub(crate) use fields::{show, sort_problems};
pub use owner::SendLimits;
pub use role_prompts::only_teaches_retrieve;
pub(crate) use validate::parse_persona_inner;

/// Largest persona or role prompt file accepted, in bytes (256 KiB).
///
/// A file of exactly this size is accepted; one byte more is an error. The
/// size is checked from the file's metadata before its content is read.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// Longest accepted agent name, in characters (Unicode scalar values).
pub(crate) const MAX_AGENT_NAME_CHARS: usize = 64;

/// Agent names that cannot be used because the daemon uses them itself
/// (compared ignoring ASCII case).
pub(crate) const RESERVED_AGENT_NAMES: &[&str] = &["media"];

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
    /// Whether clearing deletes the history for the other side too (`true` unless the
    /// heading's value is `mine`).
    pub clear_for_both_sides: bool,
    /// Whether the model may `block` and `unblock` the other side of a direct chat on its
    /// own: `true` unless a `# Allow Block` heading says `false`/`no`/`0`.
    pub allow_block: bool,
    /// Whether the model may change its own day (`schedule` tasks; docs/actions.md): a
    /// `# Allow Schedule Edits` heading says so, else a role prompt of the original that
    /// enables `schedule` (its `SCHEMA_TASKS` line) does. Needs a `# Daily Schedule`.
    pub allow_schedule_edits: bool,
    /// `# Allow Retrieve`: the model may look up web pages and its `file:` resources
    /// (`retrieve`); off unless the heading is present and not `false`/`no`/`0`.
    pub allow_retrieve: bool,
    /// `# Retrieve Daily Cap`: most fetches per UTC day (`retrieve::DEFAULT_DAILY_CAP`
    /// without the heading).
    pub retrieve_daily_cap: u32,
    /// The `# Group …` headings, `# Agent Nicknames` and `# Agent Description` (see
    /// docs/groups.md), with defaults for the ones not given.
    pub group: crate::core::group::settings::GroupSettings,
    /// `# Daily Schedule`: free prose the persona's days are planned from (docs/presence.md).
    /// Without it the persona is always available, as before.
    pub daily_schedule: Option<String>,
    /// `# Reset Context On First Message` / `# Clear Summaries On First Message`: what a chat
    /// that starts anew forgets.
    pub fresh_start: FreshStart,
    /// `# Start Of Conversation`: instructions for the first turn of a chat that starts anew.
    pub start_of_conversation: Option<String>,
    /// `# Approval` and `# Approval Timeout`: which plans wait for the owner (draft mode).
    pub approval: crate::core::approval::ApprovalPolicy,
    /// `# Admin Chat`: the chat drafts and the answers to the owner's commands go to instead
    /// of the account's Saved Messages. Only a chat the persona names: `--admin-chat` alone
    /// never sends them there (its members would read private text).
    pub admin_chat: Option<crate::core::model::ChatId>,
    /// `# Daily Budget`: the persona's daily LLM spending cap.
    pub daily_budget: Option<crate::core::budget::DailyCap>,
    /// `# Send Limits`: the account governor's figures for this persona.
    pub send_limits: SendLimits,
    /// `# Voice`: whether, when and how the persona answers with voice notes (never without
    /// the heading).
    pub voice: crate::core::voice::VoiceSettings,
    /// `# Media Folder`: the album's folder as written (relative to the persona file); the
    /// album is `<file stem>.media/` beside the file without it.
    pub media_folder: Option<String>,
    /// The album `send_media` sends from (`core::album`), read by the persona loader after
    /// the file is validated; empty when the persona has none.
    pub album: std::sync::Arc<crate::core::album::Album>,
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
            .field("clear_for_both_sides", &self.clear_for_both_sides)
            .field("allow_block", &self.allow_block)
            .field("allow_schedule_edits", &self.allow_schedule_edits)
            .field("allow_retrieve", &self.allow_retrieve)
            .field("retrieve_daily_cap", &self.retrieve_daily_cap)
            .field("daily_schedule", &self.daily_schedule.is_some())
            .field("fresh_start", &self.fresh_start)
            .field("approval", &self.approval)
            .field("admin_chat", &self.admin_chat)
            .field("daily_budget", &self.daily_budget)
            .field("send_limits", &self.send_limits)
            .field("voice", &self.voice)
            .field("media_folder", &self.media_folder)
            .field("album", &self.album)
            .field("extra", &self.extra)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// What a chat that starts anew (few messages, none of ours) forgets, once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FreshStart {
    /// Nothing (no heading).
    #[default]
    Keep,
    /// Its summaries only (`# Clear Summaries On First Message`).
    ClearSummaries,
    /// Its summaries, notes and plans (`# Reset Context On First Message`); what the persona
    /// knows about people and itself stays.
    ResetContext,
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
    /// A fingerprint of the file's text (0 when it could not be read): a reload tells a new
    /// edit from the same file read again.
    pub fingerprint: u64,
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

/// What the persona loader's `load_dir` found: one entry per persona file, sorted by file name.
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
/// `path` is only used to label problems and as [`Persona::source`]. Role prompt files are
/// read through `files`, looked up in `prompt_dirs` in order. All problems of the file are
/// collected; the returned entry has a persona only if none of them is an error. A leading
/// byte-order mark is ignored and line endings are normalized to `\n` (line numbers are
/// unaffected). Duplicate agent names across files are checked by the loader's `load_dir`,
/// not here.
pub(crate) fn parse_persona_with(
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
pub(crate) fn validate_agent_name(name: &str) -> Result<(), crate::core::Invalid> {
    if name.is_empty() {
        return Err(crate::core::Invalid::from("it is empty".to_owned()));
    }
    if name.contains('\n') {
        return Err(crate::core::Invalid::from(
            "it must be a single line".to_owned(),
        ));
    }
    if name.chars().count() > MAX_AGENT_NAME_CHARS {
        return Err(crate::core::Invalid::from(format!(
            "it is longer than {MAX_AGENT_NAME_CHARS} characters"
        )));
    }
    if name.contains('/') || name.contains('\\') {
        return Err(crate::core::Invalid::from(
            "it must not contain `/` or `\\`".to_owned(),
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(crate::core::Invalid::from(
            "it must not contain NUL or other control characters".to_owned(),
        ));
    }
    if name == "." || name == ".." {
        return Err(crate::core::Invalid::from(
            "it must not be `.` or `..`".to_owned(),
        ));
    }
    if let Some(reserved) = RESERVED_AGENT_NAMES
        .iter()
        .find(|r| r.eq_ignore_ascii_case(name))
    {
        return Err(crate::core::Invalid::from(format!(
            "`{reserved}` is reserved"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Reading files
// ---------------------------------------------------------------------------

/// Why a file could not be turned into text.
#[derive(Debug)]
pub(crate) enum ReadError {
    Io(io::Error),
    TooLarge(u64),
    InvalidUtf8 { line: usize, offset: usize },
}

/// Reads the text files a persona names (its role prompts). The persona loader implements
/// it with the store's safe reader; the core never touches the disk itself.
pub(crate) trait ReadText {
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
