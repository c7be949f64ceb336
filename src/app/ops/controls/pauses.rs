//! `/pause` and `/resume` (and `ctl pause`/`resume`): the owner's pauses are runtime state,
//! kept in the agent's state (`agent-state.json`) by the runtime, which holds the pending
//! plans of a paused chat where they are until the pause ends; here the command's words become a runtime request and the
//! runtime's reply becomes the answer. Part of [`Controller`].

use std::time::Duration;

use crate::app::ops::OpError;
use crate::app::ops::controls::Controller;
use crate::core::agent_state::Pause;
use crate::core::scheduler::{OwnerReply, OwnerRequest};
use crate::ports::clock;

impl Controller {
    pub(super) async fn pause(
        &self,
        agent: &str,
        chat: Option<&str>,
        secs: Option<u64>,
    ) -> Result<String, OpError> {
        let now = self.clock.now();
        let pause = Pause {
            since: now,
            until: secs.map(|s| clock::add(now, Duration::from_secs(s))),
        };
        let target = match chat {
            Some(c) => Some(self.resolve_chat(agent, c).await?),
            None => None,
        };
        let request = OwnerRequest::Pause {
            chat: target.as_ref().map(|(id, _)| *id),
            pause: pause.clone(),
        };
        let held = match self.runtime().owner(agent, request).await {
            Some(OwnerReply::Done { held, .. }) => held.len(),
            _ => return Err(OpError::NotRunning),
        };
        let what = match &target {
            Some((id, title)) => format!("chat {id} ({title})"),
            None => "all chats".to_string(),
        };
        tracing::info!(event = "paused", agent, chat = target.as_ref().map(|t| t.0.0), until = %pause.describe(), "owner paused the agent");
        Ok(format!(
            "{agent}: paused {what} {}; {held} pending plan(s) held until it ends (a waiting draft keeps waiting)",
            pause.describe(),
        ))
    }

    pub(super) async fn resume(&self, agent: &str, chat: Option<&str>) -> Result<String, OpError> {
        let target = match chat {
            Some(c) => Some(self.resolve_chat(agent, c).await?),
            None => None,
        };
        let request = OwnerRequest::Resume {
            chat: target.as_ref().map(|(id, _)| *id),
        };
        self.done(self.runtime().owner(agent, request).await)?;
        tracing::info!(
            event = "resumed",
            agent,
            chat = target.as_ref().map(|t| t.0.0),
            "owner resumed the agent"
        );
        Ok(match target {
            Some((id, title)) if self.is_paused(agent, id) => format!(
                "{agent}: chat {id} ({title}) resumed, but every chat is still paused (resume them all to answer here)"
            ),
            Some((id, title)) => format!("{agent}: chat {id} ({title}) resumed"),
            None => format!("{agent}: resumed in every chat"),
        })
    }
}
