//! Shards in the commands: the one filter of loaded personas by this process's selection
//! (`run` at start and at each reload), the assignment table of `personad shards N`, and the
//! lines `check --shard` prints. The rule itself is `core::shard`; this only applies and
//! prints it. Called by the daemon, `check` and the `shards` command.

use std::process::ExitCode;

use crate::app::cli::{GlobalArgs, ShardArgs, ShardsArgs};
use crate::app::commands::{CmdResult, CommandError, load_personas, out};
use crate::core::persona::LoadReport;
use crate::core::shard::{Selection, assignment, counts, shard_of};

/// The selection of `--shard` / `--agent`, refused as a bad argument when malformed.
pub(crate) fn selection(args: &ShardArgs) -> Result<Selection, CommandError> {
    args.selection().map_err(CommandError::Selection)
}

/// Keeps the persona files this process runs: those whose agent is in `selection` (a file
/// that names no agent stays, so its problems are still reported). `--agent` naming an agent
/// no file declares is an error naming it.
pub(crate) fn select(report: &mut LoadReport, selection: &Selection) -> Result<(), CommandError> {
    let unknown = selection.unknown(report.entries.iter().filter_map(|e| e.name.as_deref()));
    if !unknown.is_empty() {
        return Err(CommandError::Usage(format!(
            "--agent names no persona of the agents directory: {}",
            unknown.join(", ")
        )));
    }
    report.entries.retain(|e| {
        let name = e
            .persona
            .as_ref()
            .map(|p| p.name.as_str())
            .or(e.name.as_deref());
        name.is_none_or(|n| selection.includes(n))
    });
    Ok(())
}

/// The names of the usable personas of a report, in file order.
fn names(report: &LoadReport) -> Vec<&str> {
    report.usable().map(|p| p.name.as_str()).collect()
}

/// The assignment table: one `agent  shard` line each, then the count of each shard.
pub(crate) fn table(report: &LoadReport, count: u32, mark: Option<u32>) -> String {
    let names = names(report);
    let assigned = assignment(names.iter().copied(), count);
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut text = String::new();
    for (name, shard) in &assigned {
        let here = if mark == Some(*shard) {
            "  (this shard)"
        } else {
            ""
        };
        text.push_str(&format!("{name:<width$}  shard {shard}/{count}{here}\n"));
    }
    let per: Vec<String> = counts(&assigned, count)
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{i}: {c}"))
        .collect();
    text.push_str(&format!(
        "{} agent(s) over {count} shard(s) (sha256 of the name, first 8 bytes big-endian, mod {count}); per shard: {}\n",
        assigned.len(),
        per.join(", ")
    ));
    text
}

/// What `check` prints about the selection: nothing for all agents; which agents run here.
pub(crate) fn check_lines(report: &LoadReport, selection: &Selection) -> String {
    match selection {
        Selection::All => String::new(),
        Selection::Shard(s) => {
            let mine: Vec<&str> = names(report)
                .into_iter()
                .filter(|n| shard_of(n, s.count) == s.index)
                .collect();
            format!(
                "shard {s} runs: {}\nassignment for {} shards:\n{}",
                if mine.is_empty() {
                    "-".to_string()
                } else {
                    mine.join(", ")
                },
                s.count,
                table(report, s.count, Some(s.index))
            )
        }
        Selection::Names(_) => {
            let mine: Vec<&str> = names(report)
                .into_iter()
                .filter(|n| selection.includes(n))
                .collect();
            format!("{selection}: this process runs {}\n", mine.join(", "))
        }
    }
}

/// `personad shards N`: the assignment of the agents directory's personas to N shards.
pub(crate) fn shards_command(global: &GlobalArgs, args: &ShardsArgs) -> CmdResult {
    let report = load_personas(global)?;
    out(&table(&report, args.count, None))?;
    Ok(ExitCode::SUCCESS)
}
