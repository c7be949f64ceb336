//! The console's incidents: the runtime's notable events (a plan dropped, a flood wait, the
//! breaker, a spending cap reached, a draft decided) kept in `<state>/incidents.jsonl`, one
//! JSON line each, appended as they happen (off the async threads) and read back at start, so
//! a restart keeps the picture; the file is compacted to the newest [`KEPT`] once it holds
//! twice as many, and a damaged line is skipped with a warning. Each incident keeps the chat's
//! name as it was known then. The page shows problems apart from the owner's decisions, chats
//! by name where known. Owns that file only; fed by `console::serve`, read by its pages.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::adapters::store::{self, StateDir, Symlinks};
use crate::app::lifecycle::Lifecycle;
use crate::ports::store::StoreError;
use crate::runtime::NotableEvent;

use super::http::encode;
use super::pages::{Frame, esc, page as framed};

/// Incidents kept (in memory, and in the file after a compaction).
pub(crate) const KEPT: usize = 500;
/// The longest detail kept (characters).
const DETAIL_CHARS: usize = 600;
/// The largest log read back (a compaction keeps it far below).
const FILE_CAP: u64 = 8 << 20;

/// One incident as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Incident {
    pub(crate) at: jiff::Timestamp,
    pub(crate) agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) chat: Option<i64>,
    /// The chat's name when it happened, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) chat_name: Option<String>,
    /// The runtime's stable name (`plan_dropped`, `draft_approved`, ...).
    pub(crate) event: String,
    #[serde(default)]
    pub(crate) detail: String,
}

impl Incident {
    fn of(e: &NotableEvent, chat_name: Option<String>) -> Incident {
        let n = &e.notable;
        Incident {
            at: e.at,
            agent: n.agent.clone(),
            chat: n.chat.map(|c| c.0),
            chat_name,
            event: n.event.to_string(),
            detail: n.detail.chars().take(DETAIL_CHARS).collect(),
        }
    }
}

/// Whether an event is a decision of the owner's (a draft approved, edited, rejected, put
/// off, or void because a newer message came; a cap lifted) rather than a problem.
pub(crate) fn is_decision(event: &str) -> bool {
    event.starts_with("draft_") || event == "budget_lifted"
}

/// An event's name in words.
fn label(event: &str) -> String {
    match event {
        "plan_dropped" => "Plan dropped".into(),
        "flood_wait" => "Flood wait".into(),
        "breaker_tripped" => "Breaker tripped".into(),
        "chat_disabled" => "Chat disabled".into(),
        "budget_warning" => "Spending nears its cap".into(),
        "budget_reached" => "Spending cap reached".into(),
        "budget_lifted" => "Spending cap lifted".into(),
        "draft_approved" => "Draft approved".into(),
        "draft_edited" => "Draft sent as edited".into(),
        "draft_rejected" => "Draft rejected".into(),
        "draft_later" => "Draft put off".into(),
        "draft_superseded" => "Draft superseded by a newer message".into(),
        other => {
            let words = other.replace('_', " ");
            let mut c = words.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect())
                .unwrap_or_default()
        }
    }
}

/// The incidents since long before the start, newest last, and the file behind them.
pub(crate) struct IncidentLog {
    state: StateDir,
    recent: Mutex<VecDeque<Incident>>,
    /// Lines the file holds (a compaction is due at twice [`KEPT`]).
    lines: Mutex<usize>,
}

impl IncidentLog {
    /// Reads the log back (blocking): a damaged line is skipped with a warning, an unreadable
    /// file is replaced by the next write.
    pub(crate) fn open(state: &StateDir) -> IncidentLog {
        let path = state.incidents_path();
        let (recent, lines) = match store::read_file(&path, FILE_CAP, Symlinks::Refuse) {
            Ok(bytes) => parse(&String::from_utf8_lossy(&bytes), &path),
            Err(StoreError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                (VecDeque::new(), 0)
            }
            Err(e) => {
                tracing::warn!(event = "incidents_unreadable", error = %e, "the incident log does not read: earlier incidents are not shown, and the next one starts it again");
                (VecDeque::new(), 2 * KEPT)
            }
        };
        IncidentLog {
            state: state.clone(),
            recent: Mutex::new(recent),
            lines: Mutex::new(lines),
        }
    }

    /// The incidents kept, newest last.
    pub(crate) fn recent(&self) -> Vec<Incident> {
        self.recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }

    fn push(&self, incident: Incident) {
        let mut q = self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        q.push_back(incident);
        while q.len() > KEPT {
            q.pop_front();
        }
    }

    /// Appends `batch` to the file (blocking), or rewrites it with the newest [`KEPT`] when it
    /// has grown to twice that.
    fn write(&self, batch: &[Incident]) -> Result<(), StoreError> {
        self.state.check_guard().map_err(StoreError::from)?;
        let path = self.state.incidents_path();
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if *lines + batch.len() > 2 * KEPT {
            let all = encode_lines(&self.recent());
            store::write_atomic(&path, &all)?;
            *lines = self
                .recent
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len();
        } else {
            store::append_synced(&path, &encode_lines(batch))?;
            *lines += batch.len();
        }
        Ok(())
    }
}

fn encode_lines(incidents: &[Incident]) -> Vec<u8> {
    let mut out = Vec::new();
    for i in incidents {
        if let Ok(line) = serde_json::to_vec(i) {
            out.extend_from_slice(&line);
            out.push(b'\n');
        }
    }
    out
}

/// The newest [`KEPT`] incidents of the file's text and its line count; damaged lines are
/// skipped (one warning for them all).
fn parse(text: &str, path: &std::path::Path) -> (VecDeque<Incident>, usize) {
    let mut kept = VecDeque::new();
    let (mut lines, mut damaged, mut first_damaged) = (0, 0, None);
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        lines += 1;
        match serde_json::from_str::<Incident>(line) {
            Ok(i) => {
                kept.push_back(i);
                if kept.len() > KEPT {
                    kept.pop_front();
                }
            }
            Err(_) => {
                damaged += 1;
                first_damaged.get_or_insert(n + 1);
            }
        }
    }
    if let Some(line) = first_damaged {
        tracing::warn!(event = "incidents_damaged_lines", file = %path.display(), damaged, first = line, "damaged lines of the incident log skipped");
    }
    (kept, lines)
}

/// Records the runtime's notable events in `log` until `life` stops; `name` gives a chat's
/// name as known now (agent, chat id).
pub(crate) fn record(
    log: Arc<IncidentLog>,
    mut notables: UnboundedReceiver<NotableEvent>,
    name: impl Fn(&str, i64) -> Option<String> + Send + 'static,
    life: &Lifecycle,
) {
    let stop = life.stop_token();
    life.spawn(async move {
        loop {
            let first = tokio::select! {
                () = stop.cancelled() => return,
                next = notables.recv() => match next {
                    Some(e) => e,
                    None => return,
                },
            };
            let mut batch = Vec::new();
            let mut next = Some(first);
            while let Some(e) = next {
                let chat_name = e.notable.chat.and_then(|c| name(&e.notable.agent, c.0));
                let incident = Incident::of(&e, chat_name);
                log.push(incident.clone());
                batch.push(incident);
                next = notables.try_recv().ok();
            }
            let writer = Arc::clone(&log);
            let written = tokio::task::spawn_blocking(move || writer.write(&batch)).await;
            match written {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(event = "incidents_not_saved", error = %e, "incidents not saved: the page shows them until the daemon stops");
                }
                Err(e) => {
                    tracing::warn!(event = "incidents_not_saved", error = %e, "incidents not saved");
                }
            }
        }
    });
}

/// The incidents page: problems first, then the owner's decisions, newest first in each;
/// a chat by its name now (`name`), else its name then, else its id.
pub(crate) fn page(
    f: &Frame<'_>,
    incidents: &[Incident],
    name: &dyn Fn(&str, i64) -> Option<String>,
) -> String {
    let (decisions, problems): (Vec<&Incident>, Vec<&Incident>) =
        incidents.iter().rev().partition(|i| is_decision(&i.event));
    let table = |rows: &[&Incident], none: &str| {
        let mut out = String::new();
        for i in rows {
            let chat = match i.chat {
                Some(id) => {
                    let shown = name(&i.agent, id)
                        .or_else(|| i.chat_name.clone())
                        .unwrap_or_else(|| id.to_string());
                    format!(
                        "<a href=\"/agent/{}/chat/{id}\">{}</a>",
                        encode(&i.agent),
                        esc(&shown)
                    )
                }
                None => String::new(),
            };
            let _ = write!(
                out,
                "<tr data-event=\"{e}\"><td data-label=\"When (UTC)\">{}</td><td data-label=\"Persona\">{}</td><td data-label=\"Chat\">{chat}</td><td data-label=\"What\">{}</td><td data-label=\"Detail\">{}</td></tr>",
                i.at.strftime("%Y-%m-%d %H:%M:%S"),
                esc(&i.agent),
                esc(&label(&i.event)),
                esc(&i.detail),
                e = esc(&i.event),
            );
        }
        if out.is_empty() {
            out = format!("<tr><td colspan=\"5\">{none}</td></tr>");
        }
        format!(
            "<table class=\"stack\"><thead><tr><th>When (UTC)</th><th>Persona</th><th>Chat</th><th>What</th><th>Detail</th></tr></thead><tbody>{out}</tbody></table>"
        )
    };
    let body = format!(
        "<h2 id=\"problems\">Problems</h2>{}<h2 id=\"decisions\">Owner decisions</h2>{}",
        table(&problems, "No problem recorded."),
        table(&decisions, "No decision recorded.")
    );
    framed(f, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incident(n: i64, event: &str) -> Incident {
        Incident {
            at: jiff::Timestamp::from_second(1_700_000_000 + n).unwrap_or_default(),
            agent: "Tess".into(),
            chat: Some(42),
            chat_name: Some("Old name".into()),
            event: event.into(),
            detail: format!("detail {n}"),
        }
    }

    fn frame() -> Frame<'static> {
        Frame {
            title: "Incidents",
            note: None,
            drafts: 0,
            now: jiff::Timestamp::UNIX_EPOCH,
            persona: None,
            refresh: None,
        }
    }

    #[test]
    fn problems_stand_apart_from_decisions_and_chats_go_by_name() {
        let page = page(
            &frame(),
            &[
                incident(1, "plan_dropped"),
                incident(2, "draft_approved"),
                incident(3, "<b>odd</b>"),
            ],
            &|_, id| (id == 42).then(|| "Alice".to_string()),
        );
        let (problems, decisions) = page.split_once("id=\"decisions\"").unwrap_or_default();
        assert!(problems.contains("Plan dropped") && problems.contains("&lt;b&gt;odd"));
        assert!(decisions.contains("Draft approved") && !decisions.contains("Plan dropped"));
        assert!(page.contains(">Alice</a>") && !page.contains("Old name"));
        let unnamed = super::page(&frame(), &[incident(1, "flood_wait")], &|_, _| None);
        assert!(unnamed.contains(">Old name</a>"), "{unnamed}");
    }

    #[test]
    fn the_log_survives_a_reopen_skips_damaged_lines_and_stays_bounded() -> Result<(), StoreError> {
        let dir = tempfile::tempdir().map_err(|e| StoreError::Io {
            action: "tempdir",
            path: std::path::PathBuf::new(),
            source: e,
        })?;
        let state = StateDir::new(dir.path());
        let log = IncidentLog::open(&state);
        log.push(incident(1, "plan_dropped"));
        log.write(&[incident(1, "plan_dropped")])?;
        store::append_synced(&state.incidents_path(), b"{not json\n")?;
        log.write(&[incident(2, "draft_rejected")])?;
        let again = IncidentLog::open(&state);
        let events: Vec<String> = again.recent().into_iter().map(|i| i.event).collect();
        assert_eq!(events, ["plan_dropped", "draft_rejected"]);
        for n in 0..(2 * KEPT as i64) {
            again.push(incident(n, "flood_wait"));
            again.write(&[incident(n, "flood_wait")])?;
        }
        let text = std::fs::read_to_string(state.incidents_path()).unwrap_or_default();
        assert!(text.lines().count() <= 2 * KEPT, "{}", text.lines().count());
        let reopened = IncidentLog::open(&state);
        assert_eq!(reopened.recent().len(), KEPT);
        assert_eq!(
            reopened.recent().last().map(|i| i.detail.clone()),
            Some(format!("detail {}", 2 * KEPT as i64 - 1))
        );
        Ok(())
    }
}
