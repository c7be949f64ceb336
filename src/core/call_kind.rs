//! What a metered LLM call was for ([`CallKind`]): the planner's plans, summaries and presence
//! days, the group classifier's calls, media descriptions, speech for voice notes and web
//! pages fetched for `retrieve`. Each call's usage scope names
//! its kind (`adapters::llm::usage::scoped`, or `ports::llm::CallMeter` from the group gate);
//! the usage files key their rows by it, `personad state usage` prints it and the token and
//! request metrics carry it as the `kind` label. It owns only the names and their spelling on
//! disk; it does not meter.

use serde::{Deserialize, Serialize};

/// What a metered call was for.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CallKind {
    /// The planner's reply to a chat (`Planner::plan`).
    Plan,
    /// A summary of a chat's older messages (`Planner::summarize`).
    Summary,
    /// The presence day's schedule (`Planner::schedule`; counted under chat 0).
    Schedule,
    /// The group classifier's call for a batch of group messages.
    Classify,
    /// A media description (summed under the agent `(media)`).
    Media,
    /// Speech synthesized for a voice note (counted in characters, not tokens).
    Speech,
    /// A web page fetched for a `retrieve` task (counted in bytes; no tokens, no price).
    Retrieve,
    /// Rows written before calls had kinds: plans, summaries and schedule calls (and, under
    /// `(media)`, media descriptions) counted together. Usage files without a kind read as
    /// this; nothing new is counted under it.
    #[default]
    Mixed,
}

impl CallKind {
    /// Every kind, in the order `state usage` lists them.
    pub const ALL: [CallKind; 8] = [
        CallKind::Plan,
        CallKind::Summary,
        CallKind::Schedule,
        CallKind::Classify,
        CallKind::Media,
        CallKind::Speech,
        CallKind::Retrieve,
        CallKind::Mixed,
    ];

    /// Its name in the usage files, `state usage` and the metrics' `kind` label.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Plan => "plan",
            CallKind::Summary => "summary",
            CallKind::Schedule => "schedule",
            CallKind::Classify => "classify",
            CallKind::Media => "media",
            CallKind::Speech => "speech",
            CallKind::Retrieve => "retrieve",
            CallKind::Mixed => "mixed",
        }
    }
}

impl std::fmt::Display for CallKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::CallKind;

    #[test]
    fn names_on_disk_are_the_displayed_names() {
        for kind in CallKind::ALL {
            let json = serde_json::to_string(&kind).unwrap_or_default();
            assert_eq!(json, format!("\"{kind}\""));
            let back: Option<CallKind> = serde_json::from_str(&json).ok();
            assert_eq!(back, Some(kind));
        }
    }
}
