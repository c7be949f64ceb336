//! The one LLM retry policy (`RetryingLlm`) around a scripted provider, on a virtual clock:
//! full-jitter bounds, Retry-After, the time budget inside the task timeout, the outage
//! guard that bounds requests during an outage, and silence passing through untouched.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use personad::adapters::llm::retry::{RetryConfig, RetryingLlm};
use personad::core::llm::{LlmOutcome, LlmRequest, Turn};
use personad::core::time::BoxFuture;
use personad::ports::backoff::Backoff;
use personad::ports::clock::{self, Clock, SharedClock, VirtualClock};
use personad::ports::llm::{Llm, LlmError};

fn t0() -> Timestamp {
    Timestamp::from_second(1_700_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// A provider answering from a script; each call takes `takes` of clock time. When the
/// script runs out it repeats its last entry.
struct Scripted {
    script: Mutex<VecDeque<Result<LlmOutcome, LlmError>>>,
    last: Mutex<Option<Result<LlmOutcome, LlmError>>>,
    calls: Mutex<Vec<Timestamp>>,
    takes: Duration,
    clock: SharedClock,
}

impl Scripted {
    fn new(
        clock: &VirtualClock,
        takes: Duration,
        script: Vec<Result<LlmOutcome, LlmError>>,
    ) -> Arc<Scripted> {
        Arc::new(Scripted {
            script: Mutex::new(script.into()),
            last: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
            takes,
            clock: Arc::new(clock.clone()),
        })
    }

    fn calls(&self) -> usize {
        self.calls.lock().map(|c| c.len()).unwrap_or(0)
    }
}

impl Llm for Scripted {
    fn generate<'a>(&'a self, _: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        Box::pin(async move {
            if let Ok(mut c) = self.calls.lock() {
                c.push(self.clock.now());
            }
            if !self.takes.is_zero() {
                clock::pause(self.clock.as_ref(), self.takes).await;
            }
            let next = self.script.lock().ok().and_then(|mut s| s.pop_front());
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            match next {
                Some(r) => {
                    *last = Some(r.clone());
                    r
                }
                None => last.clone().unwrap_or(Ok(LlmOutcome::Text("ok".into()))),
            }
        })
    }
}

fn overloaded() -> Result<LlmOutcome, LlmError> {
    Err(LlmError::Transient {
        status: Some(503),
        message: "overloaded".into(),
        retry_after: None,
    })
}

fn slow_down(secs: u64) -> Result<LlmOutcome, LlmError> {
    Err(LlmError::Transient {
        status: Some(429),
        message: "slow down".into(),
        retry_after: Some(Duration::from_secs(secs)),
    })
}

fn ok() -> Result<LlmOutcome, LlmError> {
    Ok(LlmOutcome::Text("hello".into()))
}

fn request() -> LlmRequest {
    LlmRequest {
        model: "m".into(),
        system: String::new(),
        turns: vec![Turn::user("hi")],
        temperature: None,
        max_output_tokens: None,
        response_schema: None,
    }
}

fn elapsed(clock: &VirtualClock) -> Duration {
    Duration::try_from(clock.now().duration_since(t0())).unwrap_or_default()
}

fn wrap(inner: &Arc<Scripted>, config: RetryConfig, clock: &VirtualClock) -> RetryingLlm {
    RetryingLlm::new(inner.clone(), config, Arc::new(clock.clone()))
}

/// Full jitter: each wait before retry n lies in [0, min(cap, base·2^(n-1))], and the waits
/// really vary from one call to the next.
#[tokio::test]
async fn waits_between_attempts_stay_within_the_full_jitter_bounds() {
    let mut totals = Vec::new();
    for _ in 0..40 {
        let clock = VirtualClock::new(t0(), true);
        let inner = Scripted::new(
            &clock,
            Duration::ZERO,
            vec![overloaded(), overloaded(), ok()],
        );
        let llm = wrap(&inner, RetryConfig::default(), &clock);
        assert_eq!(llm.generate(&request()).await, ok());
        assert_eq!(inner.calls(), 3);
        let calls = inner.calls.lock().map(|c| c.clone()).unwrap_or_default();
        let gap = |i: usize| Duration::try_from(calls[i].duration_since(calls[i - 1])).unwrap();
        assert!(gap(1) <= Duration::from_secs(2), "{:?}", gap(1));
        assert!(gap(2) <= Duration::from_secs(4), "{:?}", gap(2));
        totals.push(elapsed(&clock));
    }
    totals.sort();
    totals.dedup();
    assert!(totals.len() > 20, "the waits must be random: {totals:?}");
}

/// A server's Retry-After is waited exactly (it is longer than any jittered backoff here).
#[tokio::test]
async fn retry_after_is_honoured() {
    let clock = VirtualClock::new(t0(), true);
    let inner = Scripted::new(&clock, Duration::ZERO, vec![slow_down(7), ok()]);
    let llm = wrap(&inner, RetryConfig::default(), &clock);
    assert_eq!(llm.generate(&request()).await, ok());
    assert_eq!(inner.calls(), 2);
    assert_eq!(elapsed(&clock), Duration::from_secs(7));
}

/// A Retry-After beyond the backoff cap is not waited inside the call: it fails after one
/// request, and the model's outage guard stays open for the asked time (no request meanwhile).
#[tokio::test]
async fn a_retry_after_beyond_the_cap_ends_the_call_and_is_kept_by_the_guard() {
    let clock = VirtualClock::new(t0(), true);
    let inner = Scripted::new(&clock, Duration::ZERO, vec![slow_down(3600), ok()]);
    let llm = wrap(&inner, RetryConfig::default(), &clock);
    let err = llm.generate(&request()).await.unwrap_err();
    assert_eq!(err.status(), Some(429));
    assert_eq!(inner.calls(), 1);
    assert_eq!(elapsed(&clock), Duration::ZERO);
    drop(clock::sleep(&clock, Duration::from_secs(1800)).await);
    let err = llm.generate(&request()).await.unwrap_err();
    assert!(err.is_transient());
    assert_eq!(err.retry_after(), Some(Duration::from_secs(1800)));
    assert_eq!(inner.calls(), 1, "no request while the guard is open");
    drop(clock::sleep(&clock, Duration::from_secs(1800)).await);
    assert_eq!(llm.generate(&request()).await, ok());
    assert_eq!(inner.calls(), 2);
}

/// Attempts and their waits stay inside the budget derived from the task timeout: with
/// requests that each take the whole per-request limit, the wrapper stops before another
/// attempt could overrun, however many attempts it was allowed.
#[tokio::test]
async fn attempts_fit_inside_the_task_timeout() {
    for task_timeout_secs in [60u64, 100, 180, 300] {
        let task_timeout = Duration::from_secs(task_timeout_secs);
        let mut config = RetryConfig::within_task_timeout(task_timeout, 10);
        config.request_timeout = Duration::from_secs(20);
        let clock = VirtualClock::new(t0(), true);
        let inner = Scripted::new(&clock, config.request_timeout, vec![overloaded()]);
        let llm = wrap(&inner, config, &clock);
        let err = llm.generate(&request()).await.unwrap_err();
        assert!(err.is_transient());
        let took = elapsed(&clock);
        assert!(took <= config.budget, "{took:?} > {:?}", config.budget);
        assert!(config.budget < task_timeout);
        assert!(inner.calls() >= 2, "{} calls", inner.calls());
    }
}

/// During an outage the guard bounds the cost: after a call spends its attempts, calls fail
/// without a request until the cooldown (30 s, then 60 s, …) is over, then one probe goes
/// out; a success closes the guard and the next call has its full attempts again.
#[tokio::test]
async fn the_outage_guard_lets_one_probe_through_per_cooldown() {
    let clock = VirtualClock::new(t0(), true);
    let inner = Scripted::new(&clock, Duration::ZERO, vec![overloaded()]);
    let config = RetryConfig {
        backoff: Backoff::new(Duration::ZERO, Duration::ZERO),
        ..RetryConfig::default()
    };
    let llm = wrap(&inner, config, &clock);
    assert!(llm.generate(&request()).await.is_err());
    assert_eq!(inner.calls(), 3);
    for _ in 0..5 {
        assert!(llm.generate(&request()).await.is_err());
    }
    assert_eq!(inner.calls(), 3, "guard open: no requests");
    drop(clock::sleep(&clock, Duration::from_secs(30)).await);
    assert!(llm.generate(&request()).await.is_err());
    assert_eq!(inner.calls(), 4, "one probe after the first cooldown");
    drop(clock::sleep(&clock, Duration::from_secs(59)).await);
    assert!(llm.generate(&request()).await.is_err());
    assert_eq!(inner.calls(), 4, "the second cooldown is 60 s");
    drop(clock::sleep(&clock, Duration::from_secs(1)).await);
    if let Ok(mut s) = inner.script.lock() {
        s.push_back(ok());
    }
    assert_eq!(llm.generate(&request()).await, ok());
    assert_eq!(inner.calls(), 5);
    assert_eq!(
        RetryConfig::default().worst_case_requests(10),
        12,
        "documented bound"
    );
}

/// Silence is free and errors that retrying cannot fix are not retried: one request each.
#[tokio::test]
async fn empty_answers_and_permanent_errors_cost_one_request() {
    let clock = VirtualClock::new(t0(), true);
    let empty = Ok(LlmOutcome::Empty {
        finish_reason: Some("STOP".into()),
    });
    let inner = Scripted::new(&clock, Duration::ZERO, vec![empty.clone(), ok()]);
    let llm = wrap(&inner, RetryConfig::default(), &clock);
    assert_eq!(llm.generate(&request()).await, empty);
    assert_eq!(inner.calls(), 1);

    let denied = Err(LlmError::Permanent {
        status: Some(401),
        message: "bad key".into(),
    });
    let inner = Scripted::new(&clock, Duration::ZERO, vec![denied.clone(), ok()]);
    let llm = wrap(&inner, RetryConfig::default(), &clock);
    assert_eq!(llm.generate(&request()).await, denied);
    assert_eq!(inner.calls(), 1);
}
