//! Token usage metering. Provider clients call [`report`] with each response's prompt, cached
//! and output tokens; it logs them at DEBUG with the agent, chat, kind, provider and model, and
//! adds them to the [`UsageMeter`] of the enclosing [`scoped`] call (every LLM call opens one
//! naming what it is for, a [`CallKind`]: the planner's plans, summaries and schedule calls,
//! the group gate's classifier calls, the media pipeline's descriptions, speech, whose
//! characters [`report_speech`] counts instead of tokens; [`metered`] also saves
//! the totals when due; clients never need to know personas or chats). The meter sums per
//! agent, model, kind and UTC day in memory; it appends one line per call to the agent's journal
//! (`usage/<agent>.log`, see [`super::usage_files`]) at most every [`SAVE_EVERY`], and folds
//! the journal into the daily table `usage/<agent>.json` (the store's crash-safe write) when
//! it grows long and when the meter stops. [`read_totals`] reads table and journal together
//! (for `personad state usage`, `/status` and metrics), and a [`PriceTable`] turns them into
//! an estimated cost (prices and the printed table are `usage_report`, re-exported here). No
//! HTTP, no keys.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use super::usage_files::{self, COMPACT_AT, Key, LogLine, write_table};
pub use super::usage_files::{UsageRow, read_totals};
pub use super::usage_report::{Price, PriceError, PriceTable, render, state_usage};
use crate::adapters::store::{self, StateDir, StoreError};
use crate::core::budget::Spend;
pub use crate::core::call_kind::CallKind;
use crate::ports::clock::SharedClock;

/// Tokens of one response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Generated tokens (thinking included).
    pub output_tokens: u64,
}

/// Who a request was made for, and where its usage is summed.
#[derive(Clone)]
struct Scope {
    agent: String,
    chat: String,
    kind: CallKind,
    meter: Option<Arc<UsageMeter>>,
    /// Responses reported inside this scope so far (see [`InFlight`]).
    reports: Arc<std::sync::atomic::AtomicU64>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `f` (an LLM call of `kind`) with usage attributed to `agent` and `chat`, summed in
/// `meter`.
pub fn scoped<F: Future>(
    agent: &str,
    chat: &str,
    kind: CallKind,
    meter: Option<Arc<UsageMeter>>,
    f: F,
) -> impl Future<Output = F::Output> + use<F> {
    let scope = Scope {
        agent: agent.to_owned(),
        chat: chat.to_owned(),
        kind,
        meter,
        reports: Arc::default(),
    };
    SCOPE.scope(scope, f)
}

/// [`scoped`], then the meter's totals saved if a save is due (in a task of its own: the
/// caller may be aborted meanwhile, and a save must not stop halfway). Every LLM call of the
/// daemon goes through here.
pub async fn metered<F: Future>(
    agent: &str,
    chat: &str,
    kind: CallKind,
    meter: Option<&Arc<UsageMeter>>,
    f: F,
) -> F::Output {
    let result = scoped(agent, chat, kind, meter.cloned(), f).await;
    if let Some(meter) = meter.filter(|m| m.save_due()) {
        let meter = Arc::clone(meter);
        let saved = tokio::spawn(async move { meter.flush_due().await }).await;
        if let Ok(Err(e)) = saved {
            tracing::warn!(agent = %agent, error = %e, "usage totals not saved");
        }
    }
    result
}

/// The group gate's calls are metered through the LLM port (`ingress` names no adapter).
impl crate::ports::llm::CallMeter for Arc<UsageMeter> {
    fn metered<'a>(
        &'a self,
        whom: crate::ports::llm::CallFor<'a>,
        call: crate::core::time::BoxFuture<
            'a,
            Result<crate::core::llm::LlmOutcome, crate::core::llm::LlmError>,
        >,
    ) -> crate::core::time::BoxFuture<
        'a,
        Result<crate::core::llm::LlmOutcome, crate::core::llm::LlmError>,
    > {
        Box::pin(async move {
            let chat = whom.chat.to_string();
            metered(whom.agent, &chat, whom.kind, Some(self), call).await
        })
    }
}

/// The kind of the enclosing [`scoped`] call, as the metrics' `kind` label (`none` outside
/// one, as `replay`'s classifier calls are).
pub fn current_kind() -> &'static str {
    SCOPE.try_with(|s| s.kind.as_str()).unwrap_or("none")
}

/// The agent and chat of the enclosing [`scoped`] call, if any (speech takes its agent from
/// the caller's scope, as provider clients never know personas).
pub fn current_call() -> Option<(String, String)> {
    SCOPE.try_with(|s| (s.agent.clone(), s.chat.clone())).ok()
}

/// Reports one answered speech request of `characters` (what the provider bills): logged at
/// DEBUG, counted in `personad_speech_characters_total`, and summed (one request and its
/// characters) when inside [`scoped`]. Like [`report`], it stands for the request's own count.
pub fn report_speech(provider: &str, model: &str, characters: u64) {
    let scope = SCOPE.try_with(Scope::clone).ok();
    let (agent, chat) = scope
        .as_ref()
        .map_or(("-", "-"), |s| (s.agent.as_str(), s.chat.as_str()));
    tracing::debug!(agent, chat, provider, model, characters, "speech usage");
    metrics::counter!("personad_speech_characters_total", "model" => model.to_string())
        .increment(characters);
    count_in(scope, |meter, agent, kind| {
        meter.add_speech(agent, model, kind, characters);
    });
}

/// Counts one reported response in the enclosing scope's meter, if it has one: `add` with the
/// scope's agent and kind.
fn count_in(scope: Option<Scope>, add: impl FnOnce(&UsageMeter, &str, CallKind)) {
    if let Some(Scope {
        agent,
        kind,
        meter: Some(meter),
        reports,
        ..
    }) = scope
    {
        reports.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        add(&meter, &agent, kind);
    }
}

/// Reports one response's usage: logged at DEBUG, and summed when inside [`scoped`].
pub fn report(provider: &str, model: &str, usage: Usage) {
    let scope = SCOPE.try_with(Scope::clone).ok();
    let (agent, chat) = scope
        .as_ref()
        .map_or(("-", "-"), |s| (s.agent.as_str(), s.chat.as_str()));
    let call = scope.as_ref().map_or("none", |s| s.kind.as_str());
    tracing::debug!(
        agent,
        chat,
        kind = call,
        provider,
        model,
        prompt_tokens = usage.prompt_tokens,
        cached_tokens = usage.cached_tokens,
        output_tokens = usage.output_tokens,
        "llm usage"
    );
    for (kind, n) in [
        ("prompt", usage.prompt_tokens),
        ("cached", usage.cached_tokens),
        ("output", usage.output_tokens),
    ] {
        metrics::counter!("personad_llm_tokens_total", "model" => model.to_string(), "type" => kind, "kind" => call)
            .increment(n);
    }
    count_in(scope, |meter, agent, kind| {
        meter.add(agent, model, kind, usage)
    });
}

/// One request on the wire. Every request is counted once, inside [`scoped`] for that
/// agent: with its tokens when its response reports usage ([`report`]); else, when this guard
/// goes, under the model asked for, as a plain request (an error status, a transport failure)
/// or, if it goes before [`InFlight::answered`] (the plan it was for was superseded, the daemon
/// stopped), as a discarded one, also counted in `personad_llm_requests_discarded_total`.
/// Discarded requests are billed all the same.
pub struct InFlight {
    scope: Option<Scope>,
    model: String,
    answered: bool,
    reports_before: u64,
    /// When it went out (wall time): a planning call's latency is kept per agent.
    sent_at: std::time::Instant,
}

/// A request to `model` is being sent now.
pub fn sending(model: &str) -> InFlight {
    let scope = SCOPE.try_with(Scope::clone).ok();
    let reports_before = scope
        .as_ref()
        .map_or(0, |s| s.reports.load(std::sync::atomic::Ordering::Relaxed));
    InFlight {
        scope,
        model: model.to_owned(),
        answered: false,
        reports_before,
        sent_at: std::time::Instant::now(),
    }
}

impl InFlight {
    /// The exchange is over (an answer, an error status, or a transport failure). The guard
    /// lives on until the response is reported, if it is.
    pub fn answered(&mut self) {
        self.answered = true;
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.answered {
            let kind = self.scope.as_ref().map_or("none", |s| s.kind.as_str());
            metrics::counter!("personad_llm_requests_discarded_total", "model" => self.model.clone(), "kind" => kind)
                .increment(1);
        }
        let Some(Scope {
            agent,
            chat,
            kind,
            meter: Some(meter),
            reports,
        }) = &self.scope
        else {
            return;
        };
        if self.answered && *kind == CallKind::Plan {
            meter.note_latency(agent, self.sent_at.elapsed());
        }
        if !self.answered {
            tracing::debug!(agent = %agent, chat = %chat, model = %self.model, "llm request discarded before its answer (billed all the same)");
            meter.count_discarded(agent, &self.model, *kind);
        } else if reports.load(std::sync::atomic::Ordering::Relaxed) == self.reports_before {
            meter.count_request(agent, &self.model, *kind);
        }
    }
}

/// The meter's journal bookkeeping.
#[derive(Default)]
struct Journal {
    /// Lines not appended yet, oldest first.
    pending: Vec<LogLine>,
    /// The last sequence number given out, per agent.
    last_seq: BTreeMap<String, u64>,
    /// Lines in each agent's journal file (compaction folds it when long).
    length: BTreeMap<String, usize>,
}

/// Sums usage per agent, model, kind and day; persists per agent on [`UsageMeter::flush`].
pub struct UsageMeter {
    clock: SharedClock,
    state: StateDir,
    /// Locked before `journal` wherever both are held.
    totals: Mutex<BTreeMap<Key, UsageRow>>,
    journal: Mutex<Journal>,
    writing: tokio::sync::Mutex<()>,
    /// Who hears the day's spend after each request (the runtime's spending caps).
    sink: Option<Arc<dyn crate::ports::spend::SpendSink>>,
    /// When the totals were last saved (wall time): [`UsageMeter::flush_due`] saves at most
    /// every [`SAVE_EVERY`].
    saved_at: Mutex<Option<std::time::Instant>>,
    /// The latest planning calls' wall-time latencies per agent, newest last (at most
    /// [`LATENCIES_KEPT`]): `ctl say` waits after them.
    latencies: Mutex<BTreeMap<String, std::collections::VecDeque<std::time::Duration>>>,
}

/// How many planning latencies are kept per agent.
const LATENCIES_KEPT: usize = 8;

/// How often the journal is appended to while calls go on: a kill -9 loses at most the
/// counts of the calls made since the last append, which is at most this old when the next
/// call came.
pub const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(3);

impl UsageMeter {
    /// A meter continuing the totals saved under `state` (blocking; call at start-up). A
    /// journal left by a daemon that did not stop cleanly is folded into its table now.
    /// Unreadable tables, and journals with unreadable lines, are moved aside
    /// (`*.unreadable`) with a warning, never overwritten.
    pub fn load(state: StateDir, clock: SharedClock) -> UsageMeter {
        let loaded = usage_files::load(&state);
        let totals = loaded.rows.into_iter().map(|r| (r.key(), r)).collect();
        let journal = Journal {
            pending: Vec::new(),
            last_seq: loaded.last_seq,
            length: loaded.length,
        };
        UsageMeter {
            clock,
            state,
            totals: Mutex::new(totals),
            journal: Mutex::new(journal),
            writing: tokio::sync::Mutex::new(()),
            sink: None,
            saved_at: Mutex::new(None),
            latencies: Mutex::new(BTreeMap::new()),
        }
    }

    /// The meter reporting the day's spend after each request to `sink` (the runtime's
    /// spending caps).
    pub fn with_spend_sink(mut self, sink: Arc<dyn crate::ports::spend::SpendSink>) -> UsageMeter {
        self.sink = Some(sink);
        self
    }

    /// Today's (UTC) spend of `agent` and of every agent together: tokens (prompt and
    /// output) and the cost estimated with the built-in prices, in one pass over the rows.
    /// Speech has no tokens: its characters count in the cost (a dollar cap), at their price.
    pub fn spend_today(&self, agent: &str) -> (Spend, Spend) {
        static PRICES: std::sync::OnceLock<PriceTable> = std::sync::OnceLock::new();
        let prices = PRICES.get_or_init(PriceTable::builtin);
        let day = self.today();
        let totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
        let (mut own, mut all) = (Spend::default(), Spend::default());
        for r in totals.values().filter(|r| r.day == day) {
            let tokens = r.prompt_tokens.saturating_add(r.output_tokens);
            let cost = prices.cost(r);
            for s in std::iter::once(&mut all).chain((r.agent == agent).then_some(&mut own)) {
                s.tokens = s.tokens.saturating_add(tokens);
                match cost {
                    Some(usd) => s.usd += usd,
                    None => s.unpriced_tokens = s.unpriced_tokens.saturating_add(tokens),
                }
            }
        }
        (own, all)
    }

    /// Adds one answered request of `kind` and its tokens for `agent` and `model`, on today's
    /// (UTC) row.
    pub fn add(&self, agent: &str, model: &str, kind: CallKind, usage: Usage) {
        self.bump(agent, model, kind, |row| {
            row.requests = row.requests.saturating_add(1);
            row.prompt_tokens = row.prompt_tokens.saturating_add(usage.prompt_tokens);
            row.cached_tokens = row.cached_tokens.saturating_add(usage.cached_tokens);
            row.output_tokens = row.output_tokens.saturating_add(usage.output_tokens);
        });
    }

    /// Notes how long one of `agent`'s planning requests took on the wire.
    pub fn note_latency(&self, agent: &str, took: std::time::Duration) {
        let mut all = self
            .latencies
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let kept = all.entry(agent.to_owned()).or_default();
        if kept.len() == LATENCIES_KEPT {
            kept.pop_front();
        }
        kept.push_back(took);
    }

    /// The slowest of `agent`'s latest planning requests (`None` before its first answer).
    pub fn slowest_recent_plan(&self, agent: &str) -> Option<std::time::Duration> {
        let all = self
            .latencies
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        all.get(agent).and_then(|kept| kept.iter().max().copied())
    }

    /// Adds one answered speech request of `characters` for `agent` and `model`, on today's
    /// (UTC) row.
    pub fn add_speech(&self, agent: &str, model: &str, kind: CallKind, characters: u64) {
        self.bump(agent, model, kind, |row| {
            row.requests = row.requests.saturating_add(1);
            row.characters = row.characters.saturating_add(characters);
        });
    }

    /// Adds one web fetch of `bytes` for `agent` (`retrieve`), on today's (UTC) row.
    pub fn add_retrieve(&self, agent: &str, model: &str, bytes: u64) {
        self.bump(agent, model, CallKind::Retrieve, |row| {
            row.requests = row.requests.saturating_add(1);
            row.bytes = row.bytes.saturating_add(bytes);
        });
    }

    /// Requests of `kind` made for `agent` today (UTC), over every model.
    pub fn requests_today(&self, agent: &str, kind: CallKind) -> u64 {
        let day = self.today();
        self.totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|r| r.agent == agent && r.kind == kind && r.day == day)
            .map(|r| r.requests)
            .sum()
    }

    /// Counts one request of `kind` sent for `agent` with `model`.
    pub fn count_request(&self, agent: &str, model: &str, kind: CallKind) {
        self.bump(agent, model, kind, |row| {
            row.requests = row.requests.saturating_add(1)
        });
    }

    /// Counts one request whose answer was never read.
    pub fn count_discarded(&self, agent: &str, model: &str, kind: CallKind) {
        self.bump(agent, model, kind, |row| {
            row.requests = row.requests.saturating_add(1);
            row.discarded = row.discarded.saturating_add(1);
        });
    }

    /// Changes today's (UTC) row of `agent`, `model` and `kind`, and queues the change as a
    /// journal line.
    fn bump(&self, agent: &str, model: &str, kind: CallKind, change: impl FnOnce(&mut UsageRow)) {
        let mut delta = UsageRow::zero(agent, model, kind, &self.today());
        change(&mut delta);
        {
            let mut totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
            let key = delta.key();
            let row = totals.entry(key).or_insert_with(|| {
                UsageRow::zero(&delta.agent, &delta.model, delta.kind, &delta.day)
            });
            let mut journal = self.journal.lock().unwrap_or_else(PoisonError::into_inner);
            let seq = journal.last_seq.entry(agent.to_owned()).or_insert(0);
            *seq += 1;
            let line = LogLine::of(*seq, &delta);
            line.add_to(row);
            journal.pending.push(line);
        }
        if let Some(sink) = &self.sink {
            let (own, all) = self.spend_today(agent);
            let day = self.clock.now().to_zoned(jiff::tz::TimeZone::UTC).date();
            sink.spent(agent, day, own, all);
        }
    }

    /// Today's UTC date, the key of the day's rows.
    fn today(&self) -> String {
        self.clock
            .now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date()
            .to_string()
    }

    /// [`UsageMeter::load`] off the async threads (it reads the state directory), reporting
    /// spend to `sink` if given.
    pub(crate) async fn load_async(
        state: StateDir,
        clock: SharedClock,
        sink: Option<Arc<dyn crate::ports::spend::SpendSink>>,
    ) -> std::io::Result<UsageMeter> {
        tokio::task::spawn_blocking(move || {
            let meter = UsageMeter::load(state, clock);
            match sink {
                Some(sink) => meter.with_spend_sink(sink),
                None => meter,
            }
        })
        .await
        .map_err(std::io::Error::other)
    }

    /// One line of today's (UTC) totals for `agent`, for `/status`; `None` before any use.
    pub(crate) fn today_line(&self, agent: &str) -> Option<String> {
        let day = self.today();
        let rows: Vec<UsageRow> = self
            .totals()
            .into_iter()
            .filter(|r| r.agent == agent && r.day == day)
            .collect();
        if rows.is_empty() {
            return None;
        }
        let sum = |f: fn(&UsageRow) -> u64| rows.iter().map(f).sum::<u64>();
        // Estimated with the built-in prices (`state usage --prices` takes a table of yours).
        let prices = PriceTable::builtin();
        let costs: Vec<Option<f64>> = rows.iter().map(|r| prices.cost(r)).collect();
        let cost = match costs.iter().copied().sum::<Option<f64>>() {
            Some(usd) => format!(", about ${usd:.4}"),
            None => ", cost unknown (a model without a built-in price)".to_string(),
        };
        let spoken = match sum(|r| r.characters) {
            0 => String::new(),
            n => format!(", {n} characters spoken"),
        };
        Some(format!(
            "{} request(s) ({} discarded), {} prompt tokens ({} cached), {} output tokens{spoken}{cost}",
            sum(|r| r.requests),
            sum(|r| r.discarded),
            sum(|r| r.prompt_tokens),
            sum(|r| r.cached_tokens),
            sum(|r| r.output_tokens)
        ))
    }

    /// Every row, by agent, model, kind and day (the read API for status pages and metrics).
    pub fn totals(&self) -> Vec<UsageRow> {
        self.totals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Appends the calls since the last save to the journals if that save is older than
    /// [`SAVE_EVERY`] (off the hot path: a burst of calls costs one append and one sync per
    /// agent, not a rewrite per call), and folds long journals into their tables. The daemon
    /// and the playground call [`UsageMeter::flush`] once more when they stop.
    pub async fn flush_due(&self) -> Result<(), StoreError> {
        if self.save_due() {
            self.save(false).await?;
        }
        Ok(())
    }

    /// Whether the last save is older than [`SAVE_EVERY`] (or there was none).
    pub fn save_due(&self) -> bool {
        self.saved_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none_or(|at| at.elapsed() >= SAVE_EVERY)
    }

    /// Appends every call not saved yet and folds every journal into its table (at exit).
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.save(true).await
    }

    /// Appends the pending lines, then compacts the journals that are long (or, with `all`,
    /// every journal with lines). One save at a time.
    async fn save(&self, all: bool) -> Result<(), StoreError> {
        *self.saved_at.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(std::time::Instant::now());
        let _one_writer = self.writing.lock().await;
        let pending = std::mem::take(
            &mut self
                .journal
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pending,
        );
        let mut by_agent: BTreeMap<String, Vec<LogLine>> = BTreeMap::new();
        for line in pending {
            by_agent.entry(line.agent.clone()).or_default().push(line);
        }
        let state = self.state.clone();
        let appends = tokio::task::spawn_blocking(move || {
            by_agent
                .into_iter()
                .map(|(agent, lines)| {
                    let path = state.usage_log_path(&agent);
                    let written = store::ensure_private_dir(&state.usage_dir())
                        .and_then(|()| store::append_synced(&path, &usage_files::encode(&lines)));
                    (agent, lines, written)
                })
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| StoreError::Io {
            action: "usage journal task failed for",
            path: self.state.usage_dir(),
            source: std::io::Error::other(e),
        })?;
        let mut failed = None;
        {
            let mut journal = self.journal.lock().unwrap_or_else(PoisonError::into_inner);
            let mut unsaved = Vec::new();
            for (agent, lines, written) in appends {
                match written {
                    Ok(()) => *journal.length.entry(agent).or_insert(0) += lines.len(),
                    Err(e) => {
                        // Kept for the next save; a line that did reach the file counts once
                        // (its sequence number repeats).
                        unsaved.extend(lines);
                        failed.get_or_insert(e);
                    }
                }
            }
            unsaved.append(&mut journal.pending);
            journal.pending = unsaved;
        }
        self.compact(all).await;
        failed.map_or(Ok(()), Err)
    }

    /// Folds journals into their tables: each table written whole (with the last sequence
    /// number it holds), then its journal removed. A failure leaves the journal, so nothing
    /// is lost; it is tried again at the next save.
    async fn compact(&self, all: bool) {
        let due: Vec<(String, Vec<UsageRow>, u64)> = {
            let totals = self.totals.lock().unwrap_or_else(PoisonError::into_inner);
            let journal = self.journal.lock().unwrap_or_else(PoisonError::into_inner);
            journal
                .length
                .iter()
                .filter(|(_, n)| **n >= COMPACT_AT || (all && **n > 0))
                .map(|(agent, _)| {
                    let rows = totals
                        .values()
                        .filter(|r| &r.agent == agent)
                        .cloned()
                        .collect();
                    let applied = journal.last_seq.get(agent).copied().unwrap_or(0);
                    (agent.clone(), rows, applied)
                })
                .collect()
        };
        if due.is_empty() {
            return;
        }
        let state = self.state.clone();
        let done = tokio::task::spawn_blocking(move || {
            due.into_iter()
                .filter_map(|(agent, rows, applied)| {
                    match write_table(&state, &agent, rows, applied)
                        .and_then(|()| store::remove(&state.usage_log_path(&agent)))
                    {
                        Ok(()) => Some(agent),
                        Err(e) => {
                            tracing::warn!(agent = %agent, error = %e, "usage journal not folded into its table; kept");
                            None
                        }
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        let mut journal = self.journal.lock().unwrap_or_else(PoisonError::into_inner);
        for agent in done {
            journal.length.remove(&agent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/status`'s line carries today's estimated cost, or says it cannot tell.
    #[test]
    fn the_status_line_shows_todays_cost() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let clock: SharedClock = std::sync::Arc::new(crate::ports::clock::VirtualClock::new(
            jiff::Timestamp::UNIX_EPOCH,
            true,
        ));
        let meter = UsageMeter::load(StateDir::new(dir.path()), clock);
        let usage = Usage {
            prompt_tokens: 1_000_000,
            cached_tokens: 500_000,
            output_tokens: 100_000,
        };
        meter.add("ann", "gpt-5-mini", CallKind::Plan, usage);
        let line = meter.today_line("ann").unwrap_or_default();
        assert!(
            line.ends_with("100000 output tokens, about $0.3375"),
            "{line}"
        );
        meter.add("ann", "llama3.2", CallKind::Classify, usage);
        let line = meter.today_line("ann").unwrap_or_default();
        assert!(line.contains("cost unknown"), "{line}");
    }

    /// An answered planning request's latency is kept for its agent (`ctl say` waits after
    /// the slowest of the latest eight); other kinds and discarded requests are not.
    #[tokio::test]
    async fn planning_latencies_are_kept_per_agent() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let clock: SharedClock = std::sync::Arc::new(crate::ports::clock::VirtualClock::new(
            jiff::Timestamp::UNIX_EPOCH,
            true,
        ));
        let meter = Arc::new(UsageMeter::load(StateDir::new(dir.path()), clock));
        let call = |kind: CallKind, answer: bool| {
            scoped("ann", "1", kind, Some(Arc::clone(&meter)), async move {
                let mut wire = sending("local");
                if answer {
                    wire.answered();
                }
            })
        };
        call(CallKind::Classify, true).await;
        call(CallKind::Plan, false).await;
        assert_eq!(meter.slowest_recent_plan("ann"), None);
        call(CallKind::Plan, true).await;
        assert!(meter.slowest_recent_plan("ann").is_some());
        assert_eq!(meter.slowest_recent_plan("bob"), None);
        for ms in [900, 20, 30, 40, 50, 60, 70, 80] {
            meter.note_latency("bob", std::time::Duration::from_millis(ms));
        }
        assert_eq!(
            meter.slowest_recent_plan("bob"),
            Some(std::time::Duration::from_millis(900))
        );
        meter.note_latency("bob", std::time::Duration::from_millis(10));
        assert_eq!(
            meter.slowest_recent_plan("bob"),
            Some(std::time::Duration::from_millis(80)),
            "only the latest eight count"
        );
    }
}
