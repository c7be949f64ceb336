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
/// Returns whether the state changed. Nothing here stops an agent from starting: a file that
/// cannot be read, parsed or removed is reported and left in place.
pub(crate) fn fold_controls(dir: &StateDir, agent: &str, state: &mut AgentState) -> bool {
    match fold(dir, agent, state) {
        Ok(changed) => changed,
        Err(e) => {
            tracing::error!(event = "controls_unreadable", agent, error = %e, "an old pauses file could not be moved into the agent's state: it is left in place, and the agent runs as its state says");
            false
        }
    }
}

fn fold(dir: &StateDir, agent: &str, state: &mut AgentState) -> Result<bool, StoreError> {
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

#[cfg(test)]
mod tests {
    use crate::adapters::store::layout::StateDir;
    use crate::adapters::store::legacy::fold_controls;
    use crate::core::agent_state::AgentState;
    use crate::core::model::ChatId;

    /// An old file is taken in and removed; one that does not read is left in place and the
    /// agent starts as its state says.
    #[test]
    fn an_old_file_is_folded_once_and_a_bad_one_is_left_alone()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let state = StateDir::new(dir.path());
        std::fs::create_dir_all(state.agent_dir("a"))?;
        let old = state.controls_path("a");
        std::fs::write(
            &old,
            r#"{"chats": {"7": {"since": "2026-01-01T00:00:00Z"}}}"#,
        )?;
        let mut s = AgentState::default();
        assert!(fold_controls(&state, "a", &mut s));
        assert!(s.pauses.chats.contains_key(&ChatId(7)));
        assert!(!old.exists());
        assert!(std::fs::read_to_string(state.agent_state_path("a"))?.contains("\"7\""));
        std::fs::write(&old, [0xff, 0xfe, b'{'])?;
        let mut fresh = AgentState::default();
        assert!(!fold_controls(&state, "a", &mut fresh));
        assert!(old.exists(), "a bad old file was removed");
        Ok(())
    }
}
