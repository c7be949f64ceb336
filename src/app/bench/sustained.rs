//! The sustained scenario: messages arrive at a steady rate over `--sustain-secs`, spread
//! across the chats, and the bench finds the highest rate (doubling from 500/s) at which the
//! loop keeps up, i.e. delivers at least 95% of the offered rate and keeps p99 push-to-durable
//! under 100 ms. Each rate runs on a fresh runtime and state directory. Part of `bench`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::adapters::store::StateDir;
use crate::app::cli::BenchArgs;
use crate::app::commands::CommandError;
use crate::core::model::{Chat, ChatId, ChatKind};
use crate::ports::clock::{SharedClock, SystemClock};
use crate::runtime::AgentHandle;

/// The p99 push-to-durable a rate must keep.
const P99_LIMIT_MS: f64 = 100.0;
/// Rates tried, in messages per second.
const RATES: [u64; 6] = [500, 1000, 2000, 4000, 8000, 16_000];

/// What the sustained scenario found.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sustained {
    /// The highest rate kept (0 when even the first was not).
    pub rate: f64,
    /// Its p99 push-to-durable, in ms.
    pub p99_ms: f64,
}

/// Runs the scenario (skipped, all zero, with `--sustain-secs 0`).
pub(super) async fn run(dir: &Path, args: &BenchArgs) -> Result<Sustained, CommandError> {
    let mut best = Sustained::default();
    if args.sustain_secs == 0 {
        return Ok(best);
    }
    for (i, rate) in RATES.into_iter().enumerate() {
        let (achieved, p99) = at_rate(&dir.join(format!("sustained-{i}")), args, rate).await?;
        if achieved < rate as f64 * 0.95 || p99 > P99_LIMIT_MS {
            break;
        }
        best = Sustained {
            rate: achieved,
            p99_ms: p99,
        };
    }
    Ok(best)
}

/// One rate: returns the delivered rate and the p99 push-to-durable (ms).
async fn at_rate(dir: &Path, args: &BenchArgs, rate: u64) -> Result<(f64, f64), CommandError> {
    let clock: SharedClock = Arc::new(SystemClock);
    let telegram = super::twin(&clock)?;
    // The twin's log of actions is for tests and the burst's send times: none is read here.
    telegram.set_actions_kept(0);
    let total = (rate * args.sustain_secs) as usize;
    let chats: Vec<Chat> = (1..=args.chats.max(1) as i64)
        .map(|id| Chat {
            id: ChatId(id),
            kind: ChatKind::Direct,
            title: format!("chat {id}"),
        })
        .collect();
    for chat in &chats {
        telegram.ensure_chat(chat.clone());
    }
    let state = StateDir::new(dir.join("state"));
    let spec = crate::app::services::Spec::plain(
        super::config(args, std::time::Duration::from_millis(50)),
        vec![AgentHandle {
            persona: Arc::new(super::bench_persona()?),
            telegram: telegram.clone(),
        }],
        &clock,
        &state,
        super::planner(args, &clock).0,
    );
    let services = crate::app::services::Services::build(spec).await?;
    let ingress = services.plain_ingress();
    // Every task of the run (the runtime and the watchers) belongs to one lifecycle.
    let life = crate::app::lifecycle::Lifecycle::new();
    let runtime = services.runtime;
    let handle = runtime.handle();
    let run = life.spawn(runtime.run());
    handle.wait_until(|s| s.started).await;
    let base = handle.status().inbound_durable;
    // Each status change with a new durable count, as (µs since the start, count): compact,
    // as every per-message figure here (a high rate's are part of the peak RSS).
    let start = Instant::now();
    let seen: Arc<Mutex<Vec<(u32, u32)>>> = Arc::default();
    let watcher = {
        let (handle, seen) = (handle.clone(), Arc::clone(&seen));
        life.spawn(async move {
            let mut last = base;
            while last < base + total as u64 {
                handle.wait_until(|s| s.inbound_durable > last).await;
                let st = handle.status();
                if st.stopped {
                    break;
                }
                last = st.inbound_durable;
                if let Ok(mut v) = seen.lock() {
                    let count = u32::try_from(last - base).unwrap_or(u32::MAX);
                    v.push((micros_since(start), count));
                }
            }
        })
    };
    // Pushes in 100 slices a second, each at its own time. Each message arrives in the
    // twin as it is pushed (as on Telegram's side): made all in advance, the hundreds of
    // thousands of a high rate would be most of the process's peak RSS, and none of it the
    // daemon's.
    let per_slice = (rate as f64 / 100.0).max(1.0);
    let mut pushed = Vec::with_capacity(total);
    for k in 0..total {
        let due = start + Duration::from_secs_f64((k as f64 / per_slice).floor() / 100.0);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
        let chat = &chats[k % chats.len()];
        let msg = super::say(&telegram, chat, k).await?;
        pushed.push(micros_since(start));
        ingress.push(super::AGENT, chat.clone(), msg, true);
    }
    let limit = Duration::from_secs(args.sustain_secs + 10);
    let _ = tokio::time::timeout(limit, watcher).await;
    handle.shutdown("bench step over");
    match run.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e.into()),
        Err(e) => return Err(e.into()),
    }
    let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
    let mut latencies = Vec::with_capacity(total);
    let mut i = 0;
    for (k, at) in pushed.iter().enumerate() {
        while i < seen.len() && u64::from(seen[i].1) < k as u64 + 1 {
            i += 1;
        }
        match seen.get(i) {
            Some((done, _)) => latencies.push(f64::from(done.saturating_sub(*at)) / 1000.0),
            // Never durable within the limit: as bad as the limit.
            None => latencies.push(limit.as_secs_f64() * 1000.0),
        }
    }
    let end_us = seen.last().map_or(0, |(t, _)| *t);
    let durable = seen.last().map_or(0, |(_, n)| *n) as f64;
    let achieved = durable / (f64::from(end_us) / 1e6).max(1e-9);
    let p99 = super::percentiles(latencies).p99;
    Ok((achieved.min(rate as f64), p99))
}

/// Microseconds from `start` to now (saturating: a step lasts seconds).
fn micros_since(start: Instant) -> u32 {
    u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX)
}
