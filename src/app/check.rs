//! `personad check`: every persona file validated and shown as the daemon would run it (its
//! settings, where each of its LLM calls goes, whether its voice can be made), the media route,
//! and the settings; the exit code says whether anything is unusable. Keys are looked up as
//! `run` looks them up (`app::credentials`). It starts nothing and writes nothing. Called by
//! `cmd::check`.

use std::process::ExitCode;

use crate::app::cli::{CheckArgs, GlobalArgs};
use crate::app::commands::{CmdResult, CommandError, exit, load_personas, out};

/// The routes of a persona's calls: its planner's (plans, summaries, schedule) and its group
/// classifier's; `None` without a usable default LLM.
pub(crate) fn persona_route_pair(
    p: &crate::core::persona::Persona,
    args: &CheckArgs,
    router: &crate::adapters::llm::provider::Router,
) -> Option<(String, String)> {
    let default = args.llm.default_choice().ok()?;
    let planner =
        crate::core::llm::persona_choice(p.llm.as_deref(), p.llm_model.as_deref(), &default)
            .map_or_else(|_| default.route(), |c| c.route());
    let classifier = match p.group.classifier_model.as_deref() {
        Some(m) => m.to_owned(),
        None => router.classifier_route(&args.groups.classifier_model, &default.route()),
    };
    Some((planner, classifier))
}

/// The third line of a persona in `check`: where each of its LLM calls goes (provider, model,
/// base URL), with a warning for each that cannot be served; and how many those were.
pub(crate) fn persona_routes(
    p: &crate::core::persona::Persona,
    args: &CheckArgs,
    router: &crate::adapters::llm::provider::Router,
) -> (String, usize) {
    let Some((planner, classifier)) = persona_route_pair(p, args, router) else {
        return ("routes: no default LLM".into(), 1);
    };
    let mut missing = 0;
    let mut shown = |route: &str| {
        let d = router.describe(route);
        if d.contains("NOT CONFIGURED") || d.contains("unusable") {
            missing += 1;
        }
        d
    };
    // `--plan-format json`, or the planner's provider set to it (`<PROVIDER>_PLAN_FORMAT`).
    let json = args.llm.plan_format == crate::app::cli::PlanFormat::Json
        || crate::core::llm::resolve(&planner)
            .is_ok_and(|c| router.json_plan_providers().contains(&c.provider));
    let calls = if json {
        "plans, summaries, schedule (JSON held to their schemas)"
    } else {
        "plans (task blocks), summaries, schedule"
    };
    let line = format!(
        "routes: {calls}: {}; group classifier (JSON held to its schema): {}",
        shown(&planner),
        shown(&classifier)
    );
    (line, missing)
}

/// The voice line of a persona that speaks: when, and what makes its voice, or why it cannot
/// be made (then 1, counted as a warning: it answers in text).
pub(crate) fn persona_voice(
    p: &crate::core::persona::Persona,
    studio: Result<&crate::adapters::voice_studio::VoiceStudio, &CommandError>,
) -> (String, usize) {
    let made = match studio {
        Ok(studio) => match studio.describe(&p.voice) {
            Ok(engine) => Ok(engine),
            Err(why) => Err(format!("{why}")),
        },
        Err(why) => Err(format!("{why}")),
    };
    match made {
        Ok(engine) => (format!("voice: speaks {}, {engine}", p.voice.speak), 0),
        Err(why) => (
            format!(
                "voice: speaks {}, CANNOT BE MADE ({why}): it answers in text",
                p.voice.speak
            ),
            1,
        ),
    }
}

/// A duration as the persona file writes it: `2h`, `30m`, `90s`.
fn span(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s > 0 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s > 0 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s > 0 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// The owner's line of a persona in `check`: its `# Approval` (mode, how long a draft waits
/// and what then), `# Daily Budget` and `# Send Limits`, as they take effect; what the file
/// leaves out is said as a default (the send limits' are `run`'s).
fn persona_owner(p: &crate::core::persona::Persona, args: &CheckArgs) -> String {
    use crate::app::cli::{
        DEFAULT_ACCOUNT_SENDS_PER_MINUTE, DEFAULT_CHAT_SENDS_PER_MINUTE, DEFAULT_SEND_GAP_SECS,
    };
    let a = &p.approval;
    let default = crate::core::approval::ApprovalPolicy::default();
    let mark = |set: bool| if set { "" } else { " (default)" };
    let on_timeout = match a.on_timeout {
        crate::core::approval::OnTimeout::Drop => "dropped",
        crate::core::approval::OnTimeout::Send => "sent",
    };
    let budget = match &p.daily_budget {
        Some(cap) => format!("{cap}"),
        None => "none of its own (default)".to_string(),
    };
    let daemon = args
        .runtime
        .daily_budget
        .as_deref()
        .map_or("none".to_string(), |c| c.to_string());
    let l = &p.send_limits;
    let run = " (run's default)";
    format!(
        "owner: approval {mode}{m1}, a draft waits {wait}{m2}, then it is {on_timeout}; daily budget: {budget} (the daemon's --daily-budget: {daemon}); send limits: per chat {chat}/min{m3}, per account {account}/min{m4}, gap {gap}{m5}",
        mode = a.mode,
        m1 = mark(a.mode != default.mode),
        wait = span(a.timeout),
        m2 = mark(a.timeout != default.timeout || a.on_timeout != default.on_timeout),
        chat = l.chat_per_minute.unwrap_or(DEFAULT_CHAT_SENDS_PER_MINUTE),
        m3 = if l.chat_per_minute.is_some() { "" } else { run },
        account = l
            .account_per_minute
            .unwrap_or(DEFAULT_ACCOUNT_SENDS_PER_MINUTE),
        m4 = if l.account_per_minute.is_some() {
            ""
        } else {
            run
        },
        gap = span(
            l.chat_gap
                .unwrap_or(std::time::Duration::from_secs(DEFAULT_SEND_GAP_SECS))
        ),
        m5 = if l.chat_gap.is_some() { "" } else { run },
    )
}

/// The second line of a persona in `check`: its LLM route and its group settings (the
/// command line's `--llm`, `--mode` and `--classifier-model` fill in what it leaves out).
fn persona_settings(p: &crate::core::persona::Persona, args: &CheckArgs) -> String {
    let llm = match args.llm.default_choice() {
        Ok(default) => {
            crate::core::llm::persona_choice(p.llm.as_deref(), p.llm_model.as_deref(), &default)
                .map_or_else(|e| format!("unusable ({e})"), |c| c.route())
        }
        Err(e) => format!("no default ({e})"),
    };
    let g = &p.group;
    let languages = if g.languages.is_empty() {
        "by script".to_string()
    } else {
        g.languages.join(", ")
    };
    format!(
        "llm {llm}  groups: {mode} mode, share of voice {share}% of the last {window} messages, cooldown {cooldown} s, at most {plans} plans/hour, classifier {classifier}, request words: {languages}",
        mode = args.groups.mode.unwrap_or(g.mode),
        share = g.max_share_percent,
        window = g.share_window,
        cooldown = g.cooldown.as_secs_f64(),
        plans = g.max_plans_per_hour,
        classifier = g
            .classifier_model
            .as_deref()
            .unwrap_or(&args.groups.classifier_model),
    )
}

/// `personad check`.
pub(crate) fn check(global: &GlobalArgs, args: &CheckArgs) -> CmdResult {
    let config = args.runtime.raw().validate();
    let report = load_personas(global)?;
    let selection = crate::app::shards::selection(&args.shard)?;
    // Keys from the environment, then systemd's credentials directory, as `run` finds them.
    let router = crate::adapters::llm::provider::Router::from_lookup(
        crate::app::credentials::llm_lookup(),
        std::time::Duration::from_secs(120),
    );
    let mut llm_warnings = 0usize;
    let mut voice_warnings = 0usize;
    let clock: crate::ports::clock::SharedClock =
        std::sync::Arc::new(crate::ports::clock::SystemClock);
    let studio = crate::app::services::voice_studio(&args.voice, &clock, None, None);
    let mut text = String::new();
    text.push_str(&format!(
        "agents: {} ({} file{})\n",
        global.agents_dir.display(),
        report.entries.len(),
        if report.entries.len() == 1 { "" } else { "s" }
    ));
    for dir in global.prompt_dirs() {
        if !dir.is_dir() {
            text.push_str(&format!(
                "warning: prompts directory {} does not exist\n",
                dir.display()
            ));
        }
    }
    text.push_str(&crate::app::shards::check_lines(&report, &selection));
    // Media descriptions and voice transcripts are one route for every persona.
    let media = router.describe(&args.media.config().model);
    text.push_str(&format!(
        "media (photos, stickers, voice notes described and transcribed): {media}\n"
    ));
    if media.contains("NOT CONFIGURED") || media.contains("unusable") {
        text.push_str("warning: the media route cannot be served: photos, stickers and voice notes will reach the personas undescribed (set its key, or pick another model with --media-model)\n");
    }
    for entry in &report.entries {
        let file = entry
            .path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        match &entry.persona {
            Some(p) => {
                let roles: Vec<&str> = p.role_prompts.iter().map(|r| r.name.as_str()).collect();
                let state = if p.disabled { "disabled" } else { "ok" };
                text.push_str(&format!(
                    "{state:<9} {name}  ({file})  phone {phone}  role prompts: {roles}  sticker sets: {sets}  problems: {n}\n",
                    name = p.name,
                    phone = p.masked_phone(),
                    roles = list_or_none(&roles),
                    sets = list_or_none(&p.sticker_sets.iter().map(String::as_str).collect::<Vec<_>>()),
                    n = entry.problems.len(),
                ));
                text.push_str(&format!("          {}\n", persona_settings(p, args)));
                text.push_str(&format!("          {}\n", persona_owner(p, args)));
                if p.album.folder.is_some() {
                    let line = crate::adapters::album::summary(&p.album);
                    text.push_str(&format!("          {line}\n"));
                }
                if !p.disabled {
                    let (line, missing) = persona_routes(p, args, &router);
                    text.push_str(&format!("          {line}\n"));
                    llm_warnings += missing;
                    if p.voice.speaks() {
                        let (line, unmade) = persona_voice(p, studio.as_ref());
                        text.push_str(&format!("          {line}\n"));
                        voice_warnings += unmade;
                    }
                }
            }
            None => text.push_str(&format!(
                "{:<9} {}  ({file})  problems: {}\n",
                "UNUSABLE",
                entry.name.as_deref().unwrap_or("?"),
                entry.problems.len()
            )),
        }
    }
    let problems: Vec<String> = report.problems().map(ToString::to_string).collect();
    if !problems.is_empty() {
        text.push_str("\nproblems:\n");
        for p in &problems {
            text.push_str(&format!("  {p}\n"));
        }
    }
    let usable = report.usable().count();
    let unusable = report.entries.len() - usable;
    text.push_str(&format!(
        "\n{usable} usable, {unusable} unusable, {} error(s), {} warning(s)\n",
        report.error_count(),
        report.warning_count()
    ));
    if llm_warnings > 0 {
        text.push_str(&format!(
            "warning: {llm_warnings} LLM route(s) not configured (NOT CONFIGURED on the `routes:` lines above): their calls would fail\n"
        ));
    }
    if voice_warnings > 0 {
        text.push_str(&format!(
            "warning: {voice_warnings} persona voice(s) cannot be made (CANNOT BE MADE on the `voice:` lines above): those personas answer in text\n"
        ));
    }
    if let Err(e) = &config {
        text.push_str(&format!("configuration: {e}\n"));
    }
    out(&text)?;
    if config.is_err() {
        return Ok(ExitCode::from(exit::CONFIG));
    }
    if report.has_unusable() || report.entries.is_empty() {
        return Ok(ExitCode::from(exit::DATA));
    }
    Ok(ExitCode::SUCCESS)
}

fn list_or_none(items: &[&str]) -> String {
    if items.is_empty() {
        "-".to_string()
    } else {
        items.join(", ")
    }
}
