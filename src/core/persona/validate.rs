//! Validation: from the raw section tree of a persona file to a validated [`Persona`], each
//! heading's rule applied once, every problem with its file and line. Role prompts are read
//! through the [`ReadText`] the caller hands over.

use super::*;

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

    let sections = raw_sections(src, &lines, &headings, &mut report);

    let (fields, extra) = classify_sections(&sections, &mut report);

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

    let role_prompts = fields
        .get(&Field::RolePrompt)
        .map(|sec| role_prompts_of(&mut report, sec, prompt_dirs, files))
        .unwrap_or_default();

    let sticker_sets = sticker_sets_of(&mut report, &fields);

    let stickers = fields
        .get(&Field::Stickers)
        .map(|sec| stickers_of(&mut report, sec))
        .unwrap_or_default();

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
    let clear = fields.get(&Field::AllowClearConversation);
    // `mine` (or `my side`): allowed, and the history goes for this account only.
    let clear_mine_only = clear.is_some_and(|sec| {
        matches!(
            sec.value.trim().to_ascii_lowercase().as_str(),
            "mine" | "my side" | "only mine"
        )
    });
    // Blocking is on unless the persona says otherwise (`# Allow Block` / `false`).
    let allow_block = fields
        .get(&Field::AllowBlock)
        .is_none_or(|sec| parse_flag(&mut report, Field::AllowBlock, sec));
    let allow_clear_conversation = clear_mine_only
        || clear.is_some_and(|sec| parse_flag(&mut report, Field::AllowClearConversation, sec));

    let group = parse_group(&mut report, &fields);

    let (daily_schedule, fresh_start, start_of_conversation) =
        presence_fields(&mut report, &fields);

    let (approval, daily_budget, send_limits) = owner::owner_fields(&mut report, &fields);

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
            clear_for_both_sides: !clear_mine_only,
            allow_block,
            group,
            daily_schedule,
            fresh_start,
            start_of_conversation,
            approval,
            daily_budget,
            send_limits,
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
    (entry, name_line)
}

/// A hash of the file's text: a reload skips a file whose text did not change.
fn fingerprint(source: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut h);
    h.finish()
}

/// The group headings, each validated by its parser in `group::settings`.
pub(super) fn parse_group(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> crate::core::group::settings::GroupSettings {
    use crate::core::group::settings as gs;
    let mut g = gs::GroupSettings::default();
    pub(super) fn one<T>(
        report: &mut Report,
        fields: &HashMap<Field, &Section<'_>>,
        field: Field,
        parse: impl Fn(&str) -> Result<T, crate::core::Invalid>,
    ) -> Option<T> {
        let sec = fields.get(&field)?;
        let value = single_line(report, field, sec)?;
        match parse(value) {
            Ok(v) => Some(v),
            Err(reason) => {
                report.error(
                    sec.value_line,
                    format!("{}: {}", heading(field), redact_phones(&reason.0)),
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
        Ok::<_, crate::core::Invalid>(v.to_owned())
    });
    g.description = one(report, fields, Field::Description, |v| {
        Ok::<_, crate::core::Invalid>(v.to_owned())
    });
    if let Some(sec) = fields.get(&Field::GroupReplyToBots) {
        g.reply_to_bots = parse_flag(report, Field::GroupReplyToBots, sec);
    }
    if let Some(sec) = fields.get(&Field::Language) {
        g.languages = parse_languages(report, sec);
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

/// `# Language`: languages by code or name, separated by commas or lines. One without a
/// table of request words is a warning and left out (its groups are then matched by script).
fn parse_languages(report: &mut Report, sec: &Section<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (line, text) in sec.lines() {
        for lang in text
            .split(',')
            .map(|l| l.trim_start_matches(['-', '*']).trim())
        {
            if lang.is_empty() {
                continue;
            }
            if crate::core::group::requests::known_language(lang) {
                if !out.iter().any(|l| l.eq_ignore_ascii_case(lang)) {
                    out.push(lang.to_owned());
                }
            } else {
                report.warning(
                    line,
                    format!(
                        "Language {} has no table of request words (known: {}); group messages are matched by their script instead",
                        show(lang),
                        crate::core::group::requests::known_languages()
                    ),
                );
            }
        }
    }
    out
}

/// The raw section tree: each heading with its title, key, line and trimmed value (the
/// text before the first heading is reported and ignored).
fn raw_sections<'a>(
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

/// The `Role Prompt` heading: one name per line, each read from the first prompt directory
/// that has it.
fn role_prompts_of(
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

/// The `Sticker Sets` heading (then the legacy singular one): one valid set name per line.
fn sticker_sets_of(report: &mut Report, fields: &HashMap<Field, &Section<'_>>) -> Vec<String> {
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
    sticker_sets
}

/// The `Stickers` heading: one `SET :: NAME` per line.
fn stickers_of(report: &mut Report, sec: &Section<'_>) -> Vec<StickerRef> {
    let mut stickers: Vec<StickerRef> = Vec::new();
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
    stickers
}

/// Finds `<name>.md` in the first prompt directory that has it and reads it.
pub(super) fn load_role_prompt(
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
const SUPPORTED_KINDS: [&str; 11] = [
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
];

/// Kinds a role prompt of the original enables (its `<!-- SCHEMA_TASKS: a, b -->` lines) that
/// personad does not support, in the order written.
pub(crate) fn unsupported_kinds(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("<!--") else {
            continue;
        };
        let Some(kinds) = rest
            .trim_end()
            .trim_end_matches("-->")
            .trim()
            .strip_prefix("SCHEMA_TASKS:")
        else {
            continue;
        };
        for kind in kinds
            .split(',')
            .map(|k| k.trim().to_ascii_lowercase().replace('_', "-"))
        {
            let known = SUPPORTED_KINDS.contains(&kind.as_str()) || kind == "clear-conversation";
            if !kind.is_empty() && !known && !out.contains(&kind) {
                out.push(kind.replace('-', "_"));
            }
        }
    }
    out
}

/// A heading whose value is free Markdown: `None` when absent; an empty one is reported.
fn text_of(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
    field: Field,
) -> Option<String> {
    let sec = fields.get(&field)?;
    if sec.value.trim().is_empty() {
        report.warning(
            sec.line,
            format!("{} is empty; it is ignored", heading(field)),
        );
        return None;
    }
    Some(sec.value.trim().to_owned())
}

/// The presence headings: the schedule's prose, what a fresh start forgets, and what the
/// first turn of a fresh start is told. The reset flags' bodies are free prose in the
/// original's files (only `false`, `no` or `0` turn them off).
fn presence_fields(
    report: &mut Report,
    fields: &HashMap<Field, &Section<'_>>,
) -> (Option<String>, FreshStart, Option<String>) {
    let daily_schedule = text_of(report, fields, Field::DailySchedule);
    let start_of_conversation = text_of(report, fields, Field::StartOfConversation);
    let off = |sec: &&Section<'_>| {
        matches!(
            sec.value.trim().to_ascii_lowercase().as_str(),
            "false" | "no" | "0"
        )
    };
    let fresh_start = if fields.get(&Field::ResetContext).is_some_and(|s| !off(s)) {
        FreshStart::ResetContext
    } else if fields.get(&Field::ClearSummaries).is_some_and(|s| !off(s)) {
        FreshStart::ClearSummaries
    } else {
        FreshStart::Keep
    };
    (daily_schedule, fresh_start, start_of_conversation)
}
