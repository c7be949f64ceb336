//! The persona's presence on disk: one Markdown file per local day under
//! `<agent>/schedule/` (`core::presence`'s form) and the scheduled intents in
//! `<agent>/intents.md` (`core::intents`'s form). Reads here; writes go through the runtime's
//! batches (`GraphStore::write_batch`), crash-safely. A day that does not read is reported
//! with its file and line and left as it is (the fallback covers it); an intents file that
//! does not read is moved to `quarantine/` (reported), so a later save never overwrites it.

use std::fs;

use jiff::civil::Date;

use super::files::{quarantine, read_optional};
use super::layout::{StateDir, fs_name};
use crate::core::presence::DaySchedule;
use crate::ports::store::{LoadedPresence, StoreError};

/// Days before today that are read (the fallback copies the last real one).
const DAYS_BACK: i64 = 8;
/// Days after today that are read.
const DAYS_AHEAD: i64 = 2;

/// One day's file, if there is one: parsed, or its problems as `file:line: message`.
pub fn read_day(
    dir: &StateDir,
    agent: &str,
    date: Date,
) -> Result<Option<Result<DaySchedule, Vec<String>>>, StoreError> {
    let path = dir.schedule_day_path(agent, date);
    let Some(text) = read_optional(&path)? else {
        return Ok(None);
    };
    Ok(Some(DaySchedule::parse(&text, date).map_err(|problems| {
        problems
            .into_iter()
            .map(|p| format!("{}:{}: {}", path.display(), p.line, p.message))
            .collect()
    })))
}

/// Every day that has a file, sorted (for `state schedule`).
pub fn days_on_disk(dir: &StateDir, agent: &str) -> Vec<Date> {
    let Ok(entries) = fs::read_dir(dir.schedule_dir(agent)) else {
        return Vec::new();
    };
    let mut days: Vec<Date> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".md")?.parse().ok()
        })
        .collect();
    days.sort();
    days
}

/// The agent's days around `today` and its intents.
pub(crate) fn load(dir: &StateDir, agent: &str, today: Date) -> Result<LoadedPresence, StoreError> {
    let mut loaded = LoadedPresence::default();
    for n in -DAYS_BACK..=DAYS_AHEAD {
        let Ok(date) = today.checked_add(jiff::Span::new().days(n)) else {
            continue;
        };
        match read_day(dir, agent, date) {
            Ok(None) => {}
            Ok(Some(Ok(day))) => loaded.days.push(day),
            Ok(Some(Err(mut problems))) => {
                loaded.problems.append(&mut problems);
                loaded.unreadable.push(date);
            }
            // A file that cannot be read at all (a link, a device, too big): reported, the
            // fallback covers the day.
            Err(e) => {
                loaded.problems.push(e.to_string());
                loaded.unreadable.push(date);
            }
        }
    }
    let path = dir.intents_path(agent);
    match read_intents(dir, agent) {
        Err(e) => loaded.problems.push(e.to_string()),
        Ok(Ok(intents)) => loaded.intents = intents,
        Ok(Err(problems)) => {
            let reason = super::files::capped_problems(
                problems
                    .iter()
                    .map(|p| format!("line {}: {}", p.line, p.message)),
            );
            let moved_to = dir.quarantine_path(&fs_name(agent), "intents.md");
            quarantine(&path, &moved_to, &reason)?;
            loaded.problems.push(format!(
                "{}: {reason} (moved to {})",
                path.display(),
                moved_to.display()
            ));
        }
    }
    Ok(loaded)
}

/// The agent's intents as the file holds them (none without a file), or its problems; reads
/// only.
pub fn read_intents(
    dir: &StateDir,
    agent: &str,
) -> Result<
    Result<Vec<crate::core::intents::Intent>, Vec<crate::core::intents::IntentProblem>>,
    StoreError,
> {
    Ok(match read_optional(&dir.intents_path(agent))? {
        None => Ok(Vec::new()),
        Some(text) => crate::core::intents::parse_file(&text),
    })
}

/// Whether a day's file may be written: it is absent, a fallback, or exactly the day the write
/// `replaces` (the persona's own change of a day the runtime wrote or read). A day written (or
/// broken) by hand since the runtime read it is never written over (logged).
pub(crate) fn may_write_day(
    path: &std::path::Path,
    date: Date,
    replaces: Option<&DaySchedule>,
) -> Result<bool, StoreError> {
    let Some(text) = read_optional(path)? else {
        return Ok(true);
    };
    let on_disk = DaySchedule::parse(&text, date);
    let fallback = on_disk
        .as_ref()
        .is_ok_and(|d| matches!(d.source, crate::core::presence::Source::Fallback { .. }));
    let replaced = replaces.is_some_and(|r| on_disk.as_ref().is_ok_and(|d| d == r));
    if !fallback && !replaced {
        tracing::warn!(event = "schedule_file_kept", file = %path.display(), "a schedule day written by hand is kept; reload to use it");
    }
    Ok(fallback || replaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An intents file of thousands of bad lines is quarantined with a reason (and a problem
    /// line for the log) of bounded size that says how many problems were left out.
    #[test]
    fn a_huge_bad_intents_file_gives_a_bounded_reason() -> Result<(), Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let dir = StateDir::new(tmp.path());
        let path = dir.intents_path("ann");
        crate::adapters::store::ensure_private_dir(path.parent().ok_or("no parent")?)?;
        let bad: String = (0..5000)
            .map(|i| format!("- not an intent line {i} {}\n", "x".repeat(300)))
            .collect();
        std::fs::write(&path, format!("# Intents\n\n{bad}"))?;
        let today: Date = "2026-11-27".parse()?;
        let loaded = load(&dir, "ann", today)?;
        let problem = loaded.problems.first().ok_or("no problem reported")?;
        assert!(problem.len() < 10_000, "a {} byte log line", problem.len());
        assert!(problem.contains("more"), "{problem}");
        let reasons: Vec<_> = std::fs::read_dir(dir.quarantine_dir())?
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".reason"))
            .collect();
        assert_eq!(reasons.len(), 1);
        let size = reasons[0].metadata()?.len();
        assert!(size <= 8 * 1024 + 1, "a {size} byte reason file");
        Ok(())
    }
}
