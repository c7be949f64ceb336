//! `personad bench`: drives the real runtime (scheduler, driver, persistence with fsync) on
//! the in-memory Telegram with an in-process planner of a fixed latency, and prints the
//! figures an operator sizes a machine with: push-to-plan and plan-to-first-send latencies,
//! total time against the ideal, inbound messages made durable per second in a burst and
//! sustained at a steady rate (`sustained`), user and system CPU per message (`getrusage`),
//! peak RSS, and the startup time with many idle graphs, warm and in a fresh process on cold
//! files (`probe`). `--daemon` measures the daemon's own wiring instead (`daemon`).
//! `--disk-noise` keeps the same disk busy meanwhile. State goes to a temp
//! directory inside `--state` (so on the same disk), removed afterwards. Called by `main`.

mod daemon;
mod probe;
mod sustained;
pub use probe::{noise_writer, startup_probe};

use std::collections::HashMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde::Serialize;

use crate::adapters::memory::{self, Incoming, MemoryTelegram};
use crate::adapters::store::{self, GraphStore, StateDir};
use crate::app::cli::{BenchArgs, GlobalArgs};
use crate::app::commands::{CmdResult, CommandError};
use crate::app::services::MakePlanner;
use crate::core::config::{Pacing, RuntimeConfig};
use crate::core::graph::{Task, TaskGraph, TaskSpec, TaskStatus};
use crate::core::model::{Chat, ChatId, ChatKind};
use crate::core::persona;
use crate::core::plan::{Action, PlanError, PlanRequest};
use crate::core::time::BoxFuture;
use crate::ports::clock::{self, SharedClock, SystemClock};
use crate::ports::planner::Planner;
use crate::runtime::AgentHandle;

const AGENT: &str = "bench";
/// Idle graphs use chat ids from here on, active chats from 1.
const IDLE_BASE: i64 = 1_000_000_000;

/// A latency pair in milliseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p99: f64,
}

/// Everything `bench` measures (the `--json` object).
#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchReport {
    pub chats: usize,
    pub idle_graphs: usize,
    pub messages_per_chat: usize,
    /// Bursts in turn (`--rounds`), each after every chat answered the one before.
    pub rounds: u64,
    /// Planning calls made in the burst (one per chat per round unless a debounce joins
    /// messages).
    pub plans: u64,
    pub llm_latency_ms: u64,
    pub max_in_flight: usize,
    pub push_to_plan_ms: Percentiles,
    pub plan_to_first_send_ms: Percentiles,
    pub total_s: f64,
    pub ideal_s: f64,
    /// The burst figure (every message pushed at once), as before: see `burst_messages_per_s`.
    pub messages_per_s: f64,
    /// Inbound messages made durable per second when all are pushed at once (the first
    /// round's).
    pub burst_messages_per_s: f64,
    /// The highest steady arrival rate the loop kept up with (p99 push-to-durable under
    /// 100 ms); 0 with `--sustain-secs 0`.
    pub sustained_messages_per_s: f64,
    /// The p99 push-to-durable at that rate.
    pub sustained_p99_push_to_durable_ms: f64,
    pub user_cpu_ms_per_message: f64,
    pub sys_cpu_ms_per_message: f64,
    /// User and system together: the headline.
    pub cpu_ms_per_message: f64,
    pub peak_rss_mb: f64,
    /// The allocator's settings the peak was taken under (`app::allocator`).
    pub allocator: &'static str,
    /// Startup in this process, right after writing the files (warm).
    pub startup_ms: f64,
    /// Startup in a fresh process on files evicted from the page cache.
    pub startup_cold_ms: f64,
    /// Whether every file could be evicted before `startup_cold_ms` was taken.
    pub startup_cold_evicted: bool,
    /// Whether a background writer kept the disk busy (`--disk-noise`), and how much it wrote.
    pub disk_noise: bool,
    pub disk_noise_mib: f64,
}

/// When each chat's planning call started and returned (the last call wins).
#[derive(Default)]
struct PlanTimes {
    started: HashMap<ChatId, Timestamp>,
    returned: HashMap<ChatId, Timestamp>,
}

/// The model the bench plans with: it takes a fixed time, reports a typical usage, and
/// answers one short text. Everything around it is the production planner path
/// (`LlmPlanner`: prompt build, task-block parsing, usage metering, window files); only the
/// HTTP call is replaced.
struct FixedLatencyModel {
    latency: Duration,
    clock: SharedClock,
}

impl crate::ports::llm::Llm for FixedLatencyModel {
    fn generate<'a>(
        &'a self,
        _req: &'a crate::core::llm::LlmRequest,
    ) -> BoxFuture<'a, Result<crate::core::llm::LlmOutcome, crate::ports::llm::LlmError>> {
        Box::pin(async move {
            let mut sending = crate::adapters::llm::usage::sending("bench-model");
            clock::pause(self.clock.as_ref(), self.latency).await;
            sending.answered();
            crate::adapters::llm::usage::report(
                "bench",
                "bench-model",
                crate::adapters::llm::usage::Usage {
                    prompt_tokens: 1200,
                    cached_tokens: 1000,
                    output_tokens: 20,
                },
            );
            Ok(crate::core::llm::LlmOutcome::Text("# «send»\nok".into()))
        })
    }
}

/// The production planner, timed per chat (when its call started and returned).
struct TimedPlanner {
    inner: crate::adapters::llm_planner::LlmPlanner,
    clock: SharedClock,
    times: Mutex<PlanTimes>,
    /// Planning calls made.
    calls: std::sync::atomic::AtomicU64,
}

impl Planner for TimedPlanner {
    fn plan<'a>(&'a self, req: PlanRequest<'a>) -> BoxFuture<'a, Result<Vec<Action>, PlanError>> {
        let chat = req.chat.id;
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::pin(async move {
            if let Ok(mut t) = self.times.lock() {
                t.started.insert(chat, self.clock.now());
            }
            let actions = self.inner.plan(req).await;
            if let Ok(mut t) = self.times.lock() {
                t.returned.insert(chat, self.clock.now());
            }
            actions
        })
    }
}

/// From each chat's last push to its planning call starting, and from that call returning
/// to the chat's first send after it; and how many chats got that send.
fn latencies(
    planner: &TimedPlanner,
    pushed_at: &HashMap<ChatId, Timestamp>,
    sends: HashMap<ChatId, (Timestamp, Timestamp)>,
) -> Result<(Vec<f64>, Vec<f64>, usize), CommandError> {
    let ms = |from: Timestamp, to: Timestamp| to.duration_since(from).as_secs_f64() * 1000.0;
    let times = planner
        .times
        .lock()
        .map_err(|_| CommandError::Internal("planner timings poisoned".into()))?;
    // Each chat's first send once its last planning call returned.
    let first_sends: HashMap<ChatId, Timestamp> = sends
        .into_iter()
        .filter(|(chat, (after, _))| times.returned.get(chat) == Some(after))
        .map(|(chat, (_, at))| (chat, at))
        .collect();
    Ok((
        times
            .started
            .iter()
            .filter_map(|(c, s)| pushed_at.get(c).map(|p| ms(*p, *s)))
            .collect(),
        times
            .returned
            .iter()
            .filter_map(|(c, r)| first_sends.get(c).map(|s| ms(*r, *s)))
            .collect(),
        first_sends.len(),
    ))
}

/// Each chat's first send at or after its newest planning call returned, with that call's
/// return (the last round's, once the twin stops reporting and the channel closes).
async fn first_sends(
    mut seen: tokio::sync::mpsc::UnboundedReceiver<memory::Recorded>,
    planner: Arc<TimedPlanner>,
) -> HashMap<ChatId, (Timestamp, Timestamp)> {
    let mut out: HashMap<ChatId, (Timestamp, Timestamp)> = HashMap::new();
    while let Some(r) = seen.recv().await {
        let memory::Action::Send { chat, .. } = r.action else {
            continue;
        };
        let returned = planner
            .times
            .lock()
            .ok()
            .and_then(|t| t.returned.get(&chat).copied());
        if let Some(returned) = returned
            && r.at >= returned
            && out.get(&chat).is_none_or(|(after, _)| *after != returned)
        {
            out.insert(chat, (returned, r.at));
        }
    }
    out
}

/// `personad bench`.
pub async fn bench(global: GlobalArgs, args: BenchArgs) -> CmdResult {
    if let Some(dir) = &args.noise_writer {
        let mib = probe::noise_writer(dir)?;
        return print(&format!("{mib}\n"));
    }
    if let Some(dir) = &args.startup_probe {
        let ms = probe::startup_probe(dir)?;
        return print(&format!("{ms}\n"));
    }
    if let Some(n) = args.memory_conversation {
        let report = crate::app::bench_memory::run(&global.state_dir, n).await?;
        return emit(&report, args.json, crate::app::bench_memory::render);
    }
    if args.daemon {
        let report = daemon::run(&global, &args).await?;
        return emit(&report, args.json, daemon::render);
    }
    let report = run(&global.state_dir, &args).await?;
    emit(&report, args.json, render)
}

/// Prints a report: one line of JSON with `json`, else its rendering.
fn emit<T: Serialize>(report: &T, json: bool, render: fn(&T) -> String) -> CmdResult {
    let text = if json {
        serde_json::to_string(report)? + "\n"
    } else {
        render(report)
    };
    print(&text)
}

fn print(text: &str) -> CmdResult {
    crate::app::stdout::write(text)?;
    Ok(ExitCode::SUCCESS)
}

/// The bench persona's file text (the daemon bench writes it to its agents folder).
fn persona_source() -> String {
    format!(
        "# Agent Name\n{AGENT}\n\n# Agent Phone\n+15550100001\n\n# Agent Instructions\nAnswer.\n"
    )
}

/// A temp directory in `root` (made if needed) for one bench run's state; gone when dropped.
fn temp_root(root: &Path, prefix: &str) -> Result<tempfile::TempDir, CommandError> {
    store::ensure_private_dir(root)?;
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(root)
        .map_err(|e| CommandError::Io(e).doing(format!("temp dir in {}", root.display())))
}

fn bench_persona() -> Result<persona::Persona, CommandError> {
    let src = persona_source();
    crate::adapters::persona_loader::parse_persona(Path::new("bench.md"), &src, &[])
        .persona
        .ok_or_else(|| CommandError::Internal("the bench persona does not parse".into()))
}

fn idle_graph(i: usize, now: Timestamp) -> TaskGraph {
    let chat = Chat {
        id: ChatId(IDLE_BASE + i as i64),
        kind: ChatKind::Direct,
        title: format!("idle {i}"),
    };
    let mut g = TaskGraph::with_received(AGENT, chat, now, None, now);
    g.tasks[0].status = TaskStatus::Done;
    // Far enough never to come due during a bench, near enough for the loader to accept (a
    // wait is at most a day).
    let mut wait = Task::new(TaskSpec::wait(20.0 * 3600.0, false), now);
    wait.not_before = Some(clock::add(now, Duration::from_secs(20 * 3600)));
    let send = Task::new(TaskSpec::send("much later", None), now);
    let first = g.tasks[0].id.clone();
    g.append_chain(&first, vec![wait, send]);
    g
}

/// Saves `idle` graphs that wait far in the future (the bench's background load).
async fn prepare_idle_graphs(
    graphs: &GraphStore,
    idle: usize,
    now: jiff::Timestamp,
) -> Result<(), CommandError> {
    let graphs = graphs.clone();
    tokio::task::spawn_blocking(move || -> Result<(), CommandError> {
        for i in 0..idle {
            graphs.save_unsynced(&idle_graph(i, now))?;
        }
        Ok(())
    })
    .await
    .map_err(|e| CommandError::Join(e).doing("preparing idle graphs"))??;

    Ok(())
}

/// The bench's chats (known to the in-memory backend, no messages yet).
fn bench_chats(telegram: &MemoryTelegram, args: &BenchArgs) -> Vec<Chat> {
    let chats: Vec<Chat> = (1..=args.chats as i64)
        .map(|id| Chat {
            id: ChatId(id),
            kind: ChatKind::Direct,
            title: format!("chat {id}"),
        })
        .collect();
    for chat in &chats {
        telegram.ensure_chat(chat.clone());
    }
    chats
}

/// One round's messages: each chat's next `--messages-per-chat`, recorded in the in-memory
/// backend (not yet handed to the runtime).
async fn inject_round(
    telegram: &MemoryTelegram,
    chats: &[Chat],
    args: &BenchArgs,
    round: usize,
) -> Result<Vec<(Chat, crate::core::model::Message)>, CommandError> {
    let per_chat = args.messages_per_chat;
    let mut messages = Vec::with_capacity(chats.len() * per_chat);
    for chat in chats {
        for k in 0..per_chat {
            messages.push((
                chat.clone(),
                say(telegram, chat, round * per_chat + k).await?,
            ));
        }
    }
    Ok(messages)
}

/// Bob's message `k` in `chat`, recorded in the in-memory backend (not yet handed to the
/// runtime).
async fn say(
    telegram: &MemoryTelegram,
    chat: &Chat,
    k: usize,
) -> Result<crate::core::model::Message, CommandError> {
    telegram
        .inject(
            chat.id,
            Incoming {
                from: "Bob".into(),
                text: format!("message {k}"),
                ..Incoming::default()
            },
        )
        .await
        .map_err(CommandError::Telegram)
}

/// The bench's planner: the production planner over a model of a fixed latency, built as
/// the daemon builds it (over the process's usage meter and window records) and timed; the
/// planner itself is in the slot once the services are built.
fn planner(args: &BenchArgs, clock: &SharedClock) -> (MakePlanner, PlannerSlot) {
    let model = Arc::new(FixedLatencyModel {
        latency: Duration::from_millis(args.llm_latency_ms),
        clock: Arc::clone(clock),
    });
    let slot = PlannerSlot::default();
    let (clock, filled) = (Arc::clone(clock), Arc::clone(&slot));
    let make: MakePlanner = Box::new(move |parts| {
        let inner = crate::adapters::llm_planner::LlmPlanner::new(
            model,
            crate::adapters::llm_planner::LlmPlannerConfig::default(),
        )
        .with_window_records(Arc::clone(&parts.windows))
        .with_usage(Arc::clone(&parts.usage));
        let planner = Arc::new(TimedPlanner {
            inner,
            clock,
            times: Mutex::new(PlanTimes::default()),
            calls: std::sync::atomic::AtomicU64::new(0),
        });
        let _ = filled.set(Arc::clone(&planner));
        planner
    });
    (make, slot)
}

/// Where [`planner`] leaves the planner it built.
type PlannerSlot = Arc<std::sync::OnceLock<Arc<TimedPlanner>>>;

/// The planner [`planner`] built, once the services are.
fn built(slot: &PlannerSlot) -> Result<Arc<TimedPlanner>, CommandError> {
    slot.get()
        .cloned()
        .ok_or_else(|| CommandError::Internal("the bench planner was not built".into()))
}

/// The runtime settings of a bench run: no human pacing.
fn config(args: &BenchArgs, debounce: Duration) -> RuntimeConfig {
    RuntimeConfig {
        debounce,
        max_in_flight: args.max_in_flight.max(1),
        pacing: Pacing {
            chars_per_sec: 1e9,
            start_delay_secs: 0.0,
            max_typing_secs: 0.0,
        },
        ..RuntimeConfig::default()
    }
}

/// Runs one benchmark and returns its figures.
pub async fn run(state_root: &Path, args: &BenchArgs) -> Result<BenchReport, CommandError> {
    let tmp = temp_root(state_root, "personad-bench-")?;
    let clock: SharedClock = Arc::new(SystemClock);
    let graphs = GraphStore::new(StateDir::new(tmp.path().join("state")));
    let now = clock.now();
    prepare_idle_graphs(&graphs, args.idle_graphs, now).await?;
    let telegram = twin(&clock)?;
    // The twin keeps no log of actions: the bench takes each chat's first send as it
    // happens ([`first_sends`]), so its own bookkeeping is not counted as the runtime's memory.
    telegram.set_actions_kept(0);
    let sends_seen = telegram.observe_only(|a| matches!(a, memory::Action::Send { .. }));
    let chats = bench_chats(&telegram, args);
    let rounds = args.rounds.max(1) as usize;
    let (make_planner, planner) = planner(args, &clock);
    // One plan per chat: with several messages per chat a short debounce lets them land
    // together, as a burst does in production.
    let debounce = if args.messages_per_chat > 1 {
        Duration::from_millis(50)
    } else {
        Duration::ZERO
    };
    let noise = if args.disk_noise {
        Some(probe::DiskNoise::start(tmp.path())?)
    } else {
        None
    };
    let state = graphs.state_dir().clone();
    let spec = crate::app::services::Spec::plain(
        config(args, debounce),
        vec![AgentHandle {
            persona: Arc::new(bench_persona()?),
            telegram: telegram.clone(),
        }],
        &clock,
        &state,
        make_planner,
    );
    let services = crate::app::services::Services::build(spec).await?;
    let planner = built(&planner)?;
    let ingress = services.plain_ingress();
    // Every task of the run (the runtime and the watchers) belongs to one lifecycle.
    let life = crate::app::lifecycle::Lifecycle::new();
    let runtime = services.runtime;
    let handle = runtime.handle();
    let sends = life.spawn(first_sends(sends_seen, Arc::clone(&planner)));
    let boot = Instant::now();
    let run = life.spawn(runtime.run());
    handle.wait_until(|s| s.started).await;
    let startup_ms = boot.elapsed().as_secs_f64() * 1000.0;

    let per_round = (args.chats * args.messages_per_chat) as u64;
    let total = per_round * rounds as u64;
    let idle = args.idle_graphs;
    let cpu_before = probe::cpu_ms();
    let first_push = Instant::now();
    // The burst figure is the first round's.
    let durable_watch = {
        let handle = handle.clone();
        life.spawn(async move {
            handle.wait_until(|s| s.inbound_durable >= per_round).await;
            first_push.elapsed()
        })
    };
    // Each chat's last push, for the latencies (taken from the last round).
    let mut pushed_at: HashMap<ChatId, Timestamp> = HashMap::new();
    for round in 0..rounds {
        for (chat, msg) in inject_round(&telegram, &chats, args, round).await? {
            pushed_at.insert(chat.id, clock.now());
            ingress.push(AGENT, chat, msg, true);
        }
        let applied = per_round * (round as u64 + 1);
        let last = round + 1 == rounds;
        // Every chat answered (its reply graph done and gone) before the next round; after
        // the last, every write done too.
        handle
            .wait_until(|s| {
                s.inbound_durable >= applied
                    && s.graphs == idle
                    && s.in_flight == 0
                    && (!last || s.writes_pending == 0)
            })
            .await;
    }
    let total_time = first_push.elapsed();
    let cpu_after = probe::cpu_ms();
    let plans = planner.calls.load(std::sync::atomic::Ordering::Relaxed);
    let durable_time = durable_watch.await?;
    handle.shutdown("bench over");
    match run.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(e.into()),
        Err(e) => return Err(e.into()),
    }
    telegram.stop_observing();
    let sends = sends.await?;

    let (push_to_plan, plan_to_send, answered) = latencies(&planner, &pushed_at, sends)?;
    if answered < args.chats {
        return Err(CommandError::Internal(format!(
            "only {answered} of {} chats got an answer",
            args.chats
        )));
    }
    let sustained = sustained::run(tmp.path(), args).await?;
    let disk_noise_mib = noise.map_or(0.0, probe::DiskNoise::stop);
    let (startup_cold_ms, startup_cold_evicted) = probe::cold_startup(&tmp.path().join("state"))?;
    let batches = args.chats.div_ceil(args.max_in_flight.max(1)) as f64;
    let ideal_s =
        rounds as f64 * (debounce.as_secs_f64() + batches * args.llm_latency_ms as f64 / 1000.0);
    let per_msg = |v: f64| if total == 0 { 0.0 } else { v / total as f64 };
    let burst = per_round as f64 / durable_time.as_secs_f64().max(1e-9);
    Ok(BenchReport {
        chats: args.chats,
        idle_graphs: args.idle_graphs,
        messages_per_chat: args.messages_per_chat,
        rounds: rounds as u64,
        plans,
        llm_latency_ms: args.llm_latency_ms,
        max_in_flight: args.max_in_flight,
        push_to_plan_ms: percentiles(push_to_plan),
        plan_to_first_send_ms: percentiles(plan_to_send),
        total_s: total_time.as_secs_f64(),
        ideal_s,
        messages_per_s: burst,
        burst_messages_per_s: burst,
        sustained_messages_per_s: sustained.rate,
        sustained_p99_push_to_durable_ms: sustained.p99_ms,
        user_cpu_ms_per_message: per_msg(cpu_after.0 - cpu_before.0),
        sys_cpu_ms_per_message: per_msg(cpu_after.1 - cpu_before.1),
        cpu_ms_per_message: per_msg(cpu_after.0 - cpu_before.0 + cpu_after.1 - cpu_before.1),
        peak_rss_mb: probe::peak_rss_mb(),
        allocator: crate::app::allocator::settings().describe(),
        startup_ms,
        startup_cold_ms,
        startup_cold_evicted,
        disk_noise: args.disk_noise,
        disk_noise_mib,
    })
}

fn percentiles(mut v: Vec<f64>) -> Percentiles {
    if v.is_empty() {
        return Percentiles::default();
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Percentiles {
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn render(r: &BenchReport) -> String {
    format!(
        "personad bench: {} chats x {} message(s) x {} round(s), {} idle graphs, planner {} ms, {} in flight\n\
         push to plan         p50 {:>9.1} ms   p99 {:>9.1} ms\n\
         plan to first send   p50 {:>9.1} ms   p99 {:>9.1} ms\n\
         total                {:>9.2} s   (ideal {:.2} s, {:.3}x)\n\
         inbound applied      {:>9.0} messages/s in a burst (durable, fsync on)\n\
         sustained            {:>9.0} messages/s (p99 push to durable {:.1} ms)\n\
         CPU per message      {:.3} ms (user {:.3} ms, sys {:.3} ms)\n\
         peak RSS             {:>9.1} MB ({})\n\
         startup              {:>9.1} ms warm, {:.1} ms in a fresh process{}\n\
         disk noise           {}\n",
        r.chats,
        r.messages_per_chat,
        r.rounds,
        r.idle_graphs,
        r.llm_latency_ms,
        r.max_in_flight,
        r.push_to_plan_ms.p50,
        r.push_to_plan_ms.p99,
        r.plan_to_first_send_ms.p50,
        r.plan_to_first_send_ms.p99,
        r.total_s,
        r.ideal_s,
        if r.ideal_s > 0.0 {
            r.total_s / r.ideal_s
        } else {
            0.0
        },
        r.burst_messages_per_s,
        r.sustained_messages_per_s,
        r.sustained_p99_push_to_durable_ms,
        r.cpu_ms_per_message,
        r.user_cpu_ms_per_message,
        r.sys_cpu_ms_per_message,
        r.peak_rss_mb,
        r.allocator,
        r.startup_ms,
        r.startup_cold_ms,
        if r.startup_cold_evicted {
            " on cold files"
        } else {
            " (files could not be evicted from the page cache)"
        },
        if r.disk_noise {
            format!("on ({:.0} MiB written meanwhile)", r.disk_noise_mib)
        } else {
            "off".to_string()
        },
    )
}

/// Messages of each chat the bench's in-memory Telegram keeps in RAM. It stands in for
/// Telegram's servers, whose memory is not the daemon's: without a cap the sustained scenario's
/// hundreds of thousands of messages would be most of the process's peak RSS. The planner's
/// history is cut to it.
pub(crate) const TWIN_WINDOW: usize = 64;

/// The bench's in-memory Telegram (no state folder, [`TWIN_WINDOW`] messages per chat).
pub(crate) fn twin(clock: &SharedClock) -> Result<Arc<MemoryTelegram>, CommandError> {
    let telegram =
        MemoryTelegram::new(AGENT, Arc::clone(clock), None).map_err(CommandError::unexpected)?;
    telegram.set_window(TWIN_WINDOW);
    Ok(Arc::new(telegram))
}
