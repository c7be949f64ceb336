//! The options that choose which agents a process runs (`run`, `check`, `ctl`) and the
//! `shards` command's. Only describes them; `core::shard` decides, the daemon filters.

use clap::Args;

use crate::core::Invalid;
use crate::core::shard::{Selection, Shard};

/// Which agents this process runs: `--shard I/N` or `--agent NAME,...` (all by default).
#[derive(Debug, Clone, Default, Args)]
pub struct ShardArgs {
    /// Run only shard I of N (0-based): the agents whose name hashes there (the first 8
    /// bytes of SHA-256 of the name, big-endian, modulo N; `personad shards N` prints the
    /// assignment). The flag wins over the environment.
    #[arg(long, value_name = "I/N", env = "PERSONAD_SHARD")]
    pub shard: Option<String>,
    /// Run only the agents named (comma-separated or repeated); an unknown name is an error.
    /// Wins over `--shard`.
    #[arg(long = "agent", value_name = "NAME", value_delimiter = ',')]
    pub agent: Vec<String>,
}

impl ShardArgs {
    /// The selection these options name.
    pub fn selection(&self) -> Result<Selection, Invalid> {
        if !self.agent.is_empty() {
            return Selection::names(&self.agent.join(","));
        }
        match &self.shard {
            Some(s) if !s.trim().is_empty() => Shard::parse(s).map(Selection::Shard),
            _ => Ok(Selection::All),
        }
    }

    /// The label of this process's control socket (`shard-0-of-2`, `agents-<hash>`), `None`
    /// when it runs every agent.
    pub fn socket_label(&self) -> Result<Option<String>, Invalid> {
        Ok(socket_label(&self.selection()?))
    }
}

/// The control socket label of a selection (see [`ShardArgs::socket_label`]).
pub fn socket_label(selection: &Selection) -> Option<String> {
    match selection {
        Selection::All => None,
        Selection::Shard(s) => Some(format!("shard-{}-of-{}", s.index, s.count)),
        Selection::Names(names) => {
            let list: Vec<&str> = names.iter().map(String::as_str).collect();
            let hash = crate::core::shard::name_hash(&list.join(","));
            Some(format!("agents-{hash:016x}"))
        }
    }
}

/// `personad shards N`.
#[derive(Debug, Clone, Args)]
pub struct ShardsArgs {
    /// The number of shards to plan for.
    #[arg(value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub count: u32,
}
