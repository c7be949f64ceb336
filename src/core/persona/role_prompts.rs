//! The `# Role Prompt` heading: one prompt name per line, each read from the first prompt
//! directory that has `<name>.md`, through the [`ReadText`] the caller hands over (the core
//! never touches the disk itself), and checked for task kinds personad does not carry out.
//! Called by `validate` only.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;

use super::fields::{Field, heading, show};
use super::report::Report;
use super::sections::Section;
use super::{ReadError, ReadText, RolePrompt, normalize, redact_phones};

/// The `Role Prompt` heading: one name per line, each read from the first prompt directory
/// that has it.
pub(super) fn role_prompts_of(
    report: &mut Report,
    sec: &Section<'_>,
    prompt_dirs: &[PathBuf],
    files: &dyn ReadText,
) -> Vec<RolePrompt> {
    let mut role_prompts = Vec::new();
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
        if let Some(prompt) = load_role_prompt(report, line, prompt_name, prompt_dirs, files) {
            let unsupported = unsupported_kinds(&prompt.text);
            if !unsupported.is_empty() {
                report.warning(
                    line,
                    format!(
                        "role prompt {} asks for task kinds personad does not support: {}; the model's tasks of these kinds are skipped (logged)",
                        show(prompt_name),
                        unsupported.join(", ")
                    ),
                );
            }
            role_prompts.push(prompt);
        }
    }
    role_prompts
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

/// The task kinds personad carries out (task blocks or the original's JSON tasks); `think`
/// is accepted and dropped.
const SUPPORTED_KINDS: [&str; 18] = [
    "send",
    "react",
    "sticker",
    "wait",
    "block",
    "unblock",
    "clear-conversation",
    "think",
    "remember",
    "note",
    "shutdown",
    "xsend",
    "event",
    "intend",
    "plan",
    "schedule",
    "send-media",
    "retrieve",
];

/// The kinds a role prompt of the original enables (its `<!-- SCHEMA_TASKS: a, b -->` lines),
/// lowercase with `-` for `_`, in the order written, each once.
pub(super) fn enabled_kinds(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let kinds = text
        .lines()
        .filter_map(|line| {
            line.trim()
                .strip_prefix("<!--")?
                .trim_end()
                .trim_end_matches("-->")
                .trim()
                .strip_prefix("SCHEMA_TASKS:")
        })
        .flat_map(|kinds| kinds.split(','))
        .map(|k| k.trim().to_ascii_lowercase().replace('_', "-"));
    for kind in kinds {
        if !kind.is_empty() && !out.contains(&kind) {
            out.push(kind);
        }
    }
    out
}

/// Kinds a role prompt of the original enables that personad does not support, in the order
/// written.
fn unsupported_kinds(text: &str) -> Vec<String> {
    enabled_kinds(text)
        .into_iter()
        .filter(|k| !SUPPORTED_KINDS.contains(&k.as_str()))
        .map(|k| k.replace('-', "_"))
        .collect()
}

/// Whether a role prompt enables `retrieve` and nothing else (the original's
/// `Task-Retrieve`): the prompt leaves it out for a persona without `# Allow Retrieve`.
pub fn only_teaches_retrieve(text: &str) -> bool {
    enabled_kinds(text) == ["retrieve"]
}
