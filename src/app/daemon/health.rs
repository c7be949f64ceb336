//! The daemon's pulse: the tick loop's heartbeat (`/healthz`, the systemd watchdog, the
//! gauges, `STATUS=` lines), the status line, and the one fault injection of the loop
//! (`--debug-stall-loop`) for the tests of what watches it. Built by `daemon` and given to
//! the runtime at construction.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::app::ops::metrics::Health;
use crate::app::ops::sdnotify::{self, Notifier};
use crate::runtime::{Heartbeat, Status};

/// `STATUS=` lines go out at most this often.
const STATUS_EVERY: Duration = Duration::from_secs(10);

pub(crate) fn status_line(st: &Status) -> String {
    format!(
        "{} agent(s) up, {} chat(s) with plans, {} task(s) in flight",
        st.agents, st.graphs, st.in_flight
    )
}

/// The tick loop's heartbeat: marks the loop alive for `/healthz`, pings the watchdog (at
/// most every half interval), refreshes the gauges from the status the loop just published
/// and sends `STATUS=` at most every 10 s.
pub(crate) fn heartbeat(
    every: Duration,
    health: Arc<Health>,
    notifier: Notifier,
    stall: &[u64],
) -> Heartbeat {
    let watchdog = sdnotify::watchdog_interval().is_some();
    let last = Mutex::new((None::<Instant>, None::<Instant>));
    let beat = move |st: &Status, queue_depth: u64| {
        health.beat();
        let now = Instant::now();
        let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
        if watchdog && last.0.is_none_or(|t| now.duration_since(t) >= every / 2) {
            notifier.watchdog();
            last.0 = Some(now);
        }
        ::metrics::gauge!("personad_agents").set(st.agents as f64);
        ::metrics::gauge!("personad_graphs_on_disk").set((st.graphs + st.orphaned) as f64);
        ::metrics::gauge!("personad_graphs_dormant").set(st.dormant as f64);
        ::metrics::gauge!("personad_tasks_in_flight").set(st.in_flight as f64);
        ::metrics::gauge!("personad_queue_depth").set(queue_depth as f64);
        if st.started && last.1.is_none_or(|t| now.duration_since(t) >= STATUS_EVERY) {
            notifier.status(&status_line(st));
            last.1 = Some(now);
        }
    };
    Heartbeat {
        every,
        beat: Arc::new(beat),
        stall: injected_stall(stall),
    }
}

/// `run --debug-stall-loop AFTER_MS,FOR_MS`: one stall of the tick loop, AFTER_MS after its
/// first beat.
fn injected_stall(stall: &[u64]) -> Option<Arc<dyn Fn() -> Option<Duration> + Send + Sync>> {
    let [after, length] = *stall else { return None };
    let (after, length) = (Duration::from_millis(after), Duration::from_millis(length));
    let first = Mutex::new((None::<Instant>, false));
    Some(Arc::new(move || {
        let mut first = first.lock().unwrap_or_else(PoisonError::into_inner);
        let started = *first.0.get_or_insert_with(Instant::now);
        if first.1 || started.elapsed() < after {
            return None;
        }
        first.1 = true;
        Some(length)
    }))
}
