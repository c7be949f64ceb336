//! What people read of the usage totals: the prices that turn them into an estimated cost
//! ([`PriceTable`]: built-in list prices, or a price file's taking precedence) and the table
//! `personad state usage` prints ([`render`], [`state_usage`]: one line per agent, model,
//! kind and day, with a `CHARACTERS` column when speech was used, the estimated total and the
//! cost per kind). Called by `usage` (the meter's
//! spend and `/status` line), `personad state usage` and the console; it reads the usage
//! files through `usage_files` and never writes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::usage_files::{UsageRow, read_totals};
use crate::adapters::store::{self, StateDir, StoreError};
use crate::core::call_kind::CallKind;

/// Why a price file is unusable; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    #[error(transparent)]
    Read(#[from] StoreError),
    #[error("{}: no such file", .0.display())]
    Missing(PathBuf),
    #[error("{}: {source}", path.display())]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: the price of {model:?} must be non-negative numbers", path.display())]
    Negative { path: PathBuf, model: String },
}

/// US dollars per million tokens (and, for speech, per million characters).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    /// Cached input; the input price when absent.
    #[serde(default)]
    pub cached_input: Option<f64>,
    pub output: f64,
    /// Per million characters spoken (speech models); a row with characters and a model
    /// without this price has no cost estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub characters: Option<f64>,
}

/// Prices by model id (exact, or a prefix ending in `*`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PriceTable {
    entries: Vec<(String, Price)>,
}

impl PriceTable {
    /// A few common models' list prices at the time of writing: estimates only; override them
    /// with a price file.
    pub(crate) fn builtin() -> PriceTable {
        let p = |input, cached: f64, output| Price {
            input,
            cached_input: Some(cached),
            output,
            characters: None,
        };
        // Speech per million characters: OpenAI's list prices for tts-1 and tts-1-hd; for
        // the token-billed TTS models, their per-minute estimate at about 1000 characters a
        // minute (gpt-4o-mini-tts ~$0.015/min; Gemini's audio at 25 tokens/s).
        let speech = |usd: f64| Price {
            input: 0.0,
            cached_input: None,
            output: 0.0,
            characters: Some(usd),
        };
        PriceTable {
            entries: vec![
                ("gpt-4o-mini-tts*".into(), speech(15.0)),
                ("tts-1-hd*".into(), speech(30.0)),
                ("tts-1*".into(), speech(15.0)),
                ("gemini-2.5-flash-preview-tts*".into(), speech(16.0)),
                ("gemini-2.5-pro-preview-tts*".into(), speech(32.0)),
                ("espeak-ng".into(), speech(0.0)),
                ("gemini-flash-latest".into(), p(0.30, 0.075, 2.50)),
                ("gemini-2.5-flash-lite*".into(), p(0.10, 0.025, 0.40)),
                ("gemini-2.5-flash*".into(), p(0.30, 0.075, 2.50)),
                ("gemini-2.5-pro*".into(), p(1.25, 0.31, 10.0)),
                ("gpt-5-mini*".into(), p(0.25, 0.025, 2.00)),
                ("gpt-5-nano*".into(), p(0.05, 0.005, 0.40)),
                ("gpt-5*".into(), p(1.25, 0.125, 10.0)),
                ("grok-4-fast*".into(), p(0.20, 0.05, 0.50)),
            ],
        }
    }

    /// A JSON object `{"model or prefix*": {"input": …, "cached_input": …, "output": …,
    /// "characters": …}}` (USD per million tokens, and per million characters for speech);
    /// its entries come before the built-in ones.
    pub(crate) fn with_file(path: &Path) -> Result<PriceTable, PriceError> {
        let text = store::read_operator_file(path)?
            .ok_or_else(|| PriceError::Missing(path.to_path_buf()))?;
        let map: BTreeMap<String, Price> =
            serde_json::from_str(&text).map_err(|source| PriceError::Json {
                path: path.to_path_buf(),
                source,
            })?;
        for (model, price) in &map {
            let ok = [
                price.input,
                price.output,
                price.cached_input.unwrap_or(0.0),
                price.characters.unwrap_or(0.0),
            ]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0);
            if !ok {
                return Err(PriceError::Negative {
                    path: path.to_path_buf(),
                    model: model.clone(),
                });
            }
        }
        let mut table = PriceTable {
            entries: map.into_iter().collect(),
        };
        table.entries.extend(PriceTable::builtin().entries);
        Ok(table)
    }

    /// The price of `model`: the first exact or prefix (`name*`) match.
    pub fn price(&self, model: &str) -> Option<Price> {
        let model = model.rsplit_once(':').map_or(model, |(p, m)| {
            if crate::core::llm::ProviderKind::parse(p).is_some() {
                m
            } else {
                model
            }
        });
        let model = model.rsplit('/').next().unwrap_or(model);
        self.entries
            .iter()
            .find(|(pattern, _)| match pattern.strip_suffix('*') {
                Some(prefix) => model.starts_with(prefix),
                None => pattern == model,
            })
            .map(|(_, p)| *p)
    }

    /// Estimated cost of a row in US dollars, when the model has a price.
    pub fn cost(&self, row: &UsageRow) -> Option<f64> {
        // Fetching a page costs nothing a provider bills.
        if row.kind == CallKind::Retrieve {
            return Some(0.0);
        }
        let p = self.price(&row.model)?;
        let cached = row.cached_tokens.min(row.prompt_tokens) as f64;
        let fresh = row.prompt_tokens as f64 - cached;
        let cached_price = p.cached_input.unwrap_or(p.input);
        let spoken = match (row.characters, p.characters) {
            (0, _) => 0.0,
            (n, Some(usd)) => n as f64 * usd,
            (_, None) => return None,
        };
        Some(
            (fresh * p.input
                + cached * cached_price
                + row.output_tokens as f64 * p.output
                + spoken)
                / 1e6,
        )
    }
}

/// The table `personad state usage` prints: one line per agent, model, kind and day, then
/// the estimated total and, when more than one kind was used, the requests and cost per kind.
pub fn render(rows: &[UsageRow], prices: &PriceTable) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        out.push_str("no LLM usage recorded yet\n");
        return out;
    }
    // Speech is counted in characters, not tokens: a column of its own when there is any.
    let spoken = rows.iter().any(|r| r.characters > 0);
    let chars = |value: &dyn std::fmt::Display| {
        if spoken {
            format!(" {value:>10}")
        } else {
            String::new()
        }
    };
    // Web fetches (`retrieve`) are counted in bytes: a column of its own when there is any.
    let fetched = rows.iter().any(|r| r.bytes > 0);
    let bytes = |value: &dyn std::fmt::Display| {
        if fetched {
            format!(" {value:>10}")
        } else {
            String::new()
        }
    };
    let _ = writeln!(
        out,
        "{:<16} {:<28} {:<8} {:<10} {:>8} {:>9} {:>12} {:>12} {:>10}{}{} {:>10}",
        "AGENT",
        "MODEL",
        "KIND",
        "DAY",
        "REQUESTS",
        "DISCARDED",
        "PROMPT",
        "CACHED",
        "OUTPUT",
        chars(&"CHARACTERS"),
        bytes(&"BYTES"),
        "COST_USD"
    );
    let mut total = 0.0;
    let mut unpriced = false;
    // kind → (requests, cost, unpriced)
    let mut by_kind: BTreeMap<CallKind, (u64, f64, bool)> = BTreeMap::new();
    for r in rows {
        let cost = prices.cost(r);
        let k = by_kind.entry(r.kind).or_default();
        k.0 = k.0.saturating_add(r.requests);
        match cost {
            Some(c) => {
                total += c;
                k.1 += c;
            }
            None => {
                unpriced = true;
                k.2 = true;
            }
        }
        let shown = cost.map_or_else(|| "?".to_owned(), |c| format!("{c:.4}"));
        let _ = writeln!(
            out,
            "{:<16} {:<28} {:<8} {:<10} {:>8} {:>9} {:>12} {:>12} {:>10}{}{} {:>10}",
            r.agent,
            r.model,
            r.kind.as_str(),
            r.day,
            r.requests,
            r.discarded,
            r.prompt_tokens,
            r.cached_tokens,
            r.output_tokens,
            chars(&r.characters),
            bytes(&r.bytes),
            shown
        );
    }
    let _ = writeln!(
        out,
        "estimated total: {total:.4} USD{}",
        if unpriced {
            " (models marked ? have no price: add them to a price file)"
        } else {
            ""
        }
    );
    if by_kind.len() > 1 {
        let parts: Vec<String> = by_kind
            .iter()
            .map(|(kind, (n, usd, unknown))| {
                let more = if *unknown { "+?" } else { "" };
                format!("{kind} {n} request(s) {usd:.4}{more} USD")
            })
            .collect();
        let _ = writeln!(out, "by kind: {}", parts.join(", "));
    }
    out
}

/// `personad state usage`: the saved totals (of one agent, or all) as a table. Unreadable
/// usage files are named, not fatal; an unreadable price file is an error.
pub fn state_usage(
    state: &StateDir,
    agent: Option<&str>,
    prices: Option<&Path>,
) -> Result<String, PriceError> {
    let table = match prices {
        Some(path) => PriceTable::with_file(path)?,
        None => PriceTable::builtin(),
    };
    let (mut rows, problems) = read_totals(state);
    if let Some(agent) = agent {
        rows.retain(|r| r.agent == agent);
    }
    rows.sort_by(|a, b| {
        (&a.agent, &a.day, &a.model, a.kind).cmp(&(&b.agent, &b.day, &b.model, b.kind))
    });
    let mut text = render(&rows, &table);
    for (path, why) in problems {
        let _ = writeln!(text, "unreadable: {}: {why}", path.display());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::{PriceTable, UsageRow};

    #[test]
    fn prices_match_exact_and_prefix_entries_and_cost_cached_tokens_less() {
        let t = PriceTable::builtin();
        assert!(t.price("gemini-2.5-flash-preview-09-2025").is_some());
        assert!(t.price("openrouter:openai/gpt-5-mini").is_some());
        assert!(t.price("llama3.2").is_none());
        let row = UsageRow {
            model: "gpt-5-mini".into(),
            prompt_tokens: 1_000_000,
            cached_tokens: 500_000,
            output_tokens: 100_000,
            ..UsageRow::default()
        };
        let cost = t.cost(&row).unwrap_or(f64::NAN);
        // 0.5 M × 0.25 + 0.5 M × 0.025 + 0.1 M × 2.00 = 0.125 + 0.0125 + 0.2
        assert!((cost - 0.3375).abs() < 1e-9, "{cost}");
    }

    #[test]
    fn speech_is_priced_by_the_character_and_tts_models_before_their_families() {
        let t = PriceTable::builtin();
        let spoken = |model: &str| UsageRow {
            model: model.into(),
            requests: 1,
            characters: 1_000_000,
            ..UsageRow::default()
        };
        let cost = |model: &str| t.cost(&spoken(model));
        assert_eq!(cost("gemini-2.5-flash-preview-tts"), Some(16.0));
        assert_eq!(cost("gpt-4o-mini-tts"), Some(15.0));
        assert_eq!(cost("espeak-ng"), Some(0.0));
        // A local server's voice has no price: its characters are not guessed at.
        assert_eq!(cost("kokoro"), None);
        // A chat model's row with characters has no character price either.
        assert_eq!(cost("gpt-5-mini"), None);
    }
}
