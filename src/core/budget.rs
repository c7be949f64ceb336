//! Spending caps as data: a daily cap in tokens or in (estimated) US dollars, per persona
//! (`# Daily Budget`) and for the daemon (`run --daily-budget`), and how far a day's spend is
//! into it: under, past 80% (the owner is told once), or reached (planning stops for the
//! day). The day is the UTC day the usage files count in. Pure: the LLM layer sums the spend,
//! the scheduler holds planning.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A daily cap: tokens (prompt and output together), dollars, or both (whichever is reached
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct DailyCap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
}

/// One day's spend so far.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    /// Prompt and output tokens.
    pub tokens: u64,
    /// Estimated with the price table, over the models that have a price.
    pub usd: f64,
    /// Of `tokens`, those of models without a known price (not in `usd`).
    pub unpriced_tokens: u64,
}

/// How far a spend is into its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    Under,
    /// 80% or more: the owner is told once a day.
    Warn,
    /// 100%: planning stops until the next (UTC) day or the owner's `/resume`.
    Reached,
}

/// The share of a cap past which the owner is warned.
pub const WARN_SHARE: f64 = 0.8;

impl DailyCap {
    /// The largest share of the cap `spend` has used (tokens or dollars).
    pub fn share(&self, spend: &Spend) -> f64 {
        let tokens = self
            .tokens
            .map_or(0.0, |cap| spend.tokens as f64 / cap.max(1) as f64);
        let usd = match self.usd {
            Some(cap) if cap > 0.0 => spend.usd / cap,
            _ => 0.0,
        };
        tokens.max(usd)
    }

    pub fn level(&self, spend: &Spend) -> Level {
        let share = self.share(spend);
        if share >= 1.0 {
            Level::Reached
        } else if share >= WARN_SHARE {
            Level::Warn
        } else {
            Level::Under
        }
    }
}

impl fmt::Display for DailyCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.tokens, self.usd) {
            (Some(t), Some(u)) => write!(f, "{t} tokens or ${u:.2} a day"),
            (Some(t), None) => write!(f, "{t} tokens a day"),
            (None, Some(u)) => write!(f, "${u:.2} a day"),
            (None, None) => f.write_str("no cap"),
        }
    }
}

impl fmt::Display for Spend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} tokens, about ${:.4}", self.tokens, self.usd)?;
        if self.unpriced_tokens > 0 {
            write!(
                f,
                " ({} tokens of models without a known price not in the dollars)",
                self.unpriced_tokens
            )?;
        }
        Ok(())
    }
}

impl FromStr for DailyCap {
    type Err = crate::core::Invalid;

    /// `200000 tokens`, `200k tokens`, `1.5M tokens`, `$0.50`, `0.5 usd`, or both separated
    /// by a comma or `or` (`200k tokens, $1`).
    fn from_str(s: &str) -> Result<DailyCap, Self::Err> {
        let mut cap = DailyCap::default();
        let lower = s.trim().to_ascii_lowercase().replace(" or ", ",");
        for part in lower
            .split([',', ';', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            let bad = || {
                crate::core::Invalid(format!(
                    "`{part}` is not a cap: write `200000 tokens`, `200k tokens` or `$0.50` (a day)"
                ))
            };
            let part = part
                .trim_end_matches("a day")
                .trim_end_matches("per day")
                .trim_end_matches("/day")
                .trim();
            if let Some(rest) = part.strip_prefix('$').or_else(|| {
                part.strip_suffix("usd")
                    .or_else(|| part.strip_suffix("dollars"))
            }) {
                let usd: f64 = rest.trim().parse().map_err(|_| bad())?;
                if !usd.is_finite() || usd <= 0.0 {
                    return Err(bad());
                }
                cap.usd = Some(usd);
            } else if let Some(rest) = part.strip_suffix("tokens") {
                let n = rest.trim();
                let (num, mult) = match n.chars().last() {
                    Some('k') => (&n[..n.len() - 1], 1e3),
                    Some('m') => (&n[..n.len() - 1], 1e6),
                    _ => (n, 1.0),
                };
                let v: f64 = num.trim().replace('_', "").parse().map_err(|_| bad())?;
                let tokens = v * mult;
                if !(1.0..=1e15).contains(&tokens) {
                    return Err(bad());
                }
                cap.tokens = Some(tokens.round() as u64);
            } else {
                return Err(bad());
            }
        }
        if cap.tokens.is_none() && cap.usd.is_none() {
            return Err(crate::core::Invalid::from(
                "empty cap: write `200000 tokens` or `$0.50`",
            ));
        }
        Ok(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_parse_in_tokens_dollars_or_both() {
        let c: Result<DailyCap, _> = "200k tokens".parse();
        assert_eq!(c.ok().and_then(|c| c.tokens), Some(200_000));
        let c: Result<DailyCap, _> = "$0.50".parse();
        assert_eq!(c.ok().and_then(|c| c.usd), Some(0.5));
        let c: Result<DailyCap, _> = "1.5M tokens or 2 usd".parse();
        assert_eq!(
            c.ok(),
            Some(DailyCap {
                tokens: Some(1_500_000),
                usd: Some(2.0)
            })
        );
        for bad in ["", "lots", "-1 tokens", "$0", "5 apples"] {
            assert!(bad.parse::<DailyCap>().is_err(), "{bad}");
        }
    }

    #[test]
    fn levels_warn_at_80_percent_and_stop_at_100() {
        let cap = DailyCap {
            tokens: Some(1000),
            usd: Some(1.0),
        };
        let at = |tokens, usd| Spend {
            tokens,
            usd,
            unpriced_tokens: 0,
        };
        assert_eq!(cap.level(&at(799, 0.1)), Level::Under);
        assert_eq!(cap.level(&at(800, 0.1)), Level::Warn);
        assert_eq!(cap.level(&at(10, 0.85)), Level::Warn);
        assert_eq!(cap.level(&at(1000, 0.1)), Level::Reached);
        assert_eq!(cap.level(&at(10, 1.2)), Level::Reached);
        // Tokens at an unknown price never reach a dollar cap by themselves; the priced ones
        // still do.
        let dollars = DailyCap {
            tokens: None,
            usd: Some(1.0),
        };
        let spend = |usd| Spend {
            tokens: 10_000_000,
            usd,
            unpriced_tokens: 9_000_000,
        };
        assert_eq!(dollars.level(&spend(0.0)), Level::Under);
        assert_eq!(dollars.level(&spend(1.0)), Level::Reached);
    }
}
