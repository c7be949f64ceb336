//! What every voice is wrapped in: [`RetryingSpeech`], the LLM layer's one retry policy
//! (`llm::retry::RetryPolicy`: attempts, backoff on the project clock, the time budget, the
//! outage guard), and [`MeteredSpeech`], which counts each attempt and its characters in the
//! process's usage meter under [`CallKind::Speech`] and refuses an agent held by a reached
//! daily cap ([`SpeechError::CapReached`], before any request) through the same marks that
//! hold its planning (`ports::spend::CapHold`). The agent and chat come from the caller's
//! usage scope ([`synthesize_for`]), as an LLM call's do. The factory in `speech` stacks them
//! as retry over metering over the client, so each attempt is counted and checked.

use std::sync::Arc;
use std::time::Duration;

use crate::adapters::llm::retry::{RetryConfig, RetryPolicy, Retryable};
use crate::adapters::llm::usage::{self, CallKind, UsageMeter};
use crate::core::model::ChatId;
use crate::core::time::BoxFuture;
use crate::ports::clock::SharedClock;
use crate::ports::speech::{Speech, SpeechAudio, SpeechError, SpeechRequest};
use crate::ports::spend::CapHold;

/// The agent counted when no usage scope names one.
pub const UNSCOPED_AGENT: &str = "(speech)";

impl Retryable for SpeechError {
    fn is_transient(&self) -> bool {
        SpeechError::is_transient(self)
    }

    fn retry_after(&self) -> Option<Duration> {
        None
    }

    fn status(&self) -> Option<u16> {
        None
    }

    fn guard_open(message: String, _left: Duration) -> SpeechError {
        SpeechError::Transient(message)
    }
}

/// Runs `speech.synthesize(req)` for `agent` in `chat`: metered and held at a reached cap
/// under that agent (the usage scope [`MeteredSpeech`] reads).
pub async fn synthesize_for(
    speech: &dyn Speech,
    agent: &str,
    chat: ChatId,
    req: &SpeechRequest,
) -> Result<SpeechAudio, SpeechError> {
    let chat = chat.to_string();
    usage::scoped(agent, &chat, CallKind::Speech, None, speech.synthesize(req)).await
}

/// Retries transient failures of an inner voice with the LLM layer's policy.
pub struct RetryingSpeech {
    inner: Arc<dyn Speech>,
    policy: RetryPolicy,
    /// The outage guard's key: what the inner voice is.
    key: String,
}

impl RetryingSpeech {
    pub fn new(inner: Arc<dyn Speech>, config: RetryConfig, clock: SharedClock) -> RetryingSpeech {
        RetryingSpeech {
            key: inner.describe(),
            inner,
            policy: RetryPolicy::new(config, clock, "speech"),
        }
    }
}

impl Speech for RetryingSpeech {
    fn synthesize<'a>(
        &'a self,
        req: &'a SpeechRequest,
    ) -> BoxFuture<'a, Result<SpeechAudio, SpeechError>> {
        Box::pin(self.policy.run(&self.key, || self.inner.synthesize(req)))
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

/// Counts requests and characters, and holds an agent at a reached cap (see the module docs).
pub struct MeteredSpeech {
    inner: Arc<dyn Speech>,
    provider: String,
    model: String,
    meter: Option<Arc<UsageMeter>>,
    hold: Option<Arc<dyn CapHold>>,
    clock: SharedClock,
}

impl MeteredSpeech {
    /// `inner` counted as `provider`'s `model` in `meter` (none: logged only), held by `hold`
    /// (none: never held).
    pub fn new(
        inner: Arc<dyn Speech>,
        provider: &str,
        model: &str,
        meter: Option<Arc<UsageMeter>>,
        hold: Option<Arc<dyn CapHold>>,
        clock: SharedClock,
    ) -> MeteredSpeech {
        MeteredSpeech {
            inner,
            provider: provider.to_owned(),
            model: model.to_owned(),
            meter,
            hold,
            clock,
        }
    }

    async fn run(&self, req: &SpeechRequest) -> Result<SpeechAudio, SpeechError> {
        let (agent, chat) =
            usage::current_call().unwrap_or_else(|| (UNSCOPED_AGENT.to_owned(), "-".to_owned()));
        if self
            .hold
            .as_ref()
            .is_some_and(|h| h.holds(&agent, self.clock.now()))
        {
            tracing::info!(agent = %agent, model = %self.model, "speech held: the daily budget is reached");
            return Err(SpeechError::CapReached { agent });
        }
        let attempt = async {
            // Counted as a request whatever comes of it (discarded if dropped unanswered);
            // an answer counts once, with its characters.
            let mut in_flight = usage::sending(&self.model);
            let result = self.inner.synthesize(req).await;
            in_flight.answered();
            if result.is_ok() {
                usage::report_speech(&self.provider, &self.model, req.characters());
            }
            drop(in_flight);
            result
        };
        usage::metered(
            &agent,
            &chat,
            CallKind::Speech,
            self.meter.as_ref(),
            attempt,
        )
        .await
    }
}

impl Speech for MeteredSpeech {
    fn synthesize<'a>(
        &'a self,
        req: &'a SpeechRequest,
    ) -> BoxFuture<'a, Result<SpeechAudio, SpeechError>> {
        Box::pin(self.run(req))
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}
