//! A schedule call is counted when it is handed out, before it runs: a process that dies
//! while the call is under way has spent it. The real runtime on virtual time with a planner
//! whose schedule call never returns, crashed (the loop aborted; the disk keeps what was
//! saved) and started again on the same state directory.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use jiff::Timestamp;
use personad::core::plan::{Action, PlanError, PlanRequest};
use personad::core::time::BoxFuture;
use personad::ports::clock::SharedClock;
use personad::ports::planner::{Planner, ScheduleRequest};

/// Berlin, with a `Daily Schedule` and no day written yet: today's day is asked for at start.
const PERSONA: &str = "# Agent Timezone\nEurope/Berlin\n\n# Daily Schedule\nSchool on weekdays; asleep from 22:00 to 07:00.\n\n";

/// A planner whose schedule call takes an hour on the (virtual) clock, giving the clock up
/// while it waits as a slow HTTP call would (the process dies first); it counts the calls.
struct Hanging {
    clock: SharedClock,
    schedule_calls: AtomicUsize,
}

impl Planner for Hanging {
    fn plan<'a>(&'a self, _req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn schedule<'a>(
        &'a self,
        _req: ScheduleRequest<'a>,
    ) -> BoxFuture<'a, Result<Option<String>, PlanError>> {
        self.schedule_calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            personad::ports::clock::pause(self.clock.as_ref(), Duration::from_secs(3600)).await;
            Ok(None)
        })
    }
}

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The schedule calls counted for `day` in the agent's state on disk.
fn counted(state: &std::path::Path, day: &str) -> Result<u64, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(state.join(AGENT).join("agent-state.json"))?;
    let v: serde_json::Value = serde_json::from_str(&text)?;
    Ok(match &v["schedule_calls"] {
        serde_json::Value::Array(a) if a.first().and_then(|d| d.as_str()) == Some(day) => {
            a.get(1).and_then(serde_json::Value::as_u64).unwrap_or(0)
        }
        _ => 0,
    })
}

/// Three starts that each die while the day's schedule call is under way: the first two
/// each count a call on disk before it runs, and the third finds the day's two calls spent
/// and asks for nothing (the persona runs on the fallback day). Were a call counted only
/// once it returned, every crash would leave the count at zero and a crash loop would call
/// without end.
#[tokio::test]
async fn a_schedule_call_cut_short_by_a_crash_is_counted() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut made = Vec::new();
    let mut on_disk = Vec::new();
    for at in [
        "2026-11-26T14:00:00Z",
        "2026-11-26T14:10:00Z",
        "2026-11-26T14:20:00Z",
    ] {
        let planner: Arc<Mutex<Option<Arc<Hanging>>>> = Arc::default();
        let keep = Arc::clone(&planner);
        let mut h = Harness::start_persona_at(
            persona_with(AGENT, PERSONA),
            dir.path(),
            move |clock| {
                let p = Arc::new(Hanging {
                    clock,
                    schedule_calls: AtomicUsize::new(0),
                });
                if let Ok(mut k) = keep.lock() {
                    *k = Some(Arc::clone(&p));
                }
                p
            },
            config(),
            &[],
            ts(at),
        );
        h.started().await;
        h.pass(Duration::from_secs(5)).await;
        h.crash().await;
        let calls = planner
            .lock()
            .ok()
            .and_then(|p| p.as_ref().map(|p| p.schedule_calls.load(Ordering::SeqCst)));
        made.push(calls.ok_or("no planner")?);
        on_disk.push(counted(dir.path(), "2026-11-26")?);
    }
    assert_eq!(
        made,
        [1, 1, 0],
        "schedule calls made per start (counted: {on_disk:?})"
    );
    assert_eq!(on_disk, [1, 2, 2], "schedule calls counted on disk");
    Ok(())
}
