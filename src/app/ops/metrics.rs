//! Opt-in Prometheus metrics (`--metrics-addr`): installs the `metrics` recorder and serves
//! `/metrics` (Prometheus text) and `/healthz` (200 while the tick loop has run within twice
//! its longest sleep, 503 otherwise) over the daemon's HTTP server (`ops::web`). Counters are
//! recorded where things happen (`metrics::counter!` in the runtime, handlers and LLM
//! layer); gauges are set from the tick loop's heartbeat by `daemon`. Owns the endpoint and
//! the health rule only.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::app::lifecycle::Lifecycle;
use crate::app::ops::OpError;
use crate::core::llm::{LlmOutcome, LlmRequest};
use crate::core::time::BoxFuture;
use crate::ports::llm::{Llm, LlmError};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// When the tick loop last ran.
#[derive(Debug)]
pub struct Health {
    start: Instant,
    last_beat_ms: AtomicU64,
    longest_sleep: Duration,
}

impl Health {
    /// `longest_sleep`: the most the loop sleeps between iterations (its heartbeat).
    pub fn new(longest_sleep: Duration) -> Health {
        Health {
            start: Instant::now(),
            last_beat_ms: AtomicU64::new(0),
            longest_sleep,
        }
    }

    /// The loop ran.
    pub(crate) fn beat(&self) {
        let ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_beat_ms.store(ms.max(1), Ordering::Relaxed);
    }

    /// Time since the loop last ran (`None` before it first ran).
    pub(crate) fn since_beat(&self) -> Option<Duration> {
        let last = self.last_beat_ms.load(Ordering::Relaxed);
        (last > 0).then(|| {
            self.start
                .elapsed()
                .saturating_sub(Duration::from_millis(last))
        })
    }

    pub(crate) fn healthy(&self) -> bool {
        self.since_beat()
            .is_some_and(|d| d <= self.longest_sleep * 2)
    }
}

static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the process-wide recorder (once).
pub(crate) fn install() -> Option<PrometheusHandle> {
    HANDLE
        .get_or_init(|| match PrometheusBuilder::new().install_recorder() {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::error!(event = "metrics_unavailable", error = %e, "metrics recorder could not be installed");
                None
            }
        })
        .clone()
}

/// Scrapes open at once, and how long one may take (a slow reader is closed after 10 s).
const METRICS_BUDGET: crate::app::ops::listen::Budget = crate::app::ops::listen::Budget {
    name: "metrics",
    max_connections: 32,
    deadline: Duration::from_secs(10),
};

/// A scrape's request: its head within 5 s of the accept, no body to speak of, one request
/// per connection (as before: scrapers and probes expect the close).
const METRICS_LIMITS: crate::app::ops::web::Limits = crate::app::ops::web::Limits {
    idle: Duration::from_secs(5),
    body: Duration::from_secs(5),
    body_cap: 1024,
    head_cap: 8 << 10,
    keep_alive: false,
};

/// Binds `addr` for the metrics endpoint (the daemon does it before anything else starts).
pub(crate) async fn bind(addr: SocketAddr) -> Result<TcpListener, OpError> {
    crate::app::ops::web::bind(addr, "metrics").await
}

/// Serves the bound `listener` as a task of `life` until it stops.
pub(crate) fn serve(
    listener: TcpListener,
    health: Arc<Health>,
    life: &Lifecycle,
) -> Result<JoinHandle<()>, OpError> {
    let handle = install().ok_or_else(|| OpError::refused("metrics recorder unavailable"))?;
    let local = listener
        .local_addr()
        .map_err(OpError::io("cannot read the metrics address"))?;
    tracing::info!(event = "metrics_listening", addr = %local, "metrics at /metrics, health at /healthz");
    Ok(life.spawn(crate::app::ops::web::serve(
        listener,
        METRICS_BUDGET,
        METRICS_LIMITS,
        life.clone(),
        move |request| {
            let answer = match request {
                Ok(r) => respond(&r.path, &handle, &health),
                Err(why) => (why.status(), "bad request\n".to_string()),
            };
            std::future::ready(crate::app::ops::web::Response {
                status: answer.0,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                headers: Vec::new(),
                body: answer.1.into_bytes(),
            })
        },
    )))
}

fn respond(path: &str, handle: &PrometheusHandle, health: &Health) -> (u16, String) {
    match path {
        "/metrics" => {
            if let Some(lag) = health.since_beat() {
                metrics::gauge!("personad_tick_loop_lag_seconds").set(lag.as_secs_f64());
            }
            (200, handle.render())
        }
        "/healthz" if health.healthy() => (200, "ok\n".into()),
        "/healthz" => (503, "the tick loop has not run recently\n".into()),
        _ => (404, "not found: try /metrics or /healthz\n".into()),
    }
}

/// Counts a call that is dropped before it ends (the model and the call's kind while
/// pending).
struct Discarded(Option<(String, &'static str)>);

impl Drop for Discarded {
    fn drop(&mut self) {
        if let Some((model, kind)) = self.0.take() {
            metrics::counter!("personad_llm_requests_total", "model" => model, "outcome" => "discarded", "kind" => kind)
                .increment(1);
        }
    }
}

/// Counts LLM requests and errors by model and kind of call (the enclosing usage scope's,
/// `none` outside one) around any [`Llm`] (metrics wrap the trait; the clients stay free of
/// them).
pub(crate) struct MeteredLlm {
    inner: Arc<dyn Llm>,
}

impl MeteredLlm {
    pub(crate) fn wrap(inner: Arc<dyn Llm>) -> Arc<dyn Llm> {
        Arc::new(MeteredLlm { inner })
    }
}

impl Llm for MeteredLlm {
    fn generate<'a>(&'a self, req: &'a LlmRequest) -> BoxFuture<'a, Result<LlmOutcome, LlmError>> {
        // Requests carry a route (`provider:model`): the label is the model itself.
        let model = crate::core::llm::resolve(&req.model)
            .ok()
            .and_then(|c| c.model)
            .unwrap_or_else(|| req.model.clone());
        Box::pin(async move {
            let kind = crate::adapters::llm::usage::current_kind();
            // A call dropped before it ends (its plan superseded) still counts, as `discarded`.
            let mut pending = Discarded(Some((model.clone(), kind)));
            let result = self.inner.generate(req).await;
            pending.0 = None;
            let outcome = match &result {
                Ok(LlmOutcome::Text(_)) => "text",
                Ok(LlmOutcome::Empty { .. }) => "empty",
                Ok(LlmOutcome::Blocked { .. }) => "blocked",
                Err(_) => "error",
            };
            metrics::counter!("personad_llm_requests_total", "model" => model.clone(), "outcome" => outcome, "kind" => kind).increment(1);
            if result.is_err() {
                metrics::counter!("personad_llm_errors_total", "model" => model, "kind" => kind)
                    .increment(1);
            }
            result
        })
    }
}
