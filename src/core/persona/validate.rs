//! Validation of one persona file, in steps: the text normalized and split into raw sections
//! (`sections`), each known heading's section picked by field (duplicates, empty and unknown
//! headings reported here), then each group of headings checked by its own module (`identity`,
//! `role_prompts`, `stickers`, `settings`, `group`, `presence`, `owner`), and the [`Persona`]
//! assembled only when no step reported an error. Every problem carries the file and, where it
//! can, the line. It reads nothing itself: role prompts come through the [`ReadText`] the
//! caller hands over. Called by [`super::parse_persona_with`] and the persona loader
//! (`adapters::persona_loader`), which also takes the agent name's line for its duplicate check.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use super::fields::{Field, show, sort_problems};
use super::report::Report;
use super::sections::{Lines, Section, find_headings, raw_sections};
use super::{
    Persona, PersonaEntry, ReadText, group, identity, normalize, owner, presence, role_prompts,
    settings, stickers,
};

/// Validates one persona file's text: its entry, and the line of its agent name's value
/// (`None` when the file has no name heading).
pub(crate) fn parse_persona_inner(
    path: &Path,
    source: &str,
    prompt_dirs: &[PathBuf],
    files: &dyn ReadText,
) -> (PersonaEntry, Option<usize>) {
    let text = normalize(source);
    let src: &str = &text;
    let mut report = Report {
        file: path.to_path_buf(),
        problems: Vec::new(),
    };
    let sections = raw_sections(src, &Lines::new(src), &find_headings(src), &mut report);
    let (fields, extra) = classify_sections(&sections, &mut report);

    let identity = identity::identity_fields(&mut report, &fields);
    let role_prompts = fields
        .get(&Field::RolePrompt)
        .map(|sec| role_prompts::role_prompts_of(&mut report, sec, prompt_dirs, files))
        .unwrap_or_default();
    let sticker_sets = stickers::sticker_sets_of(&mut report, &fields);
    let stickers = fields
        .get(&Field::Stickers)
        .map(|sec| stickers::stickers_of(&mut report, sec))
        .unwrap_or_default();
    let settings = settings::settings_fields(&mut report, &fields);
    let group = group::group_fields(&mut report, &fields);
    let (daily_schedule, fresh_start, start_of_conversation) =
        presence::presence_fields(&mut report, &fields);
    let owner = owner::owner_fields(&mut report, &fields);
    let voice = fields
        .get(&Field::Voice)
        .map_or_else(Default::default, |sec| {
            crate::core::voice::VoiceSettings::parse(sec.value).unwrap_or_else(|e| {
                report.error(
                    sec.value_line,
                    format!("{}: {e}", super::fields::heading(Field::Voice)),
                );
                Default::default()
            })
        });

    let media_folder = fields.get(&Field::MediaFolder).and_then(|sec| {
        let value = sec.value.trim();
        if value.is_empty() || value.contains('\n') {
            report.error(
                sec.value_line,
                format!(
                    "{} must be one line: a folder path (relative to this file)",
                    super::fields::heading(Field::MediaFolder)
                ),
            );
            return None;
        }
        Some(value.trim_matches('`').to_owned())
    });

    let name = identity.name.clone();
    let allow_schedule_edits = settings.allow_schedule_edits.unwrap_or_else(|| {
        role_prompts.iter().any(|r| {
            role_prompts::enabled_kinds(&r.text)
                .iter()
                .any(|k| k == "schedule")
        })
    });
    let persona = match (
        report.has_errors(),
        identity.name,
        identity.phone,
        identity.instructions,
    ) {
        (false, Some(name), Some(phone), Some(instructions)) => Some(Persona {
            name,
            phone,
            instructions,
            role_prompts,
            sticker_sets,
            stickers,
            timezone: settings.timezone,
            timezone_name: settings.timezone_name,
            typing_speed: settings.typing_speed,
            start_typing_delay: settings.start_typing_delay,
            llm_model: settings.llm_model,
            llm: settings.llm,
            disabled: settings.disabled,
            allow_clear_conversation: settings.allow_clear_conversation,
            clear_for_both_sides: settings.clear_for_both_sides,
            allow_block: settings.allow_block,
            allow_schedule_edits,
            allow_retrieve: settings.allow_retrieve,
            retrieve_daily_cap: settings.retrieve_daily_cap,
            group,
            daily_schedule,
            fresh_start,
            start_of_conversation,
            approval: owner.approval,
            admin_chat: owner.admin_chat,
            daily_budget: owner.daily_budget,
            send_limits: owner.send_limits,
            voice,
            media_folder,
            album: std::sync::Arc::default(),
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
        fingerprint: fingerprint(source),
    };
    (entry, identity.name_line)
}

/// A hash of the file's text: a reload skips a file whose text did not change.
fn fingerprint(source: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut h);
    h.finish()
}

/// Each known heading's section by field (the first of duplicates; empty and unknown
/// headings reported, unknown ones kept as extras).
fn classify_sections<'s, 'a>(
    sections: &'s [Section<'a>],
    report: &mut Report,
) -> (HashMap<Field, &'s Section<'a>>, BTreeMap<String, String>) {
    // Classify headings; report duplicates and unknown ones.
    let mut first_seen: HashMap<&str, usize> = HashMap::new();
    let mut fields: HashMap<Field, &Section<'_>> = HashMap::new();
    let mut extra = BTreeMap::new();
    for sec in sections {
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
    (fields, extra)
}
