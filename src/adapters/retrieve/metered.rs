//! What every fetcher is wrapped in: [`MeteredRetriever`] holds each persona to its daily
//! cap of fetches (`# Retrieve Daily Cap`, per UTC day, counted from the usage meter's saved
//! totals so a restart does not reset it) and counts each fetch and its bytes in the usage
//! meter under `CallKind::Retrieve`, beside the LLM calls (`state usage`). A fetch refused by
//! the cap makes no request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::adapters::llm::usage::{CallKind, UsageMeter};
use crate::core::time::BoxFuture;
use crate::ports::clock::SharedClock;
use crate::ports::retrieve::{Page, RetrieveError, RetrieveRequest, Retriever};

/// The model name retrieval rows carry in the usage tables.
pub const USAGE_MODEL: &str = "web";

pub struct MeteredRetriever {
    inner: Arc<dyn Retriever>,
    meter: Option<Arc<UsageMeter>>,
    clock: SharedClock,
    /// Fetches per agent and UTC day, seeded from the meter.
    counts: Mutex<HashMap<(String, jiff::civil::Date), u32>>,
}

impl MeteredRetriever {
    pub fn new(
        inner: Arc<dyn Retriever>,
        meter: Option<Arc<UsageMeter>>,
        clock: SharedClock,
    ) -> MeteredRetriever {
        MeteredRetriever {
            inner,
            meter,
            clock,
            counts: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one of the day's fetches for `agent`, or says the cap is reached.
    fn take(&self, agent: &str, cap: u32) -> Result<(), RetrieveError> {
        let day = self.clock.now().to_zoned(jiff::tz::TimeZone::UTC).date();
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let n = counts.entry((agent.to_owned(), day)).or_insert_with(|| {
            self.meter.as_ref().map_or(0, |m| {
                u32::try_from(m.requests_today(agent, CallKind::Retrieve)).unwrap_or(u32::MAX)
            })
        });
        if *n >= cap {
            return Err(RetrieveError::DailyCap(cap));
        }
        *n += 1;
        Ok(())
    }
}

impl Retriever for MeteredRetriever {
    fn fetch<'a>(&'a self, req: RetrieveRequest<'a>) -> BoxFuture<'a, Result<Page, RetrieveError>> {
        Box::pin(async move {
            self.take(req.agent, req.daily_cap)?;
            let result = self.inner.fetch(req).await;
            let bytes = result.as_ref().map_or(0, |p| p.bytes);
            if let Some(meter) = &self.meter {
                meter.add_retrieve(req.agent, USAGE_MODEL, bytes);
            }
            result
        })
    }
}
