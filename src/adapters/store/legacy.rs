//! State files of earlier versions, folded into their successors once. The owner's pauses
//! were kept by the owner controls in `<state>/<agent>/controls.json`; they now live in the
//! agent's state (`agent-state.json`), which the runtime alone writes. At an agent's first
//! load the old file's pauses are taken into the state (unless it already holds pauses),
//! the state is saved, and only then is the old file removed: a crash in between finds the
//! pauses saved and removes the file on the next load. An old file that does not parse is
//! moved to quarantine (kept, with its reason) and the agent starts paused; nothing is lost.

use crate::adapters::store::files::{quarantine, read_optional, write_json};
use crate::adapters::store::layout::{CONTROLS_FILE, StateDir, fs_name};
use crate::core::agent_state::{AgentState, Pauses};
use crate::ports::store::{Quarantined, StoreError};

/// Folds an old `controls.json` of `agent` into `state` (saving it) and removes the file.
/// Nothing here stops an agent from starting: a file that cannot be read or removed is
/// reported and left in place. One that does not parse is moved to quarantine and returned,
/// so the runtime starts the agent paused (its pauses are unknown: fail closed).
pub(crate) fn fold_controls(
    dir: &StateDir,
    agent: &str,
    state: &mut AgentState,
) -> Option<Quarantined> {
    match fold(dir, agent, state) {
        Ok(quarantined) => quarantined,
        Err(e) => {
            tracing::error!(event = "controls_unreadable", agent, error = %e, "an old pauses file could not be moved into the agent's state: it is left in place, and the agent runs as its state says");
            None
        }
    }
}

fn fold(
    dir: &StateDir,
    agent: &str,
    state: &mut AgentState,
) -> Result<Option<Quarantined>, StoreError> {
    let path = dir.controls_path(agent);
    let Some(text) = read_optional(&path)? else {
        return Ok(None);
    };
    let old: Pauses = match serde_json::from_str(&text) {
        Ok(p) => p,
        Err(e) => {
            let moved_to = dir.quarantine_path(&fs_name(agent), CONTROLS_FILE);
            let reason = format!("the old pauses file does not read: {e}");
            quarantine(&path, &moved_to, &reason)?;
            return Ok(Some(Quarantined {
                original: path,
                moved_to,
                reason,
            }));
        }
    };
    if state.pauses.is_empty() && !old.is_empty() {
        state.pauses = old;
        write_json(&dir.agent_state_path(agent), state)?;
        tracing::info!(event = "pauses_moved", agent, file = %path.display(), "the owner's pauses moved into the agent's state");
    }
    std::fs::remove_file(&path).map_err(|source| StoreError::Io {
        action: "remove",
        path: path.clone(),
        source,
    })?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use crate::adapters::store::layout::StateDir;
    use crate::adapters::store::legacy::fold_controls;
    use crate::core::agent_state::AgentState;
    use crate::core::model::ChatId;

    /// An old file is taken in and removed; one that cannot be read is left in place (the
    /// agent starts as its state says); one that reads but does not parse is moved to
    /// quarantine and reported, so the runtime starts the agent paused.
    #[test]
    fn an_old_file_is_folded_once_a_garbled_one_is_quarantined()
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
        assert!(fold_controls(&state, "a", &mut s).is_none());
        assert!(s.pauses.chats.contains_key(&ChatId(7)));
        assert!(!old.exists());
        assert!(std::fs::read_to_string(state.agent_state_path("a"))?.contains("\"7\""));
        std::fs::write(&old, [0xff, 0xfe, b'{'])?;
        let mut fresh = AgentState::default();
        assert!(fold_controls(&state, "a", &mut fresh).is_none());
        assert!(old.exists(), "an unreadable old file was removed");
        std::fs::write(&old, "not json at all")?;
        let q = fold_controls(&state, "a", &mut fresh).ok_or("a garbled file was not reported")?;
        assert!(!old.exists() && q.moved_to.exists(), "{q:?}");
        Ok(())
    }
}
