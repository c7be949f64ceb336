//! What the runtime reads before its loop runs an agent: the agent's safety state, loaded
//! off the loop, failing closed when its file did not read (every chat paused, the owner
//! told why). Called by the driver at start and when an agent is added; it must not decide
//! anything the scheduler decides.

use jiff::Timestamp;
use tracing::error;

use crate::ports::store::SharedStore;
use crate::runtime::RuntimeError;
use crate::runtime::persistence::blocking;

/// An agent's safety state from disk, off the loop. An unreadable file is quarantined and
/// the agent starts **paused** (fail closed: the chats the owner paused or disabled must not
/// start answering); the second value is the owner's notice saying so.
pub(crate) async fn load_agent_state(
    store: SharedStore,
    agent: &str,
    now: Timestamp,
) -> Result<(crate::core::agent_state::AgentState, Option<String>), RuntimeError> {
    let a = agent.to_string();
    let (mut state, quarantined) = blocking(move || store.load_agent_state(&a)).await??;
    let Some(q) = quarantined else {
        return Ok((state, None));
    };
    error!(
        event = "agent_state_quarantined",
        agent = %agent,
        file = %q.original.display(),
        moved_to = %q.moved_to.display(),
        reason = %q.reason,
        "unreadable agent state (or old pauses file) moved to quarantine; the agent starts paused until the owner resumes it"
    );
    state.pauses.pause(
        None,
        crate::core::agent_state::Pause {
            since: now,
            until: None,
        },
    );
    let notice = format!(
        "personad: {} did not read and was moved to {} ({}). What it held (pauses, disabled chats, the breaker) is unknown, so to be safe every chat is paused: check it, then /resume (or /pause single chats first).",
        q.original.display(),
        q.moved_to.display(),
        q.reason
    );
    Ok((state, Some(notice)))
}
