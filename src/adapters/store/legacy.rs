//! State files of earlier versions, folded into their successors once. The owner's pauses
//! were kept by the owner controls in `<state>/<agent>/controls.json`; they now live in the
//! agent's state (`agent-state.json`), which the runtime alone writes. At an agent's first
//! load the old file's pauses are taken into the state (unless it already holds pauses),
//! the state is saved, and only then is the old file removed: a crash in between finds the
//! pauses saved and removes the file on the next load. An old file that does not read is
//! left in place and reported; nothing is lost.

use crate::adapters::store::files::{read_optional, write_json};
use crate::adapters::store::layout::StateDir;
use crate::core::agent_state::{AgentState, Pauses};
use crate::ports::store::StoreError;

/// Folds an old `controls.json` of `agent` into `state` (saving it) and removes the file.
/// Returns whether the state changed.
pub(crate) fn fold_controls(
    dir: &StateDir,
    agent: &str,
    state: &mut AgentState,
) -> Result<bool, StoreError> {
    let path = dir.controls_path(agent);
    let Some(text) = read_optional(&path)? else {
        return Ok(false);
    };
    let old: Pauses = match serde_json::from_str(&text) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(event = "controls_unreadable", agent, file = %path.display(), error = %e, "an old pauses file does not read: it is left in place, and the agent runs unpaused until the owner pauses it again");
            return Ok(false);
        }
    };
    let changed = state.pauses.is_empty() && !old.is_empty();
    if changed {
        state.pauses = old;
        write_json(&dir.agent_state_path(agent), state)?;
        tracing::info!(event = "pauses_moved", agent, file = %path.display(), "the owner's pauses moved into the agent's state");
    }
    std::fs::remove_file(&path).map_err(|source| StoreError::Io {
        action: "remove",
        path: path.clone(),
        source,
    })?;
    Ok(changed)
}
