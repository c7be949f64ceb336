//! Owner pauses: an agent's or a chat's, with an optional end, kept in the agent's controls
//! file (crash-safe) and read back at start.

use super::*;

/// One pause: since when, and until when (none: until resumed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub since: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

impl Pause {
    pub fn active(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|u| u > now)
    }

    pub(crate) fn describe(&self) -> String {
        match self.until {
            Some(u) => format!("until {}", u.strftime("%Y-%m-%d %H:%M:%S UTC")),
            None => "until resumed".to_string(),
        }
    }
}

/// An agent's pauses, as kept in `controls.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pauses {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<Pause>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub chats: BTreeMap<i64, Pause>,
}

impl Pauses {
    /// What the runtime keeps of them (scheduled intents do not fire in a paused chat).
    pub(crate) fn for_runtime(&self) -> crate::core::scheduler::Paused {
        crate::core::scheduler::Paused {
            all: self.all.as_ref().map(|p| p.until),
            chats: self
                .chats
                .iter()
                .map(|(chat, p)| (ChatId(*chat), p.until))
                .collect(),
        }
    }

    pub fn is_paused(&self, chat: ChatId, now: Timestamp) -> bool {
        self.all.as_ref().is_some_and(|p| p.active(now))
            || self.chats.get(&chat.0).is_some_and(|p| p.active(now))
    }
}

/// Reads an agent's pauses. An unreadable file is reported and left in place; the agent then
/// runs unpaused until the owner pauses it again (which rewrites the file).
pub fn load_pauses(dir: &StateDir, agent: &str) -> Pauses {
    let path = dir.controls_path(agent);
    match store::read_optional(&path) {
        Ok(None) => Pauses::default(),
        Ok(Some(text)) => serde_json::from_str(&text).unwrap_or_else(|e| {
            tracing::error!(event = "controls_unreadable", agent, file = %path.display(), error = %e, "pauses file unreadable: the agent runs unpaused");
            Pauses::default()
        }),
        Err(e) => {
            tracing::error!(event = "controls_unreadable", agent, file = %path.display(), error = %e, "pauses file unreadable: the agent runs unpaused");
            Pauses::default()
        }
    }
}

pub(super) fn save_pauses(dir: &StateDir, agent: &str, pauses: &Pauses) -> Result<(), OpError> {
    let agent_dir = dir.agent_dir(agent);
    store::ensure_private_dir(&agent_dir).map_err(OpError::of)?;
    let text = serde_json::to_string_pretty(pauses).map_err(OpError::of)?;
    store::write_atomic(&dir.controls_path(agent), text.as_bytes()).map_err(OpError::of)
}
