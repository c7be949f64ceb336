//! The group classifier call: one structured-output request (built by
//! `core::group::classifier`) over the LLM port, bounded by a timeout on the project clock,
//! its answer parsed into scores. Fails closed: every failure is an error the gate turns into
//! "not addressed". Called by the group gate's `classify` work ([`Classifier::classify_for`],
//! metered for the agent and chat as `classify` through the [`CallMeter`] the composition
//! root gives it) and by `replay` ([`Classifier::classify`], not metered).

use std::sync::Arc;
use std::time::Duration;

use crate::core::group::classifier::{
    ClassifierError, ClassifierInput, DEFAULT_TIMEOUT, Scores, build_request, parse_answer,
};
use crate::core::llm::LlmOutcome;
use crate::core::model::ChatId;
use crate::ports::clock::{self, SharedClock};
use crate::ports::llm::{CallFor, CallKind, CallMeter, Llm};

/// The classifier over an LLM.
#[derive(Clone)]
pub struct Classifier {
    llm: Arc<dyn Llm>,
    clock: SharedClock,
    timeout: Duration,
    /// Where the gate's calls are metered (none: not metered, as in `replay`).
    meter: Option<Arc<dyn CallMeter>>,
}

impl Classifier {
    pub fn new(llm: Arc<dyn Llm>, clock: SharedClock) -> Classifier {
        Classifier {
            llm,
            clock,
            timeout: DEFAULT_TIMEOUT,
            meter: None,
        }
    }

    /// The classifier metering [`Classifier::classify_for`]'s calls in `meter`.
    pub fn with_meter(mut self, meter: Arc<dyn CallMeter>) -> Classifier {
        self.meter = Some(meter);
        self
    }

    /// One call, bounded by the timeout on the project clock, not metered. The caller holds
    /// the clock if virtual time must stand still meanwhile.
    pub async fn classify(&self, input: &ClassifierInput<'_>) -> Result<Scores, ClassifierError> {
        self.run(None, input).await
    }

    /// [`Classifier::classify`] for `agent`'s gate in `chat`: metered (kind `classify`), so
    /// its tokens count in `state usage`, the metrics and the spending caps.
    pub async fn classify_for(
        &self,
        agent: &str,
        chat: ChatId,
        input: &ClassifierInput<'_>,
    ) -> Result<Scores, ClassifierError> {
        let whom = CallFor {
            agent,
            chat,
            kind: CallKind::Classify,
        };
        self.run(Some(whom), input).await
    }

    async fn run(
        &self,
        whom: Option<CallFor<'_>>,
        input: &ClassifierInput<'_>,
    ) -> Result<Scores, ClassifierError> {
        let req = build_request(input);
        let deadline = clock::add(self.clock.now(), self.timeout);
        let timer = self.clock.sleep_until(deadline);
        let call = self.llm.generate(&req);
        let call = match (whom, &self.meter) {
            (Some(whom), Some(meter)) => meter.metered(whom, call),
            _ => call,
        };
        let outcome = tokio::select! {
            r = call => r,
            _ = timer => return Err(ClassifierError::Timeout(self.timeout.as_secs())),
        };
        match outcome {
            Ok(LlmOutcome::Text(text)) => parse_answer(&text),
            Ok(LlmOutcome::Empty { finish_reason }) => Err(ClassifierError::Empty(
                finish_reason.unwrap_or_else(|| "empty".into()),
            )),
            Ok(LlmOutcome::Blocked { reason }) => Err(ClassifierError::Empty(reason)),
            Err(e) => Err(ClassifierError::Llm(e)),
        }
    }
}
