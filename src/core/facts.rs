//! Long-term memory as data: facts a persona keeps about a person (`remember`), about one chat
//! (`note`), and the owner's facts about the persona itself. Owns the scopes, the hand-editable
//! Markdown form of a scope's file, the caps, and how one write changes a file (create,
//! replace or delete by id, applied at most once per task). Pure: no I/O. The file store
//! (`adapters::store::facts`) reads and saves these files; the `memory` task handler applies
//! writes; the prompt builder renders what a chat may see.
//!
//! A scope's file:
//!
//! ```text
//! # Facts about Alice
//!
//! ## fact-3f2a1b0c9d8e
//! _2026-11-25T10:00:00Z · chat 1234 · message 57_
//!
//! Alice has a younger sister, Sarah, who studies abroad.
//!
//! <!-- applied: remember-3f2a1b0c9d8e -->
//! ```
//!
//! One `## id` section per fact; the italic line under the heading says when and where it was
//! learnt (optional when written by hand); the trailing comment lists the tasks already
//! applied, so a task run again after a crash changes nothing.

use std::fmt::Write as _;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::core::model::{ChatId, MessageId};

/// Longest fact a model may write, in characters.
pub const ENTRY_CHARS: usize = 300;
/// Default cap on one scope as the prompt shows it, in bytes.
pub const DEFAULT_SCOPE_BYTES: usize = 3 * 1024;
/// Most applied task ids a file remembers (older ones belong to tasks long finished).
const APPLIED_KEPT: usize = 256;
/// Longest fact id.
const ID_CHARS: usize = 64;

/// Whose facts: the persona's own, a person's (shown wherever that person is), one chat's;
/// and the persona's own commitments: its intentions (`intend`, shown in every chat) and its
/// plans for one chat (`plan`, shown in that chat).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "scope", content = "id")]
pub enum FactScope {
    Persona,
    Person(i64),
    Chat(ChatId),
    Intentions,
    Plans(ChatId),
}

impl std::fmt::Display for FactScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FactScope::Persona => f.write_str("the persona"),
            FactScope::Person(id) => write!(f, "person {id}"),
            FactScope::Chat(id) => write!(f, "chat {id}"),
            FactScope::Intentions => f.write_str("the persona's intentions"),
            FactScope::Plans(id) => write!(f, "the plans for chat {id}"),
        }
    }
}

/// One fact and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub id: String,
    pub text: String,
    pub created: Option<Timestamp>,
    pub chat: Option<ChatId>,
    pub message: Option<MessageId>,
}

/// A scope's file, parsed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FactFile {
    /// The `# title` line's text (kept as written).
    pub title: String,
    pub facts: Vec<Fact>,
    /// Task ids already applied to this file, oldest first.
    pub applied: Vec<String>,
}

/// A write a plan asks for: `content` empty deletes the fact `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactWrite {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub content: String,
}

/// Where a write comes from: the task (its id keys "applied once"), the chat and the
/// message it answered, and when.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub task: String,
    /// The person's name as the chat shows it (titles a new person's file).
    pub name: Option<String>,
    pub chat: ChatId,
    pub message: Option<MessageId>,
    pub at: Timestamp,
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    Created(String),
    Replaced(String),
    Deleted(String),
    /// Deleting an id that is not there.
    NothingToDelete(String),
    /// The task was applied before (a run again after a crash).
    AlreadyApplied,
}

/// Why a write was refused (logged; the file is left as it was).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the fact is {0} characters long (at most {ENTRY_CHARS})")]
    TooLong(usize),
    #[error("the facts of {scope} would take {bytes} bytes in the prompt (at most {cap})")]
    ScopeFull {
        scope: FactScope,
        bytes: usize,
        cap: usize,
    },
    #[error("{0} is not an id (letters, digits, `.`, `_` and `-`, at most {ID_CHARS})")]
    BadId(String),
    #[error("the fact has no text once markup is taken off")]
    NotText,
}

/// A hand-edited file that cannot be read as facts (never overwritten).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.chars().count() <= ID_CHARS
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The id a model gave, made usable: surrounding space and a leading `[`/`]` trimmed.
pub fn clean_id(id: &str) -> String {
    id.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim()
        .to_string()
}

impl FactFile {
    /// Reads a scope's file. Text outside a `## id` section (other than the title, blank
    /// lines and comments) is an error, so that a rewrite never drops what someone wrote.
    pub fn parse(text: &str) -> Result<FactFile, ParseError> {
        let mut file = FactFile::default();
        // Ids seen so far: a lookup per heading (a scan of the facts read so far made a
        // file of 40,000 facts take seconds).
        let mut ids = std::collections::HashSet::new();
        let mut current: Option<(Fact, Vec<&str>, bool)> = None;
        let finish = |file: &mut FactFile, cur: Option<(Fact, Vec<&str>, bool)>| {
            if let Some((mut fact, body, _)) = cur {
                fact.text = body.join("\n").trim().to_string();
                file.facts.push(fact);
            }
        };
        for (n, line) in text.lines().enumerate() {
            let number = n + 1;
            let trimmed = line.trim();
            if let Some(rest) = trimmed.strip_prefix("<!--") {
                if let Some(ids) = rest.trim_end_matches("-->").trim().strip_prefix("applied:") {
                    file.applied
                        .extend(ids.split_whitespace().map(str::to_string));
                }
                continue;
            }
            if let Some(id) = trimmed.strip_prefix("## ") {
                finish(&mut file, current.take());
                let id = clean_id(id);
                if !valid_id(&id) {
                    return Err(ParseError {
                        line: number,
                        message: format!(
                            "`## {id}`: a fact's heading is its id (letters, digits, `.`, `_`, `-`)"
                        ),
                    });
                }
                if !ids.insert(id.clone()) {
                    return Err(ParseError {
                        line: number,
                        message: format!("a second fact with the id {id}"),
                    });
                }
                let fact = Fact {
                    id,
                    text: String::new(),
                    created: None,
                    chat: None,
                    message: None,
                };
                current = Some((fact, Vec::new(), false));
                continue;
            }
            if current.is_none() {
                if trimmed.is_empty() {
                    continue;
                }
                if let Some(title) = trimmed.strip_prefix("# ")
                    && file.title.is_empty()
                {
                    file.title = title.trim().to_string();
                    continue;
                }
                return Err(ParseError {
                    line: number,
                    message: "text outside a fact: each fact starts with a `## id` heading".into(),
                });
            }
            if let Some((fact, body, seen_meta)) = current.as_mut() {
                if !*seen_meta && body.iter().all(|l| l.trim().is_empty()) && !trimmed.is_empty() {
                    *seen_meta = true;
                    if let Some(meta) = trimmed.strip_prefix('_').and_then(|m| m.strip_suffix('_'))
                        && read_meta(fact, meta)
                    {
                        continue;
                    }
                }
                body.push(line);
            }
        }
        finish(&mut file, current);
        Ok(file)
    }

    /// The file as Markdown (what [`FactFile::parse`] reads back).
    pub fn render(&self, scope: FactScope) -> String {
        let mut s = String::new();
        let title = if self.title.is_empty() {
            default_title(scope)
        } else {
            self.title.clone()
        };
        let _ = writeln!(s, "# {title}\n");
        for f in &self.facts {
            let _ = writeln!(s, "## {}", f.id);
            let mut meta = Vec::new();
            if let Some(t) = f.created {
                meta.push(t.to_string());
            }
            if let Some(c) = f.chat {
                meta.push(format!("chat {c}"));
            }
            if let Some(m) = f.message {
                meta.push(format!("message {m}"));
            }
            if !meta.is_empty() {
                let _ = writeln!(s, "_{}_", meta.join(" · "));
            }
            let _ = writeln!(s, "\n{}\n", f.text.trim());
        }
        if !self.applied.is_empty() {
            let _ = writeln!(s, "<!-- applied: {} -->", self.applied.join(" "));
        }
        s
    }

    /// The scope as the prompt shows it: one `- [id] text` line per fact, oldest first. When
    /// a hand edit made it longer than `cap` bytes, the oldest facts are left out (the newest
    /// that fit are shown, still oldest first).
    pub fn prompt_lines(&self, cap: usize) -> String {
        let lines: Vec<String> = self
            .facts
            .iter()
            .map(|f| format!("- [{}] {}\n", f.id, one_line(&f.text)))
            .collect();
        newest_within(&lines, cap)
    }

    /// A person's facts as the prompt of chat `here` shows them, each saying where it came
    /// from. A fact learnt in a group is shown in that group only (its members heard it; a
    /// private chat must not carry what someone said about a person elsewhere); one learnt
    /// in a direct chat, or written by hand, is shown wherever the person is. Capped like
    /// [`FactFile::prompt_lines`].
    pub fn person_prompt_lines(&self, here: ChatId, cap: usize) -> String {
        let lines: Vec<String> = self
            .facts
            .iter()
            .filter_map(|f| {
                let origin = match f.chat {
                    None => "from your notes",
                    Some(c) if c == here => "said in this chat",
                    Some(c) if c.0 > 0 => "told you in a direct chat",
                    Some(_) => return None,
                };
                Some(format!("- [{}] {} ({origin})\n", f.id, one_line(&f.text)))
            })
            .collect();
        newest_within(&lines, cap)
    }

    /// Applies one write from `source` (at most once per task id); `cap` bounds the scope's
    /// prompt form. The file is unchanged when the write is refused.
    pub fn apply(
        &mut self,
        scope: FactScope,
        write: &FactWrite,
        source: &Source,
        cap: usize,
    ) -> Result<Applied, Refused> {
        if self.applied.contains(&source.task) {
            return Ok(Applied::AlreadyApplied);
        }
        // One line, and nothing a re-read would take for a heading, a comment or the
        // metadata line.
        let content = one_line(&write.content);
        let content = content.trim_start_matches(['#', '<', '_', ' ']);
        if content.is_empty() && !write.content.trim().is_empty() {
            return Err(Refused::NotText);
        }
        let id = match &write.id {
            Some(id) => {
                let id = clean_id(id);
                if !valid_id(&id) {
                    return Err(Refused::BadId(id));
                }
                id
            }
            None => generated_id(scope, &source.task),
        };
        let position = self.facts.iter().position(|f| f.id == id);
        let mut next = self.clone();
        let applied = if content.is_empty() {
            match position {
                Some(i) => {
                    next.facts.remove(i);
                    Applied::Deleted(id)
                }
                None => Applied::NothingToDelete(id),
            }
        } else {
            let chars = content.chars().count();
            if chars > ENTRY_CHARS {
                return Err(Refused::TooLong(chars));
            }
            let fact = Fact {
                id: id.clone(),
                text: content.to_string(),
                created: Some(source.at),
                chat: Some(source.chat),
                message: source.message,
            };
            match position {
                Some(i) => {
                    next.facts[i] = fact;
                    Applied::Replaced(id)
                }
                None => {
                    next.facts.push(fact);
                    Applied::Created(id)
                }
            }
        };
        let bytes: usize = next
            .facts
            .iter()
            .map(|f| format!("- [{}] {}\n", f.id, one_line(&f.text)).len())
            .sum();
        let before: usize = self
            .facts
            .iter()
            .map(|f| format!("- [{}] {}\n", f.id, one_line(&f.text)).len())
            .sum();
        if bytes > cap && bytes > before {
            return Err(Refused::ScopeFull { scope, bytes, cap });
        }
        if next.title.is_empty()
            && let (FactScope::Person(_), Some(name)) = (scope, &source.name)
        {
            next.title = format!("Facts about {}", one_line(name));
        }
        next.applied.push(source.task.clone());
        if next.applied.len() > APPLIED_KEPT {
            let extra = next.applied.len() - APPLIED_KEPT;
            next.applied.drain(..extra);
        }
        *self = next;
        Ok(applied)
    }
}

/// The id a write without one gets: `fact-`/`note-`/`intent-`/`plan-` and the task id's
/// random part, so a task run again writes the same id.
fn generated_id(scope: FactScope, task: &str) -> String {
    let prefix = match scope {
        FactScope::Chat(_) => "note",
        FactScope::Intentions => "intent",
        FactScope::Plans(_) => "plan",
        FactScope::Persona | FactScope::Person(_) => "fact",
    };
    let tail = task.rsplit('-').next().unwrap_or(task);
    format!("{prefix}-{tail}")
}

fn default_title(scope: FactScope) -> String {
    match scope {
        FactScope::Persona => "Facts about me".into(),
        FactScope::Person(id) => format!("Facts about person {id}"),
        FactScope::Chat(id) => format!("Notes about chat {id}"),
        FactScope::Intentions => "My intentions".into(),
        FactScope::Plans(id) => format!("My plans for chat {id}"),
    }
}

/// Reads a metadata line (`time · chat N · message M`); `false` when it holds none of them
/// (an italic first line written by hand is then the fact's text).
fn read_meta(fact: &mut Fact, meta: &str) -> bool {
    let mut seen = false;
    for part in meta.split('·').map(str::trim) {
        if let Some(c) = part
            .strip_prefix("chat ")
            .and_then(|c| c.trim().parse().ok())
        {
            fact.chat = Some(ChatId(c));
            seen = true;
        } else if let Some(m) = part
            .strip_prefix("message ")
            .and_then(|m| m.trim().parse().ok())
        {
            fact.message = Some(MessageId(m));
            seen = true;
        } else if let Ok(t) = part.parse::<Timestamp>() {
            fact.created = Some(t);
            seen = true;
        }
    }
    seen
}

/// `text` cut to at most `cap` bytes at a line (or, failing that, a `char`) boundary.
pub fn capped(text: &str, cap: usize) -> String {
    let text = text.trim();
    if text.len() <= cap {
        return text.to_string();
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = &text[..end];
    cut.rfind('\n')
        .map_or(cut, |i| &cut[..i])
        .trim_end()
        .to_string()
}

/// The newest `lines` that fit in `cap` bytes, still oldest first.
fn newest_within(lines: &[String], cap: usize) -> String {
    let mut total = 0;
    let mut from = lines.len();
    while from > 0 && total + lines[from - 1].len() <= cap {
        total += lines[from - 1].len();
        from -= 1;
    }
    lines[from..].concat()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What one plan sees of memory: the persona's own facts, the chat's notes, and the facts
/// about each person here (by sender id, with the name shown in the chat).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemoryView {
    pub persona: String,
    /// The chat's summaries (their prompt form).
    pub summaries: String,
    /// The newest message summarized: the history shown starts after it.
    pub watermark: Option<MessageId>,
    pub chat: String,
    pub people: Vec<(i64, String, String)>,
    /// The persona's intentions (`intend`), shown in every chat: their prompt lines.
    pub intentions: String,
    /// The persona's plans for this chat (`plan`), in the order added: their prompt lines.
    pub plans: String,
}

impl MemoryView {
    pub fn is_empty(&self) -> bool {
        self.persona.trim().is_empty()
            && self.summaries.trim().is_empty()
            && self.chat.trim().is_empty()
            && self.intentions.trim().is_empty()
            && self.plans.trim().is_empty()
            && self.people.iter().all(|(_, _, f)| f.trim().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of tens of thousands of facts reads back whole, each id once (the duplicate
    /// check is one lookup per heading, not a scan of the facts before it).
    #[test]
    fn a_large_file_reads_back_whole_and_a_repeated_id_is_refused() {
        let text: String = (0..40_000)
            .map(|i| format!("## fact-{i}\n\nfact number {i}\n\n"))
            .collect();
        let file = FactFile::parse(&format!("# Facts about Bob\n\n{text}"));
        assert_eq!(file.map(|f| f.facts.len()).ok(), Some(40_000));
        let repeated = FactFile::parse("## a\n\none\n\n## b\n\ntwo\n\n## a\n\nthree\n");
        assert!(repeated.is_err_and(|e| e.line == 9 && e.message.contains("second fact")));
    }

    fn source(task: &str) -> Source {
        Source {
            task: task.into(),
            name: None,
            chat: ChatId(7),
            message: Some(MessageId(3)),
            at: Timestamp::from_second(1_750_000_000).unwrap_or(Timestamp::UNIX_EPOCH),
        }
    }

    fn write(id: Option<&str>, content: &str) -> FactWrite {
        FactWrite {
            id: id.map(str::to_string),
            content: content.into(),
        }
    }

    #[test]
    fn writes_create_replace_and_delete_by_id_once_per_task_and_round_trip() {
        let scope = FactScope::Person(42);
        let mut f = FactFile::default();
        let cap = DEFAULT_SCOPE_BYTES;
        let a = f.apply(
            scope,
            &write(None, "Has a sister, Sarah."),
            &source("remember-00000000000a"),
            cap,
        );
        assert_eq!(a, Ok(Applied::Created("fact-00000000000a".into())));
        // The same task again: nothing changes.
        let again = f.apply(
            scope,
            &write(None, "Has a sister, Sarah."),
            &source("remember-00000000000a"),
            cap,
        );
        assert_eq!(again, Ok(Applied::AlreadyApplied));
        assert_eq!(f.facts.len(), 1);
        let r = f.apply(
            scope,
            &write(Some("fact-00000000000a"), "Has two sisters."),
            &source("remember-b"),
            cap,
        );
        assert_eq!(r, Ok(Applied::Replaced("fact-00000000000a".into())));
        let text = f.render(scope);
        let back = FactFile::parse(&text).unwrap_or_default();
        assert_eq!(
            (&back.facts, &back.applied),
            (&f.facts, &f.applied),
            "{text}"
        );
        assert_eq!(back.title, "Facts about person 42");
        let d = f.apply(
            scope,
            &write(Some("fact-00000000000a"), ""),
            &source("remember-c"),
            cap,
        );
        assert_eq!(d, Ok(Applied::Deleted("fact-00000000000a".into())));
        assert!(f.facts.is_empty());
    }

    #[test]
    fn caps_refuse_long_facts_and_full_scopes_without_changing_the_file() {
        let scope = FactScope::Chat(ChatId(1));
        let mut f = FactFile::default();
        let long = "x".repeat(ENTRY_CHARS + 1);
        assert_eq!(
            f.apply(scope, &write(None, &long), &source("note-1"), 1000),
            Err(Refused::TooLong(ENTRY_CHARS + 1))
        );
        for i in 0..3 {
            let _ = f.apply(
                scope,
                &write(None, &"y".repeat(280)),
                &source(&format!("note-{i}")),
                800,
            );
        }
        assert_eq!(f.facts.len(), 2, "the third would pass 800 bytes");
        assert!(f.applied.len() == 2);
    }

    #[test]
    fn hand_edits_parse_and_stray_text_is_an_error_with_its_line() {
        let ok =
            "# About Bob\n\n## likes\nBob likes tea.\n\n## job\n_2026-01-01T00:00:00Z_\nA baker.\n";
        let f = FactFile::parse(ok).unwrap_or_default();
        assert_eq!(f.facts.len(), 2);
        assert_eq!(f.facts[1].text, "A baker.");
        assert!(f.facts[1].created.is_some());
        let bad = "# About Bob\nBob likes tea.\n";
        assert_eq!(FactFile::parse(bad).err().map(|e| e.line), Some(2));
        let dup = "## a\nx\n## a\ny\n";
        assert!(FactFile::parse(dup).is_err());
        // An italic first line without time, chat or message is the fact, not metadata.
        let italic = FactFile::parse("## likes\n_Loves jazz_\n").unwrap_or_default();
        assert_eq!(italic.facts[0].text, "_Loves jazz_");
    }

    #[test]
    fn markup_only_content_is_refused_never_read_as_a_delete() {
        let scope = FactScope::Person(1);
        let mut f = FactFile::default();
        let _ = f.apply(
            scope,
            &write(Some("a"), "kept"),
            &source("remember-1"),
            1000,
        );
        let r = f.apply(scope, &write(Some("a"), "###"), &source("remember-2"), 1000);
        assert_eq!(r, Err(Refused::NotText));
        assert_eq!(f.facts.len(), 1, "the fact is still there");
    }

    #[test]
    fn the_prompt_form_keeps_the_newest_facts_within_the_cap() {
        let mut f = FactFile::default();
        for i in 0..5 {
            f.facts.push(Fact {
                id: format!("f{i}"),
                text: "0123456789".into(),
                created: None,
                chat: None,
                message: None,
            });
        }
        let lines = f.prompt_lines(40);
        assert_eq!(lines, "- [f3] 0123456789\n- [f4] 0123456789\n");
    }
}
