//! The on-disk form of a task graph: Markdown a person can read (a heading and a table of
//! tasks) plus exactly one fenced JSON block, which is the only source of truth when the file
//! is read back. The fence is always longer than any backtick run inside the JSON, and no
//! untrusted text (message bodies, chat titles) is written outside the JSON, so nothing a
//! stranger types can forge or break the file. Pure functions; `store` does the I/O.

use std::fmt::Write as _;

use crate::core::graph::{TaskGraph, v1};

/// Why a graph file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    #[error("no fenced ```json block found")]
    NoJsonBlock,
    #[error("more than one fenced json block (lines {first} and {second})")]
    MultipleJsonBlocks { first: usize, second: usize },
    #[error("the json block opened on line {0} is never closed")]
    Unclosed(usize),
    #[error("invalid json in the block at line {line}: {source}")]
    Json {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("invalid graph: {0}")]
    Invalid(String),
    #[error("could not serialize the graph: {0}")]
    Serialize(#[source] serde_json::Error),
}

/// Renders a graph as Markdown with its embedded JSON.
pub fn encode(graph: &TaskGraph) -> Result<String, CodecError> {
    let json = serde_json::to_string_pretty(graph).map_err(CodecError::Serialize)?;
    let fence = "`".repeat(longest_backtick_run(&json).max(2) + 1);
    let mut out = String::with_capacity(json.len() + 512);
    let kind = if graph.chat.kind.is_direct() {
        "direct"
    } else {
        "group"
    };
    // Only operator-controlled or numeric values appear outside the JSON block.
    let _ = writeln!(
        out,
        "# Task graph: agent {}, chat {} ({kind})\n",
        inline_code(&graph.agent),
        graph.chat.id
    );
    let _ = writeln!(
        out,
        "Graph `{}`, save #{}. Written by personad; the JSON block below is the source of truth.\n",
        graph.id, graph.seq
    );
    out.push_str("| # | task | kind | status | attempts | not before | depends on |\n");
    out.push_str("|---|------|------|--------|----------|------------|------------|\n");
    for (i, t) in graph.tasks.iter().enumerate() {
        let not_before = t.not_before.map(|t| t.to_string()).unwrap_or_default();
        let deps = t
            .depends_on
            .iter()
            .map(|d| inline_code(d))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            i + 1,
            inline_code(&t.id),
            t.kind(),
            t.status.as_str(),
            t.attempts,
            not_before,
            deps
        );
    }
    let _ = write!(out, "\n{fence}json\n{json}\n{fence}\n");
    Ok(out)
}

/// Reads a graph back from its Markdown form, using only the JSON block.
pub fn decode(text: &str) -> Result<TaskGraph, CodecError> {
    let mut block: Option<(usize, &str, usize)> = None; // (line, fence, byte start of json)
    let mut json_range = None;
    let mut offset = 0;
    for (idx, raw_line) in text.split_inclusive('\n').enumerate() {
        let line_no = idx + 1;
        let line = raw_line.trim_end_matches(['\n', '\r']);
        let line_start = offset;
        offset += raw_line.len();
        match block {
            None => {
                if let Some(fence) = opening_fence(line) {
                    if let Some((first, _)) = json_range {
                        return Err(CodecError::MultipleJsonBlocks {
                            first,
                            second: line_no,
                        });
                    }
                    block = Some((line_no, fence, offset));
                }
            }
            Some((open_line, fence, start)) => {
                if line.trim_end() == fence {
                    json_range = Some((open_line, (start, line_start)));
                    block = None;
                }
            }
        }
    }
    if let Some((open_line, _, _)) = block {
        return Err(CodecError::Unclosed(open_line));
    }
    let Some((open_line, (start, end))) = json_range else {
        return Err(CodecError::NoJsonBlock);
    };
    let json = text.get(start..end).unwrap_or_default();
    decode_json_at(json, open_line)
}

/// Reads a graph from its JSON alone (a journal record holds it so), with the same checks
/// as [`decode`].
pub fn decode_json(json: &str) -> Result<TaskGraph, CodecError> {
    decode_json_at(json, 0)
}

/// [`decode_json`], counting lines of errors from `open_line`.
fn decode_json_at(json: &str, open_line: usize) -> Result<TaskGraph, CodecError> {
    let json_err = |source: serde_json::Error| CodecError::Json {
        line: open_line + source.line(),
        source,
    };
    // `encode` writes the version first; other layouts (hand-edited files) take the slow
    // path of a full skim for the field.
    let format = match leading_format(json) {
        Some(v) => v,
        None => {
            serde_json::from_str::<FormatProbe>(json)
                .map_err(json_err)?
                .format
        }
    };
    let graph: TaskGraph = match format {
        1 => {
            let old: v1::GraphV1 = serde_json::from_str(json).map_err(json_err)?;
            v1::upgrade(old).map_err(|e| CodecError::Invalid(e.0))?
        }
        crate::core::graph::FORMAT_VERSION => serde_json::from_str(json).map_err(json_err)?,
        other => {
            return Err(CodecError::Invalid(format!(
                "unsupported format version {other} (this build reads 1 and {})",
                crate::core::graph::FORMAT_VERSION
            )));
        }
    };
    graph.validate().map_err(|e| CodecError::Invalid(e.0))?;
    Ok(graph)
}

/// The version when the object starts with `"format": N` (as `encode` writes it).
fn leading_format(json: &str) -> Option<u32> {
    let rest = json.trim_start().strip_prefix('{')?.trim_start();
    let rest = rest.strip_prefix("\"format\"")?.trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    let after = rest[end..].trim_start();
    if !(after.starts_with(',') || after.starts_with('}')) {
        return None;
    }
    rest[..end].parse().ok()
}

/// Only the `format` field, read first to pick the right reader.
#[derive(serde::Deserialize)]
struct FormatProbe {
    format: u32,
}

/// A line like ```` ```json ```` (three or more backticks, then `json`): returns the fence.
fn opening_fence(line: &str) -> Option<&str> {
    let ticks = line.len() - line.trim_start_matches('`').len();
    if ticks < 3 {
        return None;
    }
    let (fence, rest) = line.split_at(ticks);
    (rest.trim_end() == "json").then_some(fence)
}

fn longest_backtick_run(s: &str) -> usize {
    let mut best = 0;
    let mut run = 0;
    for c in s.chars() {
        if c == '`' {
            run += 1;
            best = best.max(run);
        } else {
            run = 0;
        }
    }
    best
}

/// Wraps a value in an inline code span that its own backticks cannot close, with line
/// breaks and pipes neutralised so it stays inside one table cell.
fn inline_code(s: &str) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() || c == '|' { ' ' } else { c })
        .collect();
    let ticks = "`".repeat(longest_backtick_run(&clean) + 1);
    format!("{ticks} {clean} {ticks}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::graph::{Task, TaskSpec};
    use crate::core::model::{Chat, ChatId, ChatKind};
    use jiff::Timestamp;

    fn sample(text: &str) -> TaskGraph {
        let now = Timestamp::UNIX_EPOCH;
        let chat = Chat {
            id: ChatId(-100),
            kind: ChatKind::Group,
            title: text.to_string(),
        };
        let mut g = TaskGraph::with_received("agent", chat, now, None, now);
        let rid = g.tasks[0].id.clone();
        g.append_chain(&rid, vec![Task::new(TaskSpec::send(text, None), now)]);
        g
    }

    #[test]
    fn fenced_text_inside_a_message_cannot_break_the_file() {
        let g = sample("```json\n{\"evil\": true}\n```\n````\n");
        let text = encode(&g).unwrap_or_default();
        let back = decode(&text);
        assert_eq!(back.ok(), Some(g));
    }

    #[test]
    fn a_second_json_block_is_rejected() {
        let g = sample("hi");
        let text = encode(&g).unwrap_or_default();
        let doubled = format!("{text}\n```json\n{{}}\n```\n");
        assert!(matches!(
            decode(&doubled),
            Err(CodecError::MultipleJsonBlocks { .. })
        ));
    }

    #[test]
    fn truncated_file_is_an_error_not_a_panic() {
        let g = sample("hello");
        let text = encode(&g).unwrap_or_default();
        // Any cut before the JSON's closing brace must fail to parse.
        let json_end = text.rfind('}').unwrap_or(0);
        for cut in 0..=json_end {
            if text.is_char_boundary(cut) {
                assert!(
                    decode(&text[..cut]).is_err(),
                    "prefix of {cut} bytes parsed"
                );
            }
        }
    }
}
