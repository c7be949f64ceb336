//! `retrieve` blocks: the persona looks up web pages (or its `file:` resources), in either
//! form. As a task block, one target per line (blank lines and `- ` bullets are fine):
//!
//! ```text
//! # «retrieve»
//! https://en.wikipedia.org/wiki/Lemon
//! file:schedule.json
//! ```
//!
//! As the original's JSON task: `{"kind": "retrieve", "urls": ["https://…", …]}` (a single
//! `"url"` string is read too). Only a persona with `# Allow Retrieve` may retrieve; at most
//! `retrieve::MAX_URLS` targets per plan (over the whole reply), each `http`/`https` or a known
//! `file:` name (`core::retrieve::target`). What is refused here is warned about and skipped;
//! the rest of the reply still runs. Fetching and its guards are the handler's and the port's.

use super::{ParseOptions, ParsedReply, excerpt, warn};
use crate::core::plan::Action;
use crate::core::retrieve::{self, MAX_URLS};

/// Reads a `retrieve` block's body.
pub(super) fn parse_retrieve(out: &mut ParsedReply, label: &str, body: &str, opts: &ParseOptions) {
    let urls = body
        .lines()
        .map(|l| l.trim().trim_start_matches("- ").trim())
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    push(out, label, urls, opts);
}

/// Reads a `retrieve` JSON task.
pub(super) fn parse_json_retrieve(
    out: &mut ParsedReply,
    label: &str,
    obj: &serde_json::Map<String, serde_json::Value>,
    opts: &ParseOptions,
) {
    let urls = match obj.get("urls").or_else(|| obj.get("url")) {
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    push(out, label, urls, opts);
}

fn push(out: &mut ParsedReply, label: &str, urls: Vec<String>, opts: &ParseOptions) {
    if !opts.allow_retrieve {
        warn(
            out,
            label,
            "retrieve is not enabled for this persona (`# Allow Retrieve`); skipped",
        );
        return;
    }
    // Targets already asked for by earlier retrieve tasks of this reply count too.
    let mut taken: usize = out
        .actions
        .iter()
        .map(|a| match a {
            Action::Retrieve { urls } => urls.len(),
            _ => 0,
        })
        .sum();
    let mut kept: Vec<String> = Vec::new();
    for raw in urls {
        let url = raw.trim().trim_start_matches('<').trim_end_matches('>').to_owned();
        // An unknown `file:` name goes on: the handler refuses it where the operator sees it.
        if let Err(why) = retrieve::target(&url)
            && !matches!(why, retrieve::Refused::UnknownFile(_))
        {
            warn(out, label, format_args!("{why}; skipped"));
            continue;
        }
        if kept.contains(&url) {
            continue;
        }
        if taken >= MAX_URLS {
            warn(
                out,
                label,
                format_args!("at most {MAX_URLS} URLs per plan; {} skipped", excerpt(&url)),
            );
            continue;
        }
        taken += 1;
        kept.push(url);
    }
    if kept.is_empty() {
        warn(out, label, "names no URL to retrieve; skipped");
        return;
    }
    out.actions.push(Action::Retrieve { urls: kept });
}
