//! `personad bench --memory-conversation N`: the memory bench. One conversation of N messages
//! (a person writes, the persona answers) through the real runtime, LLM planner, prompt builder
//! and summaries, on virtual time, with an in-process model that answers plans with a short
//! message and summary calls with a summary of exactly the messages asked. It measures what
//! memory is for: prompt bytes per planning request (the system instruction and every turn,
//! in the order a provider reads them), the prefix consecutive requests share, summary calls
//! per message, and whether any request's history leaves a gap after the summaries. Figures
//! only: nothing here is timed.

use std::sync::{Arc, Mutex, PoisonError};

use jiff::Timestamp;

use crate::adapters::llm_planner::{LlmPlanner, LlmPlannerConfig};
use crate::adapters::memory::{Incoming, MemoryTelegram};
use crate::adapters::store::StateDir;
use crate::app::commands::CommandError;
use crate::core::config::{Pacing, RuntimeConfig};
use crate::core::llm::{LlmOutcome, LlmRequest, Part};
use crate::core::model::{Chat, ChatId, ChatKind};
use crate::core::time::BoxFuture;
use crate::ports::clock::{SharedClock, VirtualClock};
use crate::ports::llm::{Llm, LlmError};
use crate::runtime::AgentHandle;

/// What the memory bench measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemoryReport {
    pub messages: usize,
    pub plan_requests: usize,
    pub summary_calls: usize,
    pub prompt_bytes_mean: usize,
    pub prompt_bytes_max: usize,
    /// Mean share of a request's bytes the next one repeats as its prefix.
    pub prefix_reuse: f64,
    /// Planning requests whose history does not start right after the summaries.
    pub gaps: usize,
}

/// The in-process model: records each request as the bytes a provider would read.
#[derive(Default)]
struct Recorder {
    /// Each planning prompt, and whether its history leaves a gap after the summaries.
    plans: Mutex<Vec<(String, bool)>>,
    summaries: Mutex<usize>,
}

fn text_of(req: &LlmRequest) -> String {
    let mut s = req.system.clone();
    for turn in &req.turns {
        for part in &turn.parts {
            if let Part::Text(t) = part {
                s.push('\n');
                s.push_str(t);
            }
        }
    }
    s
}

impl Llm for Recorder {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        Box::pin(async move {
            let text = text_of(req);
            if req.system.starts_with(crate::core::summaries::INSTRUCTIONS) {
                *self
                    .summaries
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) += 1;
                let range = text.rsplit("Summarize messages ").next().unwrap_or("");
                let (a, b) = range
                    .trim_end_matches('.')
                    .split_once('–')
                    .unwrap_or(("0", "0"));
                return Ok(LlmOutcome::Text(format!(
                    "# «summarize»\nmin_message_id: {a}\nmax_message_id: {b}\nThey talked about books, messages {a} to {b}."
                )));
            }
            let first_turn = req
                .turns
                .first()
                .and_then(|t| t.parts.first())
                .map(|p| match p {
                    Part::Text(t) => t.as_str(),
                    _ => "",
                })
                .unwrap_or("");
            let gap = history_gap(&req.system, first_turn);
            self.plans
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((text, gap));
            Ok(LlmOutcome::Text(
                "# «send»\nOh, that one is lovely. Have you read the sequel?".into(),
            ))
        })
    }
}

/// Runs the memory bench over `messages` messages (half of them the person's).
pub async fn run(
    state_root: &std::path::Path,
    messages: usize,
) -> Result<MemoryReport, CommandError> {
    crate::adapters::store::ensure_private_dir(state_root)?;
    let tmp = tempfile::Builder::new()
        .prefix("personad-bench-memory-")
        .tempdir_in(state_root)
        .map_err(|e| CommandError::Io(e).doing(format!("temp dir in {}", state_root.display())))?;
    let start = Timestamp::from_second(1_750_000_000).unwrap_or(Timestamp::UNIX_EPOCH);
    let virtual_clock = VirtualClock::new(start, true);
    let clock: SharedClock = Arc::new(virtual_clock);
    let hold = clock.hold();
    let agent = "bench";
    let telegram = Arc::new(
        MemoryTelegram::new(agent, Arc::clone(&clock), None).map_err(CommandError::unexpected)?,
    );
    let chat = Chat {
        id: ChatId(crate::adapters::memory::user_id_for("Bob")),
        kind: ChatKind::Direct,
        title: "Bob".into(),
    };
    telegram.ensure_chat(chat.clone());
    let recorder = Arc::new(Recorder::default());
    let planner = LlmPlanner::new(recorder.clone(), LlmPlannerConfig::default());
    let config = RuntimeConfig {
        pacing: Pacing {
            chars_per_sec: 1e9,
            start_delay_secs: 0.0,
            max_typing_secs: 0.0,
        },
        ..RuntimeConfig::default()
    };
    let src = format!(
        "# Agent Name\n{agent}\n\n# Agent Phone\n+15550100001\n\n# Agent Instructions\nYou are a friendly reader who loves detective novels.\n"
    );
    let persona =
        crate::adapters::persona_loader::parse_persona(std::path::Path::new("bench.md"), &src, &[])
            .persona
            .ok_or_else(|| CommandError::Internal("the bench persona does not parse".into()))?;
    let state = StateDir::new(tmp.path().join("state"));
    let spec = crate::app::services::Spec::plain(
        config,
        vec![AgentHandle {
            persona: Arc::new(persona),
            telegram: telegram.clone(),
        }],
        &clock,
        &state,
        Box::new(move |_| Arc::new(planner) as crate::ports::planner::SharedPlanner),
    );
    let services = crate::app::services::Services::build(spec).await?;
    let ingress = services.plain_ingress();
    // Every task of the run (the runtime and the watchers) belongs to one lifecycle.
    let life = crate::app::lifecycle::Lifecycle::new();
    let runtime = services.runtime;
    let handle = runtime.handle();
    let run = life.spawn(runtime.run());
    drop(hold);
    handle.wait_until(|s| s.started).await;
    for turn in 0..messages.div_ceil(2) {
        let msg = telegram
            .inject(
                chat.id,
                Incoming {
                    from: "Bob".into(),
                    text: format!(
                        "Turn {turn}: I finished the detective novel you suggested, any more like it?"
                    ),
                    ..Incoming::default()
                },
            )
            .await?;
        ingress.push(agent, chat.clone(), msg, true);
        handle.wait_idle().await;
    }
    handle.shutdown("bench done");
    match run.await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(CommandError::unexpected(e)),
        Err(e) => return Err(e.into()),
    }
    let plans = recorder
        .plans
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let summary_calls = *recorder
        .summaries
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    Ok(report(messages, &plans, summary_calls))
}

/// The figures of a run from the planning prompts it recorded.
fn report(messages: usize, recorded: &[(String, bool)], summary_calls: usize) -> MemoryReport {
    let plans: Vec<&String> = recorded.iter().map(|(p, _)| p).collect();
    let sizes: Vec<usize> = plans.iter().map(|p| p.len()).collect();
    let gaps = recorded.iter().filter(|(_, gap)| *gap).count();
    MemoryReport {
        messages,
        plan_requests: plans.len(),
        summary_calls,
        prompt_bytes_mean: sizes.iter().sum::<usize>() / sizes.len().max(1),
        prompt_bytes_max: sizes.iter().copied().max().unwrap_or(0),
        prefix_reuse: mean_prefix_reuse(&plans),
        gaps,
    }
}

/// Mean share of each prompt's bytes that the next one repeats as its prefix (what a
/// provider's prompt cache can serve).
pub fn mean_prefix_reuse<T: AsRef<[u8]>>(prompts: &[T]) -> f64 {
    let shares: Vec<f64> = prompts
        .windows(2)
        .map(|p| {
            let (a, b) = (p[0].as_ref(), p[1].as_ref());
            let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            common as f64 / a.len().max(1) as f64
        })
        .collect();
    shares.iter().sum::<f64>() / shares.len().max(1) as f64
}

/// Whether a planning request's history (its first turn) fails to start right after what the
/// summaries in its system instruction cover.
pub fn history_gap(system: &str, first_turn: &str) -> bool {
    let covered = system
        .lines()
        .filter_map(|l| l.strip_prefix("- messages "))
        .filter_map(|r| {
            r.split(':')
                .next()?
                .split_once('–')?
                .1
                .trim()
                .parse::<i64>()
                .ok()
        })
        .max();
    let first = first_turn
        .split("message_id=")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse::<i64>().ok());
    first != Some(covered.map_or(1, |c| c + 1))
}

/// The figures as a table.
pub fn render(r: &MemoryReport) -> String {
    format!(
        "memory bench: {} messages in one conversation\n  planning requests   {}\n  summary calls       {} (one per {} messages)\n  prompt bytes        mean {}  max {}\n  prefix reuse        {:.3}\n  history gaps        {}\n",
        r.messages,
        r.plan_requests,
        r.summary_calls,
        r.messages.checked_div(r.summary_calls).unwrap_or(0),
        r.prompt_bytes_mean,
        r.prompt_bytes_max,
        r.prefix_reuse,
        r.gaps
    )
}
