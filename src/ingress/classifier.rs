//! The group classifier call: one structured-output request (built by
//! `core::group::classifier`) over the LLM port, bounded by a timeout on the project clock,
//! its answer parsed into scores. Fails closed: every failure is an error the gate turns into
//! "not addressed". Called by the group gate's `classify` work and by `replay`.

use std::sync::Arc;
use std::time::Duration;

use crate::core::group::classifier::{
    ClassifierError, ClassifierInput, DEFAULT_TIMEOUT, Scores, build_request, parse_answer,
};
use crate::core::llm::LlmOutcome;
use crate::ports::clock::{self, SharedClock};
use crate::ports::llm::Llm;

/// The classifier over an LLM.
#[derive(Clone)]
pub struct Classifier {
    llm: Arc<dyn Llm>,
    clock: SharedClock,
    timeout: Duration,
}

impl Classifier {
    pub fn new(llm: Arc<dyn Llm>, clock: SharedClock) -> Classifier {
        Classifier {
            llm,
            clock,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// One call, bounded by the timeout on the project clock. The caller holds the clock if
    /// virtual time must stand still meanwhile.
    pub async fn classify(&self, input: &ClassifierInput<'_>) -> Result<Scores, ClassifierError> {
        let req = build_request(input);
        let deadline = clock::add(self.clock.now(), self.timeout);
        let timer = self.clock.sleep_until(deadline);
        let outcome = tokio::select! {
            r = self.llm.generate(&req) => r,
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
