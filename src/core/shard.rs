//! Which agents one process runs: all of them, shard I of N (`--shard I/N`), or a list of
//! names (`--agents A,B`). The shard of an agent is a stable hash of its name: the first 8
//! bytes of the SHA-256 of the name's UTF-8 bytes, read as a big-endian `u64`, modulo N. It
//! never changes across releases or platforms (a test pins the values), so every process of
//! a deployment agrees on the assignment without talking to the others.
//!
//! Pure: it reads no file and knows no persona type; the daemon filters what it loaded
//! through [`Selection::includes`], `check` and `personad shards` print [`assignment`].

use std::collections::BTreeSet;

use sha2::{Digest as _, Sha256};

use super::Invalid;

/// Shard `index` of `count` (0-based, `index < count`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Parses `I/N` (`0/2`, `1/2`): N at least 1, I below N.
    pub fn parse(text: &str) -> Result<Shard, Invalid> {
        let bad = || Invalid(format!("shard {text:?} is not I/N (for example 0/2)"));
        let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
        let index: u32 = i.trim().parse().map_err(|_| bad())?;
        let count: u32 = n.trim().parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(Invalid(format!(
                "shard {text:?}: the number of shards must be at least 1"
            )));
        }
        if index >= count {
            return Err(Invalid(format!(
                "shard {text:?}: the index counts from 0 and must be below {count}"
            )));
        }
        Ok(Shard { index, count })
    }

    /// Whether this shard runs the agent `name`.
    pub fn includes(&self, name: &str) -> bool {
        shard_of(name, self.count) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The stable hash of an agent name: the first 8 bytes of SHA-256 of its UTF-8 bytes, as a
/// big-endian `u64`. Changing it moves agents between shards: a test pins its values.
pub fn name_hash(name: &str) -> u64 {
    let digest = Sha256::digest(name.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The shard (of `count`) that runs the agent `name`. A `count` of 0 counts as 1.
pub fn shard_of(name: &str, count: u32) -> u32 {
    let n = u64::from(count.max(1));
    // The remainder is below `count`, a u32.
    u32::try_from(name_hash(name) % n).unwrap_or(0)
}

/// Which agents a process runs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Selection {
    /// Every agent (no `--shard`, no `--agents`).
    #[default]
    All,
    /// The agents of one shard.
    Shard(Shard),
    /// The agents named (`--agents`).
    Names(BTreeSet<String>),
}

impl Selection {
    /// Whether this process runs the agent `name`.
    pub fn includes(&self, name: &str) -> bool {
        match self {
            Selection::All => true,
            Selection::Shard(s) => s.includes(name),
            Selection::Names(names) => names.contains(name),
        }
    }

    /// Whether a selection narrows the agents (a shard or names).
    pub fn is_partial(&self) -> bool {
        !matches!(self, Selection::All)
    }

    /// The names of `--agents` that are not among `known` (an error to report, naming them).
    pub fn unknown<'a>(&self, known: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let Selection::Names(names) = self else {
            return Vec::new();
        };
        let known: BTreeSet<&str> = known.into_iter().collect();
        names
            .iter()
            .filter(|n| !known.contains(n.as_str()))
            .cloned()
            .collect()
    }

    /// Parses `--agents A,B` (names trimmed, empty ones dropped; none at all is refused).
    pub fn names(list: &str) -> Result<Selection, Invalid> {
        let names: BTreeSet<String> = list
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect();
        if names.is_empty() {
            return Err(Invalid("--agents names no agent".into()));
        }
        Ok(Selection::Names(names))
    }
}

impl std::fmt::Display for Selection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Selection::All => f.write_str("all agents"),
            Selection::Shard(s) => write!(f, "shard {s}"),
            Selection::Names(names) => {
                f.write_str("agents ")?;
                let list: Vec<&str> = names.iter().map(String::as_str).collect();
                f.write_str(&list.join(","))
            }
        }
    }
}

/// The assignment of `names` to `count` shards: (name, shard) in the order given.
pub fn assignment<'a>(names: impl IntoIterator<Item = &'a str>, count: u32) -> Vec<(&'a str, u32)> {
    names.into_iter().map(|n| (n, shard_of(n, count))).collect()
}

/// How many of `assigned` each of `count` shards runs (index = shard).
pub fn counts(assigned: &[(&str, u32)], count: u32) -> Vec<usize> {
    let mut out = vec![0usize; count.max(1) as usize];
    for (_, s) in assigned {
        if let Some(c) = out.get_mut(*s as usize) {
            *c += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Selection, Shard, assignment, counts, name_hash, shard_of};

    /// The hash is a contract between releases: these values must never change.
    #[test]
    fn the_hash_of_fixed_names_is_pinned() {
        assert_eq!(name_hash(""), 0xe3b0_c442_98fc_1c14);
        assert_eq!(name_hash("alice"), 0x2bd8_06c9_7f0e_00af);
        assert_eq!(name_hash("Bob"), 0xcd9f_b1e1_48cc_d844);
        assert_eq!(shard_of("alice", 2), 1);
        assert_eq!(shard_of("alice", 3), 2);
        assert_eq!(shard_of("Bob", 2), 0);
        assert_eq!(shard_of("anything", 1), 0);
        assert_eq!(shard_of("anything", 0), 0);
    }

    #[test]
    fn names_spread_roughly_evenly() {
        let names: Vec<String> = (0..4000).map(|i| format!("agent-{i}")).collect();
        let assigned = assignment(names.iter().map(String::as_str), 4);
        for c in counts(&assigned, 4) {
            assert!((800..=1200).contains(&c), "uneven shard: {c} of 4000");
        }
    }

    #[test]
    fn shards_partition_the_agents() {
        let names: Vec<String> = (0..50).map(|i| format!("p{i}")).collect();
        for n in names.iter().map(String::as_str) {
            let holders = (0..3)
                .filter(|i| {
                    Shard {
                        index: *i,
                        count: 3,
                    }
                    .includes(n)
                })
                .count();
            assert_eq!(holders, 1, "{n}");
        }
    }

    #[test]
    fn shard_text_is_parsed_and_checked() {
        assert_eq!(Shard::parse("1/2"), Ok(Shard { index: 1, count: 2 }));
        assert_eq!(Shard::parse(" 0 / 1 "), Ok(Shard { index: 0, count: 1 }));
        for bad in ["2/2", "0/0", "1", "a/2", "-1/2", ""] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Shard { index: 3, count: 8 }.to_string(), "3/8");
    }

    #[test]
    fn a_name_list_selects_those_and_names_the_unknown() {
        let s = Selection::names("alice, bob,,").unwrap_or_default();
        assert!(s.includes("alice") && s.includes("bob") && !s.includes("carol"));
        assert_eq!(s.unknown(["alice", "carol"]), vec!["bob".to_string()]);
        assert!(Selection::names(" , ").is_err());
        assert!(Selection::All.includes("x") && !Selection::All.is_partial());
        assert_eq!(s.to_string(), "agents alice,bob");
    }
}
