//! The intents file (`state/<agent>/intents.md`, the form in the parent module's docs): read
//! with every problem named by its line, and written so that it reads back the same.

use std::fmt::Write as _;

use jiff::civil::DateTime;
use jiff::fmt::temporal::Pieces;

use super::{
    ID_CHARS, Intent, IntentProblem, TEXT_CHARS, one_line, parse_interval, quoted, whole_seconds,
};
use crate::core::model::ChatId;

/// A due time as the file writes it: `YYYY-MM-DD HH:MM`, with `:SS` when not zero.
pub(super) fn format_due(due: DateTime) -> String {
    let format = ["%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S"][usize::from(due.second() != 0)];
    due.strftime(format).to_string()
}

/// A local date-time of the file: no offset or zone, to the second.
fn parse_civil(s: &str) -> Option<DateTime> {
    let pieces = Pieces::parse(s.trim()).ok()?;
    if pieces.offset().is_some() || pieces.time_zone_annotation().is_some() {
        return None;
    }
    Some(whole_seconds(pieces.date().to_datetime(pieces.time()?)))
}

fn parse_yes_no(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "yes" | "true" => Some(true),
        "no" | "false" => Some(false),
        _ => None,
    }
}

/// `1234` or `1234 (Title)`.
fn parse_chat(s: &str) -> Option<(ChatId, String)> {
    let s = s.trim();
    let (number, rest) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
    let chat = ChatId(number.parse().ok()?);
    let rest = rest.trim();
    let title = match rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
        Some(title) => title.trim(),
        None if rest.is_empty() => "",
        None => return None,
    };
    Some((chat, title.to_string()))
}

/// A `## id` heading line's id (`##` alone gives an empty one).
fn heading(line: &str) -> Option<&str> {
    let trimmed = line.trim();
    let id = trimmed.strip_prefix("## ").map(str::trim);
    id.or((trimmed == "##").then_some(""))
}

fn problem(line: usize, message: impl Into<String>) -> IntentProblem {
    IntentProblem {
        line,
        message: message.into(),
    }
}

/// One intent's section while it is read: its heading, key lines and text lines.
#[derive(Default)]
struct Draft<'a> {
    id: &'a str,
    line: usize,
    /// `(line, key, value)`, the key lowercased.
    keys: Vec<(usize, String, &'a str)>,
    keys_done: bool,
    text: Vec<&'a str>,
    text_line: usize,
}

impl<'a> Draft<'a> {
    /// Reads one line of the section: `- key: value` lines while they last, then text.
    fn read(&mut self, number: usize, line: &'a str, problems: &mut Vec<IntentProblem>) {
        let trimmed = line.trim();
        if !self.keys_done {
            if trimmed.is_empty() {
                self.keys_done = !self.keys.is_empty();
                return;
            }
            if let Some(kv) = trimmed
                .strip_prefix('-')
                .filter(|kv| kv.is_empty() || kv.starts_with(' '))
            {
                match kv.split_once(':') {
                    Some((key, value)) => {
                        self.keys
                            .push((number, key.trim().to_ascii_lowercase(), value.trim()))
                    }
                    None => problems.push(problem(
                        number,
                        format!("{} is not a `- key: value` line", quoted(kv)),
                    )),
                }
                return;
            }
            self.keys_done = true;
        }
        if self.text.is_empty() {
            if trimmed.is_empty() {
                return;
            }
            self.text_line = number;
        }
        self.text.push(line);
    }

    /// The intent read, or the section's problems.
    fn finish(self, intents: &mut Vec<Intent>, problems: &mut Vec<IntentProblem>) {
        let before = problems.len();
        let (mut chat, mut due, mut every, mut left, mut urgent) = (None, None, None, None, false);
        for (index, (line, key, value)) in self.keys.iter().enumerate() {
            if self.keys.iter().take(index).any(|(_, k, _)| k == key) {
                problems.push(problem(*line, format!("a second `{key}`")));
                continue;
            }
            let wanted =
                |ok: bool, what: &str| (!ok).then(|| format!("`{key}: {value}` is not {what}"));
            let problem_of = match key.as_str() {
                "chat" => {
                    chat = parse_chat(value);
                    wanted(chat.is_some(), "a chat id, then maybe (its title)")
                }
                "due" => {
                    due = parse_civil(value);
                    wanted(due.is_some(), "a local date and time, YYYY-MM-DD HH:MM")
                }
                "every" => parse_interval(value)
                    .map(|e| every = Some(e))
                    .err()
                    .map(|e| e.0),
                "left" => {
                    left = value.parse().ok().filter(|&n: &u32| n > 0);
                    wanted(left.is_some(), "a whole number from 1")
                }
                "urgent" => {
                    let read = parse_yes_no(value);
                    urgent = read.unwrap_or(false);
                    wanted(read.is_some(), "yes or no")
                }
                _ => wanted(false, "a known key (chat, due, every, left, urgent)"),
            };
            if let Some(message) = problem_of {
                problems.push(problem(*line, message));
            }
        }
        let keyed = |key: &str| self.keys.iter().any(|(_, k, _)| k == key);
        for key in ["chat", "due"] {
            if !keyed(key) {
                let message = format!("intent {} has no `- {key}:` line", self.id);
                problems.push(problem(self.line, message));
            }
        }
        let text = self.text.join("\n").trim().to_string();
        let chars = text.chars().count();
        if text.is_empty() {
            let message = format!("intent {} has no text", self.id);
            problems.push(problem(self.line, message));
        } else if chars > TEXT_CHARS {
            let message = format!("the text is {chars} characters long (at most {TEXT_CHARS})");
            problems.push(problem(self.text_line, message));
        }
        if let (Some((chat, title)), Some(due), true) = (chat, due, problems.len() == before) {
            intents.push(Intent {
                id: self.id.to_string(),
                chat,
                title,
                text,
                due,
                every,
                left,
                urgent,
            });
        }
    }
}

/// Reads an agent's intents file. Problems are all reported, each with its 1-based line: a
/// heading that is not an id (one word of at most 64 characters), a second section with the
/// same id, text outside a section (other than the `# title` line and blank lines), a key
/// line that is not `- key: value`, an unknown or repeated key, a value that does not read,
/// a section without `chat`, `due` or text, and text longer than [`TEXT_CHARS`] characters
/// (a problem, never cut: a hand edit is not silently changed).
pub fn parse_file(text: &str) -> Result<Vec<Intent>, Vec<IntentProblem>> {
    let mut intents = Vec::new();
    let mut problems = Vec::new();
    let mut ids: Vec<&str> = Vec::new();
    let mut current: Option<Draft<'_>> = None;
    let mut titled = false;
    for (n, line) in text.lines().enumerate() {
        let number = n + 1;
        let trimmed = line.trim();
        if let Some(id) = heading(line) {
            if let Some(draft) = current.take() {
                draft.finish(&mut intents, &mut problems);
            }
            if id.is_empty() || id.chars().count() > ID_CHARS || id.contains(char::is_whitespace) {
                let message = format!("{}: an intent's heading is its id (one word)", quoted(line));
                problems.push(problem(number, message));
            } else if ids.contains(&id) {
                problems.push(problem(number, format!("a second intent with the id {id}")));
            }
            ids.push(id);
            current = Some(Draft {
                id,
                line: number,
                ..Draft::default()
            });
        } else if let Some(draft) = current.as_mut() {
            draft.read(number, line, &mut problems);
        } else if trimmed.starts_with("# ") && !titled {
            titled = true;
        } else if !trimmed.is_empty() {
            let message = "text outside an intent: each starts with a `## id` heading";
            problems.push(problem(number, message));
        }
    }
    if let Some(draft) = current {
        draft.finish(&mut intents, &mut problems);
    }
    if problems.is_empty() {
        Ok(intents)
    } else {
        problems.sort_by_key(|p| p.line);
        Err(problems)
    }
}

/// The intents file of `agent` (what [`parse_file`] reads back).
pub fn render_file(agent: &str, intents: &[Intent]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}: scheduled intents", one_line(agent));
    for i in intents {
        let _ = writeln!(s, "\n## {}", i.id);
        let title = Some(one_line(&i.title)).filter(|t| !t.is_empty());
        let title = title.map(|t| format!(" ({t})")).unwrap_or_default();
        let _ = writeln!(s, "- chat: {}{title}", i.chat);
        let _ = writeln!(s, "- due: {}", format_due(i.due));
        if let Some(every) = i.every {
            let _ = writeln!(s, "- every: {every}");
        }
        if let Some(left) = i.left {
            let _ = writeln!(s, "- left: {left}");
        }
        let urgent = if i.urgent { "yes" } else { "no" };
        let _ = writeln!(s, "- urgent: {urgent}");
        let _ = writeln!(s, "\n{}", i.text.trim());
    }
    s
}
