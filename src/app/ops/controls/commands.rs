//! The owner's commands as words: [`Op`] (one operation, whether it came from a Saved
//! Messages command, `personad ctl` or the console), the `/help` text and the parser of a
//! command line. Pure; the [`super::Controller`] carries operations out.

use serde::{Deserialize, Serialize};

use crate::app::ops::OpError;

/// A command written wrong: its usage line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct CommandUsage(pub(crate) &'static str);

impl From<CommandUsage> for OpError {
    fn from(usage: CommandUsage) -> OpError {
        OpError::refused(usage.0)
    }
}

/// An operation, from a Saved Messages command or from `personad ctl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    Status,
    Pause {
        chat: Option<String>,
        secs: Option<u64>,
    },
    Resume {
        chat: Option<String>,
    },
    Forget {
        chat: String,
    },
    Plans {
        chat: Option<String>,
    },
    Mode {
        chat: String,
        mode: String,
    },
    Reload,
    Stop,
    Help,
    /// What the agent remembers (about `who`, or everything).
    Memory {
        who: Option<String>,
    },
    /// The persona's schedule (today, or a `YYYY-MM-DD` day) and its intents.
    Schedule {
        day: Option<String>,
    },
    /// Forget one fact by its id.
    ForgetFact {
        id: String,
    },
    /// Drafts waiting for the owner.
    Drafts,
    /// Approve a draft (with a text of the owner's instead of the plan's, if given).
    Approve {
        id: String,
        text: Option<String>,
    },
    /// Reject a draft.
    Reject {
        id: String,
    },
    /// A chat's draft mode (`default` clears the override).
    ApprovalMode {
        chat: String,
        mode: String,
    },
    /// Waits (at most `wait_secs`) until the runtime is quiet: everything given to it is
    /// handled, nothing runs, and nothing is due within `horizon_secs`.
    WaitQuiet {
        wait_secs: u64,
        horizon_secs: u64,
    },
    /// `--telegram memory` only: a message as if `from` wrote it.
    Say {
        chat: Option<String>,
        from: String,
        group: Option<String>,
        /// The message it replies to.
        #[serde(default)]
        reply_to: Option<i64>,
        text: String,
        /// How long to wait for the answer, in seconds (0: do not wait; none: after how
        /// long the agent's planning calls have lately taken, see `say::wait_for`).
        #[serde(default)]
        wait_secs: Option<u64>,
    },
}

pub(crate) const HELP: &str = "personad commands (Saved Messages only):
/status: agents, chats with plans, pauses, breaker, disabled chats
/pause [chat|all] [duration]: stop replying (e.g. /pause all 2h, /pause @alice)
/resume [chat|all]: reply again
/forget chat: drop the chat's pending plan
/plans [chat]: pending plans
/mode chat strict|smart|talkative: a group's trigger mode
/drafts: drafts waiting for your approval (reply to a draft: ok, no, later, or your text)
/approve id [text]: send a draft (or your text instead)
/reject id: drop a draft
/approve-mode chat off|new-contacts|groups|all|default: a chat's draft mode
/memory [person|chat]: what the persona remembers, with fact ids
/forget-fact id: forget one fact
/schedule [YYYY-MM-DD]: today's (or that day's) schedule and the scheduled intents
/stop: stop the daemon gracefully
/help: this text
A chat is an id, @username or part of its title.";

/// Parses a message as an owner command: `None` when it is not one of ours, `Some(Err)`
/// when it is but its arguments are wrong.
pub(crate) fn parse_command(text: &str) -> Option<Result<Op, CommandUsage>> {
    let text = text.trim();
    let rest = text.strip_prefix('/')?;
    let mut words = rest.split_whitespace();
    let head = words.next()?.to_lowercase();
    let head = head.split('@').next().unwrap_or_default().to_string();
    let args: Vec<&str> = words.collect();
    let joined = |a: &[&str]| {
        let s = a.join(" ");
        (!s.is_empty() && !s.eq_ignore_ascii_case("all")).then_some(s)
    };
    let op = match head.as_str() {
        "status" => Ok(Op::Status),
        "help" => Ok(Op::Help),
        "stop" => Ok(Op::Stop),
        "pause" => {
            let (chat_words, secs) = match args.split_last() {
                Some((last, init)) if parse_duration(last).is_some() => {
                    (init, parse_duration(last))
                }
                _ => (&args[..], None),
            };
            Ok(Op::Pause {
                chat: joined(chat_words),
                secs,
            })
        }
        "resume" => Ok(Op::Resume {
            chat: joined(&args),
        }),
        "plans" => Ok(Op::Plans {
            chat: joined(&args),
        }),
        "forget" => match joined(&args) {
            Some(chat) => Ok(Op::Forget { chat }),
            None => Err(CommandUsage("usage: /forget chat")),
        },
        "memory" => Ok(Op::Memory { who: joined(&args) }),
        "schedule" => Ok(Op::Schedule { day: joined(&args) }),
        "forget-fact" | "forget_fact" => match args.as_slice() {
            [id] => Ok(Op::ForgetFact {
                id: (*id).to_string(),
            }),
            _ => Err(CommandUsage("usage: /forget-fact id")),
        },
        "drafts" => Ok(Op::Drafts),
        "approve" => match args.split_first() {
            Some((id, rest)) => Ok(Op::Approve {
                id: (*id).to_string(),
                text: (!rest.is_empty()).then(|| rest.join(" ")),
            }),
            None => Err(CommandUsage("usage: /approve id [text]")),
        },
        "reject" => match args.as_slice() {
            [id] => Ok(Op::Reject {
                id: (*id).to_string(),
            }),
            _ => Err(CommandUsage("usage: /reject id")),
        },
        "approve-mode" | "approve_mode" => match args.split_last() {
            Some((mode, chat)) if !chat.is_empty() => Ok(Op::ApprovalMode {
                chat: chat.join(" "),
                mode: mode.to_lowercase(),
            }),
            _ => Err(CommandUsage(
                "usage: /approve-mode chat off|new-contacts|groups|all|default",
            )),
        },
        "mode" => match args.split_last() {
            Some((mode, chat)) if !chat.is_empty() => Ok(Op::Mode {
                chat: chat.join(" "),
                mode: mode.to_lowercase(),
            }),
            _ => Err(CommandUsage("usage: /mode chat strict|smart|talkative")),
        },
        _ => return None,
    };
    Some(op)
}

/// `90s`, `30m`, `2h`, `1d`, or plain seconds.
pub(crate) fn parse_duration(s: &str) -> Option<u64> {
    crate::core::time::parse_span(s)
}
