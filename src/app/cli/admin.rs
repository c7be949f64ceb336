//! The operator's subcommands: `personad state ...` (the state directory, offline) and
//! `personad ctl ...` (the running daemon, over its socket). Described here; `commands` and
//! `ops::ctl` carry them out.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::ShardArgs;

/// `personad state ...`.
#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// LLM token usage per agent, model and day, with an estimated cost.
    Usage {
        /// Only this agent.
        #[arg(long)]
        agent: Option<String>,
        /// A JSON price file (`{"model or prefix*": {"input": USD, "cached_input": USD,
        /// "output": USD}}` per million tokens) taking precedence over the built-in prices.
        #[arg(long, value_name = "FILE", env = "PERSONAD_PRICES")]
        prices: Option<PathBuf>,
    },
    /// One line per persisted graph; unreadable files are reported, not fatal.
    List,
    /// What an agent remembers: the persona's own facts, and the facts about each person and
    /// chat, each with its id and where it came from.
    Memory {
        /// Agent name.
        agent: String,
        /// Only a person or chat: an id, or a person's name (`@name` too).
        who: Option<String>,
        /// The playground's memory (`personad chat`) instead of the daemon's.
        #[arg(long)]
        playground: bool,
    },
    /// A persona's schedule for one local day (the current activity marked when it is today)
    /// and its scheduled intents.
    Schedule {
        /// Agent name.
        agent: String,
        /// The local day: `YYYY-MM-DD`, `today` or `tomorrow` (in the persona's zone);
        /// today when absent.
        #[arg(long, value_name = "DAY")]
        day: Option<String>,
    },
    /// A conversation as the in-memory backend recorded it (`run --telegram memory`, or the
    /// playground with `--playground`): who wrote what and when, with media descriptions.
    History {
        /// Agent name.
        agent: String,
        /// The chat: its id, or a title substring (`@name` too), as `ctl` takes it.
        #[arg(allow_negative_numbers = true)]
        chat: String,
        /// Only the last N messages.
        #[arg(long, value_name = "N", default_value_t = 50)]
        last: usize,
        /// The playground's record instead of `run --telegram memory`'s.
        #[arg(long)]
        playground: bool,
    },
    /// Show one conversation's graph task by task.
    Show {
        /// Agent name.
        agent: String,
        /// Chat id.
        chat: i64,
    },
    /// Delete persisted graphs (pending plans are forgotten). Stop the daemon first.
    #[command(group(clap::ArgGroup::new("selector").required(true).args(["agent", "all"])))]
    Clear {
        /// Only this agent's graphs.
        #[arg(long)]
        agent: Option<String>,
        /// Only this chat's graph (with --agent).
        #[arg(long, requires = "agent")]
        chat: Option<i64>,
        /// Every graph, readable or not.
        #[arg(long, conflicts_with_all = ["agent", "chat"])]
        all: bool,
    },
}

/// `personad ctl ...`.
#[derive(Debug, Clone, Subcommand)]
pub enum CtlCommand {
    /// Agents, chats with plans, breaker and disabled chats, pauses.
    Status,
    /// Pause an agent (all its chats) or one chat; optionally for a while (`30m`, `2h`, `1d`).
    Pause {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// Chat id, @username or a title substring (without it: every chat of the agent).
        #[arg(long)]
        chat: Option<String>,
        /// How long (`90s`, `30m`, `2h`, `1d`); until resumed when absent.
        #[arg(long = "for", value_name = "DURATION")]
        duration: Option<String>,
    },
    /// Lift a pause.
    Resume {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// Chat id, @username or a title substring (without it: every chat).
        #[arg(long)]
        chat: Option<String>,
    },
    /// Drop a chat's pending plan.
    Forget {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// Chat id, @username or a title substring.
        #[arg(long)]
        chat: String,
    },
    /// What a persona remembers (facts with their ids and sources, chat summaries).
    Memory {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// Only a person or chat: an id, or a person's name (`@name` too).
        who: Option<String>,
    },
    /// Forget one fact by its id, in every file that has it.
    ForgetFact {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// The fact's id as `ctl memory` shows it (or a unique start of it, 4+ characters).
        id: String,
    },
    /// A persona's schedule for today (or `--day`) and its scheduled intents.
    Schedule {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// The local day: `YYYY-MM-DD`, `today` or `tomorrow`.
        #[arg(long, value_name = "DAY")]
        day: Option<String>,
    },
    /// Show pending plans (of one chat, or all).
    Plans {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// Chat id, @username or a title substring (without it: every chat).
        #[arg(long)]
        chat: Option<String>,
    },
    /// Set a group's trigger mode.
    Mode {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// Chat id, @username or a title substring.
        #[arg(long)]
        chat: String,
        /// strict, smart or talkative.
        mode: String,
    },
    /// Drafts waiting for the owner's approval (draft mode), with what each would do.
    Drafts {
        /// The agent (every agent's drafts when absent).
        #[arg(long)]
        agent: Option<String>,
    },
    /// Approve a draft: carry its plan out, or send `--text` instead of its texts.
    Approve {
        /// The agent (found from the draft when absent).
        #[arg(long)]
        agent: Option<String>,
        /// The draft's id as `ctl drafts` shows it (or its first 4+ hex digits).
        id: String,
        /// Send this text instead of the plan's texts.
        #[arg(long)]
        text: Option<String>,
    },
    /// Reject a draft: its plan is dropped, nothing is sent.
    Reject {
        /// The agent (found from the draft when absent).
        #[arg(long)]
        agent: Option<String>,
        /// The draft's id as `ctl drafts` shows it (or its first 4+ hex digits).
        id: String,
    },
    /// Set a chat's draft mode (off, new-contacts, groups, all), over the persona's `Approval`.
    ApproveMode {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// Chat id, @username or a title substring.
        #[arg(long)]
        chat: String,
        /// off, new-contacts, groups or all; `default` clears the override.
        mode: String,
    },
    /// Where the web console's token file is (the token itself is never printed); with
    /// `--rotate`, a new token first (the old one stops working at once, even in a running
    /// console). Needs no running daemon.
    ConsoleToken {
        /// Write a new token.
        #[arg(long)]
        rotate: bool,
    },
    /// Reload personas and role prompts (as SIGHUP does).
    Reload,
    /// Stop the daemon gracefully.
    Stop,
    /// Wait until the daemon has handled everything it was given and has nothing to do for a
    /// while (nothing running, nothing left to write, no task due within --horizon), then say
    /// what waits and until when. For scripts and tests that check that nothing happened.
    WaitQuiet {
        /// How long to wait at most, in seconds (at most 50).
        #[arg(long, value_name = "SECS", default_value_t = 20)]
        timeout: u64,
        /// Quiet means no task due within this many seconds (a plan parked for the night
        /// waits longer; a debounce or a typing pause does not).
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        horizon: u64,
    },
    /// With `run --telegram memory`: deliver a message to an agent as if NAME wrote it.
    Say {
        /// The agent (needed when several run).
        #[arg(long)]
        agent: Option<String>,
        /// The chat: a direct chat with --from by default; `me` is the agent's Saved Messages
        /// (the owner writing); with `--from me`, a name is the direct chat with that user
        /// (another persona of this daemon gets it as a message from this one).
        #[arg(long)]
        chat: Option<String>,
        /// Who writes; `me` is the owner (the agent's own account, from another device).
        #[arg(long, default_value = "User")]
        from: String,
        /// Make the chat a group with this title.
        #[arg(long, value_name = "TITLE")]
        group: Option<String>,
        /// Reply to this message id (the owner answering a draft in Saved Messages).
        #[arg(long, value_name = "ID")]
        reply_to: Option<i64>,
        /// Return at once instead of waiting for the answer.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for the answer, in seconds (at most 300). By default 20 s, or
        /// longer when the agent's planning calls have lately been slow (a local model):
        /// twice the slowest of its latest calls, plus 10 s.
        #[arg(long, value_name = "SECS")]
        wait: Option<u64>,
        /// The message.
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
}

/// `personad ctl [--shard I/N] ...`.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// Which process to steer when shards share the state directory.
    #[command(flatten)]
    pub which: ShardArgs,
    #[command(subcommand)]
    pub command: CtlCommand,
}
