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
        let url = raw
            .trim()
            .trim_start_matches('<')
            .trim_end_matches('>')
            .to_owned();
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
                format_args!(
                    "at most {MAX_URLS} URLs per plan; {} skipped",
                    excerpt(&url)
                ),
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

#[cfg(test)]
mod tests {
    use crate::core::blocks::{ParseOptions, parse_reply};
    use crate::core::plan::Action;

    fn allowed() -> ParseOptions {
        ParseOptions {
            allow_retrieve: true,
            ..ParseOptions::default()
        }
    }

    fn urls(reply: &str, opts: &ParseOptions) -> (Vec<Vec<String>>, Vec<String>) {
        let parsed = parse_reply(reply, opts);
        let urls = parsed
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Retrieve { urls } => Some(urls.clone()),
                _ => None,
            })
            .collect();
        (urls, parsed.warnings)
    }

    /// Both forms give the same action; the original's JSON is read as it writes it.
    #[test]
    fn blocks_and_json_tasks_are_read() {
        let block = "# «retrieve»\nhttps://a.org/x\n- <http://b.org>\n\n# «send»\nlooking";
        let (got, warnings) = urls(block, &allowed());
        assert_eq!(got, [["https://a.org/x", "http://b.org"]], "{warnings:?}");
        let json = r#"[{"kind": "retrieve", "urls": ["https://a.org/x", "file:schedule.json"]}]"#;
        let (got, warnings) = urls(json, &allowed());
        assert_eq!(
            got,
            [["https://a.org/x", "file:schedule.json"]],
            "{warnings:?}"
        );
        let schema = r#"{"tasks": [{"kind": "retrieve", "urls": ["https://a.org"]}]}"#;
        assert_eq!(urls(schema, &allowed()).0, [["https://a.org"]]);
    }

    /// At most three per plan, over every retrieve task of the reply; the rest is warned about.
    #[test]
    fn more_than_three_urls_are_refused() {
        let reply = "# «retrieve»\nhttps://1.org\nhttps://2.org\n\n# «retrieve»\nhttps://3.org\nhttps://4.org\nhttps://5.org";
        let (got, warnings) = urls(reply, &allowed());
        assert_eq!(
            got,
            [
                vec!["https://1.org", "https://2.org"],
                vec!["https://3.org"]
            ]
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings.iter().all(|w| w.contains("at most 3 URLs")),
            "{warnings:?}"
        );
    }

    /// Only http and https (and `file:` names, which the handler checks); a persona without
    /// `# Allow Retrieve` gets nothing.
    #[test]
    fn schemes_and_the_switch_are_enforced() {
        let reply =
            "# «retrieve»\nftp://a.org\njavascript:alert(1)\nfile:///etc/passwd\nhttps://ok.org";
        let (got, warnings) = urls(reply, &allowed());
        assert_eq!(
            got,
            [["file:///etc/passwd", "https://ok.org"]],
            "{warnings:?}"
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        let (got, warnings) = urls("# «retrieve»\nhttps://ok.org", &ParseOptions::default());
        assert!(got.is_empty());
        assert!(warnings[0].contains("not enabled"), "{warnings:?}");
        let (got, _) = urls(
            r#"[{"kind": "retrieve", "urls": ["https://ok.org"]}]"#,
            &ParseOptions::default(),
        );
        assert!(got.is_empty());
    }
}
